//! Resume (spec 8.2: a WAITING run whose latest approval was granted). The entry point that
//! routes a run here or to crash recovery (`recover.rs`, spec 8.3) is `attach.rs`.

use std::sync::Arc;

use super::RuntimeError;
use super::ctx::{RunCtx, Stop};
use super::dispatch::{Allowed, Dispatched, ResumeGrant};
use super::record;
use super::step::check_args;
use crate::runtime::json::{self, gojson::Object};
use crate::runtime::policy::RunView;
use crate::runtime::store::{StoreError, Transition};
use crate::runtime::types::{
    Approval, ApprovalStatus, Run, RunStatus, Said, Step, StepStatus, Timestamp, ToolRequest,
};

pub(crate) enum Attached {
    /// Nothing to run: the run ended, was cancelled, or paused again.
    Done(Box<Run>),
    /// The loop carries on, first executing an allowed request if there is one.
    Continue(Box<RunCtx>, Option<Allowed>),
    /// A grant checked but not yet written (Gate only).
    Grant(Box<RunCtx>, Box<Deferred>),
}

pub(crate) fn state(detail: String) -> RuntimeError {
    RuntimeError::Store(StoreError::RunState {
        detail: detail.into(),
    })
}

pub(crate) fn stop_to(res: Stop) -> Result<Attached, RuntimeError> {
    match res {
        Stop::Ended(run) => Ok(Attached::Done(run)),
        Stop::Err(e) => Err(e),
    }
}

/// Recomputes an approval's hash from its stored parts (`verifyHash`).
pub fn verify_hash(a: &Approval) -> Result<(), RuntimeError> {
    if !a.decode_error.is_empty() {
        return Err(RuntimeError::ApprovalHash(a.decode_error.clone()));
    }
    let h = json::approval_hash(
        &a.kind,
        a.capability.as_bytes(),
        a.presentation.as_bytes(),
        a.request_json.as_bytes(),
    )
    .map_err(|e| RuntimeError::ApprovalHash(e.to_string()))?;
    if h != a.hash {
        return Err(RuntimeError::ApprovalHash(format!("approval {}", a.id)));
    }
    Ok(())
}

pub(crate) fn resume_waiting(mut cx: RunCtx, defer: bool) -> Result<Attached, RuntimeError> {
    let waiting = [RunStatus::WaitingForApproval];
    if let Some(d) = cx.damaged() {
        return stop_to(cx.fail_internal(&waiting, &format!("internal: {d}")));
    }
    let Some(step) = cx
        .steps
        .iter()
        .rev()
        .find(|s| s.status == StepStatus::AwaitingApproval)
        .cloned()
    else {
        return Err(state(format!(
            "run {} is waiting but has no awaiting step",
            cx.run_id
        )));
    };
    let Some(a) = cx
        .approvals
        .iter()
        .rev()
        .find(|a| a.step_id == step.id)
        .cloned()
    else {
        return Err(state(format!(
            "run {} has no approval for step {}",
            cx.run_id, step.id
        )));
    };
    let now = cx.inner.now();
    if a.status == ApprovalStatus::Pending && !a.expires_at.is_zero() && now > a.expires_at {
        return stop_to(cx.expire(&a, now));
    }
    if a.status != ApprovalStatus::Approved {
        return Err(state(format!(
            "the latest approval for step {} is {}, not approved",
            step.id, a.status
        )));
    }
    verify_hash(&a)?;
    granted_on_record(&cx, &a)?;
    let req: ToolRequest = a.request.clone().unwrap_or_default();
    let Some(reg) = cx.inner.tools.get(&req.spec.name).cloned() else {
        return Err(RuntimeError::ApprovedToolNotRegistered(
            req.spec.name.clone(),
        ));
    };
    let resumed_at = cx.inner.now();
    if cx.limits.grant_ttl > 0 && resumed_at > a.decided_at.add_nanos(cx.limits.grant_ttl) {
        return stop_to(cx.expire(&a, resumed_at));
    }
    let decision = crate::runtime::types::Decision {
        kind: "tool_call".into(),
        tool: req.spec.name.clone(),
        args: req.args.clone(),
        ..Default::default()
    };
    if let Err(msg) = check_args(&reg, &decision) {
        // WAITING -> RUNNING and the step ends as an invalid decision; the agent decides again.
        let until = cx.inner.lease_expiry();
        let obs = record::invalid_decision(&msg, " on resume");
        let (aid, owner, sid) = (a.id.clone(), cx.inner.owner.clone(), step.id.clone());
        let res = cx.end_step(
            &step.id,
            &[StepStatus::AwaitingApproval],
            StepStatus::Failed,
            Some(&obs),
            &msg,
            resumed_at,
            |c, tx| c.resume_to_running(tx, &sid, &aid, &owner, until, resumed_at),
            |_, _| Ok(()),
        );
        return match res {
            Ok(()) => {
                cx.hold_lease(until);
                Ok(Attached::Continue(Box::new(cx), None))
            }
            Err(s) => stop_to(cx.fail_encoding(s)),
        };
    }
    let before: Vec<Arc<Step>> = cx
        .steps
        .iter()
        .take_while(|s| s.id != step.id)
        .cloned()
        .collect();
    let view = RunView {
        run_id: cx.run_id.clone(),
        status: RunStatus::WaitingForApproval.as_str().to_string(),
        step_count: cx.run.step_count,
        model_calls: cx.run.model_calls,
        input_tokens: cx.run.input_tokens,
        output_tokens: cx.run.output_tokens,
        cached_input_tokens: cx.run.cached_input_tokens,
        estimated_cost_micros: cx.run.estimated_cost_micros,
        active_ms: cx.run.active_ms,
        steps: before,
        approvals: cx.approvals.clone(),
    };
    let grant = ResumeGrant {
        approval_id: a.id.clone(),
        hash: a.hash.clone(),
    };
    let deferred = Deferred {
        step_id: step.id.clone(),
        index: step.index,
        reg,
        args: req.args.clone(),
        view,
        grant,
        approval: (*a).clone(),
    };
    if defer {
        return Ok(Attached::Grant(Box::new(cx), Box::new(deferred)));
    }
    cx.run_grant(deferred)
}

/// A granted request checked and ready for the resume transaction (a Gate defers it to
/// `execute`, judging the grant TTL again there).
pub(crate) struct Deferred {
    pub step_id: String,
    pub index: i64,
    pub reg: Arc<crate::runtime::tools::Registered>,
    pub args: Vec<u8>,
    pub view: RunView,
    pub grant: ResumeGrant,
    pub approval: Approval,
}

impl Deferred {
    /// The request the grant binds, with the spec registered now.
    pub fn request(&self, run_id: &str) -> ToolRequest {
        ToolRequest {
            run_id: run_id.to_string(),
            step_id: self.step_id.clone(),
            spec: self.reg.spec.clone(),
            args: self.args.clone(),
        }
    }
}

impl RunCtx {
    /// Asks the policy again and, when it still allows the grant, writes the resume
    /// transaction (spec 8.2 step 9).
    pub(crate) fn run_grant(mut self, d: Deferred) -> Result<Attached, RuntimeError> {
        match self.dispatch(
            &d.step_id,
            d.index,
            d.reg,
            &d.args,
            d.view,
            StepStatus::AwaitingApproval,
            Some(d.grant),
        ) {
            Ok(Dispatched::Execute(al)) => Ok(Attached::Continue(Box::new(self), Some(al))),
            Ok(Dispatched::Continue) => Ok(Attached::Continue(Box::new(self), None)),
            Err(s) => stop_to(self.fail_encoding(s)),
        }
    }

    /// The grant TTL judged again with a fresh reading (a Gate's `execute`).
    pub(crate) fn grant_expired(&mut self, d: &Deferred) -> Option<Stop> {
        let now = self.inner.now();
        if self.limits.grant_ttl > 0 && now > d.approval.decided_at.add_nanos(self.limits.grant_ttl)
        {
            return Some(self.expire(&d.approval, now));
        }
        None
    }
}

impl RunCtx {
    /// Expires an approval (pending or granted) and cancels the WAITING run (spec 4.5).
    pub(crate) fn expire(&mut self, a: &Approval, now: Timestamp) -> Stop {
        let detail = format!("approval {} expired", a.id);
        let p = Object::new()
            .str("approval_id", &a.id)
            .str("status", "expired")
            .finish();
        let res = self.write(|tx| {
            if !tx.expire_approval(a, now)? {
                return Err(StoreError::RunState {
                    detail: Said::from("approval ").id(a.id_bytes()).text(" changed"),
                }
                .into());
            }
            tx.append(&self.run_id, &a.step_id, &now, "approval.decided", &p)?;
            tx.transition(&Transition {
                run_id: self.run_id.as_bytes(),
                from: &[RunStatus::WaitingForApproval],
                to: RunStatus::Cancelled,
                reason: "approval_expired",
                detail: &detail,
                finished_at: now,
                result_json: "",
                lease_owner: None,
                lease_expires_at: Timestamp::ZERO,
            })?;
            let steps = tx.get_run(&self.run_id)?.step_count;
            let fin = record::run_finished(None, &detail, "approval_expired", "CANCELLED", steps);
            tx.append(&self.run_id, "", &now, "run.finished", &fin)?;
            Ok(())
        });
        self.end_result(res)
    }
}

/// A grant runs only when the run's events record it: the last `approval.decided` event of the
/// approval is, byte for byte, the one deciding writes for this row (`approved`, by the name,
/// with the note, the row holds), at the row's decision time (which a grant's time to live is
/// measured from), on the approval's step, and, once chained, its hash is its
/// link in the chain. Deciding writes the row and that event in one transaction (spec 4.4 step
/// 4); the events are hash-chained while the row is not. A row approved otherwise was not
/// decided through the runtime's operator (changed by hand, by a trigger, read from a
/// look-alike table, or with an event written beside it; found from outside, where workers
/// then paid refunds nobody approved). Nothing runs, and the run stays waiting.
fn granted_on_record(cx: &RunCtx, a: &Approval) -> Result<(), RuntimeError> {
    let events = cx.inner.store.decision_events(cx.run_id.as_bytes())?;
    let names = |e: &crate::runtime::store::DecisionEvent| {
        serde_json::from_str::<serde_json::Value>(&e.payload)
            .ok()
            .and_then(|v| {
                let id = v.get("approval_id")?.as_str()?.to_string();
                Some((id, v.get("status").map(|s| s.to_string())))
            })
    };
    let last = events.iter().rev().find_map(|e| {
        names(e)
            .filter(|(id, _)| id == &a.id)
            .map(|(_, st)| (e, st))
    });
    let expected = Object::new()
        .str_bytes("approval_id", a.id_bytes())
        .str("by", &a.decided_by)
        .str("note", &a.note)
        .str("status", "approved")
        .finish();
    let why = match last {
        None => "no approval.decided event records a decision of it".to_string(),
        Some((_, st)) if st.as_deref() != Some("\"approved\"") => format!(
            "its last approval.decided event says {}",
            st.unwrap_or_else(|| "no status".into())
        ),
        Some((e, _)) if e.linked == Some(false) => {
            "its approval.decided event does not hash to its place in the event chain".to_string()
        }
        Some((e, _)) if e.step_id != a.step_id_bytes() => {
            "its approval.decided event names another step".to_string()
        }
        Some((e, _)) if Timestamp::parse(&e.at).ok() != Some(a.decided_at) => {
            "its decision time is not the one its approval.decided event records".to_string()
        }
        Some((e, _)) if e.payload.as_bytes() != expected.as_slice() => {
            "its approval.decided event is not the one deciding writes for this row (its approver, note or form differ)".to_string()
        }
        Some(_) => return Ok(()),
    };
    Err(RuntimeError::GrantNotRecorded(format!(
        "approval {} is stored as approved, but {why}; nothing ran",
        a.id
    )))
}
