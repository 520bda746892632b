//! `stats`: the queue's own numbers (issue 21). Per tool: calls, what the policy did with them
//! (allowed, denied by code, sent for approval), invalid decisions, what the reviewers did,
//! the median and 90th percentile time to decision and the oldest pending request; per
//! reviewer, the decisions made; then the seed article's review threshold L* = c / (q·p),
//! with p estimated per tool from the share of reviewed calls the reviewers refused.

use std::time::Duration;

use serde_json::{Value, json};

use super::CommandError;
use super::cli::StatsArgs;
use super::open::{Reading, fail};
use super::out::Raws;
use super::text::{clean_bytes, table};
use crate::console::time::{oldest, oldest_ago};
use crate::runtime::stats::{Share, Stats, ToolStats, threshold};
use crate::runtime::types::Timestamp;

/// The article's caveat, printed with every threshold table (the console's stats screen
/// shows it too).
pub use crate::runtime::stats::CAVEAT;

/// Names are cut to this many display columns in the text tables.
const NAME_COLS: usize = 40;

pub fn run(r: Reading<'_>, a: &StatsArgs) -> Result<(), CommandError> {
    let (_, store, json_out, out) = r.parts();
    let (since, now) = window(a);
    let stats = store.stats(since, now).map_err(fail)?;
    print(&stats, a, json_out, out)
}

/// `stats` on PostgreSQL: the same report, counted by the same tallies (decision 0084).
#[cfg(feature = "postgres")]
pub fn run_pg(
    store: &crate::pgstore::PgStore,
    json_out: bool,
    out: &mut super::out::Out,
    a: &StatsArgs,
) -> Result<(), CommandError> {
    store.prepare_console_reads().map_err(fail)?;
    let (since, now) = window(a);
    let stats = store.stats(since, now).map_err(fail)?;
    print(&stats, a, json_out, out)
}

/// Now, and `--since` before it.
fn window(a: &StatsArgs) -> (Option<Timestamp>, Timestamp) {
    let now = Timestamp::now();
    let since = a
        .since
        .map(|d| now.add_nanos(-(d.as_nanos().min(i64::MAX as u128) as i64)));
    (since, now)
}

fn print(
    stats: &Stats,
    a: &StatsArgs,
    json_out: bool,
    out: &mut super::out::Out,
) -> Result<(), CommandError> {
    if json_out {
        out.json(&to_json(stats, a), &Raws::default())
    } else {
        out.raw(&to_text(stats, a))
    }
}

/// A duration as the console writes one (`45s`, `3m`, `2h05m`, `3d4h`).
fn span(d: Duration) -> String {
    crate::console::time::span(d.as_secs().min(i64::MAX as u64) as i64)
}

fn tool_name(tool: &Option<Vec<u8>>, cut: bool) -> String {
    match tool {
        Some(t) => name(t, cut),
        None => "(no readable tool)".into(),
    }
}

fn name(bytes: &[u8], cut: bool) -> String {
    let mut s = if bytes.is_empty() {
        "-".to_string()
    } else {
        clean_bytes(bytes, NAME_COLS)
    };
    if cut {
        s.push_str("…[cut]");
    }
    s
}

fn opt_span(d: Option<Duration>) -> String {
    d.map(span).unwrap_or_else(|| "-".into())
}

fn to_text(s: &Stats, a: &StatsArgs) -> String {
    let mut out = String::new();
    match (&s.since, a.since) {
        (Some(t), Some(d)) => out.push_str(&format!(
            "since {} (the last {}), to the second\n",
            t.format_rfc3339_seconds(),
            span(d)
        )),
        _ => out.push_str("all steps and approvals\n"),
    }
    out.push_str(&format!(
        "oldest pending: {}\n",
        oldest_ago(s.pending(), s.oldest_pending(), s.now.unix_secs())
    ));
    if s.tools.is_empty() {
        out.push_str("no tool calls\n");
    } else {
        out.push('\n');
        let rows: Vec<Vec<String>> = s.tools.iter().map(|t| tool_row(s, t)).collect();
        out.push_str(&table(
            &[
                "TOOL", "CALLS", "ALLOWED", "DENIED", "INVALID", "HELD", "APPROVED", "REJECTED",
                "EXPIRED", "PENDING", "MEDIAN", "P90", "OLDEST",
            ],
            &rows,
        ));
        let denials: Vec<String> = s
            .tools
            .iter()
            .filter(|t| !t.denied.is_empty())
            .map(|t| {
                let codes: Vec<String> = t
                    .denied
                    .iter()
                    .map(|(c, n)| format!("{} {n}", clean_bytes(c.as_bytes(), 40)))
                    .collect();
                format!("  {}: {}", tool_name(&t.tool, t.tool_cut), codes.join(", "))
            })
            .collect();
        if !denials.is_empty() {
            out.push_str("\ndenied, by the code the reason starts with:\n");
            for d in denials {
                out.push_str(&d);
                out.push('\n');
            }
        }
    }
    if !s.reviewers.is_empty() {
        out.push('\n');
        let rows: Vec<Vec<String>> = s
            .reviewers
            .iter()
            .map(|r| {
                vec![
                    name(&r.by, r.by_cut),
                    r.approved.to_string(),
                    r.rejected.to_string(),
                ]
            })
            .collect();
        out.push_str(&table(&["REVIEWER", "APPROVED", "REJECTED"], &rows));
    }
    out.push_str(&format!(
        "\nreview pays for itself above L* = c / (q·p), with c = {} and q = {} (assumed: --review-cost, --catch)\n",
        a.review_cost, a.catch
    ));
    let rows: Vec<Vec<String>> = s
        .tools
        .iter()
        .filter(|t| t.reviewed() > 0)
        .map(|t| threshold_row(t, a))
        .collect();
    if rows.is_empty() {
        out.push_str("no reviewed calls yet: p cannot be estimated\n");
    } else {
        out.push_str(&table(
            &[
                "TOOL",
                "REVIEWED",
                "REFUSED",
                "p",
                "p 95%",
                "L*",
                "L* for p 95%",
            ],
            &rows,
        ));
    }
    out.push_str(CAVEAT);
    out.push('\n');
    if s.damaged_steps > 0 || s.unreadable_times > 0 {
        out.push_str(&format!(
            "not counted: {} damaged step(s) whose decision is not JSON, {} approval time(s) not set or that do not parse\n",
            s.damaged_steps, s.unreadable_times
        ));
    }
    out
}

fn tool_row(s: &Stats, t: &ToolStats) -> Vec<String> {
    vec![
        tool_name(&t.tool, t.tool_cut),
        t.calls.to_string(),
        t.allowed.to_string(),
        t.denied_total().to_string(),
        t.invalid.to_string(),
        t.needs_approval.to_string(),
        t.approved.to_string(),
        t.rejected.to_string(),
        t.expired.to_string(),
        t.pending.to_string(),
        opt_span(t.median()),
        opt_span(t.p90()),
        oldest(t.pending, t.oldest_pending, s.now.unix_secs()),
    ]
}

fn money(x: Option<f64>) -> String {
    match x {
        Some(v) => format!("{v:.2}"),
        None => "∞".into(),
    }
}

fn threshold_row(t: &ToolStats, a: &StatsArgs) -> Vec<String> {
    let share = t.wrong_share();
    let (p, interval, l, l_range) = match share {
        Some(sh) => (
            format!("{:.3}", sh.estimate),
            format!("{:.3}-{:.3}", sh.low, sh.high),
            money(threshold(a.review_cost, a.catch, sh.estimate)),
            format!(
                "{}-{}",
                money(threshold(a.review_cost, a.catch, sh.high)),
                money(threshold(a.review_cost, a.catch, sh.low))
            ),
        ),
        None => ("-".into(), "-".into(), "-".into(), "-".into()),
    };
    vec![
        tool_name(&t.tool, t.tool_cut),
        t.reviewed().to_string(),
        t.rejected.to_string(),
        p,
        interval,
        l,
        l_range,
    ]
}

fn name_json(m: &mut serde_json::Map<String, Value>, key: &str, bytes: &[u8], cut: bool) {
    super::out::id_field(m, key, bytes);
    if cut {
        m.insert(format!("{key}_cut"), json!(true));
    }
}

fn secs(d: Option<Duration>) -> Value {
    d.map(|d| json!(d.as_secs_f64())).unwrap_or(Value::Null)
}

fn share_json(sh: Option<Share>, a: &StatsArgs) -> Value {
    match sh {
        None => Value::Null,
        Some(sh) => json!({
            "refused": sh.k, "reviewed": sh.n, "p": sh.estimate,
            "p_low": sh.low, "p_high": sh.high,
            "threshold": threshold(a.review_cost, a.catch, sh.estimate),
            "threshold_low": threshold(a.review_cost, a.catch, sh.high),
            "threshold_high": threshold(a.review_cost, a.catch, sh.low),
        }),
    }
}

fn to_json(s: &Stats, a: &StatsArgs) -> Value {
    let tools: Vec<Value> = s
        .tools
        .iter()
        .map(|t| {
            let mut m = serde_json::Map::new();
            match &t.tool {
                Some(tool) => name_json(&mut m, "tool", tool, t.tool_cut),
                None => {
                    m.insert("tool".into(), Value::Null);
                }
            }
            m.insert("calls".into(), json!(t.calls));
            m.insert("allowed".into(), json!(t.allowed));
            m.insert("denied".into(), json!(t.denied_total()));
            m.insert("denied_by_code".into(), json!(t.denied));
            m.insert("invalid".into(), json!(t.invalid));
            m.insert("needs_approval".into(), json!(t.needs_approval));
            m.insert("approved".into(), json!(t.approved));
            m.insert("rejected".into(), json!(t.rejected));
            m.insert("expired".into(), json!(t.expired));
            m.insert("pending".into(), json!(t.pending));
            if t.other_status > 0 {
                m.insert("other_status".into(), json!(t.other_status));
            }
            m.insert("median_decision_seconds".into(), secs(t.median()));
            m.insert("p90_decision_seconds".into(), secs(t.p90()));
            m.insert(
                "oldest_pending_at".into(),
                t.oldest_pending
                    .map(|o| json!(o.to_rfc3339()))
                    .unwrap_or(Value::Null),
            );
            m.insert("review".into(), share_json(t.wrong_share(), a));
            Value::Object(m)
        })
        .collect();
    let reviewers: Vec<Value> = s
        .reviewers
        .iter()
        .map(|r| {
            let mut m = serde_json::Map::new();
            name_json(&mut m, "by", &r.by, r.by_cut);
            m.insert("approved".into(), json!(r.approved));
            m.insert("rejected".into(), json!(r.rejected));
            Value::Object(m)
        })
        .collect();
    json!({
        "since": s.since.map(|t| t.to_rfc3339()),
        "now": s.now.to_rfc3339(),
        "oldest_pending_at": s.oldest_pending().map(|t| t.to_rfc3339()),
        "tools": tools,
        "reviewers": reviewers,
        "review_cost": a.review_cost,
        "catch": a.catch,
        "caveat": CAVEAT,
        "damaged_steps": s.damaged_steps,
        "unreadable_times": s.unreadable_times,
    })
}
