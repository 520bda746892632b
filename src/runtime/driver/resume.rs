//! Resume (spec 8.2: a WAITING run whose latest approval was granted; 8.3: a RUNNING or
//! INTERRUPTED run whose previous driver stopped).

use std::sync::Arc;

use super::ctx::{Claim, EventExt, RunCtx, StepResult, Stop};
use super::dispatch::{Allowed, Dispatched, INTERRUPTED_KIND, ResumeGrant, policy_event};
use super::lease::{self, Lease};
use super::record::{self, observation, string_map};
use super::step::{check_args, json_err};
use super::{Inner, RuntimeError};
use crate::runtime::json::{self, gojson::Object};
use crate::runtime::policy::RunView;
use crate::runtime::store::{StepUpdate, StoreError, Transition};
use crate::runtime::tools::SideEffect;
use crate::runtime::types::{
    Approval, ApprovalStatus, PolicyDecision, Run, RunStatus, Step, StepStatus, Timestamp,
    ToolRequest,
};

/// What a reconciliation hook decides about a run taken over after a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reconciliation {
    /// Carry on with the loop.
    Continue,
    /// The goal was met: COMPLETED with this result (must pass the boundary check).
    Completed { result: Vec<u8>, detail: String },
    /// FAILED `reconcile_conflict`.
    Conflict { detail: String },
    /// Pause the interrupted tool call on this `require_approval` decision.
    Waiting {
        pause: Option<PolicyDecision>,
        detail: String,
    },
}

/// The crash-recovery hook (spec 8.3 step 6), handed copies of the run, steps, approvals.
pub trait Reconcile: Send + Sync + 'static {
    fn reconcile(
        &self,
        run: &Run,
        steps: &[Step],
        approvals: &[Approval],
    ) -> Result<Reconciliation, String>;
}

/// The notice of the interrupted-side-effect approval (spec 8.3 step 7), exactly.
pub const INTERRUPTED_NOTICE: &str = "This tool call started, and the process stopped before its outcome was recorded, so whether it took effect is unknown. Approving runs it again with these arguments; rejecting ends the run.";

pub(crate) enum Attached {
    /// Nothing to run: the run ended, was cancelled, or paused again.
    Done(Box<Run>),
    /// The loop carries on, first executing an allowed request if there is one.
    Continue(Box<RunCtx>, Option<Allowed>),
}

fn ctx(inner: &Arc<Inner>, run: Run, claim: Claim) -> Result<RunCtx, RuntimeError> {
    let mut cx = RunCtx {
        inner: inner.clone(),
        run_id: run.id.clone(),
        goal: run.goal.clone(),
        limits: run.limits.clone(),
        run,
        steps: Vec::new(),
        approvals: Vec::new(),
        lease: Lease::inactive("", &inner.owner),
        _claim: claim,
        attached: false,
    };
    cx.lease = Lease::inactive(&cx.run_id, &inner.owner);
    cx.reload_all()?;
    Ok(cx)
}

fn state(detail: String) -> RuntimeError {
    RuntimeError::Store(StoreError::RunState { detail })
}

fn stop_to(res: Stop) -> Result<Attached, RuntimeError> {
    match res {
        Stop::Ended(run) => Ok(Attached::Done(run)),
        Stop::Err(e) => Err(e),
    }
}

pub(crate) async fn attach(inner: Arc<Inner>, run_id: &str) -> Result<Attached, RuntimeError> {
    let run = inner.store.get_run(run_id)?;
    match run.status {
        RunStatus::WaitingForApproval => {
            let claim = Claim::take(&inner, run_id)?;
            let cx = ctx(&inner, run, claim)?;
            resume_waiting(cx)
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

/// Another owner's live lease refuses the resume (read before any clock value).
fn check_lease(inner: &Inner, run: &Run) -> Result<(), RuntimeError> {
    if !run.lease_owner.is_empty()
        && run.lease_owner != inner.owner
        && run.lease_expires_at > Timestamp::now()
    {
        return Err(RuntimeError::Store(StoreError::RunLeased {
            run_id: run.id.clone(),
            owner: run.lease_owner.clone(),
            expires_at: run.lease_expires_at,
        }));
    }
    Ok(())
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

fn resume_waiting(mut cx: RunCtx) -> Result<Attached, RuntimeError> {
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
        let until = lease::expiry(cx.inner.lease_ttl);
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
            Err(s) => stop_to(s),
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
        kind: a.kind.clone(),
    };
    match cx.dispatch(
        &step.id,
        step.index,
        reg,
        &req.args,
        view,
        StepStatus::AwaitingApproval,
        Some(grant),
    ) {
        Ok(Dispatched::Execute(al)) => Ok(Attached::Continue(Box::new(cx), Some(al))),
        Ok(Dispatched::Continue) => Ok(Attached::Continue(Box::new(cx), None)),
        Err(s) => stop_to(s),
    }
}

impl RunCtx {
    /// Expires an approval (pending or granted) and cancels the WAITING run (spec 4.5).
    fn expire(&mut self, a: &Approval, now: Timestamp) -> Stop {
        let detail = format!("approval {} expired", a.id);
        let p = Object::new()
            .str("approval_id", &a.id)
            .str("status", "expired")
            .finish();
        let res = self.write(|tx| {
            let ok = if a.status == ApprovalStatus::Pending {
                tx.set_approval_status(&a.id, "pending", &a.hash, "expired", now, None, "expired")?
            } else {
                tx.set_approval_status_only(&a.id, a.status.as_str(), &a.hash, "expired")?
            };
            if !ok {
                return Err(StoreError::RunState {
                    detail: format!("approval {} changed", a.id),
                }
                .into());
            }
            tx.event(&self.run_id, &a.step_id, now, "approval.decided", &p)?;
            tx.transition(&Transition {
                run_id: &self.run_id,
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
            tx.event(&self.run_id, "", now, "run.finished", &fin)?;
            Ok(())
        });
        self.end_result(res)
    }
}

fn resume_interrupted(mut cx: RunCtx) -> Result<Attached, RuntimeError> {
    let from = [RunStatus::Running, RunStatus::Interrupted];
    let damaged = cx.damaged();
    let now = cx.inner.now();
    let until = lease::expiry(cx.inner.lease_ttl);
    let owner = cx.inner.owner.clone();
    let in_flight: Vec<Arc<Step>> = cx
        .steps
        .iter()
        .filter(|s| matches!(s.status, StepStatus::Deciding | StepStatus::Executing))
        .cloned()
        .collect();
    let executing = in_flight
        .iter()
        .find(|s| s.status == StepStatus::Executing)
        .cloned()
        .or_else(|| {
            cx.steps
                .last()
                .filter(|s| {
                    s.status == StepStatus::Interrupted
                        && s.observation
                            .as_ref()
                            .is_some_and(|o| o.content == br#"{"previous_status":"executing"}"#)
                })
                .cloned()
        });
    // Take the lease; mark in-flight steps interrupted.
    let mut obs_of = Vec::new();
    let res = cx.write(|tx| {
        let st = tx.require_status(&cx.run_id, &from, None)?;
        let run = tx.get_run(&cx.run_id)?;
        if !run.lease_owner.is_empty()
            && run.lease_owner != owner
            && run.lease_expires_at > Timestamp::now()
        {
            return Err(StoreError::RunLeased {
                run_id: cx.run_id.clone(),
                owner: run.lease_owner,
                expires_at: run.lease_expires_at,
            }
            .into());
        }
        let _ = st;
        tx.set_lease(&cx.run_id, &owner, until)?;
        let own_expired = run.lease_owner == owner && run.lease_expires_at <= Timestamp::now();
        if !run.lease_owner.is_empty() && (run.lease_owner != owner || own_expired) {
            let p = record::lease_taken_over(
                &owner,
                &run.lease_expires_at.format_always(),
                &run.lease_owner,
            );
            tx.event(&cx.run_id, "", now, "lease.taken_over", &p)?;
        }
        if damaged.is_none() {
            for s in &in_flight {
                let prev = s.status.as_str();
                let content = string_map(&[("previous_status", prev)]);
                let o = observation(
                    "interrupted",
                    content.clone(),
                    format!("step interrupted while {prev}"),
                );
                let oj = o.to_go_json().map_err(json_err("observation"))?;
                tx.update_step(
                    &s.id,
                    std::slice::from_ref(&s.status),
                    &StepUpdate {
                        status: Some(StepStatus::Interrupted),
                        observation_json: Some(&String::from_utf8_lossy(&oj)),
                        observation_hash: Some(&o.content_hash),
                        finished_at: Some(now),
                        ..StepUpdate::default()
                    },
                )?;
                tx.event(
                    &cx.run_id,
                    &s.id,
                    now,
                    "step.interrupted",
                    &record::step_interrupted(&content),
                )?;
                obs_of.push((s.id.clone(), o));
            }
        }
        Ok(())
    });
    if let Err(s) = res {
        return match s {
            // A live owner took it between our read and the write: report it as leased.
            Stop::Err(RuntimeError::Store(StoreError::LeaseLost { detail })) => Err(state(detail)),
            s => stop_to(s),
        };
    }
    cx.hold_lease(until);
    for (id, o) in obs_of {
        if let Some(s) = cx.step_mut(&id) {
            s.status = StepStatus::Interrupted;
            s.observation = Some(o);
            s.finished_at = now;
        }
    }
    if let Some(d) = damaged {
        return stop_to(cx.fail_internal(&from, &format!("internal: {d}")));
    }
    if let Some(hook) = cx.inner.reconcile.clone() {
        let steps: Vec<Step> = cx.steps.iter().map(|s| (**s).clone()).collect();
        let approvals: Vec<Approval> = cx.approvals.iter().map(|a| (**a).clone()).collect();
        let run = cx.inner.store.get_run(&cx.run_id)?;
        match hook.reconcile(&run, &steps, &approvals) {
            Err(e) => return stop_to(cx.fail_internal(&from, &format!("reconcile: {e}"))),
            Ok(Reconciliation::Continue) => {}
            Ok(Reconciliation::Completed { result, detail }) => {
                if let Err(e) = json::check_json(&result) {
                    return stop_to(
                        cx.fail_internal(&from, &format!("internal: reconciliation result: {e}")),
                    );
                }
                return stop_to(cx.end_from(
                    &from,
                    RunStatus::Completed,
                    "goal_completed",
                    &format!("completed by reconciliation: {detail}"),
                    &result,
                ));
            }
            Ok(Reconciliation::Conflict { detail }) => {
                return stop_to(cx.end_from(
                    &from,
                    RunStatus::Failed,
                    "reconcile_conflict",
                    &detail,
                    b"",
                ));
            }
            Ok(Reconciliation::Waiting { pause, detail }) => {
                let Some(pd) = pause.filter(|p| p.outcome == "require_approval") else {
                    let d = if detail.is_empty() {
                        String::new()
                    } else {
                        format!(": {detail}")
                    };
                    return stop_to(cx.end_from(
                        &from,
                        RunStatus::Failed,
                        "reconcile_conflict",
                        &format!(
                            "reconciliation asked to wait but gave no approval to wait for{d}"
                        ),
                        b"",
                    ));
                };
                let Some(s) = executing.clone() else {
                    return stop_to(cx.end_from(&from, RunStatus::Failed, "reconcile_conflict", "reconciliation asked to wait but no interrupted tool call can be paused (no step was executing)", b""));
                };
                return cx.pause_interrupted(&s, pd, now, &from, true);
            }
        }
    } else if let Some(s) = executing.clone() {
        let side = s
            .decision
            .as_ref()
            .and_then(|d| cx.inner.tools.get(&d.tool))
            .map(|r| r.def.side_effect.clone());
        if side != Some(SideEffect::ReadOnly) {
            return cx.pause_interrupted(&s, PolicyDecision::default(), now, &from, false);
        }
    }
    let res = cx.write(|tx| {
        tx.transition(&Transition {
            run_id: &cx.run_id,
            from: &from,
            to: RunStatus::Running,
            reason: "",
            detail: "",
            finished_at: Timestamp::ZERO,
            result_json: "",
            lease_owner: Some(&owner),
            lease_expires_at: until,
        })?;
        tx.event(
            &cx.run_id,
            "",
            now,
            "run.resumed",
            br#"{"after":"interruption"}"#,
        )?;
        Ok(())
    });
    match res {
        Ok(()) => Ok(Attached::Continue(Box::new(cx), None)),
        Err(s) => stop_to(s),
    }
}

impl RunCtx {
    /// Ends a run being taken over (from RUNNING/INTERRUPTED).
    fn end_from(
        &mut self,
        from: &[RunStatus],
        status: RunStatus,
        reason: &str,
        detail: &str,
        result: &[u8],
    ) -> Stop {
        let now = self.inner.now();
        let res =
            self.write(|tx| self.finish_in(tx, from, status, reason, detail, result, now, false));
        self.end_result(res)
    }

    /// Pauses an interrupted tool call for an operator (spec 8.3 step 7), or on the
    /// reconciliation's own decision.
    fn pause_interrupted(
        &mut self,
        s: &Step,
        pd: PolicyDecision,
        at: Timestamp,
        from: &[RunStatus],
        reconciled: bool,
    ) -> Result<Attached, RuntimeError> {
        let conflict = |cx: &mut RunCtx, why: &str| {
            let d = if reconciled {
                format!(
                    "reconciliation asked to wait but no interrupted tool call can be paused ({why})"
                )
            } else {
                format!(
                    "step {} was interrupted while executing a tool call whose outcome is unknown, and it cannot wait for an operator: {why}",
                    s.index
                )
            };
            stop_to(cx.end_from(from, RunStatus::Failed, "reconcile_conflict", &d, b""))
        };
        let Some(d) = s.decision.clone() else {
            return conflict(self, "it has no decision");
        };
        let Some(reg) = self.inner.tools.get(&d.tool).cloned() else {
            return conflict(self, &format!("tool {:?} is not registered", d.tool));
        };
        if !d.invalid_args.is_empty() {
            return conflict(self, "its arguments were not JSON");
        }
        if let Err(e) = check_args(&reg, &d) {
            return conflict(self, &e);
        }
        let raw: &[u8] = if d.args.is_empty() { b"{}" } else { &d.args };
        let mut args = Vec::new();
        if let Err(e) = json::gojson::write_raw(&mut args, raw) {
            return conflict(self, &e.to_string());
        }
        let pd = if reconciled {
            pd
        } else {
            let mut cap = Object::new();
            cap.encoded("args", &args).str("tool", &d.tool);
            let mut pres = Object::new();
            pres.encoded("args", &args)
                .str("notice", INTERRUPTED_NOTICE)
                .str("side_effect", reg.def.side_effect.as_str())
                .str("tool", &d.tool);
            PolicyDecision {
                outcome: "require_approval".into(),
                reason: "interrupted while executing; outcome unknown".into(),
                kind: INTERRUPTED_KIND.into(),
                capability: cap.finish(),
                presentation: pres.finish(),
            }
        };
        let request = ToolRequest {
            run_id: self.run_id.clone(),
            step_id: s.id.clone(),
            spec: reg.spec.clone(),
            args,
        };
        let ev = policy_event(&pd, "", &reg.spec_hash, None).map_err(|e| RuntimeError::Json {
            context: "policy event".into(),
            err: e,
        })?;
        let res: StepResult<Run> = self.pause(
            &s.id,
            &[StepStatus::Interrupted],
            from,
            &pd,
            &request,
            at,
            &ev,
            "",
        );
        match res {
            Ok(run) => Ok(Attached::Done(Box::new(run))),
            Err(st) => stop_to(st),
        }
    }
}
