//! The entry point of a resume (spec 8.2 and 8.3): reads the run, claims it, and routes a
//! WAITING run to `resume.rs` and a RUNNING or INTERRUPTED one to crash recovery
//! (`recover.rs`). It lives apart from both so that neither imports the other.

use std::sync::Arc;

use super::ctx::{Claim, RunCtx};
use super::lease::Lease;
use super::recover::resume_interrupted;
use super::resume::{Attached, resume_waiting, state};
use super::{Inner, RuntimeError};
use crate::runtime::store::StoreError;
use crate::runtime::types::{Key, Run, RunStatus};

fn ctx(inner: &Arc<Inner>, run: Run, claim: Claim) -> Result<RunCtx, RuntimeError> {
    let mut cx = RunCtx {
        inner: inner.clone(),
        run_id: run.id.clone(),
        goal: run.goal.clone(),
        limits: run.limits.clone(),
        lease: Lease::inactive(&run.id, &inner.owner),
        run,
        steps: Vec::new(),
        approvals: Vec::new(),
        _claim: claim,
        attached: false,
    };
    cx.reload_all()?;
    Ok(cx)
}

/// Does what a resume does before its loop, on the blocking pool (store work).
pub(crate) async fn attach(
    inner: Arc<Inner>,
    run_id: &str,
    defer: bool,
) -> Result<Attached, RuntimeError> {
    let run_id = run_id.to_string();
    super::blocking(move || attach_now(inner, &run_id, defer)).await?
}

fn attach_now(inner: Arc<Inner>, run_id: &str, defer: bool) -> Result<Attached, RuntimeError> {
    let run = inner.store.get_run(run_id)?;
    match run.status {
        RunStatus::WaitingForApproval => {
            let claim = Claim::take(&inner, run_id)?;
            let cx = ctx(&inner, run, claim)?;
            resume_waiting(cx, defer)
        }
        RunStatus::Running | RunStatus::Interrupted => {
            check_lease(&inner, &run)?;
            let claim = Claim::take(&inner, run_id)?;
            let cx = ctx(&inner, run, claim)?;
            resume_interrupted(cx)
        }
        other => Err(state(format!(
            "run {run_id} is {other} and cannot be resumed"
        ))),
    }
}

/// Another owner's live lease refuses the resume early (read before any clock value), judged
/// by the store's clock (this process's lease clock on SQLite, the server's on PostgreSQL,
/// decision 0083). Only a first check: the resume's transaction judges it again.
fn check_lease(inner: &Inner, run: &Run) -> Result<(), RuntimeError> {
    if run.lease_owner.is_empty() || run.lease_owner == inner.owner {
        return Ok(());
    }
    if run.lease_expires_at > inner.store.lease_now(inner.lease_now())? {
        return Err(RuntimeError::Store(StoreError::RunLeased {
            run_id: Key::new(run.id_bytes()),
            owner: run.lease_owner.clone(),
            expires_at: run.lease_expires_at,
        }));
    }
    Ok(())
}
