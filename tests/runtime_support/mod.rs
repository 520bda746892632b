//! Shared test support for the runtime tests: real stores in temp dirs, deterministic ids and
//! clocks, tools from closures, event reads, and the outside verifier.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign::runtime::agent::{Agent, ScriptedAgent};
use countersign::runtime::clock::{self, Clock};
use countersign::runtime::driver::{Config, Driver, IdGen, default_limits};
use countersign::runtime::policy::Policy;
use countersign::runtime::store::Store;
use countersign::runtime::tools::{FnTool, Registry, SideEffect, Tool, ToolDef, ToolOutput};
use countersign::runtime::types::{Event, Limits, Run, Timestamp};

/// `<manifest>/../shared`, else `/work/shared`.
pub fn shared_dir() -> PathBuf {
    let m = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if m.join("tools").is_dir() {
        return m;
    }
    PathBuf::from("/work/shared")
}

pub struct Db {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
    pub store: Arc<Store>,
}

pub fn db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let store = Arc::new(Store::open(&path).unwrap());
    Db { dir, path, store }
}

/// Ids `id-1`, `id-2`, ...
pub fn ids() -> IdGen {
    let n = Arc::new(AtomicU64::new(0));
    Arc::new(move || format!("id-{}", n.fetch_add(1, Ordering::SeqCst) + 1))
}

pub fn start_time() -> Timestamp {
    Timestamp::parse("2026-09-25T14:03:04.5Z").unwrap()
}

/// A clock that moves 1 ms per reading.
pub fn clock() -> Clock {
    clock::stepping(start_time(), 1_000_000).0
}

pub fn def(name: &str, side: SideEffect, schema: &str) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: format!("{name} tool"),
        input_schema: schema.as_bytes().to_vec(),
        side_effect: side,
        timeout: Duration::from_secs(5),
        terminal: false,
    }
}

pub const OBJ: &str = r#"{"type":"object"}"#;

/// A tool that returns its arguments as content and counts its calls.
pub fn echo(
    name: &str,
    side: SideEffect,
    calls: Arc<Mutex<Vec<countersign::runtime::tools::ToolCall>>>,
) -> Arc<dyn Tool> {
    let n = name.to_string();
    FnTool::new(def(name, side, OBJ), move |c| {
        calls.lock().unwrap().push(c.clone());
        let n = n.clone();
        Box::pin(async move {
            Ok(ToolOutput {
                content: c.args.clone(),
                summary: format!("{n} ok"),
            })
        })
    })
}

/// What an [`echo`] tool was called with, in order.
pub type Calls = Arc<Mutex<Vec<countersign::runtime::tools::ToolCall>>>;

/// A registry of one [`echo`] tool, and the calls it will record.
pub fn echo_registry(name: &str, side: SideEffect) -> (Registry, Calls) {
    let calls = Calls::default();
    (registry(vec![echo(name, side, calls.clone())]), calls)
}

pub fn registry(tools: Vec<Arc<dyn Tool>>) -> Registry {
    let mut r = Registry::new();
    for t in tools {
        r.register(t).unwrap();
    }
    r
}

pub fn config(
    store: &Arc<Store>,
    tools: Registry,
    policy: Arc<dyn Policy>,
    agent: Arc<dyn Agent>,
) -> Config<Arc<dyn Agent>> {
    gate_config(store, tools, policy).agent(agent)
}

/// The configuration [`config`] makes, without an agent: what a Gate is built from.
pub fn gate_config(
    store: &Arc<Store>,
    tools: Registry,
    policy: Arc<dyn Policy>,
) -> countersign::runtime::driver::Config {
    let mut c = Config::new(store.clone(), tools, policy);
    c.now = Some(clock());
    c.ids = Some(ids());
    c.lease_owner = "test".into();
    c
}

/// A Gate over `store` with the test clock, ids and owner.
pub fn gate(
    store: &Arc<Store>,
    tools: Registry,
    policy: Arc<dyn Policy>,
) -> countersign::runtime::driver::Gate {
    gate_config(store, tools, policy).gate().unwrap()
}

pub fn driver(
    store: &Arc<Store>,
    tools: Registry,
    policy: Arc<dyn Policy>,
    agent: Arc<ScriptedAgent>,
) -> Driver {
    Driver::new(config(store, tools, policy, agent)).unwrap()
}

/// Run `r` (goal `g`, default limits) started on `driver` and driven until it stops, on a
/// fresh runtime.
pub fn start_r(driver: &Driver) -> Run {
    rt().block_on(driver.start_with_id("r", "g", limits()))
        .unwrap()
}

pub fn limits() -> Limits {
    default_limits()
}

/// Every event of a run, in seq order.
pub fn events(store: &Store, run_id: &str) -> Vec<Event> {
    store.list_events_page(run_id, 10_000, 0).unwrap().items
}

/// (type, payload) pairs of a run's events.
pub fn kinds(store: &Store, run_id: &str) -> Vec<(String, String)> {
    events(store, run_id)
        .into_iter()
        .map(|e| (e.kind, e.payload))
        .collect()
}

pub fn types(store: &Store, run_id: &str) -> Vec<String> {
    events(store, run_id).into_iter().map(|e| e.kind).collect()
}

/// Runs the outside verifier; panics with its output unless it exits 0.
pub fn verify(path: &Path) {
    let script = shared_dir().join("tools/agentrt_verify.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "agentrt_verify failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Operator approve (the real operator function, wall clock).
pub fn approve(store: &Store, run_id: &str, approval_id: &str, by: &str) {
    countersign::runtime::operator::approve(store, run_id, approval_id, by, "ok", Timestamp::now())
        .unwrap();
}

/// The run's latest approval.
pub fn latest_approval(store: &Store, run_id: &str) -> countersign::runtime::types::Approval {
    store
        .list_approvals(run_id)
        .unwrap()
        .pop()
        .expect("an approval")
}

/// A second driver on the same database: random ids so they do not collide with the first's.
pub fn driver2(
    store: &Arc<Store>,
    tools: Registry,
    policy: Arc<dyn Policy>,
    agent: Arc<ScriptedAgent>,
) -> Driver {
    let mut c = config(store, tools, policy, agent);
    c.ids = None;
    Driver::new(c).unwrap()
}

/// Operator reject (the real operator function, wall clock).
pub fn reject(store: &Store, run_id: &str, approval_id: &str, by: &str, note: &str) {
    countersign::runtime::operator::reject(store, run_id, approval_id, by, note, Timestamp::now())
        .unwrap();
}

/// Operator cancel (wall clock).
pub fn cancel(store: &Store, run_id: &str, by: &str, note: &str) {
    countersign::runtime::operator::cancel(store, run_id, by, note, Timestamp::now()).unwrap();
}

/// A multi-thread tokio runtime with two workers, as the runtime tests drive the driver on.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// How racing resumes of one run ended: how many paused it for a person again, and how many
/// were refused as `ErrRunState` (another resume got there first).
pub fn paused_and_refused(
    results: &[Result<Run, countersign::runtime::driver::RuntimeError>],
) -> (usize, usize) {
    let paused = results
        .iter()
        .filter(|r| {
            r.as_ref().is_ok_and(|run| {
                run.status == countersign::runtime::types::RunStatus::WaitingForApproval
            })
        })
        .count();
    let refused = results
        .iter()
        .filter(|r| r.as_ref().is_err_and(|e| e.is_run_state()))
        .count();
    (paused, refused)
}
