//! The proxy's policy (agentrt mcp 2.11): the decider (a rule's outcome, else the class's),
//! the ordinary approval binding server, tool, arguments and fixed values, and the
//! interruption approval of a re-run whose earlier attempt's outcome is unknown.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde::Deserialize;

use crate::mcp::config::Outcome;
use crate::runtime::json::gojson::Object;
use crate::runtime::policy::{
    Policy, PolicyDecision, PolicyError, PolicyRequest, RunView, allow, deny,
};
use crate::runtime::types::{Approval, Step};

/// The approval kind of a re-run.
pub const INTERRUPTED_KIND: &str = "interrupted_side_effect";

/// What the policy knows of one offered tool.
#[derive(Debug, Clone)]
pub struct ToolInfo {
    pub server: String,
    /// The server's own name.
    pub remote: String,
    pub side_effect: String,
    /// The rule's outcome, replacing the class's.
    pub outcome: Option<Outcome>,
    pub fixed: BTreeMap<String, Vec<u8>>,
}

/// An earlier attempt whose outcome is unknown.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Attempt {
    pub run_id: String,
    pub step_id: String,
    pub started_at: String,
    /// `cut_off`, `timed_out` or `no_answer`.
    pub ended: String,
}

impl Attempt {
    /// The attempt step `s` of run `run_id` made (`ended` says how it ended), and the
    /// arguments its decision called the tool with (empty when it has none).
    pub(crate) fn of_step(run_id: &str, s: &Step, ended: String) -> (Attempt, Vec<u8>) {
        let args = s
            .decision
            .as_ref()
            .map(|d| d.args.clone())
            .unwrap_or_default();
        let a = Attempt {
            run_id: run_id.to_string(),
            step_id: s.id.clone(),
            started_at: s.started_at.to_rfc3339(),
            ended,
        };
        (a, args)
    }

    /// The clause saying how it ended.
    pub fn how(&self) -> &'static str {
        how(&self.ended)
    }
}

/// `timed_out`, `no_answer`, `cut_off` as a clause.
pub fn how(ended: &str) -> &'static str {
    match ended {
        "timed_out" => "timed out before the server answered",
        "no_answer" => "failed without an answer from the server",
        _ => "was cut off before its outcome was recorded",
    }
}

/// The proxy's policy.
pub struct ProxyPolicy {
    pub tools: HashMap<String, ToolInfo>,
    pub classes: BTreeMap<String, Outcome>,
    /// Runs whose next proposal is a re-run of this attempt (noted by the proxy just before it
    /// proposes, removed after).
    pub noted: Mutex<HashMap<String, Attempt>>,
    pub id: String,
}

impl ProxyPolicy {
    /// The policy of `cfg` over `tools` (the offered tools by the name the host calls them),
    /// with no re-run noted.
    pub fn new(
        cfg: &crate::mcp::config::ProxyConfig,
        tools: HashMap<String, ToolInfo>,
    ) -> ProxyPolicy {
        ProxyPolicy {
            tools,
            classes: cfg.policy.clone(),
            noted: Mutex::new(HashMap::new()),
            id: policy_id(cfg),
        }
    }

    /// The decider: (outcome, reason).
    pub fn decide(&self, name: &str) -> Option<(Outcome, String)> {
        let t = self.tools.get(name)?;
        if let Some(o) = t.outcome {
            return Some((
                o,
                format!("tool {name} is {} by the operator's rule", o.as_str()),
            ));
        }
        Some(match self.classes.get(&t.side_effect) {
            Some(o) => (
                *o,
                format!("side effect {} is {} by policy", t.side_effect, o.as_str()),
            ),
            None => (
                Outcome::Deny,
                format!(
                    "no policy for side effect {}",
                    crate::mcp::quote(&t.side_effect)
                ),
            ),
        })
    }

    /// A re-run noted by the proxy for this run's next proposal.
    fn noted_rerun(&self, req: &PolicyRequest) -> Option<Attempt> {
        self.noted.lock().ok()?.get(&req.run_id).cloned()
    }
}

/// The step's latest approval, when it is an interruption: the question already asked about
/// this very step, which collection must meet with the same approval (same hash).
fn interruption_of<'a>(req: &PolicyRequest, view: &'a RunView) -> Option<&'a Approval> {
    view.approvals
        .iter()
        .rfind(|a| a.step_id == req.step_id)
        .map(|a| a.as_ref())
        .filter(|a| a.kind == INTERRUPTED_KIND)
}

/// The attempt an interruption approval's capability names.
pub fn attempt_of(a: &Approval) -> Option<Attempt> {
    #[derive(Deserialize)]
    struct Cap {
        interrupted: Option<Attempt>,
    }
    serde_json::from_str::<Cap>(&a.capability).ok()?.interrupted
}

fn fields(o: &mut Object, req: &PolicyRequest, t: &ToolInfo) -> Result<(), String> {
    // A Go map encodes its keys sorted: args, fixed, name, server, side_effect, tool.
    o.raw("args", &req.args).map_err(|e| e.to_string())?;
    if !t.fixed.is_empty() {
        let mut f = Object::new();
        for (k, v) in &t.fixed {
            f.raw(k, v).map_err(|e| e.to_string())?;
        }
        o.raw("fixed", &f.finish()).map_err(|e| e.to_string())?;
    }
    o.str("name", &req.tool);
    Ok(())
}

fn approval(
    req: &PolicyRequest,
    t: &ToolInfo,
    reason: &str,
    rerun: Option<&Attempt>,
) -> Result<PolicyDecision, PolicyError> {
    let interrupted = rerun.map(|a| {
        Object::new()
            .str("ended", &a.ended)
            .str("run_id", &a.run_id)
            .str("started_at", &a.started_at)
            .str("step_id", &a.step_id)
            .finish()
    });
    let mut cap = Object::new();
    fields(&mut cap, req, t)?;
    if let Some(i) = &interrupted {
        cap.raw("interrupted", i).map_err(|e| e.to_string())?;
    }
    cap.str("server", &t.server)
        .str("side_effect", &t.side_effect)
        .str("tool", &t.remote);
    let mut p = Object::new();
    fields(&mut p, req, t)?;
    if let Some(i) = &interrupted {
        p.raw("interrupted", i).map_err(|e| e.to_string())?;
    }
    let question = match rerun {
        Some(a) => {
            p.str(
                "notice",
                &format!(
                    "An earlier attempt of this call (run {}, started {}) {}: it may have taken effect. Approving runs it again with these arguments when the model repeats the call; rejecting ends this request, and an identical call later asks an operator again whatever the policy says.",
                    a.run_id, a.started_at, a.how()
                ),
            );
            format!(
                "Run {} on server {} again with these arguments?",
                t.remote, t.server
            )
        }
        None => format!(
            "May the model call {} on server {} with these arguments?",
            t.remote, t.server
        ),
    };
    p.str("question", &question)
        .str("reason", reason)
        .str("server", &t.server)
        .str("side_effect", &t.side_effect)
        .str("tool", &t.remote);
    let kind = if rerun.is_some() {
        INTERRUPTED_KIND
    } else {
        t.side_effect.as_str()
    };
    crate::runtime::policy::need_approval(kind, reason, &cap.finish(), &p.finish())
}

impl Policy for ProxyPolicy {
    fn evaluate(&self, req: &PolicyRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        let Some(t) = self.tools.get(&req.tool) else {
            return Ok(deny(format!(
                "tool {} is not offered",
                crate::mcp::quote(&req.tool)
            )));
        };
        let (outcome, reason) = self
            .decide(&req.tool)
            .unwrap_or((Outcome::Deny, String::new()));
        if outcome == Outcome::Deny {
            return Ok(deny(reason));
        }
        let why = "interrupted while executing; outcome unknown";
        if let Some(a) = interruption_of(req, view) {
            return crate::runtime::policy::need_approval(
                INTERRUPTED_KIND,
                why,
                a.capability.as_bytes(),
                a.presentation.as_bytes(),
            );
        }
        if let Some(a) = self.noted_rerun(req) {
            return approval(req, t, why, Some(&a));
        }
        match outcome {
            Outcome::Allow => Ok(allow(reason)),
            _ => approval(req, t, &reason, None),
        }
    }

    fn id(&self) -> Option<String> {
        (!self.id.is_empty()).then(|| self.id.clone())
    }
}

/// agentrt's PolicyID: `agentrt-proxy/sha256:` + hex SHA-256 of the canonical JSON of the
/// merged policy and each server's rules (side effect, outcome, fixed, rename).
pub fn policy_id(cfg: &crate::mcp::config::ProxyConfig) -> String {
    use sha2::{Digest, Sha256};
    let mut policy = Object::new();
    for (k, v) in &cfg.policy {
        policy.str(k, v.as_str());
    }
    let mut servers: Vec<&crate::mcp::config::ServerConfig> = cfg.servers.iter().collect();
    servers.sort_by(|a, b| a.name.cmp(&b.name));
    let mut list = b"[".to_vec();
    for (i, s) in servers.iter().enumerate() {
        let mut rules = Object::new();
        for (tool, r) in &s.rules {
            let mut o = Object::new();
            if !r.fixed.is_empty() {
                let mut f = Object::new();
                for (k, v) in &r.fixed {
                    if f.raw(k, v).is_err() {
                        return String::new();
                    }
                }
                let _ = o.raw("fixed", &f.finish());
            }
            if let Some(out) = r.outcome {
                o.str("outcome", out.as_str());
            }
            if let Some(n) = &r.rename {
                o.str("rename", n);
            }
            o.str("side_effect", &r.side_effect);
            let _ = rules.raw(tool, &o.finish());
        }
        let mut so = Object::new();
        so.str("name", &s.name);
        let _ = so.raw("rules", &rules.finish());
        if i > 0 {
            list.push(b',');
        }
        list.extend_from_slice(&so.finish());
    }
    list.push(b']');
    let mut top = Object::new();
    let _ = top.raw("policy", &policy.finish());
    let _ = top.raw("servers", &list);
    match crate::runtime::json::checked_canonical_json(&top.finish()) {
        Ok(c) => format!("agentrt-proxy/sha256:{}", hex::encode(Sha256::digest(&c))),
        Err(_) => String::new(),
    }
}

/// The reconcile hook (agentrt mcp 2.11): a call cut off while executing waits on the
/// interruption approval when its tool changes something; a read carries on (the proxy then
/// ends the run and the request runs fresh); a tool no longer offered pauses bare (the runtime
/// then fails the run as a conflict).
pub struct ProxyReconcile(pub std::sync::Arc<ProxyPolicy>);

impl crate::runtime::driver::Reconcile for ProxyReconcile {
    fn reconcile(
        &self,
        run: &crate::runtime::types::Run,
        steps: &[crate::runtime::types::Step],
        _approvals: &[Approval],
    ) -> Result<crate::runtime::driver::Reconciliation, crate::runtime::driver::ReconcileError>
    {
        use crate::runtime::driver::Reconciliation;
        let cut = steps.iter().rev().find(|s| {
            s.status == crate::runtime::types::StepStatus::Interrupted
                && s.observation
                    .as_ref()
                    .is_some_and(|o| o.content == br#"{"previous_status":"executing"}"#)
        });
        let Some((s, d)) = cut.and_then(|s| s.decision.as_ref().map(|d| (s, d))) else {
            return Ok(Reconciliation::Continue);
        };
        let Some(t) = self.0.tools.get(&d.tool) else {
            return Ok(Reconciliation::Waiting {
                pause: None,
                detail: "the tool is no longer offered".into(),
            });
        };
        if t.side_effect == "read_only" {
            return Ok(Reconciliation::Continue);
        }
        let req = PolicyRequest {
            run_id: run.id.clone(),
            step_id: s.id.clone(),
            tool: d.tool.clone(),
            description: String::new(),
            side_effect: crate::runtime::tools::SideEffect::parse(&t.side_effect),
            args: crate::runtime::json::policy_json(&d.args).unwrap_or_else(|_| d.args.clone()),
            input_schema: Vec::new(),
        };
        let attempt = Attempt {
            run_id: run.id.clone(),
            step_id: s.id.clone(),
            started_at: s.started_at.to_rfc3339(),
            ended: "cut_off".into(),
        };
        let why = "interrupted while executing; outcome unknown";
        Ok(Reconciliation::Waiting {
            pause: Some(approval(&req, t, why, Some(&attempt))?),
            detail: why.into(),
        })
    }
}
