//! Deny with feedback (issue 15 item 7; docs/decisions/0040-deny-with-feedback.md): the call
//! does not run, the run is not cancelled, and the agent is handed the reviewer's note as the
//! step's observation when its program resumes the run.
//!
//! In agentrt's vocabulary, in one transaction: the approval `pending → rejected` with the
//! note (`approval.decided`, as Reject writes it); the awaiting step `failed` with a
//! `policy_denied` observation whose content carries the note (`step.failed`); the run
//! `WAITING_FOR_APPROVAL → INTERRUPTED` with its lease cleared. INTERRUPTED is the status
//! agentrt's Resume (spec 8.3) accepts like RUNNING and its runtime never writes itself: with
//! no step in flight the resume writes `run.resumed {"after":"interruption"}` and the loop asks
//! the agent again. The stored request is never edited.
//!
//! A run an MCP proxy began (its `proxy_calls` row names it) is one call with no agent loop to
//! resume: nothing would ever hand it the note, and the host's next identical call would ask
//! again. Denying such a call rejects it with the note instead (decision 0040, amendment): the
//! host is answered `REJECTED` with the note, and an identical call within the proxy's repeat
//! window is refused the same way.

use crate::runtime::json::gojson::Object;
use crate::runtime::store::{Failing, IN_CRATE, RunStore, RunTx, StoreError, Transition};
use crate::runtime::types::{ApprovalStatus, AsKey, Key, RunStatus, Said, StepStatus, Timestamp};

use super::OperatorError;
use super::common::{decide_row, failure, observation};
use super::decide::{Decided, Shown, precheck, recheck};

/// The observation kind the agent receives (a failure, as Reject's is).
pub const DENIED_KIND: &str = "policy_denied";

/// The summary of the observation the agent receives.
pub fn denied_summary(note: &str) -> String {
    format!("denied by the reviewer, who says: {note}")
}

/// Denies a pending approval with feedback, bound to the hash the reviewer was shown (compared
/// under the write lock). `note` is the feedback and must not be blank. The run becomes
/// INTERRUPTED, for its program to resume; a run an MCP proxy began is rejected with the note
/// instead (CANCELLED, `approval_rejected`: its host is told the note), see the module notes.
pub fn deny_shown<S: RunStore + ?Sized>(
    store: &S,
    run_id: impl AsKey,
    approval_id: impl AsKey,
    shown_hash: &str,
    by: &str,
    note: &str,
    now: Timestamp,
) -> Result<Decided, OperatorError> {
    let (run_id, approval_id) = (run_id.key_bytes(), approval_id.key_bytes());
    let shown = Shown::Hash(shown_hash);
    super::check_name(by)?;
    if shown_hash.is_empty() {
        return Err(OperatorError::Changed {
            approval_id: Key::new(approval_id),
            detail: ": no hash was shown".into(),
        });
    }
    if note.trim().is_empty() {
        return Err(StoreError::Invalid(
            "a denial with feedback needs a note: the agent is handed it instead of the call's result"
                .into(),
        )
        .into());
    }
    // A proxy's call: its host is told through a rejection (a run is a proxy's from its
    // creation on, so this read needs no lock). An index that cannot be read says "not one".
    if store.proxy_call(run_id).ok().flatten().is_some() {
        return super::reject_shown(store, run_id, approval_id, shown_hash, by, note, now);
    }
    // Outside the transaction: the cheap refusals and expiry by the deciding clock.
    precheck(store, run_id, approval_id, shown, now)?;
    // The same checks again under the write lock, then conditional updates.
    let ((), events) = store.write(IN_CRATE, |tx| -> Result<(), OperatorError> {
        let a = recheck(tx, run_id, approval_id, shown)?;
        let step = tx.get_step(a.step_id_bytes())?;
        if step.status != StepStatus::AwaitingApproval {
            return Err(StoreError::RunState {
                detail: Said::from("step ")
                    .id(step.id_bytes())
                    .text(format!(" is {}", step.status.as_str())),
            }
            .into());
        }
        decide_row(tx, run_id, &a, &ApprovalStatus::Rejected, (by, note, now))?;
        let content = Object::new()
            .str_bytes("approval_id", a.id_bytes())
            .str("by", by)
            .str("note", note)
            .finish();
        let summary = denied_summary(note);
        let (obs, hash) = observation(DENIED_KIND, &content, &summary)?;
        tx.fail_steps(
            run_id,
            Failing::Step(a.step_id_bytes()),
            &failure(&obs, &hash, now),
        )?;
        let failed = Object::new()
            .str("content_hash", &hash)
            .str("detail", &summary)
            .str("observation", DENIED_KIND)
            .finish();
        tx.append_event(run_id, a.step_id_bytes(), &now, "step.failed", &failed)?;
        tx.transition(&Transition {
            run_id,
            from: &[RunStatus::WaitingForApproval],
            to: RunStatus::Interrupted,
            reason: "",
            detail: "",
            finished_at: Timestamp::ZERO,
            result_json: "",
            lease_owner: None,
            lease_expires_at: Timestamp::ZERO,
        })?;
        Ok(())
    })?;
    Decided::read(store, run_id, approval_id, events)
}
