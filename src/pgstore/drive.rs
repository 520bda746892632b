//! The driver's store on PostgreSQL (docs/decisions/0083): the row writes of a run's steps,
//! approvals, tool specs and model calls inside a [`PgTx`], the reads the driver makes outside
//! one, the lease connection, and the clock leases are judged by.
//!
//! Every write is inside the transaction of one transition (READ COMMITTED; the run's row is
//! locked by the transaction's first read of it, and every change is a compare-and-set on the
//! state it expects), with its events enqueued to the inbox in the same transaction
//! (decision 0081). Leases are judged by the server's clock only: the expiry stamped is the
//! server's `clock_timestamp()` plus the TTL, and a lease is live while its stored expiry is
//! after the server's `clock_timestamp()` read in the transaction that holds the run's row
//! lock; the client's clock is never compared with a stored expiry.

use std::sync::Mutex;
use std::time::Duration;

use postgres::types::ToSql;

use super::operate::{PgTx, StoreCtx, text_id, values};
use super::stmts::Cached;
use super::{PgError, PgStore, PgUrl};
use crate::runtime::json::gojson;
use crate::runtime::store::{
    APPROVAL_COLUMNS, DecisionEvent, LeasedRun, NewApproval, NewModelCall, NewRun, ResumableRun,
    RunTx, STEP_COLUMNS, StepUpdate, StoreError, approval_from_values, leased_sql, resumable_sql,
    run_created, spec_of, step_from_values,
};
use crate::runtime::types::ToolSpec;
use crate::runtime::types::{Approval, Key, RunStatus, Said, Step, StepStatus, Timestamp};

/// The outcome columns both writes of a model call set, in the order both bind them: input,
/// output and cached tokens, cost, latency, error.
fn outcome_params<'a>(m: &'a NewModelCall<'_>) -> [&'a (dyn ToSql + Sync); 6] {
    [
        &m.input_tokens,
        &m.output_tokens,
        &m.cached_input_tokens,
        &m.cost_micros,
        &m.latency_ms,
        &m.error,
    ]
}

/// A TTL in nanoseconds, saturating.
fn ttl_nanos(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX)
}

/// The server's clock, in microseconds since the Unix epoch (`clock_timestamp()`: the time of
/// this statement, not of the transaction's start).
const SERVER_NOW: &str = "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint";

/// The server's clock read on `client` (a transaction or a connection).
fn server_now(client: &mut impl Cached, url: &PgUrl) -> Result<Timestamp, StoreError> {
    let us: i64 = client
        .query_one(SERVER_NOW, &[])
        .at(url, "read the server's clock")?
        .try_get(0)
        .map_err(|e| StoreError::Backend(format!("{url}: the server's clock: {e}")))?;
    Ok(Timestamp::from_unix_nanos(i128::from(us) * 1000))
}

/// `col = col + v`, saturating at the largest bigint, `v` clamped at 0 (bound as `$n`).
fn sat_add(col: &str, n: usize) -> String {
    format!(
        "{col} = CASE WHEN {col} > 9223372036854775807 - ${n} THEN 9223372036854775807 ELSE {col} + ${n} END"
    )
}

impl PgTx<'_> {
    /// The server's clock, read in this transaction.
    pub(super) fn server_now(&mut self) -> Result<Timestamp, StoreError> {
        server_now(&mut self.tx, &self.url)
    }

    pub(super) fn insert_run(&mut self, r: &NewRun<'_>) -> Result<(), StoreError> {
        let (limits_text, payload) = run_created(r);
        let now = r.now.to_rfc3339();
        self.tx
            .execute(
                "INSERT INTO runs (id, goal, status, limits_json, created_at, started_at, \
                 lease_owner, lease_expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[
                    &r.id,
                    &r.goal,
                    &RunStatus::Running.as_str(),
                    &limits_text,
                    &now,
                    &now,
                    &r.lease_owner,
                    &r.lease_expires_at.to_rfc3339(),
                ],
            )
            .map_err(|e| {
                if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) {
                    StoreError::RunExists {
                        run_id: Key::new(r.id.as_bytes()),
                    }
                } else {
                    super::operate::store_error(&self.url, "insert run", e)
                }
            })?;
        self.append_event(r.id.as_bytes(), b"", &r.now, "run.created", &payload)?;
        self.append_event(r.id.as_bytes(), b"", &r.now, "run.started", b"{}")
    }

    pub(super) fn start_step(
        &mut self,
        run_id: &str,
        step_id: &str,
        index: i64,
        lease_owner: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        // The run's row lock first (as SQLite's write lock), then the compare-and-set.
        let n = self
            .tx
            .execute(
                "UPDATE runs SET step_count = step_count + 1 WHERE id = $1 AND status = 'RUNNING' \
                 AND step_count = $2 AND lease_owner = $3",
                &[&run_id, &index, &lease_owner],
            )
            .at(&self.url, "claim step")?;
        if n == 0 {
            self.require_status(run_id.as_bytes(), &[RunStatus::Running], Some(lease_owner))?;
            return Err(StoreError::RunState {
                detail: Said::from("run ")
                    .id(run_id)
                    .text(format!(" has moved past step {index}")),
            });
        }
        self.tx
            .execute(
                "INSERT INTO steps (id, run_id, idx, status, started_at) VALUES ($1, $2, $3, $4, $5)",
                &[
                    &step_id,
                    &run_id,
                    &index,
                    &StepStatus::Deciding.as_str(),
                    &now.to_rfc3339(),
                ],
            )
            .at(&self.url, "insert step")?;
        let payload = gojson::Object::new().int("index", index).finish();
        self.append_event(
            run_id.as_bytes(),
            step_id.as_bytes(),
            &now,
            "step.started",
            &payload,
        )
    }

    pub(super) fn update_step(
        &mut self,
        step_id: &str,
        expected: &[StepStatus],
        u: &StepUpdate<'_>,
    ) -> Result<(), StoreError> {
        let mut sets: Vec<String> = Vec::new();
        let mut vals: Vec<String> = Vec::new();
        let mut set = |col: &str, v: Option<String>| {
            if let Some(v) = v {
                vals.push(v);
                sets.push(format!("{col} = ${}", vals.len()));
            }
        };
        set("status", u.status.as_ref().map(|s| s.as_str().to_string()));
        set("decision_json", u.decision_json.map(str::to_string));
        set("policy_json", u.policy_json.map(str::to_string));
        set("observation_json", u.observation_json.map(str::to_string));
        set("observation_hash", u.observation_hash.map(str::to_string));
        set("started_at", u.started_at.map(|t| t.to_rfc3339()));
        set("finished_at", u.finished_at.map(|t| t.to_rfc3339()));
        set("spec_hash", u.spec_hash.map(str::to_string));
        set("policy_id", u.policy_id.map(str::to_string));
        if sets.is_empty() {
            sets.push("status = status".into());
        }
        vals.push(step_id.to_string());
        let id_at = vals.len();
        let states: Vec<String> = expected.iter().map(|s| s.as_str().to_string()).collect();
        let sql = format!(
            "UPDATE steps SET {} WHERE id = ${id_at} AND status = ANY(${})",
            sets.join(", "),
            id_at + 1
        );
        let mut params: Vec<&(dyn ToSql + Sync)> =
            vals.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        params.push(&states);
        let n = self
            .tx
            .execute(sql.as_str(), &params)
            .at(&self.url, "update step")?;
        if n == 0 {
            let status = self
                .tx
                .query_opt("SELECT status FROM steps WHERE id = $1", &[&step_id])
                .at(&self.url, "update step")?
                .map(|r| r.try_get::<_, String>(0).unwrap_or_default());
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

    pub(super) fn insert_approval(&mut self, a: &NewApproval<'_>) -> Result<(), StoreError> {
        let or_empty = |s: &'_ str| {
            if s.is_empty() {
                "{}".to_string()
            } else {
                s.to_string()
            }
        };
        self.tx
            .execute(
                "INSERT INTO approvals (id, run_id, step_id, kind, capability_json, \
                 presentation_json, request_json, hash, status, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10)",
                &[
                    &a.id,
                    &a.run_id,
                    &a.step_id,
                    &a.kind,
                    &or_empty(a.capability_json),
                    &or_empty(a.presentation_json),
                    &a.request_json,
                    &a.hash,
                    &a.created_at.to_rfc3339(),
                    &a.expires_at.to_rfc3339(),
                ],
            )
            .at(&self.url, "insert approval")?;
        Ok(())
    }

    pub(super) fn insert_tool_spec(
        &mut self,
        hash: &str,
        spec_json: &str,
    ) -> Result<(), StoreError> {
        self.tx
            .execute(
                "INSERT INTO tool_specs (hash, spec_json) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING",
                &[&hash, &spec_json],
            )
            .at(&self.url, "insert tool spec")?;
        Ok(())
    }

    /// Adds each `(column, amount)` to the run's counter, amounts clamped at 0, saturating.
    pub(super) fn pg_add_counters(
        &mut self,
        run_id: &str,
        add: &[(&'static str, i64)],
    ) -> Result<(), StoreError> {
        let amounts: Vec<i64> = add.iter().map(|(_, v)| (*v).max(0)).collect();
        let sets: Vec<String> = add
            .iter()
            .enumerate()
            .map(|(i, (c, _))| sat_add(c, i + 1))
            .collect();
        let sql = format!(
            "UPDATE runs SET {} WHERE id = ${}",
            sets.join(", "),
            add.len() + 1
        );
        let mut params: Vec<&(dyn ToSql + Sync)> =
            amounts.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        params.push(&run_id);
        self.tx
            .execute(sql.as_str(), &params)
            .at(&self.url, "add to the run's counters")?;
        Ok(())
    }

    pub(super) fn insert_model_call(&mut self, m: &NewModelCall<'_>) -> Result<(), StoreError> {
        let (dispatched, completed) = (m.dispatched_at.to_rfc3339(), m.completed_at.to_rfc3339());
        let mut p: Vec<&(dyn ToSql + Sync)> = vec![
            &m.id, &m.run_id, &m.step_id, &m.attempt, &m.status, &m.model,
        ];
        p.extend(outcome_params(m));
        p.extend([&dispatched as &(dyn ToSql + Sync), &completed]);
        self.tx
            .execute(
                "INSERT INTO model_calls (id, run_id, step_id, attempt, status, model, input_tokens, \
                 output_tokens, cached_input_tokens, cost_micros, latency_ms, error, dispatched_at, \
                 completed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                &p,
            )
            .at(&self.url, "insert model call")?;
        Ok(())
    }

    pub(super) fn finish_model_call(&mut self, m: &NewModelCall<'_>) -> Result<(), StoreError> {
        let completed = m.completed_at.to_rfc3339();
        let mut p: Vec<&(dyn ToSql + Sync)> = vec![&m.status];
        p.extend(outcome_params(m));
        p.extend([&completed as &(dyn ToSql + Sync), &m.id]);
        self.tx
            .execute(
                "UPDATE model_calls SET status = $1, input_tokens = $2, output_tokens = $3, \
                 cached_input_tokens = $4, cost_micros = $5, latency_ms = $6, error = $7, \
                 completed_at = $8 WHERE id = $9",
                &p,
            )
            .at(&self.url, "finish model call")?;
        Ok(())
    }

    pub(super) fn set_lease(
        &mut self,
        run_id: &str,
        owner: &str,
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        self.tx
            .execute(
                "UPDATE runs SET lease_owner = $1, lease_expires_at = $2 WHERE id = $3",
                &[&owner, &expires_at.to_rfc3339(), &run_id],
            )
            .at(&self.url, "set lease")?;
        Ok(())
    }
}

impl PgStore {
    /// Every step of a run, in insertion order.
    pub(super) fn list_steps(&self, run_id: &[u8]) -> Result<Vec<Step>, StoreError> {
        self.all_of_run(
            run_id,
            STEP_COLUMNS,
            "steps",
            "list steps",
            step_from_values,
        )
    }

    /// Every approval of a run, in insertion order.
    pub(super) fn list_approvals(&self, run_id: &[u8]) -> Result<Vec<Approval>, StoreError> {
        self.all_of_run(
            run_id,
            APPROVAL_COLUMNS,
            "approvals",
            "list approvals",
            approval_from_values,
        )
    }

    /// Every row of one of a run's lists (`steps`, `approvals`) by `ord`, decoded; none for
    /// an id PostgreSQL cannot hold. `what` names the read in an error.
    fn all_of_run<T>(
        &self,
        run_id: &[u8],
        columns: &str,
        table: &str,
        what: &'static str,
        decode: fn(&[rusqlite::types::Value]) -> T,
    ) -> Result<Vec<T>, StoreError> {
        let Some(id) = text_id(run_id) else {
            return Ok(Vec::new());
        };
        let rows = self
            .lock()
            .query(
                &format!("SELECT {columns} FROM {table} WHERE run_id = $1 ORDER BY ord"),
                &[&id],
            )
            .at(&self.url, what)?;
        Ok(rows.iter().map(|r| decode(&values(r))).collect())
    }

    /// At most `limit` runs a worker may resume now, oldest first (as SQLite's).
    pub fn resumable_runs(&self, limit: u32) -> Result<Vec<ResumableRun>, StoreError> {
        let rows = self.id_and_text(&resumable_sql("ord", "$1"), "resumable runs", limit)?;
        Ok(rows
            .into_iter()
            .map(|(id, status)| ResumableRun {
                id,
                status: RunStatus::parse(&status),
            })
            .collect())
    }

    /// At most `limit` RUNNING runs that hold a lease, oldest first (as SQLite's).
    pub fn leased_runs(&self, limit: u32) -> Result<Vec<LeasedRun>, StoreError> {
        let rows = self.id_and_text(&leased_sql("ord", "$1"), "leased runs", limit)?;
        Ok(rows
            .into_iter()
            .map(|(id, lease_expires_at)| LeasedRun {
                id,
                lease_expires_at,
            })
            .collect())
    }

    /// The rows of one of the worker's queries (`sql`, its limit bound as `$1`): a run id and
    /// one text column each.
    fn id_and_text(
        &self,
        sql: &str,
        what: &'static str,
        limit: u32,
    ) -> Result<Vec<(Key, String)>, StoreError> {
        let rows = self
            .lock()
            .query(sql, &[&i64::from(limit)])
            .at(&self.url, what)?;
        let text = |r: &postgres::Row, i: usize| r.try_get::<_, String>(i).unwrap_or_default();
        Ok(rows
            .iter()
            .map(|r| (Key::new(text(r, 0).as_bytes()), text(r, 1)))
            .collect())
    }

    /// A run's `approval.decided` events: the chained ones in seq order, each with whether its
    /// hash is its link in the chain, then those still in the inbox (not hashed yet) in commit
    /// order (as SQLite's).
    pub fn decision_events(&self, run_id: &[u8]) -> Result<Vec<DecisionEvent>, StoreError> {
        let Some(id) = text_id(run_id) else {
            return Ok(Vec::new());
        };
        let rows = self
            .lock()
            .query(
                "SELECT 0 AS src, e.seq, e.step_id, e.payload_json, e.at, e.hash, \
                   COALESCE((SELECT p.hash FROM events p WHERE p.seq = e.seq - 1), '') \
                 FROM events e WHERE e.run_id = $1 AND e.type = 'approval.decided' \
                 UNION ALL \
                 SELECT 1, id, step_id, payload_json, at, '', '' \
                 FROM event_inbox WHERE run_id = $1 AND type = 'approval.decided' \
                 ORDER BY 1, 2",
                &[&id],
            )
            .at(&self.url, "decision events")?;
        Ok(rows
            .iter()
            .map(|r| {
                let text = |i: usize| r.try_get::<_, String>(i).unwrap_or_default();
                let (chained, seq) = (
                    r.try_get::<_, i32>(0).unwrap_or(1) == 0,
                    r.try_get::<_, i64>(1).unwrap_or(0),
                );
                let (step, payload) = (text(2), text(3));
                let linked = chained.then(|| {
                    crate::runtime::json::event_hash(
                        &text(6),
                        seq,
                        id,
                        &step,
                        &text(4),
                        "approval.decided",
                        &payload,
                    ) == text(5)
                });
                DecisionEvent {
                    step_id: step.into_bytes(),
                    payload,
                    linked,
                    at: text(4),
                }
            })
            .collect())
    }

    /// The kind and payload of a run's first event, chained or still in the inbox.
    pub fn first_event(&self, run_id: &[u8]) -> Result<Option<(String, String)>, StoreError> {
        let Some(id) = text_id(run_id) else {
            return Ok(None);
        };
        let row = self
            .lock()
            .query_opt(
                "SELECT type, payload_json FROM ( \
                   (SELECT 0 AS src, seq AS k, type, payload_json FROM events WHERE run_id = $1 \
                    ORDER BY seq LIMIT 1) \
                   UNION ALL \
                   (SELECT 1, id, type, payload_json FROM event_inbox WHERE run_id = $1 \
                    ORDER BY id LIMIT 1)) AS first ORDER BY src, k LIMIT 1",
                &[&id],
            )
            .at(&self.url, "first event")?;
        Ok(row.map(|r| {
            (
                r.try_get::<_, String>(0).unwrap_or_default(),
                r.try_get::<_, String>(1).unwrap_or_default(),
            )
        }))
    }

    /// A number that moves when a batch of events is chained (every transition appends one,
    /// and the sequencer NOTIFYs once per chained batch, decision 0084): what the worker checks
    /// for "something changed", learnt by LISTEN on a connection of its own (opened at the
    /// first call, made again when lost), not by reading a table.
    pub fn change_mark(&self) -> Result<i64, StoreError> {
        let mut held = self.listener.lock().unwrap_or_else(|p| p.into_inner());
        let listener = match held.as_mut() {
            Some(l) => l,
            None => held.insert(super::Listener::open(&self.url)?),
        };
        Ok(listener.version()?)
    }

    /// The tool spec stored under `hash`, checked against it (as SQLite's `Store::tool_spec`).
    pub fn tool_spec(&self, hash: &str) -> Result<ToolSpec, StoreError> {
        let row = self
            .lock()
            .query_opt("SELECT spec_json FROM tool_specs WHERE hash = $1", &[&hash])
            .at(&self.url, "tool spec")?
            .ok_or_else(|| StoreError::NotFound {
                what: format!("tool spec {hash}").into(),
            })?;
        let json: String = row.try_get(0).unwrap_or_default();
        spec_of(hash, json.as_bytes())
    }

    /// The server's clock now (what judges leases on PostgreSQL, decision 0083).
    pub fn server_clock(&self) -> Result<Timestamp, StoreError> {
        server_now(&mut *self.lock(), &self.url)
    }

    /// A lease connection of its own (renew and release), on this store's URL.
    pub fn lease_handle(&self) -> Result<PgLeaseHandle, StoreError> {
        let client = super::connect(&self.url).map_err(|e| StoreError::Backend(e.to_string()))?;
        Ok(PgLeaseHandle {
            client: Mutex::new(super::stmts::Conn::new(client)),
            url: self.url.clone(),
        })
    }
}

/// The lease connection on PostgreSQL: renews and releases a lease on a connection of its
/// own, stamping the server's clock plus the TTL.
pub struct PgLeaseHandle {
    client: Mutex<super::stmts::Conn>,
    url: PgUrl,
}

impl std::fmt::Debug for PgLeaseHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgLeaseHandle({})", self.url)
    }
}

impl PgLeaseHandle {
    /// Sets the lease's expiry to the server's clock plus `ttl` if `owner` still holds it;
    /// false = the lease is lost. Returns the expiry stamped.
    pub fn renew(
        &self,
        run_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Timestamp>, StoreError> {
        let mut c = self.client.lock().unwrap_or_else(|p| p.into_inner());
        let until = server_now(&mut *c, &self.url)?.add_nanos(ttl_nanos(ttl));
        let n = c
            .execute(
                "UPDATE runs SET lease_expires_at = $1 WHERE id = $2 AND lease_owner = $3",
                &[&until.to_rfc3339(), &run_id, &owner],
            )
            .at(&self.url, "renew lease")?;
        Ok((n == 1).then_some(until))
    }

    /// Clears the lease if `owner` still holds it.
    pub fn release(&self, run_id: &str, owner: &str) -> Result<bool, StoreError> {
        let mut c = self.client.lock().unwrap_or_else(|p| p.into_inner());
        let n = c
            .execute(
                "UPDATE runs SET lease_owner = '', lease_expires_at = '' WHERE id = $1 AND lease_owner = $2",
                &[&run_id, &owner],
            )
            .at(&self.url, "release lease")?;
        Ok(n == 1)
    }
}

impl From<PgError> for StoreError {
    fn from(e: PgError) -> StoreError {
        StoreError::Backend(e.to_string())
    }
}
