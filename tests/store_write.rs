//! Writing through the store's API: the result passes the independent verifier; transactions
//! roll back whole (error or panic) leaving no seq gap; compare-and-set messages; saturating
//! accounting; the chain across runs and writers; locks and extreme values are typed errors.

mod support;

use countersign::runtime::store::{Charge, Store, StoreError, Transition};
use countersign::runtime::types::{RunStatus, StepStatus, Timestamp};
use support::runs::{self, OWNER};
use support::{assert_verifies, tempdir};

fn t0() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00.5Z").unwrap()
}

fn raw_exec(db: &std::path::Path, sql: &str) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch(sql).unwrap();
}

#[test]
fn store_written_database_passes_agentrt_verify() {
    let dir = tempdir();
    let db = dir.path().join("w.db");
    let store = Store::open(&db).unwrap();
    let (aid, hash) = runs::waiting_run(&store, "run-1", t0());
    runs::waiting_run(&store, "run-2", t0().add_nanos(1_500));
    let run = store.get_run("run-1").unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    assert_eq!(
        (
            run.step_count,
            run.model_calls,
            run.input_tokens,
            run.active_ms
        ),
        (2, 1, 100, 12)
    );
    assert_eq!(
        (run.lease_owner.as_str(), run.lease_expires_at),
        ("", Timestamp::ZERO),
        "pausing releases the lease"
    );
    let a = store.get_approval("run-1", &aid).unwrap();
    assert_eq!(
        (a.hash.as_str(), a.decode_error.as_str()),
        (hash.as_str(), "")
    );
    assert_eq!(a.expires_at.sub(&a.created_at), 3_600_000_000_000);
    let steps = store.list_steps("run-1").unwrap();
    assert_eq!(
        steps.iter().map(|s| s.status.clone()).collect::<Vec<_>>(),
        [StepStatus::Done, StepStatus::AwaitingApproval]
    );
    let events = store.list_events_page("run-1", 100, 0).unwrap();
    let kinds: Vec<&str> = events.items.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "run.created",
            "run.started",
            "step.started",
            "step.decided",
            "step.policy",
            "step.tool_started",
            "step.tool_finished",
            "step.started",
            "step.decided",
            "step.policy",
            "approval.requested"
        ]
    );
    assert_eq!(events.items[0].at_text, "2026-10-01T09:00:00.5Z");
    assert!(
        events.items[0]
            .payload
            .starts_with(r#"{"goal":"goal of run-1","limits":{"max_steps":10,"#)
    );
    assert!(store.verify_events(0, 0).unwrap().ok());
    drop(store);
    assert_verifies(&db);
}

#[test]
fn store_panic_in_transaction_rolls_back() {
    let dir = tempdir();
    let db = dir.path().join("p.db");
    let store = Store::open(&db).unwrap();
    runs::create(&store, "r", "g", t0());
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = store.write(|tx| {
            tx.append_event("r", "", &t0(), "run.note", b"{}")?;
            if true {
                panic!("boom");
            }
            Ok::<_, StoreError>(())
        });
    }));
    assert!(res.is_err());
    let err = store
        .write(|tx| {
            tx.append_event("r", "", &t0(), "run.note", b"{}")?;
            Err::<(), _>(StoreError::Invalid("caller gave up".into()))
        })
        .unwrap_err();
    assert_eq!(err.to_string(), "agentrt: caller gave up");
    let ((), evs) = store
        .write(|tx| tx.append_event("r", "", &t0(), "run.note", b"").map(|_| ()))
        .unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(
        (evs[0].seq, evs[0].payload.as_str()),
        (3, "{}"),
        "rolled-back writes leave no gap"
    );
    assert!(store.verify_events(0, 0).unwrap().ok());
}

#[test]
fn store_compare_and_set_messages() {
    let dir = tempdir();
    let store = Store::open(dir.path().join("c.db")).unwrap();
    runs::create(&store, "r", "g", t0());
    let err = store
        .write(|tx| {
            tx.require_status(
                "r",
                &[RunStatus::WaitingForApproval, RunStatus::Completed],
                None,
            )
        })
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "agentrt: run is not in the required state: run r is RUNNING, not WAITING_FOR_APPROVAL or COMPLETED"
    );
    let err = store
        .write(|tx| tx.require_status("r", &[RunStatus::Running], Some("other/1")))
        .unwrap_err();
    assert!(err.is_run_state());
    assert_eq!(
        err.to_string(),
        "agentrt: run r is leased by test-worker/0123456789ab until 2026-10-01T09:00:30.5Z"
    );
    let err = store
        .write(|tx| tx.require_lease("r", OWNER, t0().add_nanos(31_000_000_000)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "agentrt: run lease lost: run r: the lease expired at 2026-10-01T09:00:30.5Z"
    );
    store
        .write(|tx| tx.start_step("r", "s0", 0, OWNER, t0()))
        .unwrap();
    let err = store
        .write(|tx| tx.start_step("r", "s1", 0, OWNER, t0()))
        .unwrap_err();
    assert!(err.is_run_state(), "{err}");
    let err = store
        .write(|tx| {
            tx.update_step(
                "s0",
                &[StepStatus::Executing],
                &countersign::runtime::store::StepUpdate {
                    status: Some(StepStatus::Done),
                    ..Default::default()
                },
            )
        })
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "agentrt: run is not in the required state: step s0 is deciding"
    );
    // An update that sets nothing is still a compare-and-set on the step's state.
    let err = store
        .write(|tx| tx.update_step("s0", &[StepStatus::Executing], &Default::default()))
        .unwrap_err();
    assert!(err.is_run_state(), "{err}");
    store
        .write(|tx| tx.update_step("s0", &[StepStatus::Deciding], &Default::default()))
        .unwrap();
    let err = store
        .write(|tx| tx.update_step("nope", &[StepStatus::Deciding], &Default::default()))
        .unwrap_err();
    assert!(err.to_string().contains("not found: step nope"), "{err}");
    // A transition out of RUNNING clears the lease; into RUNNING stamps it.
    let fin = |to, from: &'static [RunStatus], owner| Transition {
        run_id: b"r",
        from,
        to,
        reason: "",
        detail: "",
        finished_at: Timestamp::ZERO,
        result_json: "",
        lease_owner: owner,
        lease_expires_at: t0().add_nanos(60_000_000_000),
    };
    store
        .write(|tx| tx.transition(&fin(RunStatus::Interrupted, &[RunStatus::Running], None)))
        .unwrap();
    assert_eq!(store.lease("r").unwrap().owner, "");
    store
        .write(|tx| {
            tx.transition(&fin(
                RunStatus::Running,
                &[RunStatus::Interrupted],
                Some("new/owner"),
            ))
        })
        .unwrap();
    let lease = store.lease("r").unwrap();
    assert_eq!(
        (lease.owner.as_str(), lease.expires_at),
        ("new/owner", t0().add_nanos(60_000_000_000))
    );
    assert!(matches!(
        store.lease("nope").unwrap_err(),
        StoreError::NotFound { .. }
    ));
}

#[test]
fn store_usage_totals_saturate_rather_than_wrap() {
    let dir = tempdir();
    let store = Store::open(dir.path().join("u.db")).unwrap();
    runs::create(&store, "r", "g", t0());
    store
        .write(|tx| {
            let charge = Charge {
                calls: 1,
                input_tokens: i64::MAX - 5,
                output_tokens: 3,
                cached_input_tokens: 0,
                cost_micros: -50,
            };
            tx.add_usage("r", &charge)
        })
        .unwrap();
    store
        .write(|tx| {
            let charge = Charge {
                calls: 1,
                input_tokens: 10,
                output_tokens: 3,
                cached_input_tokens: 0,
                cost_micros: 7,
            };
            tx.add_usage("r", &charge)
        })
        .unwrap();
    store.write(|tx| tx.add_active_ms("r", i64::MAX)).unwrap();
    store.write(|tx| tx.add_active_ms("r", 5)).unwrap();
    let r = store.get_run("r").unwrap();
    assert_eq!(
        (
            r.model_calls,
            r.input_tokens,
            r.output_tokens,
            r.estimated_cost_micros,
            r.active_ms
        ),
        (2, i64::MAX, 6, 7, i64::MAX)
    );
}

#[test]
fn store_tool_spec_refuses_a_changed_row() {
    let dir = tempdir();
    let db = dir.path().join("s.db");
    let store = Store::open(&db).unwrap();
    runs::create(&store, "r", "g", t0());
    let spec = runs::spec("lookup", "read_only");
    let hash = spec.spec_hash().unwrap();
    assert_eq!(store.tool_spec(&hash).unwrap().name, "lookup");
    raw_exec(
        &db,
        &format!(
            "UPDATE tool_specs SET spec_json=replace(spec_json, 'read_only', 'destructive') WHERE hash='{hash}'"
        ),
    );
    let err = store.tool_spec(&hash).unwrap_err();
    assert!(matches!(err, StoreError::SpecHash { .. }), "{err}");
    assert!(matches!(
        store.tool_spec("0000").unwrap_err(),
        StoreError::NotFound { .. }
    ));
}

#[test]
fn verify_events_reads_long_fields_in_chunks_and_finds_missing_events() {
    let dir = tempdir();
    let db = dir.path().join("v.db");
    let store = Store::open(&db).unwrap();
    runs::create(&store, "r", "g", t0());
    let long = format!(r#"{{"pad":"{}"}}"#, "é".repeat(150_000));
    for _ in 0..3 {
        store
            .write(|tx| tx.append_event("r", "", &t0(), "run.note", long.as_bytes()))
            .unwrap();
    }
    let report = store.verify_events(0, 0).unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.checked, 5);
    assert_eq!(store.verify_events(3, 4).unwrap().checked, 2);
    // One byte changed at the very end of a long payload.
    raw_exec(
        &db,
        "UPDATE events SET payload_json = substr(payload_json, 1, length(payload_json) - 2) || 'x\"}' WHERE seq = 4",
    );
    let b = store.verify_events(0, 0).unwrap().chain_break.unwrap();
    assert_eq!(b.seq, 4);
    raw_exec(&db, "DELETE FROM events WHERE seq IN (1, 4)");
    let b = store.verify_events(0, 0).unwrap().chain_break.unwrap();
    assert_eq!(
        (b.seq, b.detail.as_str()),
        (2, "the first event is seq 2: an event is missing")
    );
    let b = store.verify_events(3, 0).unwrap().chain_break.unwrap();
    assert_eq!(
        (b.seq, b.detail.as_str()),
        (5, "seq 5 follows 3: an event is missing")
    );
    // A cut at the end verifies; only the kept head shows it.
    let (head, _) = store.chain_head().unwrap();
    assert_eq!(head, 5);
}

#[test]
fn verify_events_concurrent_writers_keep_the_chain() {
    let dir = tempdir();
    let db = dir.path().join("cc.db");
    drop(Store::open(&db).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                let store = Store::open(&db).unwrap();
                for r in 0..3 {
                    let id = format!("w{w}-r{r}");
                    runs::create(&store, &id, "g", t0());
                    for _ in 0..5 {
                        store
                            .write(|tx| tx.append_event(&id, "", &t0(), "run.note", b"{}"))
                            .unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let store = Store::open_existing(&db, true).unwrap();
    let report = store.verify_events(0, 0).unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.checked, 4 * 3 * 7);
    assert_verifies(&db);
}

#[test]
fn store_read_then_write_transaction_waits_for_the_writer() {
    // Every write transaction takes the write lock up front, so read-modify-write
    // transactions from separate connections serialise: no lost update, no SQLITE_BUSY.
    let dir = tempdir();
    let db = dir.path().join("rw.db");
    runs::create(&Store::open(&db).unwrap(), "r", "g", t0());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || {
                let store = Store::open_existing(&db, false).unwrap();
                for _ in 0..25 {
                    store
                        .write(|tx| {
                            let seen = tx.get_run("r")?.reason_detail.parse::<i64>().unwrap_or(0);
                            std::thread::yield_now();
                            tx.conn()
                                .execute(
                                    "UPDATE runs SET reason_detail=? WHERE id='r'",
                                    [(seen + 1).to_string()],
                                )
                                .map_err(|e| StoreError::sqlite("bump", e))
                        })
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        Store::open_existing(&db, true)
            .unwrap()
            .get_run("r")
            .unwrap()
            .reason_detail,
        "100"
    );
}

#[test]
fn store_locked_database_is_a_typed_error() {
    let dir = tempdir();
    let db = dir.path().join("l.db");
    let store = Store::open(&db).unwrap();
    let (aid, _) = runs::waiting_run(&store, "r", t0());
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    // Reads still work while another connection holds the write lock (WAL).
    assert_eq!(
        store.get_run("r").unwrap().status,
        RunStatus::WaitingForApproval
    );
    let err = store.write(|tx| tx.add_active_ms("r", 1)).unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("agentrt: database is locked by another consumer: begin write: "),
        "{err}"
    );
    let err =
        countersign::runtime::operator::approve(&store, "r", &aid, "alice", "", t0()).unwrap_err();
    assert!(
        matches!(
            err,
            countersign::runtime::operator::OperatorError::Locked { .. }
        ),
        "{err}"
    );
    holder.execute_batch("ROLLBACK").unwrap();
    countersign::runtime::operator::approve(&store, "r", &aid, "alice", "", t0()).unwrap();
}

#[test]
fn store_extreme_seqs_are_errors_not_panics() {
    let dir = tempdir();
    let db = dir.path().join("x.db");
    let store = Store::open(&db).unwrap();
    runs::create(&store, "r", "g", t0());
    raw_exec(
        &db,
        "UPDATE events SET seq = 9223372036854775807 WHERE seq = 2",
    );
    let report = store.verify_events(0, 0).unwrap();
    assert_eq!(
        report.chain_break.unwrap().detail,
        "seq 9223372036854775807 follows 1: an event is missing"
    );
    let err = store
        .write(|tx| tx.append_event("r", "", &t0(), "run.note", b"{}"))
        .unwrap_err();
    assert!(
        err.to_string().contains("the event sequence is exhausted"),
        "{err}"
    );
}
