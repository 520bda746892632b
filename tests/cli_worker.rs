//! `countersign worker` as real processes: three workers on the demo's database, every
//! waiting approval granted after they started; each granted request is executed exactly once
//! (one `run.resumed` and one `step.tool_started` per approval, one ledger row per call key),
//! and the database still passes the independent verifier. Also `--once`, and `recheck`'s
//! exit codes on the demo.

mod support;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use countersign::runtime::operator;
use countersign::runtime::store::Store;
use countersign::runtime::types::{RunStatus, Timestamp};
use support::bin::{cs, on};
use support::{tempdir, verify};

fn worker(db: &Path, out: &Path) -> Child {
    on(db)
        .arg("worker")
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("a worker starts")
}

fn demo(dir: &Path) -> std::path::PathBuf {
    let db = dir.join("demo.db");
    let o = cs(&db, &["demo", "--no-tui"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    db
}

/// An approval's `decided_at` as stored.
fn decided_at(c: &rusqlite::Connection, id: &str) -> String {
    c.query_row(
        "SELECT decided_at FROM approvals WHERE id = ?1",
        [id],
        |r| r.get(0),
    )
    .unwrap()
}

fn waiting(store: &Store) -> Vec<String> {
    store
        .list_runs_page(1000, 0)
        .unwrap()
        .items
        .into_iter()
        .filter(|r| r.status == RunStatus::WaitingForApproval)
        .map(|r| r.id)
        .collect()
}

#[test]
fn workers_in_several_processes_execute_each_approved_request_exactly_once() {
    let dir = tempdir();
    let db = demo(dir.path());
    let outs: Vec<_> = (0..3)
        .map(|i| dir.path().join(format!("w{i}.out")))
        .collect();
    let mut workers: Vec<Child> = outs.iter().map(|o| worker(&db, o)).collect();
    let store = Store::open_existing(&db, false).unwrap();
    let mut granted = Vec::new();
    for run in waiting(&store) {
        let a = operator::pending_approval(&store, &run, None).unwrap();
        operator::approve_shown(&store, &run, &a.id, &a.hash, "ci", "ok", Timestamp::now())
            .unwrap();
        granted.push((run, a.id));
    }
    assert!(granted.len() >= 3, "the demo's queue: {granted:?}");
    // Wait until every grant was taken up (no run left resumable, none running).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let busy = !store.resumable_runs(100).unwrap().is_empty()
            || store
                .list_runs_page(1000, 0)
                .unwrap()
                .items
                .iter()
                .any(|r| r.status == RunStatus::Running);
        if !busy {
            break;
        }
        assert!(Instant::now() < deadline, "the workers never finished");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A worker prints its line after the run's last commit: wait for the lines too before the
    // kill, or a grant resumed in the last instant loses its line to the SIGKILL.
    let said_now = || -> usize {
        outs.iter()
            .map(|o| {
                std::fs::read_to_string(o)
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.starts_with("resumed run "))
                    .count()
            })
            .sum()
    };
    while said_now() < granted.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    // Several grants touch ord_1004, so some are denied on resume or pause again (the facts
    // changed): none may run twice, and the others must have run.
    let mut executed = 0;
    for (run, approval) in &granted {
        let events = store
            .list_events_page(run.as_str(), 10_000, 0)
            .unwrap()
            .items;
        let with = |kind: &str| {
            events
                .iter()
                .filter(|e| e.kind == kind && e.payload.contains(approval.as_str()))
                .count()
        };
        assert!(with("run.resumed") <= 1, "run {run}: resumed at most once");
        assert!(
            with("step.tool_started") <= 1,
            "run {run}: executed at most once"
        );
        executed += with("step.tool_started");
        let now = store.get_run(run.as_str()).unwrap();
        let latest = store.list_approvals(run.as_str()).unwrap().pop().unwrap();
        assert!(
            now.status != RunStatus::WaitingForApproval || latest.id != *approval,
            "run {run}: its grant was taken up"
        );
    }
    assert!(executed >= 2, "grants executed: {executed}");
    let said: usize = outs
        .iter()
        .map(|o| {
            std::fs::read_to_string(o)
                .unwrap()
                .lines()
                .filter(|l| l.starts_with("resumed run "))
                .count()
        })
        .sum();
    assert_eq!(
        said,
        granted.len(),
        "each grant resumed by exactly one worker"
    );
    // One ledger row per call key in the backend.
    let backend = rusqlite::Connection::open(dir.path().join("demo.orders.db")).unwrap();
    let dup: i64 = backend
        .query_row(
            "SELECT count(*) FROM (SELECT call_key FROM effects GROUP BY call_key HAVING count(*) > 1)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(dup, 0);
    drop(store);
    let (code, report) = verify(&db);
    assert_eq!(code, 0, "{report}");
}

#[test]
fn worker_once_resumes_what_is_decided_and_exits() {
    let dir = tempdir();
    let db = demo(dir.path());
    let store = Store::open_existing(&db, false).unwrap();
    let run = waiting(&store).remove(0);
    let a = operator::pending_approval(&store, &run, None).unwrap();
    operator::deny_shown(
        &store,
        &run,
        &a.id,
        &a.hash,
        "ci",
        "not like this",
        Timestamp::now(),
    )
    .unwrap();
    let o = cs(&db, &["worker", "--once"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("resumed run {run}: COMPLETED")),
        "{text}"
    );
}

/// A resume that fails (here: another process holds the database's write lock past the busy
/// wait) is tried again by itself, with no other change to wake the worker: the approved run
/// completes once the lock is let go (found from outside: it stayed approved and waiting until
/// some unrelated write happened, which on a quiet database is never).
#[test]
fn a_failed_resume_is_tried_again_without_another_change() {
    let dir = tempdir();
    let db = demo(dir.path());
    let store = Store::open_existing(&db, false).unwrap();
    let run = waiting(&store).remove(0);
    let a = operator::pending_approval(&store, &run, None).unwrap();
    operator::approve_shown(&store, &run, &a.id, &a.hash, "ci", "", Timestamp::now()).unwrap();
    drop(store);
    // Another process's write, held: the worker's first resume waits out its busy timeout.
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let out = dir.path().join("worker.out");
    let mut w = worker(&db, &out);
    let said = || std::fs::read_to_string(&out).unwrap_or_default();
    // Bounded waits on what the worker does, never a verdict by the clock.
    let until = |what: &str, done: &dyn Fn() -> bool| {
        let start = Instant::now();
        while !done() {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "the worker never {what}: {}",
                said()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    until("failed its first resume", &|| {
        said().contains("resume failed")
    });
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    let status = || {
        Store::open_existing(&db, true)
            .unwrap()
            .get_run(run.as_bytes())
            .unwrap()
            .status
    };
    until("tried again", &|| status() == RunStatus::Completed);
    let _ = w.kill();
    let _ = w.wait();
    assert!(
        said().contains(&format!("resumed run {run}: COMPLETED")),
        "{}",
        said()
    );
    verify(&db);
}

#[test]
fn worker_without_the_consumers_backend_says_what_is_missing() {
    let dir = tempdir();
    let db = dir.path().join("plain.db");
    drop(Store::open(&db).unwrap());
    let o = cs(&db, &["worker", "--once"]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("backend") && e.contains("missing"), "{e}");
}

#[test]
fn recheck_exits_one_when_the_facts_shown_are_stale() {
    let dir = tempdir();
    let db = demo(dir.path());
    let store = Store::open_existing(&db, false).unwrap();
    // The demo's large refund: 65.00 on ord_1004.
    let run = waiting(&store)
        .into_iter()
        .find(|r| {
            store
                .list_approvals(r.as_str())
                .unwrap()
                .iter()
                .any(|a| a.presentation.contains("ord_1004") && a.presentation.contains("6500"))
        })
        .expect("the 65.00 refund waits");
    drop(store);
    let o = cs(&db, &["recheck", &run]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("same as recorded"), "{text}");
    // An earlier refund on the same order ran: only 30.00 is refundable now.
    let backend = rusqlite::Connection::open(dir.path().join("demo.orders.db")).unwrap();
    backend
        .execute(
            "UPDATE orders SET refunded_cents = total_cents - 3000 WHERE id = 'ord_1004'",
            [],
        )
        .unwrap();
    drop(backend);
    let before = std::fs::read(&db).unwrap();
    let o = cs(&db, &["recheck", &run[..8]]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("DIFFERS"), "{text}");
    assert!(text.contains("policy now: deny: invalid_state"), "{text}");
    assert_eq!(std::fs::read(&db).unwrap(), before, "recheck wrote nothing");
}

/// A row set to approved without the decision's `approval.decided` event (by hand, by a
/// trigger, in a look-alike table) runs nothing: `resume` and `worker --once` refuse it
/// (exit 1, saying why), the run stays waiting and its tool does not start; decided through
/// `approve`, the same call then runs (found from outside: workers paid refunds whose
/// approvals had been set to approved in the table).
#[test]
fn an_approval_granted_outside_the_operator_runs_nothing() {
    let dir = tempdir();
    let db = demo(dir.path());
    let store = Store::open_existing(&db, true).unwrap();
    let run = waiting(&store)[0].clone();
    let a = operator::pending_approval(&store, &run, None).unwrap();
    let started = |store: &Store| {
        store
            .list_events_after(&run, 0, 10_000)
            .unwrap()
            .iter()
            .filter(|e| e.kind == "step.tool_started")
            .count()
    };
    let before = started(&store);
    drop(store);
    let c = rusqlite::Connection::open(&db).unwrap();
    let set = |status: &str| {
        c.execute(
            "UPDATE approvals SET status = ?1, decided_by = 'mallory', decided_at = created_at \
             WHERE id = ?2",
            [status, &a.id],
        )
        .unwrap();
    };
    set("approved");
    for args in [&["resume", &run][..], &["worker", "--once"]] {
        let o = cs(&db, args);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.status.code(), Some(1), "{args:?}: {all}");
        assert!(
            all.contains(
                "is stored as approved, but no approval.decided event records a decision of it; nothing ran"
            ),
            "{args:?}: {all}"
        );
    }
    // An event written beside the row does not make it a decision: one that does not hash to
    // its place in the chain, and one that hashes but is not what deciding writes (a repeated
    // key) are refused too (found from outside: both ran the refund).
    let c = rusqlite::Connection::open(&db).unwrap();
    let append = |payload: &str, hashed: bool| {
        let (seq, prev): (i64, String) = c
            .query_row(
                "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        // At the row's decision time, so that only what each case changes is wrong.
        let at = decided_at(&c, &a.id);
        let (seq, at) = (seq + 1, at.as_str());
        let hash = if hashed {
            countersign::runtime::json::event_hash_bytes(
                &prev,
                seq,
                run.as_bytes(),
                a.step_id.as_bytes(),
                at,
                "approval.decided",
                payload,
            )
        } else {
            "0".repeat(64)
        };
        c.execute(
            "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) \
             VALUES (?1, ?2, ?3, ?4, 'approval.decided', ?5, ?6)",
            rusqlite::params![seq, run, a.step_id, at, payload, hash],
        )
        .unwrap();
    };
    let id = &a.id;
    for (payload, hashed, says) in [
        (
            format!(r#"{{"approval_id":"{id}","by":"mallory","note":"","status":"approved"}}"#),
            false,
            "its approval.decided event does not hash to its place in the event chain",
        ),
        (
            format!(
                r#"{{"approval_id":"{id}","by":"mallory","note":"","status":"rejected","status":"approved"}}"#
            ),
            true,
            "its approval.decided event is not the one deciding writes for this row",
        ),
    ] {
        append(&payload, hashed);
        let o = cs(&db, &["resume", &run]);
        let all = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(1), "{payload}: {all}");
        assert!(all.contains(says), "{payload}: {all}");
    }
    drop(c);
    let store = Store::open_existing(&db, true).unwrap();
    assert_eq!(
        store.get_run(&run).unwrap().status,
        RunStatus::WaitingForApproval
    );
    assert_eq!(started(&store), before, "the tool did not start");
    // Decided through the operator, the call runs.
    set("pending");
    let o = cs(&db, &["approve", &run, "--yes"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Its decision time moved (a grant's time to live runs from it) runs nothing either (found
    // from outside: an expired grant ran after its row's decided_at was moved).
    let c = rusqlite::Connection::open(&db).unwrap();
    let at = decided_at(&c, &a.id);
    let move_to = |t: &str| {
        c.execute(
            "UPDATE approvals SET decided_at = ?1 WHERE id = ?2",
            [t, &a.id],
        )
        .unwrap();
    };
    move_to("2099-01-01T00:00:00Z");
    let o = cs(&db, &["resume", &run]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("its decision time is not the one its approval.decided event records"),
        "{err}"
    );
    move_to(&at);
    drop(c);
    let o = cs(&db, &["resume", &run]);
    assert!(
        o.status.code() == Some(0),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(started(&store), before + 1);
}
