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
