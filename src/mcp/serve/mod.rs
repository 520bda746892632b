//! Serving MCP to a host (agentrt mcp 2.4-2.15): `countersign mcp-proxy --config FILE`.
//!
//! Files: `open.rs` (startup), `key.rs` (the request key), `calls.rs` (the `proxy_calls`
//! index), `policy.rs` (decider, approvals, re-runs), `decide.rs` (the rules across calls),
//! `run.rs` (one run per call: begin, execute, close, re-run), `attempt.rs` (what became of an
//! attempt), `answer.rs` (what the host receives), `host.rs` (the JSON-RPC server on stdio).

pub mod answer;
pub mod attempt;
mod call_row;
pub mod calls;
#[cfg(feature = "postgres")]
mod calls_pg;
mod decide;
pub mod host;
pub mod key;
pub mod open;
pub mod policy;
pub mod recheck;
mod run;
pub mod runs;
pub mod signals;
pub mod status;

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use calls::Calls;
use open::{Offered, Opened};

/// Writes one operator line (already escaped) to stderr.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// A serving proxy.
pub struct Proxy {
    pub o: Opened,
    /// The decision mutex: every index and run read and any begin or collect happen under it.
    pub calls: Mutex<Calls>,
    pub rt: tokio::runtime::Runtime,
    pub log: Log,
    /// Set once stdin closed or a signal came: no new call is accepted, holds end.
    pub shutting: AtomicBool,
    /// Calls being handled now.
    pub inflight: AtomicUsize,
}

/// The line prefix of every operator line.
pub const PREFIX: &str = "countersign mcp-proxy: ";

impl Proxy {
    /// A proxy over what [`open::open`] opened.
    pub fn new(o: Opened, log: Log) -> Result<Proxy, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("runtime: {e}"))?;
        let calls = Calls::open(&o.cfg.database, &o.cfg.session)?;
        Ok(Proxy {
            o,
            calls: Mutex::new(calls),
            rt,
            log,
            shutting: AtomicBool::new(false),
            inflight: AtomicUsize::new(0),
        })
    }

    pub(crate) fn say(&self, line: &str) {
        (self.log)(&format!("{PREFIX}{line}"));
    }

    pub(crate) fn tool(&self, name: &str) -> Option<&Offered> {
        self.o.offered.iter().find(|t| t.built.name == name)
    }

    /// Why the connection to `t`'s server is gone (`None` while it is up). It is not
    /// reopened (decision 0070): nothing is sent to that server until the proxy restarts.
    pub(crate) fn lost(&self, t: &Offered) -> Option<String> {
        self.o
            .conns
            .iter()
            .find(|c| c.name() == t.server)
            .and_then(|c| c.lost())
    }

    /// The answer to a call of `t` not sent because its server's connection is gone (`why`),
    /// with the operator's line; `approval`: the approval the call collected, which stands.
    pub(crate) fn not_connected(
        &self,
        t: &Offered,
        why: &str,
        approval: Option<&str>,
    ) -> answer::Answer {
        let s = crate::mcp::sanitize;
        self.say(&format!(
            "error: server {} is not connected since an earlier failure ({}): a call to {} was not sent; restart the proxy to connect it again",
            crate::mcp::quote(&t.server),
            s(why),
            s(&t.built.name)
        ));
        answer::not_connected(&t.server, why, approval)
    }

    pub(crate) fn window(&self, t: &Offered) -> Duration {
        self.o
            .cfg
            .servers
            .iter()
            .find(|s| s.name == t.server)
            .and_then(|s| s.rules.get(&t.built.tool))
            .and_then(|r| r.repeat_window)
            .unwrap_or(self.o.cfg.repeat_window)
    }

    /// Closes every upstream connection; on PostgreSQL, then chains what the calls committed
    /// (the process exits without dropping the Gate, whose sequencer would otherwise chain it;
    /// an event left in the inbox waits for the next sequencer, decision 0085).
    pub fn close(&self) {
        for c in &self.o.conns {
            c.close();
        }
        if let Err(e) = self.o.store.chain_committed() {
            self.say(&format!(
                "the events committed were not all chained (the next sequencer chains them): {}",
                crate::mcp::sanitize_message(&e)
            ));
        }
    }
}

/// Unix nanoseconds now (the proxy clock).
pub(crate) fn now_ns() -> i64 {
    i64::try_from(crate::runtime::types::Timestamp::now().unix_nanos()).unwrap_or(i64::MAX)
}
