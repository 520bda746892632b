//! The console's single door for untrusted text: bytes from the database become styled spans
//! here and nowhere else. Escape, never strip; measure after escaping; cut by grapheme with a
//! visible marker (design note untrusted-text.md).
//!
//! Interim: this carries its own escaper until the project's `safetext` module lands; every
//! caller goes through `line`, `block`, `badges` and `escaped`, so switching is local to this
//! file.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_general_category::{GeneralCategory as G, get_general_category};
use unicode_script::{Script, UnicodeScript};
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

/// Styles the escaper paints with.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextStyles {
    pub text: Style,
    pub escaped: Style,
    pub truncated: Style,
}

/// Combining marks kept on one base before the rest are counted and cut.
const MAX_MARKS: usize = 3;

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    /// A grapheme shown as itself.
    Text(String),
    /// An escape notation (`\x1b`, `\u{202e}`, `\\`, `\xff`).
    Esc(String),
    /// A line feed (an escape in one-line cells, a break in blocks).
    Newline,
}

/// What the escaper found in a value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Badges {
    pub bidi: bool,
    pub invisible: bool,
    pub control: bool,
    pub mixed_script: bool,
    pub escapes: usize,
}

impl Badges {
    pub fn any(&self) -> bool {
        self.bidi || self.invisible || self.control || self.mixed_script
    }
    /// Short labels: `BIDI`, `HIDDEN`, `CTRL`, `MIXED`.
    pub fn labels(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.bidi {
            v.push("BIDI");
        }
        if self.invisible {
            v.push("HIDDEN");
        }
        if self.control {
            v.push("CTRL");
        }
        if self.mixed_script {
            v.push("MIXED");
        }
        v
    }
}

fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

fn is_noncharacter(c: char) -> bool {
    let u = c as u32;
    (0xFDD0..=0xFDEF).contains(&u) || (u & 0xFFFE) == 0xFFFE
}

/// Why a char is escaped, if it is.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Plain,
    Control,
    Bidi,
    Invisible,
}

fn classify(c: char, strict: bool) -> Kind {
    if c == '\\' {
        return Kind::Invisible; // escaped so data cannot forge our notation; not badged
    }
    if c.is_control() {
        return Kind::Control;
    }
    if is_bidi(c) {
        return Kind::Bidi;
    }
    if matches!(
        c,
        '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' | '\u{2800}' | '\u{034F}' | '\u{FFF9}'..='\u{FFFC}'
            | '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}'
    ) || is_noncharacter(c)
    {
        return Kind::Invisible;
    }
    match get_general_category(c) {
        G::Format | G::PrivateUse | G::Unassigned | G::Surrogate | G::LineSeparator
        | G::ParagraphSeparator => Kind::Invisible,
        G::SpaceSeparator if c != ' ' => Kind::Invisible,
        _ if strict && !c.is_ascii() => Kind::Invisible,
        _ => Kind::Plain,
    }
}

fn is_mark(c: char) -> bool {
    matches!(get_general_category(c), G::NonspacingMark | G::SpacingMark | G::EnclosingMark)
}

fn notation(c: char) -> String {
    match c {
        '\\' => "\\\\".into(),
        '\n' => "\\n".into(),
        '\t' => "\\t".into(),
        '\r' => "\\r".into(),
        c if (c as u32) < 0x80 => format!("\\x{:02x}", c as u32),
        c => format!("\\u{{{:x}}}", c as u32),
    }
}

/// Splits stored bytes into pieces; invalid UTF-8 bytes become `\xHH` escapes.
fn pieces(raw: &[u8], strict: bool, badges: &mut Badges) -> Vec<(Piece, usize)> {
    let mut out = Vec::new();
    let mut rest = raw;
    let mut field_start = true;
    let mut scripts: [bool; 4] = [false; 4];
    while !rest.is_empty() {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, 0),
            Err(e) => {
                let v = e.valid_up_to();
                // SAFETY-free: from_utf8 on the valid prefix cannot fail.
                let s = std::str::from_utf8(&rest[..v]).unwrap_or("");
                (s, e.error_len().unwrap_or(rest.len() - v))
            }
        };
        for g in valid.graphemes(true) {
            let mut chars = g.chars();
            let Some(first) = chars.next() else { continue };
            let kind = classify(first, strict);
            if g.chars().count() == 1 || kind != Kind::Plain || field_start && is_mark(first) {
                // Escape char by char when the cluster holds anything escapable.
                for c in g.chars() {
                    push_char(&mut out, c, strict, field_start, badges, &mut scripts);
                    field_start = false;
                }
                continue;
            }
            // A cluster: base plus extenders. Escape any escapable extender; keep marks up to MAX_MARKS.
            if g.chars().any(|c| classify(c, strict) != Kind::Plain) {
                for c in g.chars() {
                    push_char(&mut out, c, strict, false, badges, &mut scripts);
                }
                field_start = false;
                continue;
            }
            note_script(first, &mut scripts);
            let marks = g.chars().skip(1).filter(|c| is_mark(*c)).count();
            if marks > MAX_MARKS {
                let kept: String = g.chars().take(1 + MAX_MARKS).collect();
                let cut_bytes = g.len() - kept.len();
                out.push((Piece::Text(kept.clone()), kept.len()));
                out.push((Piece::Esc(format!("…[+{} marks]", marks - MAX_MARKS)), cut_bytes));
                badges.invisible = true;
                badges.escapes += 1;
            } else {
                out.push((Piece::Text(g.to_string()), g.len()));
            }
            field_start = false;
        }
        let consumed = valid.len();
        if bad > 0 {
            for b in &rest[consumed..consumed + bad] {
                out.push((Piece::Esc(format!("\\x{b:02x}")), 1));
                badges.control = true;
                badges.escapes += 1;
            }
            field_start = false;
        }
        rest = &rest[consumed + bad..];
    }
    badges.mixed_script = scripts.iter().filter(|s| **s).count() > 1;
    out
}

fn note_script(c: char, scripts: &mut [bool; 4]) {
    match c.script() {
        Script::Latin => scripts[0] = true,
        Script::Cyrillic => scripts[1] = true,
        Script::Greek => scripts[2] = true,
        Script::Armenian | Script::Cherokee => scripts[3] = true,
        _ => {}
    }
}

fn push_char(
    out: &mut Vec<(Piece, usize)>,
    c: char,
    strict: bool,
    field_start: bool,
    badges: &mut Badges,
    scripts: &mut [bool; 4],
) {
    let len = c.len_utf8();
    if c == '\n' {
        out.push((Piece::Newline, 1));
        return;
    }
    let kind = classify(c, strict);
    let kind = if kind == Kind::Plain && field_start && is_mark(c) { Kind::Invisible } else { kind };
    match kind {
        Kind::Plain => {
            note_script(c, scripts);
            out.push((Piece::Text(c.to_string()), len));
        }
        k => {
            match k {
                Kind::Control => badges.control = true,
                Kind::Bidi => badges.bidi = true,
                _ if c != '\\' && !(strict && classify(c, false) == Kind::Plain) => {
                    badges.invisible = true
                }
                _ => {}
            }
            if c != '\\' {
                badges.escapes += 1;
            }
            out.push((Piece::Esc(notation(c)), len));
        }
    }
}

fn piece_width(p: &Piece) -> usize {
    match p {
        Piece::Text(s) | Piece::Esc(s) => s.width(),
        Piece::Newline => 2,
    }
}

fn span(p: &Piece, st: &TextStyles) -> Span<'static> {
    match p {
        Piece::Text(s) => Span::styled(s.clone(), st.text),
        Piece::Esc(s) => Span::styled(s.clone(), st.escaped),
        Piece::Newline => Span::styled("\\n", st.escaped),
    }
}

/// A one-line rendering of a value.
#[derive(Debug, Clone, Default)]
pub struct Shown {
    pub line: Line<'static>,
    pub width: usize,
    pub cut: bool,
    pub badges: Badges,
}

/// One-line cell: newlines and tabs as escapes, cut head-and-tail to `max` columns with a
/// marker saying how many bytes were cut.
pub fn line(raw: &[u8], max: usize, st: &TextStyles) -> Shown {
    line_mode(raw, max, st, false)
}

pub fn line_mode(raw: &[u8], max: usize, st: &TextStyles, strict: bool) -> Shown {
    let mut badges = Badges::default();
    let ps = pieces(raw, strict, &mut badges);
    let total: usize = ps.iter().map(|(p, _)| piece_width(p)).sum();
    if total <= max {
        let spans: Vec<_> = ps.iter().map(|(p, _)| span(p, st)).collect();
        return Shown { line: Line::from(spans), width: total, cut: false, badges };
    }
    // Head and tail around a marker; the marker's size depends on the cut, so fit twice.
    let mut marker = String::from("…[+0 bytes]…");
    let mut out = Vec::new();
    for _ in 0..2 {
        let budget = max.saturating_sub(marker.width());
        let head_budget = budget.div_ceil(2);
        let tail_budget = budget - head_budget;
        let (mut hw, mut hi) = (0, 0);
        while hi < ps.len() && hw + piece_width(&ps[hi].0) <= head_budget {
            hw += piece_width(&ps[hi].0);
            hi += 1;
        }
        let (mut tw, mut ti) = (0, ps.len());
        while ti > hi && tw + piece_width(&ps[ti - 1].0) <= tail_budget {
            tw += piece_width(&ps[ti - 1].0);
            ti -= 1;
        }
        let cut: usize = ps[hi..ti].iter().map(|(_, n)| *n).sum();
        let m = format!("…[+{} bytes]…", group(cut));
        out = ps[..hi].iter().map(|(p, _)| span(p, st)).collect::<Vec<_>>();
        out.push(Span::styled(m.clone(), st.truncated));
        out.extend(ps[ti..].iter().map(|(p, _)| span(p, st)));
        if m == marker {
            break;
        }
        marker = m;
    }
    let line = Line::from(out);
    let width = line.width().min(max);
    if line.width() > max {
        // Too narrow even for the marker: show only as much of the marker as fits.
        let m: String = "…".into();
        return Shown { line: Line::from(Span::styled(m, st.truncated)), width: 1.min(max), cut: true, badges };
    }
    Shown { line, width, cut: true, badges }
}

/// Thousands grouped with a thin space as the design note writes them (`9 812`).
pub fn group(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// A detail block: real line breaks, hard-wrapped at `width`, every escape visible.
pub fn block(raw: &[u8], width: usize, st: &TextStyles, strict: bool) -> (Vec<Line<'static>>, Badges) {
    let mut badges = Badges::default();
    let ps = pieces(raw, strict, &mut badges);
    let width = width.max(4);
    let mut lines = Vec::new();
    let mut cur: Vec<Span<'static>> = Vec::new();
    let mut w = 0;
    for (p, _) in &ps {
        if *p == Piece::Newline {
            lines.push(Line::from(std::mem::take(&mut cur)));
            w = 0;
            continue;
        }
        let pw = piece_width(p);
        if w + pw > width && w > 0 {
            lines.push(Line::from(std::mem::take(&mut cur)));
            w = 0;
        }
        cur.push(span(p, st));
        w += pw;
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(Line::from(cur));
    }
    (lines, badges)
}

/// The escaped form as plain text (what the clipboard gets).
pub fn escaped(raw: &[u8]) -> String {
    let mut b = Badges::default();
    pieces(raw, false, &mut b)
        .into_iter()
        .map(|(p, _)| match p {
            Piece::Text(s) | Piece::Esc(s) => s,
            Piece::Newline => "\\n".into(),
        })
        .collect()
}

/// What a value holds, without rendering it.
pub fn badges(raw: &[u8]) -> Badges {
    let mut b = Badges::default();
    pieces(raw, false, &mut b);
    b
}

/// Bytes escaped one by one for the damaged view: printable ASCII as itself, everything else
/// (and backslash) as `\xHH`.
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
    fn controls_bidi_and_invisibles_are_escaped_not_stripped() {
        assert_eq!(plain(b"a\x1b[2Jb", 80), "a\\x1b[2Jb");
        assert_eq!(plain("user\u{202E}nimda".as_bytes(), 80), "user\\u{202e}nimda");
        assert_eq!(plain("rm\u{200B} -rf".as_bytes(), 80), "rm\\u{200b} -rf");
        assert_eq!(plain(b"a\\x1b", 80), "a\\\\x1b");
        assert_eq!(plain(b"\xff\xfe", 80), "\\xff\\xfe");
        assert_eq!(plain("a\u{85}b".as_bytes(), 80), "a\\u{85}b");
        let b = badges("x\u{202E}\u{200B}\x07".as_bytes());
        assert!(b.bidi && b.invisible && b.control);
    }

    #[test]
    fn letters_of_every_script_stay() {
        assert_eq!(plain("عربى עברית 日本 हिन्दी".as_bytes(), 80), "عربى עברית 日本 हिन्दी");
        assert!(badges("pаypal".as_bytes()).mixed_script, "Cyrillic a in a Latin word");
    }

    #[test]
    fn cut_values_say_how_much_was_cut_and_fit() {
        let raw = "x".repeat(10_000);
        let s = line(raw.as_bytes(), 30, &TextStyles::default());
        assert!(s.cut);
        assert!(s.line.width() <= 30, "{}", s.line.width());
        assert!(s.line.to_string().contains("bytes]…"));
        let wide = "日".repeat(100);
        let s = line(wide.as_bytes(), 21, &TextStyles::default());
        assert!(s.line.width() <= 21);
    }

    #[test]
    fn zalgo_keeps_a_few_marks_and_counts_the_rest() {
        let z = format!("a{}", "\u{301}".repeat(40));
        assert_eq!(plain(z.as_bytes(), 80), format!("a{}…[+37 marks]", "\u{301}".repeat(3)));
        assert_eq!(plain("\u{301}x".as_bytes(), 80), "\\u{301}x");
    }
}
