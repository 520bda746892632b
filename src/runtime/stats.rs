//! The queue's own numbers (issue 21): per tool, what the Gate and the reviewers did with its
//! calls; per reviewer, the decisions made; and the seed article's review threshold
//! `L* = c / (q·p)` with `p` estimated from the database.
//!
//! [`Store::stats`](crate::runtime::store::Store::stats) reads the counts in two grouped scans
//! (steps, approvals); this module holds the records and the arithmetic, which never touches
//! the store.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::runtime::types::Timestamp;

/// The article's caveat, shown with every threshold table.
pub const CAVEAT: &str = "L* is a model, not a measurement: it assumes losses are comparable in money, ignores the wait a person has while a call is held, treats q as constant and takes p as known. Here p is the share of reviewed calls that reviewers refused, which stands in for how often an automatic call would be wrong; c and q are your assumptions. Per-call and session caps stay hard limits whatever the formula says.";

/// The longest tool or reviewer name kept whole (bytes); longer names are cut to this many
/// and flagged, so one hostile row cannot make the report huge.
pub const NAME_MAX: usize = 256;

/// What one tool's calls came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolStats {
    /// The tool's name as the decisions hold it (bytes: it may not be UTF-8), cut to
    /// [`NAME_MAX`]; `None` for calls whose decision names no tool that can be read (a
    /// damaged step row, or a decision without one).
    pub tool: Option<Vec<u8>>,
    /// True when some row's name was longer than [`NAME_MAX`] and was cut.
    pub tool_cut: bool,
    /// Steps whose decision is a call of this tool.
    pub calls: u64,
    /// Calls the policy allowed at once.
    pub allowed: u64,
    /// Calls the policy denied (and aborted), by the code that starts the reason
    /// (`not_found`, `invalid_arguments`, ...; `other` when the reason has none).
    pub denied: BTreeMap<String, u64>,
    /// Calls the runtime refused as invalid decisions (unknown tool, arguments the schema
    /// refuses, ...).
    pub invalid: u64,
    /// Calls the policy sent for approval (approval rows created).
    pub needs_approval: u64,
    /// Approvals a reviewer granted.
    pub approved: u64,
    /// Approvals a reviewer refused.
    pub rejected: u64,
    /// Approvals that expired undecided.
    pub expired: u64,
    /// Approvals still pending.
    pub pending: u64,
    /// Approvals in a status this build does not know.
    pub other_status: u64,
    /// Time from request to decision of each approved or rejected approval.
    pub decision_times: Vec<Duration>,
    /// When the oldest pending approval was requested.
    pub oldest_pending: Option<Timestamp>,
}

impl ToolStats {
    /// All denials, whatever their code.
    pub fn denied_total(&self) -> u64 {
        self.denied.values().sum()
    }

    /// Approvals a reviewer decided (granted or refused).
    pub fn reviewed(&self) -> u64 {
        self.approved + self.rejected
    }

    /// The median time to decision.
    pub fn median(&self) -> Option<Duration> {
        quantile(&self.decision_times, 0.5)
    }

    /// The 90th percentile time to decision.
    pub fn p90(&self) -> Option<Duration> {
        quantile(&self.decision_times, 0.9)
    }

    /// The share of reviewed calls the reviewers refused: the estimate of `p`, the chance that
    /// a call the policy would have run is wrong (a reviewer's refusal stands for "wrong").
    pub fn wrong_share(&self) -> Option<Share> {
        Share::of(self.rejected, self.reviewed())
    }
}

/// Decisions one reviewer made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviewerStats {
    /// `decided_by` as stored (bytes), cut to [`NAME_MAX`].
    pub by: Vec<u8>,
    /// True when the stored name was longer and was cut.
    pub by_cut: bool,
    /// Approvals granted.
    pub approved: u64,
    /// Approvals refused.
    pub rejected: u64,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Only steps started and approvals requested at or after this second, when given.
    pub since: Option<Timestamp>,
    /// When the report was read (oldest-pending ages are measured from it).
    pub now: Timestamp,
    /// One entry per tool, by name.
    pub tools: Vec<ToolStats>,
    /// One entry per reviewer, by name.
    pub reviewers: Vec<ReviewerStats>,
    /// Times that could not be read (a damaged `created_at`/`decided_at`): left out of the
    /// decision times and the oldest pending, and counted here.
    pub unreadable_times: u64,
    /// Steps whose decision is not JSON (damaged rows): counted, not looked into.
    pub damaged_steps: u64,
}

impl Stats {
    /// The oldest pending approval over every tool.
    pub fn oldest_pending(&self) -> Option<Timestamp> {
        self.tools.iter().filter_map(|t| t.oldest_pending).min()
    }

    /// Approvals still pending over every tool.
    pub fn pending(&self) -> u64 {
        self.tools.iter().map(|t| t.pending).sum()
    }
}

/// A proportion `k/n` with Wilson's 95% score interval (sound at small `n` and at 0 or n,
/// where the normal approximation gives an interval of width 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    /// Refusals.
    pub k: u64,
    /// Reviewed calls (the sample size).
    pub n: u64,
    /// `k / n`.
    pub estimate: f64,
    /// The interval's lower end.
    pub low: f64,
    /// The interval's upper end.
    pub high: f64,
}

impl Share {
    /// `None` when nothing was reviewed.
    pub fn of(k: u64, n: u64) -> Option<Share> {
        if n == 0 || k > n {
            return None;
        }
        const Z: f64 = 1.959_963_984_540_054;
        let (kf, nf) = (k as f64, n as f64);
        let p = kf / nf;
        let z2 = Z * Z;
        let denom = 1.0 + z2 / nf;
        let centre = (p + z2 / (2.0 * nf)) / denom;
        let half = Z * ((p * (1.0 - p) / nf) + z2 / (4.0 * nf * nf)).sqrt() / denom;
        Some(Share {
            k,
            n,
            estimate: p,
            low: (centre - half).max(0.0),
            high: (centre + half).min(1.0),
        })
    }
}

/// The seed article's threshold: review pays for itself for losses above
/// `L* = c / (q·p)` (`c` the cost of one review, `q` the share of wrong calls a reviewer
/// catches, `p` the chance an automatic call is wrong). `None` when `q·p` is 0 (review never
/// pays) or an input is not a finite positive number. A model, not a measurement.
pub fn threshold(review_cost: f64, catch: f64, p_wrong: f64) -> Option<f64> {
    let ok = |x: f64| x.is_finite() && x > 0.0;
    if !(ok(review_cost) && ok(catch) && ok(p_wrong)) || catch > 1.0 || p_wrong > 1.0 {
        return None;
    }
    Some(review_cost / (catch * p_wrong)).filter(|l| l.is_finite())
}

/// The nearest-rank quantile of unsorted durations.
pub fn quantile(values: &[Duration], q: f64) -> Option<Duration> {
    if values.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = (q * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// The code a denial's reason starts with (`not_found: order ord_1` → `not_found`): a run of
/// lower-case letters, digits and `_` before a `:`; `other` when there is none.
pub fn reason_code(reason: &str) -> &str {
    match reason.split_once(':') {
        Some((code, _))
            if !code.is_empty()
                && code.len() <= 40
                && code
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') =>
        {
            code
        }
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_articles_table_is_reproduced() {
        // The seed article: c = 1.50 USD, q = 0.9.
        let rows = [(0.005, 333.33), (0.02, 83.33), (0.10, 16.67), (0.50, 3.33)];
        for (p, want) in rows {
            let got = threshold(1.5, 0.9, p).unwrap();
            assert!((got - want).abs() < 0.005, "p={p}: {got}");
        }
        assert_eq!(threshold(1.5, 0.9, 0.0), None);
        assert_eq!(threshold(1.5, 0.0, 0.1), None);
        assert_eq!(threshold(f64::NAN, 0.9, 0.1), None);
        assert_eq!(threshold(1.5, 1.5, 0.1), None);
    }

    #[test]
    fn wilsons_interval_matches_known_values() {
        // 3 of 10: Wilson 95% = [0.1078, 0.6032].
        let s = Share::of(3, 10).unwrap();
        assert!(
            (s.low - 0.1078).abs() < 1e-3 && (s.high - 0.6032).abs() < 1e-3,
            "{s:?}"
        );
        // 0 of 20: [0, 0.1611]; the normal approximation would say [0, 0].
        let s = Share::of(0, 20).unwrap();
        assert_eq!(s.low, 0.0);
        assert!((s.high - 0.1611).abs() < 1e-3, "{s:?}");
        assert_eq!(Share::of(0, 0), None);
        assert_eq!(Share::of(5, 3), None);
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let d: Vec<Duration> = [5u64, 1, 3, 2, 4]
            .iter()
            .map(|s| Duration::from_secs(*s))
            .collect();
        assert_eq!(quantile(&d, 0.5), Some(Duration::from_secs(3)));
        assert_eq!(quantile(&d, 0.9), Some(Duration::from_secs(5)));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn a_reason_code_is_only_a_plain_identifier() {
        assert_eq!(reason_code("not_found: order"), "not_found");
        assert_eq!(reason_code("invalid_arguments: $.x"), "invalid_arguments");
        assert_eq!(reason_code("Amount too high: 5"), "other");
        assert_eq!(reason_code("no colon"), "other");
        assert_eq!(reason_code("\u{202e}x: y"), "other");
    }
}
