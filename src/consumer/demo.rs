//! The demo: a run database and a backend written THROUGH THE RUNTIME by the scripted agent,
//! holding a realistic review queue: refunds above the automatic limit waiting, one held by the
//! session cap, an interrupted side effect waiting for an operator, the prompt-injected request
//! with hostile text, and completed, failed, rejected and cancelled runs, plus one run whose
//! step row was damaged after the fact. [`resume_demo_run`] resumes one run with the consumer's
//! tools registered, so an approved refund executes exactly once.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

use crate::consumer::adapter::{self, ScenarioAgent};
use crate::consumer::backend::{Backend, BackendError};
use crate::consumer::crash;
use crate::consumer::dispatch::{Dispatcher, DispatcherOptions};
use crate::consumer::policy::ConsequencePolicy;
use crate::consumer::scenarios;
use crate::consumer::session::Session;
use crate::consumer::tools::Catalog;
use crate::runtime::driver::{
    Driver, RecheckReport, RecheckScope, RuntimeError, WorkOptions, WorkReport, default_limits,
    random_id,
};
use crate::runtime::operator::{self, OperatorError};
use crate::runtime::store::{Store, StoreError};
use crate::runtime::types::{Run, Timestamp};

/// What building or resuming the demo can fail with.
#[derive(Debug, Error)]
pub enum DemoError {
    #[error(
        "{path} already exists; the demo writes only new files, so pick another path or remove it"
    )]
    Exists { path: String },
    #[error("the demo backend failed: {0}")]
    Backend(#[from] BackendError),
    #[error("the demo run database failed: {0}")]
    Store(#[from] StoreError),
    #[error("the runtime refused or failed: {0}")]
    Runtime(#[from] RuntimeError),
    #[error("an operator action of the demo failed: {0}")]
    Operator(#[from] OperatorError),
    #[error("the demo could not start its async runtime: {0}")]
    Io(#[from] std::io::Error),
    #[error("the demo ended up in an unexpected state: {0}")]
    Unexpected(String),
}

impl DemoError {
    /// The message with the ids and paths it names as bytes and any command to paste kept
    /// as a command ([`Said`](crate::runtime::types::Said)), for a renderer that escapes text.
    pub fn said(&self) -> crate::runtime::types::Said {
        use crate::runtime::types::Said;
        match self {
            DemoError::Store(e) => Said::from("the demo run database failed: ").and(&e.said()),
            DemoError::Runtime(e) => Said::from("the runtime refused or failed: ").and(&e.said()),
            DemoError::Operator(e) => {
                Said::from("an operator action of the demo failed: ").and(&e.said())
            }
            other => Said::from(other.to_string()),
        }
    }
}

impl From<crash::CrashError> for DemoError {
    fn from(e: crash::CrashError) -> DemoError {
        match e {
            crash::CrashError::Store(e) => DemoError::Store(e),
            crash::CrashError::Runtime(e) => DemoError::Runtime(e),
            crash::CrashError::Io(e) => DemoError::Io(e),
            crash::CrashError::Unexpected(s) => DemoError::Unexpected(s),
        }
    }
}

/// One run of the demo and what it is there to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoRun {
    pub id: String,
    pub scenario: String,
    /// `completed`, `failed`, `waiting_over_limit`, `waiting_session_cap`, `waiting_injected`,
    /// `waiting_interrupted`, `rejected`, `cancelled`, `damaged`.
    pub role: String,
    /// The run's status after the build.
    pub status: String,
}

/// What [`build`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoSummary {
    pub run_db: PathBuf,
    pub backend_db: PathBuf,
    pub runs: Vec<DemoRun>,
}

impl DemoSummary {
    /// The runs playing `role`.
    pub fn with_role(&self, role: &str) -> Vec<&DemoRun> {
        self.runs.iter().filter(|r| r.role == role).collect()
    }
}

/// The lease owner name of demo drivers.
pub const DEMO_OWNER: &str = "countersign-demo";

fn dispatcher(backend: Arc<Backend>) -> Result<Arc<Dispatcher>, DemoError> {
    let catalog = Arc::new(Catalog::new().map_err(DemoError::Unexpected)?);
    Ok(Arc::new(Dispatcher::new(
        catalog,
        backend,
        ConsequencePolicy::default(),
        DispatcherOptions::default(),
    )))
}

/// Creates `path` exclusively (owner read/write only), refusing any existing file.
fn create_exclusive(path: &Path) -> Result<(), DemoError> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path).map(|_| ()).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => DemoError::Exists {
            path: path.display().to_string(),
        },
        _ => DemoError::Io(e),
    })
}

/// Runs `f` on a fresh multi-thread tokio runtime in its own thread, so the demo can be called
/// from anywhere, including from inside another async runtime.
fn on_runtime<T: Send>(
    f: impl FnOnce(&tokio::runtime::Runtime) -> Result<T, DemoError> + Send,
) -> Result<T, DemoError> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            f(&rt)
        })
        .join()
        .unwrap_or_else(|_| Err(DemoError::Unexpected("a demo thread panicked".into())))
    })
}

struct Builder {
    store: Arc<Store>,
    backend: Arc<Backend>,
    dispatcher: Arc<Dispatcher>,
    driver: Driver,
    runs: Vec<DemoRun>,
}

impl Builder {
    /// Records the session and starts a run of `scenario` through the runtime.
    async fn start(&mut self, scenario: &str, role: &str) -> Result<Run, DemoError> {
        let s = scenarios::named(scenario)
            .ok_or_else(|| DemoError::Unexpected(format!("no scenario {scenario}")))?;
        let id = random_id();
        self.backend
            .put_session(&Session::full(&id, s.user), s.name)?;
        let run = self
            .driver
            .start_with_id(&id, &s.goal, default_limits())
            .await?;
        self.runs.push(DemoRun {
            id: id.clone(),
            scenario: scenario.to_string(),
            role: role.to_string(),
            status: run.status.as_str().to_string(),
        });
        Ok(run)
    }

    fn expect(&self, run: &Run, status: &str) -> Result<(), DemoError> {
        if run.status.as_str() == status {
            Ok(())
        } else {
            Err(DemoError::Unexpected(format!(
                "run {} is {}, expected {status} ({}: {})",
                run.id,
                run.status.as_str(),
                run.reason,
                run.reason_detail
            )))
        }
    }
}

/// Writes the demo's run database at `run_db` and its backend at `backend_db`, both new files
/// (an existing file is refused, never overwritten). Must not be given the same path twice.
pub fn build(run_db: &Path, backend_db: &Path) -> Result<DemoSummary, DemoError> {
    if run_db == backend_db {
        return Err(DemoError::Unexpected(
            "the run database and the backend must be two different files".into(),
        ));
    }
    for p in [run_db, backend_db] {
        if std::fs::symlink_metadata(p).is_ok() {
            return Err(DemoError::Exists {
                path: p.display().to_string(),
            });
        }
    }
    create_exclusive(run_db)?;
    let backend = Arc::new(Backend::create_new(backend_db)?);
    let store = Arc::new(Store::open(run_db)?);
    let dispatcher = dispatcher(backend.clone())?;
    let agent = ScenarioAgent::by_session(backend.clone());
    let driver = adapter::driver(store.clone(), &dispatcher, agent, DEMO_OWNER, None)?;
    let mut b = Builder {
        store,
        backend,
        dispatcher,
        driver,
        runs: Vec::new(),
    };
    on_runtime(|rt| rt.block_on(write_first_runs(&mut b)))?;
    let crashed = write_crashed_run(&mut b, "partial_refund", "waiting_interrupted")?;
    on_runtime(|rt| rt.block_on(write_later_runs(&mut b, &crashed)))?;
    damage_one_row(run_db, &b)?;
    for r in &mut b.runs {
        r.status = b.store.get_run(&r.id)?.status.as_str().to_string();
    }
    Ok(DemoSummary {
        run_db: run_db.to_path_buf(),
        backend_db: backend_db.to_path_buf(),
        runs: b.runs,
    })
}

async fn write_first_runs(b: &mut Builder) -> Result<(), DemoError> {
    // (scenario, role, the status its run stops in), written in this order.
    for (scenario, role, status) in [
        ("small_refund", "completed", "COMPLETED"),
        ("address_change", "completed", "COMPLETED"),
        ("not_delivered", "failed", "FAILED"),
        ("session_cap", "waiting_session_cap", "WAITING_FOR_APPROVAL"),
        ("large_refund", "waiting_over_limit", "WAITING_FOR_APPROVAL"),
        ("injected", "waiting_injected", "WAITING_FOR_APPROVAL"),
    ] {
        let r = b.start(scenario, role).await?;
        b.expect(&r, status)?;
    }
    Ok(())
}

async fn write_later_runs(b: &mut Builder, crashed: &str) -> Result<(), DemoError> {
    // A new process takes the dead one's run over: the refund's outcome is unknown to the
    // runtime (the backend knows), so the step waits for an operator.
    let r = b.driver.resume(crashed).await?;
    b.expect(&r, "WAITING_FOR_APPROVAL")?;
    let r = b.start("late_refund", "waiting_over_limit").await?;
    b.expect(&r, "WAITING_FOR_APPROVAL")?;
    // A refund the operator turned down, and a request withdrawn before anyone decided.
    let r = b.start("full_refund", "rejected").await?;
    b.expect(&r, "WAITING_FOR_APPROVAL")?;
    let a = latest_approval(&b.store, &r.id)?;
    operator::reject(
        &b.store,
        &r.id,
        &a,
        "ops@example.test",
        "the customer reported one damaged item, not the whole order",
        Timestamp::now(),
    )?;
    let r = b.start("changed_mind", "cancelled").await?;
    b.expect(&r, "WAITING_FOR_APPROVAL")?;
    operator::cancel(
        &b.store,
        &r.id,
        "ops@example.test",
        "the customer withdrew the request",
        Timestamp::now(),
    )?;
    let r = b.start("status_check", "damaged").await?;
    b.expect(&r, "COMPLETED")?;
    Ok(())
}

fn latest_approval(store: &Store, run_id: &str) -> Result<String, DemoError> {
    store
        .list_approvals(run_id)?
        .pop()
        .map(|a| a.id)
        .ok_or_else(|| DemoError::Unexpected(format!("run {run_id} has no approval")))
}

/// Starts `scenario` under a driver that crashes after its first tool's effect landed (see
/// [`crash::crash_in_tool_call`]). The run is left RUNNING with its step `executing`.
fn write_crashed_run(b: &mut Builder, scenario: &str, role: &str) -> Result<String, DemoError> {
    let s = scenarios::named(scenario)
        .ok_or_else(|| DemoError::Unexpected(format!("no scenario {scenario}")))?;
    let id = random_id();
    b.backend.put_session(&Session::full(&id, s.user), s.name)?;
    let agent = ScenarioAgent::by_session(b.backend.clone());
    crash::crash_in_tool_call(&b.store, &b.dispatcher, agent, &id, &s.goal, true)?;
    b.runs.push(DemoRun {
        id: id.clone(),
        scenario: scenario.to_string(),
        role: role.to_string(),
        status: b.store.get_run(&id)?.status.as_str().to_string(),
    });
    Ok(id)
}

/// Writes invalid JSON into the first step's `decision_json` of the `damaged` run, with raw
/// SQL after the fact (what a broken writer or a disk fault would leave).
fn damage_one_row(run_db: &Path, b: &Builder) -> Result<(), DemoError> {
    let Some(run) = b.runs.iter().find(|r| r.role == "damaged") else {
        return Ok(());
    };
    let conn =
        rusqlite::Connection::open(run_db).map_err(|e| DemoError::Unexpected(e.to_string()))?;
    let n = conn
        .execute(
            "UPDATE steps SET decision_json = '{\"kind\":\"tool_call\",\"tool\":' WHERE run_id = ?1 AND idx = 0",
            [&run.id],
        )
        .map_err(|e| DemoError::Unexpected(e.to_string()))?;
    if n != 1 {
        return Err(DemoError::Unexpected(format!(
            "damaged {n} rows instead of 1"
        )));
    }
    Ok(())
}

/// Resumes demo run `run_id` through the runtime with the consumer's tools and policy
/// registered over the demo backend: an approved refund executes, once per approved request
/// (a second resume, or a resume after a crash, replays the recorded call key instead).
pub fn resume_demo_run(run_db: &Path, backend_db: &Path, run_id: &str) -> Result<Run, DemoError> {
    let driver = writing_driver(run_db, backend_db, DEMO_OWNER)?;
    let id = run_id.to_string();
    on_runtime(move |rt| rt.block_on(async move { Ok(driver.resume(&id).await?) }))
}

/// Resumes a run of the example consumer in a PostgreSQL run database, with its backend
/// `backend_db` (decision 0083: the same driver on the other store).
#[cfg(feature = "postgres")]
pub fn resume_demo_run_pg(
    store: Arc<crate::pgstore::PgStore>,
    backend_db: &Path,
    run_id: &str,
) -> Result<Run, DemoError> {
    let id = run_id.to_string();
    let backend_db = backend_db.to_path_buf();
    on_runtime(move |rt| {
        let driver = driver_on(store.into(), &backend_db, DEMO_OWNER)?;
        let run = rt.block_on(async move { driver.resume(&id).await });
        Ok(run?)
    })
}

/// The worker of [`work_demo_runs`] over a PostgreSQL run database.
#[cfg(feature = "postgres")]
pub fn work_demo_runs_pg(
    store: Arc<crate::pgstore::PgStore>,
    backend_db: &Path,
    opts: WorkOptions,
) -> Result<WorkReport, DemoError> {
    let backend_db = backend_db.to_path_buf();
    on_runtime(move |rt| {
        let driver = driver_on(store.into(), &backend_db, WORKER_OWNER)?;
        let report = rt.block_on(driver.work(opts));
        Ok(report?)
    })
}

/// Runs the worker (`Driver::work`) over the example consumer's runs in `run_db`, with its
/// backend `backend_db`: every run of this consumer's tools is resumed as soon as its approval
/// is granted or it is denied with feedback. Returns when `opts` says (stop, or idle).
pub fn work_demo_runs(
    run_db: &Path,
    backend_db: &Path,
    opts: WorkOptions,
) -> Result<WorkReport, DemoError> {
    let driver = writing_driver(run_db, backend_db, WORKER_OWNER)?;
    on_runtime(move |rt| rt.block_on(async move { Ok(driver.work(opts).await?) }))
}

/// Asks the example consumer's policy again, read-only, about run `run_id` of `run_db`
/// against its backend `backend_db` as it is now (`Driver::recheck`). Neither file is written.
pub fn recheck_demo_run(
    run_db: &Path,
    backend_db: &Path,
    run_id: &str,
    scope: RecheckScope,
) -> Result<RecheckReport, DemoError> {
    let store = Arc::new(Store::open_existing(run_db, true)?);
    let backend = Arc::new(Backend::open_read_only(backend_db)?);
    let dispatcher = dispatcher(backend.clone())?;
    let agent = ScenarioAgent::by_session(backend);
    let driver = adapter::driver(store, &dispatcher, agent, DEMO_OWNER, None)?;
    Ok(driver.recheck(run_id, scope)?)
}

/// [`recheck_demo_run`] on a PostgreSQL run database (the same driver's recheck, decision
/// 0083). It writes nothing, so its driver runs no sequencer (which would chain the inbox,
/// a write).
#[cfg(feature = "postgres")]
pub fn recheck_demo_run_pg(
    store: Arc<crate::pgstore::PgStore>,
    backend_db: &Path,
    run_id: &str,
    scope: RecheckScope,
) -> Result<RecheckReport, DemoError> {
    let backend = Arc::new(Backend::open_read_only(backend_db)?);
    let dispatcher = dispatcher(backend.clone())?;
    let agent = ScenarioAgent::by_session(backend);
    let id = run_id.to_string();
    on_runtime(move |_| {
        let driver = adapter::config(store, &dispatcher, agent, DEMO_OWNER, None)?
            .chain_events(false)
            .build()?;
        Ok(driver.recheck(&id, scope)?)
    })
}

/// A driver that writes to the run database `run_db` and the existing demo backend
/// `backend_db` (refused when it does not exist, rather than created empty), as `owner`.
fn writing_driver(run_db: &Path, backend_db: &Path, owner: &str) -> Result<Driver, DemoError> {
    let store = Arc::new(Store::open_existing(run_db, false)?);
    driver_on(store.into(), backend_db, owner)
}

/// The example consumer's driver on the run database `store` (SQLite's or PostgreSQL's), with
/// its backend `backend_db`, which must exist.
fn driver_on(
    store: crate::runtime::driver::RunDb,
    backend_db: &Path,
    owner: &str,
) -> Result<Driver, DemoError> {
    if std::fs::symlink_metadata(backend_db).is_err() {
        return Err(DemoError::Unexpected(format!(
            "the demo backend {} does not exist; build the demo first",
            backend_db.display()
        )));
    }
    let backend = Arc::new(Backend::open(backend_db)?);
    let dispatcher = dispatcher(backend.clone())?;
    let agent = ScenarioAgent::by_session(backend);
    Ok(adapter::driver(store, &dispatcher, agent, owner, None)?)
}

/// The lease owner name of workers.
pub const WORKER_OWNER: &str = "countersign-worker";

/// Where the backend of a demo run database lives: beside it, `<stem>.orders.db`
/// (`demo.db` → `demo.orders.db`). `countersign demo` writes it there and `countersign resume`
/// looks for it there. The stem is taken as its bytes: two names that are not UTF-8 (`\xff.db`, `\xfe.db`) have two
/// backends, never one lossy `\u{fffd}.orders.db` that both would write their effects into.
pub fn backend_beside(run_db: &Path) -> PathBuf {
    let mut name = run_db
        .file_stem()
        .map_or_else(|| std::ffi::OsString::from("runs"), |s| s.to_os_string());
    name.push(".orders.db");
    run_db.with_file_name(name)
}
