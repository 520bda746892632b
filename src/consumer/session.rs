//! The caller's identity: who is asking, which scopes they hold, which tools they were shown.
//! Built by the application from its authenticated session, never from a tool call's arguments.

use std::collections::BTreeSet;

/// Every scope a tool of this consumer can require.
pub const ALL_SCOPES: [&str; 4] = ["orders:read", "refunds:write", "orders:write", "email:send"];

/// One authenticated customer session. In the runtime mapping a session is one run: its `id`
/// is the run id, so session budgets are per run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The session id (the run id when driven through the runtime).
    pub id: String,
    /// The authenticated customer, e.g. `cu_ana`.
    pub user_id: String,
    /// Scopes this session holds.
    pub scopes: BTreeSet<String>,
    /// Tools exposed to the model in this session.
    pub tools: BTreeSet<String>,
}

impl Session {
    /// A session with exactly the given scopes and exposed tools.
    pub fn new(id: &str, user_id: &str, scopes: &[&str], tools: &[&str]) -> Session {
        Session {
            id: id.to_string(),
            user_id: user_id.to_string(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            tools: tools.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A session holding every scope with every tool of the catalog exposed.
    pub fn full(id: &str, user_id: &str) -> Session {
        Session::new(
            id,
            user_id,
            &ALL_SCOPES,
            &crate::consumer::tools::TOOL_NAMES,
        )
    }

    /// Whether the session holds `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.contains(scope)
    }

    /// Whether `tool` was exposed to the model in this session.
    pub fn exposes(&self, tool: &str) -> bool {
        self.tools.contains(tool)
    }
}
