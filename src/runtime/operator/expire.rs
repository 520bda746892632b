//! Expiry (spec 4.5): an approval past its time is marked `expired` and its run CANCELLED.

use crate::runtime::json::gojson::Object;
use crate::runtime::store::{IN_CRATE, RunStore, RunTx};
use crate::runtime::types::{Approval, AsKey, Event, RunStatus, Timestamp};

use super::OperatorError;
use super::common::{append_decided, finish, not_pending, require_waiting};

/// Expires `a` (pending past `approval_ttl`, or a grant past `grant_ttl`) and cancels its run
/// (`approval_expired`), in one transaction. Returns the events appended.
pub fn expire<S: RunStore + ?Sized>(
    store: &S,
    run_id: impl AsKey,
    a: &Approval,
    now: Timestamp,
) -> Result<Vec<Event>, OperatorError> {
    let ((), events) = store.write(IN_CRATE, |tx| expire_in(tx, run_id.key_bytes(), a, now))?;
    Ok(events)
}

/// [`expire`] inside a caller's transaction (a resume that finds its grant expired). The
/// approval changes only if it still has the status and hash of `a` ([`RunTx::expire_approval`]).
/// The step row is not changed.
pub fn expire_in<X: RunTx + ?Sized>(
    tx: &mut X,
    run_id: impl AsKey,
    a: &Approval,
    now: Timestamp,
) -> Result<(), OperatorError> {
    let run_id = run_id.key_bytes();
    require_waiting(tx, run_id)?;
    if !tx.expire_approval(a, now)? {
        let cur = tx.get_approval(run_id, a.id_bytes())?;
        return Err(not_pending(&cur));
    }
    let payload = Object::new()
        .str_bytes("approval_id", a.id_bytes())
        .str("status", "expired")
        .finish();
    append_decided(tx, run_id, a, now, &payload)?;
    let detail = format!("approval {} expired", a.id);
    finish(
        tx,
        run_id,
        RunStatus::Cancelled,
        "approval_expired",
        &detail,
        None,
        now,
    )
}
