//! Go-style JSON encoding helpers (what `encoding/json.Marshal` writes).

use super::JsonError;
use super::canon::{Escape, HEX, write_str};
use super::parse::{Strings, is_ws, run_len, valid_exact};

/// Appends `s` as a Go JSON string: `"` and `\` escaped, `\b \f \n \r \t` short, other
/// bytes < 0x20 as `\u00xx`, `<`, `>`, `&` as `\u003c`, `\u003e`, `\u0026`, U+2028/U+2029
/// as `\u2028`/`\u2029`, everything else raw.
pub fn write_string(out: &mut Vec<u8>, s: &str) {
    write_str(out, s.as_bytes(), Escape::Go);
}

/// Appends bytes as Go marshals a `string` holding them: as [`write_string`], and each byte
/// that is not part of valid UTF-8 as the six characters `\ufffd` (an id that is not UTF-8).
pub fn write_bytes(out: &mut Vec<u8>, s: &[u8]) {
    write_str(out, s, Escape::Go);
}

/// Appends raw JSON as Go marshals a `json.RawMessage`: validated, compacted (insignificant
/// whitespace removed, key order and duplicates kept) and HTML-escaped inside strings.
/// Empty input is an error (Go refuses an empty RawMessage... callers decide what absent means).
///
/// Validation is Go's scanner: exactly one value, whitespace around it allowed, at most 10,000
/// levels deep. Like Go it does not look at UTF-8 validity: invalid bytes pass through as is.
pub fn write_raw(out: &mut Vec<u8>, raw: &[u8]) -> Result<(), JsonError> {
    if !valid_exact(raw) {
        return Err(JsonError::Invalid);
    }
    out.reserve(raw.len());
    let mut strings = Strings::default();
    let mut i = 0;
    while let Some(&c) = raw.get(i) {
        if strings.in_plain_string() {
            // Inside a string, a run of bytes that change neither the state nor the output
            // is copied at once.
            let rest = raw.get(i..).unwrap_or_default();
            let n = run_len(rest, |b| {
                (b == b'\\') | (b == b'"') | (b == b'<') | (b == b'>') | (b == b'&') | (b == 0xe2)
            });
            if n > 0 {
                out.extend_from_slice(rest.get(..n).unwrap_or_default());
                i += n;
                continue;
            }
        }
        i += 1;
        if strings.outside(c) && is_ws(c) {
            continue;
        }
        match c {
            b'<' | b'>' | b'&' => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(c >> 4)]);
                out.push(HEX[usize::from(c & 0xf)]);
            }
            0xe2 if raw.get(i) == Some(&0x80) && matches!(raw.get(i + 1), Some(0xa8 | 0xa9)) => {
                let sep = if raw.get(i + 1) == Some(&0xa8) {
                    b"\\u2028"
                } else {
                    b"\\u2029"
                };
                out.extend_from_slice(sep);
                i += 2;
            }
            _ => out.push(c),
        }
    }
    Ok(())
}

/// Go JSON object builder: `{"a":...,"b":...}` in the order fields are added.
#[derive(Debug)]
pub struct Object {
    buf: Vec<u8>,
    any: bool,
}

impl Default for Object {
    fn default() -> Self {
        Object::new()
    }
}

impl Object {
    /// An empty object (`{}` if finished at once).
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
    /// A string field of bytes that need not be UTF-8 (Go's encoding: `\ufffd` per invalid
    /// byte).
    pub fn str_bytes(&mut self, k: &str, v: &[u8]) -> &mut Self {
        self.key(k);
        write_bytes(&mut self.buf, v);
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
    /// A raw JSON field (compacted and HTML-escaped as Go does for `json.RawMessage`). When
    /// `v` is not JSON the object is left as it was (no dangling key), so a caller that goes
    /// on after the error still finishes a valid object.
    pub fn raw(&mut self, k: &str, v: &[u8]) -> Result<&mut Self, JsonError> {
        let (len, any) = (self.buf.len(), self.any);
        self.key(k);
        if let Err(e) = write_raw(&mut self.buf, v) {
            self.buf.truncate(len);
            self.any = any;
            return Err(e);
        }
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

#[cfg(test)]
mod raw_tests {
    use super::Object;

    #[test]
    fn a_raw_field_that_is_not_json_leaves_the_object_as_it_was() {
        let mut o = Object::new();
        o.str("a", "x");
        assert!(o.raw("bad", b"{not json").is_err());
        o.raw("b", b"[1, 2]").unwrap();
        assert_eq!(o.finish(), br#"{"a":"x","b":[1,2]}"#.to_vec());
        let mut first = Object::new();
        assert!(first.raw("bad", b"nope").is_err());
        first.str("c", "y");
        assert_eq!(first.finish(), br#"{"c":"y"}"#.to_vec());
    }
}
