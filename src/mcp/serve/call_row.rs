//! The rows of the proxy's call index (`proxy_calls`) as both backends read and write them
//! (`calls.rs` for SQLite, `calls_pg.rs` for PostgreSQL).

/// `outcome` codes (0 unseen, 1 none, 2 known, 3 unknown).
pub const OUTCOME_NONE: i64 = 1;
pub const OUTCOME_KNOWN: i64 = 2;
pub const OUTCOME_UNKNOWN: i64 = 3;

/// One row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: i64,
    pub request_key: String,
    pub tool: String,
    pub side_effect: String,
    pub run_id: String,
    pub created_at: i64,
    pub open: bool,
    pub closed_at: i64,
    pub settled_at: i64,
    pub outcome: i64,
}

/// What a claim found.
#[derive(Debug)]
pub enum Claim {
    Claimed,
    /// Another caller claimed or closed the key's open row in between: decide again.
    Race,
}

/// The columns every read selects, in [`Row`]'s order.
pub(crate) const COLS: &str =
    "id, request_key, tool, side_effect, run_id, created_at, open, closed_at, settled_at, outcome";

/// The row a claim inserts.
pub(crate) struct NewCall<'a> {
    pub session: &'a str,
    pub key: &'a str,
    pub tool: &'a str,
    pub side_effect: &'a str,
    pub run_id: &'a str,
    pub now: i64,
}
