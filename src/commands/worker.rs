//! `worker`: resumes the example consumer's runs as soon as they are decided (an approval
//! granted, or a denial with feedback), noticing decisions by SQLite's `data_version`, until
//! stopped (`--once`: one pass, then exit). Several workers and consoles may share one
//! database: the runtime's lease and compare-and-set writes execute each approved request once.

use std::path::Path;
use std::sync::Arc;

use super::CommandError;
use super::open::open;
use super::resume::outcome_line;
use super::text::{clean, naming};
use crate::consumer::demo::{backend_beside, work_demo_runs};
use crate::runtime::driver::{WorkEvent, WorkOptions, WorkReport};

/// One line for a worker event, or `None` for what is not worth a line (a scan). A one-pass
/// worker (`once`) does not try a failed resume again, so its line promises no retry.
pub fn event_line(e: &WorkEvent, once: bool) -> Option<String> {
    match e {
        WorkEvent::Scanned { .. } => None,
        WorkEvent::Resumed(run) => Some(format!("resumed {}", outcome_line(run))),
        WorkEvent::Taken { run_id, why } => Some(format!(
            "run {}: resumed elsewhere ({})",
            clean(run_id, 64),
            clean(why, 400)
        )),
        WorkEvent::Failed { run_id, error } => Some(format!(
            "run {}: resume failed{}: {}",
            clean(run_id, 64),
            if once {
                ""
            } else {
                ", tried again soon (after 1 s, doubling to 30 s) or at the next change"
            },
            clean(error, 4000)
        )),
    }
}

/// The options of a worker that prints its events to stdout (`--once`: one pass).
fn options(once: bool) -> WorkOptions {
    WorkOptions {
        idle_checks: once.then_some(0),
        observer: Some(Arc::new(move |e: &WorkEvent| {
            if let Some(line) = event_line(e, once) {
                // Not println!: a reader that went away (`worker | head -1`) would make it
                // panic; the lines are a report, the resumes go on without them.
                use std::io::Write;
                let _ = writeln!(std::io::stdout().lock(), "{line}");
            }
        })),
        ..WorkOptions::default()
    }
}

/// Why a worker cannot serve `db`, before it starts.
pub fn check(db: &Path) -> Result<(), CommandError> {
    drop(open(db, false)?);
    backend_present(&backend_beside(db))
}

/// The example consumer's backend must exist (a worker never creates one).
fn backend_present(backend: &Path) -> Result<(), CommandError> {
    if std::fs::symlink_metadata(backend).is_err() {
        return Err(CommandError::Failed(format!(
            "the example consumer's backend {} is missing: the worker serves the runs `countersign demo` or `countersign agent` wrote, whose order backend sits beside the run database (or where --backend names it)",
            super::text::clean_bytes(backend.as_os_str().as_encoded_bytes(), 400)
        )));
    }
    Ok(())
}

pub fn run(db: &Path, backend: Option<&Path>, once: bool) -> Result<(), CommandError> {
    #[cfg(feature = "postgres")]
    if let Some(store) = super::open::pg_store(db)? {
        // The same worker on PostgreSQL (decision 0083), woken by the inbox's id sequence.
        let Some(backend) = backend else {
            return Err(CommandError::Usage(
                "on PostgreSQL, name the example consumer's order backend with --backend PATH (a run database on a server has nothing beside it)".into(),
            ));
        };
        backend_present(backend)?;
        let say = |line: &str| {
            use std::io::Write;
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        };
        return pg::work(db, Some(store), backend, options(once), &say);
    }
    match backend {
        Some(b) => {
            drop(open(db, false)?);
            backend_present(b)?;
            work_demo_runs(db, b, options(once))
                .map_err(|e| CommandError::Failed(naming(&e.said(), &[db, b], 4000)))
                .and_then(failures)
        }
        None => {
            check(db)?;
            work(db, options(once)).and_then(failures)
        }
    }
}

/// A worker that returned (a one-pass worker, or one stopped) with failed resumes failed:
/// exit 1, so a job running `worker --once` sees that decided runs were left (found from
/// outside: it exited 0 with every resume refused).
fn failures(report: WorkReport) -> Result<(), CommandError> {
    match report.failed {
        0 => Ok(()),
        n => Err(CommandError::Failed(format!(
            "{n} resume(s) failed (each said above)"
        ))),
    }
}

/// Runs a worker with `opts` over `db` and its backend beside it.
pub fn work(db: &Path, opts: WorkOptions) -> Result<WorkReport, CommandError> {
    let backend = backend_beside(db);
    work_demo_runs(db, &backend, opts)
        .map_err(|e| CommandError::Failed(naming(&e.said(), &[db, &backend], 4000)))
}

/// A worker running on a thread of its own beside the console (`countersign demo`), silent:
/// the console shows what it did as the database changes. Stopped and joined on drop.
pub struct Beside {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts a silent worker over `db` beside the console, with the order backend `backend`
/// (else beside a SQLite database; on PostgreSQL it must be given).
pub fn beside(db: &Path, backend: Option<&Path>) -> Beside {
    let opts = WorkOptions::default();
    let stop = opts.stop.clone();
    let db = db.to_path_buf();
    let backend = backend.map(Path::to_path_buf);
    let thread = std::thread::Builder::new()
        .name("countersign-worker".into())
        .spawn(move || {
            #[cfg(feature = "postgres")]
            if let Some(b) = &backend
                && db.to_str().is_some_and(crate::pgstore::is_pg_url)
            {
                let _ = pg::work(&db, None, b, opts, &|_: &str| {});
                return;
            }
            let _ = match &backend {
                Some(b) => work_demo_runs(&db, b, opts).map(drop).map_err(drop),
                None => work(&db, opts).map(drop).map_err(drop),
            };
        })
        .ok();
    Beside { stop, thread }
}

impl Drop for Beside {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The worker on PostgreSQL, connected again whenever the server drops its connections.
#[cfg(feature = "postgres")]
mod pg {
    use std::path::Path;
    use std::sync::Arc;

    use super::super::CommandError;
    use super::super::open::pg_store_again;
    use super::super::text::{clean, naming};
    use crate::consumer::demo::work_demo_runs_pg;
    use crate::pgstore::{PgStore, PgUrl};
    use crate::runtime::driver::WorkOptions;

    /// Runs the example consumer's worker on `db` (with `store` when already connected) until
    /// `opts` says. When the server drops the connections (a restart, a failover), it says so
    /// through `say` and connects again ([`pg_store_again`]), then goes on: the runs decided
    /// meanwhile are found by its first scan. A failure that leaves the server reachable (a
    /// damaged row, a refusal), or any failure of a one-pass worker (`idle_checks`), ends it
    /// with that error.
    pub(super) fn work(
        db: &Path,
        store: Option<PgStore>,
        backend: &Path,
        opts: WorkOptions,
        say: &dyn Fn(&str),
    ) -> Result<(), CommandError> {
        let failed = |e: crate::consumer::demo::DemoError| {
            CommandError::Failed(naming(&e.said(), &[backend], 4000))
        };
        let url = PgUrl::parse(&db.to_string_lossy())
            .map_err(|e| CommandError::Usage(clean(&e.to_string(), 600)))?;
        let again = |say: &dyn Fn(&str)| {
            pg_store_again(&url, &opts.stop, &|l: &str| say(&format!("worker: {l}"))).map(Arc::new)
        };
        let mut store = match store.map(Arc::new).or_else(|| again(say)) {
            Some(s) => s,
            None => return Ok(()),
        };
        loop {
            let kept = store.clone();
            let e = match work_demo_runs_pg(store, backend, opts.clone()) {
                Ok(report) => return super::failures(report),
                Err(e) => e,
            };
            // Lost, or refused while the server answers: one plain read tells which.
            if opts.idle_checks.is_some() || kept.server_clock().is_ok() {
                return Err(failed(e));
            }
            say(&format!(
                "worker: the database's connection was lost ({}); connecting again",
                clean(&e.to_string(), 400)
            ));
            store = match again(say) {
                Some(s) => s,
                None => return Ok(()),
            };
            say("worker: connected again; the runs decided meanwhile are resumed now");
        }
    }
}
