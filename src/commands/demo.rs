//! `demo`: writes a run database of the example consumer (through the runtime) with a real
//! review queue, and its order backend beside it, then opens the console on it.
//!
//! The demo never writes to a database it did not create: it takes `--db` or a path of its own
//! (never `COUNTERSIGN_DB`/`AGENTRT_DB`, which may name a real database), creates both files
//! exclusively, and on a second run opens the demo it made before (its backend beside it shows
//! it is one) instead of writing again.

use std::path::{Path, PathBuf};

use super::CommandError;
use super::out::Out;
use super::text::clean;
use crate::consumer::demo::{DemoSummary, backend_beside, build};

/// `$XDG_DATA_HOME/countersign/demo.db`, else `~/.local/share/countersign/demo.db`, else a
/// folder under the temporary directory.
pub fn default_path() -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/share"))
        })
        .unwrap_or_else(std::env::temp_dir);
    base.join("countersign").join("demo.db")
}

/// What `demo` did: built a new demo, or found the one it built before.
pub enum Prepared {
    Built(DemoSummary),
    Existing,
}

/// Builds the demo at `db` (and its backend beside it), or recognises one built before.
pub fn prepare(db: &Path) -> Result<Prepared, CommandError> {
    let backend = backend_beside(db);
    let db_exists = std::fs::symlink_metadata(db).is_ok();
    let backend_exists = std::fs::symlink_metadata(&backend).is_ok();
    match (db_exists, backend_exists) {
        (true, true) => return Ok(Prepared::Existing),
        (true, false) => {
            return Err(CommandError::Failed(format!(
                "{} exists and is not a demo countersign wrote (no {} beside it); the demo never writes to a database it did not create: pass --db with a new path",
                clean(&db.to_string_lossy(), 400),
                clean(&backend.to_string_lossy(), 400)
            )));
        }
        (false, true) => {
            return Err(CommandError::Failed(format!(
                "{} exists without its run database; remove it or pass --db with a new path",
                clean(&backend.to_string_lossy(), 400)
            )));
        }
        (false, false) => {}
    }
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            CommandError::Failed(format!(
                "cannot create {}: {e}",
                clean(&dir.to_string_lossy(), 400)
            ))
        })?;
    }
    build(db, &backend)
        .map(Prepared::Built)
        .map_err(|e| CommandError::Failed(clean(&e.to_string(), 4000)))
}

/// What to print when the console is not opened (`--no-tui`) or after it closes.
pub fn describe(db: &Path, prepared: &Prepared, out: &mut Out) -> Result<(), CommandError> {
    let shown = clean(&db.to_string_lossy(), 400);
    match prepared {
        Prepared::Built(s) => {
            out.line(&format!(
                "wrote the demo run database {shown} ({} runs) and its order backend {}",
                s.runs.len(),
                clean(&s.backend_db.to_string_lossy(), 400)
            ))?;
            let waiting = s
                .runs
                .iter()
                .filter(|r| r.status == "WAITING_FOR_APPROVAL")
                .count();
            out.line(&format!("{waiting} runs wait for a person"))?;
        }
        Prepared::Existing => out.line(&format!(
            "the demo at {shown} already exists (remove it and its .orders.db for a fresh one)"
        ))?,
    }
    match super::shell::db_arg(db) {
        Ok(d) => {
            out.line("try:")?;
            out.line(&format!("  countersign {d}"))?;
            out.line(&format!(
                "  countersign {d} runs --status waiting_for_approval"
            ))?;
            out.line(&format!("  countersign {d} approve RUN"))?;
            out.line("  (then resume RUN with the same --db; RUN is a run id)")?;
        }
        Err(why) => out.line(&format!(
            "the database path {} so no command can be printed for it",
            why.why()
        ))?,
    }
    Ok(())
}
