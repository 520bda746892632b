//! `demo`: writes a run database of the example consumer (through the runtime) with a real
//! review queue, and its order backend beside it, then opens the console on it.
//!
//! The demo never writes to a database it did not create: it takes `--db` or a path of its own
//! (never `COUNTERSIGN_DB`/`AGENTRT_DB`, which may name a real database), creates both files
//! exclusively, and on a second run opens the demo it made before (its backend beside it shows
//! it is one) instead of writing again.
//!
//! On a `postgres://` URL (`--db`, never `COUNTERSIGN_DB`) the demo is written the same way
//! into a SQLite file of its own under the temporary directory, then copied into the database
//! by `copy`, which takes only an empty database (decision 0083, amendment): so the demo never
//! writes into a database that holds anything. Its order backend is a local file the runtime
//! on this host uses, named by `--backend` (a server has nothing beside it).

use std::path::{Path, PathBuf};

use super::CommandError;
use super::out::Out;
use super::text::naming;
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
                super::text::path(db, 400),
                super::text::path(&backend, 400)
            )));
        }
        (false, true) => {
            return Err(CommandError::Failed(format!(
                "{} exists without its run database; remove it or pass --db with a new path",
                super::text::path(&backend, 400)
            )));
        }
        (false, false) => {}
    }
    create_parent(db)?;
    build(db, &backend)
        .map(Prepared::Built)
        .map_err(|e| CommandError::Failed(naming(&e.said(), &[db, &backend], 4000)))
}

/// Creates the folder `path` stands in, when it names one.
fn create_parent(path: &Path) -> Result<(), CommandError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            CommandError::Failed(format!(
                "cannot create {}: {e}",
                super::text::path(dir, 400)
            ))
        })?;
    }
    Ok(())
}

/// The line that counts the demo's runs waiting for a person.
fn say_waiting(s: &DemoSummary, out: &mut Out) -> Result<(), CommandError> {
    let waiting = s
        .runs
        .iter()
        .filter(|r| r.status == "WAITING_FOR_APPROVAL")
        .count();
    out.line(&format!("{waiting} runs wait for a person"))
}

/// The commands to try on the demo at `d` (a shell word): the console with `open_extra`
/// after `d`, the waiting runs, an approval, then the lines of `tail`.
fn say_try(out: &mut Out, d: &str, open_extra: &str, tail: &[String]) -> Result<(), CommandError> {
    out.line("try:")?;
    out.line(&format!("  countersign {d}{open_extra}"))?;
    out.line(&format!(
        "  countersign {d} runs --status waiting_for_approval"
    ))?;
    out.line(&format!("  countersign {d} approve RUN"))?;
    for line in tail {
        out.line(line)?;
    }
    Ok(())
}

/// What to print when the console is not opened (`--no-tui`) or after it closes.
pub fn describe(db: &Path, prepared: &Prepared, out: &mut Out) -> Result<(), CommandError> {
    let shown = super::text::path(db, 400);
    match prepared {
        Prepared::Built(s) => {
            out.line(&format!(
                "wrote the demo run database {shown} ({} runs) and its order backend {}",
                s.runs.len(),
                super::text::path(&s.backend_db, 400)
            ))?;
            say_waiting(s, out)?;
        }
        Prepared::Existing => out.line(&format!(
            "the demo at {shown} already exists (remove it and its .orders.db for a fresh one)"
        ))?,
    }
    match super::shell::db_arg(db) {
        Ok(d) => {
            say_try(
                out,
                &d,
                "",
                &["  (then resume RUN with the same --db; RUN is a run id)".to_string()],
            )?;
        }
        Err(why) => out.line(&format!(
            "the database path {} so no command can be printed for it",
            why.why()
        ))?,
    }
    Ok(())
}

/// Builds the demo into the empty PostgreSQL database `url`, its order backend at `backend`
/// (a new file), or recognises one built before (the backend there and runs in the database).
#[cfg(feature = "postgres")]
pub fn prepare_pg(url: &crate::pgstore::PgUrl, backend: &Path) -> Result<Prepared, CommandError> {
    use crate::pgstore::copy::{Endpoint, copy};
    let shown = super::text::clean(url.redacted(), 300);
    if std::fs::symlink_metadata(backend).is_ok() {
        let runs = crate::pgstore::PgStore::open_existing(url)
            .ok()
            .and_then(|s| s.count_runs_overview("", "").ok());
        return match runs {
            Some(n) if n > 0 => Ok(Prepared::Existing),
            _ => Err(CommandError::Failed(format!(
                "{} exists but {shown} holds no demo runs; remove it or pass another --backend",
                super::text::path(backend, 400)
            ))),
        };
    }
    create_parent(backend)?;
    // The runs are written through the runtime into a file of the demo's own, then copied.
    let mut name = [0u8; 8];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut name);
    let lite = std::env::temp_dir().join(format!("countersign-demo-{}.db", hex::encode(name)));
    let built = build(&lite, backend);
    let copied = built
        .as_ref()
        .ok()
        .map(|_| copy(&Endpoint::Sqlite(lite.clone()), &Endpoint::Pg(url.clone())));
    remove_sqlite(&lite);
    let summary = match (built, copied) {
        (Ok(s), Some(Ok(_))) => s,
        (Err(e), _) => {
            remove_sqlite(backend);
            return Err(CommandError::Failed(super::text::clean(
                &e.to_string(),
                4000,
            )));
        }
        (Ok(_), copied) => {
            // Nothing was written into the database: the backend made for it goes too.
            remove_sqlite(backend);
            // The copy's own refusal says what refused it (a database that is not empty,
            // events not chained yet) or what failed (a server that went away).
            let why = copied
                .and_then(Result::err)
                .map(|e| e.to_string())
                .unwrap_or_default();
            return Err(CommandError::Failed(format!(
                "the demo was not written into {shown}: {}",
                super::text::clean(&why, 4000)
            )));
        }
    };
    Ok(Prepared::Built(DemoSummary {
        run_db: std::path::PathBuf::from(url.for_commands()),
        ..summary
    }))
}

/// Removes a SQLite file this demo made, with what SQLite may have left beside it.
#[cfg(feature = "postgres")]
fn remove_sqlite(path: &Path) {
    for end in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(end);
        let _ = std::fs::remove_file(p);
    }
}

/// [`describe`] for a demo in PostgreSQL: the database named by its URL with the password
/// hidden, and `--backend` in every command printed.
#[cfg(feature = "postgres")]
pub fn describe_pg(
    url: &crate::pgstore::PgUrl,
    backend: &Path,
    prepared: &Prepared,
    out: &mut Out,
) -> Result<(), CommandError> {
    let shown = super::text::clean(url.redacted(), 300);
    let backend_shown = super::text::path(backend, 400);
    match prepared {
        Prepared::Built(s) => {
            out.line(&format!(
                "wrote the demo into {shown} ({} runs) and its order backend {backend_shown}",
                s.runs.len(),
            ))?;
            say_waiting(s, out)?;
        }
        Prepared::Existing => out.line(&format!(
            "the demo in {shown} already exists with its order backend {backend_shown}"
        ))?,
    }
    let named = url.for_commands();
    let words = super::shell::db_arg(Path::new(&named)).and_then(|d| {
        use std::os::unix::ffi::OsStrExt;
        super::shell::word(backend.as_os_str().as_bytes()).map(|b| (d, b))
    });
    match words {
        Ok((d, b)) => {
            say_try(
                out,
                &d,
                &format!(" --backend {b}"),
                &[
                    format!("  countersign {d} resume RUN --backend {b}"),
                    "  (RUN is a run id; the URL is printed without a password: give yours through PGPASSWORD or the password file)".to_string(),
                ],
            )?;
        }
        Err(why) => out.line(&format!(
            "the database URL or the backend's path {} so no command can be printed for it",
            why.why()
        ))?,
    }
    Ok(())
}
