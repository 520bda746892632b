//! `resume <run>`: runs the loop for runs whose tools this build registers (the example
//! consumer's); for any other run it says which tools it lacks and how a consumer resumes its
//! own runs.

use std::path::Path;

use serde_json::json;

use super::CommandError;
use super::open::{fail, open};
use super::out::{Out, Raws, summary_json};
use super::text::{clean, ident, naming};
use crate::consumer::demo::{backend_beside, resume_demo_run};
use crate::consumer::tools::TOOL_NAMES;
use crate::runtime::store::Store;

/// The tools run `run_id` uses that this build does not register, escaped and listed
/// (`None` when it registers them all). A run an MCP proxy began is refused here with what
/// collects it instead (its tools are the servers', and no command resumes it).
pub(super) fn foreign_tools(store: &Store, run_id: &[u8]) -> Result<Option<String>, CommandError> {
    if let Some(p) = store.proxy_call(run_id).ok().flatten() {
        return Err(proxy_run(run_id, &p));
    }
    Ok(foreign(&tools_of(store, run_id)?))
}

/// Why a command does not resume or recheck a run an MCP proxy began.
fn proxy_run(run_id: &[u8], p: &crate::runtime::store::ProxyCall) -> CommandError {
    CommandError::Failed(format!(
        "run {} is an MCP proxy's call (proxy session {}): nothing resumes it; the host's next identical call collects an approved request, and `countersign mcp-proxy recheck --config FILE --run RUN` asks the proxy's rules again",
        ident(run_id, 64),
        ident(&p.session, 64),
    ))
}

/// The names among `names` (a run's tools) this build does not register, escaped and listed.
fn foreign(names: &[String]) -> Option<String> {
    let missing: Vec<String> = names
        .iter()
        .filter(|t| !TOOL_NAMES.contains(&t.as_str()))
        .map(|t| clean(t, 80))
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// The names of the tools a run was started with (`run.created`'s spec hashes) and proposed.
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

/// The refusal of a run that uses tools this build does not register (`list`, escaped).
fn not_ours(run_id: &[u8], list: &str) -> CommandError {
    if list == super::AGENT_FINISH {
        return CommandError::Failed(format!(
            "run {} was made by `countersign agent` (its `{}` tool): continue it with the `agent ... --resume` line `agent` printed (the model is not stored with the run); `resume` runs the example consumer's scripted runs only",
            ident(run_id, 64),
            super::AGENT_FINISH,
        ));
    }
    CommandError::Failed(format!(
        "run {} uses tools this build does not register ({list}); countersign resumes only its example consumer's runs. A consumer resumes its own runs by embedding the runtime with its tools registered and calling Driver::resume(run_id) (see docs/architecture.md)",
        ident(run_id, 64),
    ))
}

/// Why this build cannot resume `run_id` of `db`, or `Ok` when it can: the example
/// consumer's tools, and on SQLite its backend (`backend`, else beside the database). On
/// PostgreSQL (a `postgres://` URL) the backend is not looked for here: resuming without one
/// says in one line to name it.
pub fn resumable(db: &Path, backend: Option<&Path>, run_id: &[u8]) -> Result<(), CommandError> {
    #[cfg(feature = "postgres")]
    if let Some(store) = super::open::pg_store(db)? {
        return pg::check(&store, run_id).map(drop);
    }
    resumable_with(db, &backend_or_beside(db, backend), run_id)
}

/// [`resumable`] on a PostgreSQL store already open (the console keeps one for these checks).
#[cfg(feature = "postgres")]
pub fn resumable_on(store: &crate::pgstore::PgStore, run_id: &[u8]) -> Result<(), CommandError> {
    pg::check(store, run_id).map(drop)
}

/// The backend named, else the one beside the SQLite database `db`.
fn backend_or_beside(db: &Path, backend: Option<&Path>) -> std::path::PathBuf {
    backend.map_or_else(|| backend_beside(db), Path::to_path_buf)
}

/// [`resumable`] with the backend at `backend`.
fn resumable_with(db: &Path, backend: &Path, run_id: &[u8]) -> Result<(), CommandError> {
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
            return Err(not_ours(run_id, &list));
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
    backend_exists(run_id, backend)
}

/// The backend must exist (the demo wrote it; a run's order backend is never created here).
fn backend_exists(run_id: &[u8], backend: &Path) -> Result<(), CommandError> {
    if std::fs::symlink_metadata(backend).is_err() {
        return Err(CommandError::Failed(format!(
            "run {} uses the example consumer's tools, but its backend {} is missing: countersign resumes the runs `countersign demo` wrote, whose order backend sits beside the run database (or where --backend names it)",
            ident(run_id, 64),
            super::text::path(backend, 400)
        )));
    }
    Ok(())
}

/// Resumes a run of the example consumer in `db` (a SQLite path or a `postgres://` URL) to
/// its next pause or end, with its order backend (`backend`, else beside a SQLite database;
/// required on PostgreSQL).
pub fn resume_run(
    db: &Path,
    backend: Option<&Path>,
    run_id: &[u8],
) -> Result<crate::runtime::types::Run, CommandError> {
    #[cfg(feature = "postgres")]
    if let Some(store) = super::open::pg_store(db)? {
        return pg::resume_run(store, backend, run_id);
    }
    resume_run_with(db, &backend_or_beside(db, backend), run_id)
}

/// [`resume_run`] with the backend at `backend`.
fn resume_run_with(
    db: &Path,
    backend: &Path,
    run_id: &[u8],
) -> Result<crate::runtime::types::Run, CommandError> {
    resumable_with(db, backend, run_id)?;
    let run_id = std::str::from_utf8(run_id).map_err(|_| {
        CommandError::Failed("this build resumes only runs whose id is UTF-8".into())
    })?;
    resume_demo_run(db, backend, run_id)
        .map_err(|e| CommandError::Failed(naming(&e.said(), &[db, backend], 4000)))
}

/// `resume` on a PostgreSQL run database (decision 0083): the same checks (not finished, the
/// example consumer's tools only, a UTF-8 id, its backend there), then the same driver.
#[cfg(feature = "postgres")]
pub(super) mod pg {
    use std::path::Path;
    use std::sync::Arc;

    use super::{CommandError, backend_exists, fail, ident, naming, not_ours};
    use crate::consumer::demo::resume_demo_run_pg;
    use crate::pgstore::PgStore;
    use crate::runtime::store::RunStore;
    use crate::runtime::types::Run;

    /// The tools `run_id` was started with and proposed (as SQLite's `tools_of`).
    pub(in crate::commands) fn tools_of(
        store: &PgStore,
        run_id: &[u8],
    ) -> Result<Vec<String>, CommandError> {
        let mut names = Vec::new();
        if let Some((kind, payload)) = store.first_event(run_id).map_err(fail)?
            && kind == "run.created"
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&payload)
            && let Some(hashes) = v["tools"].as_array()
        {
            for h in hashes.iter().filter_map(|h| h.as_str()) {
                match store.tool_spec(h) {
                    Ok(spec) => names.push(spec.name),
                    Err(_) => names.push(format!("(spec {h})")),
                }
            }
        }
        for s in RunStore::list_steps(store, run_id).map_err(fail)? {
            if let Some(d) = &s.decision
                && d.kind == "tool_call"
                && !d.tool.is_empty()
            {
                names.push(d.tool.clone());
            }
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// As SQLite's [`super::foreign_tools`].
    pub(in crate::commands) fn foreign_tools(
        store: &PgStore,
        run_id: &[u8],
    ) -> Result<Option<String>, CommandError> {
        if let Some(p) = store.proxy_call(run_id).ok().flatten() {
            return Err(super::proxy_run(run_id, &p));
        }
        Ok(super::foreign(&tools_of(store, run_id)?))
    }

    /// Why this build cannot resume `run_id` (finished, another program's tools, an id that
    /// is not UTF-8); `Ok`: its id as text.
    pub(super) fn check<'a>(store: &PgStore, run_id: &'a [u8]) -> Result<&'a str, CommandError> {
        let r = RunStore::get_run(store, run_id).map_err(fail)?;
        if r.status.is_terminal() {
            return Err(CommandError::Failed(format!(
                "run {} is {} and cannot be resumed",
                ident(r.id_bytes(), 64),
                r.status.as_str()
            )));
        }
        if let Some(list) = foreign_tools(store, run_id)? {
            return Err(not_ours(run_id, &list));
        }
        std::str::from_utf8(run_id).map_err(|_| {
            CommandError::Failed(format!(
                "run {} has an id that is not UTF-8; this build resumes only runs whose id is UTF-8",
                ident(run_id, 64)
            ))
        })
    }

    pub(super) fn resume_run(
        store: PgStore,
        backend: Option<&Path>,
        run_id: &[u8],
    ) -> Result<Run, CommandError> {
        let id = check(&store, run_id)?;
        let Some(backend) = backend else {
            return Err(CommandError::Usage(
                "on PostgreSQL, name the example consumer's order backend with --backend PATH (a run database on a server has nothing beside it)".into(),
            ));
        };
        backend_exists(run_id, backend)?;
        resume_demo_run_pg(Arc::new(store), backend, id)
            .map_err(|e| CommandError::Failed(naming(&e.said(), &[backend], 4000)))
    }
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

pub fn run(
    db: &Path,
    backend: Option<&Path>,
    json_out: bool,
    run_id: &[u8],
    out: &mut Out,
) -> Result<(), CommandError> {
    let r = resume_run(db, backend, run_id)?;
    report(&r, json_out, out)?;
    ended_well(&r)
}

/// Exit 0 when the resumed run completed or waits for a person again; 1 when it ended FAILED
/// or CANCELLED (as `agent` does), so a script's `resume && notify` never reports a run that
/// failed as done.
pub(super) fn ended_well(r: &crate::runtime::types::Run) -> Result<(), CommandError> {
    use crate::runtime::types::RunStatus;
    match r.status {
        RunStatus::Completed | RunStatus::WaitingForApproval => Ok(()),
        _ => Err(CommandError::Failed(format!(
            "run {} ended {}",
            ident(r.id_bytes(), 64),
            clean(r.status.as_str(), 64)
        ))),
    }
}

/// Prints where a resumed run is now.
fn report(
    r: &crate::runtime::types::Run,
    json_out: bool,
    out: &mut Out,
) -> Result<(), CommandError> {
    if json_out {
        return out.json(&json!({"run": summary_json(r, b"")}), &Raws::default());
    }
    out.line(&outcome_line(r))?;
    if r.status == crate::runtime::types::RunStatus::WaitingForApproval {
        out.line("the run waits for a person again: see `show` for the new approval")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::ended_well;
    use crate::runtime::types::{Run, RunStatus};

    /// A resumed run that failed or was cancelled exits 1 naming its end; one that completed
    /// or waits for a person again exits 0.
    #[test]
    fn a_run_that_ended_badly_is_not_reported_as_done() {
        let run = |status| Run {
            id: "r1".into(),
            status,
            ..Run::default()
        };
        assert!(ended_well(&run(RunStatus::Completed)).is_ok());
        assert!(ended_well(&run(RunStatus::WaitingForApproval)).is_ok());
        for s in [RunStatus::Failed, RunStatus::Cancelled] {
            let e = ended_well(&run(s.clone())).unwrap_err();
            assert_eq!(e.exit_code(), 1);
            assert_eq!(e.to_string(), format!("error: run r1 ended {}", s.as_str()));
        }
    }
}
