//! `countersign mcp-proxy recheck`: the proxy's policy as configured now asked again,
//! read-only, about the calls it judged (agentrt mcp 2.16). Exit 0 when every answer is the
//! same and at least one was re-checked; 1 when one differs, no run was found or nothing could
//! be re-checked.

use std::path::PathBuf;

use clap::Args;

use super::CommandError;
use super::out::{Out, Raws};
use super::recheck::{print_report, report_json};
use super::text::{clean, ident};
use crate::mcp::sanitize;
use crate::mcp::serve::recheck::{Checked, Target, recheck};

/// What `recheck` covers, printed after its counts (agentrt's wording of the scope).
pub const SCOPE: &str = "covered: the gate's policy (policy map, each rule's outcome, fixed values, rename); not covered: the duplicate rule, repeat window, max_pending, rejected or expired approvals, calls refused before the gate, and without --current-tools any schema or denied-parameter change";

#[derive(Debug, Args)]
pub struct RecheckArgs {
    /// The proxy's configuration (agentrt's format, owner-only).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// One run, by id (default: the session's newest runs).
    #[arg(long, value_name = "ID", conflicts_with = "session")]
    pub run: Option<String>,
    /// The session whose runs to re-check (default: the configuration's).
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// How many of the session's newest runs.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: u32,
    /// Reach and load the servers as serving does, so a changed description or schema makes an
    /// approval differ (without it no server is started and tools come from the rules).
    #[arg(long)]
    pub current_tools: bool,
}

fn failed(e: String) -> CommandError {
    CommandError::Failed(format!("recheck: {e}"))
}

pub fn run(a: &RecheckArgs, json: bool, out: &mut Out) -> Result<(), CommandError> {
    let cfg = crate::mcp::config::read(&a.config).map_err(failed)?;
    let target = match &a.run {
        Some(id) => Target::Run(id.clone()),
        None => Target::Session {
            name: a.session.clone().unwrap_or_else(|| cfg.session.clone()),
            limit: a.limit as usize,
        },
    };
    let found = match recheck(&cfg, &target, a.current_tools) {
        Ok(f) => f,
        Err((e, loads)) => {
            loads_to_stderr(&loads);
            return Err(failed(e));
        }
    };
    loads_to_stderr(&found.loads);
    if json {
        let all: Vec<serde_json::Value> = found.reports.iter().map(report_json).collect();
        out.json(&serde_json::Value::Array(all), &Raws::default())?;
    } else {
        text(&found, out)?;
    }
    verdict(&found, &target)
}

fn loads_to_stderr(loads: &[crate::mcp::load::Report]) {
    for l in loads.iter().flat_map(|r| r.lines()) {
        crate::commands::say_err!("{}{l}", crate::mcp::serve::PREFIX);
    }
}

fn text(found: &Checked, out: &mut Out) -> Result<(), CommandError> {
    for r in &found.reports {
        out.line(&format!("run {}:", ident(r.run_id.as_bytes(), 64)))?;
        print_report(r, out)?;
        out.line("")?;
    }
    out.line(&format!(
        "{} run(s) re-checked under {}: {} decision(s) re-checked, {} not re-checkable and skipped; {} run(s) differ",
        found.reports.len(),
        clean(&found.policy_id, 200),
        found.checked(),
        found.skipped(),
        found.differing()
    ))?;
    out.line(SCOPE)
}

fn verdict(found: &Checked, target: &Target) -> Result<(), CommandError> {
    if found.differing() > 0 {
        return Err(failed(format!(
            "the policy now answers differently in {} run(s); read the differences above",
            found.differing()
        )));
    }
    if found.reports.is_empty() {
        return Err(failed(match target {
            Target::Session { name, .. } => format!(
                "no run of session {} was found, so nothing was re-checked",
                crate::mcp::quote(name)
            ),
            Target::Run(id) => format!("run {} was not found", sanitize(id)),
        }));
    }
    if found.checked() == 0 {
        return Err(failed(format!(
            "no decision of the policy was re-checked ({} not re-checkable)",
            found.skipped()
        )));
    }
    Ok(())
}
