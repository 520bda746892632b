//! The canonical encoder (spec 5.1) and the policy form (spec 4.6): one traversal, two string
//! escapings. Objects are written with keys in bytewise order, the last of a repeated key
//! winning; numbers as their literal text; no whitespace. Iterative, so depth costs heap only.

use super::parse::{Doc, Node, is_ws, parse_first, run_len, rune_len};

/// How strings are escaped.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Escape {
    /// Go's `json.Marshal`: `<`, `>`, `&`, U+2028, U+2029 escaped too (the hashed form).
    Go,
    /// Only what JSON requires (the policy form).
    Minimal,
}

pub(super) const HEX: &[u8; 16] = b"0123456789abcdef";

/// Empty or blank input. Blank is what Go's `bytes.TrimSpace` removes entirely: valid UTF-8
/// made only of Unicode White_Space (Rust's `char::is_whitespace` is the same property).
pub(super) fn is_blank(raw: &[u8]) -> bool {
    raw.iter().all(|&c| is_ws(c))
        || std::str::from_utf8(raw).is_ok_and(|s| s.chars().all(char::is_whitespace))
}

/// The canonical (or policy) form of the first value, or `None` where Go's decoder would fail.
pub(super) fn try_form(raw: &[u8], esc: Escape) -> Option<Vec<u8>> {
    if is_blank(raw) {
        return Some(b"null".to_vec());
    }
    let (doc, _) = parse_first(raw)?;
    Some(encode(&doc, raw, esc))
}

enum Work<'d> {
    Node(usize),
    Byte(u8),
    Key(&'d [u8]),
}

/// Writes the document rooted at node 0.
pub(super) fn encode(doc: &Doc, raw: &[u8], esc: Escape) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut work = vec![Work::Node(0)];
    while let Some(w) = work.pop() {
        let id = match w {
            Work::Byte(b) => {
                out.push(b);
                continue;
            }
            Work::Key(k) => {
                write_str(&mut out, k, esc);
                continue;
            }
            Work::Node(id) => id,
        };
        let Some(node) = doc.nodes.get(id) else {
            continue;
        };
        match node {
            Node::Null => out.extend_from_slice(b"null"),
            Node::True => out.extend_from_slice(b"true"),
            Node::False => out.extend_from_slice(b"false"),
            Node::Num(r) => match raw.get(r.clone()) {
                Some(lit) if !lit.is_empty() => out.extend_from_slice(lit),
                _ => out.push(b'0'),
            },
            Node::Str(r) => write_str(&mut out, doc.str_bytes(r), esc),
            Node::Arr(items) => {
                out.push(b'[');
                work.push(Work::Byte(b']'));
                for (n, &item) in items.iter().enumerate().rev() {
                    work.push(Work::Node(item));
                    if n > 0 {
                        work.push(Work::Byte(b','));
                    }
                }
            }
            Node::Obj(members) => {
                out.push(b'{');
                work.push(Work::Byte(b'}'));
                let members = sorted_last_wins(doc, members);
                for (n, (k, v)) in members.into_iter().enumerate().rev() {
                    work.push(Work::Node(v));
                    work.push(Work::Byte(b':'));
                    work.push(Work::Key(k));
                    if n > 0 {
                        work.push(Work::Byte(b','));
                    }
                }
            }
        }
    }
    out
}

/// Members sorted bytewise by decoded key; of equal keys only the last written stays.
fn sorted_last_wins<'d>(
    doc: &'d Doc,
    members: &[(std::ops::Range<usize>, usize)],
) -> Vec<(&'d [u8], usize)> {
    let mut m: Vec<(&[u8], usize)> = members
        .iter()
        .map(|(k, v)| (doc.str_bytes(k), *v))
        .collect();
    m.sort_by(|a, b| a.0.cmp(b.0)); // stable: equal keys keep document order
    let mut out: Vec<(&[u8], usize)> = Vec::with_capacity(m.len());
    for e in m {
        match out.last_mut() {
            Some(last) if last.0 == e.0 => *last = e,
            _ => out.push(e),
        }
    }
    out
}

/// Appends `s` as a JSON string. A byte that does not start a valid UTF-8 rune is written as
/// `\ufffd` (Go's encoder branch; unreachable for decoded strings, which are valid).
pub(super) fn write_str(out: &mut Vec<u8>, s: &[u8], esc: Escape) {
    let html = esc == Escape::Go;
    // Printable ASCII written as it is: copied a run at a time.
    let plain = |b: u8| {
        (0x20..0x80).contains(&b)
            && b != b'"'
            && b != b'\\'
            && !(html && matches!(b, b'<' | b'>' | b'&'))
    };
    out.push(b'"');
    let mut i = 0;
    while let Some(&c) = s.get(i) {
        if plain(c) {
            let rest = s.get(i..).unwrap_or_default();
            let n = run_len(rest, |b| {
                !(0x20..0x80).contains(&b)
                    | (b == b'"')
                    | (b == b'\\')
                    | (html & ((b == b'<') | (b == b'>') | (b == b'&')))
            });
            out.extend_from_slice(rest.get(..n).unwrap_or_default());
            i += n;
            continue;
        }
        if c < 0x80 {
            match c {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0..=0x1f | b'<' | b'>' | b'&' if c < 0x20 || html => {
                    out.extend_from_slice(b"\\u00");
                    out.push(HEX[usize::from(c >> 4)]);
                    out.push(HEX[usize::from(c & 0xf)]);
                }
                _ => out.push(c),
            }
            i += 1;
            continue;
        }
        if html
            && c == 0xe2
            && s.get(i + 1) == Some(&0x80)
            && let Some(&last @ (0xa8 | 0xa9)) = s.get(i + 2)
        {
            out.extend_from_slice(if last == 0xa8 { b"\\u2028" } else { b"\\u2029" });
            i += 3;
            continue;
        }
        match rune_len(s.get(i..).unwrap_or_default()) {
            Some(n) => {
                out.extend_from_slice(s.get(i..i + n).unwrap_or_default());
                i += n;
            }
            None => {
                out.extend_from_slice(b"\\ufffd");
                i += 1;
            }
        }
    }
    out.push(b'"');
}
