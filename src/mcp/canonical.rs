//! The canonical schema form and the pin's two hashes (agentrt mcp 1.6, 1.7).
//!
//! The form starts from the runtime's policy form (Go decoder semantics: a repeated key keeps
//! its last value, invalid UTF-8 and lone surrogate escapes become U+FFFD; keys in byte order;
//! no whitespace; no HTML escaping), then escapes U+2028/U+2029 and rewrites every number the
//! way agentrt does: the float64 text where float64 holds the literal exactly, else all the
//! literal's significant digits.

use crate::runtime::json::{policy_form_first, sha256_hex};

/// The canonical form of a schema as a server sent it, or why it cannot be pinned.
pub fn canonical_schema(raw: &[u8]) -> Result<Vec<u8>, String> {
    let (form, trailing) = policy_form_first(raw).ok_or_else(|| {
        "the schema is not JSON that Go's decoder reads (malformed, truncated, or nested more \
         than 10000 levels deep)"
            .to_string()
    })?;
    if trailing {
        return Err("trailing data after the schema".into());
    }
    rewrite(&form)
}

/// Hex SHA-256 of the canonical schema bytes.
pub fn schema_hash(canonical: &[u8]) -> String {
    sha256_hex(canonical)
}

/// Hex SHA-256 of the description encoded as a JSON string (quotes included).
pub fn description_hash(description: &str) -> String {
    sha256_hex(&json_string(description))
}

/// An object of members already encoded, in key order: keys written by [`json_string`],
/// values as they are, no white space.
pub(crate) fn raw_object(
    m: &std::collections::BTreeMap<String, Box<serde_json::value::RawValue>>,
) -> Vec<u8> {
    let mut b = b"{".to_vec();
    for (n, (k, v)) in m.iter().enumerate() {
        if n > 0 {
            b.push(b',');
        }
        b.extend_from_slice(&json_string(k));
        b.push(b':');
        b.extend_from_slice(v.get().as_bytes());
    }
    b.push(b'}');
    b
}

/// A string as Go's encoder writes it with HTML escaping off: short escapes, other controls as
/// `\u00xx`, U+2028/U+2029 as escapes, everything else literal.
pub fn json_string(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\u{2028}' => out.extend_from_slice(b"\\u2028"),
            '\u{2029}' => out.extend_from_slice(b"\\u2029"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes());
            }
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    out.push(b'"');
    out
}

/// Walks the compact policy form: numbers rewritten, U+2028/U+2029 in strings escaped.
fn rewrite(form: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(form.len());
    let mut i = 0;
    while let Some(&c) = form.get(i) {
        if c == b'"' {
            out.push(c);
            i += 1;
            while let Some(&s) = form.get(i) {
                if s == b'\\' {
                    out.extend_from_slice(form.get(i..i + 2).unwrap_or_default());
                    i += 2;
                    continue;
                }
                if s == 0xe2 && form.get(i + 1) == Some(&0x80) {
                    match form.get(i + 2) {
                        Some(0xa8) => {
                            out.extend_from_slice(b"\\u2028");
                            i += 3;
                            continue;
                        }
                        Some(0xa9) => {
                            out.extend_from_slice(b"\\u2029");
                            i += 3;
                            continue;
                        }
                        _ => {}
                    }
                }
                out.push(s);
                i += 1;
                if s == b'"' {
                    break;
                }
            }
            continue;
        }
        if c == b'-' || c.is_ascii_digit() {
            let start = i;
            while form
                .get(i)
                .is_some_and(|b| matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
            {
                i += 1;
            }
            let lit = std::str::from_utf8(form.get(start..i).unwrap_or_default())
                .map_err(|_| "the schema is not JSON".to_string())?;
            out.extend_from_slice(number_text(lit)?.as_bytes());
            continue;
        }
        out.push(c);
        i += 1;
    }
    Ok(out)
}

/// A number literal as agentrt's pin writes it.
pub fn number_text(lit: &str) -> Result<String, String> {
    let f: f64 = lit.parse().map_err(|_| {
        format!("number {lit}: strconv.ParseFloat: parsing \"{lit}\": invalid syntax")
    })?;
    if !f.is_finite() {
        return Err(format!(
            "number {lit}: strconv.ParseFloat: parsing \"{lit}\": value out of range"
        ));
    }
    let ftext = go_float(f);
    let exp_ok = lit
        .find(['e', 'E'])
        .is_none_or(|at| lit[at + 1..].trim_start_matches('+').parse::<i32>().is_ok());
    if !exp_ok {
        // Go's decoder would read it; no schema needs it, and the digits could not be placed.
        return Err(format!("number {lit}: the exponent is out of range"));
    }
    let (a, b) = (reduce(lit), reduce(&ftext));
    let same = a.digits == b.digits
        && (a.digits.is_empty() || (a.point == b.point && a.negative == b.negative));
    if same {
        Ok(ftext)
    } else {
        Ok(normal_number(&a))
    }
}

/// Go's `encoding/json` float64 text: shortest round-trip digits, plain between 1e-6 and 1e21.
fn go_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let e = format!("{f:e}"); // "1.5e-7", "1e21"
        let (m, x) = e.split_once('e').unwrap_or((&e, "0"));
        if let Some(neg) = x.strip_prefix('-') {
            format!("{m}e-{neg}")
        } else {
            format!("{m}e+{x}")
        }
    } else {
        format!("{f}")
    }
}

/// A number as its significant digits (no leading or trailing zeros) and the position of the
/// decimal point relative to the first of them: value = 0.DIGITS × 10^point.
struct Reduced {
    negative: bool,
    digits: String,
    point: i64,
}

fn reduce(lit: &str) -> Reduced {
    let (negative, body) = match lit.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, lit),
    };
    let (mant, exp) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], &body[at + 1..]),
        None => (body, "0"),
    };
    let exp: i64 = exp.trim_start_matches('+').parse().unwrap_or(0);
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let all: String = format!("{int}{frac}");
    let lead = all.len() - all.trim_start_matches('0').len();
    let digits = all
        .trim_start_matches('0')
        .trim_end_matches('0')
        .to_string();
    let point = int.len() as i64 + exp - lead as i64;
    Reduced {
        negative,
        digits,
        point,
    }
}

/// All significant digits of a literal: plain unless the leading digit's exponent is below -6
/// or at least 21.
fn normal_number(r: &Reduced) -> String {
    let sign = if r.negative { "-" } else { "" };
    let d = &r.digits;
    let n = d.len() as i64;
    let lead_exp = r.point - 1;
    if !(-6..21).contains(&lead_exp) {
        let (first, rest) = d.split_at(1.min(d.len()));
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let es = if lead_exp >= 0 { "+" } else { "-" };
        return format!("{sign}{first}{frac}e{es}{}", lead_exp.abs());
    }
    if r.point <= 0 {
        format!("{sign}0.{}{d}", "0".repeat((-r.point) as usize))
    } else if r.point >= n {
        format!("{sign}{d}{}", "0".repeat((r.point - n) as usize))
    } else {
        let (a, b) = d.split_at(r.point as usize);
        format!("{sign}{a}.{b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_schema_keeps_what_float64_would_lose() {
        for (lit, want) in [
            ("9007199254740993", "9007199254740993"),
            ("12345678901234567890", "12345678901234567890"),
            ("0.10000000000000000000010", "0.1000000000000000000001"),
            ("1.00000000000000000001e300", "1.00000000000000000001e+300"),
            ("9.007199254740993E15", "9007199254740993"),
            (
                "0.00000012345678901234567890123",
                "1.2345678901234567890123e-7",
            ),
            (
                "123456789012345678901234567890",
                "1.2345678901234567890123456789e+29",
            ),
            ("1.0", "1"),
            ("1e2", "100"),
            ("-0.0", "-0"),
            ("-0", "-0"),
            ("0", "0"),
            ("1e21", "1e+21"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("-2.5", "-2.5"),
            ("100", "100"),
            ("1.5e-10", "1.5e-10"),
        ] {
            assert_eq!(number_text(lit).unwrap(), want, "{lit}");
        }
        assert!(number_text("1e400").unwrap_err().contains("out of range"));
        assert_eq!(number_text("1e-400").unwrap(), "1e-400");
        assert!(number_text("1e-99999999999999999999").is_err());
    }

    #[test]
    fn canonical_schema_sorts_keys_and_escapes_as_go_does() {
        let raw = br#" { "b" : [1.0, "x\u2028<&>"], "a": {"z":1,"z":2} } "#;
        assert_eq!(
            canonical_schema(raw).unwrap(),
            br#"{"a":{"z":2},"b":[1,"x\u2028<&>"]}"#.to_vec()
        );
        assert_eq!(canonical_schema(b"").unwrap(), b"null".to_vec());
        assert_eq!(
            canonical_schema(b"{} {}").unwrap_err(),
            "trailing data after the schema"
        );
        assert!(canonical_schema(br#"{"a":1e400}"#).is_err());
        assert_eq!(
            description_hash(""),
            crate::runtime::json::sha256_hex(b"\"\"")
        );
    }
}
