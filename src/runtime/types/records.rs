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

/// The stored bytes of a TEXT column of a row: the raw bytes when they were not UTF-8 (kept
/// in `raw_invalid`), else the text.
pub fn stored<'a>(raw_invalid: &'a RawInvalid, column: &str, text: &'a str) -> &'a [u8] {
    raw_invalid
        .iter()
        .find(|(c, _)| *c == column)
        .map_or(text.as_bytes(), |(_, b)| b.as_slice())
}

impl Run {
    /// The run's id as stored (exact when it is not UTF-8; `id` is then a lossy copy).
    pub fn id_bytes(&self) -> &[u8] {
        stored(&self.raw_invalid, "id", &self.id)
    }
}

impl Step {
    /// The step's id as stored.
    pub fn id_bytes(&self) -> &[u8] {
        stored(&self.raw_invalid, "id", &self.id)
    }

    /// The step's run id as stored.
    pub fn run_id_bytes(&self) -> &[u8] {
        stored(&self.raw_invalid, "run_id", &self.run_id)
    }
}

impl Approval {
    /// The approval's id as stored.
    pub fn id_bytes(&self) -> &[u8] {
        stored(&self.raw_invalid, "id", &self.id)
    }

    /// The approval's run id as stored.
    pub fn run_id_bytes(&self) -> &[u8] {
        stored(&self.raw_invalid, "run_id", &self.run_id)
    }

    /// The approval's step id as stored.
    pub fn step_id_bytes(&self) -> &[u8] {
        stored(&self.raw_invalid, "step_id", &self.step_id)
    }
}

impl Event {
    /// The event's run id as stored.
    pub fn run_id_bytes(&self) -> &[u8] {
        stored(&self.raw_invalid, "run_id", &self.run_id)
    }

    /// The event's step id as stored.
    pub fn step_id_bytes(&self) -> &[u8] {
        stored(&self.raw_invalid, "step_id", &self.step_id)
    }

    /// The event's type as stored.
    pub fn kind_bytes(&self) -> &[u8] {
        stored(&self.raw_invalid, "type", &self.kind)
    }
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

impl Approval {
    /// The approval as agentrt's CLI `-json` writes it (spec 2): `expires_at` and `decided_at`
    /// omitted when zero, `decided_by`, `note`, `decode_error` omitted when empty; raw JSON
    /// compacted and HTML-escaped as Go does; an undecodable request is Go's zero request.
    pub fn to_go_json(&self) -> Result<Vec<u8>, crate::runtime::json::JsonError> {
        use crate::runtime::json::gojson::Object;
        let raw =
            |o: &mut Object, k: &str, v: &str| -> Result<(), crate::runtime::json::JsonError> {
                if v.is_empty() {
                    o.encoded(k, b"null");
                } else {
                    o.raw(k, v.as_bytes())?;
                }
                Ok(())
            };
        let request = match &self.request {
            Some(r) => r.to_go_json()?,
            None => br#"{"run_id":"","step_id":"","spec":{"name":"","description":"","input_schema":null,"side_effect":"","timeout":0},"args":null}"#.to_vec(),
        };
        let mut o = Object::new();
        o.str("id", &self.id)
            .str("run_id", &self.run_id)
            .str("step_id", &self.step_id)
            .str("kind", &self.kind);
        raw(&mut o, "capability", &self.capability)?;
        raw(&mut o, "presentation", &self.presentation)?;
        o.encoded("request", &request)
            .str("hash", &self.hash)
            .str("status", self.status.as_str())
            .str("created_at", &self.created_at.format_always());
        if !self.expires_at.is_zero() {
            o.str("expires_at", &self.expires_at.format_always());
        }
        if !self.decided_at.is_zero() {
            o.str("decided_at", &self.decided_at.format_always());
        }
        o.str_opt("decided_by", &self.decided_by)
            .str_opt("note", &self.note)
            .str_opt("decode_error", &self.decode_error);
        Ok(o.finish())
    }
}
