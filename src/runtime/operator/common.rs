//! What the operator's actions share: the refusal of an approval no longer pending, the
//! WAITING check under the write lock, an observation's Go JSON and a run's terminal
//! transition. Kept apart so that `decide`, `expire` and `cancel` import it and never each
//! other's helpers.

use crate::runtime::json::{content_hash, gojson::Object};
use crate::runtime::store::{ApprovalDecision, RunTx, StepFailure, StoreError, Transition};
use crate::runtime::types::{Approval, ApprovalStatus, Key, Observation, RunStatus, Timestamp};

use super::OperatorError;

pub(super) fn not_pending(a: &Approval) -> OperatorError {
    if a.status == ApprovalStatus::Expired {
        return OperatorError::Expired {
            approval_id: Key::new(a.id_bytes()),
            at: a.expires_at,
            already: true,
        };
    }
    OperatorError::NotPending {
        approval_id: Key::new(a.id_bytes()),
        status: a.status.clone(),
        decided_by: a.decided_by.clone(),
        decided_at: a.decided_at,
    }
}

/// A store's not-found for an approval, as the operator's [`OperatorError::NotFound`].
pub(super) fn not_found(e: StoreError, run_id: &[u8], approval_id: &[u8]) -> OperatorError {
    match e {
        StoreError::NotFound { .. } => OperatorError::NotFound {
            run_id: Key::new(run_id),
            approval_id: Key::new(approval_id),
        },
        other => other.into(),
    }
}

/// requireStatus WAITING inside the transaction, as RunNotWaiting.
pub(super) fn require_waiting<X: RunTx + ?Sized>(
    tx: &mut X,
    run_id: &[u8],
) -> Result<(), OperatorError> {
    match tx.require_status(run_id, &[RunStatus::WaitingForApproval], None) {
        Ok(_) => Ok(()),
        Err(e) if e.is_run_state() => Err(OperatorError::RunNotWaiting {
            run_id: Key::new(run_id),
            status: tx.get_run(run_id)?.status,
        }),
        Err(e) => Err(e.into()),
    }
}

/// The Go JSON of an observation with `content` and its content hash.
pub(super) fn observation(
    kind: &str,
    content: &[u8],
    summary: &str,
) -> Result<(String, String), OperatorError> {
    let hash = content_hash(content);
    let obs = Observation {
        kind: kind.into(),
        content: content.to_vec(),
        summary: summary.into(),
        content_hash: hash.clone(),
    };
    let json = obs.to_go_json().map_err(|err| StoreError::Json {
        context: "observation".into(),
        err,
    })?;
    Ok((String::from_utf8_lossy(&json).into_owned(), hash))
}

/// The failure a step gets with the observation `obs` (Go JSON) hashed `hash`, at `now`.
pub(super) fn failure<'a>(obs: &'a str, hash: &'a str, now: Timestamp) -> StepFailure<'a> {
    StepFailure {
        observation_json: obs,
        observation_hash: hash,
        finished_at: now,
    }
}

/// The run's terminal transition from WAITING (or the given statuses) and `run.finished`
/// `{["by",]"detail","reason","status","steps"}`.
pub(super) fn finish<X: RunTx + ?Sized>(
    tx: &mut X,
    run_id: &[u8],
    to: RunStatus,
    reason: &str,
    detail: &str,
    by: Option<(&str, &[RunStatus])>,
    now: Timestamp,
) -> Result<(), OperatorError> {
    let from: &[RunStatus] = match by {
        Some((_, from)) => from,
        None => &[RunStatus::WaitingForApproval],
    };
    tx.transition(&Transition {
        run_id,
        from,
        to: to.clone(),
        reason,
        detail,
        finished_at: now,
        result_json: "",
        lease_owner: None,
        lease_expires_at: Timestamp::ZERO,
    })?;
    let run = tx.get_run(run_id)?;
    // A stored count that does not read as an integer is not written on as 0: the run's step
    // rows stand for it.
    let steps = if run.unread("step_count") {
        tx.count_steps(run_id)?
    } else {
        run.step_count
    };
    let mut o = Object::new();
    if let Some((who, _)) = by {
        o.str("by", who);
    }
    let payload = o
        .str("detail", detail)
        .str("reason", reason)
        .str("status", to.as_str())
        .int("steps", steps)
        .finish();
    tx.append_event(run_id, b"", &now, "run.finished", &payload)?;
    Ok(())
}

/// Decides the pending approval `a` under the write lock: its status set to `status` only if
/// it is still pending with the hash it was read with (else who decided it, how and when),
/// and `approval.decided` appended.
pub(super) fn decide_row<X: RunTx + ?Sized>(
    tx: &mut X,
    run_id: &[u8],
    a: &Approval,
    status: &ApprovalStatus,
    decided: (&str, &str, Timestamp),
) -> Result<(), OperatorError> {
    let (by, note, now) = decided;
    let status = status.as_str();
    let d = ApprovalDecision {
        expected_status: "pending",
        hash: &a.hash,
        status,
        decided_at: now,
        decided_by: Some(by),
        note,
    };
    if !tx.set_approval_status(a.id_bytes(), &d)? {
        let cur = tx.get_approval(run_id, a.id_bytes())?;
        return Err(not_pending(&cur));
    }
    let payload = Object::new()
        .str_bytes("approval_id", a.id_bytes())
        .str("by", by)
        .str("note", note)
        .str("status", status)
        .finish();
    append_decided(tx, run_id, a, now, &payload)
}

/// Appends `approval.decided` for `a` on its step, with `payload` (its members already in
/// agentrt's order).
pub(super) fn append_decided<X: RunTx + ?Sized>(
    tx: &mut X,
    run_id: &[u8],
    a: &Approval,
    now: Timestamp,
    payload: &[u8],
) -> Result<(), OperatorError> {
    tx.append_event(run_id, a.step_id_bytes(), &now, "approval.decided", payload)?;
    Ok(())
}
