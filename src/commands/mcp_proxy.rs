//! `countersign mcp-proxy`: the configuration of an MCP proxy in agentrt's format, its pins
//! (`pin`) and the check that opens everything serving would (`check`). docs/mcp.md.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::CommandError;
use super::out::Out;
use crate::mcp::config::{self, ProxyConfig};
use crate::mcp::manifest::{Annotations, Manifest};
use crate::mcp::{load, sanitize};

#[derive(Debug, Args)]
pub struct McpProxyArgs {
    #[command(subcommand)]
    pub action: Option<McpAction>,
    /// The proxy's configuration (agentrt's format, owner-only).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Connect to every server and pin what it lists (schema and description hashes).
    Pin(ConfigArg),
    /// Open everything serving would (manifests, servers, database, call index) and report
    /// which tools would be offered.
    Check(ConfigArg),
    /// Ask the policy as configured now again, read-only, about the calls it judged (a run, or
    /// the session's newest runs) and say where today's answer differs from the recorded one.
    Recheck(super::mcp_recheck::RecheckArgs),
}

#[derive(Debug, Args)]
pub struct ConfigArg {
    /// The proxy's configuration (agentrt's format, owner-only).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
}

pub fn run(a: &McpProxyArgs, json: bool, out: &mut Out) -> Result<(), CommandError> {
    // Only recheck has a JSON form; the others would print text where a script expects JSON.
    let text_only = match &a.action {
        Some(McpAction::Recheck(_)) => None,
        Some(McpAction::Pin(_)) => Some("mcp-proxy pin"),
        Some(McpAction::Check(_)) => Some("mcp-proxy check"),
        None => Some("mcp-proxy"),
    };
    if let Some(name) = text_only.filter(|_| json) {
        return Err(CommandError::Usage(format!(
            "{name} prints text only: --json goes with mcp-proxy recheck"
        )));
    }
    match &a.action {
        Some(McpAction::Recheck(r)) => super::mcp_recheck::run(r, json, out),
        Some(McpAction::Pin(c)) => pin(&c.config, out),
        Some(McpAction::Check(c)) => check(&c.config, out),
        None => match &a.config {
            None => Err(CommandError::Usage(
                "mcp-proxy: --config FILE is required".into(),
            )),
            Some(c) => serve(c),
        },
    }
}

/// Serves MCP on stdin/stdout until the host closes stdin; operator lines go to stderr.
pub fn serve(path: &Path) -> Result<(), CommandError> {
    use crate::mcp::serve::{PREFIX, Proxy, host, open};
    use std::sync::Arc;
    let cfg = read_config(path)?;
    // Before any thread starts: every thread inherits the mask, one takes the signals.
    let signals = crate::mcp::serve::signals::block();
    let log: crate::mcp::serve::Log = Arc::new(|line: &str| {
        use std::io::Write;
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "{line}");
    });
    let opened = match open::open(cfg) {
        Ok(o) => o,
        Err((e, reports)) => {
            for l in reports.iter().flat_map(|r| r.lines()) {
                log(&format!("{PREFIX}{l}"));
            }
            return Err(failed(e));
        }
    };
    for l in opened.reports.iter().flat_map(|r| r.lines()) {
        log(&format!("{PREFIX}{l}"));
    }
    log(&format!(
        "{PREFIX}serving session {} on database {}",
        sanitize(&opened.cfg.session),
        sanitize(&opened.cfg.database.shown())
    ));
    let proxy = Arc::new(Proxy::new(opened, log).map_err(failed)?);
    crate::mcp::serve::signals::watch(signals, proxy.clone());
    let stdin = Box::new(std::io::BufReader::new(std::io::stdin()));
    host::serve(proxy, stdin, Box::new(std::io::stdout()));
    Ok(())
}

fn failed(e: String) -> CommandError {
    CommandError::Failed(e)
}

fn read_config(path: &Path) -> Result<ProxyConfig, CommandError> {
    config::read(path).map_err(failed)
}

/// Pins every server: writes each manifest 0600 and lists what was pinned with the server's
/// own hints, which classify nothing. Every server is listed before any manifest is written,
/// so a server that fails leaves every manifest as it was (agentrt writes each as it goes: a
/// failure part-way left the earlier servers re-pinned, found from outside).
pub fn pin(path: &Path, out: &mut Out) -> Result<(), CommandError> {
    let cfg = read_config(path)?;
    let mut pinned = Vec::with_capacity(cfg.servers.len());
    for s in &cfg.servers {
        let now = crate::runtime::types::Timestamp::now().to_rfc3339();
        pinned.push(load::pin_counting(s, &now).map_err(failed)?);
    }
    for (s, (m, nameless)) in cfg.servers.iter().zip(&pinned) {
        m.write(&s.manifest).map_err(failed)?;
        out.line(&format!(
            "server {}: {} tools pinned in {}, with the server's own hints, which classify nothing:",
            sanitize(&s.name),
            m.tools.len(),
            sanitize(&s.manifest.display().to_string())
        ))?;
        for t in m.tools.values() {
            out.line(&format!(
                "  {:<28} {:<26} {}",
                sanitize(&t.name),
                hints(t.annotations.as_ref()),
                short(&t.description, 72)
            ))?;
        }
        if *nameless > 0 {
            out.line(&format!(
                "  and {nameless} listed {} without a string name, not pinned (agentrt skips them too): the server cannot offer {}",
                if *nameless == 1 { "entry" } else { "entries" },
                if *nameless == 1 { "it" } else { "them" },
            ))?;
        }
    }
    // A command to copy is built from shell words (shell.rs), never from the display escaper.
    match super::shell::word(path.as_os_str().as_encoded_bytes()) {
        Ok(w) => out.line(&format!(
            "classify the tools in the configuration's rules, then: countersign mcp-proxy check --config {w}"
        )),
        Err(u) => out.line(&format!(
            "classify the tools in the configuration's rules, then run `countersign mcp-proxy check` on this configuration (its path {} and cannot be typed as one shell word)",
            u.why()
        )),
    }
}

fn hints(a: Option<&Annotations>) -> String {
    let Some(a) = a else {
        return "no annotations".into();
    };
    let mut v = Vec::new();
    if a.read_only_hint == Some(true) {
        v.push("readOnly");
    }
    if a.destructive_hint == Some(true) {
        v.push("destructive");
    }
    if a.idempotent_hint == Some(true) {
        v.push("idempotent");
    }
    if a.open_world_hint == Some(true) {
        v.push("openWorld");
    }
    if v.is_empty() {
        "claims nothing".into()
    } else {
        v.join(",")
    }
}

/// Whitespace collapsed, escaped, cut to `max` characters with `...`.
fn short(s: &str, max: usize) -> String {
    let collapsed = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let clean = sanitize(&collapsed);
    if clean.chars().count() <= max {
        return clean;
    }
    let cut: String = clean.chars().take(max.saturating_sub(3)).collect();
    format!("{cut}...")
}

/// Opens what serving opens, in agentrt's order, and prints each server's report.
pub fn check(path: &Path, out: &mut Out) -> Result<(), CommandError> {
    let cfg = read_config(path)?;
    cfg.database.check_file().map_err(failed)?;
    crate::mcp::reach::check(&cfg).map_err(failed)?;
    let mut loaded = Vec::new();
    let mut names: Vec<(String, String)> = Vec::new(); // (model-visible name, server)
    for s in &cfg.servers {
        let q = crate::mcp::quote(&s.name);
        let m = Manifest::read(&s.manifest)
            .map_err(|e| failed(format!("server {q}: manifest: {e}")))?;
        let l = match load::load(s, &m) {
            Ok(l) => l,
            Err((e, report)) => {
                for line in report.iter().flat_map(|r| r.lines()) {
                    out.line(&line)?;
                }
                return Err(failed(e));
            }
        };
        for line in l.report.lines() {
            out.line(&line)?;
        }
        for b in &l.report.registered {
            if b.name == cfg.status_tool {
                return Err(failed(format!(
                    "server {q} registers tool {} under {}, the status tool's name: rename one (status_tool or the rule's rename)",
                    crate::mcp::quote(&b.tool),
                    crate::mcp::quote(&b.name)
                )));
            }
            if names.iter().any(|(n, _)| *n == b.name) {
                return Err(failed(format!(
                    "server {q} registers {}, which another server already registered",
                    crate::mcp::quote(&b.name)
                )));
            }
            names.push((b.name.clone(), s.name.clone()));
        }
        loaded.push(l);
    }
    let store = crate::mcp::serve::runs::Runs::open(&cfg.database).map_err(failed)?;
    drop(store);
    for l in &loaded {
        l.conn.close();
    }
    out.line(&format!("status tool: {}", sanitize(&cfg.status_tool)))?;
    out.line(&format!("session: {}", sanitize(&cfg.session)))?;
    out.line(&format!("database: {}", sanitize(&cfg.database.shown())))
}
