//! Canonical JSON, the boundary check, the policy form, Go-style JSON encoding and the hashes
//! (spec sections 4.2, 4.6, 5). Everything that is hashed or stored as JSON passes through here.
//!
//! CONTRACT (other modules code against these signatures; the bodies are being written):

use thiserror::Error;

/// Why consumer JSON was refused at the boundary (spec 5.2). `Display` is the bare reason
/// ("nested deeper than 256 levels", "not valid UTF-8", ...); callers add their prefix
/// (`agentrt: canonical JSON: `, `agentrt: policy JSON: `).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum JsonError {
    #[error("nested deeper than 256 levels")]
    TooDeep,
    #[error("not valid UTF-8")]
    InvalidUtf8,
    #[error("not valid JSON")]
    Invalid,
    #[error("unpaired surrogate \\u{0}")]
    UnpairedSurrogate(String),
    #[error("duplicate key {0:?}")]
    DuplicateKey(String),
    #[error("number {0}... is longer than 10000 characters")]
    NumberTooLong(String),
    #[error("number {0} has an exponent beyond ±10000")]
    ExponentTooLarge(String),
}

/// The lossy canonical encoder used for hashing (spec 5.1): byte-identical to Go's
/// `json.Marshal` of the `UseNumber`-decoded first value; empty or blank input is `null`.
pub fn canonical_json(raw: &[u8]) -> Vec<u8> {
    let _ = raw;
    todo!("canonical_json")
}

/// Hex SHA-256 of [`canonical_json`].
pub fn content_hash(raw: &[u8]) -> String {
    let _ = raw;
    todo!("content_hash")
}

/// The boundary check (spec 5.2), in the spec's order.
pub fn check_json(raw: &[u8]) -> Result<(), JsonError> {
    let _ = raw;
    todo!("check_json")
}

/// `check_json` then [`canonical_json`] (agentrt's exported `CanonicalJSON`).
pub fn checked_canonical_json(raw: &[u8]) -> Result<Vec<u8>, JsonError> {
    check_json(raw)?;
    Ok(canonical_json(raw))
}

/// The policy form (spec 4.6): canonical traversal with HTML escaping off; refuses what
/// `check_json` refuses.
pub fn policy_json(raw: &[u8]) -> Result<Vec<u8>, JsonError> {
    let _ = raw;
    todo!("policy_json")
}

/// The policy form without the boundary check (used for tool schemas: a repeated key keeps
/// its last value). Empty input is `null`.
pub fn policy_form_unchecked(raw: &[u8]) -> Vec<u8> {
    let _ = raw;
    todo!("policy_form_unchecked")
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
    let _ = (prev, seq, run_id, step_id, at, kind, payload);
    todo!("event_hash")
}

/// Hex SHA-256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let _ = bytes;
    todo!("sha256_hex")
}

/// Go-style JSON encoding helpers (what `encoding/json.Marshal` writes).
pub mod gojson {
    use super::JsonError;

    /// Appends `s` as a Go JSON string: `"` and `\` escaped, `\b \f \n \r \t` short, other
    /// bytes < 0x20 as `\u00xx`, `<`, `>`, `&` as `\u003c`, `\u003e`, `\u0026`, U+2028/U+2029
    /// as `\u2028`/`\u2029`, everything else raw.
    pub fn write_string(out: &mut Vec<u8>, s: &str) {
        let _ = (out, s);
        todo!("write_string")
    }

    /// Appends raw JSON as Go marshals a `json.RawMessage`: validated, compacted (insignificant
    /// whitespace removed, key order and duplicates kept) and HTML-escaped inside strings.
    /// Empty input is an error (Go refuses an empty RawMessage... callers decide what absent means).
    pub fn write_raw(out: &mut Vec<u8>, raw: &[u8]) -> Result<(), JsonError> {
        let _ = (out, raw);
        todo!("write_raw")
    }

    /// Go JSON object builder: `{"a":...,"b":...}` in the order fields are added.
    #[derive(Debug, Default)]
    pub struct Object {
        buf: Vec<u8>,
        any: bool,
    }

    impl Object {
        pub fn new() -> Self {
            Object {
                buf: vec![b'{'],
                any: false,
            }
        }
        fn key(&mut self, k: &str) {
            if self.any {
                self.buf.push(b',');
            }
            self.any = true;
            write_string(&mut self.buf, k);
            self.buf.push(b':');
        }
        /// A string field.
        pub fn str(&mut self, k: &str, v: &str) -> &mut Self {
            self.key(k);
            write_string(&mut self.buf, v);
            self
        }
        /// A string field, omitted when empty (Go `omitempty`).
        pub fn str_opt(&mut self, k: &str, v: &str) -> &mut Self {
            if !v.is_empty() {
                self.str(k, v);
            }
            self
        }
        /// An integer field.
        pub fn int(&mut self, k: &str, v: i64) -> &mut Self {
            self.key(k);
            self.buf.extend_from_slice(v.to_string().as_bytes());
            self
        }
        /// An integer field, omitted when zero.
        pub fn int_opt(&mut self, k: &str, v: i64) -> &mut Self {
            if v != 0 {
                self.int(k, v);
            }
            self
        }
        /// A boolean field.
        pub fn bool(&mut self, k: &str, v: bool) -> &mut Self {
            self.key(k);
            self.buf
                .extend_from_slice(if v { b"true" } else { b"false" });
            self
        }
        /// A raw JSON field (compacted and HTML-escaped as Go does for `json.RawMessage`).
        pub fn raw(&mut self, k: &str, v: &[u8]) -> Result<&mut Self, JsonError> {
            self.key(k);
            write_raw(&mut self.buf, v)?;
            Ok(self)
        }
        /// A raw JSON field, omitted when empty.
        pub fn raw_opt(&mut self, k: &str, v: &[u8]) -> Result<&mut Self, JsonError> {
            if !v.is_empty() {
                self.raw(k, v)?;
            }
            Ok(self)
        }
        /// Already-encoded JSON, appended verbatim (the caller vouches for it).
        pub fn encoded(&mut self, k: &str, v: &[u8]) -> &mut Self {
            self.key(k);
            self.buf.extend_from_slice(v);
            self
        }
        /// The finished object.
        pub fn finish(&mut self) -> Vec<u8> {
            let mut b = std::mem::take(&mut self.buf);
            b.push(b'}');
            self.any = false;
            self.buf = vec![b'{'];
            b
        }
    }
}
