//! Go duration text: `time.ParseDuration` and `time.Duration.String()` for the configuration's
//! durations (`"15s"`, `"10m0s"`, `"1h30m"`).

use std::time::Duration;

/// Parses Go duration syntax. A negative duration is returned as an error naming it (every
/// duration in the configuration must be zero or more).
pub fn parse(s: &str) -> Result<Duration, String> {
    let orig = s;
    let bad = || format!("time: invalid duration {}", go_quote(orig));
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac = "";
        if let Some(r) = rest.strip_prefix('.') {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            frac = &r[..n];
            rest = &r[n..];
        }
        if int.is_empty() && frac.is_empty() {
            return Err(bad());
        }
        let unit_len = rest
            .bytes()
            .take_while(|b| !b.is_ascii_digit() && *b != b'.')
            .count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let per: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("time: missing unit in duration {}", go_quote(orig))),
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    go_quote(unit),
                    go_quote(orig)
                ));
            }
        };
        let whole: u128 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| bad())?
        };
        let mut part = whole.checked_mul(per).ok_or_else(bad)?;
        let mut scale = per;
        for d in frac.bytes() {
            scale /= 10;
            if scale == 0 {
                break;
            }
            part += u128::from(d - b'0') * scale;
        }
        total = total.checked_add(part).ok_or_else(bad)?;
        if total > i64::MAX as u128 {
            return Err(bad());
        }
    }
    if neg && total > 0 {
        return Err(format!("duration {} is negative", go_quote(orig)));
    }
    Ok(Duration::from_nanos(total as u64))
}

/// `time.Duration.String()`: `0s`, `200ms`, `1.5µs`, `10m0s`, `24h0m0s`, `1m5s` (the runtime's
/// writer, [`crate::runtime::driver::limits::go_duration_of`]).
pub fn format(d: Duration) -> String {
    crate::runtime::driver::limits::go_duration_of(d)
}

fn go_quote(s: &str) -> String {
    super::quote(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_duration_text_round_trips() {
        for (text, ns, shown) in [
            ("15s", 15_000_000_000u64, "15s"),
            ("10m", 600_000_000_000, "10m0s"),
            ("24h", 86_400_000_000_000, "24h0m0s"),
            ("1m5s", 65_000_000_000, "1m5s"),
            ("200ms", 200_000_000, "200ms"),
            ("1.5s", 1_500_000_000, "1.5s"),
            ("0", 0, "0s"),
            ("0s", 0, "0s"),
            ("1h30m", 5_400_000_000_000, "1h30m0s"),
        ] {
            let d = parse(text).unwrap();
            assert_eq!(d.as_nanos(), u128::from(ns), "{text}");
            assert_eq!(format(d), shown, "{text}");
        }
        assert!(parse("15").unwrap_err().contains("missing unit"));
        assert!(parse("1x").unwrap_err().contains("unknown unit"));
        assert!(parse("-1s").unwrap_err().contains("is negative"));
        assert!(parse("").is_err());
        assert!(parse("99999999999h").is_err());
    }
}
