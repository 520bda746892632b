//! One run being driven: its cache of steps and approvals, its lease, the write wrapper that
//! turns a lost compare-and-set into the right ending, and the run's terminal transitions.

use std::sync::Arc;

use super::db::DbTx;
use super::lease::Lease;
use super::record;
use super::{Inner, RuntimeError, validate_limits};
use crate::runtime::store::StoreError;
use crate::runtime::store::{NewRun, StepFailure, StepUpdate, Transition};
use crate::runtime::types::{
    Approval, Key, Limits, Run, RunStatus, Said, Step, StepStatus, Timestamp,
};

/// How a step or the loop stops early.
pub(crate) enum Stop {
    /// The run is no longer ours to drive (ended, paused, or cancelled by an operator).
    Ended(Box<Run>),
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
                .get_run(run_id)
                .map(|r| {
                    if r.lease_owner == inner.owner {
                        r.lease_expires_at
                    } else {
                        Timestamp::ZERO
                    }
                })
                .unwrap_or_default();
            return Err(RuntimeError::Store(StoreError::RunLeased {
                run_id: Key::from(run_id),
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
    pub steps: Vec<Arc<Step>>,
    pub approvals: Vec<Arc<Approval>>,
    pub lease: Lease,
    pub _claim: Claim,
    /// False while a resume has not yet taken the run: a lost compare-and-set is then the
    /// resume's own `ErrRunState` (another resume won), not a lost lease.
    pub attached: bool,
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
        let until = inner.lease_expiry();
        let tools = inner.tools.spec_hashes();
        let ((), events) = inner.store.write(|tx| -> Result<(), RuntimeError> {
            let stamped = tx.lease_until(until, inner.lease_ttl)?;
            tx.insert_run(&NewRun {
                id,
                goal,
                limits: &limits,
                now,
                tools: &tools,
                lease_owner: &inner.owner,
                lease_expires_at: stamped,
            })?;
            for r in inner.tools.iter() {
                insert_spec(tx, &r.spec_hash, &r.spec_json)?;
            }
            Ok(())
        })?;
        inner.deliver(events);
        let run = inner.store.get_run(id)?;
        let lease = Lease::hold(
            &inner.store,
            id,
            &inner.owner,
            inner.lease_ttl,
            until,
            inner.lease_clock.clone(),
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
            attached: true,
        })
    }

    /// Runs one write transaction for this run. A compare-and-set that finds the run changed
    /// becomes `Stop::Ended` when an operator cancelled it, else `ErrLeaseLost`.
    pub fn write<T>(&self, f: impl FnOnce(&mut DbTx<'_, '_>) -> Result<T, Stop>) -> StepResult<T> {
        match self.inner.store.write(f) {
            Ok((v, events)) => {
                self.inner.deliver(events);
                Ok(v)
            }
            Err(Stop::Err(RuntimeError::Store(e))) if e.is_run_state() => Err(self.explain(e)),
            // A lease found lost (by the heartbeat or the write itself) may be an operator's
            // cancel, which clears the lease: then the run ended, it was not taken away.
            Err(Stop::Err(RuntimeError::Store(e @ StoreError::LeaseLost { .. }))) => {
                Err(self.cancelled_or(Stop::Err(RuntimeError::Store(e))))
            }
            Err(e) => Err(e),
        }
    }

    /// The cancelled run when an operator cancelled it, else `other`.
    fn cancelled_or(&self, other: Stop) -> Stop {
        match self.inner.store.get_run(&self.run_id) {
            Ok(run) if run.status == RunStatus::Cancelled && run.reason == "operator_cancelled" => {
                Stop::Ended(Box::new(run))
            }
            _ => other,
        }
    }

    /// Why a write's compare-and-set failed.
    pub fn explain(&self, e: StoreError) -> Stop {
        match self.inner.store.get_run(&self.run_id) {
            Ok(run) if run.status == RunStatus::Cancelled && run.reason == "operator_cancelled" => {
                Stop::Ended(Box::new(run))
            }
            _ if !self.attached => Stop::Err(RuntimeError::Store(e)),
            _ => {
                self.lease.mark_lost();
                Stop::Err(RuntimeError::Store(StoreError::LeaseLost {
                    detail: Said::from("run ")
                        .id(&self.run_id)
                        .text(": ")
                        .and(&e.said()),
                }))
            }
        }
    }

    /// Re-reads the run row.
    pub fn reload_run(&mut self) -> StepResult<()> {
        self.run = self.inner.store.get_run(&self.run_id)?;
        Ok(())
    }

    /// The run's terminal transition (or a pause) inside `tx`, with `limit.exceeded` when a
    /// limit ended it and `run.finished` for a terminal status.
    #[allow(clippy::too_many_arguments)]
    pub fn finish_in(
        &self,
        tx: &mut DbTx<'_, '_>,
        from: &[RunStatus],
        status: RunStatus,
        reason: &str,
        detail: &str,
        result: &[u8],
        now: Timestamp,
        limit: bool,
    ) -> Result<(), Stop> {
        tx.transition(&Transition {
            run_id: self.run_id.as_bytes(),
            from,
            to: status.clone(),
            reason,
            detail,
            finished_at: now,
            result_json: &String::from_utf8_lossy(result),
            lease_owner: Some(&self.inner.owner),
            lease_expires_at: Timestamp::ZERO,
        })?;
        let steps = tx.get_run(&self.run_id)?.step_count;
        if limit {
            tx.append(
                &self.run_id,
                "",
                &now,
                "limit.exceeded",
                &record::limit_exceeded(detail, reason),
            )?;
        }
        tx.append(
            &self.run_id,
            "",
            &now,
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
            let failure = StepFailure {
                observation_json: &String::from_utf8_lossy(&oj),
                observation_hash: &obs.content_hash,
                finished_at: now,
            };
            tx.fail_steps_in_flight(&self.run_id, &failure)?;
            self.finish_in(
                tx,
                from,
                RunStatus::Failed,
                "internal_error",
                detail,
                b"",
                now,
                false,
            )
        });
        self.end_result(res)
    }

    /// A value that would not encode ends the run `internal_error` (from whichever
    /// non-terminal status it holds; a RUNNING run only under this driver's lease), so nothing
    /// more executes and the run is not left RUNNING. Any other stop passes through.
    pub fn fail_encoding(&mut self, s: Stop) -> Stop {
        match s {
            Stop::Err(RuntimeError::Json { context, err }) => {
                let detail = format!("internal: {context}: {err}");
                self.fail_internal(
                    &[
                        RunStatus::Running,
                        RunStatus::WaitingForApproval,
                        RunStatus::Interrupted,
                    ],
                    &detail,
                )
            }
            s => s,
        }
    }

    /// Ends the run with a terminal status from RUNNING (no step change).
    pub fn finish(&mut self, status: RunStatus, reason: &str, detail: &str, limit: bool) -> Stop {
        let now = self.inner.now();
        let res = self.write(|tx| {
            self.finish_in(
                tx,
                &[RunStatus::Running],
                status,
                reason,
                detail,
                b"",
                now,
                limit,
            )
        });
        self.end_result(res)
    }

    /// The `Stop` after an ending write: the run as stored now.
    pub fn end_result(&mut self, res: StepResult<()>) -> Stop {
        match res {
            Ok(()) => match self.inner.store.get_run(&self.run_id) {
                Ok(run) => Stop::Ended(Box::new(run)),
                Err(e) => Stop::Err(e.into()),
            },
            Err(s) => s,
        }
    }

    /// The cached step with this id. Searched from the end: the step a write is about is the
    /// run's last (or, on resume, one near it), so finding it does not grow with the history.
    pub fn step(&self, step_id: &str) -> Option<&Arc<Step>> {
        self.steps.iter().rev().find(|s| s.id == step_id)
    }

    /// Marks the cached step's new fields (after a committed write).
    pub fn step_mut(&mut self, step_id: &str) -> Option<&mut Step> {
        self.steps
            .iter_mut()
            .rev()
            .find(|s| s.id == step_id)
            .map(Arc::make_mut)
    }

    /// Replaces the cache from the database (resume, after a reload).
    pub fn reload_all(&mut self) -> Result<(), RuntimeError> {
        fn shared<T>(rows: Vec<T>) -> Vec<Arc<T>> {
            rows.into_iter().map(Arc::new).collect()
        }
        let store = &self.inner.store;
        self.run = store.get_run(&self.run_id)?;
        self.steps = shared(store.list_steps(&self.run_id)?);
        self.approvals = shared(store.list_approvals(&self.run_id)?);
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

pub(crate) fn insert_spec(
    tx: &mut DbTx<'_, '_>,
    hash: &str,
    spec_json: &[u8],
) -> Result<(), StoreError> {
    tx.insert_tool_spec(hash, &String::from_utf8_lossy(spec_json))
}

/// A step update conditional on its status.
pub(crate) fn step_set(
    tx: &mut DbTx<'_, '_>,
    step_id: &str,
    expected: &[StepStatus],
    u: StepUpdate<'_>,
) -> Result<(), StoreError> {
    tx.update_step(step_id, expected, &u)
}
