//! Operator cancel (spec 8.1): any non-terminal run, no lease needed, rows never decoded.

use crate::runtime::json::gojson::Object;
use crate::runtime::store::{Failing, IN_CRATE, RunStore, RunTx, StoreError};
use crate::runtime::types::{ApprovalStatus, AsKey, Event, Key, Run, RunStatus, Timestamp};

use super::OperatorError;
use super::common::{failure, finish, not_found, not_pending, observation, require_waiting};

/// A cancel that landed.
#[derive(Debug, Clone)]
pub struct Cancelled {
    /// The run after the cancel (CANCELLED, `operator_cancelled`).
    pub run: Run,
    /// How many in-flight steps were failed.
    pub steps_failed: usize,
    /// Why the run's steps could not be failed, when SQLite found their pages damaged: the
    /// run was cancelled all the same (its step rows were left as they were).
    pub steps_unreadable: Option<String>,
    /// The events the cancel appended, in order: hand them to observers (the commit is done).
    pub events: Vec<Event>,
}

/// Cancels a RUNNING, WAITING_FOR_APPROVAL or INTERRUPTED run in one transaction: every step in
/// `deciding`/`awaiting_approval`/`executing` fails with an `interrupted` observation
/// `{"by","note"}`, the run becomes CANCELLED (`operator_cancelled`, detail = note, lease
/// cleared) and `run.finished` names who. Pending approvals are left as they are. A live loop
/// finds the run cancelled at its next write.
///
/// A damaged run is cancelled too: a status the runtime does not know (it is not terminal; the
/// compare-and-set is on the status as stored), and a run whose steps cannot be read (SQLite
/// reports their pages damaged): the steps are then left as they are and the run still ends.
pub fn cancel<S: RunStore + ?Sized>(
    store: &S,
    run_id: impl AsKey,
    by: &str,
    note: &str,
    now: Timestamp,
) -> Result<Cancelled, OperatorError> {
    cancel_checked(store, run_id.key_bytes(), None, by, note, now)
}

/// Cancels a WAITING_FOR_APPROVAL run only while the approval a reviewer was shown is still
/// pending with the hash `shown`, checked in the cancel's own transaction: a bulk cancel of
/// queue rows skips a run that moved on or whose approval changed or was decided after the
/// rows were listed (issue 21). Otherwise as [`cancel`].
pub fn cancel_shown<S: RunStore + ?Sized>(
    store: &S,
    run_id: impl AsKey,
    approval_id: impl AsKey,
    shown: &str,
    by: &str,
    note: &str,
    now: Timestamp,
) -> Result<Cancelled, OperatorError> {
    let approval_id = approval_id.key_bytes();
    cancel_checked(
        store,
        run_id.key_bytes(),
        Some((approval_id, shown)),
        by,
        note,
        now,
    )
}

fn cancel_checked<S: RunStore + ?Sized>(
    store: &S,
    run_id: &[u8],
    expect: Option<(&[u8], &str)>,
    by: &str,
    note: &str,
    now: Timestamp,
) -> Result<Cancelled, OperatorError> {
    super::check_name(by)?;
    let run = store.get_run(run_id)?;
    if run.status.is_terminal() {
        return Err(OperatorError::RunFinished {
            run_id: Key::new(run_id),
            status: run.status,
        });
    }
    const FROM: [RunStatus; 3] = [
        RunStatus::Running,
        RunStatus::WaitingForApproval,
        RunStatus::Interrupted,
    ];
    // SQLite refuses every later write of a transaction in which it found a damaged page, so
    // when the steps' pages are damaged the cancel is written again, without them.
    let attempt = |skip_steps: bool, steps_corrupt: &mut bool| {
        store.write(IN_CRATE, |tx| {
            // The status as stored (an unknown one is damaged, not terminal: it may be
            // cancelled, the compare-and-set being on that status).
            if let Some((approval_id, shown)) = expect {
                require_waiting(tx, run_id)?;
                let a = tx
                    .get_approval(run_id, approval_id)
                    .map_err(|e| not_found(e, run_id, approval_id))?;
                // Pending with the shown hash; a row whose hash does not match its request is
                // still cancelled (cancel is what such a row is left to).
                if a.status != ApprovalStatus::Pending {
                    return Err(not_pending(&a));
                }
                if a.hash != shown {
                    return Err(OperatorError::Changed {
                        approval_id: Key::new(a.id_bytes()),
                        detail: String::new(),
                    });
                }
            }
            let from: Vec<RunStatus> = match tx.require_status(run_id, &FROM, None) {
                Ok(_) => FROM.to_vec(),
                // Only a status refusal is looked into: after a failed statement (a login
                // that may not lock the row) PostgreSQL answers nothing more in the
                // transaction, and its own error is the one to say.
                Err(e @ StoreError::RunState { .. }) => match tx.get_run(run_id)?.status {
                    status if status.is_terminal() => {
                        return Err(OperatorError::RunFinished {
                            run_id: Key::new(run_id),
                            status,
                        });
                    }
                    status @ RunStatus::Unknown(_) => vec![status],
                    _ => return Err(e.into()),
                },
                Err(e) => return Err(e.into()),
            };
            let content = Object::new().str("by", by).str("note", note).finish();
            let (obs, hash) = observation(
                "interrupted",
                &content,
                &format!("cancelled by operator: {note}"),
            )?;
            let n = if skip_steps {
                0
            } else {
                match tx.fail_steps(run_id, Failing::InFlight, &failure(&obs, &hash, now)) {
                    Ok(n) => n,
                    Err(e) => {
                        *steps_corrupt = e.is_corrupt();
                        return Err(e.into());
                    }
                }
            };
            finish(
                tx,
                run_id,
                RunStatus::Cancelled,
                "operator_cancelled",
                note,
                Some((by, &from)),
                now,
            )?;
            Ok::<_, OperatorError>(n)
        })
    };
    let mut steps_corrupt = false;
    let (steps_failed, steps_unreadable, events) = match attempt(false, &mut steps_corrupt) {
        Ok((n, events)) => (n, None, events),
        Err(e) if steps_corrupt => {
            let (n, events) = attempt(true, &mut steps_corrupt)?;
            (n, Some(e.to_string()), events)
        }
        Err(e) => return Err(e),
    };
    Ok(Cancelled {
        run: store.get_run(run_id)?,
        steps_failed,
        steps_unreadable,
        events,
    })
}
