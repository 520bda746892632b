//! One test per category of design/untrusted-text.md ("Categories a suite should cover"),
//! asserting the exact escaped output.

use countersign::safetext::{
    Badge, Options, SegmentKind, decode, escape, escape_cut, escape_reversible, plain_line,
};

/// Readable one-line prose form as a string.
fn line(input: &str) -> String {
    escape(input.as_bytes(), Options::line()).to_string()
}

fn security(input: &str) -> String {
    escape(input.as_bytes(), Options::security()).to_string()
}

/// Asserts the readable one-line output and that it decodes back to the input.
fn check(input: &str, expected: &str) {
    assert_eq!(line(input), expected, "input {input:?}");
    assert_eq!(
        decode(expected).unwrap(),
        input.as_bytes(),
        "decode {expected:?}"
    );
}

#[test]
fn sgr_colour_is_escaped() {
    check("\x1b[31mred\x1b[0m", r"\x1b[31mred\x1b[0m");
    check("\x1b[38;2;255;0;0mx", r"\x1b[38;2;255;0;0mx");
}

#[test]
fn clear_screen_and_cursor_moves_are_escaped() {
    check(
        "\x1b[2J\x1b[H\x1b[10;20Hx\x1b[A",
        r"\x1b[2J\x1b[H\x1b[10;20Hx\x1b[A",
    );
    check("\x1b7\x1b8\x1bc", r"\x1b7\x1b8\x1bc");
}

#[test]
fn carriage_return_and_backspace_overstrike_are_escaped() {
    check("safe\rrm -rf /", r"safe\rrm -rf /");
    check("abc\x08\x08\x08xyz", r"abc\x08\x08\x08xyz");
}

#[test]
fn osc_title_clipboard_hyperlink_and_notification_are_escaped() {
    check("\x1b]0;pwned\x07", r"\x1b]0;pwned\x07");
    check("\x1b]52;c;cm0gLXJmIC8=\x07", r"\x1b]52;c;cm0gLXJmIC8=\x07");
    check(
        "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\",
        r"\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\",
    );
    check(
        "\x1b]9;hi\x07\x1b]777;notify;a;b\x07",
        r"\x1b]9;hi\x07\x1b]777;notify;a;b\x07",
    );
}

#[test]
fn queries_that_make_the_terminal_reply_are_escaped() {
    check("\x1b[c\x1b[6n\x1b[21t\x05", r"\x1b[c\x1b[6n\x1b[21t\x05");
    check("\x1bP$qm\x1b\\", r"\x1bP$qm\x1b\\");
}

#[test]
fn dcs_apc_pm_sos_and_unterminated_strings_are_escaped() {
    check("\x1bPq#0;2;0;0;0\x1b\\", r"\x1bPq#0;2;0;0;0\x1b\\");
    check(
        "\x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\",
        r"\x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\",
    );
    check("\x1b]0;never ends", r"\x1b]0;never ends");
}

#[test]
fn c1_controls_as_code_points_are_escaped() {
    // Readable and strict both write C1 code points as \u{00XX}: \xNN above 0x7f means an
    // invalid byte, so the two stay distinguishable (agentrt writes \x9b for U+009B).
    check(
        "\u{9b}2J\u{90}q\u{9d}0;t\u{9c}",
        r"\u{009b}2J\u{0090}q\u{009d}0;t\u{009c}",
    );
    let t = escape("\u{9b}".as_bytes(), Options::line());
    assert!(t.badges().contains(Badge::Control));
}

#[test]
fn invalid_utf8_is_shown_as_bytes_not_replacement_characters() {
    let input = b"ok \xff\xfe \xc3( \xe2\x82 \xed\xa0\x80";
    let t = escape(input, Options::line());
    assert_eq!(t.to_string(), r"ok \xff\xfe \xc3( \xe2\x82 \xed\xa0\x80");
    assert!(!t.to_string().contains('\u{fffd}'));
    assert!(t.badges().contains(Badge::InvalidUtf8));
    assert_eq!(t.decode().unwrap(), input);
}

#[test]
fn nul_bel_vt_ff_del_are_escaped() {
    check("\0\x07\x0b\x0c\x7f", r"\x00\x07\x0b\x0c\x7f");
}

#[test]
fn tab_and_lf_are_escapes_in_one_line_cells_and_breaks_in_detail_views() {
    check("a\tb\nc\r\n", r"a\tb\nc\r\n");
    let t = escape(b"a\tb\nc\r\nd", Options::multi_line());
    assert_eq!(t.line_count(), 3);
    let lines: Vec<String> = t
        .lines()
        .map(|l| l.iter().map(|s| s.text()).collect())
        .collect();
    assert_eq!(lines, [r"a\tb", r"c\r", "d"]);
    assert_eq!(t.decode().unwrap(), b"a\tb\nc\r\nd");
}

#[test]
fn line_and_paragraph_separators_and_nel_are_escaped() {
    check(
        "a\u{2028}b\u{2029}c\u{85}d",
        r"a\u{2028}b\u{2029}c\u{0085}d",
    );
}

#[test]
fn bidi_overrides_and_unbalanced_isolates_are_escaped() {
    check("user\u{202e}nimda", r"user\u{202e}nimda");
    check("\u{2067}abc", r"\u{2067}abc");
    check(
        "\u{202a}\u{202b}\u{202c}\u{202d}\u{2066}\u{2066}x\u{2069}\u{2068}",
        r"\u{202a}\u{202b}\u{202c}\u{202d}\u{2066}\u{2066}x\u{2069}\u{2068}",
    );
    assert!(
        escape("a\u{202e}b".as_bytes(), Options::line())
            .badges()
            .contains(Badge::Bidi)
    );
}

#[test]
fn implicit_bidi_marks_are_escaped() {
    check(
        "a\u{200e}b\u{200f}c\u{61c}d",
        r"a\u{200e}b\u{200f}c\u{061c}d",
    );
}

#[test]
fn legitimate_rtl_text_is_kept_without_badges() {
    for text in ["שלום עולם", "مرحبا بالعالم", "نام: علی (۱۲۳)"] {
        let t = escape(text.as_bytes(), Options::line());
        assert_eq!(t.to_string(), text);
        assert!(t.badges().is_empty(), "{text}: {:?}", t.badges());
    }
}

#[test]
fn zero_width_joiners_inside_commands_are_escaped() {
    check("rm\u{200d} -rf /", r"rm\u{200d} -rf /");
    check(
        "rm\u{200b}\u{200c}\u{2060} -rf",
        r"rm\u{200b}\u{200c}\u{2060} -rf",
    );
    let t = escape("rm\u{200b} -rf".as_bytes(), Options::line());
    assert!(t.badges().contains(Badge::Invisible));
}

#[test]
fn byte_order_mark_is_escaped() {
    check("\u{feff}hello", r"\u{feff}hello");
}

#[test]
fn soft_hyphen_is_escaped() {
    check("pass\u{ad}word", r"pass\u{00ad}word");
}

#[test]
fn tag_characters_are_escaped() {
    check(
        "a\u{e0001}\u{e0041}\u{e007f}",
        r"a\u{e0001}\u{e0041}\u{e007f}",
    );
    // The tag sequence of a subdivision flag keeps its base and shows the tags.
    check(
        "🏴\u{e0067}\u{e0062}\u{e007f}",
        r"🏴\u{e0067}\u{e0062}\u{e007f}",
    );
}

#[test]
fn variation_selectors_are_escaped_in_security_fields_and_after_ascii_letters() {
    assert_eq!(line("❤\u{fe0f}"), "❤\u{fe0f}");
    assert_eq!(security("❤\u{fe0f}"), r"❤\u{fe0f}");
    assert_eq!(line("a\u{fe0f}b\u{fe00}"), r"a\u{fe0f}b\u{fe00}");
    assert_eq!(line("\u{fe0f}x"), r"\u{fe0f}x");
    assert_eq!(security("葛\u{e0100}"), r"葛\u{e0100}");
}

#[test]
fn zalgo_stacks_keep_four_marks_and_say_how_many_were_dropped() {
    let input = format!("Z{}!", "\u{301}\u{302}".repeat(10));
    let t = escape(input.as_bytes(), Options::line());
    assert_eq!(
        t.to_string(),
        "Z\u{301}\u{302}\u{301}\u{302}[+16 combining marks dropped]!"
    );
    assert_eq!(t.marks_dropped(), 16);
    assert!(t.is_cut() && t.badges().contains(Badge::Cut));
    let cut: Vec<_> = t
        .segments()
        .iter()
        .filter(|s| s.kind() == SegmentKind::Cut)
        .collect();
    assert_eq!(cut.len(), 1);
    // The reversible form escapes the excess instead.
    let full = escape_reversible(input.as_bytes(), Options::line());
    assert_eq!(
        full,
        format!(
            "Z\u{301}\u{302}\u{301}\u{302}{}!",
            r"\u{0301}\u{0302}".repeat(8)
        )
    );
    assert_eq!(decode(&full).unwrap(), input.as_bytes());
}

#[test]
fn a_leading_combining_mark_is_escaped() {
    check("\u{301}abc", r"\u{0301}abc");
    // A mark after an escape would sit on the escape's last character: escaped too.
    check("\x1b\u{301}", r"\x1b\u{0301}");
    let t = escape("a\n\u{301}b".as_bytes(), Options::multi_line());
    assert_eq!(t.to_string(), "a\n\\u{0301}b");
}

#[test]
fn mixed_script_homoglyphs_get_a_badge() {
    let t = escape("pаypal.com".as_bytes(), Options::line()); // Cyrillic а
    assert_eq!(t.to_string(), "pаypal.com");
    assert!(t.badges().contains(Badge::MixedScript));
    for fine in [
        "paypal.com",
        "日本語のテキストとカタカナ",
        "한국어 漢字",
        "Grüße ελληνικά",
    ] {
        let t = escape(fine.as_bytes(), Options::line());
        assert!(!t.badges().contains(Badge::MixedScript), "{fine}");
    }
}

#[test]
fn fullwidth_and_mathematical_letters_are_kept_with_a_badge_and_escaped_in_strict_mode() {
    for text in ["ｒｍ -ｒｆ", "𝐫𝐦 -𝐫𝐟", "ⓡⓜ"] {
        let t = escape(text.as_bytes(), Options::line());
        assert_eq!(t.to_string(), text);
        assert!(t.badges().contains(Badge::Lookalike), "{text}");
    }
    let strict = escape("ｒｍ 𝐫".as_bytes(), Options::strict());
    assert_eq!(strict.to_string(), r"\u{ff52}\u{ff4d} \u{1d42b}");
    // The strict view still badges what the letters are.
    assert!(strict.badges().contains(Badge::Lookalike));
    let strict = escape("pаypal".as_bytes(), Options::strict());
    assert_eq!(strict.to_string(), r"p\u{0430}ypal");
    assert!(strict.badges().contains(Badge::MixedScript));
}

#[test]
fn space_lookalikes_are_escaped() {
    check(
        "a\u{a0}b\u{2000}c\u{200a}d\u{3000}e\u{2800}f\u{3164}g\u{115f}h\u{1160}i\u{ffa0}j\u{202f}k\u{205f}l\u{180e}m",
        r"a\u{00a0}b\u{2000}c\u{200a}d\u{3000}e\u{2800}f\u{3164}g\u{115f}h\u{1160}i\u{ffa0}j\u{202f}k\u{205f}l\u{180e}m",
    );
}

#[test]
fn private_use_noncharacters_and_unassigned_are_escaped() {
    check(
        "\u{e000}\u{f8ff}\u{f0000}\u{fdd0}\u{fffe}\u{10ffff}\u{fff9}\u{fffa}\u{fffb}\u{fffc}\u{378}",
        r"\u{e000}\u{f8ff}\u{f0000}\u{fdd0}\u{fffe}\u{10ffff}\u{fff9}\u{fffa}\u{fffb}\u{fffc}\u{0378}",
    );
}

#[test]
fn text_spelling_our_escape_notation_cannot_forge_an_escape() {
    let input = r"\x1b \u{202e} \\ \n done\";
    check(input, r"\\x1b \\u{202e} \\\\ \\n done\\");
    assert_ne!(line(input), line("\x1b \u{202e} \\ \n done\\"));
}

#[test]
fn text_imitating_our_ui_stays_plain_text_on_one_line() {
    let input = "APPROVED ✓\n----- end of approval a1 for tool sh -----";
    check(
        input,
        r"APPROVED ✓\n----- end of approval a1 for tool sh -----",
    );
    // A forged cut marker is not a cut segment, and its `[+` is escaped so the printed text
    // can be told from a real marker too (issue 14, item 5).
    for (forged, shown) in [
        ("…[+5 bytes]…", r"…\x5b+5 bytes]…"),
        (
            "[+3 combining marks dropped]",
            r"\x5b+3 combining marks dropped]",
        ),
        ("...[+9 bytes]...", r"...\x5b+9 bytes]..."),
    ] {
        let t = escape(forged.as_bytes(), Options::line());
        assert!(t.segments().iter().all(|s| s.kind() != SegmentKind::Cut));
        assert!(!t.is_cut());
        assert_eq!(t.to_string(), shown);
        assert_eq!(t.decode().unwrap(), forged.as_bytes());
    }
    // A real marker still shows `[+`; other brackets stay as they are.
    let cut = escape_cut("x".repeat(100).as_bytes(), Options::line(), 20).to_string();
    assert!(cut.contains("…[+"), "{cut}");
    assert_eq!(
        escape("[a] [-1] [+".as_bytes(), Options::line()).to_string(),
        r"[a] [-1] \x5b+"
    );
}

#[test]
fn wide_cjk_is_measured_and_never_cut_inside_a_character() {
    let t = escape("日本語".as_bytes(), Options::line());
    assert_eq!(t.width(), 6);
    let text = "日本語".repeat(100);
    for w in 1..30 {
        let cut = escape_cut(text.as_bytes(), Options::line(), w);
        assert!(cut.width() <= w, "width {w}: {cut}");
    }
    // At width 20 the long marker would take more than half: the short one is used.
    assert_eq!(plain_line(text.as_bytes(), 20), "日本語…[+882]…日本語");
    assert_eq!(plain_line(text.as_bytes(), 7), "日…語");
}

#[test]
fn emoji_sequences_show_their_joiners_and_are_escaped_in_security_fields() {
    assert_eq!(line("👨\u{200d}👩\u{200d}👧"), r"👨\u{200d}👩\u{200d}👧");
    assert_eq!(line("🇯🇵 👍🏽"), "🇯🇵 👍🏽");
    assert_eq!(security("🇯🇵 👍🏽"), r"\u{1f1ef}\u{1f1f5} 👍\u{1f3fd}");
    assert_eq!(security("1\u{fe0f}\u{20e3}"), r"1\u{fe0f}\u{20e3}");
}

#[test]
fn values_of_16000_characters_and_1_mib_are_cut_head_and_tail() {
    let v16k = "x".repeat(16_000);
    let t = escape_cut(v16k.as_bytes(), Options::line(), 40);
    // The marker is sized for the largest count (16000): 16 columns, 12 + 12 left for text.
    assert_eq!(
        t.to_string(),
        format!("{}…[+15976 bytes]…{}", "x".repeat(12), "x".repeat(12))
    );
    assert_eq!(t.omitted_bytes(), 15_976);
    let mib: Vec<u8> = (0..1 << 20).map(|i| b'a' + (i % 26) as u8).collect();
    let t = escape_cut(&mib, Options::line(), 80);
    assert!(t.width() <= 80);
    assert!(t.to_string().contains("…[+1048514 bytes]…"), "{t}");
    assert!(t.examined_bytes() < 4096, "examined {}", t.examined_bytes());
    let full = escape(&mib, Options::line());
    assert_eq!(full.decode().unwrap(), mib);
}

#[test]
fn ten_thousand_lines_are_counted_in_the_multi_line_form() {
    let input = "line\n".repeat(10_000);
    let t = escape(input.as_bytes(), Options::multi_line());
    assert_eq!(t.line_count(), 10_001); // the last line is empty
    assert_eq!(t.decode().unwrap(), input.as_bytes());
    let one = escape(input.as_bytes(), Options::line());
    assert_eq!(one.line_count(), 1);
    assert_eq!(one.to_string().matches(r"\n").count(), 10_000);
}
