//! Width and truncation: head-and-tail cuts by display width, on grapheme boundaries, with a
//! marker that says what was cut, defined for tiny widths, and streaming over huge values.

use countersign::safetext::{
    Badge, Options, SegmentKind, escape, escape_cut, plain_line, plain_line_strict, text_width,
};
use unicode_segmentation::UnicodeSegmentation;

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz";

fn letters(n: usize) -> Vec<u8> {
    (0..n).map(|i| ALPHABET[i % 26]).collect()
}

#[test]
fn a_value_that_fits_is_not_cut() {
    let t = escape_cut(b"hello", Options::line(), 5);
    assert_eq!(t.to_string(), "hello");
    assert!(!t.is_cut());
    assert!(!t.badges().contains(Badge::Cut));
    // Escapes count toward the width: `a\x1b` is 5 columns.
    assert_eq!(plain_line(b"a\x1b", 5), r"a\x1b");
    assert_eq!(plain_line(b"a\x1b", 4), "a…");
}

#[test]
fn cut_says_how_many_bytes_were_left_out() {
    let t = escape_cut(&letters(10_000), Options::line(), 40);
    assert_eq!(t.to_string(), "abcdefghijkl…[+9976 bytes]…efghijklmnop");
    assert_eq!(t.omitted_bytes(), 9976);
    assert!(t.is_cut() && t.badges().contains(Badge::Cut));
    let kinds: Vec<SegmentKind> = t.segments().iter().map(|s| s.kind()).collect();
    assert_eq!(
        kinds,
        [SegmentKind::Plain, SegmentKind::Cut, SegmentKind::Plain]
    );
    assert!(t.decode().is_err());
}

#[test]
fn tiny_widths_shorten_the_marker_and_never_overflow() {
    let v = letters(10_000);
    let expect = [
        (0, ""),
        (1, "…"),
        (2, "a…"),
        (3, "a…p"),
        (4, "ab…p"),
        (5, "ab…op"),
        (19, "abcdefghi…hijklmnop"),
        (20, "abcde…[+9990]…lmnop"),
    ];
    for (w, shown) in expect {
        let t = escape_cut(&v, Options::line(), w);
        assert_eq!(t.to_string(), shown, "width {w}");
        assert!(t.width() <= w);
        assert!(t.is_cut(), "width {w}");
    }
    // Width 0 of an empty value is simply empty, not cut.
    assert!(!escape_cut(b"", Options::line(), 0).is_cut());
}

#[test]
fn strict_cut_marker_is_ascii() {
    let s = plain_line_strict("é".repeat(1000).as_bytes(), 40);
    // The marker takes 19 columns, leaving 11 + 10: one 8-column escape each side.
    assert_eq!(s, r"\u{00e9}...[+1996 bytes]...\u{00e9}");
    assert!(s.is_ascii());
    let s = plain_line_strict("é".repeat(1000).as_bytes(), 60);
    assert!(s.contains("...[+"), "{s}");
}

#[test]
fn escapes_are_never_split_by_a_cut() {
    let v = "\u{202e}".repeat(500);
    for w in 0..40 {
        let t = escape_cut(v.as_bytes(), Options::line(), w);
        assert!(t.width() <= w);
        for seg in t
            .segments()
            .iter()
            .filter(|s| s.kind() == SegmentKind::Escape)
        {
            assert_eq!(seg.text().len() % 8, 0, "width {w}: {}", seg.text());
        }
    }
}

#[test]
fn cuts_fall_on_grapheme_cluster_boundaries() {
    let v = "e\u{301}\u{302}한글".repeat(300);
    let full = escape(v.as_bytes(), Options::line()).to_string();
    let boundaries: Vec<usize> = full.grapheme_indices(true).map(|(i, _)| i).collect();
    for w in 0..60 {
        let t = escape_cut(v.as_bytes(), Options::line(), w);
        assert!(t.width() <= w);
        let segs = t.segments();
        if let Some(i) = segs.iter().position(|s| s.kind() == SegmentKind::Cut) {
            let head: String = segs[..i].iter().map(|s| s.text()).collect();
            let tail: String = segs[i + 1..].iter().map(|s| s.text()).collect();
            assert!(boundaries.contains(&head.len()) || head.len() == full.len());
            let tail_start = full.len() - tail.len();
            assert!(
                boundaries.contains(&tail_start) || tail.is_empty(),
                "w {w}: {tail}"
            );
        }
    }
}

#[test]
fn cutting_16_mib_to_one_line_examines_only_head_and_tail() {
    let mut v = letters(16 << 20);
    v.extend_from_slice("終わり".as_bytes());
    let t = escape_cut(&v, Options::line(), 80);
    assert!(t.width() <= 80);
    assert!(t.to_string().ends_with("終わり"), "{t}");
    assert!(
        t.examined_bytes() < 64 * 1024,
        "examined {} bytes of {}",
        t.examined_bytes(),
        v.len()
    );
    assert_eq!(
        t.omitted_bytes() + text_of(&t).len() - marker_len(&t),
        v.len()
    );
}

fn text_of(t: &countersign::safetext::SafeText) -> String {
    t.to_string()
}

fn marker_len(t: &countersign::safetext::SafeText) -> usize {
    t.segments()
        .iter()
        .filter(|s| s.kind() == SegmentKind::Cut)
        .map(|s| s.text().len())
        .sum()
}

#[test]
fn cutting_text_without_ascii_still_streams() {
    let v = "日本語のテキスト".repeat(200_000); // 4.8 MB, no ASCII at all
    let t = escape_cut(v.as_bytes(), Options::line(), 60);
    assert!(t.width() <= 60);
    assert!(
        t.examined_bytes() < 64 * 1024,
        "examined {}",
        t.examined_bytes()
    );
    let s = t.to_string();
    assert!(s.starts_with("日本語の") && s.ends_with("テキスト"), "{s}");
}

#[test]
fn pathological_clusters_stay_within_the_width() {
    // One base and 65 536 combining marks; 192 KiB of conjoining jamo (one cluster).
    let mut zalgo = b"a".to_vec();
    zalgo.extend("\u{301}".repeat(1 << 16).as_bytes());
    let jamo = "\u{1100}".repeat(1 << 16);
    for v in [zalgo.as_slice(), jamo.as_bytes()] {
        for w in [0, 1, 10, 40, 80] {
            let t = escape_cut(v, Options::line(), w);
            assert!(t.width() <= w, "width {} > {w}: {t}", t.width());
            assert!(t.is_cut());
        }
    }
    let t = escape_cut(&zalgo, Options::line(), 80);
    assert_eq!(
        t.to_string(),
        "a\u{301}\u{301}\u{301}\u{301}[+65532 combining marks dropped]"
    );
}

#[test]
fn width_is_measured_after_escaping() {
    // unicode-width would count ESC as 1 column; shown as `\x1b` it is 4.
    assert_eq!(escape(b"\x1b", Options::line()).width(), 4);
    assert_eq!(
        escape("日\u{200b}".as_bytes(), Options::line()).width(),
        2 + 8
    );
    assert_eq!(text_width("e\u{301}"), 1);
    // The multi-line width is the widest line.
    assert_eq!(escape(b"ab\nabcd\n", Options::multi_line()).width(), 4);
}

#[test]
fn wrap_breaks_rows_between_graphemes_and_escapes() {
    let t = escape("ab\u{202e}cd日本\nnext".as_bytes(), Options::multi_line());
    let rows: Vec<String> = t.wrap(10).iter().map(|r| r.to_string()).collect();
    assert_eq!(rows, [r"ab\u{202e}", "cd日本", "next"]);
    for w in 2..12 {
        for row in t.wrap(w) {
            assert!(row.width() <= w, "width {w}: {row}");
        }
    }
    // An escape wider than the row is split by column rather than overflow.
    let rows: Vec<String> = t.wrap(4).iter().map(|r| r.to_string()).collect();
    assert_eq!(rows, ["ab", r"\u{2", r"02e}", "cd日", "本", "next"]);
    // The first row speaks for the whole value.
    assert!(t.wrap(4)[0].badges().contains(Badge::Bidi));
    assert_eq!(t.wrap(4)[0].escape_count(), 1);
}

#[test]
fn an_unbounded_width_is_the_full_escape() {
    let v = format!("a\x1b{}\u{202e}", "\u{301}".repeat(9));
    assert_eq!(
        plain_line(v.as_bytes(), usize::MAX),
        escape(v.as_bytes(), Options::line()).to_string()
    );
    assert_eq!(
        plain_line(v.as_bytes(), usize::MAX),
        r"a\x1b\u{0301}\u{0301}\u{0301}\u{0301}\u{0301}\u{0301}\u{0301}\u{0301}\u{0301}\u{202e}"
    );
}
