//! The fate of a run's latest approved call (issue 15 item 5), read by key: the run's last two
//! approvals (a window at the end of its own approvals) and the step the last one is for. What
//! the reviewer sees after deciding: approved and waiting for its program, executed, denied
//! when the policy was asked again on resume, paused again for a new approval, or denied with
//! feedback.

use super::data::{ApprovalStatus, Fate, Key, RunStatus, StepStatus};
use super::reads::ConsoleReads;
use crate::runtime::store::{StoreError, raw_bytes};
use crate::runtime::types::Approval;

/// The fate of `run`'s latest decided call, if it has one worth showing (`None`: no approval,
/// or one still pending for the first time, which the queue shows).
pub fn fate_of(
    store: &dyn ConsoleReads,
    run: &Key,
    status: &RunStatus,
) -> Result<Option<Fate>, StoreError> {
    let two = store
        .last_two_approvals(std::slice::from_ref(run))?
        .pop()
        .unwrap_or_default();
    fate_from(store, two, status)
}

/// The fate of a run in `status` whose last two approvals (oldest first) are `items`; only an
/// approved call reads more (its step).
pub fn fate_from(
    store: &dyn ConsoleReads,
    mut items: Vec<Approval>,
    status: &RunStatus,
) -> Result<Option<Fate>, StoreError> {
    let Some(last) = items.pop() else {
        return Ok(None);
    };
    let prev = items.pop();
    match &last.status {
        ApprovalStatus::Pending => Ok(paused_again(&last, prev.as_ref())),
        ApprovalStatus::Approved => approved(store, &last).map(Some),
        // A rejection that left the run going was a denial with feedback (decision 0040).
        ApprovalStatus::Rejected if *status != RunStatus::Cancelled => {
            Ok(Some(Fate::DeniedWithFeedback {
                note: raw_bytes(&last.raw_invalid, "note", &last.note),
            }))
        }
        _ => Ok(None),
    }
}

/// Of a run's last two approvals (oldest first, as [`ConsoleReads::last_two_approvals`] reads
/// them), the last, when it is pending and asked again after a grant of the same step.
pub fn asked_again(two: &[Approval]) -> Option<Key> {
    let (last, prev) = match two {
        [prev, last] => (last, Some(prev)),
        [last] => (last, None),
        _ => return None,
    };
    if last.status != ApprovalStatus::Pending {
        return None;
    }
    match paused_again(last, prev) {
        Some(Fate::PausedAgain { approval }) => Some(approval),
        _ => None,
    }
}

/// A pending approval after an approved one for the same step: the resume paused again.
fn paused_again(last: &Approval, prev: Option<&Approval>) -> Option<Fate> {
    let prev = prev?;
    (prev.status == ApprovalStatus::Approved && prev.step_id_bytes() == last.step_id_bytes()).then(
        || Fate::PausedAgain {
            approval: Key::new(last.id_bytes()),
        },
    )
}

/// An approved call: still waiting for its program, in flight, executed, or denied on resume.
fn approved(store: &dyn ConsoleReads, a: &Approval) -> Result<Fate, StoreError> {
    let step = match store.get_step(a.step_id_bytes()) {
        Ok(s) => s,
        Err(StoreError::NotFound { .. }) => {
            return Ok(Fate::AwaitingResume {
                decided_at: a.decided_at,
            });
        }
        Err(e) => return Err(e),
    };
    let denied = step
        .policy
        .as_ref()
        .is_some_and(|p| p.outcome == "deny" || p.outcome == "abort");
    Ok(match (&step.status, &step.observation) {
        (StepStatus::AwaitingApproval, _) => Fate::AwaitingResume {
            decided_at: a.decided_at,
        },
        (_, Some(o)) if denied && o.kind == "policy_denied" => Fate::DeniedOnResume {
            reason: step
                .policy
                .as_ref()
                .map(|p| p.reason.clone().into_bytes())
                .unwrap_or_default(),
        },
        (_, Some(o)) => Fate::Executed {
            failed: step.status == StepStatus::Failed,
            summary: o.summary.clone().into_bytes(),
        },
        (_, None) => Fate::Resumed,
    })
}
