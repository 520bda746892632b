//! agentrt's sanitiser vectors (spec 12.1, golden/README.md) as a floor: countersign escapes
//! at least what agentrt escapes. Where the notation differs it is stated:
//! - LF and CR: agentrt writes a space each; the one-line form writes `\n` and `\r` (the
//!   multi-line form makes LF a real line break), so the value stays reversible.
//! - TAB: agentrt `\x09`, countersign `\t`.
//! - C1 controls: agentrt `\x9b`; countersign `\u{009b}`, because `\xNN` above 0x7f means a
//!   byte of invalid UTF-8 (which agentrt turns into a lossy U+FFFD).
//! - A literal backslash: agentrt passes it; countersign writes `\\`.

use countersign::safetext::{Options, escape, escape_str};

fn line(input: &str) -> String {
    escape_str(input, Options::line()).to_string()
}

#[test]
fn sanitize_line_breaks_are_escapes_not_spaces() {
    // agentrt: "line one line two  line three"
    assert_eq!(
        line("line one\nline two\r\nline three"),
        r"line one\nline two\r\nline three"
    );
}

#[test]
fn sanitize_c0_del_and_c1_controls_are_escaped() {
    assert_eq!(line("\x1b"), r"\x1b");
    assert_eq!(line("\x07"), r"\x07");
    assert_eq!(line("\x7f"), r"\x7f");
    assert_eq!(line("\u{9b}"), r"\u{009b}"); // agentrt: \x9b
    assert_eq!(line("\t"), r"\t"); // agentrt: \x09
    for b in (0u8..0x20).filter(|b| !matches!(b, b'\t' | b'\n' | b'\r')) {
        assert_eq!(line(&(b as char).to_string()), format!("\\x{b:02x}"));
    }
    for cp in 0x80u32..=0x9f {
        let c = char::from_u32(cp).unwrap();
        assert_eq!(line(&c.to_string()), format!("\\u{{{cp:04x}}}"));
    }
}

#[test]
fn sanitize_wide_escapes_match_agentrt_notation() {
    let mut wide: Vec<u32> = vec![
        0x061C, 0x200E, 0x200F, 0xFEFF, 0x00AD, 0x180E, 0x2028, 0x2029,
    ];
    wide.extend(0x202A..=0x202E);
    wide.extend(0x2066..=0x2069);
    wide.extend(0x200B..=0x200D);
    wide.extend(0x2060..=0x2064);
    wide.extend(0xE0000..=0xE007F);
    for cp in wide {
        let c = char::from_u32(cp).unwrap();
        // After a base letter, so no rule about field starts applies.
        assert_eq!(
            line(&format!("a{c}")),
            format!("a\\u{{{cp:04x}}}"),
            "U+{cp:04X}"
        );
    }
}

#[test]
fn sanitize_escapes_terminal_sequences() {
    let out = line("\x1b[2J\x1b[H\x1b[32mAPPROVAL WAITING  looks-safe\x1b[0m\rX");
    assert!(!out.contains('\x1b') && !out.contains('\r'));
    assert!(out.contains(r"\x1b[2J"));
    assert_eq!(
        out,
        r"\x1b[2J\x1b[H\x1b[32mAPPROVAL WAITING  looks-safe\x1b[0m\rX"
    );
}

#[test]
fn sanitize_keeps_four_combining_marks_and_counts_the_rest() {
    let input = format!("a{} end", "\u{301}".repeat(45));
    let expected = format!("a{}[+41 combining marks dropped] end", "\u{301}".repeat(4));
    assert_eq!(line(&input), expected); // identical to agentrt
}

#[test]
fn sanitize_keeps_letters_of_every_script_and_flags() {
    for text in [
        "café",
        "cafe\u{301}",
        "مرحبا بالعالم",
        "שלום עולם",
        "नमस्ते दुनिया",
        "สวัสดีชาวโลก",
        "こんにちは世界",
        "\u{1F1EF}\u{1F1F5}",
    ] {
        let t = escape(text.as_bytes(), Options::line());
        assert_eq!(t.to_string(), text);
        assert_eq!(t.escape_count(), 0, "{text}");
    }
    // In security fields flags are escaped (countersign escapes more there).
    assert_eq!(
        escape_str("\u{1F1EF}\u{1F1F5}", Options::security()).to_string(),
        r"\u{1f1ef}\u{1f1f5}"
    );
}

#[test]
fn sanitize_escapes_bidi_and_invisibles_in_a_command() {
    let out = line("rm -rf /\u{202e}evil\u{2066} \u{200d}\u{2028}\u{2029} end");
    assert_eq!(
        out,
        r"rm -rf /\u{202e}evil\u{2066} \u{200d}\u{2028}\u{2029} end"
    );
}

#[test]
fn sanitize_literal_backslash_u_is_escaped_here_unlike_agentrt() {
    // agentrt passes `\u{202e}` typed by a model unchanged; countersign escapes the backslash
    // so the text cannot be mistaken for an escape.
    assert_eq!(line(r"\u{202e}"), r"\\u{202e}");
}

#[test]
fn sanitize_zwj_emoji_shows_the_joiner() {
    assert_eq!(line("👩\u{200d}💻"), r"👩\u{200d}💻");
}
