//! Leases and cancel racing a live loop (spec 7, 8.1).

mod runtime_support;

use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};

use countersign::runtime::agent::{self, DecideFuture, Scripted, ScriptedAgent, StepInput};
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::store::Store;
use countersign::runtime::tools::{FnTool, SideEffect, ToolOutput};
use countersign::runtime::types::{RunStatus, StepStatus};
use runtime_support::*;

/// A scripted answer that first runs `f` (with the store), then decides `d`.
fn with(
    store: &Arc<Store>,
    d: countersign::runtime::types::Decision,
    f: impl FnOnce(&Store, &StepInput) + Send + 'static,
) -> Scripted {
    let store = store.clone();
    Scripted::With(Box::new(move |input: StepInput| -> DecideFuture {
        f(&store, &input);
        Box::pin(async move { Ok(d) })
    }))
}

fn raw(db: &Db, sql: &str) {
    rusqlite::Connection::open(&db.path)
        .unwrap()
        .execute(sql, [])
        .unwrap();
}

#[test]
fn cancel_live_loop_stops_at_its_next_write() {
    let db = db();
    let (tools, calls) = echo_registry("t", SideEffect::ReadOnly);
    let agent = ScriptedAgent::new([with(&db.store, agent::tool_call("t", "{}"), |s, i| {
        cancel(s, &i.run_id, "carol", "stop")
    })]);
    let d = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let run = rt()
        .block_on(d.start_with_id("r", "g", limits()))
        .expect("a cancelled run is returned without an error");
    assert_eq!(
        (run.status, run.reason.as_str(), run.reason_detail.as_str()),
        (RunStatus::Cancelled, "operator_cancelled", "stop")
    );
    assert!(
        calls.lock().unwrap().is_empty(),
        "nothing runs after the cancel"
    );
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(s[0].status, StepStatus::Failed);
    assert_eq!(
        s[0].decision_json, "",
        "the decision write found the run cancelled"
    );
    assert_eq!(
        s[0].observation.as_ref().unwrap().summary,
        "cancelled by operator: stop"
    );
    assert_eq!(types(&db.store, "r").last().unwrap(), "run.finished");
    verify(&db.path);
}

#[test]
fn cancel_tool_outcome_is_appended_late() {
    let db = db();
    let store = db.store.clone();
    let t = FnTool::new(def("t", SideEffect::LocalMutation, OBJ), move |c| {
        cancel(&store, &c.run_id, "carol", "changed my mind");
        Box::pin(async {
            Ok(ToolOutput {
                content: br#"{"written":true}"#.to_vec(),
                summary: "wrote it".into(),
            })
        })
    });
    let agent = ScriptedAgent::new([agent::tool_call("t", "{}"), agent::complete("")]);
    let d = driver(&db.store, registry(vec![t]), Arc::new(DefaultPolicy), agent);
    let run = rt().block_on(d.start_with_id("r", "g", limits())).unwrap();
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Cancelled, "operator_cancelled")
    );
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(
        s[0].status,
        StepStatus::Failed,
        "the step keeps what cancel wrote"
    );
    assert_eq!(s[0].observation.as_ref().unwrap().kind, "interrupted");
    let ev = events(&db.store, "r");
    let n = ev.len();
    assert_eq!(ev[n - 2].kind, "run.finished");
    assert_eq!(ev[n - 1].kind, "step.tool_finished");
    let h = countersign::runtime::json::content_hash(br#"{"written":true}"#);
    let p = &ev[n - 1].payload;
    assert!(
        p.starts_with(&format!(r#"{{"content_hash":"{h}","duration_ms":"#)),
        "{p}"
    );
    assert!(p.ends_with(&format!(
        r#","late":true,"observation":{{"kind":"tool_result","content":{{"written":true}},"summary":"wrote it","content_hash":"{h}"}},"summary":"wrote it","tool":"t"}}"#
    )), "{p}");
    assert_eq!(db.store.get_run("r").unwrap().status, RunStatus::Cancelled);
    verify(&db.path);
}

#[test]
fn lease_loop_that_loses_its_lease_stops_before_the_next_tool_call() {
    let db = db();
    let (tools, calls) = echo_registry("t", SideEffect::ReadOnly);
    let path = db.path.clone();
    let agent = ScriptedAgent::new([with(
        &db.store,
        agent::tool_call("t", "{}"),
        move |_s, i| {
            rusqlite::Connection::open(&path)
            .unwrap()
            .execute("UPDATE runs SET lease_owner = 'thief', lease_expires_at = '2999-01-01T00:00:00Z' WHERE id = ?", [&i.run_id])
            .unwrap();
        },
    )]);
    let d = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let e = rt()
        .block_on(d.start_with_id("r", "g", limits()))
        .unwrap_err();
    assert!(e.is_lease_lost(), "{e}");
    assert!(calls.lock().unwrap().is_empty());
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(
        s[0].status,
        StepStatus::Deciding,
        "the step in flight is left for the next owner"
    );
}

#[test]
fn lease_lapsed_lease_starts_no_side_effect() {
    let db = db();
    let (tools, calls) = echo_registry("t", SideEffect::ReadOnly);
    let path = db.path.clone();
    let agent = ScriptedAgent::new([with(
        &db.store,
        agent::tool_call("t", "{}"),
        move |_s, i| {
            rusqlite::Connection::open(&path)
                .unwrap()
                .execute(
                    "UPDATE runs SET lease_expires_at = '2001-01-01T00:00:00Z' WHERE id = ?",
                    [&i.run_id],
                )
                .unwrap();
        },
    )]);
    let d = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let e = rt()
        .block_on(d.start_with_id("r", "g", limits()))
        .unwrap_err();
    assert!(e.is_lease_lost(), "{e}");
    assert!(
        e.to_string()
            .contains("the lease expired at 2001-01-01T00:00:00Z"),
        "{e}"
    );
    assert!(calls.lock().unwrap().is_empty());
}

/// An agent whose one answer (complete) waits until it is let go: it says on `started` that
/// it was asked, then waits for a send on `release`. Returns (agent, started, release).
fn held_agent() -> (Arc<ScriptedAgent>, Receiver<()>, Sender<()>) {
    let (release, rx) = std::sync::mpsc::channel::<()>();
    let rx = Arc::new(Mutex::new(rx));
    let (started_tx, started) = std::sync::mpsc::channel::<()>();
    let agent = ScriptedAgent::new([Scripted::With(Box::new(move |_i| -> DecideFuture {
        started_tx.send(()).unwrap();
        Box::pin(async move {
            let rx = rx.clone();
            tokio::task::spawn_blocking(move || rx.lock().unwrap().recv().unwrap())
                .await
                .unwrap();
            Ok(agent::complete(""))
        })
    }))]);
    (agent, started, release)
}

#[test]
fn lease_resume_of_a_live_run_is_refused() {
    let db = db();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let rtm = rt();
    // The first driver's agent waits until the second driver has tried to resume.
    let (agent, started_rx, tx) = held_agent();
    let d1 = driver(
        &db.store,
        registry(vec![echo("t", SideEffect::ReadOnly, calls.clone())]),
        Arc::new(DefaultPolicy),
        agent,
    );
    let h = rtm.spawn(async move { d1.start_with_id("r", "g", limits()).await });
    started_rx.recv().unwrap();
    let d2 = driver2(
        &db.store,
        registry(vec![]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let before = events(&db.store, "r").len();
    let e = rtm.block_on(d2.resume("r")).unwrap_err();
    assert!(e.is_run_leased(), "{e}");
    assert!(
        e.to_string()
            .starts_with("agentrt: run r is leased by test/"),
        "{e}"
    );
    assert_eq!(events(&db.store, "r").len(), before, "nothing changes");
    tx.send(()).unwrap();
    let run = rtm.block_on(h).unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Completed);
}

#[test]
fn lease_same_lease_owner_name_is_two_owners() {
    let db = db();
    let a = driver2(
        &db.store,
        registry(vec![]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let b = driver2(
        &db.store,
        registry(vec![]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    assert!(a.owner().starts_with("test/") && b.owner().starts_with("test/"));
    assert_eq!(a.owner().len(), "test/".len() + 12);
    assert_ne!(a.owner(), b.owner());
}

#[test]
fn lease_expired_lease_is_taken_over_and_reconciled_once() {
    let db = db();
    let calls = Arc::new(Mutex::new(Vec::new()));
    // A run left RUNNING by a driver that stopped while deciding (its lease lapsed).
    let path = db.path.clone();
    let agent = ScriptedAgent::new([with(
        &db.store,
        agent::tool_call("t", "{}"),
        move |_s, i| {
            rusqlite::Connection::open(&path)
            .unwrap()
            .execute("UPDATE runs SET lease_owner = 'gone/abc', lease_expires_at = '2001-01-01T00:00:00Z' WHERE id = ?", [&i.run_id])
            .unwrap();
        },
    )]);
    let d1 = driver(
        &db.store,
        registry(vec![echo("t", SideEffect::ReadOnly, calls.clone())]),
        Arc::new(DefaultPolicy),
        agent,
    );
    assert!(rt().block_on(d1.start_with_id("r", "g", limits())).is_err());
    let d2 = driver2(
        &db.store,
        registry(vec![echo("t", SideEffect::ReadOnly, calls.clone())]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let run = rt().block_on(d2.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    let ev = kinds(&db.store, "r");
    let taken: Vec<_> = ev.iter().filter(|(k, _)| k == "lease.taken_over").collect();
    assert_eq!(taken.len(), 1);
    assert_eq!(
        taken[0].1,
        format!(
            r#"{{"owner":"{}","previous_expires_at":"2001-01-01T00:00:00Z","previous_owner":"gone/abc"}}"#,
            d2.owner()
        )
    );
    assert!(ev.iter().any(|(k, p)| k == "step.interrupted"
        && p == r#"{"previous_status":{"previous_status":"deciding"}}"#));
    assert!(
        ev.iter()
            .any(|(k, p)| k == "run.resumed" && p == r#"{"after":"interruption"}"#)
    );
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(s[0].status, StepStatus::Interrupted);
    assert_eq!(
        s[0].observation.as_ref().unwrap().summary,
        "step interrupted while deciding"
    );
    assert!(
        calls.lock().unwrap().is_empty(),
        "a step interrupted while deciding never runs its tool"
    );
    let _ = raw;
    verify(&db.path);
}

#[test]
fn lease_long_tool_call_keeps_the_lease() {
    let db = db();
    let t = FnTool::new(def("slow", SideEffect::ReadOnly, OBJ), |_c| {
        Box::pin(async {
            tokio::time::sleep(std::time::Duration::from_millis(3000)).await;
            Ok(ToolOutput::default())
        })
    });
    let mut cfg = config(
        &db.store,
        registry(vec![t]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::tool_call("slow", "{}"), agent::complete("")]),
    );
    // A TTL of 1 s (a heartbeat every third of it): a loaded machine running the suite's
    // other tests beside this one lost a 300 ms lease between two heartbeats.
    cfg.lease_ttl = std::time::Duration::from_millis(1000);
    let d = countersign::runtime::driver::Driver::new(cfg).unwrap();
    let run = rt().block_on(d.start_with_id("r", "g", limits())).unwrap();
    assert_eq!(
        run.status,
        RunStatus::Completed,
        "the heartbeat renewed the lease through a call three TTLs long"
    );
}

#[test]
fn lease_one_driver_refuses_a_second_call_on_its_run() {
    let db = db();
    let rtm = rt();
    let (agent, started_rx, tx) = held_agent();
    let d = driver(&db.store, registry(vec![]), Arc::new(DefaultPolicy), agent);
    let d1 = d.clone();
    let h = rtm.spawn(async move { d1.start_with_id("r", "g", limits()).await });
    started_rx.recv().unwrap();
    let e = rtm.block_on(d.resume("r")).unwrap_err();
    assert!(e.is_run_leased(), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("agentrt: run r is leased by {} until ", d.owner())),
        "{e}"
    );
    tx.send(()).unwrap();
    assert_eq!(
        rtm.block_on(h).unwrap().unwrap().status,
        RunStatus::Completed
    );
}

#[test]
fn cancel_through_the_driver_uses_its_clock_and_refuses_a_terminal_run() {
    let db = db();
    let (tools, _calls) = echo_registry("push", SideEffect::RemoteMutation);
    let d = driver(
        &db.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::tool_call("push", "{}")]),
    );
    rt().block_on(d.start_with_id("r", "g", limits())).unwrap();
    let run = d.cancel("r", "carol", "not today").unwrap();
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Cancelled, "operator_cancelled")
    );
    assert!(
        run.finished_at
            .to_rfc3339()
            .starts_with("2026-09-25T14:03:04."),
        "the driver's clock: {}",
        run.finished_at
    );
    assert!(d.cancel("r", "carol", "again").is_err());
    verify(&db.path);
}

#[test]
fn lease_heartbeat_stops_when_a_panic_unwinds_the_loop() {
    // The id generator panics (a bug in the consumer's code, called where the driver opens a
    // step): the panic unwinds the loop, and the run keeps the lease row it had, but nobody
    // renews it any more, so another process can take the run over once it expires.
    // `lease_long_tool_call_keeps_the_lease` shows the same heartbeat renewing while the loop
    // lives. (An agent's panic no longer unwinds: it is the run's agent error, decision 0107.)
    let db = db();
    let agent = ScriptedAgent::new([agent::complete("")]);
    let mut cfg = config(&db.store, registry(vec![]), Arc::new(DefaultPolicy), agent);
    cfg.ids = Some(Arc::new(|| panic!("a bug in the id generator")));
    cfg.lease_ttl = std::time::Duration::from_millis(300);
    let d = countersign::runtime::driver::Driver::new(cfg).unwrap();
    let rtm = rt();
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rtm.block_on(d.start_with_id("r", "g", limits()))
    }));
    assert!(out.is_err(), "the id generator's panic unwound the loop");
    let read = || -> (String, String) {
        rusqlite::Connection::open(&db.path)
            .unwrap()
            .query_row(
                "SELECT status, lease_expires_at FROM runs WHERE id = 'r'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
    };
    let before = read();
    assert_eq!(before.0, "RUNNING", "{before:?}");
    assert!(!before.1.is_empty(), "the lease row is still there");
    // Several heartbeat periods (TTL/3 = 100 ms): a live heartbeat would have renewed it.
    std::thread::sleep(std::time::Duration::from_millis(700));
    assert_eq!(read(), before, "nothing renewed the lease after the panic");
}

/// A loop stopped by a store error mid-step (the database locked past the store's busy
/// timeout while the tool's outcome is written) keeps its lease until it runs out, and then
/// another owner takes the run over: the call's outcome was never recorded, so a person is
/// asked. Found from outside: the lease was given back, leaving a RUNNING run with no holder,
/// which no worker took over and `show` did not flag.
#[test]
fn lease_a_loop_stopped_by_a_store_error_keeps_its_lease_until_it_runs_out() {
    let db = db();
    let marker = db.dir.path().join("started");
    let m = marker.clone();
    let t = FnTool::new(def("slow", SideEffect::LocalMutation, OBJ), move |_c| {
        let m = m.clone();
        Box::pin(async move {
            std::fs::write(&m, b"x").unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            Ok(ToolOutput::default())
        })
    });
    let mut cfg = config(
        &db.store,
        registry(vec![t]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::tool_call("slow", "{}"), agent::complete("")]),
    );
    cfg.lease_ttl = std::time::Duration::from_millis(1000);
    let d = countersign::runtime::driver::Driver::new(cfg).unwrap();
    let rtm = rt();
    let h = rtm.spawn(async move { d.start_with_id("r", "g", limits()).await });
    while !marker.exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SQLite's write lock, held past the store's busy timeout (5 s) while the outcome is
    // written (that write starts 0.5 s in and fails at about 5.5 s), then let go at 7.5 s,
    // inside the busy timeout of what the loop does next on its way out.
    let path = db.path.clone();
    let holder = std::thread::spawn(move || {
        let lock = rusqlite::Connection::open(&path).unwrap();
        lock.execute_batch("BEGIN IMMEDIATE").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(7500));
        lock.execute_batch("ROLLBACK").unwrap();
    });
    let e = rtm
        .block_on(h)
        .unwrap()
        .expect_err("the outcome's write could not take the lock");
    holder.join().unwrap();
    let run = db.store.get_run("r").unwrap();
    assert_eq!(run.status, RunStatus::Running, "{e}");
    assert!(
        run.lease_owner.starts_with("test/"),
        "the lease is kept: {:?} ({e})",
        run.lease_owner
    );
    while db.store.get_run("r").unwrap().lease_expires_at
        > countersign::runtime::types::Timestamp::now()
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (tools, calls) = echo_registry("slow", SideEffect::LocalMutation);
    let d2 = driver2(
        &db.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let run = rtm.block_on(d2.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    assert_eq!(
        latest_approval(&db.store, "r").kind,
        "interrupted_side_effect"
    );
    assert!(calls.lock().unwrap().is_empty(), "nothing ran again");
}
