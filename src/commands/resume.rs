//! `resume <run>`: runs the loop for runs whose tools this build registers (the example
//! consumer's); for any other run it says which tools it lacks and how a consumer resumes its
//! own runs.

use std::path::Path;

use serde_json::json;

use super::CommandError;
use super::open::{fail, open};
use super::out::{Out, Raws, summary_json};
use super::text::{clean, ident};
use crate::consumer::demo::{backend_beside, resume_demo_run};
use crate::consumer::tools::TOOL_NAMES;
use crate::runtime::store::Store;

/// The names of the tools a run was started with (`run.created`'s spec hashes) and proposed.
/// The tools run `run_id` uses that this build does not register, escaped and listed
/// (`None` when it registers them all).
pub(super) fn foreign_tools(store: &Store, run_id: &[u8]) -> Result<Option<String>, CommandError> {
    let missing: Vec<String> = tools_of(store, run_id)?
        .iter()
        .filter(|t| !TOOL_NAMES.contains(&t.as_str()))
        .map(|t| clean(t, 80))
        .collect();
    Ok((!missing.is_empty()).then(|| missing.join(", ")))
}

pub(super) fn tools_of(store: &Store, run_id: &[u8]) -> Result<Vec<String>, CommandError> {
    let mut names: Vec<String> = Vec::new();
    let first = store.list_events_page(run_id, 1, 0).map_err(fail)?;
    if let Some(e) = first.items.first().filter(|e| e.kind == "run.created")
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(&e.payload)
        && let Some(hashes) = v["tools"].as_array()
    {
        for h in hashes.iter().filter_map(|h| h.as_str()) {
            match store.tool_spec(h) {
                Ok(spec) => names.push(spec.name),
                Err(_) => names.push(format!("(spec {h})")),
            }
        }
    }
    let mut offset = 0;
    loop {
        let page = store.list_steps_page(run_id, 500, offset).map_err(fail)?;
        for s in &page.items {
            if let Some(d) = &s.decision
                && d.kind == "tool_call"
                && !d.tool.is_empty()
            {
                names.push(d.tool.clone());
            }
        }
        offset += page.items.len() as i64;
        if page.items.is_empty() || offset >= page.total {
            break;
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// Why this build cannot resume `run_id`, or `Ok` when it can (the example consumer's tools
/// and its backend beside the database).
pub fn resumable(db: &Path, run_id: &[u8]) -> Result<(), CommandError> {
    {
        let store = open(db, false)?;
        let r = store.get_run_capped(run_id).map_err(fail)?;
        if r.status.is_terminal() {
            return Err(CommandError::Failed(format!(
                "run {} is {} and cannot be resumed",
                ident(r.id_bytes(), 64),
                r.status.as_str()
            )));
        }
        if let Some(list) = foreign_tools(&store, run_id)? {
            return Err(CommandError::Failed(format!(
                "run {} uses tools this build does not register ({list}); countersign resumes only its example consumer's runs. A consumer resumes its own runs by embedding the runtime with its tools registered and calling Driver::resume(run_id) (see docs/architecture.md)",
                ident(run_id, 64),
            )));
        }
        if std::str::from_utf8(run_id).is_err() {
            // Exactly this run was found; the driver names runs by text ids, and the example
            // consumer never makes one that is not UTF-8.
            return Err(CommandError::Failed(format!(
                "run {} has an id that is not UTF-8; this build resumes only runs whose id is UTF-8 (the example consumer's always are)",
                ident(run_id, 64)
            )));
        }
    }
    let backend = backend_beside(db);
    if std::fs::symlink_metadata(&backend).is_err() {
        return Err(CommandError::Failed(format!(
            "run {} uses the example consumer's tools, but its backend {} is missing: countersign resumes the runs `countersign demo` wrote, whose order backend sits beside the run database",
            ident(run_id, 64),
            clean(&backend.to_string_lossy(), 400)
        )));
    }
    Ok(())
}

/// Resumes a run of the example consumer to its next pause or end.
pub fn resume_run(db: &Path, run_id: &[u8]) -> Result<crate::runtime::types::Run, CommandError> {
    resumable(db, run_id)?;
    let run_id = std::str::from_utf8(run_id).map_err(|_| {
        CommandError::Failed("this build resumes only runs whose id is UTF-8".into())
    })?;
    resume_demo_run(db, &backend_beside(db), run_id)
        .map_err(|e| CommandError::Failed(clean(&e.to_string(), 4000)))
}

/// One line saying where a resumed run is now.
pub fn outcome_line(r: &crate::runtime::types::Run) -> String {
    let mut line = format!("run {}: {}", ident(r.id_bytes(), 64), r.status.as_str());
    if !r.reason.is_empty() {
        line.push_str(&format!(" ({})", clean(&r.reason, 64)));
    }
    if !r.reason_detail.is_empty() {
        line.push_str(&format!(": {}", clean(&r.reason_detail, 400)));
    }
    line
}

pub fn run(db: &Path, json_out: bool, run_id: &[u8], out: &mut Out) -> Result<(), CommandError> {
    let r = resume_run(db, run_id)?;
    if json_out {
        return out.json(&json!({"run": summary_json(&r, b"")}), &Raws::default());
    }
    out.line(&outcome_line(&r))?;
    if r.status == crate::runtime::types::RunStatus::WaitingForApproval {
        out.line("the run waits for a person again: see `show` for the new approval")?;
    }
    Ok(())
}
