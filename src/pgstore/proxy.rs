//! The MCP proxy's call index (`proxy_calls`, schema migration 3, decision 0085) as the
//! commands and the console read it; the proxy's own reads and writes are in
//! `src/mcp/serve/calls_pg.rs`, on a connection of its own.

use super::error::PgCtx;
use super::operate::text_id;
use super::stmts::Cached;
use super::{PgError, PgStore};
use crate::runtime::store::{ProxyCall, StoreError};

impl PgStore {
    /// The session's newest `limit` run ids in the call index (`mcp-proxy recheck`).
    pub fn proxy_session_runs(&self, session: &str, limit: i64) -> Result<Vec<String>, PgError> {
        let rows = self
            .lock()
            .query(
                "SELECT run_id FROM proxy_calls WHERE session = $1 ORDER BY id DESC LIMIT $2",
                &[&session, &limit],
            )
            .ctx(&self.url, "proxy calls")?;
        rows.iter()
            .map(|r| r.try_get::<_, String>(0).ctx(&self.url, "proxy calls"))
            .collect()
    }

    /// The MCP proxy call a run answers: the session and tool of the newest index row naming
    /// it (`None` when no row does), as SQLite's `Store::proxy_call` reads it.
    pub fn proxy_call(&self, run_id: &[u8]) -> Result<Option<ProxyCall>, StoreError> {
        let Some(run_id) = text_id(run_id) else {
            return Ok(None);
        };
        let row = self
            .lock()
            .query_opt(
                "SELECT session, tool FROM proxy_calls WHERE run_id = $1 ORDER BY id DESC LIMIT 1",
                &[&run_id],
            )
            .ctx(&self.url, "proxy call")
            .map_err(|e| StoreError::Backend(e.to_string()))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let text = |i: usize| {
            row.try_get::<_, String>(i)
                .ctx(&self.url, "proxy call")
                .map_err(|e| StoreError::Backend(e.to_string()))
        };
        Ok(Some(ProxyCall {
            session: text(0)?.into_bytes(),
            tool: text(1)?.into_bytes(),
        }))
    }
}
