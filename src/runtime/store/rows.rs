//! Decoding rows. Nothing here fails on what a database holds (spec 9): a column that does not
//! decode leaves its field empty and is named in `decode_error`; TEXT that is not UTF-8 is read
//! as bytes (never as a Rust `String` by the driver), kept in `raw_invalid` and named too.

use rusqlite::Row;
use rusqlite::types::{Value, ValueRef};

use crate::runtime::types::{
    Approval, ApprovalStatus, Decision, Event, Limits, Observation, PolicyDecision, RawInvalid,
    Run, RunStatus, Step, StepStatus, Timestamp, ToolRequest, push_decode_error,
};

/// Where a row's columns come from: a SQLite row, or values another backend read (PostgreSQL's
/// rows, as text and integers), so both decode through the same functions.
enum Source<'r, 's> {
    Row(&'r Row<'s>),
    // Only PostgreSQL's rows come as values.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Values(&'r [Value]),
}

impl Source<'_, '_> {
    fn get_ref(&self, idx: usize) -> rusqlite::Result<ValueRef<'_>> {
        match self {
            Source::Row(r) => r.get_ref(idx),
            Source::Values(v) => v
                .get(idx)
                .map(ValueRef::from)
                .ok_or(rusqlite::Error::InvalidColumnIndex(idx)),
        }
    }
}

/// Reads one row's columns by position, collecting decode errors.
pub(crate) struct Cols<'r, 's> {
    row: Source<'r, 's>,
    pub decode_error: String,
    pub raw_invalid: RawInvalid,
}

impl<'r, 's> Cols<'r, 's> {
    pub fn new(row: &'r Row<'s>) -> Self {
        Cols {
            row: Source::Row(row),
            decode_error: String::new(),
            raw_invalid: Vec::new(),
        }
    }

    /// Columns from values read elsewhere, in the order the `*_COLUMNS` lists name them.
    #[cfg(feature = "postgres")]
    pub fn values(values: &'r [Value]) -> Self {
        Cols {
            row: Source::Values(values),
            decode_error: String::new(),
            raw_invalid: Vec::new(),
        }
    }

    /// What decoding the row noted, taken for the record it made: its decode errors and
    /// the bytes kept of TEXT that was not UTF-8.
    pub fn take_notes(&mut self) -> (String, RawInvalid) {
        (
            std::mem::take(&mut self.decode_error),
            std::mem::take(&mut self.raw_invalid),
        )
    }

    fn fail(&mut self, column: &str, err: &dyn std::fmt::Display) {
        push_decode_error(&mut self.decode_error, column, err);
    }

    /// A TEXT column as a string; invalid UTF-8 is a decode error with the bytes kept.
    pub fn text(&mut self, idx: usize, column: &'static str) -> String {
        self.text_or_key(idx, column, true)
    }

    /// An id column (run, approval or step id): as [`Cols::text`], but bytes that are not
    /// UTF-8 are no decode error. agentrt's callers choose run ids and a Go string holds any
    /// bytes, so such an id is a valid row; its bytes are kept in `raw_invalid` (the string is
    /// a lossy copy, Go's one U+FFFD per invalid byte) and lookups bind them back as stored.
    pub fn key(&mut self, idx: usize, column: &'static str) -> String {
        self.text_or_key(idx, column, false)
    }

    fn text_or_key(&mut self, idx: usize, column: &'static str, report: bool) -> String {
        let bytes: Vec<u8> = match self.row.get_ref(idx) {
            Ok(ValueRef::Null) => return String::new(),
            Ok(ValueRef::Text(b)) | Ok(ValueRef::Blob(b)) => b.to_vec(),
            Ok(ValueRef::Integer(i)) => return i.to_string(),
            Ok(ValueRef::Real(f)) => return f.to_string(),
            Err(e) => {
                self.fail(column, &e);
                return String::new();
            }
        };
        match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => {
                let bytes = e.into_bytes();
                if report {
                    self.fail(column, &"not valid UTF-8");
                }
                let lossy = crate::runtime::types::lossy(&bytes).into_owned();
                self.raw_invalid.push((column, bytes));
                lossy
            }
        }
    }

    /// An INTEGER column; anything but an integer (or integer text) is a decode error and 0.
    pub fn int(&mut self, idx: usize, column: &'static str) -> i64 {
        match self.row.get_ref(idx) {
            Ok(ValueRef::Integer(i)) => i,
            Ok(ValueRef::Null) => 0,
            Ok(ValueRef::Text(b)) => match std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                Some(i) => i,
                None => {
                    self.fail(column, &"not an integer");
                    0
                }
            },
            Ok(_) => {
                self.fail(column, &"not an integer");
                0
            }
            Err(e) => {
                self.fail(column, &e);
                0
            }
        }
    }

    /// A time column (RFC3339Nano or `''`); unparsable is a decode error and the zero time.
    pub fn time(&mut self, idx: usize, column: &'static str) -> Timestamp {
        let s = self.text(idx, column);
        match Timestamp::parse(&s) {
            Ok(t) => t,
            Err(e) => {
                self.fail(column, &e);
                Timestamp::ZERO
            }
        }
    }

    /// A JSON column decoded with `f`; `''` is absent; a failure is a decode error and `None`.
    pub fn json<T>(
        &mut self,
        text: &str,
        column: &'static str,
        f: impl FnOnce(&[u8]) -> Result<T, serde_json::Error>,
    ) -> Option<T> {
        if text.is_empty() {
            return None;
        }
        match f(text.as_bytes()) {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail(column, &e);
                None
            }
        }
    }

    /// True when the column's storage class is TEXT.
    pub fn is_text(&self, idx: usize) -> bool {
        matches!(self.row.get_ref(idx), Ok(ValueRef::Text(_)))
    }

    /// Adds a decode error that is not about a column's content (e.g. a capped column).
    pub fn note(&mut self, column: &str, err: &dyn std::fmt::Display) {
        self.fail(column, err);
    }
}

/// The `runs` columns every run read selects, in this order.
pub(crate) const RUN_COLUMNS: &str = "id, goal, status, reason, reason_detail, limits_json, step_count, \
    created_at, started_at, finished_at, result_json, model_calls, input_tokens, output_tokens, \
    cached_input_tokens, estimated_cost_micros, active_ms, lease_owner, lease_expires_at";

pub(crate) fn run_from(c: &mut Cols<'_, '_>) -> Run {
    let mut run = Run {
        id: c.key(0, "id"),
        goal: c.text(1, "goal"),
        status: RunStatus::parse(&c.text(2, "status")),
        reason: c.text(3, "reason"),
        reason_detail: c.text(4, "reason_detail"),
        limits_json: c.text(5, "limits"),
        step_count: c.int(6, "step_count"),
        created_at: c.time(7, "created_at"),
        started_at: c.time(8, "started_at"),
        finished_at: c.time(9, "finished_at"),
        result_json: c.text(10, "result"),
        model_calls: c.int(11, "model_calls"),
        input_tokens: c.int(12, "input_tokens"),
        output_tokens: c.int(13, "output_tokens"),
        cached_input_tokens: c.int(14, "cached_input_tokens"),
        estimated_cost_micros: c.int(15, "estimated_cost_micros"),
        active_ms: c.int(16, "active_ms"),
        lease_owner: c.text(17, "lease_owner"),
        lease_expires_at: c.time(18, "lease_expires_at"),
        ..Run::default()
    };
    // A status the runtime does not know (or stored as anything but TEXT, which no
    // compare-and-set on it matches) marks the run damaged; Cancel still ends it.
    if matches!(run.status, RunStatus::Unknown(_)) || !c.is_text(2) {
        c.note("status", &"not a run status the runtime knows");
    }
    let limits_json = run.limits_json.clone();
    run.limits = c
        .json(&limits_json, "limits", Limits::from_json)
        .unwrap_or_default();
    (run.decode_error, run.raw_invalid) = c.take_notes();
    run
}

/// The `steps` columns every step read selects, in this order.
pub(crate) const STEP_COLUMNS: &str = "id, run_id, idx, status, decision_json, policy_json, \
    observation_json, observation_hash, started_at, finished_at, spec_hash, policy_id";

pub(crate) fn step_from(c: &mut Cols<'_, '_>) -> Step {
    let mut s = Step {
        id: c.key(0, "id"),
        run_id: c.key(1, "run_id"),
        index: c.int(2, "idx"),
        status: StepStatus::parse(&c.text(3, "status")),
        decision_json: c.text(4, "decision"),
        policy_json: c.text(5, "policy"),
        observation_json: c.text(6, "observation"),
        observation_hash: c.text(7, "observation_hash"),
        started_at: c.time(8, "started_at"),
        finished_at: c.time(9, "finished_at"),
        spec_hash: c.text(10, "spec_hash"),
        policy_id: c.text(11, "policy_id"),
        ..Step::default()
    };
    let (d, p, o) = (
        s.decision_json.clone(),
        s.policy_json.clone(),
        s.observation_json.clone(),
    );
    s.decision = c.json(&d, "decision", Decision::from_json);
    s.policy = c.json(&p, "policy", PolicyDecision::from_json);
    s.observation = c.json(&o, "observation", Observation::from_json);
    (s.decode_error, s.raw_invalid) = c.take_notes();
    s
}

/// The `approvals` columns every approval read selects, in this order.
pub(crate) const APPROVAL_COLUMNS: &str = "id, run_id, step_id, kind, capability_json, \
    presentation_json, request_json, hash, status, created_at, decided_at, decided_by, note, expires_at";

pub(crate) fn approval_from(c: &mut Cols<'_, '_>) -> Approval {
    let mut a = Approval {
        id: c.key(0, "id"),
        run_id: c.key(1, "run_id"),
        step_id: c.key(2, "step_id"),
        kind: c.text(3, "kind"),
        capability: c.text(4, "capability"),
        presentation: c.text(5, "presentation"),
        request_json: c.text(6, "request"),
        hash: c.text(7, "hash"),
        status: ApprovalStatus::parse(&c.text(8, "status")),
        expires_at: c.time(13, "expires_at"),
        ..Approval::default()
    };
    let req = a.request_json.clone();
    a.request = if req.is_empty() {
        c.note("request", &"empty");
        None
    } else {
        c.json(&req, "request", ToolRequest::from_json)
    };
    a.created_at = c.time(9, "created_at");
    a.decided_at = c.time(10, "decided_at");
    a.decided_by = c.text(11, "decided_by");
    a.note = c.text(12, "note");
    (a.decode_error, a.raw_invalid) = c.take_notes();
    a
}

pub(crate) fn event_from(c: &mut Cols<'_, '_>) -> Event {
    let at_text = c.text(3, "at");
    let at = match Timestamp::parse(&at_text) {
        Ok(t) => t,
        Err(e) => {
            c.note("at", &e);
            Timestamp::ZERO
        }
    };
    let mut e = Event {
        seq: c.int(0, "seq"),
        run_id: c.key(1, "run_id"),
        step_id: c.key(2, "step_id"),
        at_text,
        at,
        kind: c.text(4, "type"),
        payload: c.text(5, "payload"),
        hash: c.text(6, "hash"),
        ..Event::default()
    };
    (e.decode_error, e.raw_invalid) = c.take_notes();
    e
}

/// A run decoded from values read by another backend, in [`RUN_COLUMNS`] order, exactly as a
/// SQLite row holding them would decode.
#[cfg(feature = "postgres")]
pub(crate) fn run_from_values(v: &[Value]) -> Run {
    run_from(&mut Cols::values(v))
}

/// A step decoded from values in [`STEP_COLUMNS`] order (see [`run_from_values`]).
#[cfg(feature = "postgres")]
pub(crate) fn step_from_values(v: &[Value]) -> Step {
    step_from(&mut Cols::values(v))
}

/// An approval decoded from values in [`APPROVAL_COLUMNS`] order (see [`run_from_values`]).
#[cfg(feature = "postgres")]
pub(crate) fn approval_from_values(v: &[Value]) -> Approval {
    approval_from(&mut Cols::values(v))
}
