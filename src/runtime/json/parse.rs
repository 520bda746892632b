//! A byte-level JSON reader that decodes the way Go's `json.Decoder` (with `UseNumber`) does:
//! the first value only, numbers kept as their literal text, strings decoded lossily (one
//! U+FFFD per invalid UTF-8 byte, U+FFFD for an escaped lone surrogate).
//!
//! The result is a flat arena (`Doc`), built without recursion: an input of a million `[` is
//! refused after Go's own nesting bound (10,000 levels, the `encoding/json` scanner's
//! `maxNestingDepth`) instead of overflowing the stack, and dropping a deep document is flat.

use std::ops::Range;

/// Go's scanner refuses a value nested deeper than this ("exceeded max depth").
pub(super) const MAX_NESTING: usize = 10_000;

/// One decoded value. Strings and keys are ranges into [`Doc::strs`] (always valid UTF-8);
/// numbers are ranges into the raw input (their literal text).
#[derive(Debug)]
pub(super) enum Node {
    Null,
    True,
    False,
    Num(Range<usize>),
    Str(Range<usize>),
    Arr(Vec<usize>),
    /// Members in document order, duplicates kept (the encoder picks the last).
    Obj(Vec<(Range<usize>, usize)>),
}

/// A decoded document. `nodes[0]` is the root; nodes appear in document order.
#[derive(Debug, Default)]
pub(super) struct Doc {
    pub nodes: Vec<Node>,
    pub strs: Vec<u8>,
    /// The first escaped surrogate that is not a high one immediately followed by an escaped
    /// low one, as its four hex digits were written.
    pub first_unpaired: Option<String>,
}

impl Doc {
    pub fn str_bytes(&self, r: &Range<usize>) -> &[u8] {
        self.strs.get(r.clone()).unwrap_or_default()
    }
}

/// JSON insignificant whitespace (Go's `isSpace`).
pub(super) fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Where a byte-by-byte walk over JSON text stands: inside a string or not (escapes heeded).
/// Needs no valid input.
#[derive(Default)]
pub(super) struct Strings {
    inside: bool,
    escaped: bool,
}

impl Strings {
    /// Steps over the next byte; true when it stands outside any string (an opening quote
    /// does, a closing one does not).
    pub(super) fn outside(&mut self, c: u8) -> bool {
        if !self.inside {
            self.inside = c == b'"';
            return true;
        }
        if self.escaped {
            self.escaped = false;
        } else if c == b'\\' {
            self.escaped = true;
        } else if c == b'"' {
            self.inside = false;
        }
        false
    }

    /// Inside a string and not right after a backslash: the next byte is plain unless it is
    /// `\` or `"`.
    pub(super) fn in_plain_string(&self) -> bool {
        self.inside && !self.escaped
    }
}

/// How many bytes at the start of `s` come before the first byte for which `stop` holds: the
/// length of a run a JSON loop can copy or skip at once. Looks at 16 bytes at a time, `stop`
/// evaluated on all of them without an early exit (write `stop` with `|`, not `||`, so that the
/// compiler compares the block's bytes together), then byte by byte in the block where the run
/// ends.
#[inline]
pub(super) fn run_len(s: &[u8], stop: impl Fn(u8) -> bool) -> usize {
    const BLOCK: usize = 16;
    let mut n = 0;
    for block in s.chunks_exact(BLOCK) {
        let mut any = 0u8;
        for &b in block {
            any |= u8::from(stop(b));
        }
        if any != 0 {
            break;
        }
        n += BLOCK;
    }
    let rest = s.get(n..).unwrap_or_default();
    n + rest.iter().position(|&b| stop(b)).unwrap_or(rest.len())
}

/// Decodes the first value after leading whitespace. Returns the document and the offset just
/// after the value, or `None` where Go's decoder would fail (malformed, truncated, too deep).
pub(super) fn parse_first(raw: &[u8]) -> Option<(Doc, usize)> {
    let mut p = Parser::new(raw, true);
    p.ws();
    p.value_tree()?;
    let end = p.i;
    Some((p.doc, end))
}

/// Decodes exactly one value surrounded by optional whitespace (Go's `json.Valid`).
pub(super) fn parse_exact(raw: &[u8]) -> Option<Doc> {
    let (doc, end) = parse_first(raw)?;
    raw.get(end..)?.iter().all(|&c| is_ws(c)).then_some(doc)
}

/// Whether `raw` is exactly one value surrounded by optional whitespace (Go's `json.Valid`):
/// [`parse_exact`]'s walk, with the strings' decoded bytes not kept.
pub(super) fn valid_exact(raw: &[u8]) -> bool {
    let mut p = Parser::new(raw, false);
    p.ws();
    p.value_tree().is_some()
        && raw
            .get(p.i..)
            .is_some_and(|rest| rest.iter().all(|&c| is_ws(c)))
}

enum Frame {
    Arr(usize),
    Obj(usize, Range<usize>),
}

struct Parser<'a> {
    raw: &'a [u8],
    i: usize,
    doc: Doc,
    /// Whether strings are decoded into `doc.strs` (false: only walked, for validity).
    keep: bool,
}

impl<'a> Parser<'a> {
    fn new(raw: &'a [u8], keep: bool) -> Self {
        let mut doc = Doc::default();
        if keep {
            // Decoded strings are about as long as the input: one allocation, not a doubling
            // series of copies for a long string.
            doc.strs.reserve(raw.len());
        }
        Parser {
            raw,
            i: 0,
            doc,
            keep,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.raw.get(self.i).copied()
    }

    fn ws(&mut self) {
        while self.peek().is_some_and(is_ws) {
            self.i += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    fn push(&mut self, n: Node) -> usize {
        self.doc.nodes.push(n);
        self.doc.nodes.len() - 1
    }

    /// `"key"` ws `:` ws
    fn member_key(&mut self) -> Option<Range<usize>> {
        if self.peek()? != b'"' {
            return None;
        }
        let k = self.string()?;
        self.ws();
        self.expect(b':')?;
        self.ws();
        Some(k)
    }

    /// The whole value at `self.i`, iteratively (explicit stack of open containers).
    fn value_tree(&mut self) -> Option<()> {
        let mut stack: Vec<Frame> = Vec::new();
        'value: loop {
            let mut done = match self.peek()? {
                open @ (b'{' | b'[') => {
                    if stack.len() + 1 > MAX_NESTING {
                        return None;
                    }
                    self.i += 1;
                    let obj = open == b'{';
                    let id = self.push(if obj {
                        Node::Obj(Vec::new())
                    } else {
                        Node::Arr(Vec::new())
                    });
                    self.ws();
                    if self.peek()? == if obj { b'}' } else { b']' } {
                        self.i += 1;
                        id
                    } else {
                        if obj {
                            let k = self.member_key()?;
                            stack.push(Frame::Obj(id, k));
                        } else {
                            stack.push(Frame::Arr(id));
                        }
                        continue 'value;
                    }
                }
                b'"' => {
                    let r = self.string()?;
                    self.push(Node::Str(r))
                }
                b't' => self.literal(b"true", Node::True)?,
                b'f' => self.literal(b"false", Node::False)?,
                b'n' => self.literal(b"null", Node::Null)?,
                b'-' | b'0'..=b'9' => {
                    let r = self.number()?;
                    self.push(Node::Num(r))
                }
                _ => return None,
            };
            // Attach the finished value to its container, closing containers as they end.
            loop {
                let Some(frame) = stack.last_mut() else {
                    return Some(());
                };
                match frame {
                    Frame::Arr(a) => {
                        let a = *a;
                        if let Some(Node::Arr(v)) = self.doc.nodes.get_mut(a) {
                            v.push(done);
                        }
                        self.ws();
                        match self.peek()? {
                            b',' => {
                                self.i += 1;
                                self.ws();
                                continue 'value;
                            }
                            b']' => {
                                self.i += 1;
                                stack.pop();
                                done = a;
                            }
                            _ => return None,
                        }
                    }
                    Frame::Obj(o, k) => {
                        let o = *o;
                        let key = k.clone();
                        if let Some(Node::Obj(v)) = self.doc.nodes.get_mut(o) {
                            v.push((key, done));
                        }
                        self.ws();
                        match self.peek()? {
                            b',' => {
                                self.i += 1;
                                self.ws();
                                let k = self.member_key()?;
                                if let Some(Frame::Obj(_, slot)) = stack.last_mut() {
                                    *slot = k;
                                }
                                continue 'value;
                            }
                            b'}' => {
                                self.i += 1;
                                stack.pop();
                                done = o;
                            }
                            _ => return None,
                        }
                    }
                }
            }
        }
    }

    fn literal(&mut self, word: &[u8], n: Node) -> Option<usize> {
        if self.raw.get(self.i..)?.starts_with(word) {
            self.i += word.len();
            Some(self.push(n))
        } else {
            None
        }
    }

    fn digits(&mut self) -> usize {
        let s = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - s
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, stopping at the first byte that
    /// cannot continue it (what follows is the container's business, or trailing data).
    fn number(&mut self) -> Option<Range<usize>> {
        let s = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(s..self.i)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let h = self.raw.get(at..at + 4)?;
        let s = std::str::from_utf8(h).ok()?;
        if !h.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        u32::from_str_radix(s, 16).ok()
    }

    fn put_char(&mut self, c: char) {
        if !self.keep {
            return;
        }
        let mut b = [0u8; 4];
        self.doc
            .strs
            .extend_from_slice(c.encode_utf8(&mut b).as_bytes());
    }

    /// A string at `self.i` (which is `"`), decoded into `doc.strs`.
    fn string(&mut self) -> Option<Range<usize>> {
        self.i += 1;
        let start = self.doc.strs.len();
        loop {
            let c = self.peek()?;
            match c {
                b'"' => {
                    self.i += 1;
                    return Some(start..self.doc.strs.len());
                }
                b'\\' => {
                    let e = *self.raw.get(self.i + 1)?;
                    self.i += 2;
                    let simple = match e {
                        b'"' | b'\\' | b'/' => e,
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            self.escaped_rune()?;
                            continue;
                        }
                        _ => return None,
                    };
                    if self.keep {
                        self.doc.strs.push(simple);
                    }
                }
                0..=0x1f => return None,
                0x20..=0x7f => {
                    // The whole run of plain ASCII at once (most of a long string).
                    let rest = self.raw.get(self.i..)?;
                    let n = run_len(rest, |b| {
                        !(0x20..=0x7f).contains(&b) | (b == b'"') | (b == b'\\')
                    });
                    if self.keep {
                        self.doc.strs.extend_from_slice(rest.get(..n)?);
                    }
                    self.i += n;
                }
                _ => match rune_len(self.raw.get(self.i..)?) {
                    Some(n) => {
                        let bytes = self.raw.get(self.i..self.i + n)?;
                        if self.keep {
                            self.doc.strs.extend_from_slice(bytes);
                        }
                        self.i += n;
                    }
                    None => {
                        self.put_char('\u{fffd}');
                        self.i += 1;
                    }
                },
            }
        }
    }

    /// After `\u`: four hex digits, pairing a high surrogate with an escaped low one.
    fn escaped_rune(&mut self) -> Option<()> {
        let at = self.i;
        let r = self.hex4(at)?;
        self.i += 4;
        if !(0xd800..0xe000).contains(&r) {
            self.put_char(char::from_u32(r)?);
            return Some(());
        }
        if r < 0xdc00
            && self.raw.get(self.i..self.i + 2) == Some(b"\\u")
            && let Some(r2) = self
                .hex4(self.i + 2)
                .filter(|r2| (0xdc00..0xe000).contains(r2))
        {
            let c = char::from_u32(0x10000 + ((r - 0xd800) << 10) + (r2 - 0xdc00))?;
            self.i += 6;
            self.put_char(c);
            return Some(());
        }
        if self.doc.first_unpaired.is_none() {
            let written = self.raw.get(at..at + 4)?;
            self.doc.first_unpaired = Some(String::from_utf8_lossy(written).into_owned());
        }
        self.put_char('\u{fffd}');
        Some(())
    }
}

/// The length of the valid UTF-8 encoded rune at the start of `b`, or `None` where Go's
/// `utf8.DecodeRune` reports an invalid byte (overlong forms, surrogates, past U+10FFFF,
/// truncated sequences): each such byte becomes its own U+FFFD.
pub(super) fn rune_len(b: &[u8]) -> Option<usize> {
    let cont = |i: usize, lo: u8, hi: u8| b.get(i).is_some_and(|&c| (lo..=hi).contains(&c));
    let c0 = *b.first()?;
    let (n, lo, hi) = match c0 {
        0x00..=0x7f => return Some(1),
        0xc2..=0xdf => (2, 0x80, 0xbf),
        0xe0 => (3, 0xa0, 0xbf),
        0xe1..=0xec | 0xee..=0xef => (3, 0x80, 0xbf),
        0xed => (3, 0x80, 0x9f),
        0xf0 => (4, 0x90, 0xbf),
        0xf1..=0xf3 => (4, 0x80, 0xbf),
        0xf4 => (4, 0x80, 0x8f),
        _ => return None,
    };
    if !cont(1, lo, hi) {
        return None;
    }
    (2..n).all(|i| cont(i, 0x80, 0xbf)).then_some(n)
}
