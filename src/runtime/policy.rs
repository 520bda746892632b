//! Policy: what decides whether a recorded tool call runs (spec 3.5 step 7, 4.6, 4.7).
//!
//! A policy is handed the policy form of the arguments and of the schema (spec 4.6) and a
//! [`RunView`], a copy of the run as the driver knows it: nothing it is handed is shared with
//! the driver or with another consumer, so it cannot change what they see.

use std::sync::Arc;

use super::json::{self, gojson};
use super::tools::SideEffect;
use super::types::{Approval, Step};
pub use super::types::{Outcome, PolicyDecision};

/// The outcome of a decision (the field itself; kept for agentrt readers).
pub fn outcome_of(d: &PolicyDecision) -> Outcome {
    d.outcome.clone()
}

fn decision(outcome: Outcome, reason: impl Into<String>) -> PolicyDecision {
    PolicyDecision {
        outcome,
        reason: reason.into(),
        ..PolicyDecision::default()
    }
}

/// An `allow` decision.
pub fn allow(reason: impl Into<String>) -> PolicyDecision {
    decision(Outcome::Allow, reason)
}

/// A `deny` decision: the agent is told and may try something else.
pub fn deny(reason: impl Into<String>) -> PolicyDecision {
    decision(Outcome::Deny, reason)
}

/// An `abort` decision: the run fails (`policy_abort`).
pub fn abort(reason: impl Into<String>) -> PolicyDecision {
    decision(Outcome::Abort, reason)
}

/// What the policy is asked about: the request in policy form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRequest {
    /// The id of the run the call belongs to.
    pub run_id: String,
    /// The id of the step that decided the call.
    pub step_id: String,
    /// The registered tool's name.
    pub tool: String,
    /// The registered tool's description.
    pub description: String,
    /// The side-effect class the tool was registered with.
    pub side_effect: SideEffect,
    /// Arguments in policy form (spec 4.6).
    pub args: Vec<u8>,
    /// The tool's input schema in policy form.
    pub input_schema: Vec<u8>,
}

/// A copy of the run as the policy sees it (what `step.policy`'s `view` summarises).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunView {
    /// The run's id (not part of the `view` object).
    pub run_id: String,
    /// The run's status as stored text: `running` in the loop, `waiting_for_approval` when an
    /// approved call is judged again on resume; a recheck hands the status the run has now.
    pub status: String,
    /// Steps started so far, the one being decided included.
    pub step_count: i64,
    /// Model calls the run has made (spec 15).
    pub model_calls: i64,
    /// Input tokens summed over the run's model calls.
    pub input_tokens: i64,
    /// Output tokens summed over the run's model calls.
    pub output_tokens: i64,
    /// The part of `input_tokens` the provider served from its cache.
    pub cached_input_tokens: i64,
    /// Estimated model cost so far, in millionths of the currency unit.
    pub estimated_cost_micros: i64,
    /// Milliseconds the run has spent stepping.
    pub active_ms: i64,
    /// The steps before the one being decided.
    pub steps: Vec<Arc<Step>>,
    /// The run's approvals, oldest first.
    pub approvals: Vec<Arc<Approval>>,
}

impl RunView {
    /// The `view` object of `step.policy` (struct order).
    pub fn go_json(&self) -> Vec<u8> {
        gojson::Object::new()
            .str("status", &self.status)
            .int("step_count", self.step_count)
            .int("model_calls", self.model_calls)
            .int("input_tokens", self.input_tokens)
            .int("output_tokens", self.output_tokens)
            .int("cached_input_tokens", self.cached_input_tokens)
            .int("estimated_cost_micros", self.estimated_cost_micros)
            .int("active_ms", self.active_ms)
            .int("steps", self.steps.len() as i64)
            .int("approvals", self.approvals.len() as i64)
            .finish()
    }
}

/// Why a policy could not judge a call. Its text is what the run records (`policy: <text>`),
/// so a consumer's own failure is a [`PolicyError::Message`]: `?` on a `String` or `&str`
/// error, or `.into()`, makes one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A `capability` or `presentation` handed to [`need_approval`] is not usable JSON.
    #[error("agentrt: approval {field}: {err}")]
    Approval {
        /// `capability` or `presentation`.
        field: &'static str,
        /// Why it was refused.
        err: json::JsonError,
    },
    /// Arguments or another value would not encode as Go does.
    #[error("{0}")]
    Json(#[from] json::JsonError),
    /// The policy panicked (the driver caught it).
    #[error("the policy panicked")]
    Panicked,
    /// The consumer's own failure, as its message.
    #[error("{0}")]
    Message(String),
}

from_message!(PolicyError);

/// A policy. An `Err` fails the run as `internal_error` with detail `policy: <err>`.
pub trait Policy: Send + Sync + 'static {
    /// Judges one tool call. Called for every `tool_call` decision before it runs, and again
    /// on resume for an approved call (spec 8.2), so an answer may change between the two;
    /// `Driver::recheck` may also call it, read-only, to compare. A panic is caught and
    /// treated as an error.
    fn evaluate(&self, req: &PolicyRequest, view: &RunView) -> Result<PolicyDecision, PolicyError>;
    /// An identity recorded with each decision (`policy_id`): at most 256 bytes, no control
    /// characters. `None` = not identified.
    fn id(&self) -> Option<String> {
        None
    }
}

/// `NeedApproval`: a `require_approval` decision binding what the operator will be shown.
/// `capability`/`presentation` are JSON (empty = `{}`); they must pass the boundary check.
pub fn need_approval(
    kind: &str,
    reason: &str,
    capability: &[u8],
    presentation: &[u8],
) -> Result<PolicyDecision, PolicyError> {
    let norm = |field: &'static str, v: &[u8]| -> Result<Vec<u8>, PolicyError> {
        if v.iter().all(|b| b.is_ascii_whitespace()) {
            return Ok(b"{}".to_vec());
        }
        let refused = |err| PolicyError::Approval { field, err };
        json::check_json(v).map_err(refused)?;
        let mut out = Vec::new();
        gojson::write_raw(&mut out, v).map_err(refused)?;
        Ok(out)
    };
    Ok(PolicyDecision {
        outcome: Outcome::RequireApproval,
        reason: reason.to_string(),
        kind: kind.to_string(),
        capability: norm("capability", capability)?,
        presentation: norm("presentation", presentation)?,
    })
}

/// `SideEffectPolicy`: an outcome per side-effect class; unmapped classes are denied.
#[derive(Debug, Clone)]
pub struct SideEffectPolicy {
    /// The outcome for `read_only` tools.
    pub read_only: Outcome,
    /// The outcome for `local_mutation` tools.
    pub local_mutation: Outcome,
    /// The outcome for `remote_mutation` tools.
    pub remote_mutation: Outcome,
    /// The outcome for `destructive` tools.
    pub destructive: Outcome,
}

/// agentrt's `DefaultPolicy()`: read-only and local mutations allowed, remote mutations need
/// an approval, destructive (and unknown) classes denied.
#[derive(Debug, Clone, Default)]
pub struct DefaultPolicy;

impl Default for SideEffectPolicy {
    fn default() -> Self {
        SideEffectPolicy {
            read_only: Outcome::Allow,
            local_mutation: Outcome::Allow,
            remote_mutation: Outcome::RequireApproval,
            destructive: Outcome::Deny,
        }
    }
}

impl Policy for SideEffectPolicy {
    fn evaluate(
        &self,
        req: &PolicyRequest,
        _view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        let class = req.side_effect.as_str();
        let outcome = match &req.side_effect {
            SideEffect::ReadOnly => &self.read_only,
            SideEffect::LocalMutation => &self.local_mutation,
            SideEffect::RemoteMutation => &self.remote_mutation,
            SideEffect::Destructive => &self.destructive,
            SideEffect::Unknown(_) => {
                return Ok(deny(format!(
                    "no policy for side effect {}",
                    crate::runtime::json::go_quote(class)
                )));
            }
        };
        let reason = format!("side effect {class} is {} by policy", outcome.as_str());
        if *outcome != Outcome::RequireApproval {
            return Ok(decision(outcome.clone(), reason));
        }
        // capability = presentation = {"args": <policy-form args>, "tool": <name>} (Go map).
        let mut o = gojson::Object::new();
        o.raw("args", &req.args)?;
        o.str("tool", &req.tool);
        let cap = o.finish();
        Ok(PolicyDecision {
            outcome: Outcome::RequireApproval,
            reason,
            kind: class.to_string(),
            capability: cap.clone(),
            presentation: cap,
        })
    }
}

impl Policy for DefaultPolicy {
    fn evaluate(&self, req: &PolicyRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        SideEffectPolicy::default().evaluate(req, view)
    }
}

/// A policy made of a closure (tests, examples).
pub struct FnPolicy<F>(pub F);

impl<F> Policy for FnPolicy<F>
where
    F: Fn(&PolicyRequest, &RunView) -> Result<PolicyDecision, PolicyError> + Send + Sync + 'static,
{
    fn evaluate(&self, req: &PolicyRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        (self.0)(req, view)
    }
}

/// Checks a policy identity (spec 14.2): at most 256 bytes, no control character.
pub fn check_policy_id(id: &str) -> Result<(), String> {
    if id.len() > 256 {
        return Err("agentrt: policy id is longer than 256 bytes".into());
    }
    if id.chars().any(char::is_control) {
        return Err("agentrt: policy id holds a control character".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed errors read exactly as the text agentrt records for them.
    #[test]
    fn typed_errors_read_as_the_recorded_text() {
        let e = need_approval("k", "r", b"{", b"{}").unwrap_err();
        assert!(
            matches!(
                e,
                PolicyError::Approval {
                    field: "capability",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string().starts_with("agentrt: approval capability: "),
            "{e}"
        );
        let e = need_approval("k", "r", b"{}", b"[1,]").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("agentrt: approval presentation: "),
            "{e}"
        );
        assert_eq!(PolicyError::Panicked.to_string(), "the policy panicked");
        assert_eq!(
            PolicyError::from("rules file missing").to_string(),
            "rules file missing"
        );
        assert_eq!(
            crate::runtime::agent::AgentError::ScriptExhausted.to_string(),
            "script exhausted"
        );
    }
}
