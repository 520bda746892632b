//! The relative forms of stored times the console shows ("4m", "in 56m", "expired 3m ago").
//! Times arrive parsed, as the runtime's [`Timestamp`] (its parser is the one parser of stored
//! times); the zero time is a column left empty.

use crate::runtime::types::Timestamp;

/// Unix seconds of a stored time, `None` for the zero time (an empty column).
fn secs(t: &Timestamp) -> Option<i64> {
    (!t.is_zero()).then(|| t.unix_secs())
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

/// How long ago `at` was at `now`, for a line of text: `3m ago`; a time after `now` (a
/// clock ahead of this one, or a damaged row) as `5m from now`, never as `0s ago`; the zero
/// time (not set, or not readable) as `at no readable time`, never as an age it does not have.
#[cfg(feature = "cli")]
pub fn ago(at: &Timestamp, now: &Timestamp) -> String {
    ago_at(at, now.unix_secs())
}

/// How far after the console's clock a time may be and still read as "just now": the
/// console's clock moves once a second, so a decision made in the last second is up to one
/// second ahead of it, and it is not "1s from now".
const LAG: i64 = 2;

/// [`ago`] at `now` in Unix seconds (the console's clock).
pub fn ago_at(at: &Timestamp, now: i64) -> String {
    match age_secs(at, now) {
        None => "at no readable time".into(),
        Some(s) if (-LAG..0).contains(&s) => "just now".into(),
        Some(s) if s < 0 => format!("{} from now", span(s.saturating_neg())),
        Some(s) => format!("{} ago", span(s)),
    }
}

/// Seconds from `at` to `now`, `None` when `at` is not set.
pub fn age_secs(at: &Timestamp, now: i64) -> Option<i64> {
    secs(at).map(|t| now.saturating_sub(t))
}

/// Age of `at` at `now` for a cell: `3m`; `in 5h` for a time after `now` (never `0s`, an age
/// it does not have; in its largest unit, so it fits where an age does); `?` when `at` is not
/// set.
pub fn age(at: &Timestamp, now: i64) -> String {
    match age_secs(at, now) {
        None => "?".into(),
        Some(s) if s < 0 => {
            let ahead = span(s.saturating_neg());
            let unit = ahead.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(0);
            format!("in {}", &ahead[..=unit.min(ahead.len() - 1)])
        }
        Some(s) => span(s),
    }
}

/// The oldest pending request's age for a cell: `-` with nothing pending, `?` when none of the
/// pending has a readable time (never `-`, which would say nothing waits).
pub fn oldest(pending: u64, at: Option<Timestamp>, now: i64) -> String {
    match at {
        Some(at) => age(&at, now),
        None if pending > 0 => "?".into(),
        None => "-".into(),
    }
}

/// [`oldest`] for a line of text: `3m ago`, `none`, `at no readable time`.
pub fn oldest_ago(pending: u64, at: Option<Timestamp>, now: i64) -> String {
    match at {
        Some(at) => ago_at(&at, now),
        None if pending > 0 => "at no readable time".into(),
        None => "none".into(),
    }
}

/// Age of a time kept as its stored text (an event's, which its hash covers), read with the
/// runtime's parser; `?` when it is empty or not a time.
pub fn age_of_text(at: &str, now: i64) -> String {
    Timestamp::parse(at).map_or_else(|_| "?".into(), |t| age(&t, now))
}

/// Expiry as a countdown: `in 56m`, `expired 3m ago`, `never` when not set.
pub fn countdown(expires_at: &Timestamp, now: i64) -> String {
    match secs(expires_at) {
        None => "never".into(),
        Some(t) if t >= now => format!("in {}", span(t - now)),
        Some(t) => format!("expired {} ago", span(now - t)),
    }
}

/// Whether a row's decode error (`<column>: <why>`, joined by `; `) names `column`: its time
/// did not read, and the zero time standing for it must not be shown as "never".
pub fn names_column(decode_error: &str, column: &str) -> bool {
    decode_error.split("; ").any(|part| {
        part.strip_prefix(column)
            .is_some_and(|r| r.starts_with(':'))
    })
}

/// Short countdown for tables: `in 56m`, `3m ago`, `never`.
pub fn countdown_short(expires_at: &Timestamp, now: i64) -> String {
    match secs(expires_at) {
        None => "never".into(),
        Some(t) if t >= now => format!("in {}", span(t - now)),
        Some(t) => format!("{} ago", span(now - t)),
    }
}

/// Whether `expires_at` is set and already past at `now`.
pub fn expired(expires_at: &Timestamp, now: i64) -> bool {
    secs(expires_at).is_some_and(|t| now > t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    #[test]
    fn relative_forms_read_naturally() {
        assert_eq!(span(42), "42s");
        assert_eq!(span(3 * 60 + 5), "3m");
        assert_eq!(span(2 * 3600 + 5 * 60), "2h05m");
        assert_eq!(countdown(&Timestamp::ZERO, 0), "never");
        assert_eq!(countdown(&at("1970-01-01T01:00:00Z"), 0), "in 1h00m");
        assert_eq!(
            countdown(&at("1970-01-01T00:00:00Z"), 180),
            "expired 3m ago"
        );
        assert_eq!(age(&Timestamp::ZERO, 180), "?");
        assert_eq!(age_of_text("garbage", 180), "?");
        assert_eq!(age_of_text("", 180), "?");
        assert_eq!(age_of_text("1970-01-01T00:00:00Z", 180), "3m");
        assert_eq!(age(&at("1970-01-01T00:05:00Z"), 0), "in 5m");
        assert_eq!(age(&at("1970-01-01T02:05:00Z"), 0), "in 2h");
        assert_eq!(age(&at("1970-01-04T02:05:00Z"), 0), "in 3d");
        assert_eq!(age(&at("1970-01-01T00:00:07Z"), 0), "in 7s");
        assert_eq!(ago_at(&at("1970-01-01T00:05:00Z"), 0), "5m from now");
        assert_eq!(ago_at(&at("1970-01-01T00:00:00Z"), 300), "5m ago");
        assert_eq!(ago_at(&Timestamp::ZERO, 300), "at no readable time");
        // Within the console clock's lag, a time just after it is "just now" (found from
        // outside: "already approved by alice 1s from now").
        assert_eq!(ago_at(&at("1970-01-01T00:00:01Z"), 0), "just now");
        assert_eq!(ago_at(&at("1970-01-01T00:00:02Z"), 0), "just now");
        assert_eq!(ago_at(&at("1970-01-01T00:00:03Z"), 0), "3s from now");
    }
}
