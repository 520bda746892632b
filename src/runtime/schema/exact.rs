//! Whether a number literal is exactly the double the validation library compares: the
//! literal and the double's shortest decimal form are brought to one shape (sign, significant
//! digits, power of ten) and compared.

use serde_json::Value;

/// Keywords whose check compares an argument's number with the schema's.
const COMPARING: [&str; 7] = [
    "maximum",
    "minimum",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "multipleOf",
    "const",
    "enum",
];

/// Whether any object in the schema has a keyword that compares numbers (a property named
/// like one counts too, which only makes the check stricter).
pub(super) fn compares_numbers(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| COMPARING.contains(&k.as_str()) || compares_numbers(v)),
        Value::Array(a) => a.iter().any(compares_numbers),
        _ => false,
    }
}

/// The first number literal in `raw` (one valid JSON value) that a double does not hold to the
/// digit. Integers that fit 64 bits are read exactly by the decoder and pass.
pub(super) fn inexact_number(raw: &[u8]) -> Option<&str> {
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        match b {
            b'"' => i = after_string(raw, i + 1),
            b'-' | b'0'..=b'9' => {
                let len = raw[i..]
                    .iter()
                    .take_while(|c| matches!(c, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'))
                    .count();
                let lit = std::str::from_utf8(&raw[i..i + len]).ok()?;
                if !exact(lit) {
                    return Some(lit);
                }
                i += len;
            }
            _ => i += 1,
        }
    }
    None
}

/// The index just past the string whose first byte after the quote is at `i`.
fn after_string(raw: &[u8], mut i: usize) -> usize {
    while let Some(&b) = raw.get(i) {
        match b {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Whether the literal's value is the double it rounds to.
fn exact(lit: &str) -> bool {
    if lit.parse::<i64>().is_ok() || lit.parse::<u64>().is_ok() {
        return true;
    }
    let Ok(f) = lit.parse::<f64>() else {
        return false;
    };
    f.is_finite() && shape(lit) == shape(&format!("{f:e}"))
}

/// A decimal literal as (negative, significant digits, power of ten of the last digit), zero as
/// no digits and not negative; `None` when it is not a decimal literal.
fn shape(lit: &str) -> Option<(bool, String, i64)> {
    let (neg, rest) = match lit.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, lit),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if !(int.bytes().chain(frac.bytes())).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    let kept = digits.trim_end_matches('0');
    if kept.is_empty() {
        return Some((false, String::new(), 0));
    }
    let power = exp - frac.len() as i64 + (digits.len() - kept.len()) as i64;
    Some((neg, kept.to_string(), power))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_a_double_holds_are_exact_and_others_are_not() {
        for lit in [
            "0",
            "-0",
            "0.0",
            "10",
            "10.0",
            "1.50",
            "0.1",
            "0.07",
            "1234.56",
            "1e20",
            "1E+2",
            "-2.5e-3",
            "0.30000000000000004",
            "9007199254740993",
            "18446744073709551615",
            "-9223372036854775808",
            "100000000000000000000",
            "1e300",
        ] {
            assert!(exact(lit), "{lit}");
        }
        for lit in [
            "10.0000000000000000001",
            "9.99999999999999999999",
            "18446744073709551617",
            "0.1000000000000000000001",
            "1e400",
            "-1e400",
        ] {
            assert!(!exact(lit), "{lit}");
        }
    }

    #[test]
    fn numbers_are_found_outside_strings_only() {
        assert_eq!(
            inexact_number(br#"{"a":"10.0000000000000000001","b":[1,2.5,true,null]}"#),
            None
        );
        assert_eq!(
            inexact_number(br#"{"s":"q\"1.00000000000000000001","n":-1.00000000000000000001}"#),
            Some("-1.00000000000000000001")
        );
    }
}
