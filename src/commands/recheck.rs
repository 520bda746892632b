//! `recheck <run>`: asks the example consumer's policy again, read-only, about the run's calls
//! waiting on a person (`--all`: every recorded evaluation), against the run database and the
//! order backend as they are now, and prints where today's answer differs from the recorded
//! one. Exit 0 when every answer is the same, 1 when one differs or nothing could be
//! re-checked. Nothing is written.

use std::path::Path;

use serde_json::json;

use super::CommandError;
use super::open::{fail, open};
use super::out::{Out, Raws};
use super::text::{clean, ident};
use crate::consumer::demo::{backend_beside, recheck_demo_run};
use crate::runtime::driver::{RecheckReport, RecheckScope, Rechecked};
use crate::runtime::types::PolicyDecision;

/// Why this build cannot recheck `run_id` of the SQLite database `db` with the order backend
/// `backend`: tools it does not register, or no backend. `Ok`: the run's id as text.
fn recheckable(db: &Path, backend: &Path, run_id: &[u8]) -> Result<String, CommandError> {
    let store = open(db, false)?;
    let run = store.get_run_capped(run_id).map_err(fail)?;
    let foreign = super::resume::foreign_tools(&store, run_id)?;
    askable(run_id, run.id_bytes(), foreign, backend)
}

/// The checks both stores make once the run is found: the example consumer's tools only
/// (`foreign` lists the others), a UTF-8 id, the backend there.
fn askable(
    run_id: &[u8],
    id: &[u8],
    foreign: Option<String>,
    backend: &Path,
) -> Result<String, CommandError> {
    if let Some(list) = foreign {
        if list == super::AGENT_FINISH {
            return Err(CommandError::Failed(format!(
                "recheck: run {} was made by `countersign agent`, whose policy adds its `{list}` tool to the example consumer's; recheck asks the consumer's policy alone, so it does not ask about this run",
                ident(run_id, 64),
            )));
        }
        return Err(CommandError::Failed(format!(
            "recheck: run {} uses tools this build does not register ({list}); only the program that owns its policy can ask it again",
            ident(run_id, 64),
        )));
    }
    let id = std::str::from_utf8(id).map_err(|_| {
        CommandError::Failed(format!(
            "recheck: run {} has an id that is not UTF-8; this build rechecks only runs whose id is UTF-8",
            ident(run_id, 64)
        ))
    })?;
    if std::fs::symlink_metadata(backend).is_err() {
        return Err(CommandError::Failed(format!(
            "recheck: the example consumer's backend {} is missing, so its policy cannot be asked about run {}",
            super::text::path(backend, 400),
            ident(run_id, 64)
        )));
    }
    Ok(id.to_string())
}

/// Asks the example consumer's policy again about `run_id` of `db` (a SQLite path or, with
/// the `postgres` feature, a `postgres://` URL) with its order backend (`backend`, else beside
/// a SQLite database; required on PostgreSQL).
fn ask(
    db: &Path,
    backend: Option<&Path>,
    run_id: &[u8],
    scope: RecheckScope,
) -> Result<RecheckReport, CommandError> {
    let failed = |e: crate::consumer::demo::DemoError| {
        CommandError::Failed(format!("recheck: {}", clean(&e.to_string(), 4000)))
    };
    #[cfg(feature = "postgres")]
    if let Some(store) = super::open::pg_store(db)? {
        use crate::runtime::store::RunStore;
        let run = RunStore::get_run(&store, run_id).map_err(fail)?;
        let foreign = super::resume::pg::foreign_tools(&store, run_id)?;
        let Some(backend) = backend else {
            return Err(CommandError::Usage(
                "recheck: on PostgreSQL, name the example consumer's order backend with --backend PATH (a run database on a server has nothing beside it)".into(),
            ));
        };
        let id = askable(run_id, run.id_bytes(), foreign, backend)?;
        let store = std::sync::Arc::new(store);
        return crate::consumer::demo::recheck_demo_run_pg(store, backend, &id, scope)
            .map_err(failed);
    }
    let backend = backend.map_or_else(|| backend_beside(db), Path::to_path_buf);
    let id = recheckable(db, &backend, run_id)?;
    recheck_demo_run(db, &backend, &id, scope).map_err(failed)
}

/// The console's recheck (its worker thread calls it through the resume hook): the same
/// read-only question as the command, or the sentence saying why this build cannot ask it.
pub(super) fn for_console(
    db: &Path,
    backend: Option<&Path>,
    run_id: &str,
) -> Result<RecheckReport, String> {
    ask(db, backend, run_id.as_bytes(), RecheckScope::Awaiting).map_err(|e| {
        let m = e.into_message();
        m.strip_prefix("recheck: ").unwrap_or(&m).to_string()
    })
}

fn answer(d: &PolicyDecision) -> String {
    if d.reason.is_empty() {
        d.outcome.to_string()
    } else {
        format!("{}: {}", d.outcome, d.reason)
    }
}

pub(super) fn report_json(r: &RecheckReport) -> serde_json::Value {
    let checked: Vec<serde_json::Value> = r
        .checked
        .iter()
        .map(|c| {
            let now = match &c.now {
                Ok(d) => json!({"outcome": d.outcome, "reason": d.reason, "kind": d.kind}),
                Err(e) => json!({"error": e.to_string()}),
            };
            json!({
                "step_index": c.step_index,
                "step_id": c.step_id,
                "tool": c.tool,
                "recorded": {"outcome": c.recorded.outcome, "reason": c.recorded.reason, "kind": c.recorded.kind},
                "now": now,
                "same": c.differences.is_empty(),
                "differences": c.differences,
            })
        })
        .collect();
    let skipped: Vec<serde_json::Value> = r
        .skipped
        .iter()
        .map(|s| json!({"step_index": s.step_index, "why": s.why}))
        .collect();
    json!({"run_id": r.run_id, "differs": r.differs(), "checked": checked, "skipped": skipped})
}

/// A report's lines: differences first, then what is the same, then what could not be asked.
pub(super) fn print_report(r: &RecheckReport, out: &mut Out) -> Result<(), CommandError> {
    for c in r.checked.iter().filter(|c| !c.differences.is_empty()) {
        out.line(&checked_line(c, "DIFFERS from the recorded answer"))?;
        for d in &c.differences {
            out.line(&format!("  {}", clean(d, 4000)))?;
        }
    }
    for c in r.checked.iter().filter(|c| c.differences.is_empty()) {
        out.line(&checked_line(c, "same as recorded"))?;
    }
    for s in &r.skipped {
        out.line(&format!(
            "step {}: not re-checked: {}",
            s.step_index,
            clean(&s.why, 400)
        ))?;
    }
    Ok(())
}

pub fn run(
    db: &Path,
    backend: Option<&Path>,
    json_out: bool,
    run_id: &[u8],
    all: bool,
    out: &mut Out,
) -> Result<(), CommandError> {
    let scope = if all {
        RecheckScope::All
    } else {
        RecheckScope::Awaiting
    };
    let r = ask(db, backend, run_id, scope)?;
    if json_out {
        out.json(&report_json(&r), &Raws::default())?;
    } else {
        print_report(&r, out)?;
        out.line(&format!(
            "run {}: {} decision(s) re-checked, {} not re-checkable; {}",
            ident(run_id, 64),
            r.checked.len(),
            r.skipped.len(),
            if r.differs() {
                "today's policy answers differently"
            } else {
                "the same"
            }
        ))?;
    }
    if r.differs() {
        return Err(CommandError::Failed(format!(
            "recheck: the policy now answers differently for run {}; read the differences above before deciding",
            ident(run_id, 64)
        )));
    }
    if r.checked.is_empty() {
        return Err(CommandError::Failed(format!(
            "recheck: no decision of the policy was re-checked for run {} ({} not re-checkable){}",
            ident(run_id, 64),
            r.skipped.len(),
            if all {
                ""
            } else {
                "; none waits on a person (--all asks about every recorded one)"
            }
        )));
    }
    Ok(())
}

/// A checked step's line: its index and tool, `verdict`, then the recorded answer.
fn checked_line(c: &Rechecked, verdict: &str) -> String {
    format!(
        "step {} ({}): {verdict} ({})",
        c.step_index,
        clean(&c.tool, 80),
        clean(&answer(&c.recorded), 400)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::demo::build;
    use crate::runtime::store::Store;
    use crate::runtime::types::RunStatus;

    #[test]
    fn the_consoles_recheck_asks_the_consumer_policy_and_says_why_it_cannot() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("demo.db");
        build(&db, &backend_beside(&db)).unwrap();
        let store = Store::open_existing(&db, true).unwrap();
        let run = store
            .list_runs_page(100, 0)
            .unwrap()
            .items
            .into_iter()
            .find(|r| r.status == RunStatus::WaitingForApproval)
            .unwrap();
        drop(store);
        let before = std::fs::read(&db).unwrap();
        let r = for_console(&db, None, &run.id).unwrap();
        assert_eq!(r.checked.len(), 1, "{r:?}");
        assert!(!r.differs(), "{r:?}");
        assert_eq!(std::fs::read(&db).unwrap(), before, "nothing written");
        std::fs::remove_file(backend_beside(&db)).unwrap();
        let e = for_console(&db, None, &run.id).unwrap_err();
        assert!(e.starts_with("the example consumer's backend"), "{e}");
    }
}
