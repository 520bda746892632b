//! The core JSON shapes of spec section 2, encoded as Go's `encoding/json` writes them (struct
//! field order, `omitempty`, raw JSON compacted and HTML-escaped) and decoded from stored JSON.
//! Raw JSON fields are kept as the stored bytes (empty = absent) so nothing is re-encoded
//! differently from what was written.

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::status::{DecisionKind, Origin, Outcome};
use crate::runtime::json::{JsonError, canonical_json, gojson::Object, sha256_hex};

/// Deserializes a present raw field, keeping `null` as the bytes `null` (as Go's
/// `json.RawMessage` does) instead of turning it into "absent".
fn raw_present<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let v: Box<RawValue> = Box::deserialize(d)?;
    Ok(v.get().as_bytes().to_vec())
}

/// Per-run limits (spec 2, 14.1). Durations are integer nanoseconds; zero means off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Most steps the run may start; reaching it ends the run.
    pub max_steps: i64,
    /// Most failed observations in a row before the run fails.
    pub max_consecutive_tool_failures: i64,
    /// How many identical tool calls in a row count as a loop.
    pub loop_threshold: i64,
    /// Most model calls over the run.
    pub max_model_calls: i64,
    /// Output-token cap passed to each model call.
    pub max_output_tokens_per_call: i64,
    /// Most input plus output tokens over the run.
    pub max_total_tokens: i64,
    /// Most estimated cost over the run, in millionths.
    pub max_estimated_cost_micros: i64,
    /// ns
    pub max_active_time: i64,
    /// ns
    pub max_elapsed_time: i64,
    /// ns
    pub approval_ttl: i64,
    /// ns
    pub grant_ttl: i64,
}

impl Limits {
    /// Go JSON (`limits_json`, `run.created`'s `limits`).
    pub fn to_go_json(&self) -> Vec<u8> {
        Object::new()
            .int("max_steps", self.max_steps)
            .int(
                "max_consecutive_tool_failures",
                self.max_consecutive_tool_failures,
            )
            .int("loop_threshold", self.loop_threshold)
            .int_opt("max_model_calls", self.max_model_calls)
            .int_opt(
                "max_output_tokens_per_call",
                self.max_output_tokens_per_call,
            )
            .int_opt("max_total_tokens", self.max_total_tokens)
            .int_opt("max_estimated_cost_micros", self.max_estimated_cost_micros)
            .int_opt("max_active_time", self.max_active_time)
            .int_opt("max_elapsed_time", self.max_elapsed_time)
            .int_opt("approval_ttl", self.approval_ttl)
            .int_opt("grant_ttl", self.grant_ttl)
            .finish()
    }

    /// Decodes stored `limits_json`.
    /// Decodes stored JSON into a `Limits`; unknown keys are ignored, missing ones are empty.
    pub fn from_json(raw: &[u8]) -> Result<Limits, serde_json::Error> {
        serde_json::from_slice(raw)
    }
}

/// What the agent decided (spec 2). Raw fields hold JSON bytes; empty = absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Decision {
    /// `tool_call`, `complete` or `fail` (other kinds are invalid, and kept as written).
    pub kind: DecisionKind,
    /// For a tool call, the name of the tool to call.
    pub tool: String,
    /// For a tool call, its arguments as raw JSON bytes; empty when absent.
    #[serde(deserialize_with = "raw_present")]
    pub args: Vec<u8>,
    /// The agent's stated reason for the decision; may be empty.
    pub reason: String,
    /// For `complete`, the run's result as raw JSON bytes; empty when absent.
    #[serde(deserialize_with = "raw_present")]
    pub result: Vec<u8>,
    /// For `fail`, the agent's message; may be empty.
    pub message: String,
    /// Who made the decision: `model`, `plan` or `operator`; `Absent` when not stored.
    pub origin: Origin,
    /// Why the arguments were not valid JSON, when they were not.
    pub invalid_args: String,
    /// Why the result was not valid JSON, when it was not.
    pub invalid_result: String,
    /// Whether the raw bytes came base64-encoded and did not decode.
    pub invalid_base64: bool,
}

impl Decision {
    /// Go JSON in declared field order with `omitempty`.
    pub fn to_go_json(&self) -> Result<Vec<u8>, JsonError> {
        let mut o = Object::new();
        o.str("kind", self.kind.as_str())
            .str_opt("tool", &self.tool);
        o.raw_opt("args", &self.args)?;
        o.str_opt("reason", &self.reason);
        o.raw_opt("result", &self.result)?;
        o.str_opt("message", &self.message)
            .str_opt("origin", self.origin.as_str())
            .str_opt("invalid_args", &self.invalid_args)
            .str_opt("invalid_result", &self.invalid_result);
        if self.invalid_base64 {
            o.bool("invalid_base64", true);
        }
        Ok(o.finish())
    }

    /// Decodes stored JSON into a `Decision`; unknown keys are ignored, missing ones are empty.
    pub fn from_json(raw: &[u8]) -> Result<Decision, serde_json::Error> {
        serde_json::from_slice(raw)
    }
}

/// A policy's answer (spec 2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PolicyDecision {
    /// `allow`, `require_approval`, `deny` or `abort` (anything else kept as written).
    pub outcome: Outcome,
    /// The policy's reason, shown to the reviewer and recorded; may be empty.
    pub reason: String,
    /// For `require_approval`, the approval's kind.
    pub kind: String,
    /// The capability the approval grants, as raw JSON; empty when absent.
    #[serde(deserialize_with = "raw_present")]
    pub capability: Vec<u8>,
    /// What the reviewer is shown, as raw JSON; empty when absent.
    #[serde(deserialize_with = "raw_present")]
    pub presentation: Vec<u8>,
}

impl PolicyDecision {
    /// Go JSON in declared field order with `omitempty`.
    pub fn to_go_json(&self) -> Result<Vec<u8>, JsonError> {
        let mut o = Object::new();
        self.go_fields(&mut o)?;
        Ok(o.finish())
    }

    /// Writes the decision's fields into `o` as [`PolicyDecision::to_go_json`] does (the
    /// start of a `step.policy` event, which adds its own after them).
    pub(crate) fn go_fields(&self, o: &mut Object) -> Result<(), JsonError> {
        o.str("outcome", self.outcome.as_str())
            .str_opt("reason", &self.reason)
            .str_opt("kind", &self.kind);
        o.raw_opt("capability", &self.capability)?;
        o.raw_opt("presentation", &self.presentation)?;
        Ok(())
    }

    /// Decodes stored JSON into a `PolicyDecision`; unknown keys are ignored, missing ones are empty.
    pub fn from_json(raw: &[u8]) -> Result<PolicyDecision, serde_json::Error> {
        serde_json::from_slice(raw)
    }
}

/// What a step observed (spec 2). Every kind but `tool_result` counts as a failure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Observation {
    /// `tool_result`, `tool_error`, `policy_denied`, `invalid_decision` or `interrupted`.
    pub kind: String,
    /// What the tool returned, as raw JSON bytes; empty when absent.
    #[serde(deserialize_with = "raw_present")]
    pub content: Vec<u8>,
    /// A short human summary of the content; may be empty.
    pub summary: String,
    /// Content hash of `content` (spec 5.3); empty when absent.
    pub content_hash: String,
}

impl Observation {
    /// Go JSON in declared field order with `omitempty`.
    pub fn to_go_json(&self) -> Result<Vec<u8>, JsonError> {
        let mut o = Object::new();
        o.str("kind", &self.kind);
        o.raw_opt("content", &self.content)?;
        o.str_opt("summary", &self.summary)
            .str_opt("content_hash", &self.content_hash);
        Ok(o.finish())
    }

    /// Decodes stored JSON into a `Observation`; unknown keys are ignored, missing ones are empty.
    pub fn from_json(raw: &[u8]) -> Result<Observation, serde_json::Error> {
        serde_json::from_slice(raw)
    }

    /// True for every kind but `tool_result`.
    pub fn is_failure(&self) -> bool {
        self.kind != "tool_result"
    }
}

/// A registered tool's description (spec 2). `timeout_ns` is the JSON key `timeout`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ToolSpec {
    /// The tool's name, as the agent calls it.
    pub name: String,
    /// What the tool does, as shown to the model.
    pub description: String,
    /// JSON Schema for the arguments, as raw JSON bytes.
    #[serde(deserialize_with = "raw_present")]
    pub input_schema: Vec<u8>,
    /// `read_only`, `local_mutation`, `remote_mutation` or `destructive`.
    pub side_effect: String,
    /// How long one call may take, in nanoseconds (must be > 0).
    #[serde(rename = "timeout")]
    pub timeout_ns: i64,
    /// Whether a successful call ends the run.
    pub terminal: bool,
}

impl ToolSpec {
    /// Go JSON: name, description, input_schema (raw, required), side_effect, timeout,
    /// terminal (omitempty).
    pub fn to_go_json(&self) -> Result<Vec<u8>, JsonError> {
        let mut o = Object::new();
        o.str("name", &self.name)
            .str("description", &self.description);
        if self.input_schema.is_empty() {
            o.encoded("input_schema", b"null");
        } else {
            o.raw("input_schema", &self.input_schema)?;
        }
        o.str("side_effect", &self.side_effect)
            .int("timeout", self.timeout_ns);
        if self.terminal {
            o.bool("terminal", true);
        }
        Ok(o.finish())
    }

    /// `tool_specs.spec_json`: canonical JSON of the Go JSON.
    pub fn spec_json(&self) -> Result<Vec<u8>, JsonError> {
        Ok(canonical_json(&self.to_go_json()?))
    }

    /// `tool_specs.hash`: hex SHA-256 of [`ToolSpec::spec_json`].
    pub fn spec_hash(&self) -> Result<String, JsonError> {
        Ok(sha256_hex(&self.spec_json()?))
    }

    /// Decodes stored JSON into a `ToolSpec`; unknown keys are ignored, missing ones are empty.
    pub fn from_json(raw: &[u8]) -> Result<ToolSpec, serde_json::Error> {
        serde_json::from_slice(raw)
    }
}

/// The request an approval binds (spec 2): `args` is `{}` when absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ToolRequest {
    /// The run that asks to call the tool.
    pub run_id: String,
    /// The step that asks.
    pub step_id: String,
    /// The spec of the tool to call.
    pub spec: ToolSpec,
    /// The arguments as raw JSON bytes (`{}` when absent).
    #[serde(deserialize_with = "raw_present")]
    pub args: Vec<u8>,
}

impl ToolRequest {
    /// Go JSON (`approvals.request_json`).
    pub fn to_go_json(&self) -> Result<Vec<u8>, JsonError> {
        let spec = self.spec.to_go_json()?;
        let mut o = Object::new();
        o.str("run_id", &self.run_id)
            .str("step_id", &self.step_id)
            .encoded("spec", &spec);
        if self.args.is_empty() {
            o.encoded("args", b"{}");
        } else {
            o.raw("args", &self.args)?;
        }
        Ok(o.finish())
    }

    /// Decodes stored JSON into a `ToolRequest`; unknown keys are ignored, missing ones are empty.
    pub fn from_json(raw: &[u8]) -> Result<ToolRequest, serde_json::Error> {
        serde_json::from_slice(raw)
    }
}
