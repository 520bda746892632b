//! The scan `stats` (issue 21) used before it read the columns in Rust: every count through
//! SQLite's JSON functions, which parse each step's decision and policy four to six times.
//! Kept as the oracle the faster scan must agree with (`tests/stats_scan.rs`) and as the "old"
//! figure of `benches/stats.rs`. Not the crate's code: a copy of it as it was, but for one
//! change the crate made since: a member named twice is read as Go reads it, the last one
//! (`json_each`; `json_extract` takes the first).
#![allow(dead_code)]

use std::collections::BTreeMap;

use countersign::runtime::stats::{NAME_MAX, ReviewerStats, Stats, ToolStats, reason_code};
use countersign::runtime::types::Timestamp;
use rusqlite::Connection;
use rusqlite::types::ValueRef;

/// Per step: validity, kind, tool (cut), whether cut, outcome, the start of a denial's reason,
/// and whether the runtime refused the decision (no policy asked, the step failed, an
/// `invalid_decision` observation); grouped. The observation is looked into only for those
/// few rows, so its bytes are not parsed for every step.
const STEPS: &str = "
SELECT v, dk, substr(CAST(t AS BLOB), 1, ?2), length(CAST(t AS BLOB)) > ?2, o, r, inv, COUNT(*)
FROM (
  SELECT
    json_valid(decision_json) AS v,
    decision_json != '' AS ne,
    CASE WHEN json_valid(decision_json) THEN (SELECT value FROM json_each(decision_json) WHERE key = 'kind' ORDER BY id DESC LIMIT 1) END AS dk,
    CASE WHEN json_valid(decision_json) THEN (SELECT value FROM json_each(decision_json) WHERE key = 'tool' ORDER BY id DESC LIMIT 1) END AS t,
    CASE WHEN json_valid(policy_json) THEN (SELECT value FROM json_each(policy_json) WHERE key = 'outcome' ORDER BY id DESC LIMIT 1) END AS o,
    CASE WHEN json_valid(policy_json)
           AND (SELECT value FROM json_each(policy_json) WHERE key = 'outcome' ORDER BY id DESC LIMIT 1) IN ('deny', 'abort')
         THEN substr(CAST((SELECT value FROM json_each(policy_json) WHERE key = 'reason' ORDER BY id DESC LIMIT 1) AS TEXT), 1, 48) END AS r,
    CASE WHEN policy_json = '' AND status = 'failed' AND json_valid(observation_json)
         THEN json_extract(observation_json, '$.kind') = 'invalid_decision' ELSE 0 END AS inv
  FROM steps
  WHERE ?1 IS NULL OR substr(started_at, 1, 19) >= ?1
)
WHERE (v = 0 AND ne) OR dk = 'tool_call'
GROUP BY 1, 2, 3, 4, 5, 6, 7";

/// Per approval: its call's tool (cut), whether cut, status, times, reviewer (cut), whether
/// cut, its step's id and the step's recorded policy outcome (a held step whose policy now
/// says `allow` is not counted as allowed at once).
const APPROVALS: &str = "
SELECT substr(CAST(t AS BLOB), 1, ?2), length(CAST(t AS BLOB)) > ?2, status, created_at,
       decided_at, substr(CAST(decided_by AS BLOB), 1, ?2), length(CAST(decided_by AS BLOB)) > ?2,
       step_id, o
FROM (
  SELECT a.status, a.created_at, a.decided_at, a.decided_by, a.step_id,
    CASE WHEN json_valid(s.decision_json) THEN (SELECT value FROM json_each(s.decision_json) WHERE key = 'tool' ORDER BY id DESC LIMIT 1) END AS t,
    CASE WHEN json_valid(s.policy_json) THEN (SELECT value FROM json_each(s.policy_json) WHERE key = 'outcome' ORDER BY id DESC LIMIT 1) END AS o
  FROM approvals a LEFT JOIN steps s ON s.id = a.step_id
  WHERE ?1 IS NULL OR substr(a.created_at, 1, 19) >= ?1
)";

/// The old scan: every count through SQLite's JSON functions.
pub fn stats_by_sql(conn: &Connection, since: Option<Timestamp>, now: Timestamp) -> Stats {
    let cutoff = since.map(|t| t.format_always().chars().take(19).collect::<String>());
    let mut tools: BTreeMap<Option<Vec<u8>>, ToolStats> = BTreeMap::new();
    let mut damaged_steps = 0u64;
    // A step whose decision is there but not JSON is damaged: counted, not looked into.
    let mut stmt = conn.prepare(STEPS).unwrap();
    let mut rows = stmt
        .query(rusqlite::params![cutoff, NAME_MAX as i64])
        .unwrap();
    while let Some(r) = rows.next().unwrap() {
        let valid: i64 = r.get(0).unwrap();
        let n: i64 = r.get(7).unwrap();
        let n = n.max(0) as u64;
        if valid == 0 {
            damaged_steps += n;
            continue;
        }
        let tool = opt_bytes(r.get_ref(2).unwrap());
        let cut: bool = r.get::<_, Option<bool>>(3).unwrap().unwrap_or(false);
        let outcome = text(r.get_ref(4).unwrap());
        let reason = text(r.get_ref(5).unwrap());
        let invalid: bool = r.get::<_, Option<bool>>(6).unwrap().unwrap_or(false);
        let t = entry(&mut tools, tool, cut);
        t.calls += n;
        if invalid {
            t.invalid += n;
        }
        match outcome.as_deref() {
            Some("allow") => t.allowed += n,
            Some("deny") | Some("abort") => {
                let code = reason_code(reason.as_deref().unwrap_or("")).to_string();
                *t.denied.entry(code).or_default() += n;
            }
            _ => {}
        }
    }
    drop(rows);
    drop(stmt);

    let mut reviewers: BTreeMap<Vec<u8>, ReviewerStats> = BTreeMap::new();
    // Held steps whose recorded outcome is `allow` (the resume's verdict): counted above as
    // allowed, taken back out once per step.
    let mut held_allowed = std::collections::HashSet::new();
    let mut unreadable_times = 0u64;
    let mut stmt = conn.prepare(APPROVALS).unwrap();
    let mut rows = stmt
        .query(rusqlite::params![cutoff, NAME_MAX as i64])
        .unwrap();
    while let Some(r) = rows.next().unwrap() {
        let tool = opt_bytes(r.get_ref(0).unwrap());
        let cut: bool = r.get::<_, Option<bool>>(1).unwrap().unwrap_or(false);
        let status = text(r.get_ref(2).unwrap()).unwrap_or_default();
        let created = text(r.get_ref(3).unwrap()).unwrap_or_default();
        let decided = text(r.get_ref(4).unwrap()).unwrap_or_default();
        let by = bytes(r.get_ref(5).unwrap());
        let by_cut: bool = r.get::<_, Option<bool>>(6).unwrap().unwrap_or(false);
        let step = bytes(r.get_ref(7).unwrap());
        let step_outcome = text(r.get_ref(8).unwrap());
        let t = entry(&mut tools, tool, cut);
        t.needs_approval += 1;
        if step_outcome.as_deref() == Some("allow") && held_allowed.insert(step) {
            t.allowed = t.allowed.saturating_sub(1);
        }
        let read = |t: &str| Timestamp::parse(t).ok().filter(|t| !t.is_zero());
        let created = read(&created);
        match status.as_str() {
            "pending" => {
                t.pending += 1;
                match created {
                    Some(c) => {
                        t.oldest_pending = Some(t.oldest_pending.map_or(c, |o| o.min(c)));
                    }
                    None => unreadable_times += 1,
                }
            }
            "approved" | "rejected" => {
                if status == "approved" {
                    t.approved += 1;
                } else {
                    t.rejected += 1;
                }
                match (created, read(&decided)) {
                    (Some(c), Some(d)) => t
                        .decision_times
                        .push(std::time::Duration::from_nanos(d.sub(&c).max(0) as u64)),
                    _ => unreadable_times += 1,
                }
                let rv = reviewers
                    .entry(by.clone())
                    .or_insert_with(|| ReviewerStats {
                        by: by.clone(),
                        ..ReviewerStats::default()
                    });
                rv.by_cut |= by_cut;
                if status == "approved" {
                    rv.approved += 1;
                } else {
                    rv.rejected += 1;
                }
            }
            "expired" => t.expired += 1,
            _ => t.other_status += 1,
        }
    }
    Stats {
        since,
        now,
        tools: tools.into_values().collect(),
        reviewers: reviewers.into_values().collect(),
        unreadable_times,
        damaged_steps,
    }
}

fn entry(
    tools: &mut BTreeMap<Option<Vec<u8>>, ToolStats>,
    tool: Option<Vec<u8>>,
    cut: bool,
) -> &mut ToolStats {
    let t = tools.entry(tool.clone()).or_insert_with(|| ToolStats {
        tool,
        ..ToolStats::default()
    });
    t.tool_cut |= cut;
    t
}

/// A column's bytes whatever its type (NULL is empty).
fn bytes(v: ValueRef<'_>) -> Vec<u8> {
    match v {
        ValueRef::Null => Vec::new(),
        ValueRef::Integer(i) => i.to_string().into_bytes(),
        ValueRef::Real(f) => f.to_string().into_bytes(),
        ValueRef::Text(b) | ValueRef::Blob(b) => b.to_vec(),
    }
}

/// A column's bytes, `None` for NULL.
fn opt_bytes(v: ValueRef<'_>) -> Option<Vec<u8>> {
    match v {
        ValueRef::Null => None,
        other => Some(bytes(other)),
    }
}

/// A column as text when it is text (lossless for UTF-8; `None` for NULL).
fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Null => None,
        other => Some(String::from_utf8_lossy(&bytes(other)).into_owned()),
    }
}
