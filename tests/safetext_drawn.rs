//! Escape, never strip (issue 14, item 3): nothing the escaper keeps is a character a widget
//! drops or a terminal draws as nothing. Every code point alone at the start of a field is
//! either kept with a display width above zero or escaped; Hangul conjoining vowels and finals
//! are kept only where they join a syllable; code points assigned after Unicode 14.0 (the
//! newest version the width tables of common terminals know) are escaped and badged.

use countersign::safetext::{Badge, Options, SegmentKind, escape_str, text_width};

#[test]
fn every_kept_code_point_has_a_width() {
    let mut blank = Vec::new();
    for opts in [Options::line(), Options::security()] {
        for cp in 0..=0x10FFFFu32 {
            let Some(c) = char::from_u32(cp) else {
                continue;
            };
            let t = escape_str(&c.to_string(), opts);
            for seg in t.segments() {
                if seg.kind() == SegmentKind::Plain && text_width(seg.text()) == 0 {
                    blank.push(format!("U+{cp:04X} ({:?})", opts.field));
                }
            }
        }
    }
    assert!(blank.is_empty(), "kept but drawn as nothing: {blank:?}");
}

#[test]
fn lone_hangul_jamo_are_escaped_and_syllables_kept() {
    let t = escape_str("ord_10\u{1161}\u{11a8}04", Options::security());
    assert_eq!(t.to_string(), "ord_10\\u{1161}\\u{11a8}04");
    assert!(t.badges().contains(Badge::Invisible));
    let t = escape_str("ord_10\u{d7b0}\u{d7cb}04", Options::line());
    assert_eq!(t.to_string(), "ord_10\\u{d7b0}\\u{d7cb}04");
    // A decomposed syllable (L V T) and a precomposed one followed by a final stay as they are.
    for kept in ["\u{1100}\u{1161}\u{11a8}", "\u{ac00}\u{11a8}", "한국어"] {
        let t = escape_str(kept, Options::security());
        assert_eq!(t.to_string(), kept);
        assert!(t.badges().is_empty(), "{kept}");
    }
    // A final after a syllable that already has one does not join (LVT T joins; LV T joins;
    // L T does not).
    assert_eq!(
        escape_str("\u{1100}\u{11a8}", Options::line()).to_string(),
        "\u{1100}\\u{11a8}"
    );
}

/// A leading consonant before another one or before a whole syllable is one grapheme cluster
/// (two columns by UAX #29) that terminals draw as two glyphs (four columns): the console's
/// picture of the screen and the terminal's disagreed, and glyphs stayed behind on the next
/// screen. Such a consonant is escaped; one that begins a syllable (L V) is kept.
#[test]
fn a_leading_consonant_that_starts_no_syllable_is_escaped() {
    for (input, shown) in [
        ("\u{1100}\u{1100}", "\\u{1100}\u{1100}"),
        ("\u{1100}\u{ac00}", "\\u{1100}\u{ac00}"),
        ("\u{1100}\u{1100}\u{1161}", "\\u{1100}\u{1100}\u{1161}"),
        ("x\u{1100}\u{ac01}y", "x\\u{1100}\u{ac01}y"),
    ] {
        let t = escape_str(input, Options::line());
        assert_eq!(t.to_string(), shown, "{input:?}");
        // A terminal (glibc's wcwidth): a leading consonant or a syllable two columns, a
        // vowel or final none, ASCII one.
        let cols = |c: char| match c as u32 {
            0x1100..=0x115f | 0xac00..=0xd7a3 => 2,
            0x1160..=0x11ff => 0,
            _ => 1,
        };
        let drawn: usize = t
            .segments()
            .iter()
            .filter(|s| s.kind() == SegmentKind::Plain)
            .map(|s| s.text().chars().map(cols).sum::<usize>())
            .sum();
        let measured: usize = t
            .segments()
            .iter()
            .filter(|s| s.kind() == SegmentKind::Plain)
            .map(|s| text_width(s.text()))
            .sum();
        assert_eq!(measured, drawn, "as a terminal draws it: {input:?}");
    }
    // A syllable written out (L V, L V T) stays one glyph and is kept.
    assert_eq!(
        escape_str("\u{1100}\u{1161}\u{11a8}", Options::line()).to_string(),
        "\u{1100}\u{1161}\u{11a8}"
    );
}

#[test]
fn code_points_newer_than_unicode_14_are_escaped_and_badged() {
    let t = escape_str(&"\u{1fae9}".repeat(6), Options::security());
    assert_eq!(t.to_string(), "\\u{1fae9}".repeat(6));
    assert!(t.badges().contains(Badge::Invisible));
    // Unicode 15.0 (U+1F6DC wireless), 15.1 (U+2EBF0 CJK ext. I), 16.0 (U+1FAE9, U+1CC00).
    for c in ['\u{1f6dc}', '\u{2ebf0}', '\u{1cc00}'] {
        let t = escape_str(&c.to_string(), Options::line());
        assert_eq!(t.to_string(), format!("\\u{{{:04x}}}", c as u32));
    }
    // Unicode 14.0 itself is kept (U+1FAE0 melting face).
    assert_eq!(
        escape_str("\u{1fae0}", Options::line()).to_string(),
        "\u{1fae0}"
    );
}
