//! The boundary check (spec 5.2): six checks, in the spec's order, each over the whole input
//! before the next begins, so the reported reason does not depend on where problems sit.

use std::collections::HashSet;

use super::JsonError;
use super::parse::{Doc, Node, Strings, parse_exact, run_len};

/// More than this many open `[`/`{` is refused before anything else looks at the input.
pub(super) const MAX_DEPTH: i64 = 256;
/// Longest number literal accepted, in bytes.
pub(super) const MAX_NUMBER_LEN: usize = 10_000;
/// Largest exponent magnitude accepted.
pub(super) const MAX_EXPONENT: u32 = 10_000;

pub(super) fn check(raw: &[u8]) -> Result<Doc, JsonError> {
    check_depth(raw)?;
    if std::str::from_utf8(raw).is_err() {
        return Err(JsonError::InvalidUtf8);
    }
    let doc = parse_exact(raw).ok_or(JsonError::Invalid)?;
    if let Some(hex) = &doc.first_unpaired {
        return Err(JsonError::UnpairedSurrogate(hex.clone()));
    }
    check_tokens(&doc, raw)?;
    check_numbers(&doc, raw)?;
    Ok(doc)
}

/// Check 1 alone: refuses input nested deeper than [`MAX_DEPTH`], valid or not.
pub(super) fn depth_within_bound(raw: &[u8]) -> Result<(), JsonError> {
    check_depth(raw)
}

/// Whether `raw` opens at most `max` levels at once (the count check 1 makes).
pub(super) fn depth_at_most(raw: &[u8], max: i64) -> bool {
    walk_depth(raw, max).is_ok()
}

/// Check 1, depth: `[`/`{` outside strings (escape-aware), closers decrement. Needs no valid input.
/// A stray closer may take the count below zero; it is not clamped (such input is refused as
/// not valid JSON anyway, only the reason could differ).
fn check_depth(raw: &[u8]) -> Result<(), JsonError> {
    walk_depth(raw, MAX_DEPTH)
}

/// Check 1's count, against `max`.
fn walk_depth(raw: &[u8], max: i64) -> Result<(), JsonError> {
    let mut depth = 0i64;
    let mut strings = Strings::default();
    let mut i = 0;
    while let Some(&c) = raw.get(i) {
        if strings.in_plain_string() {
            // The rest of a string up to its next `\` or `"` changes nothing here.
            let n = run_len(raw.get(i..).unwrap_or_default(), |b| {
                (b == b'\\') | (b == b'"')
            });
            if n > 0 {
                i += n;
                continue;
            }
        }
        i += 1;
        if !strings.outside(c) {
            continue;
        }
        match c {
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Err(JsonError::TooDeep);
                }
            }
            b']' | b'}' => depth -= 1,
            _ => {}
        }
    }
    Ok(())
}

/// Check 5, the token walk in document order: a repeated key in one object, or a number nested in an
/// array/object that Go's `strconv.ParseFloat` would put outside float64 range (it decodes
/// such tokens without `UseNumber`). A top-level number is not decoded by that walk.
fn check_tokens(doc: &Doc, raw: &[u8]) -> Result<(), JsonError> {
    struct Open<'d> {
        id: usize,
        next: usize,
        seen: HashSet<&'d [u8]>,
    }
    let mut stack = vec![Open {
        id: 0,
        next: 0,
        seen: HashSet::new(),
    }];
    while let Some(top) = stack.last_mut() {
        let child = match doc.nodes.get(top.id) {
            Some(Node::Arr(items)) => items.get(top.next).copied(),
            Some(Node::Obj(members)) => match members.get(top.next) {
                Some((k, v)) => {
                    let key = doc.str_bytes(k);
                    if !top.seen.insert(key) {
                        let key = String::from_utf8_lossy(key).into_owned();
                        return Err(JsonError::DuplicateKey(key));
                    }
                    Some(*v)
                }
                None => None,
            },
            _ => None,
        };
        let Some(child) = child else {
            stack.pop();
            continue;
        };
        top.next += 1;
        match doc.nodes.get(child) {
            Some(Node::Num(r)) => {
                let lit = raw.get(r.clone()).unwrap_or_default();
                if out_of_float64_range(lit) {
                    let lit = String::from_utf8_lossy(lit).into_owned();
                    return Err(JsonError::NumberOutOfRange(lit));
                }
            }
            Some(Node::Arr(_) | Node::Obj(_)) => stack.push(Open {
                id: child,
                next: 0,
                seen: HashSet::new(),
            }),
            _ => {}
        }
    }
    Ok(())
}

/// Rust's `f64` parsing rounds correctly like Go's; overflow gives infinity where Go reports
/// `ErrRange`. Underflow to zero is no error in either.
fn out_of_float64_range(lit: &[u8]) -> bool {
    std::str::from_utf8(lit)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .is_none_or(f64::is_infinite)
}

/// Check 6, every number literal in document order: length first, then the exponent.
fn check_numbers(doc: &Doc, raw: &[u8]) -> Result<(), JsonError> {
    for node in &doc.nodes {
        let Node::Num(r) = node else { continue };
        let lit = raw.get(r.clone()).unwrap_or_default();
        if lit.len() > MAX_NUMBER_LEN {
            let head = lit.get(..24).unwrap_or(lit);
            return Err(JsonError::NumberTooLong(
                String::from_utf8_lossy(head).into_owned(),
            ));
        }
        if let Some(e) = lit.iter().position(|&c| c == b'e' || c == b'E') {
            let digits = lit.get(e + 1..).unwrap_or_default();
            let digits = digits.strip_prefix(b"+").unwrap_or(digits);
            let digits = digits.strip_prefix(b"-").unwrap_or(digits);
            let first = digits
                .iter()
                .position(|&c| c != b'0')
                .unwrap_or(digits.len());
            let digits = digits.get(first..).unwrap_or_default();
            let too_big = digits.len() > 5
                || std::str::from_utf8(digits)
                    .ok()
                    .and_then(|s| {
                        if s.is_empty() {
                            Some(0)
                        } else {
                            s.parse::<u32>().ok()
                        }
                    })
                    .is_none_or(|v| v > MAX_EXPONENT);
            if too_big {
                return Err(JsonError::ExponentTooLarge(
                    String::from_utf8_lossy(lit).into_owned(),
                ));
            }
        }
    }
    Ok(())
}

/// Go's `strconv.Quote` (what `%q` prints): `"` and `\` escaped, printable runes raw
/// (`unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and U+0020), `\a \b \f
/// \n \r \t \v`, other bytes below 0x20 and 0x7F as `\xHH`, other runes as `\uHHHH` or
/// `\UHHHHHHHH`.
pub fn go_quote(s: &str) -> String {
    use std::fmt::Write;
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            ' ' => out.push(' '),
            _ => {
                let printable = !matches!(
                    get_general_category(c),
                    G::Control
                        | G::Format
                        | G::Surrogate
                        | G::PrivateUse
                        | G::Unassigned
                        | G::SpaceSeparator
                        | G::LineSeparator
                        | G::ParagraphSeparator
                );
                let cp = u32::from(c);
                let _ = if printable {
                    out.write_char(c)
                } else if cp < 0x20 || cp == 0x7f {
                    write!(out, "\\x{cp:02x}")
                } else if cp < 0x10000 {
                    write!(out, "\\u{cp:04x}")
                } else {
                    write!(out, "\\U{cp:08x}")
                };
            }
        }
    }
    out.push('"');
    out
}
