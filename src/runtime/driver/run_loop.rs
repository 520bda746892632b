//! The loop (spec 3.5): read the run, check damage and limits, start a step, ask the agent,
//! record, validate, dispatch, execute; until the run ends or pauses.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use super::RuntimeError;
use super::ctx::{RunCtx, StepResult, Stop};
use super::dispatch::Dispatched;
use super::execute::execute;
use super::lease::release;
use super::open::{Open, open_step};
use super::step::validate;
use crate::runtime::agent::{Agent, AgentError, StepInput};
use crate::runtime::types::{Decision, DecisionKind, Run, RunStatus, StepStatus};

pub(crate) enum Next {
    Continue,
    Execute(super::dispatch::Allowed),
}

/// Drives the run until it ends, pauses, or the loop must stop.
pub(crate) async fn drive(cx: RunCtx, agent: Arc<dyn Agent>) -> Result<Run, RuntimeError> {
    drive_from(cx, agent, None).await
}

/// Drives the run, first executing an already-allowed request (a resumed grant).
pub(crate) async fn drive_from(
    cx: RunCtx,
    agent: Arc<dyn Agent>,
    first: Option<super::dispatch::Allowed>,
) -> Result<Run, RuntimeError> {
    let mut cx = cx;
    let mut first = first;
    // A step opened in the store hop that ended the one before.
    let mut ahead = None;
    let res = loop {
        let next = match first.take() {
            Some(a) => Ok(Next::Execute(a)),
            None => {
                let (c, next, opened) = step_once(cx, &agent, ahead.take()).await?;
                cx = c;
                ahead = opened;
                next
            }
        };
        match next {
            Ok(Next::Continue) => continue,
            Ok(Next::Execute(a)) => {
                let (back, r) = execute(cx, a, true).await;
                match back {
                    Some(c) => cx = c,
                    None => {
                        return match r {
                            Err(Stop::Err(e)) => Err(e),
                            _ => Err(RuntimeError::Config("the tool task was lost".into())),
                        };
                    }
                }
                match r {
                    Ok(opened) => {
                        ahead = opened;
                        continue;
                    }
                    Err(s) => break s,
                }
            }
            Err(s) => break s,
        }
    };
    let res = super::blocking(move || {
        let res = cx.fail_encoding(res);
        cx.lease.stop();
        // A run that ended or paused gives its lease back. A loop stopped by an error (a
        // store that failed mid-step) keeps it until it runs out: the run is left RUNNING,
        // and a worker takes it over once the lease has run out (decision 0109). Given back,
        // it was a RUNNING run with no holder, which nothing would ever come back for (found
        // from outside). The same owner may resume it at once.
        if matches!(res, Stop::Ended(_)) {
            release(&cx.inner.store, &cx.run_id, &cx.inner.owner);
        }
        res
    })
    .await?;
    match res {
        Stop::Ended(run) => Ok(*run),
        Stop::Err(e) => Err(e),
    }
}

/// The second half: record what was decided, validate, settle or dispatch.
pub(crate) fn decided(
    cx: &mut RunCtx,
    open: Open,
    decided: Result<crate::runtime::types::Decision, AgentError>,
) -> StepResult<Next> {
    let Open { step, view, model } = open;
    let d = match decided {
        Ok(d) => d,
        Err(e) => {
            let (reason, limit) = match model.as_ref().and_then(|m| m.failure_reason()) {
                Some(r) => (r, true),
                None => ("agent_error".to_string(), false),
            };
            return Err(cx.agent_failed(&step.id, &reason, &e.to_string(), limit));
        }
    };
    let rec = cx.record_decision(&step.id, &d)?;
    if let Err(msg) = validate(&cx.inner, &rec) {
        cx.invalid(&step.id, &[StepStatus::Deciding], &msg, "")?;
        return Ok(Next::Continue);
    }
    match rec.kind {
        DecisionKind::Complete | DecisionKind::Fail => {
            Err(cx.settle(&step.id, &rec.kind, &rec.message, &rec.result))
        }
        _ => {
            let Some(reg) = cx.inner.tools.get(&rec.tool).cloned() else {
                return Err(
                    cx.fail_internal(&[RunStatus::Running], "internal: validated tool vanished")
                );
            };
            match cx.dispatch(
                &step.id,
                step.index,
                reg,
                &rec.args,
                view,
                StepStatus::Deciding,
                None,
            )? {
                Dispatched::Execute(a) => Ok(Next::Execute(a)),
                Dispatched::Continue => Ok(Next::Continue),
            }
        }
    }
}

/// One step of the driver's loop: the store work before and after the agent's decision runs
/// off the async worker ([`super::blocking`]), in as few hops as the loop allows: an allowed
/// request's start is written in the same hop as the decision, and a step that ends there (an
/// invalid or denied decision) is followed by the next step's opening in that hop too (then
/// returned, as `ahead` is taken, in place of a hop of its own), as nothing happens between
/// them in the driver's loop.
async fn step_once(
    cx: RunCtx,
    agent: &Arc<dyn Agent>,
    ahead: Option<Open>,
) -> Result<(RunCtx, StepResult<Next>, Option<Open>), RuntimeError> {
    let (mut cx, open) = match ahead {
        Some(open) => (cx, Ok(open)),
        None => {
            let mut cx = cx;
            super::blocking(move || {
                let open = open_step(&mut cx);
                (cx, open)
            })
            .await?
        }
    };
    let open = match open {
        Ok(o) => o,
        Err(s) => return Ok((cx, Err(s), None)),
    };
    let input = cx.input(&open);
    let d = decide_caught(agent, input).await;
    super::blocking(move || {
        let mut next = decided(&mut cx, open, d);
        if let Ok(Next::Execute(a)) = &mut next
            && let Err(s) = cx.start_tool(a)
        {
            next = Err(s);
        }
        let mut ahead = None;
        if let Ok(Next::Continue) = next {
            match open_step(&mut cx) {
                Ok(open) => ahead = Some(open),
                Err(s) => next = Err(s),
            }
        }
        (cx, next, ahead)
    })
    .await
}

/// Asks the agent. A panic in `decide` or in the future it returns is an agent error
/// (`panic: <message>`), which fails the run as an `Err` does, as a tool's or a policy's panic
/// is caught: it never unwinds through the driver with the run left RUNNING.
async fn decide_caught(agent: &Arc<dyn Agent>, input: StepInput) -> Result<Decision, AgentError> {
    let panicked = |p: String| AgentError::Message(format!("panic: {p}"));
    let work = match catch_unwind(AssertUnwindSafe(|| agent.decide(input))) {
        Ok(work) => work,
        Err(p) => return Err(panicked(super::execute::panic_text(p.as_ref()))),
    };
    super::execute::Caught::new(work)
        .await
        .unwrap_or_else(|p| Err(panicked(p)))
}

impl RunCtx {
    /// `complete`/`fail`: step done and the run's ending in one transaction.
    fn settle(&mut self, step_id: &str, kind: &DecisionKind, message: &str, result: &[u8]) -> Stop {
        let step_at = self.inner.now();
        let now = self.inner.now();
        let complete = *kind == DecisionKind::Complete;
        let (status, reason, detail) = if complete {
            (RunStatus::Completed, "goal_completed", "")
        } else {
            (RunStatus::Failed, "goal_failed", message)
        };
        let result = if complete {
            result.to_vec()
        } else {
            Vec::new()
        };
        let res = self.end_step(
            step_id,
            &[StepStatus::Deciding],
            StepStatus::Done,
            None,
            "",
            step_at,
            |_, _| Ok(()),
            |cx, tx| {
                cx.finish_in(
                    tx,
                    &[RunStatus::Running],
                    status,
                    reason,
                    detail,
                    &result,
                    now,
                    false,
                )
            },
        );
        self.end_result(res)
    }

    /// The agent failed: the step fails and so does the run.
    pub(crate) fn agent_failed(
        &mut self,
        step_id: &str,
        reason: &str,
        err: &str,
        limit: bool,
    ) -> Stop {
        let now = self.inner.now();
        let detail = format!("agent error: {err}");
        let res = self.end_step(
            step_id,
            &[StepStatus::Deciding],
            StepStatus::Failed,
            None,
            &detail,
            now,
            |_, _| Ok(()),
            |cx, tx| {
                cx.finish_in(
                    tx,
                    &[RunStatus::Running],
                    RunStatus::Failed,
                    reason,
                    err,
                    b"",
                    now,
                    limit,
                )
            },
        );
        self.end_result(res)
    }
}
