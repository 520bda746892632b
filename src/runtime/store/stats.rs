//! The reads behind `countersign stats` (issue 21): two scans in one read transaction, one
//! over the steps (what the Gate did with each call) and one over the approvals (what the
//! reviewers did). Each row's decision and policy are read once, in Rust
//! ([`stats_row`](super::stats_row)), and only a row that read is not sure of is asked of
//! SQLite's JSON functions, so a damaged row is counted as damaged and never fails the report
//! and the work is bounded by the bytes read.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use rusqlite::Connection;

use super::Store;
use super::column::{bytes, text};
use super::error::{Ctx, StoreError};
use super::stats_row::{
    HeldStep, Outcome, StepFacts, approval_by_sql, approval_fast, step_by_sql, step_fast,
};
use crate::runtime::stats::{NAME_MAX, ReviewerStats, Stats, ToolStats};
use crate::runtime::types::Timestamp;

/// Per step: its rowid, decision and policy, and whether the runtime refused the decision (no
/// policy asked, the step failed, an `invalid_decision` observation). The observation is
/// looked into only for those few rows, so its bytes are not read for every step.
const STEPS: &str = "
SELECT rowid, decision_json, policy_json,
  CASE WHEN policy_json = '' AND status = 'failed' AND json_valid(observation_json)
       THEN json_extract(observation_json, '$.kind') = 'invalid_decision' ELSE 0 END
FROM steps
WHERE ?1 IS NULL OR substr(started_at, 1, 19) >= ?1";

/// Per approval: its rowid and its step's (none when the step is missing), the step's decision
/// and recorded policy (a held step whose policy now says `allow` is not counted as allowed at
/// once), status, times, reviewer (cut), whether cut, and its step's id.
const APPROVALS: &str = "
SELECT a.rowid, s.rowid, s.decision_json, s.policy_json, a.status, a.created_at,
       a.decided_at, substr(CAST(a.decided_by AS BLOB), 1, ?2),
       length(CAST(a.decided_by AS BLOB)) > ?2, a.step_id
FROM approvals a LEFT JOIN steps s ON s.id = a.step_id
WHERE ?1 IS NULL OR substr(a.created_at, 1, 19) >= ?1";

impl Store {
    /// The queue's numbers since `since` (to the second; every step and approval when
    /// `None`), read in one read transaction.
    pub fn stats(&self, since: Option<Timestamp>, now: Timestamp) -> Result<Stats, StoreError> {
        self.read(|conn| read_stats(conn, since, now))
    }
}

fn read_stats(
    conn: &Connection,
    since: Option<Timestamp>,
    now: Timestamp,
) -> Result<Stats, StoreError> {
    let cutoff = since.map(|t| t.format_always().chars().take(19).collect::<String>());
    let (mut tools, damaged_steps) = scan_steps(conn, cutoff.as_deref())?;
    let (reviewers, unreadable_times) = scan_approvals(conn, cutoff.as_deref(), &mut tools)?;
    Ok(Stats {
        since,
        now,
        tools: tools.into_values().collect(),
        reviewers: reviewers.into_values().collect(),
        unreadable_times,
        damaged_steps,
    })
}

type Tools = BTreeMap<Option<Vec<u8>>, ToolStats>;

/// The steps: per tool, calls, allowed, denied by code and invalid; and the damaged steps.
fn scan_steps(conn: &Connection, cutoff: Option<&str>) -> Result<(Tools, u64), StoreError> {
    let mut tally = StepTally::default();
    let mut stmt = conn.prepare(STEPS).ctx("stats: steps")?;
    let mut rows = stmt.query(rusqlite::params![cutoff]).ctx("stats: steps")?;
    while let Some(r) = rows.next().ctx("stats: steps")? {
        let decision = r.get_ref(1).ctx("stats: steps")?;
        let policy = r.get_ref(2).ctx("stats: steps")?;
        let facts = match step_fast(decision, policy) {
            Some(f) => f,
            None => step_by_sql(conn, r.get(0).ctx("stats: steps")?)?,
        };
        let invalid = r
            .get::<_, Option<bool>>(3)
            .ctx("stats: steps")?
            .unwrap_or(false);
        tally.add(facts, invalid);
    }
    Ok(tally.finish())
}

/// The steps' counts as they are read, one row at a time (either backend's rows).
#[derive(Default)]
struct StepTally {
    // Looked up by borrowed bytes while scanning (the last row's tool first), so a row's tool
    // name is copied only once per tool; the unnamed calls apart.
    named: Vec<ToolStats>,
    index: HashMap<Vec<u8>, usize>,
    last: Option<usize>,
    unnamed: Option<ToolStats>,
    damaged: u64,
}

impl StepTally {
    /// Counts one step: what it was, and whether the runtime refused its decision.
    fn add(&mut self, facts: StepFacts<'_>, invalid: bool) {
        let (tool, cut, outcome) = match facts {
            StepFacts::Skip => return,
            StepFacts::Damaged => {
                self.damaged += 1;
                return;
            }
            StepFacts::Call { tool, cut, outcome } => (tool, cut, outcome),
        };
        let t = match tool {
            None => self.unnamed.get_or_insert_with(ToolStats::default),
            Some(name) => {
                let same = |t: &ToolStats| t.tool.as_deref() == Some(name.as_ref());
                let at = match self.last.filter(|&i| self.named.get(i).is_some_and(same)) {
                    Some(i) => i,
                    None => match self.index.get(name.as_ref()) {
                        Some(&i) => i,
                        None => {
                            self.named.push(ToolStats {
                                tool: Some(name.to_vec()),
                                ..ToolStats::default()
                            });
                            self.index.insert(name.into_owned(), self.named.len() - 1);
                            self.named.len() - 1
                        }
                    },
                };
                self.last = Some(at);
                match self.named.get_mut(at) {
                    Some(t) => t,
                    None => return,
                }
            }
        };
        t.tool_cut |= cut;
        t.calls += 1;
        if invalid {
            t.invalid += 1;
        }
        match outcome {
            Outcome::Allow => t.allowed += 1,
            Outcome::Denied(code) => match t.denied.get_mut(code.as_ref()) {
                Some(n) => *n += 1,
                None => {
                    t.denied.insert(code.into_owned(), 1);
                }
            },
            Outcome::Neither => {}
        }
    }

    fn finish(self) -> (Tools, u64) {
        let mut tools: Tools = self
            .named
            .into_iter()
            .map(|t| (t.tool.clone(), t))
            .collect();
        if let Some(t) = self.unnamed {
            tools.insert(None, t);
        }
        (tools, self.damaged)
    }
}

/// The approvals: per tool, what the reviewers did (taking held-then-allowed calls back out of
/// `allowed`); per reviewer, the decisions; and the times that could not be read.
fn scan_approvals(
    conn: &Connection,
    cutoff: Option<&str>,
    tools: &mut Tools,
) -> Result<(BTreeMap<Vec<u8>, ReviewerStats>, u64), StoreError> {
    let mut tally = ApprovalTally::default();
    let mut stmt = conn.prepare(APPROVALS).ctx("stats: approvals")?;
    let mut rows = stmt
        .query(rusqlite::params![cutoff, NAME_MAX as i64])
        .ctx("stats: approvals")?;
    while let Some(r) = rows.next().ctx("stats: approvals")? {
        let fast = approval_fast(
            r.get_ref(2).ctx("stats: approvals")?,
            r.get_ref(3).ctx("stats: approvals")?,
        );
        let held = match fast {
            Some(h) => h,
            None => approval_by_sql(
                conn,
                r.get(0).ctx("stats: approvals")?,
                r.get(1).ctx("stats: approvals")?,
            )?,
        };
        let row = ApprovalRow {
            status: text(r.get_ref(4).ctx("stats: approvals")?).unwrap_or_default(),
            created: text(r.get_ref(5).ctx("stats: approvals")?).unwrap_or_default(),
            decided: text(r.get_ref(6).ctx("stats: approvals")?).unwrap_or_default(),
            by: bytes(r.get_ref(7).ctx("stats: approvals")?),
            by_cut: r
                .get::<_, Option<bool>>(8)
                .ctx("stats: approvals")?
                .unwrap_or(false),
            step: bytes(r.get_ref(9).ctx("stats: approvals")?),
        };
        tally.add(tools, held, row);
    }
    Ok((tally.reviewers, tally.unreadable_times))
}

/// What the approvals scan reads of one approval besides its step.
struct ApprovalRow {
    status: String,
    created: String,
    decided: String,
    /// The reviewer, cut to [`NAME_MAX`] bytes, and whether it was cut.
    by: Vec<u8>,
    by_cut: bool,
    /// The step's id.
    step: Vec<u8>,
}

/// The approvals' counts as they are read, one row at a time (either backend's rows).
#[derive(Default)]
struct ApprovalTally {
    reviewers: BTreeMap<Vec<u8>, ReviewerStats>,
    // Held steps whose recorded outcome is `allow` (the resume's verdict): counted by the
    // steps as allowed, taken back out once per step.
    held_allowed: HashSet<Vec<u8>>,
    unreadable_times: u64,
}

impl ApprovalTally {
    fn add(&mut self, tools: &mut Tools, held: HeldStep<'_>, row: ApprovalRow) {
        let t = entry(tools, held.tool.map(Cow::into_owned), held.cut);
        t.needs_approval += 1;
        if held.allowed && self.held_allowed.insert(row.step) {
            t.allowed = t.allowed.saturating_sub(1);
        }
        let rv = tally_approval(
            t,
            &row.status,
            &row.created,
            &row.decided,
            &mut self.unreadable_times,
        );
        if let Some(approved) = rv {
            let by = row.by;
            let rv = self
                .reviewers
                .entry(by.clone())
                .or_insert_with(|| ReviewerStats {
                    by: by.clone(),
                    ..ReviewerStats::default()
                });
            rv.by_cut |= row.by_cut;
            if approved {
                rv.approved += 1;
            } else {
                rv.rejected += 1;
            }
        }
    }
}

/// Counts one approval's status and times on its tool; `Some(approved)` when a reviewer
/// decided it.
fn tally_approval(
    t: &mut ToolStats,
    status: &str,
    created: &str,
    decided: &str,
    unreadable_times: &mut u64,
) -> Option<bool> {
    // The zero time is a time not set: it has no age and would stand as everyone's oldest.
    let read = |t: &str| Timestamp::parse(t).ok().filter(|t| !t.is_zero());
    let created = read(created);
    match status {
        "pending" => {
            t.pending += 1;
            match created {
                Some(c) => t.oldest_pending = Some(t.oldest_pending.map_or(c, |o| o.min(c))),
                None => *unreadable_times += 1,
            }
            None
        }
        "approved" | "rejected" => {
            let approved = status == "approved";
            if approved {
                t.approved += 1;
            } else {
                t.rejected += 1;
            }
            match (created, read(decided)) {
                (Some(c), Some(d)) => t
                    .decision_times
                    .push(std::time::Duration::from_nanos(d.sub(&c).max(0) as u64)),
                _ => *unreadable_times += 1,
            }
            Some(approved)
        }
        "expired" => {
            t.expired += 1;
            None
        }
        _ => {
            t.other_status += 1;
            None
        }
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

/// The queue's numbers from rows another backend reads (PostgreSQL), counted by the same
/// tallies as SQLite's scans: every step first, then every approval. A row the fast read is
/// not sure of (escapes, numbers, damaged JSON) is asked of SQLite's own JSON functions on a
/// scratch in-memory database holding only that row, so the answer is the one SQLite gives.
#[cfg(feature = "postgres")]
pub(crate) struct StatsFromRows {
    since: Option<Timestamp>,
    now: Timestamp,
    steps: Option<StepTally>,
    tools: Tools,
    damaged_steps: u64,
    approvals: ApprovalTally,
    scratch: Connection,
}

#[cfg(feature = "postgres")]
fn text_ref(v: Option<&str>) -> rusqlite::types::ValueRef<'_> {
    v.map_or(rusqlite::types::ValueRef::Null, |s| {
        rusqlite::types::ValueRef::Text(s.as_bytes())
    })
}

#[cfg(feature = "postgres")]
impl StatsFromRows {
    pub(crate) fn new(since: Option<Timestamp>, now: Timestamp) -> Result<Self, StoreError> {
        let scratch = Connection::open_in_memory().ctx("stats: scratch")?;
        scratch
            .execute_batch(
                "CREATE TABLE steps (id, decision_json, policy_json); \
                 CREATE TABLE approvals (step_id);",
            )
            .ctx("stats: scratch")?;
        Ok(StatsFromRows {
            since,
            now,
            steps: Some(StepTally::default()),
            tools: Tools::new(),
            damaged_steps: 0,
            approvals: ApprovalTally::default(),
            scratch,
        })
    }

    /// The first 19 characters of `since` the scans compare `started_at`/`created_at` with.
    pub(crate) fn cutoff(&self) -> Option<String> {
        self.since
            .map(|t| t.format_always().chars().take(19).collect::<String>())
    }

    fn put_step(
        &self,
        rowid: i64,
        id: &str,
        decision: Option<&str>,
        policy: Option<&str>,
    ) -> Result<(), StoreError> {
        self.scratch
            .execute(
                "INSERT INTO steps (rowid, id, decision_json, policy_json) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![rowid, id, decision, policy],
            )
            .ctx("stats: scratch")?;
        Ok(())
    }

    /// Counts one step (`rowid` its key, `invalid` whether the runtime refused its decision).
    pub(crate) fn step(
        &mut self,
        rowid: i64,
        decision: Option<&str>,
        policy: Option<&str>,
        invalid: bool,
    ) -> Result<(), StoreError> {
        let facts = match step_fast(text_ref(decision), text_ref(policy)) {
            Some(f) => f,
            None => {
                self.scratch
                    .execute_batch("DELETE FROM steps;")
                    .ctx("stats: scratch")?;
                self.put_step(rowid, "", decision, policy)?;
                step_by_sql(&self.scratch, rowid)?
            }
        };
        if let Some(t) = self.steps.as_mut() {
            t.add(facts, invalid);
        }
        Ok(())
    }

    /// Counts one approval: its key, its step's key, id, decision and policy (`None`: no such
    /// step), status, times, reviewer (cut to `NAME_MAX` bytes, and whether cut).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn approval(
        &mut self,
        rowid: i64,
        step: Option<(i64, Option<&str>, Option<&str>)>,
        step_id: &str,
        status: &str,
        created: &str,
        decided: &str,
        by: Vec<u8>,
        by_cut: bool,
    ) -> Result<(), StoreError> {
        if let Some(t) = self.steps.take() {
            let (tools, damaged) = t.finish();
            self.tools = tools;
            self.damaged_steps = damaged;
        }
        let (decision, policy) = step.map_or((None, None), |(_, d, p)| (d, p));
        let held = match approval_fast(text_ref(decision), text_ref(policy)) {
            Some(h) => h,
            None => {
                self.scratch
                    .execute_batch("DELETE FROM steps; DELETE FROM approvals;")
                    .ctx("stats: scratch")?;
                self.scratch
                    .execute(
                        "INSERT INTO approvals (rowid, step_id) VALUES (?1, ?2)",
                        rusqlite::params![rowid, step_id],
                    )
                    .ctx("stats: scratch")?;
                if let Some((s, d, p)) = step {
                    self.put_step(s, step_id, d, p)?;
                }
                approval_by_sql(&self.scratch, rowid, step.map(|s| s.0))?
            }
        };
        let row = ApprovalRow {
            status: status.to_string(),
            created: created.to_string(),
            decided: decided.to_string(),
            by,
            by_cut,
            step: step_id.as_bytes().to_vec(),
        };
        self.approvals.add(&mut self.tools, held, row);
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Stats {
        if let Some(t) = self.steps.take() {
            let (tools, damaged) = t.finish();
            self.tools = tools;
            self.damaged_steps = damaged;
        }
        Stats {
            since: self.since,
            now: self.now,
            tools: self.tools.into_values().collect(),
            reviewers: self.approvals.reviewers.into_values().collect(),
            unreadable_times: self.approvals.unreadable_times,
            damaged_steps: self.damaged_steps,
        }
    }
}
