//! Row structs of the run database (spec 1.1). A row that does not decode still reads: the
//! field is left empty and `decode_error` names the column (spec 9). Text that is not valid
//! UTF-8 is kept as its raw bytes in `raw_invalid` (the string field then holds a lossy copy).

use super::status::{ApprovalStatus, RunStatus, StepStatus};
use super::time::Timestamp;
use super::values::{Decision, Limits, Observation, PolicyDecision, ToolRequest};

/// Raw bytes of TEXT columns that were not valid UTF-8: (column, bytes as stored).
pub type RawInvalid = Vec<(&'static str, Vec<u8>)>;

/// A `runs` row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    pub id: String,
    pub goal: String,
    pub status: RunStatus,
    pub reason: String,
    pub reason_detail: String,
    pub limits: Limits,
    /// `limits_json` as stored (or as capped by a page read).
    pub limits_json: String,
    pub step_count: i64,
    pub created_at: Timestamp,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// `result_json` as stored; empty = none.
    pub result_json: String,
    pub model_calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_input_tokens: i64,
    pub estimated_cost_micros: i64,
    pub active_ms: i64,
    pub lease_owner: String,
    pub lease_expires_at: Timestamp,
    /// `<column>: <error>` joined by `"; "`; empty when the row decoded.
    pub decode_error: String,
    pub raw_invalid: RawInvalid,
}

/// A `steps` row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    pub id: String,
    pub run_id: String,
    pub index: i64,
    pub status: StepStatus,
    pub decision: Option<Decision>,
    pub decision_json: String,
    pub policy: Option<PolicyDecision>,
    pub policy_json: String,
    pub observation: Option<Observation>,
    pub observation_json: String,
    pub observation_hash: String,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    pub spec_hash: String,
    pub policy_id: String,
    pub decode_error: String,
    pub raw_invalid: RawInvalid,
}

/// An `approvals` row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Approval {
    pub id: String,
    pub run_id: String,
    pub step_id: String,
    pub kind: String,
    /// `capability_json` as stored (kept raw, never decoded).
    pub capability: String,
    /// `presentation_json` as stored (kept raw, never decoded).
    pub presentation: String,
    /// The decoded request; `None` when `request_json` did not decode.
    pub request: Option<ToolRequest>,
    pub request_json: String,
    pub hash: String,
    pub status: ApprovalStatus,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub decided_at: Timestamp,
    pub decided_by: String,
    pub note: String,
    pub decode_error: String,
    pub raw_invalid: RawInvalid,
}

/// An `events` row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Event {
    pub seq: i64,
    pub run_id: String,
    pub step_id: String,
    /// `at` exactly as stored (the chain hashes this text).
    pub at_text: String,
    /// `at` parsed; zero when it did not parse.
    pub at: Timestamp,
    /// `type`.
    pub kind: String,
    /// `payload_json` as stored (or capped by a page read).
    pub payload: String,
    pub hash: String,
    pub decode_error: String,
    pub raw_invalid: RawInvalid,
}

/// A run's lease as stored: unheld = empty owner and zero time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lease {
    pub owner: String,
    pub expires_at: Timestamp,
}

/// Appends `<column>: <err>` to a decode-error list joined by `"; "`.
pub(crate) fn push_decode_error(acc: &mut String, column: &str, err: &dyn std::fmt::Display) {
    if !acc.is_empty() {
        acc.push_str("; ");
    }
    acc.push_str(column);
    acc.push_str(": ");
    acc.push_str(&err.to_string());
}
