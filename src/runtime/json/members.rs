//! A strict, borrowed look at a stored document's top-level members, for scans that read a
//! few members of every row (`stats`, issue 21) without SQLite's JSON functions parsing each
//! document once per member.
//!
//! [`top_members`] answers only when it is sure: the input is UTF-8 and exactly one RFC 8259
//! value with nothing but JSON whitespace around it, nested at most [`MAX_DEPTH`] levels, with
//! no top-level key written with an escape and no wanted key present twice. Such a document
//! is one SQLite's `json_valid` accepts, and `json_extract(doc, '$.key')` reads from it the
//! member returned here. On anything else (including every document that is not valid JSON)
//! it returns `None` and the caller asks SQLite. Nothing is allocated; the nesting bound keeps
//! the recursion shallow whatever the input.

/// Deeper documents are left to SQLite (whose own bound is 1 000 levels).
pub(crate) const MAX_DEPTH: usize = 64;

/// The raw text of the top-level members named by `keys` (`None` for a member that is not
/// there or a document that is not an object), or `None` when the document is not one this
/// scanner is sure about (see the module's documentation).
pub(crate) fn top_members<'a, const N: usize>(
    raw: &'a [u8],
    keys: [&[u8]; N],
) -> Option<[Option<&'a [u8]>; N]> {
    std::str::from_utf8(raw).ok()?;
    let mut s = Scan { raw, i: 0 };
    let mut found = [None; N];
    s.ws();
    if s.eat(b'{') {
        s.ws();
        if !s.eat(b'}') {
            loop {
                let (key, escaped) = s.string()?;
                if escaped {
                    return None;
                }
                s.ws();
                s.expect(b':')?;
                s.ws();
                let start = s.i;
                s.value(1)?;
                if let Some(k) = keys.iter().position(|k| *k == key) {
                    if found[k].is_some() {
                        return None;
                    }
                    found[k] = Some(raw.get(start..s.i)?);
                }
                s.ws();
                match s.next()? {
                    b',' => s.ws(),
                    b'}' => break,
                    _ => return None,
                }
            }
        }
    } else {
        s.value(0)?;
    }
    s.ws();
    (s.i == raw.len()).then_some(found)
}

/// A member's raw text as far as a scan needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Member<'a> {
    /// Absent, or `null` (SQL NULL either way).
    Null,
    /// A string written without escapes: its bytes between the quotes, which are what
    /// `json_extract` returns.
    Plain(&'a [u8]),
    /// A string with at least one escape: its raw bytes between the quotes.
    Escaped(&'a [u8]),
    /// A number, `true`, `false`, an object or an array.
    Other,
}

impl<'a> Member<'a> {
    /// Classifies a member [`top_members`] returned.
    pub(crate) fn of(raw: Option<&'a [u8]>) -> Member<'a> {
        match raw {
            None | Some(b"null") => Member::Null,
            Some(v) if v.first() == Some(&b'"') => {
                let inner = v.get(1..v.len().saturating_sub(1)).unwrap_or_default();
                if inner.contains(&b'\\') {
                    Member::Escaped(inner)
                } else {
                    Member::Plain(inner)
                }
            }
            Some(_) => Member::Other,
        }
    }
}

struct Scan<'a> {
    raw: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.raw.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        self.i += usize::from(hit);
        hit
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        self.eat(c).then_some(())
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// One value at nesting `depth` (the containers around it).
    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'{' | b'[' if depth >= MAX_DEPTH => None,
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(|_| ()),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            _ => self.number(),
        }
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        self.expect(b'{')?;
        self.ws();
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            self.string()?;
            self.ws();
            self.expect(b':')?;
            self.ws();
            self.value(depth)?;
            self.ws();
            match self.next()? {
                b',' => self.ws(),
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        self.expect(b'[')?;
        self.ws();
        if self.eat(b']') {
            return Some(());
        }
        loop {
            self.value(depth)?;
            self.ws();
            match self.next()? {
                b',' => self.ws(),
                b']' => return Some(()),
                _ => return None,
            }
        }
    }

    /// A string: its raw bytes between the quotes and whether it holds an escape.
    fn string(&mut self) -> Option<(&'a [u8], bool)> {
        self.expect(b'"')?;
        let start = self.i;
        let mut escaped = false;
        loop {
            // Most of a string needs no look beyond this.
            while let Some(&c) = self.raw.get(self.i) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            match self.next()? {
                b'"' => return Some((self.raw.get(start..self.i - 1)?, escaped)),
                b'\\' => {
                    escaped = true;
                    match self.next()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let hex = self.raw.get(self.i..self.i + 4)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.i += 4;
                        }
                        _ => return None,
                    }
                }
                0..=0x1f => return None,
                _ => {}
            }
        }
    }

    fn word(&mut self, w: &[u8]) -> Option<()> {
        let got = self.raw.get(self.i..self.i + w.len())?;
        self.i += w.len();
        (got == w).then_some(())
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Option<()> {
        self.eat(b'-');
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.') {
            self.digits1()?;
        }
        if self.eat(b'e') || self.eat(b'E') {
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            self.digits1()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
    }

    fn digits1(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kt(raw: &str) -> Option<[Option<&str>; 2]> {
        top_members(raw.as_bytes(), [b"kind", b"tool"])
            .map(|m| m.map(|v| v.map(|b| std::str::from_utf8(b).unwrap())))
    }

    #[test]
    fn the_wanted_members_are_read_raw_from_a_valid_object() {
        let doc =
            r#" {"kind":"tool_call","args":{"a":[1,-2.5e+3,true,null,{}]},"tool":"get_order"} "#;
        assert_eq!(
            kt(doc),
            Some([Some(r#""tool_call""#), Some(r#""get_order""#)])
        );
        assert_eq!(
            kt(r#"{"kind":{"x":[]}}"#),
            Some([Some(r#"{"x":[]}"#), None])
        );
        assert_eq!(kt("[1,2]"), Some([None, None]));
        assert_eq!(kt("{}"), Some([None, None]));
        assert_eq!(kt("\"s\""), Some([None, None]));
        assert_eq!(Member::of(Some(br#""a\"b""#)), Member::Escaped(br#"a\"b"#));
        assert_eq!(Member::of(Some(b"\"ab\"")), Member::Plain(b"ab"));
        assert_eq!(Member::of(Some(b"null")), Member::Null);
        assert_eq!(Member::of(Some(b"0")), Member::Other);
    }

    #[test]
    fn anything_it_is_not_sure_of_is_left_to_sqlite() {
        for doc in [
            "",
            " ",
            "{",
            "{\"kind\":1,}",
            "[1,]",
            "{kind:1}",
            "{'kind':1}",
            "01",
            "1.",
            ".5",
            "+1",
            "1e",
            "NaN",
            "Infinity",
            "tru",
            "nul",
            "{\"a\":1} x",
            "{\"a\":\"\t\"}",
            "{\"a\":\"\\x\"}",
            "{\"a\":\"\\u12\"}",
            "{\"ki\\u006ed\":1}",
            "{\"kind\":1,\"kind\":2}",
            "/* c */ {}",
            "\u{a0}{}",
            "{\"a\":\"\u{0}\"}",
        ] {
            assert_eq!(kt(doc), None, "{doc:?}");
        }
        assert_eq!(top_members(b"{\"a\":\"\xff\"}", [b"a"]), None);
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(kt(&deep), None);
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(kt(&ok).is_some());
        let huge = "[".repeat(1_000_000);
        assert_eq!(kt(&huge), None);
    }
}
