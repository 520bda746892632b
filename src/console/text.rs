//! The console's door to `safetext`: untrusted bytes become styled ratatui spans here and
//! nowhere else, so every widget draws `SafeText` segments (escapes in the escape style, cut
//! markers in the truncated style), measured after escaping.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_segmentation::UnicodeSegmentation;

use crate::safetext::{self, Badge, Mode, Options, SafeText, SegmentKind};

/// Styles the escaper paints with.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextStyles {
    pub text: Style,
    pub escaped: Style,
    pub truncated: Style,
}

/// What a value holds that the reviewer should be warned about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    pub set: safetext::Badges,
    pub escapes: usize,
}

impl Marks {
    fn of(t: &SafeText) -> Marks {
        Marks {
            set: t.badges(),
            escapes: t.escape_count(),
        }
    }
    /// Whether a warning badge (not merely `cut`) is set.
    pub fn any(&self) -> bool {
        self.set.iter().any(|b| b != Badge::Cut)
    }
    /// Labels of the warning badges (`bidi`, `invisible`, `control`, ...).
    pub fn labels(&self) -> Vec<&'static str> {
        self.set
            .iter()
            .filter(|b| *b != Badge::Cut)
            .map(Badge::label)
            .collect()
    }
}

fn style_of(k: SegmentKind, st: &TextStyles) -> Style {
    match k {
        SegmentKind::Plain => st.text,
        SegmentKind::Escape => st.escaped,
        SegmentKind::Cut | SegmentKind::Badge => st.truncated,
        SegmentKind::LineBreak => st.text,
    }
}

/// A one-line rendering of a value.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    pub line: Line<'static>,
    pub width: usize,
}

fn opts(strict: bool) -> Options {
    Options::security().with_mode(if strict { Mode::Strict } else { Mode::Readable })
}

/// One-line cell: newlines and tabs as escapes, cut head-and-tail to `max` columns with a
/// marker saying how many bytes were cut.
pub fn line(raw: &[u8], max: usize, st: &TextStyles) -> Rendered {
    line_mode(raw, max, st, false)
}

pub fn line_mode(raw: &[u8], max: usize, st: &TextStyles, strict: bool) -> Rendered {
    let t = safetext::escape_cut(raw, opts(strict), max);
    let spans: Vec<Span<'static>> = t
        .segments()
        .iter()
        .filter(|s| s.kind() != SegmentKind::LineBreak)
        .map(|s| Span::styled(s.text().to_string(), style_of(s.kind(), st)))
        .collect();
    Rendered {
        width: t.width(),
        line: Line::from(spans),
    }
}

/// A detail block: real line breaks, wrapped at `width` at a space where one is on the line
/// (issue 16), else by grapheme; every escape visible and never split (an escape moves to the
/// next line whole, and only one wider than a line is cut where it must be).
pub fn block(
    raw: &[u8],
    width: usize,
    st: &TextStyles,
    strict: bool,
) -> (Vec<Line<'static>>, Marks) {
    let t = safetext::escape(raw, opts(strict).with_form(safetext::Form::MultiLine));
    let width = width.max(4);
    let mut lines = Vec::new();
    for segs in t.lines() {
        // The line's pieces: (text, style, width), an escape a piece of its own.
        let mut pieces: Vec<(&str, Style, usize)> = Vec::new();
        for s in segs {
            if s.kind() == SegmentKind::LineBreak {
                continue;
            }
            let style = style_of(s.kind(), st);
            let parts: Vec<&str> = if s.kind() == SegmentKind::Escape {
                escape_tokens(s.text())
                    .into_iter()
                    .flat_map(|t| {
                        if safetext::text_width(t) > width {
                            t.graphemes(true).collect()
                        } else {
                            vec![t]
                        }
                    })
                    .collect()
            } else {
                s.text().graphemes(true).collect()
            };
            pieces.extend(
                parts
                    .into_iter()
                    .map(|g| (g, style, safetext::text_width(g))),
            );
        }
        for row in wrap(&pieces, width, st.text) {
            lines.push(spans_of(row));
        }
    }
    if lines.is_empty() {
        lines.push(Line::from(""));
    }
    (lines, Marks::of(&t))
}

/// Greedy wrapping of one line's pieces: a row breaks after its last plain space when the next
/// piece does not fit, else before that piece. A space may hang past the width at a row's end
/// (it is never dropped: it ends that row).
fn wrap<'a>(
    pieces: &[(&'a str, Style, usize)],
    width: usize,
    plain: Style,
) -> Vec<Vec<(&'a str, Style, usize)>> {
    let mut rows = Vec::new();
    let mut cur: Vec<(&'a str, Style, usize)> = Vec::new();
    let mut w = 0;
    // Where the current row may break: just after its last plain space.
    let mut after_space: Option<usize> = None;
    for &p in pieces {
        let space = p.0 == " " && p.1 == plain;
        if w + p.2 > width && w > 0 && !space {
            match after_space {
                Some(b) if b < cur.len() => {
                    let rest = cur.split_off(b);
                    rows.push(std::mem::replace(&mut cur, rest));
                    w = cur.iter().map(|q| q.2).sum();
                }
                _ => {
                    rows.push(std::mem::take(&mut cur));
                    w = 0;
                }
            }
            after_space = None;
            if w + p.2 > width && w > 0 {
                rows.push(std::mem::take(&mut cur));
                w = 0;
            }
        }
        cur.push(p);
        w += p.2;
        if space {
            after_space = Some(cur.len());
        }
    }
    rows.push(cur);
    rows
}

/// A row of pieces as spans, consecutive pieces of one style joined.
fn spans_of(row: Vec<(&str, Style, usize)>) -> Line<'static> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut run = String::new();
    let mut style = None;
    for (g, st, _) in row {
        if style.is_some_and(|s| s != st) {
            spans.push(Span::styled(
                std::mem::take(&mut run),
                style.unwrap_or_default(),
            ));
        }
        style = Some(st);
        run.push_str(g);
    }
    if !run.is_empty() {
        spans.push(Span::styled(run, style.unwrap_or_default()));
    }
    Line::from(spans)
}

/// An escape segment's text split into its escapes: `\xNN`, `\u{...}` and two-character
/// escapes (`\\`, `\n`); text that is not an escape stays one piece per character.
fn escape_tokens(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let len = if c != '\\' {
            c.len_utf8()
        } else if rest[1..].starts_with('x') && rest.len() >= 4 && rest.is_char_boundary(4) {
            4
        } else if rest[1..].starts_with("u{") {
            rest.find('}').map_or(rest.len(), |i| i + 1)
        } else {
            1 + rest[1..].chars().next().map_or(0, char::len_utf8)
        };
        out.push(&rest[..len]);
        rest = &rest[len..];
    }
    out
}

/// `label` then untrusted bytes wrapped whole at `w` (escaped, never cut), later lines
/// indented under the first.
pub fn labelled(
    label: &str,
    raw: &[u8],
    w: usize,
    st: &TextStyles,
    label_style: Style,
) -> Vec<Line<'static>> {
    let lw = label.chars().count();
    let (body, _) = block(raw, w.saturating_sub(lw).max(8), st, false);
    if body.is_empty() {
        return vec![Line::from(Span::styled(label.to_string(), label_style))];
    }
    body.into_iter()
        .enumerate()
        .map(|(i, l)| {
            let head = if i == 0 {
                Span::styled(label.to_string(), label_style)
            } else {
                Span::raw(" ".repeat(lw))
            };
            let mut spans = vec![head];
            spans.extend(l.spans);
            Line::from(spans)
        })
        .collect()
}

/// The reversible escaped form as plain text (what the clipboard and the log get).
pub fn escaped(raw: &[u8]) -> String {
    safetext::escape_reversible(raw, Options::line())
}

/// What a value holds, without rendering it.
pub fn marks(raw: &[u8]) -> Marks {
    Marks::of(&safetext::escape(raw, Options::security()))
}

/// Bytes escaped one by one for the damaged view: printable ASCII as itself, everything else
/// (and backslash) as `\xHH`. Its output is printable ASCII only.
pub fn bytes_escaped(raw: &[u8]) -> String {
    let mut s = String::with_capacity(raw.len());
    for b in raw {
        match b {
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(*b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(raw: &[u8], max: usize) -> String {
        line(raw, max, &TextStyles::default()).line.to_string()
    }

    #[test]
    fn console_cells_escape_controls_bidi_and_invisibles() {
        assert_eq!(plain(b"a\x1b[2Jb", 80), "a\\x1b[2Jb");
        assert_eq!(plain("rm\u{200B} -rf".as_bytes(), 80), "rm\\u{200b} -rf");
        assert_eq!(plain(b"\xff", 80), "\\xff");
        let b = marks("x\u{202E}\u{200B}\x07".as_bytes());
        assert!(
            b.labels().contains(&"bidi") && b.labels().contains(&"control"),
            "{:?}",
            b.labels()
        );
    }

    #[test]
    fn console_cells_fit_their_width_after_escaping() {
        let s = line(
            "x\u{1b}".repeat(5000).as_bytes(),
            30,
            &TextStyles::default(),
        );
        assert!(safetext::escape_cut("x\u{1b}".repeat(5000).as_bytes(), opts(false), 30).is_cut());
        assert!(s.line.width() <= 30);
        let (ls, _) = block(
            "日本語".repeat(40).as_bytes(),
            21,
            &TextStyles::default(),
            false,
        );
        assert!(ls.iter().all(|l| l.width() <= 21));
    }

    /// Issue 16: a line breaks at a space when one is on it, a word longer than the line is
    /// split, and nothing is dropped: the rows joined are the escaped text.
    #[test]
    fn wrapping_breaks_at_spaces_and_keeps_every_character() {
        let raw = b"policy said: issue_refund of 6500 cents is above the automatic limit";
        let (ls, _) = block(raw, 20, &TextStyles::default(), false);
        let rows: Vec<String> = ls.iter().map(|l| l.to_string()).collect();
        assert_eq!(rows.concat(), String::from_utf8_lossy(raw), "{rows:?}");
        assert_eq!(
            rows,
            [
                "policy said: ",
                "issue_refund of 6500 ",
                "cents is above the ",
                "automatic limit"
            ]
        );
        let long = format!("a {}", "b".repeat(30));
        let (ls, _) = block(long.as_bytes(), 12, &TextStyles::default(), false);
        let rows: Vec<String> = ls.iter().map(|l| l.to_string()).collect();
        assert_eq!(rows.concat(), long, "{rows:?}");
        assert_eq!(rows[0], "a ");
        assert!(
            rows[1..].iter().all(|r| r.chars().count() <= 12),
            "{rows:?}"
        );
    }

    /// Issue 16: wrapping never splits an escape (`\u{2` / `029}`).
    #[test]
    fn wrapping_never_splits_an_escape() {
        for width in 10..24 {
            for k in 0..24 {
                let mut raw = "x".repeat(k).into_bytes();
                raw.extend_from_slice("\u{2029}\x1b\u{202e}y".as_bytes());
                let (ls, _) = block(&raw, width, &TextStyles::default(), false);
                let text: Vec<String> = ls.iter().map(|l| l.to_string()).collect();
                for l in &text {
                    assert_eq!(
                        l.matches("\\u{").count(),
                        l.matches('}').count(),
                        "width {width}, {k} x: an escape split in {text:?}"
                    );
                    assert!(!l.ends_with('\\') && !l.ends_with("\\x1"), "{text:?}");
                }
                assert!(ls.iter().all(|l| l.width() <= width.max(10)), "{text:?}");
            }
        }
    }

    #[test]
    fn damaged_bytes_are_shown_byte_by_byte_as_ascii() {
        assert_eq!(bytes_escaped(b"a\\\xff\x1b"), "a\\\\\\xff\\x1b");
    }
}
