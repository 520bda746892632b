//! Approval binding and replay through the REAL runtime: a grant executes exactly the request
//! it was shown, once; a changed order re-pauses; a tampered request is refused; a crashed
//! effect is replayed, not repeated. Also `resume_demo_run` on the demo's queue.

mod consumer_support;

use consumer_support::approve_latest;
use consumer_support::rt::{outcome, world};
use serde_json::json;

fn refund(order: &str, cents: i64) -> serde_json::Value {
    json!({"order_id": order, "amount_cents": cents, "reason": "damaged"})
}

fn refunds(w: &consumer_support::rt::World, order: &str) -> Vec<i64> {
    w.backend
        .ledger()
        .unwrap()
        .iter()
        .filter(|e| e.order_id == order)
        .map(|e| e.amount_cents)
        .collect()
}

#[tokio::test]
async fn an_approved_refund_executes_once_and_a_second_resume_changes_nothing() {
    let w = world();
    let run = w
        .run_calls(
            "big",
            "cu_ana",
            &[("issue_refund", refund("ord_1004", 8000))],
        )
        .await;
    assert_eq!(run.status.as_str(), "WAITING_FOR_APPROVAL");
    assert!(refunds(&w, "ord_1004").is_empty());
    approve_latest(&w.store, "big");
    let d = w.driver_for_calls("cu_ana", &[("issue_refund", refund("ord_1004", 8000))]);
    let run = d.resume("big").await.unwrap();
    assert_eq!(run.status.as_str(), "COMPLETED");
    assert_eq!(refunds(&w, "ord_1004"), [8000]);
    assert_eq!(outcome(&w.steps("big")[0]).0, "ok");
    // Resuming again is refused by the runtime and executes nothing.
    assert!(d.resume("big").await.unwrap_err().is_run_state());
    assert_eq!(refunds(&w, "ord_1004"), [8000]);
}

#[tokio::test]
async fn a_grant_is_refused_when_the_recorded_request_was_swapped() {
    // A grant for 9000 never executes 8000: editing the recorded request after the approval
    // breaks the approval hash, and nothing runs.
    let w = world();
    w.run_calls(
        "swap",
        "cu_ben",
        &[("issue_refund", refund("ord_1002", 9000))],
    )
    .await;
    approve_latest(&w.store, "swap");
    let conn = rusqlite::Connection::open(w.store.path()).unwrap();
    let n = conn
        .execute("UPDATE approvals SET request_json = replace(request_json, '9000', '8000') WHERE run_id = 'swap'", [])
        .unwrap();
    assert_eq!(n, 1);
    let d = w.driver_for_calls("cu_ben", &[("issue_refund", refund("ord_1002", 9000))]);
    let err = d.resume("swap").await.unwrap_err().to_string();
    assert!(err.contains("approval hash"), "{err}");
    assert!(refunds(&w, "ord_1002").is_empty());
}

#[tokio::test]
async fn a_grant_does_not_survive_a_change_to_the_order_it_showed() {
    let w = world();
    w.run_calls(
        "wait",
        "cu_ana",
        &[("issue_refund", refund("ord_1004", 8000))],
    )
    .await;
    let first = approve_latest(&w.store, "wait");
    // Meanwhile another session refunds the same order automatically.
    w.run_calls(
        "other",
        "cu_ana",
        &[("issue_refund", refund("ord_1004", 2000))],
    )
    .await;
    let d = w.driver_for_calls("cu_ana", &[("issue_refund", refund("ord_1004", 8000))]);
    let run = d.resume("wait").await.unwrap();
    // The policy now shows different facts (refundable 13000, not 15000): a new approval.
    assert_eq!(run.status.as_str(), "WAITING_FOR_APPROVAL");
    let approvals = w.store.list_approvals("wait").unwrap();
    assert_eq!(approvals.len(), 2);
    assert_ne!(approvals[1].id, first);
    let p: serde_json::Value = serde_json::from_str(&approvals[1].presentation).unwrap();
    assert_eq!(p["refundable_cents"], 13000);
    assert_eq!(refunds(&w, "ord_1004"), [2000]);
    approve_latest(&w.store, "wait");
    assert_eq!(d.resume("wait").await.unwrap().status.as_str(), "COMPLETED");
    assert_eq!(refunds(&w, "ord_1004"), [2000, 8000]);
}

#[tokio::test]
async fn an_approval_for_the_session_cap_executes_the_held_refund_once() {
    let w = world();
    let four = refund("ord_1004", 4000);
    let calls = [
        ("issue_refund", four.clone()),
        ("issue_refund", four.clone()),
        ("issue_refund", four),
    ];
    w.run_calls("cap", "cu_ana", &calls).await;
    assert_eq!(refunds(&w, "ord_1004"), [4000, 4000]);
    approve_latest(&w.store, "cap");
    let run = w
        .driver_for_calls("cu_ana", &calls)
        .resume("cap")
        .await
        .unwrap();
    assert_eq!(run.status.as_str(), "COMPLETED");
    assert_eq!(refunds(&w, "ord_1004"), [4000, 4000, 4000]);
}

#[test]
fn resume_demo_run_executes_each_approved_request_exactly_once() {
    use countersign::consumer::backend::Backend;
    use countersign::consumer::demo;
    use countersign::runtime::store::Store;
    let dir = tempfile::tempdir().unwrap();
    let (runs, backend) = (dir.path().join("runs.db"), dir.path().join("backend.db"));
    let s = demo::build(&runs, &backend).unwrap();
    let ledger = || Backend::open(&backend).unwrap().ledger().unwrap();
    let before = ledger().len();
    let store = Store::open_existing(&runs, false).unwrap();
    let large = s.with_role("waiting_over_limit")[0].id.clone();
    let crashed = s.with_role("waiting_interrupted")[0].id.clone();
    approve_latest(&store, &large);
    approve_latest(&store, &crashed);
    drop(store);
    // The large refund runs once.
    let run = demo::resume_demo_run(&runs, &backend, &large).unwrap();
    assert_eq!(run.status.as_str(), "COMPLETED");
    let after: Vec<_> = ledger();
    assert_eq!(after.len(), before + 1);
    assert_eq!(
        (after[before].order_id.as_str(), after[before].amount_cents),
        ("ord_1004", 6500)
    );
    // The crashed refund had already happened: approving the re-run replays its call key.
    let run = demo::resume_demo_run(&runs, &backend, &crashed).unwrap();
    assert_eq!(run.status.as_str(), "COMPLETED");
    assert_eq!(ledger().len(), before + 1);
    let store = Store::open_existing(&runs, true).unwrap();
    let step = &store.list_steps(&crashed).unwrap()[0];
    assert_eq!(outcome(step).0, "ok (replayed)");
    // A second resume of either is refused and changes nothing.
    assert!(demo::resume_demo_run(&runs, &backend, &large).is_err());
    assert!(demo::resume_demo_run(&runs, &backend, &crashed).is_err());
    assert_eq!(ledger().len(), before + 1);
}

/// A crash inside a refund's tool call, resumed by another driver: the runtime pauses on the
/// interrupted side effect; approving re-runs the same step once. Whether or not the effect had
/// landed before the crash, the ledger ends with exactly one refund for that step.
async fn crash_then_approve(effect_lands: bool) -> (Vec<i64>, String) {
    use countersign::consumer::adapter::ScenarioAgent;
    use countersign::consumer::crash::crash_in_tool_call;
    use countersign::consumer::session::Session;
    let w = world();
    let calls = [("issue_refund", refund("ord_1002", 2500))];
    w.backend
        .put_session(&Session::full("crash", "cu_ben"), "")
        .unwrap();
    let (store, d) = (w.store.clone(), w.dispatcher.clone());
    let agent = ScenarioAgent::fixed(consumer_support::rt::calls_scenario(&calls));
    tokio::task::spawn_blocking(move || {
        crash_in_tool_call(&store, &d, agent, "crash", "test", effect_lands)
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(w.store.get_run("crash").unwrap().status.as_str(), "RUNNING");
    assert_eq!(refunds(&w, "ord_1002").len(), usize::from(effect_lands));
    let driver = w.driver_for_calls("cu_ben", &calls);
    let run = driver.resume("crash").await.unwrap();
    assert_eq!(run.status.as_str(), "WAITING_FOR_APPROVAL");
    assert_eq!(
        w.store.list_approvals("crash").unwrap()[0].kind,
        "interrupted_side_effect"
    );
    approve_latest(&w.store, "crash");
    let run = driver.resume("crash").await.unwrap();
    assert_eq!(run.status.as_str(), "COMPLETED");
    assert!(driver.resume("crash").await.is_err());
    (refunds(&w, "ord_1002"), outcome(&w.steps("crash")[0]).0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_the_effect_is_replayed_not_repeated() {
    assert_eq!(
        crash_then_approve(true).await,
        (vec![2500], "ok (replayed)".to_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_the_effect_runs_it_once_on_approval() {
    assert_eq!(
        crash_then_approve(false).await,
        (vec![2500], "ok".to_string())
    );
}
