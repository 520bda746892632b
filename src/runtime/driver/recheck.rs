//! Recheck (agentrt v0.5; issue 15 item 3): the policy asked again, read-only, about the tool
//! calls it judged, against the database and the consumer's state as they are now, and the
//! answers compared with the recorded ones. Nothing is written: the run, its steps and its
//! approvals are read, the policy is handed what the loop or a resume would hand it (the
//! recorded arguments in policy form, the tool's spec registered now, a view of the steps
//! before the call and every approval), and its answer is only compared.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use super::dispatch::INTERRUPTED_KIND;
use super::{Driver, Inner, RuntimeError};
use crate::runtime::json;
use crate::runtime::policy::{PolicyError, PolicyRequest, RunView};
use crate::runtime::types::{
    Approval, DecisionKind, Outcome, PolicyDecision, Step, StepStatus, ToolRequest, ToolSpec,
};

/// Which recorded evaluations to ask about again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecheckScope {
    /// Only the calls waiting on a person (a step `awaiting_approval`): what a reviewer is
    /// about to decide.
    Awaiting,
    /// Every recorded evaluation of the policy.
    All,
}

/// Which tool spec an approval request's hash is recomputed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecheckSpecs {
    /// The spec of the tool registered with this driver now: a changed description or schema
    /// makes the approval differ (a grant of the recorded one would not run).
    Registered,
    /// The spec recorded in the approval's own request: only the policy's answer (kind,
    /// capability, presentation) is compared. For a checker whose tools are stand-ins built
    /// from configuration rather than from the live servers (`mcp-proxy recheck` without
    /// `--current-tools`).
    Recorded,
}

/// One recorded evaluation asked about again.
#[derive(Debug, Clone, PartialEq)]
pub struct Rechecked {
    /// The step's position in the run.
    pub step_index: i64,
    /// The step's id.
    pub step_id: String,
    /// The tool the step's decision called.
    pub tool: String,
    /// What the policy said then (`step.policy`).
    pub recorded: PolicyDecision,
    /// What it says now, or its error.
    pub now: Result<PolicyDecision, PolicyError>,
    /// Where the answers differ, one phrase each (empty: the same).
    pub differences: Vec<String>,
}

/// A recorded evaluation that could not be asked about again, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRechecked {
    /// The step's position in the run.
    pub step_index: i64,
    /// Why it was skipped: its tool is not registered here, its row or arguments do not
    /// decode, or its pause was the runtime's own rather than the policy's.
    pub why: String,
}

/// What a recheck found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecheckReport {
    /// The run asked about.
    pub run_id: String,
    /// The evaluations asked about again, in step order.
    pub checked: Vec<Rechecked>,
    /// The evaluations in scope that could not be, in step order.
    pub skipped: Vec<NotRechecked>,
}

impl RecheckReport {
    /// True when any answer differs from the recorded one.
    pub fn differs(&self) -> bool {
        self.checked.iter().any(|c| !c.differences.is_empty())
    }
}

/// The top-level members of a JSON object whose canonical values differ, as
/// `name: then -> now` (a whole-value comparison when either side is not an object).
fn object_differences(label: &str, then: &[u8], now: &[u8]) -> Vec<String> {
    let canon = |b: &[u8]| {
        if b.is_empty() {
            b"{}".to_vec()
        } else {
            json::canonical_json(b)
        }
    };
    let (a, b) = (canon(then), canon(now));
    if a == b {
        return Vec::new();
    }
    let obj = |b: &[u8]| serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(b);
    let (Ok(x), Ok(y)) = (obj(&a), obj(&b)) else {
        return vec![format!(
            "{label}: {} -> {}",
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b)
        )];
    };
    let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
    keys.sort();
    keys.dedup();
    let show = |v: Option<&serde_json::Value>| match v {
        Some(v) => v.to_string(),
        None => "(absent)".to_string(),
    };
    keys.into_iter()
        .filter(|k| x.get(*k) != y.get(*k))
        .map(|k| format!("{label}.{k}: {} -> {}", show(x.get(k)), show(y.get(k))))
        .collect()
}

/// Where `now` differs from `then`. For two approval requests the hash the grant would bind
/// is compared too (kind, capability, presentation and the request with today's spec).
fn differences(
    then: &PolicyDecision,
    now: &Result<PolicyDecision, PolicyError>,
    hashes: Option<(String, Result<String, String>)>,
) -> Vec<String> {
    let now = match now {
        Ok(d) => d,
        Err(e) => return vec![format!("the policy now fails: {e}")],
    };
    let mut out = Vec::new();
    if then.outcome != now.outcome || then.reason != now.reason {
        out.push(format!(
            "policy now: {}{} (recorded: {}{})",
            now.outcome,
            if now.reason.is_empty() {
                String::new()
            } else {
                format!(": {}", now.reason)
            },
            then.outcome,
            if then.reason.is_empty() {
                String::new()
            } else {
                format!(": {}", then.reason)
            },
        ));
    }
    if then.kind != now.kind {
        out.push(format!("kind: {} -> {}", then.kind, now.kind));
    }
    out.extend(object_differences(
        "capability",
        &then.capability,
        &now.capability,
    ));
    out.extend(object_differences(
        "presentation",
        &then.presentation,
        &now.presentation,
    ));
    if let Some((then_hash, now_hash)) = hashes {
        match now_hash {
            Ok(h) if h != then_hash => out.push(format!(
                "approval hash: {} -> {} (a grant of the recorded one would not run)",
                short(&then_hash),
                short(&h)
            )),
            Ok(_) => {}
            Err(e) => out.push(format!("approval hash: cannot be computed now: {e}")),
        }
    }
    out
}

/// The hash a grant of `now` would bind for the step's approval `a`.
fn rehash(
    now: &PolicyDecision,
    a: &Approval,
    run_id: &str,
    step: &Step,
    spec: &ToolSpec,
    args: &[u8],
    specs: RecheckSpecs,
) -> Result<String, String> {
    let request = match specs {
        RecheckSpecs::Recorded => a.request_json.as_bytes().to_vec(),
        RecheckSpecs::Registered => ToolRequest {
            run_id: run_id.to_string(),
            step_id: step.id.clone(),
            spec: spec.clone(),
            args: args.to_vec(),
        }
        .to_go_json()
        .map_err(|e| e.to_string())?,
    };
    json::approval_hash(&now.kind, &now.capability, &now.presentation, &request)
        .map_err(|e| e.to_string())
}

fn short(h: &str) -> &str {
    h.get(..16).unwrap_or(h)
}

impl Driver {
    /// Asks this driver's policy again about the run's recorded evaluations (`scope`),
    /// read-only. A step whose tool is not registered here, whose arguments are not usable
    /// JSON, or whose pause was the runtime's own (an interrupted side effect, not a policy
    /// evaluation) is listed as not re-checkable.
    pub fn recheck(
        &self,
        run_id: &str,
        scope: RecheckScope,
    ) -> Result<RecheckReport, RuntimeError> {
        self.recheck_with(run_id, scope, RecheckSpecs::Registered)
    }

    /// [`Driver::recheck`], with the choice of the spec an approval's hash is recomputed with.
    pub fn recheck_with(
        &self,
        run_id: &str,
        scope: RecheckScope,
        specs: RecheckSpecs,
    ) -> Result<RecheckReport, RuntimeError> {
        recheck(&self.inner, run_id, scope, specs)
    }
}

/// The recheck of a driver's or a Gate's policy and tools (neither needs an agent for it).
pub(crate) fn recheck(
    inner: &Inner,
    run_id: &str,
    scope: RecheckScope,
    specs: RecheckSpecs,
) -> Result<RecheckReport, RuntimeError> {
    let store = &inner.store;
    let run = store.get_run(run_id)?;
    let steps: Vec<Arc<Step>> = store
        .list_steps(run_id)?
        .into_iter()
        .map(Arc::new)
        .collect();
    let approvals: Vec<Arc<Approval>> = store
        .list_approvals(run_id)?
        .into_iter()
        .map(Arc::new)
        .collect();
    let mut report = RecheckReport {
        run_id: run.id.clone(),
        ..RecheckReport::default()
    };
    for (i, step) in steps.iter().enumerate() {
        if scope == RecheckScope::Awaiting && step.status != StepStatus::AwaitingApproval {
            continue;
        }
        let Some(recorded) = step
            .policy
            .clone()
            .filter(|p| !p.outcome.as_str().is_empty())
        else {
            continue;
        };
        let skip = |why: String| NotRechecked {
            step_index: step.index,
            why,
        };
        let Some(decision) = step
            .decision
            .as_ref()
            .filter(|d| d.kind == DecisionKind::ToolCall)
        else {
            continue;
        };
        if recorded.kind == INTERRUPTED_KIND && step.policy_id.is_empty() {
            report.skipped.push(skip(
                    "its pause is the runtime's interrupted-side-effect pause, not an evaluation of the policy".into(),
                ));
            continue;
        }
        if !step.decode_error.is_empty() {
            report.skipped.push(skip(format!(
                "the step does not decode: {}",
                step.decode_error
            )));
            continue;
        }
        let Some(reg) = inner.tools.get(&decision.tool) else {
            report.skipped.push(skip(format!(
                "its tool {} is not registered here",
                crate::runtime::json::go_quote(&decision.tool)
            )));
            continue;
        };
        let args: &[u8] = if decision.args.is_empty() {
            b"{}"
        } else {
            &decision.args
        };
        let policy_args = match json::policy_json(args) {
            Ok(a) => a,
            Err(e) => {
                report
                    .skipped
                    .push(skip(format!("its arguments are not usable JSON: {e}")));
                continue;
            }
        };
        let req = PolicyRequest {
            run_id: run.id.clone(),
            step_id: step.id.clone(),
            tool: reg.def.name.clone(),
            description: reg.def.description.clone(),
            side_effect: reg.def.side_effect.clone(),
            args: policy_args,
            input_schema: json::policy_form_unchecked(&reg.def.input_schema),
        };
        let view = RunView {
            run_id: run.id.clone(),
            status: run.status.as_str().to_string(),
            step_count: run.step_count,
            model_calls: run.model_calls,
            input_tokens: run.input_tokens,
            output_tokens: run.output_tokens,
            cached_input_tokens: run.cached_input_tokens,
            estimated_cost_micros: run.estimated_cost_micros,
            active_ms: run.active_ms,
            steps: steps[..i].to_vec(),
            approvals: approvals.clone(),
        };
        let policy = inner.policy.clone();
        let now = match catch_unwind(AssertUnwindSafe(|| policy.evaluate(&req, &view))) {
            Ok(r) => r,
            Err(_) => Err("the policy panicked".into()),
        };
        // Two approval requests: compare the hash a grant binds, too.
        let hashes = match (&now, recorded.outcome == Outcome::RequireApproval) {
            (Ok(n), true) if n.outcome == Outcome::RequireApproval => approvals
                .iter()
                .rev()
                .find(|a| a.step_id == step.id)
                .map(|a| {
                    (
                        a.hash.clone(),
                        rehash(n, a, &run.id, step, &reg.spec, args, specs),
                    )
                }),
            _ => None,
        };
        let differences = differences(&recorded, &now, hashes);
        report.checked.push(Rechecked {
            step_index: step.index,
            step_id: step.id.clone(),
            tool: decision.tool.clone(),
            recorded,
            now,
            differences,
        });
    }
    Ok(report)
}
