//! Deciding approvals (spec 4.4, 4.5, 4.8): rows and events of each outcome, the typed
//! refusals, the shown hash compared under the write lock, expiry by the deciding clock, and
//! damaged rows (races: operator_races.rs).

mod support;

use countersign::runtime::operator::{
    self, OperatorError, Review, Ruling, SelectError, Shown, approve, approve_shown, decide_hooked,
    pending_approval, reject, reject_shown,
};
use countersign::runtime::store::Store;
use countersign::runtime::types::{ApprovalStatus, RunStatus, StepStatus, Timestamp};
use support::runs;
use support::{assert_verifies, fixture, s, tempdir};

fn t0() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00Z").unwrap()
}

fn later(secs: i64) -> Timestamp {
    t0().add_nanos(secs * 1_000_000_000)
}

fn raw_exec(db: &std::path::Path, sql: &str) {
    rusqlite::Connection::open(db)
        .unwrap()
        .execute_batch(sql)
        .unwrap();
}

fn kinds(events: &[countersign::runtime::types::Event]) -> Vec<&str> {
    events.iter().map(|e| e.kind.as_str()).collect()
}

#[test]
fn approval_approve_records_the_decision_and_the_run_stays_waiting() {
    let dir = tempdir();
    let db = dir.path().join("a.db");
    let store = Store::open(&db).unwrap();
    let (aid, hash) = runs::waiting_run(&store, "r", t0());
    let d = approve(&store, "r", &aid, "alice", "looks right", later(60)).unwrap();
    assert_eq!(
        d.run.status,
        RunStatus::WaitingForApproval,
        "the run waits for a resume"
    );
    assert_eq!(
        (
            d.approval.status.clone(),
            d.approval.decided_by.as_str(),
            d.approval.note.as_str(),
            d.approval.decided_at
        ),
        (ApprovalStatus::Approved, "alice", "looks right", later(60))
    );
    assert_eq!(d.approval.hash, hash);
    assert_eq!(kinds(&d.events), ["approval.decided"]);
    assert_eq!(d.events[0].step_id, "r-s1");
    assert_eq!(
        d.events[0].payload,
        format!(
            r#"{{"approval_id":"{aid}","by":"alice","note":"looks right","status":"approved"}}"#
        )
    );
    assert_eq!(
        store.list_steps("r").unwrap()[1].status,
        StepStatus::AwaitingApproval
    );
    drop(store);
    assert_verifies(&db);
}

#[test]
fn approval_reject_cancels_run() {
    let dir = tempdir();
    let db = dir.path().join("r.db");
    let store = Store::open(&db).unwrap();
    let (aid, _) = runs::waiting_run(&store, "r", t0());
    let d = reject(&store, "r", &aid, "bob", "wrong <amount>", later(5)).unwrap();
    assert_eq!(
        (
            d.run.status.clone(),
            d.run.reason.as_str(),
            d.run.reason_detail.as_str(),
            d.run.finished_at
        ),
        (
            RunStatus::Cancelled,
            "approval_rejected",
            "wrong <amount>",
            later(5)
        )
    );
    assert_eq!(d.approval.status, ApprovalStatus::Rejected);
    assert_eq!(kinds(&d.events), ["approval.decided", "run.finished"]);
    assert_eq!(
        d.events[1].payload,
        r#"{"detail":"wrong \u003camount\u003e","reason":"approval_rejected","status":"CANCELLED","steps":2}"#
    );
    let step = &store.list_steps("r").unwrap()[1];
    assert_eq!(
        (step.status.clone(), step.finished_at),
        (StepStatus::Failed, later(5))
    );
    let obs = step.observation.as_ref().unwrap();
    assert_eq!(
        (obs.kind.as_str(), obs.summary.as_str()),
        ("policy_denied", "approval rejected: wrong <amount>")
    );
    assert_eq!(
        obs.content,
        format!(r#"{{"approval_id":"{aid}","note":"wrong \u003camount\u003e"}}"#).as_bytes()
    );
    // Deciding again: the run is no longer waiting.
    let err = approve(&store, "r", &aid, "carol", "", later(6)).unwrap_err();
    assert!(matches!(err, OperatorError::RunNotWaiting { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "agentrt: run is not in the required state: run r is CANCELLED, not waiting for approval"
    );
    drop(store);
    assert_verifies(&db);
}

#[test]
fn approval_tampered_row_refused() {
    let dir = tempdir();
    let db = dir.path().join("t.db");
    let m = fixture(&db, &["--scenario", "waiting", "--tamper", "approval-hash"]);
    let store = Store::open_existing(&db, false).unwrap();
    let run = s(&m, "/tampered/approval-hash/run_id");
    let aid = s(&m, "/tampered/approval-hash/approval_id");
    let stored = store.get_approval(run, aid).unwrap().hash;
    for err in [
        approve(&store, run, aid, "alice", "", Timestamp::now()).unwrap_err(),
        reject(&store, run, aid, "alice", "", Timestamp::now()).unwrap_err(),
        approve_shown(&store, run, aid, &stored, "alice", "", Timestamp::now()).unwrap_err(),
    ] {
        assert!(matches!(err, OperatorError::HashMismatch { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "agentrt: approval hash does not match its recorded request: approval {aid}; it cannot be approved or rejected, cancel the run instead"
            )
        );
    }
    let a = store.get_approval(run, aid).unwrap();
    assert_eq!(a.status, ApprovalStatus::Pending, "nothing changed");
    assert_eq!(
        store.get_run(run).unwrap().status,
        RunStatus::WaitingForApproval
    );
}

#[test]
fn approve_shown_binds_to_the_hash_actually_shown() {
    let dir = tempdir();
    let store = Store::open(dir.path().join("s.db")).unwrap();
    let (aid, hash) = runs::waiting_run(&store, "r", t0());
    let other = "0".repeat(64);
    for err in [
        approve_shown(&store, "r", &aid, &other, "alice", "", later(1)).unwrap_err(),
        reject_shown(&store, "r", &aid, &other, "alice", "", later(1)).unwrap_err(),
    ] {
        assert_eq!(
            err.to_string(),
            format!(
                "agentrt: approval is not the one that was shown: approval {aid}; show it again and decide on what is shown"
            )
        );
    }
    let err = approve_shown(&store, "r", &aid, "", "alice", "", later(1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "agentrt: approval is not the one that was shown: approval {aid}: no hash was shown; show it again and decide on what is shown"
        )
    );
    assert_eq!(
        store.get_approval("r", &aid).unwrap().status,
        ApprovalStatus::Pending
    );
    let d = approve_shown(&store, "r", &aid, &hash, "alice", "", later(1)).unwrap();
    assert_eq!(d.approval.status, ApprovalStatus::Approved);
}

#[test]
fn approval_shown_decision_is_atomic() {
    // The row changes after the checks outside the transaction and before it begins: the
    // checks are repeated under the write lock and the decision does not land.
    let dir = tempdir();
    let db = dir.path().join("atomic.db");
    let store = Store::open(&db).unwrap();
    let (aid, hash) = runs::waiting_run(&store, "r", t0());
    let (_, hash2) = runs::waiting_run(&store, "q", t0());
    // A re-pause replaced the request and its hash (a valid row, just not the one shown).
    let swap = format!(
        "UPDATE approvals SET request_json = (SELECT replace(request_json, '\"q\"', '\"r\"') FROM approvals WHERE id='q-a1'), \
         hash = '{hash2}' WHERE id = '{aid}'"
    );
    let err = decide_hooked(
        &store,
        "r",
        &aid,
        Review {
            ruling: Ruling::Approve,
            shown: Shown::Hash(&hash),
            by: "alice",
            note: "",
            now: later(1),
        },
        || raw_exec(&db, &swap),
    )
    .unwrap_err();
    assert!(matches!(err, OperatorError::Changed { .. }), "{err}");
    let a = store.get_approval("r", &aid).unwrap();
    assert_eq!(
        (a.status, a.hash.as_str(), a.decided_by.as_str()),
        (ApprovalStatus::Pending, hash2.as_str(), "")
    );
    // Unbound, a request changed under the lock fails its hash instead of landing.
    let tamper =
        "UPDATE approvals SET request_json = replace(request_json, '800', '900') WHERE id = 'q-a1'";
    let err = decide_hooked(
        &store,
        "q",
        "q-a1",
        Review {
            ruling: Ruling::Approve,
            shown: Shown::Unbound,
            by: "alice",
            note: "",
            now: later(1),
        },
        || raw_exec(&db, tamper),
    )
    .unwrap_err();
    assert!(matches!(err, OperatorError::HashMismatch { .. }), "{err}");
    assert_eq!(
        store.get_approval("q", "q-a1").unwrap().status,
        ApprovalStatus::Pending
    );
    // Decided by someone else in the window: NotPending with who and when.
    let (aid3, _) = runs::waiting_run(&store, "p", t0());
    let err = decide_hooked(
        &store,
        "p",
        &aid3,
        Review {
            ruling: Ruling::Approve,
            shown: Shown::Unbound,
            by: "alice",
            note: "",
            now: later(2),
        },
        || {
            let other = Store::open(&db).unwrap();
            approve(&other, "p", &aid3, "bob", "fine", later(1)).unwrap();
        },
    )
    .unwrap_err();
    assert!(
        matches!(&err, OperatorError::NotPending { decided_by, decided_at, status: ApprovalStatus::Approved, .. }
            if decided_by == "bob" && *decided_at == later(1)),
        "{err}"
    );
    let a = store.get_approval("p", &aid3).unwrap();
    assert_eq!((a.decided_by.as_str(), a.note.as_str()), ("bob", "fine"));
}

#[test]
fn approval_expiry_cancels_run() {
    let dir = tempdir();
    let db = dir.path().join("e.db");
    let store = Store::open(&db).unwrap();
    let (aid, hash) = runs::waiting_run(&store, "r", t0());
    let expires = t0().add_nanos(runs::limits().approval_ttl);
    // Exactly at the expiry it is still decidable (strictly after expires).
    let (aid2, _) = runs::waiting_run(&store, "r2", t0());
    approve(&store, "r2", &aid2, "alice", "", expires).unwrap();
    let now = expires.add_nanos(1);
    let err = approve(&store, "r", &aid, "alice", "", now).unwrap_err();
    assert!(
        matches!(err, OperatorError::Expired { already: false, .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!("agentrt: approval is not pending: approval {aid} expired at 2026-10-01T10:00:00Z")
    );
    let a = store.get_approval("r", &aid).unwrap();
    assert_eq!(
        (
            a.status,
            a.decided_at,
            a.decided_by.as_str(),
            a.note.as_str(),
            a.hash
        ),
        (ApprovalStatus::Expired, now, "", "expired", hash)
    );
    let run = store.get_run("r").unwrap();
    assert_eq!(
        (run.status, run.reason.as_str(), run.reason_detail.clone()),
        (
            RunStatus::Cancelled,
            "approval_expired",
            format!("approval {aid} expired")
        )
    );
    assert_eq!(
        store.list_steps("r").unwrap()[1].status,
        StepStatus::AwaitingApproval,
        "the step is not changed"
    );
    let evs = store.list_events_after("r", 0, 100).unwrap();
    let tail: Vec<_> = evs[evs.len() - 2..]
        .iter()
        .map(|e| (e.kind.as_str(), e.payload.as_str()))
        .collect();
    let decided = format!(r#"{{"approval_id":"{aid}","status":"expired"}}"#);
    let finished = format!(
        r#"{{"detail":"approval {aid} expired","reason":"approval_expired","status":"CANCELLED","steps":2}}"#
    );
    assert_eq!(
        tail,
        [
            ("approval.decided", decided.as_str()),
            ("run.finished", finished.as_str())
        ]
    );
    // The run is no longer waiting; with the run still waiting an expired row says so.
    raw_exec(
        &db,
        "UPDATE runs SET status='WAITING_FOR_APPROVAL' WHERE id='r'",
    );
    let err = reject(&store, "r", &aid, "bob", "", now).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("agentrt: approval is not pending: approval {aid} is already expired")
    );
    raw_exec(&db, "UPDATE runs SET status='CANCELLED' WHERE id='r'");
    drop(store);
    assert_verifies(&db);
}

#[test]
fn errors_operator_paths_are_typed() {
    let dir = tempdir();
    let store = Store::open(dir.path().join("typed.db")).unwrap();
    let (aid, _) = runs::waiting_run(&store, "r", t0());
    let err = approve(&store, "r", "nope", "alice", "", later(1)).unwrap_err();
    assert!(matches!(err, OperatorError::NotFound { .. }));
    assert_eq!(
        err.to_string(),
        "agentrt: not found: approval nope of run r"
    );
    let err = approve(&store, "nope", &aid, "alice", "", later(1)).unwrap_err();
    assert!(matches!(err, OperatorError::Store(_)), "{err}");
    approve(&store, "r", &aid, "alice", "ok", later(1)).unwrap();
    let err = reject(&store, "r", &aid, "bob", "", later(2)).unwrap_err();
    assert!(
        matches!(&err, OperatorError::NotPending { status: ApprovalStatus::Approved, decided_by, decided_at, .. }
            if decided_by == "alice" && *decided_at == later(1)),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "agentrt: approval is not pending: approval {aid} is already approved (by alice at 2026-10-01T09:00:01Z)"
        )
    );
    // Deciding anything but approved or rejected is not expressible: `decide` takes a
    // `Ruling`, so agentrt's run-time refusal of another status has no case left here.
    let review = Review {
        ruling: Ruling::Reject,
        shown: Shown::Unbound,
        by: "x",
        note: "",
        now: later(3),
    };
    let err = operator::decide(&store, "r", &aid, review).unwrap_err();
    assert!(matches!(err, OperatorError::NotPending { .. }), "{err}");
}

/// Every deciding call refuses a name the audit trail must not keep (blank, over 256 bytes, a
/// control, bidi or invisible character), before anything is written: the approval stays
/// pending, the run waiting, no event (found from outside: the library recorded them; only
/// the commands and the console refused them).
#[test]
fn every_deciding_call_refuses_a_name_the_audit_trail_must_not_keep() {
    let dir = tempdir();
    let db = dir.path().join("n.db");
    let store = Store::open(&db).unwrap();
    let (aid, hash) = runs::waiting_run(&store, "r", t0());
    let events_before = store.count_events("r").unwrap();
    let long = "a".repeat(257);
    for by in [
        "",
        "   ",
        "\u{1b}[31mmallory",
        "\u{202e}evil",
        "a\nb",
        "x\u{200b}",
        &long,
    ] {
        let calls: [(&str, Result<(), OperatorError>); 5] = [
            (
                "approve_shown",
                approve_shown(&store, "r", &aid, &hash, by, "", later(1)).map(|_| ()),
            ),
            (
                "reject_shown",
                reject_shown(&store, "r", &aid, &hash, by, "no", later(1)).map(|_| ()),
            ),
            (
                "deny_shown",
                operator::deny_shown(&store, "r", &aid, &hash, by, "no", later(1)).map(|_| ()),
            ),
            (
                "cancel",
                operator::cancel(&store, "r", by, "", later(1)).map(|_| ()),
            ),
            (
                "cancel_shown",
                operator::cancel_shown(&store, "r", &aid, &hash, by, "", later(1)).map(|_| ()),
            ),
        ];
        for (call, res) in calls {
            match res {
                Err(e @ OperatorError::NameRefused { .. }) => {
                    let said = e.to_string();
                    assert!(said.contains("cannot be recorded"), "{call} {by:?}: {said}");
                    assert!(
                        by.trim().is_empty() || !said.contains(by),
                        "{call}: the name is not repeated"
                    );
                }
                other => panic!("{call} {by:?}: {other:?}"),
            }
        }
    }
    let a = store.get_approval("r", &aid).unwrap();
    assert_eq!(a.status, ApprovalStatus::Pending);
    assert_eq!(
        store.get_run("r").unwrap().status,
        RunStatus::WaitingForApproval
    );
    assert_eq!(store.count_events("r").unwrap(), events_before);
    // A name with a backslash and any printable character is kept.
    let d = approve_shown(&store, "r", &aid, &hash, "DOMAIN\\Zoë O'Neil", "", later(2)).unwrap();
    assert_eq!(d.approval.decided_by, "DOMAIN\\Zoë O'Neil");
}

#[test]
fn pending_approval_selection_rule() {
    let dir = tempdir();
    let db = dir.path().join("sel.db");
    let store = Store::open(&db).unwrap();
    let (aid, _) = runs::waiting_run(&store, "r", t0());
    assert_eq!(pending_approval(&store, "r", None).unwrap().id, aid);
    assert_eq!(
        pending_approval(&store, "r", Some(aid.as_bytes()))
            .unwrap()
            .id,
        aid
    );
    let err = pending_approval(&store, "r", Some(b"zz")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("approval zz of run r: agentrt: not found"),
        "{err}"
    );
    // 24 more pending rows: at most 20 are named.
    for i in 0..24 {
        raw_exec(
            &db,
            &format!(
                "INSERT INTO approvals SELECT 'x{i:02}', run_id, step_id, kind, capability_json, presentation_json, request_json, hash, status, created_at, decided_at, decided_by, note, expires_at FROM approvals WHERE id='{aid}'"
            ),
        );
    }
    let err = pending_approval(&store, "r", None).unwrap_err();
    let SelectError::Ambiguous {
        total, candidates, ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!((*total, candidates.len()), (25, 20));
    let named: Vec<String> = std::iter::once(aid.clone())
        .chain((0..19).map(|i| format!("x{i:02}")))
        .collect();
    assert_eq!(
        err.to_string(),
        format!(
            "run r has 25 pending approvals, name one of {}, and 5 more: more than one pending approval",
            named.join(", ")
        )
    );
    approve(&store, "r", &aid, "alice", "", later(1)).unwrap();
    let err = pending_approval(&store, "r", Some(aid.as_bytes())).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("approval {aid} is approved: approval is not pending")
    );
    raw_exec(&db, "DELETE FROM approvals WHERE id LIKE 'x%'");
    let err = pending_approval(&store, "r", None).unwrap_err();
    assert_eq!(err.to_string(), "run r: no pending approval");
    raw_exec(
        &db,
        "INSERT INTO approvals SELECT 'x1', run_id, step_id, kind, capability_json, presentation_json, request_json, hash, 'pending', created_at, '', '', '', expires_at FROM approvals",
    );
    raw_exec(
        &db,
        "INSERT INTO approvals SELECT 'x2', run_id, step_id, kind, capability_json, presentation_json, request_json, hash, 'pending', created_at, '', '', '', expires_at FROM approvals WHERE id = 'x1'",
    );
    let err = pending_approval(&store, "r", None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "run r has 2 pending approvals, name one of x1, x2: more than one pending approval"
    );
}

#[test]
fn store_undecodable_rows_do_not_wedge_the_run() {
    let dir = tempdir();
    let db = dir.path().join("damaged.db");
    let m = fixture(&db, &["--scenario", "damaged"]);
    let store = Store::open_existing(&db, false).unwrap();
    let run = s(&m, "/scenarios/damaged/runs/0/id");
    let aid = s(&m, "/scenarios/damaged/runs/0/damaged/approval_id");
    let err = approve(&store, run, aid, "alice", "", Timestamp::now()).unwrap_err();
    assert!(matches!(err, OperatorError::HashMismatch { .. }), "{err}");
    assert!(err.to_string().contains("request: "), "{err}");
    let c = operator::cancel(&store, run, "alice", "damaged rows", Timestamp::now()).unwrap();
    assert_eq!((c.run.status, c.steps_failed), (RunStatus::Cancelled, 1));
    drop(store);
    assert_verifies(&db);
}

#[test]
fn decisions_on_a_fixture_database_still_verify() {
    let dir = tempdir();
    let db = dir.path().join("fx.db");
    let m = fixture(&db, &[]);
    let store = Store::open_existing(&db, false).unwrap();
    let approvals = m["approvals"].as_array().unwrap();
    let pending: Vec<_> = approvals
        .iter()
        .filter(|a| a["status"] == "pending" && a["scenario"] != "damaged")
        .collect();
    assert!(pending.len() >= 4);
    let now = Timestamp::now();
    for (i, a) in pending.iter().enumerate() {
        let (run, id) = (s(a, "/run_id"), s(a, "/id"));
        let res = match i % 3 {
            0 => approve(&store, run, id, "alice", "ok", now).map(|_| ()),
            1 => reject(&store, run, id, "bob", "no", now).map(|_| ()),
            _ => {
                let hash = s(a, "/hash");
                approve_shown(&store, run, id, hash, "carol", "", now).map(|_| ())
            }
        };
        // Several approvals of one run (e.g. a queue) : a rejected run stops the others.
        if let Err(e) = res {
            assert!(matches!(e, OperatorError::RunNotWaiting { .. }), "{e}");
        }
    }
    let running = s(&m, "/scenarios/running/runs/0/id");
    operator::cancel(&store, running, "dave", "stop", now).unwrap();
    drop(store);
    assert_verifies(&db);
}
