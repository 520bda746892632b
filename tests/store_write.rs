//! Writing through the store's API: the result passes the independent verifier; transactions
//! roll back whole (error or panic) leaving no seq gap; compare-and-set messages; bounded page
//! reads; the chain across runs and writers; damaged text never fails a read.

mod support;

use countersign::runtime::store::{MAX_PAGE_TEXT, Store, StoreError, Transition};
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
    // A transition out of RUNNING clears the lease; into RUNNING stamps it.
    let fin = |to, from: &'static [RunStatus], owner| Transition {
        run_id: "r",
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
fn store_lists_in_insertion_order() {
    let dir = tempdir();
    let store = Store::open(dir.path().join("o.db")).unwrap();
    // Later rows get earlier (and non-sorting) times: lists follow rowid, not time.
    let times = [
        "2026-10-01T09:00:00.5Z",
        "2026-10-01T09:00:00Z",
        "2026-10-01T08:59:59.25Z",
    ];
    for (i, t) in times.iter().enumerate() {
        runs::create(&store, &format!("r{i}"), "g", Timestamp::parse(t).unwrap());
    }
    let page = store.list_runs_page(10, 0).unwrap();
    assert_eq!(
        page.items.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["r2", "r1", "r0"]
    );
    let page = store.list_runs_page(1, 1).unwrap();
    assert_eq!((page.items[0].id.as_str(), page.total), ("r1", 3));
    let err = store.list_runs_page(0, 0).unwrap_err();
    assert_eq!(err.to_string(), "agentrt: list runs: limit 0 and offset 0");
    assert!(store.list_events_page("", 5, -1).is_err());
}

#[test]
fn store_pages_are_bounded() {
    let dir = tempdir();
    let db = dir.path().join("big.db");
    let store = Store::open(&db).unwrap();
    runs::waiting_run(&store, "r", t0());
    let huge = "x".repeat(MAX_PAGE_TEXT as usize + 10);
    let huge_json = format!(r#"{{"kind":"tool_call","tool":"refund","args":{{"pad":"{huge}"}}}}"#);
    let huge_req = format!(
        r#"{{"run_id":"r","step_id":"r-s1","spec":{{"name":"refund"}},"args":{{"pad":"{huge}"}}}}"#
    );
    raw_exec(
        &db,
        &format!(
            "UPDATE runs SET goal='{huge}'; UPDATE steps SET decision_json='{huge_json}' WHERE id='r-s1'; \
             UPDATE approvals SET request_json='{huge_req}', capability_json='{huge_json}'; \
             UPDATE events SET payload_json='{huge_json}' WHERE seq=1;"
        ),
    );
    let run = store.get_run_capped("r").unwrap();
    assert_eq!(
        run.goal,
        format!(
            "{}\u{2026}[truncated: {} characters]",
            &huge[..MAX_PAGE_TEXT as usize],
            huge.len()
        )
    );
    assert_eq!(
        store.get_run("r").unwrap().goal,
        huge,
        "the whole read is whole"
    );
    let steps = store.list_steps_page("r", 10, 0).unwrap();
    let s1 = &steps.items[1];
    assert_eq!(s1.decision_json, r#"{"kind":"tool_call","tool":"refund"}"#);
    assert_eq!(
        s1.decode_error,
        format!(
            "decision: {} characters, over MaxPageText, not read whole",
            huge_json.len()
        )
    );
    let a = &store.list_approvals_page("r", "", 10, 0).unwrap().items[0];
    assert_eq!(
        a.request_json,
        format!(
            r#"{{"run_id":"r","step_id":"r-s1","spec":{{"name":"refund"}},"args":{{"truncated":true,"length":{}}}}}"#,
            huge_req.len()
        )
    );
    assert_eq!(
        a.decode_error,
        format!(
            "request: {} characters, over MaxPageText; its arguments were not read",
            huge_req.len()
        )
    );
    assert!(
        a.capability.starts_with(r#"{"truncated":true,"length":"#),
        "{}",
        &a.capability[..40]
    );
    let e = &store.list_events_page("r", 1, 0).unwrap().items[0];
    assert!(e.payload.starts_with(&format!(
        r#"{{"truncated":true,"length":{},"head":"#,
        huge_json.len()
    )));
    assert!(e.payload.len() < MAX_PAGE_TEXT as usize * 2);
    let after = store.list_events_after("", 0, 2).unwrap();
    assert_eq!(after.len(), 2);
    assert!(after[0].payload.starts_with(r#"{"truncated":true"#));
}

#[test]
fn store_list_events_after_follows_seq_across_runs() {
    let dir = tempdir();
    let store = Store::open(dir.path().join("f.db")).unwrap();
    runs::create(&store, "a", "g", t0());
    runs::create(&store, "b", "g", t0());
    runs::create(&store, "a2", "g", t0());
    let all = store.list_events_after("", 1, 100).unwrap();
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [2, 3, 4, 5, 6]
    );
    let b = store.list_events_after("b", 0, 100).unwrap();
    assert_eq!(b.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4]);
    assert!(store.list_events_after("a", 2, 100).unwrap().is_empty());
}

#[test]
fn store_pending_approval_ids_and_reason() {
    let dir = tempdir();
    let db = dir.path().join("p.db");
    let store = Store::open(&db).unwrap();
    let (a1, _) = runs::waiting_run(&store, "w1", t0());
    let (a2, _) = runs::waiting_run(&store, "w2", t0());
    raw_exec(
        &db,
        "INSERT INTO approvals SELECT 'w2-a2', run_id, step_id, kind, capability_json, presentation_json, request_json, hash, status, created_at, decided_at, decided_by, note, expires_at FROM approvals WHERE id='w2-a1'",
    );
    let all = store.pending_approval_ids().unwrap();
    assert_eq!(all["w1"], vec![a1.clone()]);
    assert_eq!(all["w2"], [a2.clone(), "w2-a2".to_string()]);
    let of = store.pending_approval_ids_of(&["w2"], 1).unwrap();
    assert_eq!(of.len(), 1);
    assert_eq!(of["w2"], vec![a2.clone()]);
    assert_eq!(
        store.approval_reason("w1", &a1).unwrap(),
        "side effect remote_mutation is require_approval by policy"
    );
    assert_eq!(
        store.approval_reason("w2", "w2-a2").unwrap(),
        "",
        "no approval.requested names it"
    );
    assert!(matches!(
        store.approval_reason("w1", "nope").unwrap_err(),
        StoreError::NotFound { .. }
    ));
    // A run no longer waiting is not listed.
    raw_exec(&db, "UPDATE runs SET status='CANCELLED' WHERE id='w1'");
    assert!(!store.pending_approval_ids().unwrap().contains_key("w1"));
}

#[test]
fn store_undecodable_text_and_times_never_fail_a_read() {
    let dir = tempdir();
    let db = dir.path().join("d.db");
    let store = Store::open(&db).unwrap();
    runs::waiting_run(&store, "r", t0());
    raw_exec(
        &db,
        "UPDATE runs SET goal=CAST(X'41FF42' AS TEXT), finished_at='yesterday', limits_json='{'; \
         UPDATE approvals SET created_at='soon', note=CAST(X'FE' AS TEXT); \
         UPDATE steps SET observation_json='[1' WHERE idx=0; UPDATE events SET at='later' WHERE seq=2;",
    );
    let run = store.get_run("r").unwrap();
    assert_eq!(run.goal, "A\u{fffd}B");
    assert_eq!(run.raw_invalid, vec![("goal", vec![0x41, 0xff, 0x42])]);
    assert!(
        run.decode_error
            .starts_with("goal: not valid UTF-8; finished_at: parsing time \"yesterday\""),
        "{}",
        run.decode_error
    );
    assert!(run.decode_error.contains("; limits: "));
    assert_eq!(run.finished_at, Timestamp::ZERO);
    let a = &store.list_approvals("r").unwrap()[0];
    assert!(
        a.decode_error
            .starts_with("created_at: parsing time \"soon\""),
        "{}",
        a.decode_error
    );
    assert!(
        a.decode_error.ends_with("note: not valid UTF-8"),
        "{}",
        a.decode_error
    );
    assert!(a.request.is_some());
    let s0 = &store.list_steps("r").unwrap()[0];
    assert!(
        s0.decode_error.starts_with("observation: "),
        "{}",
        s0.decode_error
    );
    let e = &store.list_events_page("r", 10, 0).unwrap().items[1];
    assert_eq!((e.at, e.at_text.as_str()), (Timestamp::ZERO, "later"));
    assert!(e.decode_error.starts_with("at: "));
    assert_eq!(
        store.list_runs_page(10, 0).unwrap().items[0].decode_error,
        run.decode_error
    );
}

#[test]
fn store_usage_totals_saturate_rather_than_wrap() {
    let dir = tempdir();
    let store = Store::open(dir.path().join("u.db")).unwrap();
    runs::create(&store, "r", "g", t0());
    store
        .write(|tx| tx.add_usage("r", 1, i64::MAX - 5, 3, 0, -50))
        .unwrap();
    store.write(|tx| tx.add_usage("r", 1, 10, 3, 0, 7)).unwrap();
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
fn store_data_version_moves_when_another_connection_commits() {
    let dir = tempdir();
    let db = dir.path().join("dv.db");
    let writer = Store::open(&db).unwrap();
    let reader = Store::open_existing(&db, true).unwrap();
    let v0 = reader.data_version().unwrap();
    assert_eq!(reader.data_version().unwrap(), v0);
    runs::create(&writer, "r", "g", t0());
    assert_ne!(reader.data_version().unwrap(), v0);
    assert_eq!(reader.get_run("r").unwrap().status, RunStatus::Running);
    let err = reader.write(|_| Ok::<_, StoreError>(())).unwrap_err();
    assert!(err.to_string().contains("opened read-only"), "{err}");
}
