//! Operator cancel (spec 8.1): any non-terminal run, no lease needed, rows never decoded.

use crate::runtime::json::gojson::Object;
use crate::runtime::store::Store;
use crate::runtime::types::{Event, Run, RunStatus, Timestamp};

use super::OperatorError;
use super::decide::{finish, observation};

/// A cancel that landed.
#[derive(Debug, Clone)]
pub struct Cancelled {
    /// The run after the cancel (CANCELLED, `operator_cancelled`).
    pub run: Run,
    /// How many in-flight steps were failed.
    pub steps_failed: usize,
    pub events: Vec<Event>,
}

/// Cancels a RUNNING, WAITING_FOR_APPROVAL or INTERRUPTED run in one transaction: every step in
/// `deciding`/`awaiting_approval`/`executing` fails with an `interrupted` observation
/// `{"by","note"}`, the run becomes CANCELLED (`operator_cancelled`, detail = note, lease
/// cleared) and `run.finished` names who. Pending approvals are left as they are. A live loop
/// finds the run cancelled at its next write.
pub fn cancel(
    store: &Store,
    run_id: &str,
    by: &str,
    note: &str,
    now: Timestamp,
) -> Result<Cancelled, OperatorError> {
    let run = store.get_run(run_id)?;
    if run.status.is_terminal() {
        return Err(OperatorError::RunFinished {
            run_id: run_id.into(),
            status: run.status,
        });
    }
    const FROM: [RunStatus; 3] = [
        RunStatus::Running,
        RunStatus::WaitingForApproval,
        RunStatus::Interrupted,
    ];
    let (steps_failed, events) = store.write(|tx| -> Result<usize, OperatorError> {
        if let Err(e) = tx.require_status(run_id, &FROM, None) {
            let status = tx.get_run(run_id)?.status;
            return Err(if status.is_terminal() {
                OperatorError::RunFinished {
                    run_id: run_id.into(),
                    status,
                }
            } else {
                e.into()
            });
        }
        let content = Object::new().str("by", by).str("note", note).finish();
        let (obs, hash) = observation(
            "interrupted",
            &content,
            &format!("cancelled by operator: {note}"),
        )?;
        let n = tx.fail_steps_in_flight(run_id, &obs, &hash, now)?;
        finish(
            tx,
            run_id,
            RunStatus::Cancelled,
            "operator_cancelled",
            note,
            Some((by, &FROM)),
            now,
        )?;
        Ok(n)
    })?;
    Ok(Cancelled {
        run: store.get_run(run_id)?,
        steps_failed,
        events,
    })
}
