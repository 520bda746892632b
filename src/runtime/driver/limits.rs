//! The per-step limit checks, in the spec's order (3.5 step 3), over the cached steps.

use std::sync::Arc;

use crate::runtime::json;
use crate::runtime::types::{DecisionKind, Limits, Run, Step, Timestamp};

/// What ended the run before its next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hit {
    /// A limit: `limit.exceeded` then `run.finished`.
    Limit {
        /// The end reason (spec 3.3): `limit_steps`, `repeated_tool_failures`,
        /// `limit_active_time` or `limit_elapsed_time`.
        reason: &'static str,
        /// What was reached, e.g. `step limit 50 reached`.
        detail: String,
    },
    /// Loop detection: `loop.detected` then `run.finished`.
    Loop {
        /// The tool called again and again.
        tool: String,
        /// The content hash of its arguments, the same in every repeat.
        args_hash: String,
        /// The content hash of the observation each call got, the same in every repeat.
        observation_hash: String,
        /// How many trailing steps repeat it (at least `loop_threshold`).
        repeats: i64,
        /// `<tool> produced the same observation <n> times in a row`.
        detail: String,
    },
}

/// Checks the limits before a step starts.
pub fn check(run: &Run, steps: &[Arc<Step>], limits: &Limits, now: Timestamp) -> Option<Hit> {
    if limits.max_steps > 0 && run.step_count >= limits.max_steps {
        return Some(Hit::Limit {
            reason: "limit_steps",
            detail: format!("step limit {} reached", limits.max_steps),
        });
    }
    if limits.max_consecutive_tool_failures > 0 {
        let n = failure_streak(steps);
        if n >= limits.max_consecutive_tool_failures {
            return Some(Hit::Limit {
                reason: "repeated_tool_failures",
                detail: format!("{n} consecutive failed steps"),
            });
        }
    }
    if limits.max_active_time > 0 {
        let active_ns = run.active_ms.saturating_mul(1_000_000);
        if active_ns >= limits.max_active_time {
            return Some(Hit::Limit {
                reason: "limit_active_time",
                detail: format!(
                    "active time {} reached limit {}",
                    go_duration(active_ns),
                    go_duration(limits.max_active_time)
                ),
            });
        }
    }
    if limits.max_elapsed_time > 0 && now.sub(&run.created_at) >= limits.max_elapsed_time {
        return Some(Hit::Limit {
            reason: "limit_elapsed_time",
            detail: format!(
                "elapsed time reached limit {}",
                go_duration(limits.max_elapsed_time)
            ),
        });
    }
    if limits.loop_threshold > 0 {
        let (key, n) = loop_streak(steps);
        if let Some((tool, args_hash, observation_hash)) = key
            && n >= limits.loop_threshold
        {
            return Some(Hit::Loop {
                detail: format!("{tool} produced the same observation {n} times in a row"),
                tool,
                args_hash,
                observation_hash,
                repeats: n,
            });
        }
    }
    None
}

/// Trailing steps whose observation is a failure; a step without one breaks the streak.
pub fn failure_streak(steps: &[Arc<Step>]) -> i64 {
    let mut n = 0;
    for s in steps.iter().rev() {
        match &s.observation {
            Some(o) if o.is_failure() => n += 1,
            _ => break,
        }
    }
    n
}

/// Trailing tool-call steps with the same (tool, args hash, observation hash).
fn loop_streak(steps: &[Arc<Step>]) -> (Option<(String, String, String)>, i64) {
    let mut key: Option<(String, String, String)> = None;
    let mut n = 0;
    for s in steps.iter().rev() {
        let (Some(d), Some(o)) = (&s.decision, &s.observation) else {
            break;
        };
        if d.kind != DecisionKind::ToolCall || o.kind == "invalid_decision" {
            break;
        }
        let k = (
            d.tool.clone(),
            json::content_hash(&d.args),
            o.content_hash.clone(),
        );
        match &key {
            None => key = Some(k),
            Some(prev) if *prev == k => {}
            Some(_) => break,
        }
        n += 1;
    }
    (key, n)
}

/// Go's `time.Duration.String()` for nanoseconds: `1h2m3.5s`, `1.5s`, `100ms`, `0s`.
pub fn go_duration(ns: i64) -> String {
    let text = duration_text(u128::from(ns.unsigned_abs()));
    if ns < 0 { format!("-{text}") } else { text }
}

/// [`go_duration`] of a [`std::time::Duration`] (never negative; one longer than Go's
/// `time.Duration` can hold is written the same way).
pub fn go_duration_of(d: std::time::Duration) -> String {
    duration_text(d.as_nanos())
}

/// `ns` nanoseconds as Go writes a duration that is not negative.
fn duration_text(ns: u128) -> String {
    if ns == 0 {
        return "0s".into();
    }
    if ns < 1_000_000_000 {
        // sub-second: ns, µs or ms with a fraction
        let (unit, div) = if ns < 1_000 {
            ("ns", 1)
        } else if ns < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{}{unit}", frac(ns, div));
    }
    let h = ns / 3_600_000_000_000;
    let m = (ns / 60_000_000_000) % 60;
    let s = frac(ns % 60_000_000_000, 1_000_000_000);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

fn frac(v: u128, div: u128) -> String {
    let whole = v / div;
    let f = v % div;
    if f == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let digits = format!("{f:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::go_duration;

    #[test]
    fn durations_print_as_go_does() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(100_000_000), "100ms");
        assert_eq!(go_duration(1_500), "1.5µs");
        assert_eq!(go_duration(3_723_500_000_000), "1h2m3.5s");
        assert_eq!(go_duration(60_000_000_000), "1m0s");
        assert_eq!(go_duration(7), "7ns");
        assert_eq!(go_duration(-1_500_000_000), "-1.5s");
    }
}
