//! The consumer mapped onto the runtime. Each tool implements [`Tool`]: its `call()` runs the
//! dispatcher stages that need the backend (ownership, replay, state, then execute and record
//! in one backend transaction). The consequence policy implements [`Policy`]: it runs stages 2
//! to 7 read-only and then stage 8, so a call on someone else's order is denied as
//! `not_found` before anyone is asked to approve it, and a held call pauses with a
//! presentation built from the normalised arguments and the computed impact.
//!
//! The runtime itself does stage 1 (an unregistered tool is an invalid decision) and checks
//! the raw arguments against each tool's admission schema (shape only); stage 4's value rules
//! run on the normalised strings in the policy. The session (identity, scopes, exposed tools)
//! is looked up by run id in the backend, never read from arguments.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::consumer::backend::Backend;
use crate::consumer::dispatch::{CallKey, Dispatcher, Preflight, Response};
use crate::consumer::policy::sort_keys;
use crate::consumer::scenarios::{self, Ending, Scenario};
use crate::consumer::tools::{EffectClass, ToolContract, ValidArgs};
use crate::runtime::agent::{self, Agent, AgentError, DecideFuture, StepInput};
use crate::runtime::clock::Clock;
use crate::runtime::driver::{Config, Driver, RuntimeError};
use crate::runtime::operator::{DENIED_KIND, denied_summary};
use crate::runtime::policy::{
    self as rpolicy, Policy, PolicyDecision, PolicyError, PolicyRequest, RunView,
};
use crate::runtime::tools::{
    Registry, RegistryError, SideEffect, Tool, ToolCall, ToolDef, ToolError, ToolFuture, ToolOutput,
};
use crate::runtime::types::{Decision, Observation, Step};

/// How long a consumer tool may run before the runtime records a timeout.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(10);

/// What the model is told when the backend fails (never the internal error).
const UNAVAILABLE: &str = "backend_unavailable: the order service failed; nothing was changed";

/// The policy identity recorded with each decision.
pub const POLICY_ID: &str = "countersign-consumer/consequence-v1";

/// The runtime's side-effect class for a consumer effect class: reads are `read_only`,
/// reversible writes `remote_mutation`, irreversible ones (money or mail leaving) `destructive`.
pub fn side_effect(effect: EffectClass) -> SideEffect {
    match effect {
        EffectClass::Read => SideEffect::ReadOnly,
        EffectClass::ReversibleWrite => SideEffect::RemoteMutation,
        EffectClass::IrreversibleWrite => SideEffect::Destructive,
    }
}

/// One consumer tool as the runtime sees it.
pub struct ConsumerTool {
    contract: ToolContract,
    dispatcher: Arc<Dispatcher>,
}

impl ConsumerTool {
    pub fn new(contract: ToolContract, dispatcher: Arc<Dispatcher>) -> ConsumerTool {
        ConsumerTool {
            contract,
            dispatcher,
        }
    }
}

/// The declaration handed to the runtime for `contract`.
pub fn tool_def(contract: &ToolContract) -> ToolDef {
    ToolDef {
        name: contract.name.to_string(),
        description: contract.description.to_string(),
        input_schema: serde_json::to_vec(&contract.admission_schema()).unwrap_or_default(),
        side_effect: side_effect(contract.effect),
        timeout: TOOL_TIMEOUT,
        terminal: false,
    }
}

impl Tool for ConsumerTool {
    fn def(&self) -> ToolDef {
        tool_def(&self.contract)
    }

    fn call(&self, call: ToolCall) -> ToolFuture {
        let d = self.dispatcher.clone();
        let name = self.contract.name;
        Box::pin(async move { run_tool(&d, name, &call) })
    }
}

/// `code` or `code: detail; detail` (never an argument value).
pub fn refusal_text(r: &Response) -> String {
    match r {
        Response::Refused { code, detail } if !detail.is_empty() => {
            format!("{}: {}", code.as_str(), detail.join("; "))
        }
        other => other.code().to_string(),
    }
}

fn summary(name: &str, args: &ValidArgs, replayed: bool) -> String {
    let base = match args {
        ValidArgs::GetOrder { order_id } => format!("read {order_id}"),
        ValidArgs::IssueRefund {
            order_id,
            amount_cents,
            ..
        } => {
            format!("refunded {amount_cents} cents on {order_id}")
        }
        ValidArgs::UpdateShippingAddress { order_id, .. } => {
            format!("changed the shipping address of {order_id}")
        }
        ValidArgs::SendStatusEmail { order_id } => {
            format!("emailed the status of {order_id} to the address on file")
        }
    };
    if replayed {
        format!("{name}: {base} (replayed: this step's call had already completed)")
    } else {
        format!("{name}: {base}")
    }
}

/// The body of every consumer tool's `call()`: stages 5 to 7 and 9 under the step's call key.
/// Stage 8 is not repeated here: the runtime calls a tool only after the policy allowed it or
/// an operator granted exactly this recorded request.
pub fn run_tool(d: &Dispatcher, name: &str, call: &ToolCall) -> Result<ToolOutput, ToolError> {
    let session = match d.backend().session(&call.run_id) {
        Ok(Some(s)) => s,
        Ok(None) => {
            return Err(ToolError::Failed(format!(
                "no consumer session is recorded for run {}; start runs through the consumer",
                call.run_id
            )));
        }
        Err(_) => return Err(ToolError::Failed(UNAVAILABLE.into())),
    };
    let raw: Value = serde_json::from_slice(&call.args)
        .map_err(|_| ToolError::Failed("invalid_arguments: $: not JSON".into()))?;
    let key = CallKey::for_step(&call.run_id, call.step_index, &call.step_id);
    let p = match d.preflight(&session, name, &raw, Some(&key)) {
        Err(r) => return Err(ToolError::Failed(refusal_text(&r))),
        Ok(Preflight::Replay(result)) => {
            let args = d
                .catalog()
                .get(name)
                .and_then(|c| d.catalog().validate(c, &raw).ok())
                .map(|(_, a)| a);
            let summary = match args {
                Some(a) => summary(name, &a, true),
                None => format!("{name}: replayed the completed call of this step"),
            };
            return output(
                &Response::Ok {
                    result,
                    replayed: true,
                },
                summary,
            );
        }
        Ok(Preflight::Ready(p)) => p,
    };
    match d.execute(&session, Some(&key), &p) {
        r @ Response::Ok { replayed, .. } => {
            let s = summary(name, &p.args, replayed);
            output(&r, s)
        }
        r => Err(ToolError::Failed(refusal_text(&r))),
    }
}

fn output(r: &Response, summary: String) -> Result<ToolOutput, ToolError> {
    let content = serde_json::to_vec(&sort_keys(&r.to_json()))
        .map_err(|e| ToolError::Failed(format!("the result could not be encoded: {e}")))?;
    Ok(ToolOutput { content, summary })
}

/// A registry holding the four consumer tools over `dispatcher`.
pub fn registry(dispatcher: &Arc<Dispatcher>) -> Result<Registry, RegistryError> {
    let mut r = Registry::new();
    for c in dispatcher.catalog().contracts() {
        r.register(Arc::new(ConsumerTool::new(c.clone(), dispatcher.clone())))?;
    }
    Ok(r)
}

/// The consequence policy as the runtime's [`Policy`].
pub struct ConsumerPolicy {
    dispatcher: Arc<Dispatcher>,
}

impl ConsumerPolicy {
    pub fn new(dispatcher: Arc<Dispatcher>) -> ConsumerPolicy {
        ConsumerPolicy { dispatcher }
    }
}

impl Policy for ConsumerPolicy {
    fn evaluate(
        &self,
        req: &PolicyRequest,
        _view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        let d = &self.dispatcher;
        let session = match d.backend().session(&req.run_id) {
            Ok(Some(s)) => s,
            Ok(None) => {
                return Ok(rpolicy::deny(
                    "no_session: this run has no consumer session",
                ));
            }
            Err(_) => return Ok(rpolicy::deny(UNAVAILABLE)),
        };
        let Ok(raw) = serde_json::from_slice::<Value>(&req.args) else {
            return Ok(rpolicy::deny("invalid_arguments: $: not JSON"));
        };
        // The policy is not handed the step index; stage 6 looks the step up by its id.
        let key = CallKey::step_only(&req.step_id);
        let p = match d.preflight(&session, &req.tool, &raw, Some(&key)) {
            Err(r) => return Ok(rpolicy::deny(refusal_text(&r))),
            Ok(Preflight::Replay(_)) => {
                return Ok(rpolicy::allow(
                    "replay: this step's call already completed; its stored result is returned",
                ));
            }
            Ok(Preflight::Ready(p)) => p,
        };
        match d.consequence(&session, &p) {
            Err(r) => Ok(rpolicy::deny(refusal_text(&r))),
            Ok(None) => Ok(rpolicy::allow(format!(
                "automatic: {} with an impact of {} cents is within the limits",
                p.contract.effect.as_str(),
                p.impact_cents
            ))),
            Ok(Some(a)) => {
                let cap =
                    serde_json::to_vec(&sort_keys(&a.capability)).map_err(|e| e.to_string())?;
                let pres =
                    serde_json::to_vec(&sort_keys(&a.presentation)).map_err(|e| e.to_string())?;
                rpolicy::need_approval(&a.kind, &a.reason, &cap, &pres)
            }
        }
    }

    fn id(&self) -> Option<String> {
        Some(POLICY_ID.to_string())
    }
}

/// A scripted agent that proposes a scenario's calls by step index, so a resumed run (a new
/// agent over the same run) continues where the run is instead of starting over.
pub struct ScenarioAgent {
    source: Source,
}

enum Source {
    Fixed(Box<Scenario>),
    /// The scenario named in the run's backend session (one agent for many runs).
    BySession(Arc<Backend>),
}

impl ScenarioAgent {
    /// Always the given scenario.
    pub fn fixed(scenario: Scenario) -> Arc<ScenarioAgent> {
        Arc::new(ScenarioAgent {
            source: Source::Fixed(Box::new(scenario)),
        })
    }

    /// The scenario recorded with each run's session in `backend`.
    pub fn by_session(backend: Arc<Backend>) -> Arc<ScenarioAgent> {
        Arc::new(ScenarioAgent {
            source: Source::BySession(backend),
        })
    }

    fn scenario(&self, run_id: &str) -> Result<Scenario, String> {
        match &self.source {
            Source::Fixed(s) => Ok((**s).clone()),
            Source::BySession(b) => {
                let name = b
                    .session_scenario(run_id)
                    .map_err(|e| e.to_string())?
                    .unwrap_or_default();
                scenarios::named(&name)
                    .ok_or_else(|| format!("run {run_id} has no scripted scenario"))
            }
        }
    }
}

/// The decision a scenario makes at step `index`.
pub fn scripted_decision(scenario: &Scenario, index: i64) -> Decision {
    let i = usize::try_from(index).unwrap_or(usize::MAX);
    match scenario.proposals.get(i) {
        Some(p) => {
            let mut d = agent::tool_call(&p.tool, &p.args.to_string());
            d.reason = p.prose.clone();
            d
        }
        None => match &scenario.ending {
            Ending::Complete(v) => agent::complete(&v.to_string()),
            Ending::Fail(m) => agent::fail(m),
        },
    }
}

/// The reviewer's note when `o` is a denial with feedback (`operator::deny_shown`).
pub fn reviewer_note(o: &Observation) -> Option<String> {
    if o.kind != DENIED_KIND || !o.summary.starts_with(denied_summary("").trim_end()) {
        return None;
    }
    let v: Value = serde_json::from_slice(&o.content).ok()?;
    v.get("by")?;
    v.get("note")?.as_str().map(str::to_string)
}

/// `tool` on `order_id`, from a recorded tool call (the order id as the model wrote it).
fn call_name(d: &Decision) -> String {
    let order = serde_json::from_slice::<Value>(&d.args).ok().and_then(|v| {
        v.get("order_id")
            .and_then(|o| o.as_str())
            .map(str::to_string)
    });
    match order {
        Some(o) => format!("{} on {o}", d.tool),
        None => d.tool.clone(),
    }
}

/// The decision a scenario makes at step `index` after reading the observations of the
/// earlier `steps` (issue 15 item 5): a call a reviewer denied with feedback ends the
/// conversation saying so, with the note; and the scripted success answer is given only when
/// every call succeeded, otherwise the answer names each call that was not done and why
/// (so the agent never claims a refund the backend or the policy refused).
pub fn scripted_decision_seen(scenario: &Scenario, index: i64, steps: &[Arc<Step>]) -> Decision {
    if let Some(last) = steps.last()
        && let Some(note) = last.observation.as_ref().and_then(reviewer_note)
    {
        let what = last.decision.as_ref().map(call_name).unwrap_or_default();
        let answer = format!("Not done: a reviewer declined {what} and said: {note}");
        return agent::complete(&serde_json::json!({ "answer": answer }).to_string());
    }
    let d = scripted_decision(scenario, index);
    if d.kind != "complete" {
        return d;
    }
    let failed: Vec<String> = steps
        .iter()
        .filter_map(|s| {
            let dec = s.decision.as_ref().filter(|d| d.kind == "tool_call")?;
            let o = s.observation.as_ref().filter(|o| o.is_failure())?;
            Some(format!("{} ({})", call_name(dec), o.summary))
        })
        .collect();
    if failed.is_empty() {
        return d;
    }
    let answer = format!("Not everything was done. Not done: {}.", failed.join("; "));
    agent::complete(&serde_json::json!({ "answer": answer }).to_string())
}

impl Agent for ScenarioAgent {
    fn decide(&self, input: StepInput) -> DecideFuture {
        let d = self
            .scenario(&input.run_id)
            .map(|s| scripted_decision_seen(&s, input.index, &input.steps))
            .map_err(AgentError::from);
        Box::pin(async move { d })
    }
}

/// A driver over `store` with the consumer's tools and policy over `dispatcher`.
pub fn driver(
    store: impl Into<crate::runtime::driver::RunDb>,
    dispatcher: &Arc<Dispatcher>,
    agent: Arc<dyn Agent>,
    lease_owner: &str,
    now: Option<Clock>,
) -> Result<Driver, RuntimeError> {
    config(store, dispatcher, agent, lease_owner, now)?.build()
}

/// The configuration [`driver`] builds, for a caller that sets more before building (a
/// read-only recheck on PostgreSQL turns its sequencer off).
pub fn config(
    store: impl Into<crate::runtime::driver::RunDb>,
    dispatcher: &Arc<Dispatcher>,
    agent: Arc<dyn Agent>,
    lease_owner: &str,
    now: Option<Clock>,
) -> Result<Config<Arc<dyn Agent>>, RuntimeError> {
    let mut cfg = Config::new(
        store,
        registry(dispatcher)?,
        Arc::new(ConsumerPolicy::new(dispatcher.clone())),
    )
    .agent(agent)
    .lease_owner(on_this_host(lease_owner));
    cfg.now = now;
    Ok(cfg)
}

/// `base@host`: a lease owner's name with this machine's host name, so that a team reading
/// `leased by countersign-worker@build-7/3f2a…` knows which machine holds a run (found from
/// outside: owners of many hosts looked alike). The host name is kept only when it is a plain
/// name (ASCII letters, digits, `-` and `.`, at most 64 bytes); otherwise `base` alone.
pub fn on_this_host(base: &str) -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into the buffer we own.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let host = buf.split(|&b| b == 0).next().unwrap_or_default();
    let plain = !host.is_empty()
        && host.len() <= 64
        && host
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.');
    match (ok && plain, std::str::from_utf8(host)) {
        (true, Ok(h)) => format!("{base}@{h}"),
        _ => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::on_this_host;

    #[test]
    fn an_owner_name_carries_this_machines_host_name() {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = host.trim();
        let plain = !host.is_empty()
            && host.len() <= 64
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        let want = if plain {
            format!("countersign-worker@{host}")
        } else {
            "countersign-worker".to_string()
        };
        assert_eq!(on_this_host("countersign-worker"), want);
    }
}
