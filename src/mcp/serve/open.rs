//! Opening a proxy (agentrt mcp 2.3): database pre-check, reach check, each server's manifest
//! and load, the runtime's tools, then the store, the database re-check, the call index and
//! the Gate. Any failure closes what was opened.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::calls::Calls;
use super::policy::{ProxyPolicy, ToolInfo};
use super::runs::Runs;
use crate::mcp::client::Connection;
use crate::mcp::config::ProxyConfig;
use crate::mcp::load::{self, Report};
use crate::mcp::manifest::Manifest;
use crate::mcp::rules::Built;
use crate::mcp::{DEFAULT_MAX_CONTENT_BYTES, quote};
use crate::runtime::driver::{Config, Gate};
use crate::runtime::tools::{Registry, SideEffect, Tool, ToolCall, ToolDef, ToolError, ToolFuture};

/// A tool the host is offered.
#[derive(Debug, Clone)]
pub struct Offered {
    pub built: Built,
    pub server: String,
}

/// An upstream tool as the runtime calls it.
struct McpTool {
    conn: Arc<Connection>,
    server: String,
    built: Built,
}

impl Tool for McpTool {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: self.built.name.clone(),
            description: self.built.description.clone(),
            input_schema: self.built.input_schema.clone(),
            side_effect: SideEffect::parse(&self.built.side_effect),
            timeout: self.built.timeout,
            // Every upstream tool completes its run when it succeeds (one run per call).
            terminal: true,
        }
    }

    fn call(&self, call: ToolCall) -> ToolFuture {
        let (conn, server, built) = (self.conn.clone(), self.server.clone(), self.built.clone());
        Box::pin(async move {
            let done = tokio::task::spawn_blocking(move || {
                crate::mcp::call::call(
                    &conn,
                    &server,
                    &built,
                    &call.args,
                    DEFAULT_MAX_CONTENT_BYTES,
                )
            })
            .await;
            match done {
                Ok(Ok(out)) => Ok(out),
                Ok(Err(e)) => Err(ToolError::Failed(e)),
                Err(e) => Err(ToolError::Failed(format!("the call did not finish: {e}"))),
            }
        })
    }
}

/// Everything serving uses.
pub struct Opened {
    pub cfg: ProxyConfig,
    pub reports: Vec<Report>,
    pub offered: Vec<Offered>,
    pub conns: Vec<Arc<Connection>>,
    pub store: Runs,
    pub gate: Gate,
    pub policy: Arc<ProxyPolicy>,
}

/// Closes every connection.
pub fn close_all(conns: &[Arc<Connection>]) {
    for c in conns {
        c.close();
    }
}

/// What loading every server gave: each server's report, the tools offered and the open
/// connections.
pub type Loaded = (Vec<Report>, Vec<Offered>, Vec<Arc<Connection>>);

/// Opens what serving needs, in agentrt's order. On error: the line, and the reports read.
pub fn open(cfg: ProxyConfig) -> Result<Opened, (String, Vec<Report>)> {
    cfg.database.check_file().map_err(|e| (e, Vec::new()))?;
    crate::mcp::reach::check(&cfg).map_err(|e| (e, Vec::new()))?;
    let (reports, offered, conns) = load_servers(&cfg)?;
    match finish(&cfg, &offered, &conns) {
        Ok((store, gate, policy)) => Ok(Opened {
            cfg,
            reports,
            offered,
            conns,
            store,
            gate,
            policy,
        }),
        Err(e) => {
            close_all(&conns);
            Err((e, reports))
        }
    }
}

/// Reads each server's manifest, connects and loads it (after the reach check), refusing a
/// tool registered under the status tool's name or by two servers. On error every connection
/// opened is closed.
pub fn load_servers(cfg: &ProxyConfig) -> Result<Loaded, (String, Vec<Report>)> {
    let mut reports = Vec::new();
    let mut conns: Vec<Arc<Connection>> = Vec::new();
    let mut offered: Vec<Offered> = Vec::new();
    let fail = |e: String, conns: &[Arc<Connection>], reports: Vec<Report>| {
        close_all(conns);
        Err((e, reports))
    };
    for s in &cfg.servers {
        let q = quote(&s.name);
        let m = match Manifest::read(&s.manifest) {
            Ok(m) => m,
            Err(e) => return fail(format!("server {q}: manifest: {e}"), &conns, reports),
        };
        let l = match load::load(s, &m) {
            Ok(l) => l,
            Err((e, r)) => {
                reports.extend(r.map(|b| *b));
                return fail(e, &conns, reports);
            }
        };
        let conn = Arc::new(l.conn);
        conns.push(conn.clone());
        for b in &l.report.registered {
            if b.name == cfg.status_tool {
                let e = format!(
                    "server {q} registers tool {} under {}, the status tool's name: rename one (status_tool or the rule's rename)",
                    quote(&b.tool),
                    quote(&b.name)
                );
                reports.push(l.report.clone());
                return fail(e, &conns, reports);
            }
            if offered.iter().any(|o| o.built.name == b.name) {
                let e = format!(
                    "server {q} registers {}, which another server already registered",
                    quote(&b.name)
                );
                reports.push(l.report.clone());
                return fail(e, &conns, reports);
            }
            offered.push(Offered {
                built: b.clone(),
                server: s.name.clone(),
            });
        }
        reports.push(l.report);
    }
    Ok((reports, offered, conns))
}

type Finished = (Runs, Gate, Arc<ProxyPolicy>);

fn finish(
    cfg: &ProxyConfig,
    offered: &[Offered],
    conns: &[Arc<Connection>],
) -> Result<Finished, String> {
    let mut registry = Registry::new();
    let mut infos = HashMap::new();
    for o in offered {
        let idx = cfg
            .servers
            .iter()
            .position(|s| s.name == o.server)
            .ok_or_else(|| {
                format!(
                    "tool {:?} names a server that is not configured",
                    o.built.tool
                )
            })?;
        let rule = cfg
            .servers
            .get(idx)
            .and_then(|s| s.rules.get(&o.built.tool));
        registry
            .register(Arc::new(McpTool {
                conn: conns
                    .get(idx)
                    .cloned()
                    .ok_or("a server has no connection")?,
                server: o.server.clone(),
                built: o.built.clone(),
            }))
            .map_err(|e| format!("tool {}: {e}", quote(&o.built.name)))?;
        infos.insert(
            o.built.name.clone(),
            ToolInfo::of(o, rule.and_then(|r| r.outcome)),
        );
    }
    let store = Runs::open(&cfg.database)?;
    let policy = Arc::new(ProxyPolicy::new(cfg, infos));
    // On PostgreSQL the Gate runs a sequencer that chains the events it commits (decision
    // 0083).
    let gate = Config::new(store.run_db(), registry, policy.clone())
        .lease_owner(format!("countersign-mcp-proxy:{}", cfg.session))
        .lease_ttl(cfg.lease_ttl.unwrap_or(Duration::ZERO))
        .reconcile(Arc::new(super::policy::ProxyReconcile(policy.clone())))
        .gate()
        .map_err(|e| e.to_string())?;
    Calls::open(&cfg.database, &cfg.session)?;
    Ok((store, gate, policy))
}

impl ToolInfo {
    /// What the policy knows of an offered tool; `outcome` is its rule's, if any. (Here, beside
    /// `Offered`, so that the policy never imports the opener.)
    pub(crate) fn of(o: &Offered, outcome: Option<crate::mcp::config::Outcome>) -> ToolInfo {
        ToolInfo {
            server: o.server.clone(),
            remote: o.built.tool.clone(),
            side_effect: o.built.side_effect.clone(),
            outcome,
            fixed: o.built.fixed.clone(),
        }
    }
}
