//! `mcp-proxy recheck` (agentrt mcp 2.16): the proxy's policy, built from the configuration as
//! it is now, asked again about the calls it judged, read-only. Without current tools no
//! server is started: each rule stands in for its tool (named by its rename, else
//! `<server>_<tool>`), and an approval's hash is recomputed with the spec recorded in it, so
//! only the policy's answer is compared. With them, the servers are reached and loaded as
//! serving would, and a changed description or schema makes an approval differ.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::open::{Offered, close_all, load_servers};
use super::policy::{ProxyPolicy, ToolInfo, policy_id};
use super::runs::Runs;
use crate::mcp::config::Database;
use crate::mcp::config::ProxyConfig;
use crate::mcp::load::Report;
use crate::mcp::quote;
use crate::mcp::rules::Built;
use crate::runtime::driver::{Config, Gate, RecheckReport, RecheckScope, RecheckSpecs};
use crate::runtime::tools::{Registry, SideEffect, Tool, ToolCall, ToolDef, ToolError, ToolFuture};

/// Which runs to ask about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One run, by id.
    Run(String),
    /// The session's newest `limit` runs in the call index.
    Session { name: String, limit: usize },
}

/// What a recheck found.
#[derive(Debug, Default)]
pub struct Checked {
    /// The identity of the policy the calls were asked about under.
    pub policy_id: String,
    /// Each run asked about, in the order chosen (newest first for a session).
    pub reports: Vec<RecheckReport>,
    /// The servers' load reports (only with current tools).
    pub loads: Vec<Report>,
}

impl Checked {
    /// Decisions asked about again, in all runs.
    pub fn checked(&self) -> usize {
        self.reports.iter().map(|r| r.checked.len()).sum()
    }

    /// Decisions that could not be.
    pub fn skipped(&self) -> usize {
        self.reports.iter().map(|r| r.skipped.len()).sum()
    }

    /// Runs where an answer differs.
    pub fn differing(&self) -> usize {
        self.reports.iter().filter(|r| r.differs()).count()
    }
}

/// A tool that is never run: recheck only asks the policy.
struct StandIn(ToolDef);

impl Tool for StandIn {
    fn def(&self) -> ToolDef {
        self.0.clone()
    }

    fn call(&self, _call: ToolCall) -> ToolFuture {
        Box::pin(async { Err(ToolError::Failed("recheck runs no tool".into())) })
    }
}

/// The tools the rules describe, with no server reached.
fn from_rules(cfg: &ProxyConfig) -> Vec<Offered> {
    let mut out = Vec::new();
    for s in &cfg.servers {
        for (tool, r) in &s.rules {
            let name = r
                .rename
                .clone()
                .unwrap_or_else(|| format!("{}_{tool}", s.name));
            out.push(Offered {
                built: Built {
                    tool: tool.clone(),
                    name,
                    description: r.description.clone().unwrap_or_default(),
                    input_schema: b"{}".to_vec(),
                    side_effect: r.side_effect.clone(),
                    timeout: r.timeout.or(s.default_timeout).unwrap_or(Duration::ZERO),
                    deny: r.deny.clone(),
                    fixed: r.fixed.clone(),
                    hint_mismatch: None,
                },
                server: s.name.clone(),
            });
        }
    }
    out
}

/// A failure, with the servers' reports read before it.
type Failed = (String, Vec<Report>);

/// The tools the servers offer now (reach check, manifests, load), connections closed.
fn from_servers(cfg: &ProxyConfig) -> Result<(Vec<Offered>, Vec<Report>), Failed> {
    crate::mcp::reach::check(cfg).map_err(|e| (e, Vec::new()))?;
    let (reports, offered, conns) = load_servers(cfg)?;
    close_all(&conns);
    Ok((offered, reports))
}

/// A read-only Gate whose policy is the proxy's and whose tools are `offered`.
fn gate(cfg: &ProxyConfig, store: &Runs, offered: &[Offered]) -> Result<Gate, String> {
    let mut registry = Registry::new();
    let mut infos = HashMap::new();
    for o in offered {
        let rule = cfg
            .servers
            .iter()
            .find(|s| s.name == o.server)
            .and_then(|s| s.rules.get(&o.built.tool));
        // Two rules renamed to one name: the first stands (serving refuses such a config).
        if infos.contains_key(&o.built.name) {
            continue;
        }
        registry
            .register(Arc::new(StandIn(ToolDef {
                name: o.built.name.clone(),
                description: o.built.description.clone(),
                input_schema: o.built.input_schema.clone(),
                side_effect: SideEffect::parse(&o.built.side_effect),
                timeout: o.built.timeout,
                terminal: true,
            })))
            .map_err(|e| format!("tool {}: {e}", quote(&o.built.name)))?;
        infos.insert(
            o.built.name.clone(),
            ToolInfo::of(o, rule.and_then(|r| r.outcome)),
        );
    }
    let policy = Arc::new(ProxyPolicy::new(cfg, infos));
    // It writes nothing: on PostgreSQL it runs no sequencer either (decision 0085).
    Config::new(store.run_db(), registry, policy)
        .chain_events(false)
        .gate()
        .map_err(|e| e.to_string())
}

/// The session's newest `limit` run ids from the call index (none when the index does not
/// exist yet), read on a read-only connection (SQLite) or in a read-only transaction
/// (PostgreSQL, whose schema always has it).
fn session_runs(
    db: &Database,
    store: &Runs,
    session: &str,
    limit: usize,
) -> Result<Vec<String>, String> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    match (db.file(), store) {
        (Some(path), _) => sqlite_session_runs(path, session, limit),
        #[cfg(feature = "postgres")]
        (None, Runs::Postgres(p)) => p
            .proxy_session_runs(session, limit)
            .map_err(|e| format!("call index: {e}")),
        _ => Err("call index: the database is not the one configured".into()),
    }
}

fn sqlite_session_runs(
    db: &std::path::Path,
    session: &str,
    limit: i64,
) -> Result<Vec<String>, String> {
    let conn = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("call index: {e}"))?;
    let exists: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='proxy_calls'",
            [],
            |r| r.get(0),
        )
        .map_err(|e| format!("call index: {e}"))?;
    if exists == 0 {
        return Ok(Vec::new());
    }
    let mut st = conn
        .prepare("SELECT run_id FROM proxy_calls WHERE session=?1 ORDER BY id DESC LIMIT ?2")
        .map_err(|e| format!("call index: {e}"))?;
    let rows = st
        .query_map(rusqlite::params![session, limit], |r| r.get::<_, String>(0))
        .map_err(|e| format!("call index: {e}"))?;
    rows.collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("call index: {e}"))
}

/// Asks the proxy's policy again about the target's runs. Writes nothing: the database is
/// opened read-only (after the owner check), the call index read on a read-only connection.
/// A session's run missing from the run tables is skipped; a named run that is missing is an
/// error. On error: the line, and the servers' reports read so far.
pub fn recheck(cfg: &ProxyConfig, target: &Target, current_tools: bool) -> Result<Checked, Failed> {
    let plain = |e: String| (e, Vec::new());
    cfg.database.check_file().map_err(plain)?;
    let (offered, loads) = if current_tools {
        from_servers(cfg)?
    } else {
        (from_rules(cfg), Vec::new())
    };
    let fail = |e: String| (e, loads.clone());
    let store = Runs::open_read_only(&cfg.database).map_err(fail)?;
    let gate = gate(cfg, &store, &offered).map_err(fail)?;
    let specs = if current_tools {
        RecheckSpecs::Registered
    } else {
        RecheckSpecs::Recorded
    };
    let ids = match target {
        Target::Run(id) => vec![id.clone()],
        Target::Session { name, limit } => {
            session_runs(&cfg.database, &store, name, *limit).map_err(fail)?
        }
    };
    let mut found = Checked {
        policy_id: policy_id(cfg),
        reports: Vec::new(),
        loads: loads.clone(),
    };
    for id in ids {
        match gate.recheck_with(&id, RecheckScope::All, specs) {
            Ok(r) => found.reports.push(r),
            Err(e) if e.is_not_found() && matches!(target, Target::Session { .. }) => {}
            Err(e) => return Err(fail(format!("run {}: {e}", quote(&id)))),
        }
    }
    Ok(found)
}
