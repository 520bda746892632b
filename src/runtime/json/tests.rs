//! Unit tests of the internals; the golden vectors and properties are in `tests/json_*.rs`.

use super::check::go_quote;
use super::parse::{parse_first, rune_len};

#[test]
fn rune_len_agrees_with_utf8_validity_one_rune_at_a_time() {
    // Every 1- to 3-byte prefix, padded: a rune is valid exactly when Rust's strict decoder
    // accepts it as the first character (both refuse overlongs, surrogates, > U+10FFFF).
    for a in 0u32..=0xff {
        for b in (0u32..=0xff).step_by(3) {
            for c in [0x80u8, 0xbf, 0x41] {
                let bytes = [a as u8, b as u8, c, 0x80];
                let want = match std::str::from_utf8(&bytes) {
                    Ok(s) => s.chars().next().map(char::len_utf8),
                    Err(e) if e.valid_up_to() > 0 => std::str::from_utf8(&bytes[..e.valid_up_to()])
                        .ok()
                        .and_then(|s| s.chars().next())
                        .map(char::len_utf8),
                    Err(_) => None,
                };
                assert_eq!(rune_len(&bytes), want, "{bytes:02x?}");
            }
        }
    }
    assert_eq!(
        rune_len(b"\xed\xa0\x80"),
        None,
        "an encoded surrogate is invalid"
    );
    assert_eq!(
        rune_len(b"\xf4\x90\x80\x80"),
        None,
        "past U+10FFFF is invalid"
    );
    assert_eq!(rune_len(b"\xe6\x97"), None, "a truncated rune is invalid");
}

#[test]
fn go_quote_matches_strconv_quote() {
    assert_eq!(go_quote("a"), r#""a""#);
    assert_eq!(go_quote("q\"b\\"), r#""q\"b\\""#);
    assert_eq!(
        go_quote("\u{7}\u{8}\u{c}\n\r\t\u{b}"),
        r#""\a\b\f\n\r\t\v""#
    );
    assert_eq!(go_quote("\u{0}\u{1f}\u{7f}"), r#""\x00\x1f\x7f""#);
    assert_eq!(go_quote("é 日本 🙂"), "\"é 日本 🙂\"");
    assert_eq!(
        go_quote("\u{a0}\u{ad}\u{200b}\u{2028}"),
        r#""\u00a0\u00ad\u200b\u2028""#
    );
    assert_eq!(go_quote("\u{e0001}"), r#""\U000e0001""#);
}

#[test]
fn reader_keeps_number_literals_and_records_the_first_unpaired_surrogate() {
    let raw = br#"[-0.0e+00, "\uD800x", "\udc00"]"#;
    let (doc, end) = parse_first(raw).expect("valid");
    assert_eq!(end, raw.len());
    assert_eq!(doc.first_unpaired.as_deref(), Some("D800"));
    assert_eq!(
        super::canonical_json(raw),
        "[-0.0e+00,\"\u{fffd}x\",\"\u{fffd}\"]".as_bytes()
    );
}

#[test]
fn checked_content_hash_is_the_check_then_the_content_hash() {
    let inputs: &[&[u8]] = &[
        br#"{"b":1,"a":[true,null,"<&>"]}"#,
        b"  [1, 2.5e3, -0]  ",
        br#""\u2028 \ud83d\ude00 caf\u00e9""#,
        "{\"k\":\"\u{2028}x\u{7f}\"}".as_bytes(),
        br#"{"a":1,"a":2}"#,
        b"[1e99999]",
        br#""\ud800""#,
        b"",
        b"   ",
        b"{",
        b"\xff",
        b"1 2",
    ];
    for raw in inputs {
        match super::check_json(raw) {
            Ok(()) => assert_eq!(
                super::checked_content_hash(raw),
                Ok(super::content_hash(raw)),
                "{}",
                String::from_utf8_lossy(raw)
            ),
            Err(e) => assert_eq!(super::checked_content_hash(raw), Err(e)),
        }
    }
}

/// What the string writer must give, one byte at a time (the runs copied whole must match).
fn escaped_one_by_one(s: &str, html: bool) -> Vec<u8> {
    let mut out = vec![b'"'];
    for ch in s.chars() {
        match ch {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 || (html && matches!(c, '<' | '>' | '&')) => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            '\u{2028}' | '\u{2029}' if html => {
                out.extend_from_slice(format!("\\u{:04x}", ch as u32).as_bytes())
            }
            c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out.push(b'"');
    out
}

#[test]
fn strings_with_plain_runs_are_written_and_read_as_byte_by_byte() {
    let specials: Vec<String> = (0u8..0x80)
        .map(|b| (b as char).to_string())
        .chain(["é", "\u{2028}", "\u{2029}", "😀"].map(String::from))
        .collect();
    for sp in &specials {
        for run in [0usize, 1, 7, 40] {
            let plain = "x".repeat(run);
            let s = format!("{plain}{sp}{plain}{sp}{sp}{plain}");
            let mut go = Vec::new();
            super::gojson::write_string(&mut go, &s);
            assert_eq!(go, escaped_one_by_one(&s, true), "{s:?}");
            // Read back through the parser (canonical form of the JSON string) and through
            // the raw writer, which keeps escapes as written and HTML-escapes the rest.
            let min = escaped_one_by_one(&s, false);
            assert_eq!(super::canonical_json(&min), go, "{s:?}");
            let mut raw = Vec::new();
            super::gojson::write_raw(&mut raw, &min).unwrap();
            assert_eq!(raw, go, "{s:?}");
            let spaced = [b" ".as_slice(), &min, b" "].concat();
            let mut raw = Vec::new();
            super::gojson::write_raw(&mut raw, &spaced).unwrap();
            assert_eq!(raw, go, "{s:?}");
        }
    }
}
