//! The agentrt tables a copy carries, in foreign-key order, with each column's kind. SQLite's
//! rowid (insertion order, which every list follows) travels as PostgreSQL's `ord`; an event's
//! rowid is its seq.

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Text,
    Int,
}

use Kind::{Int, Text};

/// One table.
pub(crate) struct Table {
    pub name: &'static str,
    /// The column that names a row in a message.
    pub key: &'static str,
    /// True where the key column is the insertion order itself (`events`' seq, SQLite's rowid;
    /// `proxy_calls`' id, likewise): no `ord` column.
    pub seq_keyed: bool,
    pub cols: &'static [(&'static str, Kind)],
}

const RUNS: &[(&str, Kind)] = &[
    ("id", Text),
    ("goal", Text),
    ("status", Text),
    ("reason", Text),
    ("reason_detail", Text),
    ("limits_json", Text),
    ("step_count", Int),
    ("created_at", Text),
    ("started_at", Text),
    ("finished_at", Text),
    ("result_json", Text),
    ("model_calls", Int),
    ("input_tokens", Int),
    ("output_tokens", Int),
    ("cached_input_tokens", Int),
    ("estimated_cost_micros", Int),
    ("active_ms", Int),
    ("lease_owner", Text),
    ("lease_expires_at", Text),
];

const TOOL_SPECS: &[(&str, Kind)] = &[("hash", Text), ("spec_json", Text)];

const STEPS: &[(&str, Kind)] = &[
    ("id", Text),
    ("run_id", Text),
    ("idx", Int),
    ("status", Text),
    ("decision_json", Text),
    ("policy_json", Text),
    ("observation_json", Text),
    ("observation_hash", Text),
    ("started_at", Text),
    ("finished_at", Text),
    ("spec_hash", Text),
    ("policy_id", Text),
];

const APPROVALS: &[(&str, Kind)] = &[
    ("id", Text),
    ("run_id", Text),
    ("step_id", Text),
    ("kind", Text),
    ("capability_json", Text),
    ("presentation_json", Text),
    ("request_json", Text),
    ("hash", Text),
    ("status", Text),
    ("created_at", Text),
    ("decided_at", Text),
    ("decided_by", Text),
    ("note", Text),
    ("expires_at", Text),
];

const MODEL_CALLS: &[(&str, Kind)] = &[
    ("id", Text),
    ("run_id", Text),
    ("step_id", Text),
    ("attempt", Int),
    ("status", Text),
    ("model", Text),
    ("input_tokens", Int),
    ("output_tokens", Int),
    ("cached_input_tokens", Int),
    ("cost_micros", Int),
    ("latency_ms", Int),
    ("error", Text),
    ("dispatched_at", Text),
    ("completed_at", Text),
];

const EVENTS: &[(&str, Kind)] = &[
    ("seq", Int),
    ("run_id", Text),
    ("step_id", Text),
    ("at", Text),
    ("type", Text),
    ("payload_json", Text),
    ("hash", Text),
];

/// agentrt's MCP proxy call index (agentrt mcp 2.7; `src/mcp/index.rs`, PostgreSQL schema
/// migration 3), which a copy carries when the source has one (decision 0087). Its id is its
/// insertion order on both sides.
const PROXY_CALLS_COLS: &[(&str, Kind)] = &[
    ("id", Int),
    ("session", Text),
    ("request_key", Text),
    ("tool", Text),
    ("side_effect", Text),
    ("run_id", Text),
    ("created_at", Int),
    ("open", Int),
    ("closed_at", Int),
    ("settled_at", Int),
    ("outcome", Int),
];

/// The MCP proxy's call index: not one of agentrt's run tables (a database may have none).
pub(crate) const PROXY_CALLS: Table = Table {
    name: "proxy_calls",
    key: "id",
    seq_keyed: true,
    cols: PROXY_CALLS_COLS,
};

/// Every table, parents first.
pub(crate) const TABLES: [Table; 6] = [
    Table {
        name: "runs",
        key: "id",
        seq_keyed: false,
        cols: RUNS,
    },
    Table {
        name: "tool_specs",
        key: "hash",
        seq_keyed: false,
        cols: TOOL_SPECS,
    },
    Table {
        name: "steps",
        key: "id",
        seq_keyed: false,
        cols: STEPS,
    },
    Table {
        name: "approvals",
        key: "id",
        seq_keyed: false,
        cols: APPROVALS,
    },
    Table {
        name: "model_calls",
        key: "id",
        seq_keyed: false,
        cols: MODEL_CALLS,
    },
    Table {
        name: "events",
        key: "seq",
        seq_keyed: true,
        cols: EVENTS,
    },
];

impl Table {
    /// The column list, comma-separated.
    pub fn col_list(&self) -> String {
        self.cols.iter().map(|c| c.0).collect::<Vec<_>>().join(", ")
    }

    /// The column a scan orders by: the key where it is the insertion order, else `ord`
    /// (PostgreSQL; SQLite's rowid).
    pub fn order_col(&self) -> &'static str {
        if self.seq_keyed { self.key } else { "ord" }
    }

    /// True for the event log, whose rows form the chain.
    pub fn is_events(&self) -> bool {
        self.name == "events"
    }

    /// The position of a column.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.cols.iter().position(|c| c.0 == name)
    }
}
