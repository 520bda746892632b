//! The row writes of a [`Tx`] (spec 3.2, 4.3, 1.4): the SQL of each in one place, every update
//! a compare-and-set on the state it expects (or, for the cancel/reject/internal bulk updates,
//! by status as agentrt does).

use rusqlite::{ToSql, params};

use super::Tx;
use super::bind::key;
use super::error::{Ctx, StoreError};
use crate::runtime::json::gojson;
use crate::runtime::types::{AsKey, Key, Limits, RunStatus, Said, StepStatus, Timestamp};

/// What `insert_run` writes.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    /// The run's id; an id already in `runs` makes the insert fail.
    pub id: &'a str,
    /// The goal, stored as given.
    pub goal: &'a str,
    /// Stored as `limits_json` (Go JSON, spec 2) and in `run.created`.
    pub limits: &'a Limits,
    /// created_at = started_at = this.
    pub now: Timestamp,
    /// Spec hashes of every registered tool, by tool name (`run.created`'s `tools`).
    pub tools: &'a [String],
    /// The owner the new run is leased to (it starts RUNNING under this lease).
    pub lease_owner: &'a str,
    /// When that lease lapses unless renewed.
    pub lease_expires_at: Timestamp,
}

/// The columns a step update sets (`None` = unchanged). Each is written as given: the caller
/// has already encoded the JSON columns as Go does.
#[derive(Debug, Clone, Default)]
pub struct StepUpdate<'a> {
    /// `status`.
    pub status: Option<StepStatus>,
    /// `decision_json`: the agent's decision, Go JSON.
    pub decision_json: Option<&'a str>,
    /// `policy_json`: the policy's verdict in policy form (spec 4.6).
    pub policy_json: Option<&'a str>,
    /// `observation_json`: what the tool call (or its refusal) produced, Go JSON.
    pub observation_json: Option<&'a str>,
    /// `observation_hash`: the observation content's hash (spec 5.3).
    pub observation_hash: Option<&'a str>,
    /// `started_at` (stored as RFC 3339; zero as `''`).
    pub started_at: Option<Timestamp>,
    /// `finished_at`.
    pub finished_at: Option<Timestamp>,
    /// `spec_hash`: the `tool_specs` key of the tool the step called.
    pub spec_hash: Option<&'a str>,
    /// `policy_id`: the identity of the policy that judged the step.
    pub policy_id: Option<&'a str>,
}

/// The observation a step fails with when the operator or the driver fails it
/// (`fail_steps`).
#[derive(Debug, Clone, Copy)]
pub struct StepFailure<'a> {
    /// `observation_json`, Go JSON.
    pub observation_json: &'a str,
    /// `observation_hash` (spec 5.3).
    pub observation_hash: &'a str,
    /// `finished_at`.
    pub finished_at: Timestamp,
}

/// Which of a run's steps `fail_steps` fails.
#[derive(Debug, Clone, Copy)]
pub enum Failing<'a> {
    /// Every step in `deciding`, `awaiting_approval` or `executing` (cancel, failInternal).
    InFlight,
    /// The step with this id, whatever its status (a rejection's step failure).
    Step(&'a [u8]),
}

/// What `set_approval_status` writes: the approval's decision, set only while it is still
/// `expected_status` with `hash` (one struct for SQLite's and PostgreSQL's update, so a column
/// added to one cannot be forgotten in the other).
#[derive(Debug, Clone, Copy)]
pub struct ApprovalDecision<'a> {
    /// The status set.
    pub status: &'a str,
    /// `note`.
    pub note: &'a str,
    /// `decided_by`; `None` leaves that column.
    pub decided_by: Option<&'a str>,
    /// `decided_at`.
    pub decided_at: Timestamp,
    /// The status the approval must still have.
    pub expected_status: &'a str,
    /// The hash it must still have.
    pub hash: &'a str,
}

/// What `insert_approval` writes (status `pending`).
#[derive(Debug, Clone)]
pub struct NewApproval<'a> {
    /// The approval's id.
    pub id: &'a str,
    /// The run it pauses.
    pub run_id: &'a str,
    /// The step whose tool call waits on it.
    pub step_id: &'a str,
    /// The policy's `kind` for it.
    pub kind: &'a str,
    /// The capability the grant binds, Go JSON.
    pub capability_json: &'a str,
    /// What the reviewer is shown, Go JSON.
    pub presentation_json: &'a str,
    /// The `ToolRequest` that runs when granted, Go JSON.
    pub request_json: &'a str,
    /// The approval hash (spec 4.2) over kind, capability, presentation and request; the
    /// caller computes it, the store does not check it.
    pub hash: &'a str,
    /// When the approval was created.
    pub created_at: Timestamp,
    /// When it expires (spec 4.5); zero = never.
    pub expires_at: Timestamp,
}

/// What model calls add to their run's accounting (`add_usage`): each amount clamped at 0,
/// each total saturating at the largest integer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Charge {
    /// Model calls made.
    pub calls: i64,
    /// Input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Input tokens served from the provider's cache.
    pub cached_input_tokens: i64,
    /// Estimated cost, in micro-units of the pricing's currency.
    pub cost_micros: i64,
}

impl Charge {
    /// The run's columns it adds to, each with its amount clamped at 0, in one order.
    pub fn columns(&self) -> [(&'static str, i64); 5] {
        [
            ("model_calls", self.calls),
            ("input_tokens", self.input_tokens),
            ("output_tokens", self.output_tokens),
            ("cached_input_tokens", self.cached_input_tokens),
            ("estimated_cost_micros", self.cost_micros),
        ]
        .map(|(c, v)| (c, v.max(0)))
    }
}

/// A `model_calls` row: every field for `insert_model_call`; `finish_model_call` uses `id`
/// to find the row and writes only the outcome fields (status, usage, cost, latency, error,
/// completion time).
#[derive(Debug, Clone, Default)]
pub struct NewModelCall<'a> {
    /// The call's id (one per attempt).
    pub id: &'a str,
    /// The run charged.
    pub run_id: &'a str,
    /// The step whose agent made the call.
    pub step_id: &'a str,
    /// The attempt's number within the call, from 1.
    pub attempt: i64,
    /// `dispatched`, then `ok`, `error` or `ambiguous`.
    pub status: &'a str,
    /// The model's name.
    pub model: &'a str,
    /// Input tokens charged.
    pub input_tokens: i64,
    /// Output tokens charged.
    pub output_tokens: i64,
    /// Cached input tokens charged (part of `input_tokens`).
    pub cached_input_tokens: i64,
    /// Cost charged, in micros.
    pub cost_micros: i64,
    /// Milliseconds from dispatch to the recorded outcome.
    pub latency_ms: i64,
    /// The attempt's error; empty on success.
    pub error: &'a str,
    /// When the attempt was dispatched.
    pub dispatched_at: Timestamp,
    /// When its outcome was recorded; zero (stored `''`) while dispatched.
    pub completed_at: Timestamp,
}

/// A new run's `limits_json` and its `run.created` payload `{"goal","limits","tools"}`, as
/// both backends store them.
pub(crate) fn run_created(r: &NewRun<'_>) -> (String, Vec<u8>) {
    let limits = r.limits.to_go_json();
    let limits_text = String::from_utf8_lossy(&limits).into_owned();
    let mut tools = b"[".to_vec();
    for (i, h) in r.tools.iter().enumerate() {
        if i > 0 {
            tools.push(b',');
        }
        gojson::write_string(&mut tools, h);
    }
    tools.push(b']');
    let mut goal = Vec::new();
    gojson::write_string(&mut goal, r.goal);
    let payload = gojson::Object::new()
        .encoded("goal", &goal)
        .encoded("limits", &limits)
        .encoded("tools", &tools)
        .finish();
    (limits_text, payload)
}

impl Tx<'_> {
    /// Inserts a run RUNNING (created_at = started_at = now, leased) and appends `run.created`
    /// `{"goal","limits","tools"}` then `run.started` `{}`.
    pub fn insert_run(&mut self, r: &NewRun<'_>) -> Result<(), StoreError> {
        let (limits_text, payload) = run_created(r);
        let now = r.now.to_rfc3339();
        self.tx
            .prepare_cached(
                "INSERT INTO runs (id, goal, status, limits_json, created_at, started_at, lease_owner, lease_expires_at) \
                 VALUES (?,?,?,?,?,?,?,?)",
            )
            .ctx("insert run")?
            .execute(params![
                r.id,
                r.goal,
                RunStatus::Running.as_str(),
                limits_text,
                now,
                now,
                r.lease_owner,
                r.lease_expires_at.to_rfc3339()
            ])
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                        || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE =>
                {
                    StoreError::RunExists {
                        run_id: Key::new(r.id.as_bytes()),
                    }
                }
                e => StoreError::sqlite("insert run", e),
            })?;
        self.append(r.id, "", &r.now, "run.created", &payload)?;
        self.append(r.id, "", &r.now, "run.started", b"{}")?;
        Ok(())
    }

    /// Claims step index `index` (`step_count` must equal it, run RUNNING and leased by
    /// `lease_owner`), inserts the step `deciding` and appends `step.started {"index":n}`.
    pub fn start_step(
        &mut self,
        run_id: &str,
        step_id: &str,
        index: i64,
        lease_owner: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let n = self
            .tx
            .prepare_cached(
                "UPDATE runs SET step_count = step_count + 1 WHERE id=? AND status='RUNNING' AND step_count=? AND lease_owner=?",
            )
            .ctx("claim step")?
            .execute(params![run_id, index, lease_owner])
            .ctx("claim step")?;
        if n == 0 {
            self.require_status(run_id, &[RunStatus::Running], Some(lease_owner))?;
            return Err(StoreError::RunState {
                detail: Said::from("run ")
                    .id(run_id)
                    .text(format!(" has moved past step {index}")),
            });
        }
        self.tx
            .prepare_cached(
                "INSERT INTO steps (id, run_id, idx, status, started_at) VALUES (?,?,?,?,?)",
            )
            .ctx("insert step")?
            .execute(params![
                step_id,
                run_id,
                index,
                StepStatus::Deciding.as_str(),
                now.to_rfc3339()
            ])
            .ctx("insert step")?;
        let payload = gojson::Object::new().int("index", index).finish();
        self.append(run_id, step_id, &now, "step.started", &payload)?;
        Ok(())
    }

    /// Updates a step only if its status is one of `expected` (0 rows → RunState
    /// `"step <id> is <status>"`).
    pub fn update_step<'u>(
        &self,
        step_id: &'u str,
        expected: &'u [StepStatus],
        u: &'u StepUpdate<'u>,
    ) -> Result<(), StoreError> {
        use std::borrow::Cow;
        let mut sets: Vec<&str> = Vec::new();
        // The values are bound as borrowed where they can be: an observation can be large.
        let mut vals: Vec<Cow<'u, str>> = Vec::new();
        let mut set = |col: &'static str, v: Option<Cow<'u, str>>| {
            if let Some(v) = v {
                sets.push(col);
                vals.push(v);
            }
        };
        set(
            "status=?",
            u.status.as_ref().map(|s| Cow::Borrowed(s.as_str())),
        );
        set("decision_json=?", u.decision_json.map(Cow::Borrowed));
        set("policy_json=?", u.policy_json.map(Cow::Borrowed));
        set("observation_json=?", u.observation_json.map(Cow::Borrowed));
        set("observation_hash=?", u.observation_hash.map(Cow::Borrowed));
        set(
            "started_at=?",
            u.started_at.map(|t| Cow::Owned(t.to_rfc3339())),
        );
        set(
            "finished_at=?",
            u.finished_at.map(|t| Cow::Owned(t.to_rfc3339())),
        );
        set("spec_hash=?", u.spec_hash.map(Cow::Borrowed));
        set("policy_id=?", u.policy_id.map(Cow::Borrowed));
        if sets.is_empty() {
            // Nothing to set is still a compare-and-set on the step's state: the row is
            // matched (and rewritten unchanged) or the caller learns it moved.
            sets.push("status=status");
        }
        let placeholders = vec!["?"; expected.len().max(1)].join(",");
        let sql = format!(
            "UPDATE steps SET {} WHERE id=? AND status IN ({placeholders})",
            sets.join(", ")
        );
        let mut args = vals;
        args.push(Cow::Borrowed(step_id));
        if expected.is_empty() {
            args.push(Cow::Borrowed(""));
        }
        args.extend(expected.iter().map(|s| Cow::Borrowed(s.as_str())));
        let n = self
            .tx
            .prepare_cached(&sql)
            .ctx("update step")?
            .execute(rusqlite::params_from_iter(args.iter()))
            .ctx("update step")?;
        if n == 0 {
            let status: Option<String> = self
                .tx
                .query_row(
                    "SELECT CAST(status AS BLOB) FROM steps WHERE id=?",
                    [step_id],
                    |r| {
                        Ok(String::from_utf8_lossy(
                            &r.get::<_, Option<Vec<u8>>>(0)?.unwrap_or_default(),
                        )
                        .into_owned())
                    },
                )
                .ok();
            return Err(match status {
                Some(s) => StoreError::RunState {
                    detail: Said::from("step ").id(step_id).text(format!(" is {s}")),
                },
                None => StoreError::NotFound {
                    what: Said::from("step ").id(step_id),
                },
            });
        }
        Ok(())
    }

    /// The steps of the run `which` names become `failed` with `f`'s observation: those in
    /// flight (cancel, failInternal; unconditional by status) or one by id, whatever its
    /// status (Reject's step failure). Returns how many steps changed.
    pub fn fail_steps(
        &self,
        run_id: impl AsKey,
        which: Failing<'_>,
        f: &StepFailure<'_>,
    ) -> Result<usize, StoreError> {
        let (what, cond, step) = match which {
            Failing::InFlight => (
                "fail steps in flight",
                "run_id=? AND status IN ('deciding','awaiting_approval','executing')",
                None,
            ),
            Failing::Step(step_id) => ("fail step", "id=? AND run_id=?", Some(key(step_id))),
        };
        let at = f.finished_at.to_rfc3339();
        let run_id = key(&run_id);
        let mut p: Vec<&dyn ToSql> = vec![&f.observation_json, &f.observation_hash, &at];
        p.extend(step.as_ref().map(|s| s as &dyn ToSql));
        p.push(&run_id);
        self.tx
            .prepare_cached(&format!(
                "UPDATE steps SET status='failed', observation_json=?, observation_hash=?, finished_at=? WHERE {cond}"
            ))
            .ctx(what)?
            .execute(p.as_slice())
            .ctx(what)
    }

    /// Inserts an approval `pending`.
    pub fn insert_approval(&self, a: &NewApproval<'_>) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO approvals (id, run_id, step_id, kind, capability_json, presentation_json, \
                 request_json, hash, status, created_at, expires_at) VALUES (?,?,?,?,?,?,?,?,'pending',?,?)",
            )
            .ctx("insert approval")?
            .execute(params![
                a.id,
                a.run_id,
                a.step_id,
                a.kind,
                if a.capability_json.is_empty() { "{}" } else { a.capability_json },
                if a.presentation_json.is_empty() { "{}" } else { a.presentation_json },
                a.request_json,
                a.hash,
                a.created_at.to_rfc3339(),
                a.expires_at.to_rfc3339()
            ])
            .ctx("insert approval")?;
        Ok(())
    }

    /// Sets an approval's decision only if it is still `d.expected_status` with `d.hash`
    /// (returns false when 0 rows changed). `decided_by = None` leaves that column.
    pub fn set_approval_status(
        &self,
        approval_id: &[u8],
        d: &ApprovalDecision<'_>,
    ) -> Result<bool, StoreError> {
        let id = key(approval_id);
        let n = match d.decided_by {
            Some(by) => self
                .tx
                .prepare_cached(
                    "UPDATE approvals SET status=?, decided_at=?, decided_by=?, note=? WHERE id=? AND status=? AND hash=?",
                )
                .ctx("decide approval")?
                .execute(params![d.status, d.decided_at.to_rfc3339(), by, d.note, id, d.expected_status, d.hash]),
            None => self
                .tx
                .prepare_cached(
                    "UPDATE approvals SET status=?, decided_at=?, note=? WHERE id=? AND status=? AND hash=?",
                )
                .ctx("decide approval")?
                .execute(params![d.status, d.decided_at.to_rfc3339(), d.note, id, d.expected_status, d.hash]),
        }
        .ctx("decide approval")?;
        Ok(n == 1)
    }

    /// Sets an approval's status only, keeping who/when (a grant expiring), if still
    /// `expected_status` with `hash`.
    pub fn set_approval_status_only(
        &self,
        id: impl AsKey,
        expected_status: &str,
        hash: &str,
        status: &str,
    ) -> Result<bool, StoreError> {
        let n = self
            .tx
            .prepare_cached("UPDATE approvals SET status=? WHERE id=? AND status=? AND hash=?")
            .ctx("expire approval")?
            .execute(params![status, key(&id), expected_status, hash])
            .ctx("expire approval")?;
        Ok(n == 1)
    }

    /// `INSERT OR IGNORE INTO tool_specs`.
    pub fn insert_tool_spec(&self, hash: &str, spec_json: &str) -> Result<(), StoreError> {
        self.tx
            .prepare_cached("INSERT OR IGNORE INTO tool_specs (hash, spec_json) VALUES (?,?)")
            .ctx("insert tool spec")?
            .execute(params![hash, spec_json])
            .ctx("insert tool spec")?;
        Ok(())
    }

    /// `active_ms = active_ms + ms` (ms clamped >= 0, saturating).
    pub fn add_active_ms(&self, run_id: &str, ms: i64) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(&format!(
                "UPDATE runs SET {} WHERE id=?",
                sat_set("active_ms")
            ))
            .ctx("add active time")?
            .execute(params![ms.max(0), ms.max(0), run_id])
            .ctx("add active time")?;
        Ok(())
    }

    /// Adds to the run's model accounting (each charge clamped >= 0, totals saturating).
    pub fn add_usage(&self, run_id: &str, charge: &Charge) -> Result<(), StoreError> {
        let columns = charge.columns();
        let sets: Vec<String> = columns.iter().map(|(c, _)| sat_set(c)).collect();
        let args = columns.iter().flat_map(|&(_, v)| [v, v]);
        let sql = format!("UPDATE runs SET {} WHERE id=?", sets.join(", "));
        let mut stmt = self.tx.prepare_cached(&sql).ctx("add usage")?;
        let mut values: Vec<rusqlite::types::Value> = args
            .into_iter()
            .map(rusqlite::types::Value::Integer)
            .collect();
        values.push(rusqlite::types::Value::Text(run_id.to_string()));
        stmt.execute(rusqlite::params_from_iter(values))
            .ctx("add usage")?;
        Ok(())
    }

    /// Inserts a `model_calls` row.
    pub fn insert_model_call(&self, m: &NewModelCall<'_>) -> Result<(), StoreError> {
        let (dispatched, completed) = (m.dispatched_at.to_rfc3339(), m.completed_at.to_rfc3339());
        let mut p: Vec<&dyn ToSql> = vec![
            &m.id, &m.run_id, &m.step_id, &m.attempt, &m.status, &m.model,
        ];
        p.extend(outcome_params(m));
        p.extend([&dispatched as &dyn ToSql, &completed]);
        self.tx
            .prepare_cached(
                "INSERT INTO model_calls (id, run_id, step_id, attempt, status, model, input_tokens, output_tokens, \
                 cached_input_tokens, cost_micros, latency_ms, error, dispatched_at, completed_at) \
                 VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            )
            .ctx("insert model call")?
            .execute(p.as_slice())
            .ctx("insert model call")?;
        Ok(())
    }

    /// Records a model call's outcome (row by id).
    pub fn finish_model_call(&self, m: &NewModelCall<'_>) -> Result<(), StoreError> {
        let completed = m.completed_at.to_rfc3339();
        let mut p: Vec<&dyn ToSql> = vec![&m.status];
        p.extend(outcome_params(m));
        p.extend([&completed as &dyn ToSql, &m.id]);
        self.tx
            .prepare_cached(
                "UPDATE model_calls SET status=?, input_tokens=?, output_tokens=?, cached_input_tokens=?, \
                 cost_micros=?, latency_ms=?, error=?, completed_at=? WHERE id=?",
            )
            .ctx("finish model call")?
            .execute(p.as_slice())
            .ctx("finish model call")?;
        Ok(())
    }
}

/// The outcome columns both writes of a model call set, in the order both bind them: input,
/// output and cached tokens, cost, latency, error.
fn outcome_params<'a>(m: &'a NewModelCall<'_>) -> [&'a dyn ToSql; 6] {
    [
        &m.input_tokens,
        &m.output_tokens,
        &m.cached_input_tokens,
        &m.cost_micros,
        &m.latency_ms,
        &m.error,
    ]
}

/// `col = CASE WHEN col > MAX - ? THEN MAX ELSE col + ? END` (two parameters, same value).
fn sat_set(col: &str) -> String {
    format!(
        "{col} = CASE WHEN {col} > 9223372036854775807 - ? THEN 9223372036854775807 ELSE {col} + ? END"
    )
}
