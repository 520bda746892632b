//! How the decision page reads a consumer's presentation (decision 0050): the title, the
//! target, the amount and the customer are members the consumer names by convention, looked
//! up in a documented list of keys, so a consumer names its target without adding a key to
//! presentations already hashed. Pure functions of the stored bytes; nothing here draws.
//!
//! A member named twice is read as Go's `encoding/json` reads it (the last one wins, as the
//! runtime decodes it) and flagged, so the page never shows one value while the raw fields
//! below show another without saying so.

use crate::safetext::{JsonNode, parse_json};

/// The one-line title a consumer gives the request.
pub const TITLE_KEYS: [&[u8]; 1] = [b"title"];
/// The thing the request acts on, first present wins (`order`: the example consumer's name
/// for it, kept so its approval hashes do not change).
pub const TARGET_KEYS: [&[u8]; 2] = [b"target", b"order"];
/// The amount at stake, an integer in the consumer's smallest unit.
pub const AMOUNT_KEYS: [&[u8]; 2] = [b"amount_cents", b"impact_cents"];
/// Who the request is for.
pub const CUSTOMER_KEYS: [&[u8]; 2] = [b"customer", b"customer_id"];

/// A presentation's top-level members, in stored order, duplicates kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Presented {
    pub members: Vec<(Vec<u8>, JsonNode)>,
}

impl Presented {
    /// The members of a presentation that is a JSON object; `None` for anything else.
    pub fn parse(raw: &[u8]) -> Option<Presented> {
        match parse_json(raw).ok()? {
            JsonNode::Object(members) => Some(Presented { members }),
            _ => None,
        }
    }

    /// The value of `key` as the runtime decodes it (the last occurrence).
    pub fn get(&self, key: &[u8]) -> Option<&JsonNode> {
        self.members
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Whether `key` occurs more than once.
    pub fn duplicated(&self, key: &[u8]) -> bool {
        self.members.iter().filter(|(k, _)| k == key).count() > 1
    }

    /// The first of `keys` present, with its value.
    pub fn first_of<'a>(&'a self, keys: &[&'static [u8]]) -> Option<(&'static [u8], &'a JsonNode)> {
        keys.iter().find_map(|k| self.get(k).map(|v| (*k, v)))
    }

    /// The title, when it is a string.
    pub fn title(&self) -> Option<&[u8]> {
        match self.first_of(&TITLE_KEYS)? {
            (_, JsonNode::String(s)) => Some(s),
            _ => None,
        }
    }

    /// The target member's key and value, when the presentation names one.
    pub fn target(&self) -> Option<(Vec<u8>, JsonNode)> {
        self.first_of(&TARGET_KEYS)
            .map(|(k, v)| (k.to_vec(), v.clone()))
    }

    /// The amount member's key and value, when it is an integer literal.
    pub fn amount(&self) -> Option<(Vec<u8>, i64)> {
        match self.first_of(&AMOUNT_KEYS)? {
            (k, JsonNode::Number(n)) => n.parse::<i64>().ok().map(|n| (k.to_vec(), n)),
            _ => None,
        }
    }
}

/// A value as one line of bytes: a string's content, a number's literal, `true`, `null`, or
/// `{...}` / `[...]` for a structure (shown whole in the raw fields).
pub fn scalar(v: &JsonNode) -> Vec<u8> {
    match v {
        JsonNode::String(s) => s.clone(),
        JsonNode::Number(n) => n.clone().into_bytes(),
        JsonNode::Bool(b) => b.to_string().into_bytes(),
        JsonNode::Null => b"null".to_vec(),
        JsonNode::Array(_) => b"[...]".to_vec(),
        JsonNode::Object(_) => b"{...}".to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_the_first_listed_key_and_a_repeated_key_reads_as_the_last() {
        let p = Presented::parse(br#"{"order":"o1","title":"a","title":"b","amount_cents":6500}"#)
            .unwrap();
        assert_eq!(
            p.target(),
            Some((b"order".to_vec(), JsonNode::String(b"o1".to_vec())))
        );
        assert_eq!(p.title(), Some(&b"b"[..]));
        assert!(p.duplicated(b"title"));
        assert_eq!(p.amount(), Some((b"amount_cents".to_vec(), 6500)));
        let p = Presented::parse(br#"{"order":"o1","target":"t1"}"#).unwrap();
        assert_eq!(p.target().unwrap().0, b"target".to_vec());
        assert!(Presented::parse(b"[1]").is_none());
        let p = Presented::parse(br#"{"amount_cents":"65"}"#).unwrap();
        assert_eq!(
            p.amount(),
            None,
            "an amount that is not an integer is not summed"
        );
    }
}
