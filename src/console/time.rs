//! RFC 3339 times as the run database stores them (Go RFC3339Nano, UTC) and the relative forms
//! the console shows ("4m", "in 56m", "expired 3m ago").

/// Seconds and nanoseconds since the Unix epoch of an RFC 3339 time; `None` if it is not one.
pub fn parse_rfc3339(s: &str) -> Option<(i64, u32)> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !(b[10] == b'T' || b[10] == b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        if !t.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos: u32 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &s[start..i];
        if digits.is_empty() || digits.len() > 9 {
            return None;
        }
        nanos = format!("{digits:0<9}").parse().ok()?;
    }
    let offset = match &s[i..] {
        "Z" | "z" => 0,
        rest if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            if &rest[3..4] != ":" {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if rest.starts_with('-') { -o } else { o }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    Some((days * 86400 + h * 3600 + mi * 60 + sec - offset, nanos))
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// Unix seconds of a stored time, `None` for `''` or a value that does not parse.
pub fn secs(s: &str) -> Option<i64> {
    parse_rfc3339(s).map(|(s, _)| s)
}

/// A duration in the largest two units: `45s`, `3m`, `2h05m`, `3d4h`.
pub fn span(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86399 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
    }
}

/// Age of `at` at `now`, or `?` when `at` is not a time.
pub fn age(at: &str, now: i64) -> String {
    secs(at).map_or_else(|| "?".into(), |t| span(now - t))
}

/// Expiry as a countdown: `in 56m`, `expired 3m ago`, `never` for `''`.
pub fn countdown(expires_at: &str, now: i64) -> String {
    if expires_at.is_empty() {
        return "never".into();
    }
    match secs(expires_at) {
        None => "?".into(),
        Some(t) if t >= now => format!("in {}", span(t - now)),
        Some(t) => format!("expired {} ago", span(now - t)),
    }
}

/// Short countdown for tables: `in 56m`, `3m ago`, `never`.
pub fn countdown_short(expires_at: &str, now: i64) -> String {
    match secs(expires_at) {
        _ if expires_at.is_empty() => "never".into(),
        None => "?".into(),
        Some(t) if t >= now => format!("in {}", span(t - now)),
        Some(t) => format!("{} ago", span(now - t)),
    }
}

/// Whether `expires_at` is set and already past at `now`.
pub fn expired(expires_at: &str, now: i64) -> bool {
    secs(expires_at).is_some_and(|t| now > t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_rfc3339nano_and_rejects_garbage() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some((0, 0)));
        assert_eq!(
            parse_rfc3339("2026-10-01T09:00:00.5Z"),
            Some((1790845200, 500_000_000))
        );
        assert_eq!(parse_rfc3339("1970-01-01T01:00:00+01:00"), Some((0, 0)));
        assert_eq!(parse_rfc3339("garbage"), None);
        assert_eq!(parse_rfc3339("2026-13-01T09:00:00Z"), None);
        assert_eq!(parse_rfc3339("2026-10-01T09:00:00.Z"), None);
    }

    #[test]
    fn relative_forms_read_naturally() {
        assert_eq!(span(42), "42s");
        assert_eq!(span(3 * 60 + 5), "3m");
        assert_eq!(span(2 * 3600 + 5 * 60), "2h05m");
        assert_eq!(countdown("", 0), "never");
        assert_eq!(countdown("1970-01-01T01:00:00Z", 0), "in 1h00m");
        assert_eq!(countdown("1970-01-01T00:00:00Z", 180), "expired 3m ago");
    }
}
