//! Findings of the reliability harnesses, kept as reproducers. A test here that fails today is
//! marked `#[ignore = "finding N: ..."]` until the owner of the code fixes it (the lead decides);
//! docs/reliability.md lists each finding.

mod runtime_support;

use std::sync::Arc;
use std::time::Duration;

use countersign::runtime::agent::{self, Scripted, ScriptedAgent};
use countersign::runtime::driver::Driver;
use countersign::runtime::operator;
use countersign::runtime::policy::{
    DefaultPolicy, Policy, PolicyDecision, PolicyError, PolicyRequest, RunView,
};
use countersign::runtime::store::Store;
use countersign::runtime::tools::SideEffect;
use countersign::runtime::types::{RunStatus, Timestamp};
use runtime_support::*;

/// A policy that lets an operator cancel the run while it evaluates, and takes long enough
/// for the lease heartbeat (every TTL/3) to find the lease gone before answering.
struct CancelledWhileEvaluating {
    store: Arc<Store>,
    pause: Duration,
}

impl Policy for CancelledWhileEvaluating {
    fn evaluate(&self, req: &PolicyRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        operator::cancel(&self.store, &req.run_id, "carol", "stop", Timestamp::now())
            .map_err(|e| e.to_string())?;
        std::thread::sleep(self.pause);
        DefaultPolicy.evaluate(req, view)
    }
}

/// Finding 1 (concurrency stress, 8 processes, 400 ms leases): an operator cancel that lands
/// after a step's decision is recorded and before its tool starts (here: while the policy
/// evaluates) clears the lease; the heartbeat's next renewal matches no row and marks the
/// lease lost; the tool-start write then fails with `ErrLeaseLost` ("agentrt: run lease lost:
/// run <id>", src/runtime/driver/dispatch.rs, the `!self.lease.ok()` check inside the write)
/// and the loop returns that error instead of the cancelled run, because only a run-state
/// error is explained (`RunCtx::write` -> `explain`). Spec 7 and 8.1: a failed write explained
/// by an operator cancel returns the cancelled run with no error. The database is right
/// (CANCELLED, `operator_cancelled`); only what the driver's caller is told differs. With
/// agentrt's 30 s lease the heartbeat ticks every 10 s, so the window is rare but open.
/// Starts a run whose policy lets an operator cancel it mid-evaluation and then waits `pause`;
/// returns what the driver's caller is told and whether the tool ran.
fn start_cancelled_during_policy(
    lease_ttl: Duration,
    pause: Duration,
) -> (Result<countersign::runtime::types::Run, String>, bool) {
    let db = db();
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let tools = registry(vec![echo("t", SideEffect::ReadOnly, calls.clone())]);
    let agent = ScriptedAgent::new([Scripted::Decide(agent::tool_call("t", "{}"))]);
    let policy = Arc::new(CancelledWhileEvaluating {
        store: db.store.clone(),
        pause,
    });
    let mut cfg = config(&db.store, tools, policy, agent);
    cfg.lease_ttl = lease_ttl;
    let d = Driver::new(cfg).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let run = rt
        .block_on(d.start_with_id("r", "g", limits()))
        .map_err(|e| e.to_string());
    let ran = !calls.lock().unwrap().is_empty();
    (run, ran)
}

/// The control for finding 1: when the tool-start write itself finds the cancel (no heartbeat
/// tick in between), the caller gets the cancelled run.
#[test]
fn cancel_found_by_the_tool_start_write_returns_the_cancelled_run() {
    let (run, ran) = start_cancelled_during_policy(Duration::from_secs(30), Duration::ZERO);
    let run = run.expect("a cancelled run is returned without an error");
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Cancelled, "operator_cancelled")
    );
    assert!(!ran, "nothing runs after the cancel");
}

#[test]
fn cancel_noticed_by_the_heartbeat_returns_the_cancelled_run() {
    // Lease 300 ms: the heartbeat ticks every 100 ms, so it finds the lease gone in 450 ms.
    let (run, ran) =
        start_cancelled_during_policy(Duration::from_millis(300), Duration::from_millis(450));
    let run = run.expect("a cancelled run is returned without an error");
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Cancelled, "operator_cancelled")
    );
    assert!(!ran, "nothing runs after the cancel");
}
