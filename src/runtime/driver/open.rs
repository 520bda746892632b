//! The first half of a step (spec 3.5 steps 1-4): read the run, check its state, the lease,
//! damage and limits, start the step, and hand the agent (or a Gate's caller) what it decides
//! on. The driver's loop and the hop that records a tool's outcome both open steps here.

use super::ctx::{RunCtx, StepResult, Stop};
use super::limits::{self, Hit};
use super::record;
use crate::runtime::agent::StepInput;
use crate::runtime::model::ModelCaller;
use crate::runtime::policy::RunView;
use crate::runtime::types::RunStatus;

impl RunCtx {
    /// What the policy sees for the step about to start.
    pub fn view(&self) -> RunView {
        RunView {
            run_id: self.run_id.clone(),
            status: RunStatus::Running.as_str().to_string(),
            step_count: self.run.step_count + 1,
            model_calls: self.run.model_calls,
            input_tokens: self.run.input_tokens,
            output_tokens: self.run.output_tokens,
            cached_input_tokens: self.run.cached_input_tokens,
            estimated_cost_micros: self.run.estimated_cost_micros,
            active_ms: self.run.active_ms,
            steps: self.steps.clone(),
            approvals: self.approvals.clone(),
        }
    }

    /// Ends the run on a limit hit (spec 3.5 step 3).
    fn limit_hit(&mut self, hit: Hit) -> Stop {
        match hit {
            Hit::Limit { reason, detail } => self.finish(RunStatus::Failed, reason, &detail, true),
            Hit::Loop {
                tool,
                args_hash,
                observation_hash,
                repeats,
                detail,
            } => {
                let now = self.inner.now();
                let p = record::loop_detected(&args_hash, &observation_hash, repeats, &tool);
                let res = self.write(|tx| {
                    tx.append(&self.run_id, "", &now, "loop.detected", &p)?;
                    self.finish_in(
                        tx,
                        &[RunStatus::Running],
                        RunStatus::Failed,
                        "loop_detected",
                        &detail,
                        b"",
                        now,
                        false,
                    )
                });
                self.end_result(res)
            }
        }
    }
}

/// A started step: what the agent (or a Gate's caller) decides on.
pub(crate) struct Open {
    pub step: crate::runtime::types::Step,
    pub view: RunView,
    pub model: Option<ModelCaller>,
}

/// The first half of a step: read the run, check damage and limits, start the step.
pub(crate) fn open_step(cx: &mut RunCtx) -> StepResult<Open> {
    cx.reload_run()?;
    if cx.run.status != RunStatus::Running {
        return Err(Stop::Ended(Box::new(cx.run.clone())));
    }
    if cx.run.lease_owner != cx.inner.owner || !cx.lease.ok() {
        cx.lease.mark_lost();
        return Err(cx.lease.lost_error().into());
    }
    if let Some(d) = cx.damaged() {
        return Err(cx.fail_internal(&[RunStatus::Running], &format!("internal: {d}")));
    }
    // The clock is read here only when an elapsed-time limit needs it.
    let now = if cx.limits.max_elapsed_time > 0 {
        cx.inner.now()
    } else {
        cx.run.created_at
    };
    if let Some(hit) = limits::check(&cx.run, &cx.steps, &cx.limits, now) {
        return Err(cx.limit_hit(hit));
    }
    let view = cx.view();
    let step = cx.start_step()?;
    let model = cx.inner.model.as_ref().map(|m| {
        ModelCaller::new(
            m.clone(),
            cx.inner.clone(),
            &cx.run_id,
            &step.id,
            cx.limits.clone(),
            cx.lease.probe(),
        )
    });
    Ok(Open { step, view, model })
}

impl RunCtx {
    /// What an agent is handed for an open step (copies).
    pub(crate) fn input(&self, open: &Open) -> StepInput {
        StepInput {
            run_id: self.run_id.clone(),
            step_id: open.step.id.clone(),
            index: open.step.index,
            goal: self.goal.clone(),
            steps: open.view.steps.clone(),
            tools: self.inner.tools.iter().map(|r| r.spec.clone()).collect(),
            model: open.model.clone(),
        }
    }
}
