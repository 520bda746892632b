//! One run being driven: its cache of steps and approvals, its lease, the write wrapper that
//! turns a lost compare-and-set into the right ending, and the run's terminal transitions.

use std::sync::Arc;

use rusqlite::params;

use super::db::Tx;
use super::lease::{self, Lease};
use super::record;
use super::{Inner, RuntimeError, validate_limits};
use crate::runtime::store::StoreError;
use crate::runtime::types::{Approval, Limits, Run, RunStatus, Step, StepStatus, Timestamp};

/// How a step or the loop stops early.
pub(crate) enum Stop {
    /// The run is no longer ours to drive (ended, paused, or cancelled by an operator).
    Ended(Run),
    Err(RuntimeError),
}

impl From<RuntimeError> for Stop {
    fn from(e: RuntimeError) -> Stop {
        Stop::Err(e)
    }
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Stop {
        Stop::Err(RuntimeError::Store(e))
    }
}

pub(crate) type StepResult<T> = Result<T, Stop>;

/// Removes the run from the driver's in-process claim set when the loop ends.
pub(crate) struct Claim {
    inner: Arc<Inner>,
    run_id: String,
}

impl Claim {
    pub fn take(inner: &Arc<Inner>, run_id: &str) -> Result<Claim, RuntimeError> {
        let mut c = inner.claims.lock().unwrap_or_else(|e| e.into_inner());
        if !c.insert(run_id.to_string()) {
            let exp = inner
                .store
                .run(run_id)
                .map(|r| {
                    if r.lease_owner == inner.owner {
                        r.lease_expires_at
                    } else {
                        Timestamp::ZERO
                    }
                })
                .unwrap_or_default();
            return Err(RuntimeError::Store(StoreError::RunLeased {
                run_id: run_id.to_string(),
                owner: inner.owner.clone(),
                expires_at: exp,
            }));
        }
        Ok(Claim {
            inner: inner.clone(),
            run_id: run_id.to_string(),
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.inner
            .claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.run_id);
    }
}

pub(crate) struct RunCtx {
    pub inner: Arc<Inner>,
    pub run_id: String,
    pub goal: String,
    pub limits: Limits,
    /// The run row as last read.
    pub run: Run,
    pub steps: Vec<Step>,
    pub approvals: Vec<Approval>,
    pub lease: Lease,
    pub _claim: Claim,
}

impl RunCtx {
    /// Creates the run (RUNNING, lease stamped) with `run.created` and `run.started`.
    pub fn create(
        inner: Arc<Inner>,
        id: &str,
        goal: &str,
        limits: Limits,
    ) -> Result<RunCtx, RuntimeError> {
        validate_limits(&limits)?;
        let claim = Claim::take(&inner, id)?;
        let now = inner.now();
        let until = lease::expiry(inner.lease_ttl);
        let limits_json = limits.to_go_json();
        let created = record::run_created(goal, &limits_json, &inner.tools.spec_hashes());
        let ((), events) = inner.store.write(|tx| -> Result<(), RuntimeError> {
            let lj = String::from_utf8_lossy(&limits_json);
            tx.conn()
                .execute(
                    "INSERT INTO runs (id, goal, status, limits_json, created_at, started_at, lease_owner, lease_expires_at) VALUES (?,?,'RUNNING',?,?,?,?,?)",
                    params![id, goal, lj, now.to_rfc3339(), now.to_rfc3339(), inner.owner, until.to_rfc3339()],
                )
                .map_err(|e| StoreError::sqlite("create run", e))?;
            for r in inner.tools.iter() {
                insert_spec(tx, &r.spec_hash, &r.spec_json)?;
            }
            tx.event(id, "", now, "run.created", &created)?;
            tx.event(id, "", now, "run.started", b"{}")?;
            Ok(())
        })?;
        inner.deliver(&events);
        let run = inner.store.run(id)?;
        let lease = Lease::hold(
            inner.store.path().to_path_buf(),
            id,
            &inner.owner,
            inner.lease_ttl,
            until,
        );
        Ok(RunCtx {
            inner,
            run_id: id.to_string(),
            goal: goal.to_string(),
            limits,
            run,
            steps: Vec::new(),
            approvals: Vec::new(),
            lease,
            _claim: claim,
        })
    }

    /// Runs one write transaction for this run. A compare-and-set that finds the run changed
    /// becomes `Stop::Ended` when an operator cancelled it, else `ErrLeaseLost`.
    pub fn write<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<T, Stop>) -> StepResult<T> {
        match self.inner.store.write(f) {
            Ok((v, events)) => {
                self.inner.deliver(&events);
                Ok(v)
            }
            Err(Stop::Err(RuntimeError::Store(e))) if e.is_run_state() => Err(self.explain(e)),
            Err(e) => Err(e),
        }
    }

    /// Why a write's compare-and-set failed.
    pub fn explain(&self, e: StoreError) -> Stop {
        match self.inner.store.run(&self.run_id) {
            Ok(run) if run.status == RunStatus::Cancelled && run.reason == "operator_cancelled" => {
                Stop::Ended(run)
            }
            _ => {
                self.lease.mark_lost();
                Stop::Err(RuntimeError::Store(StoreError::LeaseLost {
                    detail: format!("run {}: {e}", self.run_id),
                }))
            }
        }
    }

    /// Re-reads the run row.
    pub fn reload_run(&mut self) -> StepResult<()> {
        self.run = self.inner.store.run(&self.run_id)?;
        Ok(())
    }

    /// The run's terminal transition (or a pause) inside `tx`, with `limit.exceeded` when a
    /// limit ended it and `run.finished` for a terminal status.
    #[allow(clippy::too_many_arguments)]
    pub fn finish_in(
        &self,
        tx: &mut Tx<'_>,
        from: &[RunStatus],
        status: RunStatus,
        reason: &str,
        detail: &str,
        result: &[u8],
        now: Timestamp,
        limit: bool,
    ) -> Result<(), Stop> {
        tx.require_status(&self.run_id, from, Some(&self.inner.owner))?;
        let steps: i64 = tx
            .conn()
            .query_row(
                "SELECT step_count FROM runs WHERE id = ?",
                [&self.run_id],
                |r| r.get(0),
            )
            .map_err(|e| StoreError::sqlite("read step count", e))?;
        tx.conn()
            .execute(
                "UPDATE runs SET status = ?, reason = ?, reason_detail = ?, finished_at = ?, result_json = ?, lease_owner = '', lease_expires_at = '' WHERE id = ?",
                params![
                    status.as_str(),
                    reason,
                    detail,
                    now.to_rfc3339(),
                    String::from_utf8_lossy(result),
                    self.run_id
                ],
            )
            .map_err(|e| StoreError::sqlite("finish run", e))?;
        if limit {
            tx.event(
                &self.run_id,
                "",
                now,
                "limit.exceeded",
                &record::limit_exceeded(detail, reason),
            )?;
        }
        tx.event(
            &self.run_id,
            "",
            now,
            "run.finished",
            &record::run_finished(None, detail, reason, status.as_str(), steps),
        )?;
        Ok(())
    }

    /// Ends the run FAILED as `internal_error` (`failInternal`): every in-flight step fails
    /// with an `invalid_decision` observation naming the cause.
    pub fn fail_internal(&mut self, from: &[RunStatus], detail: &str) -> Stop {
        let now = self.inner.now();
        let obs = record::invalid_decision(detail, "");
        let res = self.write(|tx| {
            let oj = obs.to_go_json().map_err(|e| RuntimeError::Json {
                context: "observation".into(),
                err: e,
            })?;
            tx.conn()
                .execute(
                    "UPDATE steps SET status = 'failed', observation_json = ?, observation_hash = ?, finished_at = ? WHERE run_id = ? AND status IN ('deciding','awaiting_approval','executing')",
                    params![String::from_utf8_lossy(&oj), obs.content_hash, now.to_rfc3339(), self.run_id],
                )
                .map_err(|e| StoreError::sqlite("fail steps", e))?;
            self.finish_in(tx, from, RunStatus::Failed, "internal_error", detail, b"", now, false)
        });
        self.end_result(res)
    }

    /// Ends the run with a terminal status from RUNNING (no step change).
    pub fn finish(&mut self, status: RunStatus, reason: &str, detail: &str, limit: bool) -> Stop {
        let now = self.inner.now();
        let res = self.write(|tx| {
            self.finish_in(tx, &[RunStatus::Running], status, reason, detail, b"", now, limit)
        });
        self.end_result(res)
    }

    /// The `Stop` after an ending write: the run as stored now.
    pub fn end_result(&mut self, res: StepResult<()>) -> Stop {
        match res {
            Ok(()) => match self.inner.store.run(&self.run_id) {
                Ok(run) => Stop::Ended(run),
                Err(e) => Stop::Err(e.into()),
            },
            Err(s) => s,
        }
    }

    /// Marks the cached step's new fields (after a committed write).
    pub fn step_mut(&mut self, step_id: &str) -> Option<&mut Step> {
        self.steps.iter_mut().find(|s| s.id == step_id)
    }

    /// Replaces the cache from the database (resume, after a reload).
    pub fn reload_all(&mut self) -> Result<(), RuntimeError> {
        self.run = self.inner.store.run(&self.run_id)?;
        self.steps = self.inner.store.steps(&self.run_id)?;
        self.approvals = self.inner.store.approvals(&self.run_id)?;
        Ok(())
    }

    /// The first undecodable row, as `decodeErrors` words it (spec 9).
    pub fn damaged(&self) -> Option<String> {
        for s in &self.steps {
            if !s.decode_error.is_empty() {
                return Some(format!(
                    "step {} ({}) could not be decoded: {}",
                    s.index, s.id, s.decode_error
                ));
            }
        }
        for a in &self.approvals {
            if !a.decode_error.is_empty() {
                return Some(format!(
                    "approval {} could not be decoded: {}",
                    a.id, a.decode_error
                ));
            }
        }
        None
    }
}

pub(crate) fn insert_spec(tx: &Tx<'_>, hash: &str, spec_json: &[u8]) -> Result<(), StoreError> {
    tx.conn()
        .execute(
            "INSERT OR IGNORE INTO tool_specs (hash, spec_json) VALUES (?, ?)",
            params![hash, String::from_utf8_lossy(spec_json)],
        )
        .map_err(|e| StoreError::sqlite("record tool spec", e))?;
    Ok(())
}

/// `UPDATE steps ... WHERE id = ? AND status IN (expected)`; 0 rows is `ErrRunState`.
pub(crate) fn step_cas(
    tx: &Tx<'_>,
    sql_set: &str,
    step_id: &str,
    expected: &[StepStatus],
    values: &[&dyn rusqlite::ToSql],
) -> Result<(), StoreError> {
    let placeholders: Vec<String> = expected
        .iter()
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    let sql = format!(
        "UPDATE steps SET {sql_set} WHERE id = ? AND status IN ({})",
        placeholders.join(",")
    );
    let mut vals: Vec<&dyn rusqlite::ToSql> = values.to_vec();
    vals.push(&step_id);
    let n = tx
        .conn()
        .execute(&sql, vals.as_slice())
        .map_err(|e| StoreError::sqlite("update step", e))?;
    if n == 0 {
        let st: String = tx
            .conn()
            .query_row("SELECT status FROM steps WHERE id = ?", [step_id], |r| {
                r.get(0)
            })
            .unwrap_or_default();
        return Err(StoreError::RunState {
            detail: format!("step {step_id} is {st}"),
        });
    }
    Ok(())
}
