//! A step's own transactions: start (claim the index), record the decision, end the step
//! (observation, active time, `step.tool_finished`/`step.failed`), and the decision's checks.

use std::sync::Arc;

use super::ctx::{RunCtx, StepResult, Stop, insert_spec, step_set};
use super::record;
use super::{Inner, RuntimeError};
use crate::runtime::json::{self, JsonError};
use crate::runtime::store::StepUpdate;
use crate::runtime::types::{
    Decision, DecisionKind, Observation, Origin, RunStatus, Step, StepStatus, Timestamp,
};

/// Encoded JSON as the text a column stores: moved when it is UTF-8 (what the encoders
/// write for checked input), else lossily decoded as before.
pub(crate) fn text(v: Vec<u8>) -> String {
    String::from_utf8(v).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

pub(crate) fn json_err(context: &str) -> impl FnOnce(JsonError) -> Stop + '_ {
    move |err| {
        Stop::Err(RuntimeError::Json {
            context: context.to_string(),
            err,
        })
    }
}

impl RunCtx {
    /// Claims the next index, inserts the step `deciding`, `step.started`.
    pub fn start_step(&mut self) -> StepResult<Step> {
        let now = self.inner.now();
        let id = self.inner.id();
        let index = self.run.step_count;
        let owner = self.inner.owner.clone();
        self.write(|tx| {
            tx.start_step(&self.run_id, &id, index, &owner, now)?;
            Ok(())
        })?;
        self.run.step_count = index + 1;
        let step = Step {
            id,
            run_id: self.run_id.clone(),
            index,
            status: StepStatus::Deciding,
            started_at: now,
            ..Step::default()
        };
        self.steps.push(Arc::new(step.clone()));
        Ok(step)
    }

    /// Records the decision verbatim (as [`record::recorded_decision`] makes it usable) with
    /// `step.decided`, and the spec hash of a registered tool.
    pub fn record_decision(&mut self, step_id: &str, d: &Decision) -> StepResult<Decision> {
        let now = self.inner.now();
        let rec = record::recorded_decision(d);
        let dj = rec.to_go_json().map_err(json_err("decision"))?;
        let reg = if rec.kind == DecisionKind::ToolCall {
            self.inner.tools.get(&rec.tool).cloned()
        } else {
            None
        };
        let spec_hash = reg
            .as_ref()
            .map(|r| r.spec_hash.clone())
            .unwrap_or_default();
        let owner = self.inner.owner.clone();
        self.write(|tx| {
            tx.require_status(&self.run_id, &[RunStatus::Running], Some(&owner))?;
            if let Some(r) = &reg {
                insert_spec(tx, &r.spec_hash, &r.spec_json)?;
            }
            let djs = String::from_utf8_lossy(&dj).into_owned();
            step_set(
                tx,
                step_id,
                &[StepStatus::Deciding],
                StepUpdate {
                    decision_json: Some(&djs),
                    spec_hash: Some(&spec_hash),
                    ..StepUpdate::default()
                },
            )?;
            tx.append(&self.run_id, step_id, &now, "step.decided", &dj)?;
            Ok(())
        })?;
        if let Some(s) = self.step_mut(step_id) {
            s.decision = Some(rec.clone());
            s.decision_json = String::from_utf8_lossy(&dj).into_owned();
            s.spec_hash = spec_hash;
        }
        Ok(rec)
    }

    /// Ends a step: status, observation, active time; `step.tool_finished` when it had been
    /// executing, `step.failed` on failure. `extra` runs in the same transaction (the run's
    /// ending, a `step.policy` event before it ...).
    #[allow(clippy::too_many_arguments)]
    pub fn end_step(
        &mut self,
        step_id: &str,
        expected: &[StepStatus],
        status: StepStatus,
        obs: Option<&Observation>,
        detail: &str,
        now: Timestamp,
        before: impl FnOnce(&RunCtx, &mut super::db::DbTx<'_, '_>) -> Result<(), Stop>,
        after: impl FnOnce(&RunCtx, &mut super::db::DbTx<'_, '_>) -> Result<(), Stop>,
    ) -> StepResult<()> {
        let (started, executed, tool) = match self.step(step_id) {
            Some(s) => (
                s.started_at,
                s.status == StepStatus::Executing,
                s.decision
                    .as_ref()
                    .map(|d| d.tool.clone())
                    .unwrap_or_default(),
            ),
            None => (now, false, String::new()),
        };
        let dur = (now.sub(&started) / 1_000_000).max(0);
        let (ojs, oh) = match obs {
            Some(o) => (
                text(o.to_go_json().map_err(json_err("observation"))?),
                o.content_hash.clone(),
            ),
            None => (String::new(), String::new()),
        };
        let owner = self.inner.owner.clone();
        self.write(|tx| {
            before(self, tx)?;
            tx.require_status(&self.run_id, &[RunStatus::Running], Some(&owner))?;
            step_set(
                tx,
                step_id,
                expected,
                StepUpdate {
                    status: Some(status.clone()),
                    finished_at: Some(now),
                    observation_json: Some(&ojs),
                    observation_hash: Some(&oh),
                    ..StepUpdate::default()
                },
            )?;
            tx.add_active_ms(&self.run_id, dur)?;
            if executed {
                let ok = status == StepStatus::Done;
                let empty = Observation::default();
                let p = record::tool_finished(&tool, dur, obs.unwrap_or(&empty), ok, detail);
                tx.append(&self.run_id, step_id, &now, "step.tool_finished", &p)?;
            }
            if status == StepStatus::Failed {
                tx.append(
                    &self.run_id,
                    step_id,
                    &now,
                    "step.failed",
                    &record::step_failed(detail, obs),
                )?;
            }
            after(self, tx)
        })?;
        self.run.active_ms = self.run.active_ms.saturating_add(dur);
        if let Some(s) = self.step_mut(step_id) {
            s.status = status;
            s.finished_at = now;
            s.observation = obs.cloned();
            s.observation_json = ojs;
            s.observation_hash = oh;
        }
        Ok(())
    }

    /// An invalid decision: `invalid_decision` observation, step failed, the loop continues.
    pub fn invalid(
        &mut self,
        step_id: &str,
        expected: &[StepStatus],
        msg: &str,
        suffix: &str,
    ) -> StepResult<()> {
        let obs = record::invalid_decision(msg, suffix);
        let now = self.inner.now();
        self.end_step(
            step_id,
            expected,
            StepStatus::Failed,
            Some(&obs),
            msg,
            now,
            |_, _| Ok(()),
            |_, _| Ok(()),
        )
    }
}

/// The decision's checks (spec 3.5 step 5); the error is the invalid decision's message.
pub(crate) fn validate(inner: &Inner, d: &Decision) -> Result<(), String> {
    if let Origin::Unknown(origin) = &d.origin {
        return Err(format!(
            "unknown decision origin {}",
            crate::runtime::json::go_quote(origin)
        ));
    }
    match &d.kind {
        DecisionKind::Unknown(k) if k.is_empty() => Err("decision has no kind".into()),
        DecisionKind::Unknown(k) if k == "truncated" => Err(
            "decision kind \"truncated\": the model's reply was cut off before it finished".into(),
        ),
        DecisionKind::Unknown(k) if k == "no_tool_call" => {
            Err("decision kind \"no_tool_call\": the model answered without calling a tool".into())
        }
        DecisionKind::Complete => {
            if !d.invalid_result.is_empty() {
                return Err("result is not usable JSON".into());
            }
            if !d.result.is_empty() {
                json::check_json(&d.result).map_err(|e| format!("result: {e}"))?;
            }
            Ok(())
        }
        DecisionKind::Fail => Ok(()),
        DecisionKind::ToolCall => {
            if d.tool.is_empty() {
                return Err("tool call has no tool name".into());
            }
            let Some(reg) = inner.tools.get(&d.tool) else {
                return Err(format!(
                    "unknown tool {}",
                    crate::runtime::json::go_quote(&d.tool)
                ));
            };
            check_args(reg, d)
        }
        DecisionKind::Unknown(other) => Err(format!(
            "unknown decision kind {}",
            crate::runtime::json::go_quote(other)
        )),
    }
}

/// Arguments: usable JSON, through the boundary check, and valid under the compiled schema.
pub(crate) fn check_args(
    reg: &crate::runtime::tools::Registered,
    d: &Decision,
) -> Result<(), String> {
    if !d.invalid_args.is_empty() {
        return Err("arguments are not usable JSON".into());
    }
    let args: &[u8] = if d.args.is_empty() { b"{}" } else { &d.args };
    json::check_json(args).map_err(|e| format!("arguments: {e}"))?;
    reg.schema.check(args)
}
