//! UTC timestamps with nanosecond precision, formatted and parsed as Go's `time.RFC3339Nano`
//! (spec 1.4): fraction with trailing zeros trimmed, no fraction when zero, and the zero time
//! (Go's `0001-01-01T00:00:00Z`) stored as `''`.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds from 0001-01-01T00:00:00Z to the Unix epoch.
const UNIX_OFFSET: i64 = 62_135_596_800;

/// A UTC instant, nanosecond precision. `Timestamp::ZERO` is Go's zero time (stored as `''`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Seconds since 0001-01-01T00:00:00Z (may be negative for earlier instants).
    secs: i64,
    /// 0..1e9.
    nanos: u32,
}

/// Why a stored time did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parsing time \"{text}\": {reason}")]
pub struct TimeError {
    /// The stored text that did not parse.
    pub text: String,
    /// What was wrong with it.
    pub reason: &'static str,
}

impl Timestamp {
    /// Go's zero time.
    pub const ZERO: Timestamp = Timestamp { secs: 0, nanos: 0 };

    /// The wall clock now.
    pub fn now() -> Timestamp {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => Timestamp::from_unix(d.as_secs() as i64, d.subsec_nanos()),
            Err(e) => {
                let d = e.duration();
                Timestamp::from_unix(0, 0).add_nanos(-(d.as_nanos().min(i64::MAX as u128) as i64))
            }
        }
    }

    /// From Unix seconds and nanoseconds.
    pub fn from_unix(secs: i64, nanos: u32) -> Timestamp {
        let extra = (nanos / 1_000_000_000) as i64;
        Timestamp {
            secs: secs.saturating_add(UNIX_OFFSET).saturating_add(extra),
            nanos: nanos % 1_000_000_000,
        }
    }

    /// From nanoseconds since the Unix epoch.
    pub fn from_unix_nanos(ns: i128) -> Timestamp {
        let secs = ns.div_euclid(1_000_000_000);
        let nanos = ns.rem_euclid(1_000_000_000) as u32;
        let secs = secs.clamp(i64::MIN as i128 / 2, i64::MAX as i128 / 2) as i64;
        Timestamp::from_unix(secs, nanos)
    }

    /// Nanoseconds since the Unix epoch.
    pub fn unix_nanos(&self) -> i128 {
        (self.secs as i128 - UNIX_OFFSET as i128) * 1_000_000_000 + self.nanos as i128
    }

    /// Whole seconds since the Unix epoch.
    pub fn unix_secs(&self) -> i64 {
        self.secs - UNIX_OFFSET
    }

    /// True for Go's zero time.
    pub fn is_zero(&self) -> bool {
        self.secs == 0 && self.nanos == 0
    }

    /// This instant moved by `ns` nanoseconds (saturating).
    pub fn add_nanos(&self, ns: i64) -> Timestamp {
        let total = self.secs as i128 * 1_000_000_000 + self.nanos as i128 + ns as i128;
        let secs = total.div_euclid(1_000_000_000);
        let secs = secs.clamp(i64::MIN as i128 / 2, i64::MAX as i128 / 2) as i64;
        Timestamp {
            secs,
            nanos: total.rem_euclid(1_000_000_000) as u32,
        }
    }

    /// `self - other` in nanoseconds, saturating at the i64 range (Go's `Sub`).
    pub fn sub(&self, other: &Timestamp) -> i64 {
        let d = (self.secs as i128 - other.secs as i128) * 1_000_000_000 + self.nanos as i128
            - other.nanos as i128;
        d.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// Go `t.UTC().Format(time.RFC3339Nano)`, except the zero time, which is `""` (how the
    /// runtime stores it).
    pub fn to_rfc3339(&self) -> String {
        if self.is_zero() {
            return String::new();
        }
        self.format_always()
    }

    /// RFC3339Nano with the zero time written out (`0001-01-01T00:00:00Z`).
    pub fn format_always(&self) -> String {
        let days = self.secs.div_euclid(86_400);
        let sod = self.secs.rem_euclid(86_400);
        // days since 0001-01-01 -> days since 1970-01-01 for the civil conversion.
        let (y, m, d) = civil_from_days(days - UNIX_OFFSET / 86_400);
        let mut s = if (0..=9999).contains(&y) {
            format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
                sod / 3600,
                sod % 3600 / 60,
                sod % 60
            )
        } else {
            format!(
                "{y}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
                sod / 3600,
                sod % 3600 / 60,
                sod % 60
            )
        };
        if self.nanos != 0 {
            let frac = format!("{:09}", self.nanos);
            s.push('.');
            s.push_str(frac.trim_end_matches('0'));
        }
        s.push('Z');
        s
    }

    /// Go's `time.RFC3339` (whole seconds, no fraction) of the UTC instant.
    pub fn format_rfc3339_seconds(&self) -> String {
        Timestamp {
            secs: self.secs,
            nanos: 0,
        }
        .format_always()
    }

    /// Parses a stored time: `''` is the zero time; otherwise Go's `time.RFC3339Nano` layout
    /// (`YYYY-MM-DDTHH:MM:SS[.fraction]` then `Z` or `±HH:MM`), converted to UTC.
    pub fn parse(text: &str) -> Result<Timestamp, TimeError> {
        if text.is_empty() {
            return Ok(Timestamp::ZERO);
        }
        let err = |reason| TimeError {
            text: text.to_string(),
            reason,
        };
        let b = text.as_bytes();
        if b.len() < 20 {
            return Err(err("too short for RFC3339"));
        }
        let num = |from: usize, len: usize| -> Result<i64, TimeError> {
            let part = b
                .get(from..from + len)
                .ok_or_else(|| err("too short for RFC3339"))?;
            let mut v = 0i64;
            for &c in part {
                if !c.is_ascii_digit() {
                    return Err(err("expected a digit"));
                }
                v = v * 10 + (c - b'0') as i64;
            }
            Ok(v)
        };
        let sep = |at: usize, c: u8| -> Result<(), TimeError> {
            if b.get(at) == Some(&c) {
                Ok(())
            } else {
                Err(err("unexpected separator"))
            }
        };
        let year = num(0, 4)?;
        sep(4, b'-')?;
        let month = num(5, 2)?;
        sep(7, b'-')?;
        let day = num(8, 2)?;
        sep(10, b'T')?;
        let hour = num(11, 2)?;
        sep(13, b':')?;
        let minute = num(14, 2)?;
        sep(16, b':')?;
        let second = num(17, 2)?;
        let mut i = 19;
        let mut nanos: u32 = 0;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            // Go's parser takes any number of digits and keeps the first nine.
            let digits = (i - start).min(9);
            if digits == 0 {
                return Err(err("fractional second must have a digit"));
            }
            let mut v = num(start, digits)? as u32;
            for _ in digits..9 {
                v *= 10;
            }
            nanos = v;
        }
        let offset_secs = match b.get(i) {
            Some(b'Z') if i + 1 == b.len() => 0,
            Some(&c) if (c == b'+' || c == b'-') && i + 6 == b.len() => {
                let oh = num(i + 1, 2)?;
                sep(i + 3, b':')?;
                let om = num(i + 4, 2)?;
                if oh > 23 || om > 59 {
                    return Err(err("time zone offset out of range"));
                }
                let o = oh * 3600 + om * 60;
                if c == b'-' { -o } else { o }
            }
            _ => return Err(err("expected Z or a ±hh:mm offset at the end")),
        };
        if !(1..=12).contains(&month) {
            return Err(err("month out of range"));
        }
        if day < 1 || day > days_in_month(year, month) {
            return Err(err("day out of range"));
        }
        if hour > 23 || minute > 59 || second > 59 {
            return Err(err("hour, minute or second out of range"));
        }
        let days = days_from_civil(year, month, day) + UNIX_OFFSET / 86_400;
        let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
        Ok(Timestamp { secs, nanos })
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.format_always())
    }
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (era arithmetic over 400-year cycles).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date (year, month, day) of a day count since 1970-01-01 (Howard
/// Hinnant's days-to-civil algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339nano_round_trips_and_trims_zeros() {
        for s in [
            "2026-10-01T09:00:00Z",
            "2026-09-25T14:03:04.5Z",
            "2030-01-01T09:00:00.000123Z",
            "2000-02-29T23:59:59.999999999Z",
            "1969-12-31T23:59:59.1Z",
        ] {
            assert_eq!(Timestamp::parse(s).unwrap().to_rfc3339(), s);
        }
        assert_eq!(Timestamp::parse("").unwrap(), Timestamp::ZERO);
        assert_eq!(Timestamp::ZERO.to_rfc3339(), "");
        assert_eq!(Timestamp::ZERO.format_always(), "0001-01-01T00:00:00Z");
        assert_eq!(
            Timestamp::parse("2026-10-01T11:00:00.50+02:00")
                .unwrap()
                .to_rfc3339(),
            "2026-10-01T09:00:00.5Z"
        );
        assert_eq!(
            Timestamp::from_unix(0, 0).to_rfc3339(),
            "1970-01-01T00:00:00Z"
        );
        // Go's parser takes a fraction of any length and keeps nine digits.
        assert_eq!(
            Timestamp::parse("2026-10-01T09:00:00.1234567891999Z")
                .unwrap()
                .to_rfc3339(),
            "2026-10-01T09:00:00.123456789Z"
        );
    }

    #[test]
    fn bad_times_are_errors_not_panics() {
        for s in [
            "x",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-10-01 09:00:00Z",
            "2026-10-01T09:00:00",
            "2026-10-01T09:00:00.Z",
            "2026-10-01T09:00:00Zjunk",
            "２０２６-10-01T09:00:00Z",
        ] {
            assert!(Timestamp::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn arithmetic() {
        let t = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
        assert_eq!(
            t.add_nanos(30_000_000_000).to_rfc3339(),
            "2026-10-01T09:00:30Z"
        );
        assert_eq!(
            t.add_nanos(-1).to_rfc3339(),
            "2026-10-01T08:59:59.999999999Z"
        );
        assert_eq!(t.add_nanos(1).sub(&t), 1);
        assert_eq!(t.unix_secs(), 1_790_845_200);
    }

    proptest::proptest! {
        #[test]
        fn format_then_parse_is_identity(secs in 0i64..253_402_300_799, nanos in 0u32..1_000_000_000) {
            let t = Timestamp::from_unix(secs - 62_135_596_800, nanos);
            proptest::prop_assert_eq!(Timestamp::parse(&t.format_always()).unwrap(), t);
        }

        #[test]
        fn parse_never_panics(s in "\\PC{0,40}") {
            let _ = Timestamp::parse(&s);
        }

        #[test]
        fn parse_never_panics_on_near_misses(s in "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,12})?(Z|[+-][0-9]{2}:[0-9]{2})?") {
            if let Ok(t) = Timestamp::parse(&s) {
                proptest::prop_assert_eq!(Timestamp::parse(&t.to_rfc3339()).unwrap_or(Timestamp::ZERO), t);
            }
        }
    }
}
