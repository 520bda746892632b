//! Operator cancel (spec 8.1): any non-terminal state, in-flight steps failed with an
//! interrupted observation, pending approvals left, a terminal run refused, no lease needed.

mod support;

use countersign::runtime::operator::{OperatorError, approve, cancel};
use countersign::runtime::store::{StepUpdate, Store, StoreError};
use countersign::runtime::types::{ApprovalStatus, RunStatus, StepStatus, Timestamp};
use support::runs::{self, OWNER};
use support::{assert_verifies, fixture, s, tempdir};

fn t0() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00Z").unwrap()
}

#[test]
fn cancel_approved_but_unresumed_run() {
    let dir = tempdir();
    let db = dir.path().join("c.db");
    let store = Store::open(&db).unwrap();
    let (aid, _) = runs::waiting_run(&store, "r", t0());
    approve(&store, "r", &aid, "alice", "", t0()).unwrap();
    let now = t0().add_nanos(7);
    let c = cancel(&store, "r", "bob", "changed my mind", now).unwrap();
    assert_eq!(
        (
            c.run.status.clone(),
            c.run.reason.as_str(),
            c.run.reason_detail.as_str(),
            c.run.finished_at,
            c.steps_failed
        ),
        (
            RunStatus::Cancelled,
            "operator_cancelled",
            "changed my mind",
            now,
            1
        )
    );
    assert_eq!(c.events.len(), 1);
    assert_eq!(
        (c.events[0].kind.as_str(), c.events[0].payload.as_str()),
        (
            "run.finished",
            r#"{"by":"bob","detail":"changed my mind","reason":"operator_cancelled","status":"CANCELLED","steps":2}"#
        )
    );
    let steps = store.list_steps("r").unwrap();
    assert_eq!(steps[0].status, StepStatus::Done, "finished steps are kept");
    let s1 = &steps[1];
    assert_eq!(
        (s1.status.clone(), s1.finished_at),
        (StepStatus::Failed, now)
    );
    let obs = s1.observation.as_ref().unwrap();
    assert_eq!(
        (
            obs.kind.as_str(),
            obs.summary.as_str(),
            obs.content.as_slice()
        ),
        (
            "interrupted",
            "cancelled by operator: changed my mind",
            br#"{"by":"bob","note":"changed my mind"}"#.as_slice()
        )
    );
    assert_eq!(
        store.get_approval("r", &aid).unwrap().status,
        ApprovalStatus::Approved,
        "the grant is left"
    );
    let err = cancel(&store, "r", "bob", "", now).unwrap_err();
    assert!(matches!(err, OperatorError::RunFinished { .. }));
    assert_eq!(
        err.to_string(),
        "agentrt: run is not in the required state: run r is already CANCELLED"
    );
    drop(store);
    assert_verifies(&db);
}

#[test]
fn cancel_leaves_pending_approvals_and_needs_no_lease() {
    let dir = tempdir();
    let db = dir.path().join("p.db");
    let store = Store::open(&db).unwrap();
    let (aid, _) = runs::waiting_run(&store, "w", t0());
    cancel(&store, "w", "ops", "", t0()).unwrap();
    assert_eq!(
        store.get_approval("w", &aid).unwrap().status,
        ApprovalStatus::Pending
    );
    assert!(
        !store.pending_approval_ids().unwrap().contains_key("w"),
        "not listed: the run is not waiting"
    );
    // A RUNNING run leased by a live driver, with a step executing: cancelled without its lease;
    // the driver's next write fails.
    runs::create(&store, "live", "g", t0());
    store
        .write(|tx| tx.start_step("live", "live-s0", 0, OWNER, t0()))
        .unwrap();
    let c = cancel(&store, "live", "ops", "halt", t0()).unwrap();
    assert_eq!(
        (c.run.status, c.run.lease_owner.as_str(), c.steps_failed),
        (RunStatus::Cancelled, "", 1)
    );
    let err = store
        .write(|tx| {
            tx.require_status("live", &[RunStatus::Running], Some(OWNER))?;
            tx.update_step(
                "live-s0",
                &[StepStatus::Deciding],
                &StepUpdate {
                    decision_json: Some("{}"),
                    ..StepUpdate::default()
                },
            )
        })
        .unwrap_err();
    assert!(err.is_run_state(), "{err}");
    // INTERRUPTED is cancellable too.
    runs::create(&store, "int", "g", t0());
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("UPDATE runs SET status='INTERRUPTED' WHERE id='int'")
        .unwrap();
    assert_eq!(
        cancel(&store, "int", "ops", "", t0()).unwrap().run.status,
        RunStatus::Cancelled
    );
    assert!(matches!(
        cancel(&store, "nope", "ops", "", t0()).unwrap_err(),
        OperatorError::Store(StoreError::NotFound { .. })
    ));
    drop(store);
    assert_verifies(&db);
}

#[test]
fn cancel_every_non_terminal_fixture_run_still_verifies() {
    let dir = tempdir();
    let db = dir.path().join("fx.db");
    let m = fixture(&db, &[]);
    let store = Store::open_existing(&db, false).unwrap();
    let mut cancelled = 0;
    for (_, sc) in m["scenarios"].as_object().unwrap() {
        for r in sc["runs"].as_array().unwrap() {
            let id = s(r, "/id");
            match cancel(&store, id, "ops", "end of day", Timestamp::now()) {
                Ok(c) => {
                    assert_eq!(c.run.status, RunStatus::Cancelled);
                    cancelled += 1;
                }
                Err(OperatorError::RunFinished { status, .. }) => assert!(status.is_terminal()),
                Err(e) => panic!("{id}: {e}"),
            }
        }
    }
    assert!(cancelled >= 10, "{cancelled}");
    drop(store);
    assert_verifies(&db);
}
