//! Resume of a RUNNING or INTERRUPTED run whose driver stopped (spec 8.3): take the lease over,
//! mark in-flight steps interrupted, ask the reconciliation hook, or pause an interrupted
//! side effect for an operator.

use std::sync::Arc;

use super::RuntimeError;
use super::ctx::{RunCtx, StepResult, Stop};
use super::dispatch::{INTERRUPTED_KIND, policy_event};
use super::record::{self, observation, string_map};
use super::resume::{Attached, stop_to};
use super::step::{check_args, json_err};
use crate::runtime::json::{self, gojson::Object};
use crate::runtime::store::{StepUpdate, StoreError};
use crate::runtime::tools::SideEffect;
use crate::runtime::types::{
    Approval, Key, Outcome, PolicyDecision, Run, RunStatus, Step, StepStatus, Timestamp,
    ToolRequest,
};

/// What a reconciliation hook decides about a run taken over after a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reconciliation {
    /// Carry on with the loop.
    Continue,
    /// The goal was met: COMPLETED with this result (must pass the boundary check).
    /// A result failing the check ends the run `internal_error` instead.
    Completed {
        /// The run's result JSON.
        result: Vec<u8>,
        /// Recorded as the reason detail, after `completed by reconciliation: `.
        detail: String,
    },
    /// FAILED `reconcile_conflict`.
    Conflict {
        /// Recorded as the reason detail.
        detail: String,
    },
    /// Pause the interrupted tool call on this `require_approval` decision.
    Waiting {
        /// The decision to pause on. When it is absent or has another outcome, or no
        /// interrupted tool call can be paused (none was executing, its tool is not registered
        /// here...), the run ends FAILED `reconcile_conflict` instead.
        pause: Option<PolicyDecision>,
        /// Named in that failure's detail; not recorded when the pause happens.
        detail: String,
    },
}

/// Why a crash-recovery hook could not reconcile a run. Its text is recorded
/// (`reconcile: <text>`), so a consumer's own failure is a [`ReconcileError::Message`]: `?` on a
/// `String` or `&str` error, or `.into()`, makes one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReconcileError {
    /// A policy call the hook made (e.g. [`need_approval`](crate::runtime::policy::need_approval)
    /// for its pause) failed.
    #[error("{0}")]
    Policy(#[from] crate::runtime::policy::PolicyError),
    /// The consumer's own failure, as its message.
    #[error("{0}")]
    Message(String),
}

from_message!(ReconcileError);

/// The crash-recovery hook (spec 8.3 step 6), handed copies of the run, steps, approvals.
pub trait Reconcile: Send + Sync + 'static {
    /// Called once per recovering resume, after the in-flight steps were marked interrupted
    /// and the lease taken. An `Err` ends the run `internal_error` (`reconcile: <err>`), and
    /// so does a panic (`reconcile: panic: <message>`).
    fn reconcile(
        &self,
        run: &Run,
        steps: &[Step],
        approvals: &[Approval],
    ) -> Result<Reconciliation, ReconcileError>;
}

/// The notice of the interrupted-side-effect approval (spec 8.3 step 7), exactly.
pub const INTERRUPTED_NOTICE: &str = "This tool call started, and the process stopped before its outcome was recorded, so whether it took effect is unknown. Approving runs it again with these arguments; rejecting ends the run.";

pub(crate) fn resume_interrupted(mut cx: RunCtx) -> Result<Attached, RuntimeError> {
    let from = [RunStatus::Running, RunStatus::Interrupted];
    let damaged = cx.damaged();
    let now = cx.inner.now();
    let until = cx.inner.lease_expiry();
    let local_now = cx.inner.lease_now();
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
        // The lease is judged by the store's clock: this process's own on SQLite, the
        // server's on PostgreSQL (decision 0083).
        let lease_now = tx.lease_now(local_now)?;
        if !run.lease_owner.is_empty()
            && run.lease_owner != owner
            && run.lease_expires_at > lease_now
        {
            return Err(StoreError::RunLeased {
                run_id: Key::from(cx.run_id.as_str()),
                owner: run.lease_owner,
                expires_at: run.lease_expires_at,
            }
            .into());
        }
        let _ = st;
        let stamped = tx.lease_until(until, cx.inner.lease_ttl)?;
        tx.set_lease(&cx.run_id, &owner, stamped)?;
        let own_expired = run.lease_owner == owner && run.lease_expires_at <= lease_now;
        if !run.lease_owner.is_empty() && (run.lease_owner != owner || own_expired) {
            let p = record::lease_taken_over(
                &owner,
                &run.lease_expires_at.format_always(),
                &run.lease_owner,
            );
            tx.append(&cx.run_id, "", &now, "lease.taken_over", &p)?;
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
                tx.append(
                    &cx.run_id,
                    &s.id,
                    &now,
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
            Stop::Err(RuntimeError::Store(StoreError::LeaseLost { detail })) => {
                Err(RuntimeError::Store(StoreError::RunState { detail }))
            }
            s => stop_to(cx.fail_encoding(s)),
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
        // A panic in the hook is its error, as a policy's is.
        let reconciled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            hook.reconcile(&run, &steps, &approvals)
        }))
        .unwrap_or_else(|p| {
            Err(ReconcileError::Message(format!(
                "panic: {}",
                super::execute::panic_text(p.as_ref())
            )))
        });
        match reconciled {
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
                let Some(pd) = pause.filter(|p| p.outcome == Outcome::RequireApproval) else {
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
        cx.to_running(tx, &from, &owner, until)?;
        tx.append(
            &cx.run_id,
            "",
            &now,
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
            return conflict(
                self,
                &format!(
                    "tool {} is not registered",
                    crate::runtime::json::go_quote(&d.tool)
                ),
            );
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
                outcome: Outcome::RequireApproval,
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
        let ev = match policy_event(&pd, "", &reg.spec_hash, None) {
            Ok(ev) => ev,
            Err(e) => {
                let s = self.fail_encoding(json_err("policy event")(e));
                return stop_to(s);
            }
        };
        let res: StepResult<Run> = self.pause(
            &s.id,
            &[StepStatus::Interrupted],
            from,
            &pd,
            &request,
            at,
            &ev,
            "",
            None,
        );
        match res {
            Ok(run) => Ok(Attached::Done(Box::new(run))),
            Err(st) => stop_to(self.fail_encoding(st)),
        }
    }
}
