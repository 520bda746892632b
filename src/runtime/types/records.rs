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
    /// The run's id (`runs.id`), unique in the database.
    pub id: String,
    /// The goal the run was started with, as the caller wrote it.
    pub goal: String,
    /// Where the run is in the state machine (spec 3.1).
    pub status: RunStatus,
    /// Why a finished run ended (spec 3.3); empty while it is not finished.
    pub reason: String,
    /// Free text explaining `reason` (an error message, the limit hit); may be empty.
    pub reason_detail: String,
    /// The run's limits decoded from `limits_json` (spec 14.1); zero limits are off.
    pub limits: Limits,
    /// `limits_json` as stored (or as capped by a page read).
    pub limits_json: String,
    /// How many steps the run has started (the next step's index).
    pub step_count: i64,
    /// When the run was created.
    pub created_at: Timestamp,
    /// When the run first started stepping; zero when it never did.
    pub started_at: Timestamp,
    /// When the run reached a terminal status; zero while it has not.
    pub finished_at: Timestamp,
    /// `result_json` as stored; empty = none.
    pub result_json: String,
    /// How many model calls the run has made (spec 15).
    pub model_calls: i64,
    /// Input tokens summed over the run's model calls.
    pub input_tokens: i64,
    /// Output tokens summed over the run's model calls.
    pub output_tokens: i64,
    /// The part of `input_tokens` the provider served from its cache.
    pub cached_input_tokens: i64,
    /// Estimated model cost in millionths of the currency unit.
    pub estimated_cost_micros: i64,
    /// Milliseconds the run spent stepping, not counting time paused for approval.
    pub active_ms: i64,
    /// Who holds the run's lease (spec 7); empty when nobody does.
    pub lease_owner: String,
    /// When the lease lapses; zero when it is not held.
    pub lease_expires_at: Timestamp,
    /// `<column>: <error>` joined by `"; "`; empty when the row decoded.
    pub decode_error: String,
    /// Stored bytes of the TEXT columns that were not valid UTF-8.
    pub raw_invalid: RawInvalid,
}

/// A `steps` row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// The step's id (`steps.id`).
    pub id: String,
    /// The id of the run the step belongs to.
    pub run_id: String,
    /// The step's position in its run (`idx`), from 0; unique per run.
    pub index: i64,
    /// Where the step is in its state machine (spec 3.2).
    pub status: StepStatus,
    /// What the agent decided to do, decoded; `None` when not yet decided or undecodable.
    pub decision: Option<Decision>,
    /// `decision_json` as stored; empty before the agent decided.
    pub decision_json: String,
    /// The policy's verdict on the decision, decoded; `None` when absent or undecodable.
    pub policy: Option<PolicyDecision>,
    /// `policy_json` as stored (the policy form, spec 4.6); empty before the policy ran.
    pub policy_json: String,
    /// What the tool call returned, decoded; `None` when absent or undecodable.
    pub observation: Option<Observation>,
    /// `observation_json` as stored; empty until the tool ran.
    pub observation_json: String,
    /// Content hash of the observation (spec 5.3); empty until the tool ran.
    pub observation_hash: String,
    /// When the step started.
    pub started_at: Timestamp,
    /// When the step finished; zero while it has not.
    pub finished_at: Timestamp,
    /// Hash of the tool spec the step ran against (`tool_specs.hash`); empty for no tool.
    pub spec_hash: String,
    /// The id of the policy that judged the step; empty before it did.
    pub policy_id: String,
    /// `<column>: <error>` joined by `"; "`; empty when the row decoded.
    pub decode_error: String,
    /// Stored bytes of the TEXT columns that were not valid UTF-8.
    pub raw_invalid: RawInvalid,
}

/// An `approvals` row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Approval {
    /// The approval's id (`approvals.id`).
    pub id: String,
    /// The id of the run waiting on this approval.
    pub run_id: String,
    /// The id of the step whose tool call needs the approval.
    pub step_id: String,
    /// What kind of approval this is, as the runtime wrote it (e.g. a tool call).
    pub kind: String,
    /// `capability_json` as stored (kept raw, never decoded).
    pub capability: String,
    /// `presentation_json` as stored (kept raw, never decoded).
    pub presentation: String,
    /// The decoded request; `None` when `request_json` did not decode.
    pub request: Option<ToolRequest>,
    /// `request_json` as stored: the tool call the reviewer is asked about.
    pub request_json: String,
    /// The approval hash (spec 4.2) a shown decision must match.
    pub hash: String,
    /// Pending, approved, rejected or expired (spec 4.1).
    pub status: ApprovalStatus,
    /// When the run paused and asked.
    pub created_at: Timestamp,
    /// When a pending approval expires (spec 4.5); zero for never.
    pub expires_at: Timestamp,
    /// When it was decided; zero while pending.
    pub decided_at: Timestamp,
    /// Who decided it, as given by the operator; empty while pending.
    pub decided_by: String,
    /// The reviewer's note with the decision; may be empty.
    pub note: String,
    /// `<column>: <error>` joined by `"; "`; empty when the row decoded.
    pub decode_error: String,
    /// Stored bytes of the TEXT columns that were not valid UTF-8.
    pub raw_invalid: RawInvalid,
}

/// An `events` row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Event {
    /// The event's position in the database (`seq`), increasing across all runs.
    pub seq: i64,
    /// The id of the run the event belongs to.
    pub run_id: String,
    /// The id of the step it concerns; empty for run-level events.
    pub step_id: String,
    /// `at` exactly as stored (the chain hashes this text).
    pub at_text: String,
    /// `at` parsed; zero when it did not parse.
    pub at: Timestamp,
    /// `type`.
    pub kind: String,
    /// `payload_json` as stored (or capped by a page read).
    pub payload: String,
    /// This event's link in the run's hash chain (spec 5.3); empty for pre-m6 rows.
    pub hash: String,
    /// `<column>: <error>` joined by `"; "`; empty when the row decoded.
    pub decode_error: String,
    /// Stored bytes of the TEXT columns that were not valid UTF-8.
    pub raw_invalid: RawInvalid,
}

/// A run's lease as stored: unheld = empty owner and zero time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lease {
    /// Who holds the lease; empty when unheld.
    pub owner: String,
    /// When it lapses; zero when unheld.
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

    /// Whether the stored `column` did not decode (it is named in `decode_error`), so the
    /// field holds a default, not the stored value.
    pub fn unread(&self, column: &str) -> bool {
        self.decode_error
            .split("; ")
            .any(|e| e.strip_prefix(column).is_some_and(|r| r.starts_with(':')))
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
