//! Issue 15's loop through the real runtime and the example consumer: deny with feedback
//! (item 7), the worker (item 6, in process; the race between processes is in cli_worker.rs),
//! recheck (item 3) and the scripted agent that reads its observations (item 5).

mod consumer_support;
mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use consumer_support::approve_latest;
use consumer_support::rt::{World, world};
use countersign::consumer::scenarios;
use countersign::runtime::driver::{Driver, RecheckScope, WorkOptions};
use countersign::runtime::operator::{self, OperatorError};
use countersign::runtime::store::Store;
use countersign::runtime::types::{ApprovalStatus, RunStatus, StepStatus, Timestamp};
use serde_json::{Value, json};

fn refund(order: &str, cents: i64) -> Value {
    json!({"order_id": order, "amount_cents": cents, "reason": "damaged"})
}

fn refunds(w: &World, order: &str) -> Vec<i64> {
    w.backend
        .ledger()
        .unwrap()
        .iter()
        .filter(|e| e.order_id == order)
        .map(|e| e.amount_cents)
        .collect()
}

fn answer(run: &countersign::runtime::types::Run) -> String {
    let v: Value = serde_json::from_str(&run.result_json).expect("a result");
    v["answer"].as_str().unwrap_or_default().to_string()
}

/// The large refund scenario (65.00 on ord_1004), started for cu_ana: it waits.
async fn large_refund(w: &World, id: &str) -> Driver {
    let s = scenarios::named("large_refund").unwrap();
    w.backend
        .put_session(
            &countersign::consumer::session::Session::full(id, s.user),
            s.name,
        )
        .unwrap();
    let d = w.driver(s);
    let run = d
        .start_with_id(id, "coat", countersign::runtime::driver::default_limits())
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    d
}

#[tokio::test]
async fn deny_with_a_note_runs_nothing_and_the_agent_decides_again_on_the_note() {
    let w = world();
    let d = large_refund(&w, "deny").await;
    let a = operator::pending_approval(&w.store, "deny", None).unwrap();
    let request_before = a.request_json.clone();
    let done = operator::deny_shown(
        &w.store,
        "deny",
        &a.id,
        &a.hash,
        "rita",
        "only 30.00 is refundable for that coat",
        Timestamp::now(),
    )
    .unwrap();
    // The call did not run; the run is handed back to its program, not cancelled.
    assert_eq!(done.run.status, RunStatus::Interrupted);
    assert!(done.run.lease_owner.is_empty());
    assert_eq!(done.approval.status, ApprovalStatus::Rejected);
    assert_eq!(done.approval.note, "only 30.00 is refundable for that coat");
    let kinds: Vec<&str> = done.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["approval.decided", "step.failed"]);
    let step = &w.steps("deny")[0];
    assert_eq!(step.status, StepStatus::Failed);
    let obs = step.observation.as_ref().unwrap();
    assert_eq!(obs.kind, "policy_denied");
    let content: Value = serde_json::from_slice(&obs.content).unwrap();
    assert_eq!(content["note"], "only 30.00 is refundable for that coat");
    assert_eq!(content["by"], "rita");
    assert!(refunds(&w, "ord_1004").is_empty());
    // The stored request is never edited.
    let a_after = w.store.get_approval("deny", &a.id).unwrap();
    assert_eq!(a_after.request_json, request_before);
    assert_eq!(a_after.hash, a.hash);
    support::assert_verifies(w.store.path());

    // agentrt's resume of an INTERRUPTED run (spec 8.3) continues it: the agent is handed the
    // note and decides again (the scripted one ends saying so, never claiming the refund).
    let run = d.resume("deny").await.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    let said = answer(&run);
    assert!(said.contains("only 30.00 is refundable"), "{said}");
    assert!(!said.contains("Refunded"), "{said}");
    assert!(
        refunds(&w, "ord_1004").is_empty(),
        "the denied call never ran"
    );
    let events = w.store.list_events_page("deny", 100, 0).unwrap().items;
    assert!(
        events
            .iter()
            .any(|e| e.kind == "run.resumed" && e.payload == r#"{"after":"interruption"}"#)
    );
    support::assert_verifies(w.store.path());
}

#[tokio::test]
async fn deny_needs_a_note_and_the_hash_that_was_shown() {
    let w = world();
    large_refund(&w, "d2").await;
    let a = operator::pending_approval(&w.store, "d2", None).unwrap();
    let now = Timestamp::now();
    let blank = operator::deny_shown(&w.store, "d2", &a.id, &a.hash, "rita", "  ", now);
    assert!(matches!(blank, Err(OperatorError::Store(_))), "{blank:?}");
    let other = operator::deny_shown(&w.store, "d2", &a.id, "00ff", "rita", "no", now);
    assert!(
        matches!(other, Err(OperatorError::Changed { .. })),
        "{other:?}"
    );
    // Nothing changed by either refusal.
    assert_eq!(
        w.store.get_run("d2").unwrap().status,
        RunStatus::WaitingForApproval
    );
    operator::deny_shown(&w.store, "d2", &a.id, &a.hash, "rita", "no", now).unwrap();
    let again = operator::deny_shown(&w.store, "d2", &a.id, &a.hash, "rita", "no", now);
    assert!(
        matches!(again, Err(OperatorError::RunNotWaiting { .. })),
        "{again:?}"
    );
}

#[tokio::test]
async fn the_agent_never_claims_a_refund_the_backend_refused() {
    // The ord_1004 story: a refund of 65.00 waits; meanwhile refunds on the same order leave
    // 50.00 refundable; the approved refund is denied on resume, and the agent says so.
    let w = world();
    let d = large_refund(&w, "stale").await;
    w.run_calls(
        "o1",
        "cu_ana",
        &[("issue_refund", refund("ord_1004", 5000))],
    )
    .await;
    w.run_calls(
        "o2",
        "cu_ana",
        &[("issue_refund", refund("ord_1004", 5000))],
    )
    .await;
    assert_eq!(refunds(&w, "ord_1004"), [5000, 5000]);
    approve_latest(&w.store, "stale");
    let run = d.resume("stale").await.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(refunds(&w, "ord_1004"), [5000, 5000], "not executed");
    let said = answer(&run);
    assert!(!said.contains("Refunded 65.00"), "{said}");
    assert!(
        said.contains("Not done: issue_refund on ord_1004"),
        "{said}"
    );
}

#[tokio::test]
async fn recheck_same_policy_is_same() {
    let w = world();
    let d = large_refund(&w, "same").await;
    let r = d.recheck("same", RecheckScope::Awaiting).unwrap();
    assert_eq!(r.checked.len(), 1, "{r:?}");
    assert!(!r.differs(), "{r:?}");
    assert_eq!(r.checked[0].recorded.outcome, "require_approval");
}

#[tokio::test]
async fn recheck_stricter_state_names_the_step_that_differs() {
    // After 100.00 of the 150.00 was refunded elsewhere, the pending 65.00 exceeds what is
    // refundable: today's policy denies it, and the presentation's facts are stale.
    let w = world();
    let d = large_refund(&w, "stale").await;
    w.run_calls(
        "o1",
        "cu_ana",
        &[("issue_refund", refund("ord_1004", 5000))],
    )
    .await;
    w.run_calls(
        "o2",
        "cu_ana",
        &[("issue_refund", refund("ord_1004", 5000))],
    )
    .await;
    let r = d.recheck("stale", RecheckScope::Awaiting).unwrap();
    assert!(r.differs(), "{r:?}");
    let c = &r.checked[0];
    assert_eq!(c.step_index, 0);
    let now = c.now.as_ref().unwrap();
    assert_eq!(now.outcome, "deny");
    assert!(
        c.differences
            .iter()
            .any(|d| d.starts_with("policy now: deny: invalid_state")),
        "{:?}",
        c.differences
    );
}

#[tokio::test]
async fn recheck_changed_presentation_differs_by_hash() {
    // One refund of 20.00 elsewhere: the 65.00 still needs a person, but the facts shown
    // changed (refundable 15000 -> 13000), so a grant of the recorded approval would not run.
    let w = world();
    let d = large_refund(&w, "facts").await;
    w.run_calls(
        "o1",
        "cu_ana",
        &[("issue_refund", refund("ord_1004", 2000))],
    )
    .await;
    let r = d.recheck("facts", RecheckScope::Awaiting).unwrap();
    let c = &r.checked[0];
    assert_eq!(c.now.as_ref().unwrap().outcome, "require_approval");
    assert!(
        c.differences
            .iter()
            .any(|d| d.starts_with("presentation.refundable_cents: 15000 -> 13000")),
        "{:?}",
        c.differences
    );
    assert!(
        c.differences
            .iter()
            .any(|d| d.starts_with("approval hash:")),
        "{:?}",
        c.differences
    );
}

#[tokio::test]
async fn recheck_writes_nothing() {
    let w = world();
    let d = large_refund(&w, "ro").await;
    w.run_calls(
        "o1",
        "cu_ana",
        &[("issue_refund", refund("ord_1004", 2000))],
    )
    .await;
    let dir = w.store.path().parent().unwrap().to_path_buf();
    let snapshot = || {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                // A reader takes its read mark in the shared-memory index; no row is there.
                let bytes = if name.ends_with("-shm") {
                    Vec::new()
                } else {
                    std::fs::read(&p).unwrap()
                };
                (name, bytes)
            })
            .collect();
        files.sort();
        files
    };
    let head = w.store.chain_head().unwrap();
    drop(d);
    let before = snapshot();
    let r = countersign::consumer::demo::recheck_demo_run(
        w.store.path(),
        &dir.join("backend.db"),
        "ro",
        RecheckScope::All,
    )
    .unwrap();
    assert!(r.differs());
    assert_eq!(snapshot(), before, "no file changed or appeared");
    assert_eq!(w.store.chain_head().unwrap(), head);
}

/// Runs a worker over `w` on its own thread until `stop`; returns its join handle.
fn spawn_worker(
    w: &World,
    opts: WorkOptions,
) -> std::thread::JoinHandle<countersign::runtime::driver::WorkReport> {
    let store = Arc::new(Store::open_existing(w.store.path(), false).unwrap());
    let d = countersign::consumer::adapter::driver(
        store,
        &w.dispatcher,
        countersign::consumer::adapter::ScenarioAgent::by_session(w.backend.clone()),
        "worker",
        None,
    )
    .unwrap();
    std::thread::spawn(move || {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(d.work(opts))
            .unwrap()
    })
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_worker_resumes_a_run_as_soon_as_it_is_decided() {
    let w = world();
    large_refund(&w, "approved").await;
    large_refund(&w, "denied").await;
    let opts = WorkOptions {
        check_every: Duration::from_millis(10),
        ..WorkOptions::default()
    };
    let stop = opts.stop.clone();
    let worker = spawn_worker(&w, opts);
    // Decided on another connection, after the worker started.
    approve_latest(&w.store, "approved");
    let a = operator::pending_approval(&w.store, "denied", None).unwrap();
    operator::deny_shown(
        &w.store,
        "denied",
        &a.id,
        &a.hash,
        "rita",
        "not this one",
        Timestamp::now(),
    )
    .unwrap();
    wait_for("both runs completed", || {
        ["approved", "denied"]
            .iter()
            .all(|r| w.store.get_run(*r).unwrap().status == RunStatus::Completed)
    });
    stop.store(true, Ordering::SeqCst);
    let report = worker.join().unwrap();
    assert_eq!(report.resumed, 2, "{report:?}");
    assert_eq!(
        refunds(&w, "ord_1004"),
        [6500],
        "the approved refund ran once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_worker_reads_no_table() {
    let w = world();
    large_refund(&w, "pending").await;
    let opts = WorkOptions {
        check_every: Duration::from_millis(1),
        idle_checks: Some(30),
        ..WorkOptions::default()
    };
    let report = spawn_worker(&w, opts).join().unwrap();
    assert_eq!(report.checks, 30);
    assert_eq!(
        report.scans, 1,
        "one scan at the start, none while nothing changed"
    );
    assert_eq!(report.resumed, 0, "a pending approval is not resumed");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_worker_serves_only_runs_of_its_own_tools() {
    let w = world();
    large_refund(&w, "ours").await;
    approve_latest(&w.store, "ours");
    // A driver registering none of the consumer's tools serves nothing here.
    let d = countersign::runtime::driver::Config::new(
        w.store.clone(),
        countersign::runtime::tools::Registry::new(),
        Arc::new(countersign::runtime::policy::DefaultPolicy),
    )
    .agent(countersign::consumer::adapter::ScenarioAgent::by_session(
        w.backend.clone(),
    ))
    .build()
    .unwrap();
    assert!(!d.serves("ours").unwrap());
    let report = d
        .work(WorkOptions {
            idle_checks: Some(0),
            ..WorkOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(report.resumed, 0);
    assert_eq!(
        w.store.get_run("ours").unwrap().status,
        RunStatus::WaitingForApproval
    );
}
