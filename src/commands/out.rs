//! Where command output goes, and the JSON shapes shared by several commands.

use std::io::Write;

use serde_json::{Map, Value, json};

use super::CommandError;
use crate::runtime::types::{Approval, Run, Timestamp};

/// Standard output (or a buffer in tests). A failed write is an error (exit 1), so a reader
/// that went away never makes the command claim success.
pub struct Out {
    w: Box<dyn Write>,
}

impl Out {
    pub fn stdout() -> Out {
        Out {
            w: Box::new(std::io::BufWriter::new(std::io::stdout())),
        }
    }

    pub fn raw(&mut self, s: &str) -> Result<(), CommandError> {
        self.w
            .write_all(s.as_bytes())
            .map_err(|e| CommandError::Failed(format!("writing output: {e}")))
    }

    pub fn line(&mut self, s: &str) -> Result<(), CommandError> {
        self.raw(s)?;
        self.raw("\n")
    }

    /// One JSON document, indented.
    pub fn json(&mut self, v: &Value, raws: &Raws) -> Result<(), CommandError> {
        let s = raws.render(v, true)?;
        self.line(&s)
    }

    /// One compact JSON line (JSON Lines).
    pub fn jsonl(&mut self, v: &Value, raws: &Raws) -> Result<(), CommandError> {
        let s = raws.render(v, false)?;
        self.line(&s)
    }

    pub fn flush(&mut self) -> Result<(), CommandError> {
        self.w
            .flush()
            .map_err(|e| CommandError::Failed(format!("writing output: {e}")))
    }
}

/// One pretty JSON document whose one array is written a page at a time: the same bytes
/// [`Out::json`] writes for the whole document (`{head fields, "key": [items], tail fields}`),
/// so `--limit 0 --json` stays one value a script reads, however many pages it takes, without
/// holding every row at once.
pub struct JsonArray {
    /// Items written so far.
    items: usize,
}

impl JsonArray {
    /// Writes the document's opening: the fields of the object `head` (in order), then `key`
    /// and the array's opening bracket.
    pub fn begin(
        out: &mut Out,
        head: &Value,
        raws: &Raws,
        key: &str,
    ) -> Result<JsonArray, CommandError> {
        let head = raws.render(head, true)?;
        // `{\n  "a": 1\n}` → `{\n  "a": 1,\n  "key": [`; `{}` → `{\n  "key": [`.
        let open = match head.strip_suffix("\n}") {
            Some(fields) => format!("{fields},\n"),
            None => "{\n".to_string(),
        };
        let key = serde_json::to_string(key)
            .map_err(|e| CommandError::Failed(format!("encoding JSON: {e}")))?;
        out.raw(&format!("{open}  {key}: ["))?;
        Ok(JsonArray { items: 0 })
    }

    /// Writes one item of the array.
    pub fn push(&mut self, out: &mut Out, item: &Value, raws: &Raws) -> Result<(), CommandError> {
        let text = raws.render(item, true)?;
        out.raw(if self.items == 0 { "\n" } else { ",\n" })?;
        let indented: Vec<String> = text.lines().map(|l| format!("    {l}")).collect();
        out.raw(&indented.join("\n"))?;
        self.items += 1;
        Ok(())
    }

    /// Closes the array, writes the fields of the object `tail` (in order) and closes the
    /// document.
    pub fn finish(self, out: &mut Out, tail: &Value, raws: &Raws) -> Result<(), CommandError> {
        out.raw(if self.items == 0 { "]" } else { "\n  ]" })?;
        let tail = raws.render(tail, true)?;
        match tail.strip_prefix('{').filter(|t| t.starts_with('\n')) {
            Some(fields) => out.line(&format!(",{fields}")),
            None => out.line("\n}"),
        }
    }
}

/// RFC 3339 text, or nothing for the zero time.
/// A text field that is left out when empty (Go's `omitempty`).
pub fn text_field(m: &mut Map<String, Value>, key: &str, v: &str) {
    if !v.is_empty() {
        m.insert(key.into(), json!(v));
    }
}

fn time_field(m: &mut Map<String, Value>, key: &str, t: &Timestamp) {
    if !t.is_zero() {
        m.insert(key.into(), json!(t.to_rfc3339()));
    }
}

/// An id field (decision 0012): the id as a JSON string as agentrt's `-json` writes it (Go
/// replaces each byte that is not UTF-8 by U+FFFD), and, only when the stored id is not UTF-8,
/// `<key>_hex` with its stored bytes in lowercase hex, so two ids that differ only in invalid
/// bytes stay apart and a program can name the run exactly.
pub fn id_field(m: &mut Map<String, Value>, key: &str, bytes: &[u8]) {
    m.insert(key.into(), json!(crate::runtime::types::lossy(bytes)));
    if std::str::from_utf8(bytes).is_err() {
        m.insert(format!("{key}_hex"), json!(hex::encode(bytes)));
    }
}

/// A run as `runs --json` and `show --json` print it (agentrt's RunSummary, spec 13).
pub fn summary_json(r: &Run, pending_approval_id: &[u8]) -> Value {
    let mut m = Map::new();
    id_field(&mut m, "id", r.id_bytes());
    m.insert("goal".into(), json!(r.goal));
    m.insert("status".into(), json!(r.status.as_str()));
    text_field(&mut m, "reason", &r.reason);
    text_field(&mut m, "reason_detail", &r.reason_detail);
    m.insert("steps".into(), json!(r.step_count));
    m.insert("created_at".into(), json!(r.created_at.to_rfc3339()));
    time_field(&mut m, "finished_at", &r.finished_at);
    if !pending_approval_id.is_empty() {
        id_field(&mut m, "pending_approval_id", pending_approval_id);
    }
    if r.model_calls != 0 {
        m.insert("model_calls".into(), json!(r.model_calls));
    }
    if r.input_tokens != 0 || r.output_tokens != 0 || r.cached_input_tokens != 0 {
        let mut u = Map::new();
        u.insert("input_tokens".into(), json!(r.input_tokens));
        u.insert("output_tokens".into(), json!(r.output_tokens));
        if r.cached_input_tokens != 0 {
            u.insert("cached_input_tokens".into(), json!(r.cached_input_tokens));
        }
        m.insert("usage".into(), Value::Object(u));
    }
    if r.estimated_cost_micros != 0 {
        m.insert(
            "estimated_cost_micros".into(),
            json!(r.estimated_cost_micros),
        );
    }
    if !r.lease_owner.is_empty() {
        m.insert("lease_owner".into(), json!(r.lease_owner));
        time_field(&mut m, "lease_expires_at", &r.lease_expires_at);
        if super::text::lease_ran_out(r) {
            m.insert("lease_expired".into(), json!(true));
        }
    }
    text_field(&mut m, "decode_error", &r.decode_error);
    Value::Object(m)
}

/// Stored JSON kept exactly as stored (number literals and key order included) inside a
/// document built as a `Value`: the value holds a placeholder that [`Raws::render`] replaces.
pub struct Raws {
    texts: Vec<String>,
    /// Random per document, in every placeholder, so that no stored string can be one.
    nonce: u64,
}

impl Default for Raws {
    fn default() -> Self {
        Raws {
            texts: Vec::new(),
            nonce: rand::random(),
        }
    }
}

/// Stored JSON nested deeper than this is emitted as a string: the document around it then
/// stays within serde_json's default 128 levels (jq allows 256, Python about 1 000).
pub const EMBED_DEPTH: i64 = 100;

impl Raws {
    /// Puts stored JSON text under `key` (see [`Raws::slot`]); when it stays a string (not
    /// strict JSON), `invalid_<key>: true` says so, so that it is not read as a stored JSON
    /// string.
    pub fn put(&mut self, m: &mut Map<String, Value>, key: &str, text: &str) {
        let v = self.slot(text);
        let invalid = matches!(&v, Value::String(_)) && !self.is_placeholder(&v);
        m.insert(key.into(), v);
        if invalid {
            m.insert(format!("invalid_{key}"), json!(true));
        }
    }

    fn placeholder(&self, i: usize) -> String {
        format!("\u{0}countersign-raw-{:016x}-{i}\u{0}", self.nonce)
    }

    fn is_placeholder(&self, v: &Value) -> bool {
        matches!(v, Value::String(s) if self.texts.len().checked_sub(1).is_some_and(|i| *s == self.placeholder(i)))
    }

    /// A slot for stored JSON text; text that is not strict JSON stays a string (nothing is
    /// dropped), and empty text is `{}`. Strict: an escaped lone surrogate (`"\ud800"`, which
    /// Go reads as U+FFFD) is not, since strict parsers (jq, serde) refuse the whole line that
    /// holds one.
    pub fn slot(&mut self, text: &str) -> Value {
        let text = if text.is_empty() { "{}" } else { text };
        if !strict_json(text) {
            return Value::String(text.to_string());
        }
        self.texts.push(text.to_string());
        Value::String(self.placeholder(self.texts.len() - 1))
    }

    /// The document as text, placeholders replaced by the stored JSON.
    pub fn render(&self, doc: &Value, pretty: bool) -> Result<String, CommandError> {
        let enc = if pretty {
            serde_json::to_string_pretty(doc)
        } else {
            serde_json::to_string(doc)
        };
        let mut s = enc.map_err(|e| CommandError::Failed(format!("encoding JSON: {e}")))?;
        for (i, t) in self.texts.iter().enumerate() {
            let needle = format!("\"\\u0000countersign-raw-{:016x}-{i}\\u0000\"", self.nonce);
            s = s.replacen(&needle, t, 1);
        }
        Ok(terminal_safe_json(&s))
    }
}

/// Whether `text` is one JSON value every strict parser reads: nested at most [`EMBED_DEPTH`]
/// levels, valid JSON (serde's skipping reader) whose `\u` escapes pair every surrogate,
/// which that reader does not check.
fn strict_json(text: &str) -> bool {
    crate::runtime::json::depth_at_most(text.as_bytes(), EMBED_DEPTH)
        && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
        && matches!(
            crate::runtime::json::lone_surrogates_as_fffd(text.as_bytes()),
            std::borrow::Cow::Borrowed(_)
        )
}

/// Valid JSON text with every character a terminal may act on or hide (C1 controls, bidi
/// controls, other format and default-ignorable characters, line and paragraph separators)
/// written as a `\u` escape. Such characters can only occur inside strings (JSON's structure
/// is ASCII), and never right after an escaping backslash, so each string keeps its value.
pub fn terminal_safe_json(s: &str) -> String {
    if !s.chars().any(crate::safetext::json_escapes) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if crate::safetext::json_escapes(c) {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// An approval as `--json` prints it (spec 2's Approval JSON).
pub fn approval_json(a: &Approval, raws: &mut Raws) -> Value {
    let mut m = Map::new();
    id_field(&mut m, "id", a.id_bytes());
    id_field(&mut m, "run_id", a.run_id_bytes());
    id_field(&mut m, "step_id", a.step_id_bytes());
    m.insert("kind".into(), json!(a.kind));
    raws.put(&mut m, "capability", &a.capability);
    raws.put(&mut m, "presentation", &a.presentation);
    raws.put(&mut m, "request", &a.request_json);
    m.insert("hash".into(), json!(a.hash));
    m.insert("status".into(), json!(a.status.as_str()));
    m.insert("created_at".into(), json!(a.created_at.to_rfc3339()));
    time_field(&mut m, "expires_at", &a.expires_at);
    time_field(&mut m, "decided_at", &a.decided_at);
    text_field(&mut m, "decided_by", &a.decided_by);
    text_field(&mut m, "note", &a.note);
    text_field(&mut m, "decode_error", &a.decode_error);
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_json_with_a_lone_surrogate_escape_stays_a_string() {
        for kept in [
            r#"{"a":"\ud83d\ude00"}"#,
            r#"{"a":"\\ud800"}"#,
            r#"{"a":"\u00e9\n","b":1e999}"#,
            r#"["\uD83D\uDE00x"]"#,
        ] {
            let mut raws = Raws::default();
            let doc = json!({ "p": raws.slot(kept) });
            let out = raws.render(&doc, false).unwrap();
            assert_eq!(
                out,
                format!("{{\"p\":{kept}}}"),
                "{kept} is embedded as stored"
            );
        }
        for lone in [
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00x"}"#,
            r#"{"a":"\ud83dx"}"#,
            r#"{"a":"\ud83d\n"}"#,
            r#"{"a":"\ud83d\ud83d"}"#,
            r#"{"a":"\ude00\ud83d"}"#,
            r#"{"\ud800":1}"#,
        ] {
            let mut raws = Raws::default();
            let doc = json!({ "p": raws.slot(lone) });
            let out = raws.render(&doc, false).unwrap();
            let back: Value = serde_json::from_str(&out).expect("strict JSON");
            assert_eq!(back["p"], json!(lone), "{lone} is kept whole as a string");
        }
    }

    /// A stored string shaped like a placeholder is not one: stored values never swap (found
    /// from outside: a goal of `\0countersign-raw-0\0` took the approval's capability).
    #[test]
    fn a_stored_string_never_stands_for_stored_json() {
        let mut raws = Raws::default();
        let forged = [
            "\u{0}countersign-raw-0\u{0}".to_string(),
            format!("\u{0}countersign-raw-{:016x}-0\u{0}", 0),
        ];
        let doc = json!({
            "goal": forged[0],
            "other": forged[1],
            "capability": raws.slot(r#"{"tool":"x"}"#),
        });
        let back: Value = serde_json::from_str(&raws.render(&doc, false).unwrap()).unwrap();
        assert_eq!(back["goal"], json!(forged[0]));
        assert_eq!(back["other"], json!(forged[1]));
        assert_eq!(back["capability"], json!({"tool": "x"}));
    }

    /// Stored JSON nested past [`EMBED_DEPTH`] is a string flagged `invalid_<key>`, so the
    /// document stays within serde_json's default 128 levels (found from outside: jq and
    /// Python refused a 5 000-deep presentation's whole `show --json`).
    #[test]
    fn stored_json_deeper_than_the_embed_depth_is_a_flagged_string() {
        let nest = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let mut raws = Raws::default();
        let mut m = Map::new();
        raws.put(&mut m, "shallow", &nest(EMBED_DEPTH as usize));
        raws.put(&mut m, "deep", &nest(EMBED_DEPTH as usize + 1));
        raws.put(&mut m, "text", "not json");
        raws.put(&mut m, "string", r#""not json""#);
        let doc = json!({ "a": { "b": Value::Object(m) } });
        let out = raws.render(&doc, false).unwrap();
        let back: Value = serde_json::from_str(&out).expect("serde's default depth reads it");
        let b = &back["a"]["b"];
        assert!(
            b["shallow"].is_array() && b.get("invalid_shallow").is_none(),
            "{b}"
        );
        assert_eq!(b["deep"], json!(nest(EMBED_DEPTH as usize + 1)));
        assert_eq!(b["invalid_deep"], true);
        assert_eq!(
            (&b["text"], &b["invalid_text"]),
            (&json!("not json"), &json!(true))
        );
        assert_eq!(b["string"], json!("not json"));
        assert!(
            b.get("invalid_string").is_none(),
            "a stored JSON string is not flagged"
        );
    }
}
