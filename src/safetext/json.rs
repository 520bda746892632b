//! JSON for display: a small parser that keeps numbers as their literal text (no f64 round
//! trip) and strings as decoded bytes, and renderings made of [`SafeText`]: indented lines
//! with sorted keys and cut strings, and a flat list of every field's full escaped value.

use super::badges::Badge;
use super::segments::{SafeText, SegmentKind};
use super::{Options, escape, escape_cut};

/// Nesting deeper than this is refused (no stack exhaustion on hostile input).
pub const MAX_JSON_DEPTH: usize = 128;

/// A decoded JSON value, for display only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonNode {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as its literal text (`1.50`, `1e3`, `-0` stay as written).
    Number(String),
    /// A string, decoded: JSON escapes resolved (`\u001b` becomes a real ESC byte, which the
    /// rendering escapes again). A lone surrogate escape becomes its 3-byte generalised UTF-8
    /// form, which is invalid UTF-8 and so shown as `\xNN` bytes.
    String(Vec<u8>),
    /// An array.
    Array(Vec<JsonNode>),
    /// An object: keys (decoded bytes) and values in the stored order, duplicates kept.
    Object(Vec<(Vec<u8>, JsonNode)>),
}

/// Why bytes could not be parsed as JSON.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// Not JSON.
    #[error("the value is not JSON: {what} at byte {at}; it is shown as text instead")]
    Syntax {
        /// Byte offset.
        at: usize,
        /// What was wrong.
        what: &'static str,
    },
    /// Too deep.
    #[error(
        "the value nests deeper than {MAX_JSON_DEPTH} levels at byte {at}; it is shown as text instead"
    )]
    TooDeep {
        /// Byte offset.
        at: usize,
    },
}

/// Parses JSON bytes for display. Lenient where display allows (raw control bytes and invalid
/// UTF-8 inside strings are kept as bytes); strict about structure.
pub fn parse_json(bytes: &[u8]) -> Result<JsonNode, JsonError> {
    let mut p = Parser { bytes, pos: 0 };
    p.skip_ws();
    let node = p.value(0)?;
    p.skip_ws();
    if p.pos != bytes.len() {
        return Err(p.err("trailing data after the value"));
    }
    Ok(node)
}

/// An array's or an object's opening and closing bytes, the error where the opening one is
/// not next, and the error where neither `,` nor the closing one follows an item.
type Delimited = (u8, u8, &'static str, &'static str);
const ARRAY: Delimited = (b'[', b']', "expected an array", "expected ',' or ']'");
const OBJECT: Delimited = (b'{', b'}', "expected an object", "expected ',' or '}'");

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn err(&self, what: &'static str) -> JsonError {
        JsonError::Syntax { at: self.pos, what }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, b: u8, what: &'static str) -> Result<(), JsonError> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(what))
        }
    }

    fn value(&mut self, depth: usize) -> Result<JsonNode, JsonError> {
        if depth > MAX_JSON_DEPTH {
            return Err(JsonError::TooDeep { at: self.pos });
        }
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(JsonNode::String(self.string()?)),
            Some(b't') => self.literal(b"true", JsonNode::Bool(true)),
            Some(b'f') => self.literal(b"false", JsonNode::Bool(false)),
            Some(b'n') => self.literal(b"null", JsonNode::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("unexpected byte")),
            None => Err(self.err("unexpected end")),
        }
    }

    fn literal(&mut self, word: &[u8], node: JsonNode) -> Result<JsonNode, JsonError> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(node)
        } else {
            Err(self.err("unknown literal"))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<JsonNode, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.err("a number needs digits")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.err("a fraction needs digits"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("an exponent needs digits"));
            }
        }
        // Only ASCII digits, signs, '.', 'e' and 'E' were accepted.
        let text = String::from_utf8_lossy(&self.bytes[start..self.pos]).into_owned();
        Ok(JsonNode::Number(text))
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let hex = self
            .bytes
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.err("a \\u escape needs 4 hex digits"))?;
        let mut v = 0;
        for &b in hex {
            let d = (b as char)
                .to_digit(16)
                .ok_or_else(|| self.err("a \\u escape needs 4 hex digits"))?;
            v = v * 16 + d;
        }
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<Vec<u8>, JsonError> {
        self.expect(b'"', "expected a string")?;
        let mut out = Vec::new();
        loop {
            let Some(b) = self.peek() else {
                return Err(self.err("unterminated string"));
            };
            self.pos += 1;
            match b {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.err("unterminated string"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0C),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => self.unicode_escape(&mut out)?,
                        _ => return Err(self.err("unknown string escape")),
                    }
                }
                _ => out.push(b),
            }
        }
    }

    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        let first = self.hex4()?;
        let mut cp = first;
        if (0xD800..0xDC00).contains(&first) && self.bytes[self.pos..].starts_with(b"\\u") {
            let save = self.pos;
            self.pos += 2;
            let second = self.hex4()?;
            if (0xDC00..0xE000).contains(&second) {
                cp = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
            } else {
                self.pos = save;
            }
        }
        match char::from_u32(cp) {
            Some(c) => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            None => {
                // A lone surrogate: its generalised UTF-8 bytes (invalid UTF-8).
                out.push(0xE0 | (cp >> 12) as u8);
                out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
                out.push(0x80 | (cp & 0x3F) as u8);
            }
        }
        Ok(())
    }

    fn array(&mut self, depth: usize) -> Result<JsonNode, JsonError> {
        let mut items = Vec::new();
        self.items(ARRAY, |p| {
            items.push(p.value(depth + 1)?);
            Ok(())
        })?;
        Ok(JsonNode::Array(items))
    }

    fn object(&mut self, depth: usize) -> Result<JsonNode, JsonError> {
        let mut members = Vec::new();
        self.items(OBJECT, |p| {
            let key = p.string()?;
            p.skip_ws();
            p.expect(b':', "expected ':'")?;
            p.skip_ws();
            members.push((key, p.value(depth + 1)?));
            Ok(())
        })?;
        Ok(JsonNode::Object(members))
    }

    /// An array's or object's items between its `open` and `close`, separated by `,` and
    /// each read by `item` (white space around each skipped here).
    fn items(
        &mut self,
        (open, close, what, missing): Delimited,
        mut item: impl FnMut(&mut Self) -> Result<(), JsonError>,
    ) -> Result<(), JsonError> {
        self.expect(open, what)?;
        self.skip_ws();
        if self.peek() == Some(close) {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            item(self)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.err(missing)),
            }
        }
    }
}

/// How JSON is rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonOptions {
    /// How strings and keys are escaped (`"` is always escaped inside them).
    pub text: Options,
    /// The widest a string or key may be before it is cut head-and-tail.
    pub string_width: usize,
    /// Spaces per nesting level.
    pub indent: usize,
}

impl Default for JsonOptions {
    /// Security-relevant readable escaping, strings cut at 120 columns, indent 2.
    fn default() -> Self {
        JsonOptions {
            text: Options::security(),
            string_width: 120,
            indent: 2,
        }
    }
}

/// Sorted member indices (by key bytes; stable, so duplicates keep their order) and whether
/// each key repeats the previous one.
fn sorted(members: &[(Vec<u8>, JsonNode)]) -> Vec<(usize, bool)> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|&a, &b| members[a].0.cmp(&members[b].0));
    order
        .iter()
        .enumerate()
        .map(|(i, &m)| (m, i > 0 && members[order[i - 1]].0 == members[m].0))
        .collect()
}

/// Renders a value as indented lines (like an indenting JSON encoder) with keys sorted,
/// strings and keys escaped and cut to `string_width`, numbers as written. A repeated key's
/// line carries the [`Badge::DuplicateKey`] badge.
pub fn render_json(node: &JsonNode, opts: &JsonOptions) -> Vec<SafeText> {
    let mut lines = Vec::new();
    let mut line = SafeText::default();
    render_into(node, opts, 0, &mut line, &mut lines);
    lines.push(line);
    lines
}

/// `bytes` as a quoted JSON-style string for display: `"` and `\\` escaped inside, cut to
/// `width`; the quotes are our own segments.
pub fn quoted_text(bytes: &[u8], text: super::Options, width: usize) -> SafeText {
    quoted(
        bytes,
        &JsonOptions {
            text,
            string_width: width,
            indent: 0,
        },
    )
}

fn quoted(bytes: &[u8], opts: &JsonOptions) -> SafeText {
    let mut out = SafeText::default();
    out.push_own(SegmentKind::Plain, "\"");
    out.append(escape_cut(
        bytes,
        opts.text.with_escape_quote(true),
        opts.string_width,
    ));
    out.push_own(SegmentKind::Plain, "\"");
    out
}

fn render_into(
    node: &JsonNode,
    opts: &JsonOptions,
    depth: usize,
    line: &mut SafeText,
    lines: &mut Vec<SafeText>,
) {
    let pad = |depth: usize| " ".repeat(opts.indent * depth);
    match node {
        JsonNode::Null => line.push_own(SegmentKind::Plain, "null"),
        JsonNode::Bool(b) => line.push_own(SegmentKind::Plain, if *b { "true" } else { "false" }),
        JsonNode::Number(n) => line.push_own(SegmentKind::Plain, n),
        JsonNode::String(s) => line.append(quoted(s, opts)),
        JsonNode::Array(items) if items.is_empty() => line.push_own(SegmentKind::Plain, "[]"),
        JsonNode::Object(members) if members.is_empty() => {
            line.push_own(SegmentKind::Plain, "{}");
        }
        JsonNode::Array(items) => {
            line.push_own(SegmentKind::Plain, "[");
            for (i, item) in items.iter().enumerate() {
                lines.push(std::mem::take(line));
                line.push_own(SegmentKind::Plain, &pad(depth + 1));
                render_into(item, opts, depth + 1, line, lines);
                if i + 1 < items.len() {
                    line.push_own(SegmentKind::Plain, ",");
                }
            }
            lines.push(std::mem::take(line));
            line.push_own(SegmentKind::Plain, &format!("{}]", pad(depth)));
        }
        JsonNode::Object(members) => {
            line.push_own(SegmentKind::Plain, "{");
            let order = sorted(members);
            for (i, &(m, duplicate)) in order.iter().enumerate() {
                lines.push(std::mem::take(line));
                line.push_own(SegmentKind::Plain, &pad(depth + 1));
                line.append(quoted(&members[m].0, opts));
                if duplicate {
                    line.add_badge(Badge::DuplicateKey);
                }
                line.push_own(SegmentKind::Plain, ": ");
                render_into(&members[m].1, opts, depth + 1, line, lines);
                if i + 1 < order.len() {
                    line.push_own(SegmentKind::Plain, ",");
                }
            }
            lines.push(std::mem::take(line));
            line.push_own(SegmentKind::Plain, &format!("{}}}", pad(depth)));
        }
    }
}

/// One leaf of a JSON value with its full escaped value, for a detail view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonField {
    /// Where the field is: `a.b[0]`, `["key with spaces"]`, or empty for a top-level scalar.
    pub path: SafeText,
    /// The full value, escaped with the given options and never width-cut: a string's
    /// content without quotes, a number's literal text, `true`, `null`, `{}`, `[]`.
    pub value: SafeText,
    /// Whether the value is a JSON string (so a reader can tell `"1"` from `1`).
    pub is_string: bool,
}

/// Every leaf of `node` (strings, numbers, booleans, nulls, empty containers), in rendering
/// order (keys sorted), with its full escaped value under `opts`.
pub fn json_fields(node: &JsonNode, opts: Options) -> Vec<JsonField> {
    let mut out = Vec::new();
    fields_into(node, opts, SafeText::default(), &mut out);
    out
}

fn is_simple_key(key: &[u8]) -> bool {
    !key.is_empty()
        && key
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

fn fields_into(node: &JsonNode, opts: Options, path: SafeText, out: &mut Vec<JsonField>) {
    let leaf = |value: SafeText, is_string: bool, out: &mut Vec<JsonField>| {
        out.push(JsonField {
            path: path.clone(),
            value,
            is_string,
        });
    };
    let own = |text: &str| {
        let mut t = SafeText::default();
        t.push_own(SegmentKind::Plain, text);
        t
    };
    match node {
        JsonNode::Null => leaf(own("null"), false, out),
        JsonNode::Bool(b) => leaf(own(if *b { "true" } else { "false" }), false, out),
        JsonNode::Number(n) => leaf(own(n), false, out),
        JsonNode::String(s) => leaf(escape(s, opts), true, out),
        JsonNode::Array(items) if items.is_empty() => leaf(own("[]"), false, out),
        JsonNode::Object(members) if members.is_empty() => leaf(own("{}"), false, out),
        JsonNode::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let mut p = path.clone();
                p.push_own(SegmentKind::Plain, &format!("[{i}]"));
                fields_into(item, opts, p, out);
            }
        }
        JsonNode::Object(members) => {
            for (m, duplicate) in sorted(members) {
                let (key, value) = &members[m];
                let mut p = path.clone();
                if is_simple_key(key) {
                    if !p.is_empty() {
                        p.push_own(SegmentKind::Plain, ".");
                    }
                    p.push_own(SegmentKind::Plain, &String::from_utf8_lossy(key));
                } else {
                    p.push_own(SegmentKind::Plain, "[\"");
                    p.append(escape(
                        key,
                        opts.with_escape_quote(true).with_form(super::Form::OneLine),
                    ));
                    p.push_own(SegmentKind::Plain, "\"]");
                }
                if duplicate {
                    p.add_badge(Badge::DuplicateKey);
                }
                fields_into(value, opts, p, out);
            }
        }
    }
}
