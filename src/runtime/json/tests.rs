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
        // Run lengths around the 16-byte blocks `parse::run_len` looks at together.
        for run in [0usize, 1, 7, 15, 16, 17, 31, 32, 33, 40] {
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

#[test]
fn run_len_is_the_offset_of_the_first_stop_byte() {
    let stop = |b: u8| (b == b'"') | (b == b'\\') | (b < 0x20);
    for len in 0..70usize {
        let mut s = vec![b'x'; len];
        assert_eq!(super::parse::run_len(&s, stop), len);
        for at in 0..len {
            for special in [b'"', b'\\', 0x00, 0x1f] {
                s[at] = special;
                assert_eq!(super::parse::run_len(&s, stop), at, "len {len}, at {at}");
                // A second stop byte later does not move the first.
                if at + 1 < len {
                    s[len - 1] = b'"';
                    assert_eq!(super::parse::run_len(&s, stop), at, "len {len}, at {at}");
                    s[len - 1] = b'x';
                }
                s[at] = b'x';
            }
        }
    }
}

#[test]
fn the_validity_walk_agrees_with_the_decoding_parse() {
    let docs: &[&[u8]] = &[
        br#"{"b":1,"a":[true,null,"<&>"],"c":{"d":"\u00e9\"\\","e":-1.5e-3}}"#,
        b"  [1, 2.5e3, -0, false]  ",
        br#""\u2028 \ud83d\ude00 caf\u00e9 \ud800""#,
        "{\"k\":\"\u{2028}x\u{7f}\"}".as_bytes(),
        b"\"\xff\xfe plain bytes a decoder replaces\"",
        br#"{"a":1,"a":2}"#,
    ];
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for d in docs {
        // Every truncation, and every one-byte change to a byte that matters to the grammar.
        for end in 0..=d.len() {
            inputs.push(d[..end].to_vec());
        }
        for at in 0..d.len() {
            for b in [
                b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b' ', b'1', b'e', b'-', 0x01, 0xff,
            ] {
                let mut m = d.to_vec();
                m[at] = b;
                inputs.push(m);
            }
        }
        inputs.push([d, b" x".as_slice()].concat());
        inputs.push([b"\t".as_slice(), d, b"\r\n"].concat());
    }
    inputs.push(vec![b'['; 10_001]);
    inputs.push([vec![b'['; 10_000], vec![b']'; 10_000]].concat());
    for raw in &inputs {
        assert_eq!(
            super::parse::valid_exact(raw),
            super::parse::parse_exact(raw).is_some(),
            "{}",
            String::from_utf8_lossy(raw)
        );
    }
}

#[test]
fn brackets_inside_strings_are_not_nesting() {
    let inside = format!(r#"["{}\"{}"]"#, "[".repeat(300), "{".repeat(300));
    assert_eq!(super::check_json(inside.as_bytes()), Ok(()));
    let deep = format!("{}{}", "[".repeat(257), "]".repeat(257));
    assert_eq!(
        super::check_json(deep.as_bytes()),
        Err(super::JsonError::TooDeep)
    );
}
