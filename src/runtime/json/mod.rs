//! Canonical JSON, the boundary check, the policy form, Go-style JSON encoding and the hashes
//! (spec sections 4.2, 4.6, 5). Everything that is hashed or stored as JSON passes through here.
//!
//! Files: `parse.rs` (a byte-level, non-recursive reader with Go decoder semantics),
//! `canon.rs` (the canonical and policy encoders), `check.rs` (the boundary check),
//! `gojson.rs` (Go `json.Marshal`-style output), `hash.rs` (the hashes), `members.rs` (a
//! strict, borrowed read of a document's top-level members, for scans).
//!
//! Malformed input: Go's decoder would fail where the reader here returns nothing; agentrt
//! then hashes the raw bytes (spec 5.3). So [`canonical_json`] returns malformed input
//! unchanged and [`content_hash`] is the SHA-256 of it. That includes input nested deeper than
//! Go's scanner allows (10,000 levels), so no input can exhaust the stack.

use thiserror::Error;

mod canon;
mod check;
pub mod gojson;
mod hash;
pub(crate) mod members;
mod parse;
#[cfg(test)]
mod tests;

use canon::Escape;
pub use check::go_quote;

/// Why consumer JSON was refused at the boundary (spec 5.2). `Display` is the bare reason
/// ("nested deeper than 256 levels", "not valid UTF-8", ...); callers add their prefix
/// (`agentrt: canonical JSON: `, `agentrt: policy JSON: `).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum JsonError {
    /// More than 256 levels of `[`/`{` (check 1). Found before any parsing, so it is what a
    /// deeply nested value gets even when it is also malformed.
    #[error("nested deeper than 256 levels")]
    TooDeep,
    /// The bytes are not UTF-8 (check 2).
    #[error("not valid UTF-8")]
    InvalidUtf8,
    /// Not exactly one JSON value: malformed, empty, or followed by more data (check 3).
    #[error("not valid JSON")]
    Invalid,
    /// Holds the four hex digits as written.
    #[error("unpaired surrogate \\u{0}")]
    UnpairedSurrogate(String),
    /// The decoded key; `Display` quotes it as Go's `%q` does.
    #[error("duplicate key {}", check::go_quote(.0))]
    DuplicateKey(String),
    /// A number inside an array or object that Go's token decoder reads as a float64 and
    /// finds out of range (spec 5.2 item 5); the text is Go's `UnmarshalTypeError`.
    #[error("json: cannot unmarshal number {0} into Go value of type float64")]
    NumberOutOfRange(String),
    /// Holds the first 24 characters of the literal.
    #[error("number {0}... is longer than 10000 characters")]
    NumberTooLong(String),
    /// Holds the whole number literal: its exponent, with sign and leading zeros dropped, has
    /// more than 5 digits or is over 10,000 (check 6).
    #[error("number {0} has an exponent beyond ±10000")]
    ExponentTooLarge(String),
}

/// The lossy canonical encoder used for hashing (spec 5.1): byte-identical to Go's
/// `json.Marshal` of the `UseNumber`-decoded first value; empty or blank input is `null`.
///
/// Where Go's decoder would fail (malformed or truncated JSON, nesting past 10,000 levels) the
/// raw bytes are returned unchanged, so that [`content_hash`] hashes them (spec 5.3).
pub fn canonical_json(raw: &[u8]) -> Vec<u8> {
    try_canonical(raw).unwrap_or_else(|| raw.to_vec())
}

/// [`canonical_json`], or `None` where Go's decoder would fail.
pub fn try_canonical(raw: &[u8]) -> Option<Vec<u8>> {
    canon::try_form(raw, Escape::Go)
}

/// Hex SHA-256 of [`canonical_json`].
pub fn content_hash(raw: &[u8]) -> String {
    sha256_hex(&canonical_json(raw))
}

/// The boundary check (spec 5.2), in the spec's order.
pub fn check_json(raw: &[u8]) -> Result<(), JsonError> {
    check::check(raw).map(|_| ())
}

/// The boundary check's first step alone: input nested deeper than 256 levels is refused,
/// valid JSON or not (what may then be decoded recursively).
pub(crate) fn depth_within_bound(raw: &[u8]) -> Result<(), JsonError> {
    check::depth_within_bound(raw)
}

/// JSON text with each escaped lone surrogate (`\ud83d` not followed by an escaped low
/// one, or a low one alone) written `\ufffd`, as Go's `encoding/json` decodes it (one U+FFFD),
/// so that one stray escape (in a model's prose) does not make the whole text undecodable
/// (serde refuses it). Escaped pairs, `\\u…` (an escaped backslash) and everything outside
/// strings are left as they are; the input is handed back borrowed exactly when nothing
/// changes, i.e. when it holds no lone surrogate escape.
pub fn lone_surrogates_as_fffd(body: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    fn hex4(b: &[u8]) -> Option<u16> {
        let s = std::str::from_utf8(b.get(..4)?).ok()?;
        u16::from_str_radix(s, 16).ok()
    }
    let surrogate = |at: usize| -> Option<u16> {
        (body.get(at) == Some(&b'\\') && body.get(at + 1) == Some(&b'u'))
            .then(|| hex4(&body[at + 2..]))
            .flatten()
            .filter(|u| (0xD800..=0xDFFF).contains(u))
    };
    let mut out: Option<Vec<u8>> = None;
    let (mut i, mut inside) = (0, false);
    while i < body.len() {
        let c = body[i];
        if !inside {
            inside = c == b'"';
        } else if c == b'"' {
            inside = false;
        } else if c == b'\\' {
            if let Some(u) = surrogate(i) {
                let paired = (0xD800..=0xDBFF).contains(&u)
                    && surrogate(i + 6).is_some_and(|l| (0xDC00..=0xDFFF).contains(&l));
                if paired {
                    if let Some(o) = out.as_mut() {
                        o.extend_from_slice(&body[i..i + 12]);
                    }
                    i += 12;
                } else {
                    out.get_or_insert_with(|| body[..i].to_vec())
                        .extend_from_slice(b"\\ufffd");
                    i += 6;
                }
                continue;
            }
            // Any other escape: copy it and the byte it escapes.
            let end = (i + 2).min(body.len());
            if let Some(o) = out.as_mut() {
                o.extend_from_slice(&body[i..end]);
            }
            i = end;
            continue;
        }
        if let Some(o) = out.as_mut() {
            o.push(c);
        }
        i += 1;
    }
    match out {
        Some(o) => std::borrow::Cow::Owned(o),
        None => std::borrow::Cow::Borrowed(body),
    }
}

/// Whether `raw` (valid JSON or not) is nested at most `max` levels deep, counting `[` and `{`
/// outside strings as the boundary check's first step does (without decoding anything).
pub fn depth_at_most(raw: &[u8], max: i64) -> bool {
    check::depth_at_most(raw, max)
}

/// `check_json` then [`canonical_json`] (agentrt's exported `CanonicalJSON`).
pub fn checked_canonical_json(raw: &[u8]) -> Result<Vec<u8>, JsonError> {
    let doc = check::check(raw)?;
    Ok(canon::encode(&doc, raw, Escape::Go))
}

/// `check_json` then [`content_hash`], reading the input once: for a value that passes the
/// check, its canonical form from the checked document is the one [`canonical_json`] gives.
pub fn checked_content_hash(raw: &[u8]) -> Result<String, JsonError> {
    checked_canonical_json(raw).map(|c| sha256_hex(&c))
}

/// The policy form (spec 4.6): canonical traversal with HTML escaping off; refuses what
/// `check_json` refuses.
pub fn policy_json(raw: &[u8]) -> Result<Vec<u8>, JsonError> {
    let doc = check::check(raw)?;
    Ok(canon::encode(&doc, raw, Escape::Minimal))
}

/// The policy form without the boundary check (used for tool schemas: a repeated key keeps
/// its last value). Empty input is `null`; malformed input is returned unchanged, as
/// [`canonical_json`] does.
pub fn policy_form_unchecked(raw: &[u8]) -> Vec<u8> {
    canon::try_form(raw, Escape::Minimal).unwrap_or_else(|| raw.to_vec())
}

/// The policy form of the first value, and whether anything but whitespace follows it; `None`
/// where Go's decoder would fail. Empty or blank input is `null`. (The MCP pin's canonical
/// schema starts from this form.)
pub fn policy_form_first(raw: &[u8]) -> Option<(Vec<u8>, bool)> {
    if canon::is_blank(raw) {
        return Some((b"null".to_vec(), false));
    }
    let (doc, end) = parse::parse_first(raw)?;
    let trailing = !raw.get(end..)?.iter().all(|&c| parse::is_ws(c));
    Some((canon::encode(&doc, raw, Escape::Minimal), trailing))
}

/// The event-chain hash (spec 5.3).
pub fn event_hash(
    prev: &str,
    seq: i64,
    run_id: &str,
    step_id: &str,
    at: &str,
    kind: &str,
    payload: &str,
) -> String {
    event_hash_bytes(
        prev,
        seq,
        run_id.as_bytes(),
        step_id.as_bytes(),
        at,
        kind,
        payload,
    )
}

/// [`event_hash`] over ids as stored (a run or step id need not be UTF-8; the chain hashes
/// the stored bytes).
pub fn event_hash_bytes(
    prev: &str,
    seq: i64,
    run_id: &[u8],
    step_id: &[u8],
    at: &str,
    kind: &str,
    payload: &str,
) -> String {
    let seq = seq.to_string();
    hash::event_hash([
        prev.as_bytes(),
        seq.as_bytes(),
        run_id,
        step_id,
        at.as_bytes(),
        kind.as_bytes(),
        payload.as_bytes(),
    ])
}

/// Hex SHA-256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hash::sha256_hex(bytes)
}

/// The approval hash (spec 4.2) of a kind, the capability and presentation as given (empty
/// means `{}`) and the Go JSON of the `ToolRequest` (`run_id`, `step_id`, `spec`, `args`).
/// A part that is not valid JSON is an error, never a stand-in hash.
pub fn approval_hash(
    kind: &str,
    capability: &[u8],
    presentation: &[u8],
    request_go_json: &[u8],
) -> Result<String, JsonError> {
    hash::approval_hash(kind, capability, presentation, request_go_json)
}

/// The tool spec hash (spec 5.3): hex SHA-256 of the canonical JSON of the Go-JSON `ToolSpec`.
pub fn tool_spec_hash(spec_go_json: &[u8]) -> String {
    content_hash(spec_go_json)
}
