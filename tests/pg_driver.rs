//! The runtime's driver on PostgreSQL (issue 19, docs/decisions/0083) against a real server
//! (`tests/pg_support`): a run pauses for approval, is approved through the operator, resumed
//! by the driver and completes, with the events SQLite records for the same run, chained by
//! the driver's own sequencer (nobody starts one by hand), verified on the URL and, copied
//! back, by agentrt's independent verifier; a cancel between the verdict and the tool's start
//! runs nothing; two owners on two connections contend for one run (one holds it, the other is
//! refused with `RunLeased`, and takes it over once the lease lapses); and the lease is judged
//! by the server's clock, whatever the client's clock reads.

mod pg_support;
mod support;
use pg_support::{demo_refund_on, refunds_of, said};
use support::bin::cli;
#[cfg(feature = "providers")]
mod providers_support;
mod runtime_support;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign::pgstore::PgStore;
use countersign::pgstore::copy::{Endpoint, copy};
use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::clock::Clock;
use countersign::runtime::driver::{Config, Driver, Gate, Verdict};
use countersign::runtime::operator;
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::store::RunStore;
use countersign::runtime::tools::{Registry, SideEffect};
use countersign::runtime::types::{Event, RunStatus, StepStatus, Timestamp};
use runtime_support::*;

fn pg(db: &pg_support::TestDb) -> Arc<PgStore> {
    Arc::new(PgStore::open(&db.pg_url()).expect("open the test database"))
}

/// `(type, payload)` of a run's chained events in seq order, and how many wait in the inbox.
fn chained(db: &pg_support::TestDb, run_id: &str) -> (Vec<(String, String)>, i64) {
    let mut c = db.client();
    let ev = c
        .query(
            "SELECT type, payload_json FROM events WHERE run_id = $1 ORDER BY seq",
            &[&run_id],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let inbox: i64 = c
        .query_one("SELECT count(*) FROM event_inbox", &[])
        .unwrap()
        .get(0);
    (ev, inbox)
}

/// The driver the SQLite runtime tests use (test clock, ids, owner), on `store`.
fn pg_config(
    store: &Arc<PgStore>,
    tools: Registry,
    agent: Arc<ScriptedAgent>,
) -> Config<Arc<dyn countersign::runtime::agent::Agent>> {
    let mut c = Config::new(store.clone(), tools, Arc::new(DefaultPolicy));
    c.now = Some(clock());
    c.ids = Some(ids());
    c.lease_owner = "test".into();
    c.agent(agent)
}

fn push_agent() -> Arc<ScriptedAgent> {
    ScriptedAgent::new([
        agent::tool_call("push", r#"{"ref": "main", "n": 7}"#),
        agent::complete(""),
    ])
}

/// `countersign verify` on the URL passes, and a copy back to SQLite passes agentrt's verifier.
fn verify_both(db: &pg_support::TestDb, dir: &Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["--db", &db.url, "verify"])
        .env_remove("COUNTERSIGN_DB")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let back = dir.join("back.db");
    copy(&Endpoint::Pg(db.pg_url()), &Endpoint::Sqlite(back.clone())).expect("copy back");
    verify(&back);
}

/// An event as `(seq, run, step, at, type, payload, hash)`.
type Row = (i64, String, String, String, String, String, String);

fn row_of(e: &Event) -> Row {
    (
        e.seq,
        e.run_id.clone(),
        e.step_id.clone(),
        e.at_text.clone(),
        e.kind.clone(),
        e.payload.clone(),
        e.hash.clone(),
    )
}

/// A run's chained events as stored, in seq order.
fn stored_events(db: &pg_support::TestDb, run_id: &str) -> Vec<Row> {
    db.client()
        .query(
            "SELECT seq, run_id, step_id, at, type, payload_json, hash FROM events \
             WHERE run_id = $1 ORDER BY seq",
            &[&run_id],
        )
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get(0),
                r.get(1),
                r.get(2),
                r.get(3),
                r.get(4),
                r.get(5),
                r.get(6),
            )
        })
        .collect()
}

/// Waits (at most 10 s) until nothing waits in the inbox: the driver's sequencer chains.
fn wait_chained(db: &pg_support::TestDb) {
    for _ in 0..1000 {
        if chained(db, "").1 == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the inbox was not chained");
}

/// A run on PostgreSQL pauses for approval (nothing runs), is approved through the operator on
/// the same database, is resumed by the driver and completes, running the recorded request
/// once. Its events are the ones SQLite records for the same run (same clock and ids), in the
/// same order; the driver's own sequencer chained them while it lived (nobody started one);
/// the chain verifies on the URL and, copied back to SQLite, passes agentrt's verifier. The
/// observer got every event the driver wrote, in order, once chained (decision 0083 item 4):
/// with the seq and hash `events` holds for it.
#[test]
fn pg_run_pauses_is_approved_resumed_and_completes() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = pg(&db);
    let (tools, calls) = echo_registry("push", SideEffect::RemoteMutation);
    let seen: Arc<Mutex<Vec<Event>>> = Arc::default();
    let sink = seen.clone();
    let driver = Driver::new(pg_config(&store, tools, push_agent()).observer(Arc::new(
        move |e: &Event| sink.lock().unwrap().push(e.clone()),
    )))
    .unwrap();
    let rtm = rt();
    let run = rtm
        .block_on(driver.start_with_id("r", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    assert!(
        calls.lock().unwrap().is_empty(),
        "nothing runs before the decision"
    );
    let a = operator::pending_approval(&*store, "r", None).unwrap();
    operator::approve_shown(
        &*store,
        "r",
        &a.id,
        &a.hash,
        "alice",
        "ok",
        Timestamp::now(),
    )
    .unwrap();
    let run = rtm.block_on(driver.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    {
        let c = calls.lock().unwrap();
        assert_eq!(c.len(), 1, "the approved request ran once");
        assert_eq!(c[0].args, br#"{"ref":"main","n":7}"#);
    }
    let steps = store.list_steps(b"r").unwrap();
    assert_eq!(steps[0].status, StepStatus::Done);
    // The driver's sequencer chains while the driver lives.
    wait_chained(&db);
    drop(driver);
    let (events, inbox) = chained(&db, "r");
    assert_eq!(inbox, 0);

    // The same run on SQLite, same clock and ids, approved by the same operator function.
    let lite = runtime_support::db();
    let (tools, _) = echo_registry("push", SideEffect::RemoteMutation);
    let d = runtime_support::driver(&lite.store, tools, Arc::new(DefaultPolicy), push_agent());
    let rtl = rt();
    rtl.block_on(d.start_with_id("r", "g", limits())).unwrap();
    let la = latest_approval(&lite.store, "r");
    operator::approve_shown(
        &*lite.store,
        "r",
        &la.id,
        &la.hash,
        "alice",
        "ok",
        Timestamp::now(),
    )
    .unwrap();
    rtl.block_on(d.resume("r")).unwrap();
    let lite_events = kinds(&lite.store, "r");
    let without_decision_time = |v: &[(String, String)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(k, p)| {
                if k == "approval.decided" {
                    (k.clone(), String::new())
                } else {
                    (k.clone(), p.clone())
                }
            })
            .collect()
    };
    assert_eq!(
        without_decision_time(&events),
        without_decision_time(&lite_events),
        "the same events, in the same order, as on SQLite"
    );
    let observed: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.kind.clone())
        .collect();
    let driver_kinds: Vec<String> = events
        .iter()
        .map(|(k, _)| k.clone())
        .filter(|k| k != "approval.decided")
        .collect();
    assert_eq!(
        observed, driver_kinds,
        "the observer saw the driver's events in order"
    );
    let stored = stored_events(&db, "r");
    for e in seen.lock().unwrap().iter() {
        assert!(
            stored.contains(&row_of(e)),
            "observers get events as chained: {e:?}"
        );
    }
    verify_both(&db, dir.path());
}

fn look_tools(calls: &Calls) -> Registry {
    registry(vec![echo("look", SideEffect::ReadOnly, calls.clone())])
}

/// A cancel that lands between the policy's verdict and the tool's start: the start does not
/// commit, the tool never runs, no `step.tool_started` is recorded, and the run is cancelled
/// with its step failed.
#[test]
fn pg_cancel_between_the_verdict_and_the_tool_start_runs_nothing() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let store = pg(&db);
    let calls = Calls::default();
    let mut c = Config::new(store.clone(), look_tools(&calls), Arc::new(DefaultPolicy));
    c.now = Some(clock());
    c.ids = Some(ids());
    let gate = Gate::new(c).unwrap();
    let rtm = rt();
    let mut s = rtm.block_on(gate.begin("r", "g", limits())).unwrap();
    s.step().unwrap();
    assert!(matches!(
        s.propose(agent::tool_call("look", "{}")).unwrap(),
        Verdict::Allowed(_)
    ));
    // Another connection (a reviewer's) cancels now.
    let reviewer = pg(&db);
    operator::cancel(&*reviewer, "r", "carol", "stop", Timestamp::now()).unwrap();
    let out = rtm.block_on(s.execute());
    assert!(
        !matches!(out, Ok(Verdict::Observed(_))),
        "the tool's outcome is not observed: {:?}",
        out.as_ref().map(|v| v.outcome())
    );
    assert!(
        calls.lock().unwrap().is_empty(),
        "the side effect did not start"
    );
    let run = store.get_run(b"r").unwrap();
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Cancelled, "operator_cancelled")
    );
    assert_eq!(
        store.list_steps(b"r").unwrap()[0].status,
        StepStatus::Failed
    );
    drop(s);
    drop(gate);
    let mut seq = PgStore::open_existing(&db.pg_url()).unwrap();
    seq.sequence_all().unwrap();
    let (events, _) = chained(&db, "r");
    assert!(
        !events.iter().any(|(k, _)| k == "step.tool_started"),
        "no start was recorded: {events:?}"
    );
    assert_eq!(events.last().map(|e| e.0.as_str()), Some("run.finished"));
}

/// A gate session on its own connection holding run `r` with a lease of `ttl`, and its gate.
fn holder(
    db: &pg_support::TestDb,
    ttl: Duration,
    lease_clock: Option<Clock>,
) -> (
    Gate,
    countersign::runtime::driver::Session,
    tokio::runtime::Runtime,
) {
    let calls = Calls::default();
    let mut c = Config::new(pg(db), look_tools(&calls), Arc::new(DefaultPolicy))
        .lease_owner("host-a")
        .lease_ttl(ttl);
    c.lease_clock = lease_clock;
    let gate = Gate::new(c).unwrap();
    let rtm = rt();
    let mut s = rtm.block_on(gate.begin("r", "g", limits())).unwrap();
    s.step().unwrap();
    (gate, s, rtm)
}

/// A driver of another owner ("host-b") on a connection of its own.
fn contender(db: &pg_support::TestDb, lease_clock: Option<Clock>) -> Driver {
    let calls = Calls::default();
    let mut c = Config::new(pg(db), look_tools(&calls), Arc::new(DefaultPolicy))
        .lease_owner("host-b")
        .agent(ScriptedAgent::new([agent::complete("")]));
    c.lease_clock = lease_clock;
    Driver::new(c).unwrap()
}

/// Two owners on two connections: while the first holds the run (its heartbeat renewing the
/// lease past the TTL), the second's resume is refused with `RunLeased` and changes nothing;
/// once the first stops renewing and the lease lapses, the second takes the run over
/// (`lease.taken_over` naming the first) and drives it to its end.
#[test]
fn pg_two_owners_contend_for_one_run() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let ttl = Duration::from_millis(1500);
    let (_gate, s, _rt) = holder(&db, ttl, None);
    let b = contender(&db, None);
    let rtb = rt();
    // Past one TTL: only the heartbeat keeps the lease live.
    std::thread::sleep(ttl + Duration::from_millis(700));
    let e = rtb.block_on(b.resume("r")).unwrap_err();
    assert!(e.is_run_leased(), "{e}");
    let store = pg(&db);
    let run = store.get_run(b"r").unwrap();
    assert!(
        run.lease_owner.starts_with("host-a/"),
        "{}",
        run.lease_owner
    );
    assert_eq!(run.status, RunStatus::Running);
    // The holder stops (as a crashed host would): its heartbeat ends, the lease lapses.
    drop(s);
    std::thread::sleep(ttl + Duration::from_millis(500));
    let run = rtb.block_on(b.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    drop(b);
    let mut seq = PgStore::open_existing(&db.pg_url()).unwrap();
    seq.sequence_all().unwrap();
    let (events, _) = chained(&db, "r");
    let taken = events
        .iter()
        .find(|(k, _)| k == "lease.taken_over")
        .expect("lease.taken_over");
    assert!(taken.1.contains("host-a/"), "{}", taken.1);
}

/// A run id that is taken is `StoreError::RunExists` on PostgreSQL too, nothing written.
#[test]
fn pg_a_run_id_that_is_taken_is_refused_with_a_typed_error() {
    use countersign::runtime::driver::RuntimeError;
    use countersign::runtime::store::StoreError;
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let store = pg(&db);
    let first = Driver::new(pg_config(
        &store,
        Registry::new(),
        ScriptedAgent::new([agent::complete("")]),
    ))
    .unwrap();
    let rtm = rt();
    let done = rtm
        .block_on(first.start_with_id("r", "g", limits()))
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    let again = Driver::new(pg_config(
        &store,
        Registry::new(),
        ScriptedAgent::new([agent::complete("")]),
    ))
    .unwrap();
    let e = rtm
        .block_on(again.start_with_id("r", "another goal", limits()))
        .unwrap_err();
    assert!(
        matches!(&e, RuntimeError::Store(StoreError::RunExists { run_id }) if run_id.as_bytes() == b"r"),
        "{e:?}"
    );
    assert_eq!(store.get_run(b"r").unwrap().goal, "g");
}

/// The server's clock judges a lease, not a client's: a contender whose clock reads a day
/// ahead (to which the live lease looks long expired) is refused with `RunLeased`; and a
/// holder whose clock reads a day behind stamps an expiry on the server's clock, so its lease
/// is not already lapsed for everyone else.
#[test]
fn pg_lease_is_judged_by_the_server_clock() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    const DAY: i64 = 86_400_000_000_000;
    let behind: Clock = Arc::new(|| Timestamp::now().add_nanos(-DAY));
    let ahead: Clock = Arc::new(|| Timestamp::now().add_nanos(DAY));
    let ttl = Duration::from_secs(30);
    let (_gate, s, _rt) = holder(&db, ttl, Some(behind));
    let store = pg(&db);
    let stamped = store.get_run(b"r").unwrap().lease_expires_at;
    let off = stamped
        .sub(&Timestamp::now().add_nanos(30_000_000_000))
        .abs();
    assert!(
        off < 10_000_000_000,
        "the expiry is the server's now plus the TTL, not the client's: {}",
        stamped.format_always()
    );
    let b = contender(&db, Some(ahead));
    let e = rt().block_on(b.resume("r")).unwrap_err();
    assert!(e.is_run_leased(), "{e}");
    let run = store.get_run(b"r").unwrap();
    assert!(
        run.lease_owner.starts_with("host-a/"),
        "{}",
        run.lease_owner
    );
    drop(s);
}

/// A login holding only `countersign_runtime` and `countersign_sequencer`
/// (docs/postgres-roles.sql) runs the driver and its worker: the run pauses, a reviewer's
/// approval on another connection wakes the worker (the inbox's id sequence moved), which
/// resumes the run to its end, and the driver's sequencer chains every event.
#[test]
fn pg_runtime_role_drives_and_its_worker_resumes() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let owner = pg(&db);
    let mut c = db.client();
    c.batch_execute(include_str!("../docs/postgres-roles.sql"))
        .unwrap();
    let login = format!("agents_{}", std::process::id());
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {login}; \
         CREATE ROLE {login} LOGIN IN ROLE countersign_runtime, countersign_sequencer"
    ))
    .unwrap();
    let url = countersign::pgstore::PgUrl::parse(&db.url_as(&login)).unwrap();
    let store = Arc::new(PgStore::open_existing(&url).unwrap());
    let (tools, calls) = echo_registry("push", SideEffect::RemoteMutation);
    let driver = Driver::new(pg_config(&store, tools, push_agent())).unwrap();
    let rtm = rt();
    let run = rtm
        .block_on(driver.start_with_id("r", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let opts = countersign::runtime::driver::WorkOptions {
        check_every: Duration::from_millis(20),
        stop: stop.clone(),
        ..Default::default()
    };
    let d = driver.clone();
    let worker = rtm.spawn(async move { d.work(opts).await });
    std::thread::sleep(Duration::from_millis(200));
    let a = operator::pending_approval(&*owner, "r", None).unwrap();
    operator::approve_shown(
        &*owner,
        "r",
        &a.id,
        &a.hash,
        "alice",
        "ok",
        Timestamp::now(),
    )
    .unwrap();
    let mut done = false;
    for _ in 0..500 {
        if owner.get_run(b"r").unwrap().status == RunStatus::Completed {
            done = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let report = rtm.block_on(worker).unwrap().unwrap();
    assert!(done, "the worker resumed the approved run: {report:?}");
    assert_eq!(report.resumed, 1);
    assert_eq!(calls.lock().unwrap().len(), 1);
    wait_chained(&db);
    drop(driver);
    drop(store);
    let dir = tempfile::tempdir().unwrap();
    verify_both(&db, dir.path());
    let _ = c.batch_execute(&format!("DROP OWNED BY {login}; DROP ROLE {login}"));
}

/// The sequencer a runtime process runs survives losing its connection (a server restart, a
/// failover, an administrator's `pg_terminate_backend`): it connects again and chains what is
/// committed after, so a runtime's events never stay unchained for want of someone to restart
/// it.
#[test]
fn pg_the_runtimes_sequencer_reconnects_after_losing_its_connection() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    drop(pg(&db));
    let seq = countersign::pgstore::Sequencer::spawn_retrying(&db.pg_url()).unwrap();
    let mut c = db.client();
    c.batch_execute(
        "INSERT INTO runs (id, goal, status, limits_json, created_at) \
         VALUES ('r', 'g', 'RUNNING', '{}', '2026-12-04T00:00:00Z')",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let killed: i64 = c
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(killed >= 1, "the sequencer's connection was cut");
    let mut w = PgStore::open_existing(&db.pg_url()).unwrap();
    w.enqueue_event("r", "", "2026-12-04T00:00:01Z", "note", "{}")
        .unwrap();
    wait_chained(&db);
    let (events, _) = chained(&db, "r");
    assert_eq!(events, [("note".to_string(), "{}".to_string())]);
    seq.stop().unwrap();
}

/// A model call through the agent's handle on PostgreSQL: the `dispatched` row under the
/// lease, its outcome, the run's saturating counters and the `model.*` events are what SQLite
/// records for the same run (a transient failure retried once, then a success). The latency
/// (wall time) is left out of the comparison.
#[test]
fn pg_model_calls_are_accounted_as_on_sqlite() {
    use countersign::runtime::agent::{DecideFuture, Scripted, StepInput};
    use countersign::runtime::model::{
        FakeModel, FakeReply, ModelError, ModelRequest, ModelSetup, Price, Usage,
    };
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let setup = || {
        let fake = Arc::new(FakeModel::new(
            "m1",
            vec![
                FakeReply::err(ModelError::Transient("503".into())),
                FakeReply::ok(
                    "{}",
                    Usage {
                        input_tokens: 1000,
                        output_tokens: 100,
                        cached_input_tokens: 400,
                    },
                ),
            ],
        ));
        let mut s = ModelSetup::new(fake);
        s.backoff = Duration::from_millis(1);
        s.max_retries = 2;
        s.prices.insert(
            "m1".into(),
            Price {
                input: 3_000_000,
                cached_input: 300_000,
                output: 15_000_000,
            },
        );
        s
    };
    let agent = || {
        ScriptedAgent::new([Scripted::With(Box::new(|i: StepInput| -> DecideFuture {
            Box::pin(async move {
                let m = i.model.clone().expect("a model handle");
                m.call(ModelRequest {
                    body: br#"{"messages":["hi"]}"#.to_vec(),
                    max_output_tokens: 500,
                })
                .await
                .map_err(|e| e.to_string())?;
                Ok(agent::complete(""))
            })
        }))])
    };
    let store = pg(&db);
    let mut cfg = pg_config(&store, registry(vec![]), agent());
    cfg.model = Some(setup());
    let run = rt()
        .block_on(Driver::new(cfg).unwrap().start_with_id("r", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    let lite = runtime_support::db();
    let mut cfg = config(
        &lite.store,
        registry(vec![]),
        Arc::new(DefaultPolicy),
        agent(),
    );
    cfg.model = Some(setup());
    rt().block_on(Driver::new(cfg).unwrap().start_with_id("r", "g", limits()))
        .unwrap();

    let counters = |r: &countersign::runtime::types::Run| {
        (
            r.model_calls,
            r.input_tokens,
            r.output_tokens,
            r.cached_input_tokens,
            r.estimated_cost_micros,
        )
    };
    let on_pg = store.get_run(b"r").unwrap();
    assert_eq!(
        counters(&on_pg),
        counters(&lite.store.get_run(b"r").unwrap())
    );
    assert_eq!(counters(&on_pg), (2, 1000, 100, 400, 3420));
    let pg_rows: Vec<(i64, String, i64, i64, i64, i64, String)> = db
        .client()
        .query(
            "SELECT attempt, status, input_tokens, output_tokens, cached_input_tokens, \
             cost_micros, error FROM model_calls ORDER BY ord",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get(0),
                r.get(1),
                r.get(2),
                r.get(3),
                r.get(4),
                r.get(5),
                r.get(6),
            )
        })
        .collect();
    let c = rusqlite::Connection::open(&lite.path).unwrap();
    let mut st = c
        .prepare(
            "SELECT attempt, status, input_tokens, output_tokens, cached_input_tokens, \
             cost_micros, error FROM model_calls ORDER BY rowid",
        )
        .unwrap();
    let lite_rows: Vec<(i64, String, i64, i64, i64, i64, String)> = st
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(pg_rows, lite_rows);
    assert_eq!(pg_rows.len(), 2);
    // The events, with the latency and the call ids (random) blanked.
    let blank = |v: Vec<(String, String)>| -> Vec<(String, String)> {
        v.into_iter()
            .map(|(k, p)| {
                if k.starts_with("model.") {
                    let keep: Vec<&str> = p
                        .split(',')
                        .filter(|f| !f.contains("latency_ms") && !f.contains("call_id"))
                        .collect();
                    (k, keep.join(","))
                } else {
                    (k, p)
                }
            })
            .collect()
    };
    wait_chained(&db);
    let (events, _) = chained(&db, "r");
    assert_eq!(blank(events), blank(kinds(&lite.store, "r")));
}

/// `countersign resume --db postgres://… RUN --backend PATH`: a demo run copied to PostgreSQL,
/// approved there by the `approve` command, is resumed by the command with the same driver and
/// the example consumer's tools: the refund executes exactly once in the order backend, a
/// second resume is refused and executes nothing, and the chain verifies on the URL and,
/// copied back, by agentrt's verifier. Without `--backend` the command says to name one.
#[test]
fn pg_resume_command_runs_an_approved_demo_refund_once() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (run, backend) = demo_refund_on(&db, dir.path());
    let refunds = || refunds_of(&backend, &run);
    let before = refunds();
    let o = cli(&["--db", &db.url, "approve", &run, "--yes", "--by", "alice"]);
    assert!(o.status.success(), "{}", said(&o));
    let o = cli(&["--db", &db.url, "resume", &run]);
    assert!(!o.status.success());
    assert!(said(&o).contains("--backend"), "{}", said(&o));
    assert_eq!(refunds(), before, "nothing ran");
    let b = backend.to_str().unwrap();
    let o = cli(&["--db", &db.url, "resume", &run, "--backend", b]);
    assert!(o.status.success(), "{}", said(&o));
    assert_eq!(refunds(), before + 1, "exactly one refund executed");
    let again = cli(&["--db", &db.url, "resume", &run, "--backend", b]);
    assert_eq!(again.status.code(), Some(1), "{}", said(&again));
    assert!(
        said(&again).contains("cannot be resumed"),
        "{}",
        said(&again)
    );
    assert_eq!(refunds(), before + 1);
    assert_eq!(
        chained(&db, "").1,
        0,
        "the command's driver chained its events"
    );
    verify_both(&db, dir.path());
}

/// A driver on PostgreSQL built, used and dropped inside an async task (the end of an async
/// `main`) closes its connections without a panic: closing the synchronous client blocks, and
/// the driver does it where blocking is allowed.
#[test]
fn pg_a_driver_dropped_inside_a_task_closes_cleanly() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let url = db.pg_url();
    let (tools, _) = echo_registry("look", SideEffect::ReadOnly);
    let run = rt().block_on(async move {
        let store = Arc::new(tokio::task::block_in_place(|| PgStore::open(&url)).unwrap());
        let agent = ScriptedAgent::new([agent::tool_call("look", "{}"), agent::complete("")]);
        let driver = Driver::new(pg_config(&store, tools, agent)).unwrap();
        drop(store);
        let run = driver.start_with_id("r", "g", limits()).await.unwrap();
        drop(driver);
        run
    });
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    assert_eq!(
        chained(&db, "r").1,
        0,
        "dropped, the driver's sequencer drained the inbox"
    );
}

/// A host whose clock reads a day behind can take over a lease that lapsed by the server's
/// clock: no check on its own clock keeps it waiting for a day.
#[test]
fn pg_a_host_whose_clock_is_behind_takes_over_a_lapsed_lease() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    const DAY: i64 = 86_400_000_000_000;
    let behind: Clock = Arc::new(|| Timestamp::now().add_nanos(-DAY));
    let ttl = Duration::from_millis(800);
    let (_gate, s, _rt) = holder(&db, ttl, None);
    drop(s);
    std::thread::sleep(ttl + Duration::from_millis(500));
    let b = contender(&db, Some(behind));
    let run = rt().block_on(b.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
}

/// `countersign worker --once --db postgres://… --backend PATH`: the example consumer's
/// worker on PostgreSQL resumes a refund a reviewer approved there, once; without
/// `--backend` it says to name one.
#[test]
fn pg_worker_command_resumes_an_approved_demo_refund_once() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (run, backend) = demo_refund_on(&db, dir.path());
    let refunds = || refunds_of(&backend, &run);
    let before = refunds();
    let o = cli(&["--db", &db.url, "approve", &run, "--yes", "--by", "alice"]);
    assert!(o.status.success(), "{}", said(&o));
    let o = cli(&["--db", &db.url, "worker", "--once"]);
    assert!(!o.status.success());
    assert!(said(&o).contains("--backend"), "{}", said(&o));
    let b = backend.to_str().unwrap();
    let o = cli(&["--db", &db.url, "worker", "--once", "--backend", b]);
    assert!(o.status.success(), "{}", said(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("resumed run {run}")),
        "{}",
        said(&o)
    );
    assert_eq!(refunds(), before + 1, "exactly one refund executed");
    let o = cli(&["--db", &db.url, "worker", "--once", "--backend", b]);
    assert!(o.status.success(), "{}", said(&o));
    assert_eq!(refunds(), before + 1, "a second pass runs nothing");
    verify_both(&db, dir.path());
}

/// A long-running `worker` on PostgreSQL whose connections the server drops (as a restart
/// does) says so, connects again and goes on: a refund approved afterwards executes once
/// (found from outside: it exited 1 on the first restart, though it runs "until stopped").
#[test]
fn pg_worker_connects_again_after_the_server_drops_it() {
    use std::io::Read;
    use std::process::Stdio;
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (run, backend) = demo_refund_on(&db, dir.path());
    let before = refunds_of(&backend, &run);
    let mut child = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["--db", &db.url, "worker", "--backend"])
        .arg(&backend)
        .env_remove("COUNTERSIGN_DB")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut admin = db.client();
    let others = |c: &mut postgres::Client| -> i64 {
        c.query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap()
        .get(0)
    };
    // Bounded waits on what the worker does, never a verdict by the clock.
    let until = |what: &str, mut done: Box<dyn FnMut() -> bool + '_>| {
        for _ in 0..600 {
            if done() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the worker never {what}");
    };
    // What the worker prints, read as it comes: the test waits for its report of the resume,
    // which follows the refund (a kill right after the refund could land before the print).
    let printed = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let (printed, mut stdout) = (printed.clone(), child.stdout.take().unwrap());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                printed
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    until("connected", Box::new(|| others(&mut admin) >= 2));
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap();
    until("connected again", Box::new(|| others(&mut admin) >= 2));
    let o = cli(&["--db", &db.url, "approve", &run, "--yes", "--by", "alice"]);
    assert!(o.status.success(), "{}", said(&o));
    until(
        "resumed the approved refund",
        Box::new(|| refunds_of(&backend, &run) == before + 1),
    );
    let resumed = format!("resumed run {run}");
    until(
        "reported the resume",
        Box::new(|| printed.lock().unwrap().contains(&resumed)),
    );
    assert_eq!(child.try_wait().unwrap(), None, "the worker still runs");
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    let out = printed.lock().unwrap().clone();
    assert!(out.contains(&format!("resumed run {run}")), "{out}");
    assert!(
        out.contains("the database's connection was lost") && out.contains("connected again"),
        "{out}"
    );
    assert_eq!(refunds_of(&backend, &run), before + 1, "one refund");
}

/// `watch` on PostgreSQL whose connections the server drops (as a restart does) says so on
/// stderr, connects again and goes on: an approval requested afterwards is announced
/// (found from outside: it exited 1 on the first restart, and a pager lost its feed).
#[test]
fn pg_watch_connects_again_after_the_server_drops_it() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    drop(pg(&db));
    let mut child = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["--db", &db.url, "watch"])
        .env_remove("COUNTERSIGN_DB")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut admin = db.client();
    let me: i32 = admin
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0);
    let mut others = || -> i64 {
        admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0)
    };
    // Bounded waits on what the watch does, never a verdict by the clock.
    let connected = |others: &mut dyn FnMut() -> i64| {
        (0..600).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            others() >= 2
        })
    };
    assert!(connected(&mut others), "the watch connects");
    db.client()
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> $1",
            &[&me],
        )
        .unwrap();
    assert!(connected(&mut others), "the watch connects again");
    // A run pauses for approval: its approval.requested is chained by the driver's sequencer.
    let store = pg(&db);
    let (tools, _) = echo_registry("push", SideEffect::RemoteMutation);
    let driver = Driver::new(pg_config(&store, tools, push_agent())).unwrap();
    let run = rt()
        .block_on(driver.start_with_id("r-after", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    drop(driver);
    let line = lines
        .recv_timeout(Duration::from_secs(60))
        .expect("the approval requested after the restart is announced");
    assert!(line.contains("r-after"), "{line}");
    assert_eq!(child.try_wait().unwrap(), None, "the watch still runs");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains("connection was lost") && err.contains("connected again"),
        "{err}"
    );
}

/// `countersign agent --db postgres://… --backend PATH`: the example consumer on a "live"
/// model (a local OpenAI-compatible server) runs on PostgreSQL: the refund waits for a person,
/// the printed lines name the database by its redacted URL (never the password) and the
/// backend; approved there, `agent --resume` continues it with the model, the refund executes
/// once, and the chain verifies. Without `--backend` it says to name one.
#[cfg(feature = "providers")]
#[test]
fn pg_agent_command_runs_the_consumer_on_postgres() {
    use providers_support::{Server, json};
    fn call(name: &str, id: &str, args: &str) -> String {
        let args = serde_json::to_string(args).unwrap();
        format!(
            r#"{{"choices":[{{"message":{{"content":"","tool_calls":[{{"id":"{id}","type":"function","function":{{"name":"{name}","arguments":{args}}}}}]}},"finish_reason":"tool_calls"}}],"usage":{{"prompt_tokens":900,"completion_tokens":30}}}}"#
        )
    }
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    drop(pg(&db));
    let s = Server::start(vec![
        json(
            200,
            &call(
                "issue_refund",
                "c1",
                r#"{"order_id":"ord_1004","amount_cents":9000,"reason":"damaged"}"#,
            ),
        ),
        json(
            200,
            &call("finish", "c2", r#"{"summary":"Refunded 90.00 USD."}"#),
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let backend = dir.path().join("orders.db");
    let b = backend.to_str().unwrap();
    let base = format!("{}/v1", s.url());
    let url = db.url.replacen("@", ":s3cret-pw@", 1);
    let agent = |extra: &[&str]| {
        let mut args = vec!["--db", url.as_str(), "agent", "--model", "openai:gpt-x"];
        args.extend_from_slice(&["--model-base-url", &base]);
        args.extend_from_slice(extra);
        cli(&args)
    };
    let o = agent(&["Refund ord_1004, it broke"]);
    assert!(!o.status.success());
    assert!(said(&o).contains("--backend"), "{}", said(&o));
    let o = agent(&["--backend", b, "Refund ord_1004, it broke"]);
    assert!(o.status.success(), "{}", said(&o));
    let out = said(&o);
    assert!(out.contains(": WAITING_FOR_APPROVAL"), "{out}");
    assert!(
        !out.contains("s3cret-pw"),
        "the password is never printed: {out}"
    );
    assert!(out.contains("--backend"), "{out}");
    let run: String = db
        .client()
        .query_one("SELECT id FROM runs", &[])
        .unwrap()
        .get(0);
    let refunds = || refunds_of(&backend, &run);
    assert_eq!(refunds(), 0, "the refund waits for a person");
    let o = cli(&["--db", &db.url, "approve", &run, "--yes", "--by", "alice"]);
    assert!(o.status.success(), "{}", said(&o));
    let o = agent(&["--backend", b, "--resume", &run]);
    assert!(o.status.success(), "{}", said(&o));
    assert!(said(&o).contains(": COMPLETED"), "{}", said(&o));
    assert_eq!(refunds(), 1, "the approved refund executed once");
    assert_eq!(chained(&db, "").1, 0);
    verify_both(&db, dir.path());
}

/// `agent` on PostgreSQL whose connections the server drops while a model call is in flight
/// (a restart) exits 1 naming the run it started and the `agent ... --resume` line that
/// continues it (found from outside: it printed only "begin write: connection closed", and
/// the run's id, which `--resume` needs, nowhere); that line then completes the run.
#[cfg(feature = "providers")]
#[test]
fn pg_agent_that_loses_the_server_names_its_run_and_how_to_go_on() {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    drop(pg(&db));
    // A model that answers its first call only when told to.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", l.local_addr().unwrap());
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let (asked, seen) = std::sync::mpsc::channel::<()>();
    let finish = r#"{"choices":[{"message":{"content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"finish","arguments":"{\"summary\":\"done\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":9,"completion_tokens":3}}"#;
    std::thread::spawn(move || {
        for (i, s) in l.incoming().enumerate() {
            let Ok(mut s) = s else { break };
            s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let mut buf = [0u8; 65536];
            while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            if i == 0 {
                let _ = asked.send(());
                let _ = wait.recv();
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                finish.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(finish.as_bytes());
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let backend = dir.path().join("orders.db");
    let b = backend.to_str().unwrap().to_string();
    let url = db.url.clone();
    let agent = {
        let (url, base, b) = (url.clone(), base.clone(), b.clone());
        std::thread::spawn(move || {
            cli(&[
                "--db",
                &url,
                "agent",
                "--model",
                "openai:gpt-x",
                "--model-base-url",
                &base,
                "--backend",
                &b,
                "Where is ord_1004?",
            ])
        })
    };
    seen.recv_timeout(Duration::from_secs(60))
        .expect("the agent calls the model");
    // The server drops the agent's connections (as a restart does).
    db.client()
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap();
    go.send(()).unwrap();
    let o = agent.join().unwrap();
    let s = said(&o);
    assert_eq!(o.status.code(), Some(1), "{s}");
    let run: String = db
        .client()
        .query_one("SELECT id FROM runs", &[])
        .unwrap()
        .get(0);
    assert!(s.contains(&format!("run {run} ")), "{s}");
    let line = s
        .lines()
        .find(|l| l.contains("--resume"))
        .unwrap_or_else(|| panic!("no continue line: {s}"))
        .trim();
    // Once the lease lapses, the printed line continues the run with the same model.
    db.client()
        .execute(
            "UPDATE runs SET lease_expires_at = '' WHERE id = $1",
            &[&run],
        )
        .unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg(line.replacen("countersign", env!("CARGO_BIN_EXE_countersign"), 1))
        .env_remove("COUNTERSIGN_DB")
        .output()
        .unwrap();
    assert!(o.status.success(), "{line}: {}", said(&o));
    assert!(said(&o).contains(": COMPLETED"), "{}", said(&o));
}

/// The bench's baseline (`benches/drivers.rs`): drivers whose stores append naively
/// (`PgStore::set_naive_chain`) chain every event in their own transactions, after the head
/// they lock, with no sequencer anywhere (`chain_events(false)`). Four drivers on four
/// connections drive a run each at once; every run completes, nothing waits in the inbox,
/// the chain verifies and holds every event, and each event the observers got carries the
/// seq and hash the chain stores for it.
#[test]
fn pg_naive_chain_drivers_keep_a_verifiable_chain() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let _ = pg(&db); // migrates
    let seen: Arc<Mutex<Vec<Event>>> = Arc::default();
    let rtm = rt();
    let runs: Vec<_> = (0..4)
        .map(|d| {
            let mut store = PgStore::open_existing(&db.pg_url()).unwrap();
            store.set_naive_chain(true);
            let (tools, _) = echo_registry("look", SideEffect::ReadOnly);
            let mut script: Vec<_> = (0..6)
                .map(|i| agent::tool_call("look", &format!(r#"{{"d":{d},"i":{i}}}"#)))
                .collect();
            script.push(agent::complete(""));
            let sink = seen.clone();
            let driver = Config::new(Arc::new(store), tools, Arc::new(DefaultPolicy))
                .chain_events(false)
                .agent(ScriptedAgent::new(script))
                .observer(Arc::new(move |e: &Event| {
                    sink.lock().unwrap().push(e.clone())
                }))
                .build()
                .unwrap();
            rtm.spawn(async move { driver.start_with_id(&format!("n{d}"), "g", limits()).await })
        })
        .collect();
    for r in runs {
        let run = rtm.block_on(r).unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
        assert_eq!(run.step_count, 7);
    }
    let mut s = PgStore::open_existing(&db.pg_url()).unwrap();
    assert_eq!(s.unchained().unwrap(), 0, "nothing was enqueued");
    let report = s.verify_events(0, 0).unwrap();
    assert!(report.ok(), "{report:?}");
    let seen = seen.lock().unwrap();
    assert_eq!(
        report.checked as usize,
        seen.len(),
        "every event is chained"
    );
    assert!(seen.len() >= 4 * 8, "{} events", seen.len());
    for e in seen.iter() {
        assert!(e.seq > 0, "{e:?}");
        assert_eq!(
            s.event_hash(e.seq).unwrap().as_deref(),
            Some(e.hash.as_str())
        );
    }
}

/// `n` read-only tool calls, then the end of `runs` runs (the script is shared by a
/// driver's runs).
fn look_agent(tag: &str, n: usize, runs: usize) -> Arc<ScriptedAgent> {
    let mut script: Vec<_> = (0..n)
        .map(|i| agent::tool_call("look", &format!(r#"{{"t":"{tag}","i":{i}}}"#)))
        .collect();
    script.extend((0..runs).map(|_| agent::complete("")));
    ScriptedAgent::new(script)
}

type Seen = Arc<Mutex<Vec<Event>>>;

/// A driver on its own connection (and its own sequencer unless `chain` is false) whose
/// observer records what it is handed.
fn observed_driver(
    db: &pg_support::TestDb,
    agent: Arc<ScriptedAgent>,
    chain: bool,
) -> (Driver, Seen) {
    let (tools, _) = echo_registry("look", SideEffect::ReadOnly);
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let driver = Config::new(pg(db), tools, Arc::new(DefaultPolicy))
        .chain_events(chain)
        .agent(agent)
        .observer(Arc::new(move |e: &Event| {
            sink.lock().unwrap().push(e.clone())
        }))
        .build()
        .unwrap();
    (driver, seen)
}

/// Issue 19's "observers seeing an event once it is chained": as soon as a run on
/// PostgreSQL returns, its observer has been handed every event of the run, each with a seq
/// above 0 and the hash `events` holds, in seq order: the very list `events` holds for the run.
#[test]
fn pg_observers_get_each_event_once_chained() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let (driver, seen) = observed_driver(&db, look_agent("a", 5, 1), true);
    let run = rt()
        .block_on(driver.start_with_id("obs", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    // Before the driver is dropped (its drop drains the inbox): what the writes handed on.
    let got: Vec<Row> = seen.lock().unwrap().iter().map(row_of).collect();
    let stored = stored_events(&db, "obs");
    assert!(stored.len() >= 2 + 6 * 2, "{} events", stored.len());
    assert!(got.iter().all(|r| r.0 > 0 && !r.6.is_empty()), "{got:?}");
    assert_eq!(
        got, stored,
        "the observer got the run's chained events, in seq order"
    );
    drop(driver);
    assert_eq!(
        seen.lock().unwrap().len(),
        stored.len(),
        "nothing more at the drop"
    );
}

/// An observer that writes through the driver it observes (here: when one run finishes it
/// starts the next one) neither deadlocks nor loses that write's events: the delivery lock
/// is held during the observer's call, so the nested writes leave their events to the call's
/// holder, which hands them on, chained and in seq order, once the observer returns, before
/// the outer run's `start` returns.
#[test]
fn pg_an_observer_that_writes_through_its_driver_gets_those_events_after_its_call() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let url = db.pg_url();
    let (done, finished) = std::sync::mpsc::channel();
    // On a thread of its own, so that a deadlock fails the test instead of hanging it.
    std::thread::spawn(move || {
        let (tools, _) = echo_registry("look", SideEffect::ReadOnly);
        let seen: Seen = Arc::default();
        let me: Arc<Mutex<Option<Driver>>> = Arc::default();
        let inner: Arc<Mutex<Option<RunStatus>>> = Arc::default();
        let (sink, me2, inner2) = (seen.clone(), me.clone(), inner.clone());
        let driver = Config::new(
            Arc::new(PgStore::open(&url).unwrap()),
            tools,
            Arc::new(DefaultPolicy),
        )
        .agent(look_agent("n", 2, 2))
        .observer(Arc::new(move |e: &Event| {
            sink.lock().unwrap().push(e.clone());
            if e.run_id == "outer" && e.kind == "run.finished" {
                // Taken once: the driver does not keep itself alive through its observer.
                let d = me2.lock().unwrap().take();
                if let Some(d) = d {
                    let run = tokio::runtime::Handle::current()
                        .block_on(d.start_with_id("inner", "g", limits()))
                        .unwrap();
                    *inner2.lock().unwrap() = Some(run.status);
                }
            }
        }))
        .build()
        .unwrap();
        *me.lock().unwrap() = Some(driver.clone());
        let outer = rt()
            .block_on(driver.start_with_id("outer", "g", limits()))
            .unwrap();
        let seen: Vec<Event> = seen.lock().unwrap().clone();
        let inner = inner.lock().unwrap().clone();
        let _ = done.send((outer.status, inner, seen));
    });
    let (outer, inner, seen) = finished
        .recv_timeout(Duration::from_secs(60))
        .expect("the observer's write through its own driver hung");
    assert_eq!(outer, RunStatus::Completed);
    assert_eq!(inner, Some(RunStatus::Completed), "the observer's run ran");
    for run in ["outer", "inner"] {
        let got: Vec<Row> = seen
            .iter()
            .filter(|e| e.run_id == run)
            .map(row_of)
            .collect();
        assert_eq!(
            got,
            stored_events(&db, run),
            "run {run}'s chained events, in seq order, by the time the outer run returned"
        );
    }
    let inner_at = seen.iter().position(|e| e.run_id == "inner").unwrap();
    let outer_end = seen
        .iter()
        .position(|e| e.run_id == "outer" && e.kind == "run.finished")
        .unwrap();
    assert!(
        inner_at > outer_end,
        "the nested run's events come after the call that made them"
    );
}

/// Two drivers on two connections, each with its own sequencer, drive two runs each at once;
/// the sequencers take turns on the chain. Each observer is handed only chained events: each
/// with the seq, hash and columns `events` holds at that seq, a run's in seq order, and every
/// event of its runs by the time the run returns.
#[test]
fn pg_two_drivers_observers_get_only_chained_events() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let _ = pg(&db); // migrates
    let rtm = rt();
    let drivers: Vec<(Driver, Seen)> = (0..2)
        .map(|d| observed_driver(&db, look_agent(&format!("d{d}"), 12, 2), true))
        .collect();
    let mut tasks = Vec::new();
    for (d, (driver, _)) in drivers.iter().enumerate() {
        for r in 0..2 {
            let driver = driver.clone();
            tasks.push(rtm.spawn(async move {
                driver
                    .start_with_id(&format!("d{d}r{r}"), "g", limits())
                    .await
            }));
        }
    }
    for t in tasks {
        let run = rtm.block_on(t).unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    }
    for (d, (_, seen)) in drivers.iter().enumerate() {
        let seen = seen.lock().unwrap().clone();
        for r in 0..2 {
            let id = format!("d{d}r{r}");
            let got: Vec<Row> = seen.iter().filter(|e| e.run_id == id).map(row_of).collect();
            assert_eq!(
                got,
                stored_events(&db, &id),
                "driver {d}'s observer got run {id}'s chained events in seq order"
            );
        }
        assert!(seen.iter().all(|e| e.seq > 0), "only chained events");
    }
    drop(drivers);
    let mut s = PgStore::open_existing(&db.pg_url()).unwrap();
    assert!(s.verify_events(0, 0).unwrap().ok());
}

/// `chain_events(false)`: another process chains. With a sequencer running elsewhere, the
/// observer is handed each event chained (woken by the sequencer's NOTIFY), all of them by the
/// time the run returns. With none running, a write waits at most `CHAINED_WAIT` and hands
/// nothing unchained: the events stay owed, and once something chains them they are handed
/// on in order (here at the driver's drop).
#[test]
fn pg_observers_wait_for_another_processs_sequencer() {
    use countersign::pgstore::Sequencer;
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let _ = pg(&db); // migrates
    let rtm = rt();
    let elsewhere = Sequencer::spawn(&db.pg_url()).unwrap();
    let (driver, seen) = observed_driver(&db, look_agent("x", 3, 1), false);
    let run = rtm
        .block_on(driver.start_with_id("x", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    let got: Vec<Row> = seen.lock().unwrap().iter().map(row_of).collect();
    assert_eq!(
        got,
        stored_events(&db, "x"),
        "handed on as chained elsewhere"
    );
    drop(driver);
    elsewhere.stop().unwrap();

    // No sequencer anywhere: nothing is handed on, and nothing unchained.
    let (driver, seen) = observed_driver(&db, look_agent("y", 2, 1), false);
    let t0 = std::time::Instant::now();
    let run = rtm
        .block_on(driver.start_with_id("y", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    let took = t0.elapsed();
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing chained, nothing handed on"
    );
    assert!(
        took >= countersign::runtime::driver::CHAINED_WAIT,
        "the first write waited for its events: {took:?}"
    );
    assert!(
        took < countersign::runtime::driver::CHAINED_WAIT * 3,
        "the writes after it did not wait again: {took:?}"
    );
    let mut s = PgStore::open_existing(&db.pg_url()).unwrap();
    assert!(s.unchained().unwrap() > 0);
    s.sequence_all().unwrap();
    drop(driver);
    let got: Vec<Row> = seen.lock().unwrap().iter().map(row_of).collect();
    assert_eq!(
        got,
        stored_events(&db, "y"),
        "handed on in order once chained"
    );
}

/// A Gate on PostgreSQL hands its observer chained events too, placed right when another
/// writer (a reviewer's cancel, on a connection of its own) writes events of the same run in
/// between: the observer gets exactly the run's chained events but the cancel's, each as
/// stored, in seq order.
#[test]
fn pg_gate_observer_gets_chained_events_around_a_reviewers_cancel() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let calls = Calls::default();
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let gate = Config::new(pg(&db), look_tools(&calls), Arc::new(DefaultPolicy))
        .observer(Arc::new(move |e: &Event| {
            sink.lock().unwrap().push(e.clone())
        }))
        .gate()
        .unwrap();
    let rtm = rt();
    let mut s = rtm.block_on(gate.begin("g", "g", limits())).unwrap();
    s.step().unwrap();
    assert!(matches!(
        s.propose(agent::tool_call("look", "{}")).unwrap(),
        Verdict::Allowed(_)
    ));
    let reviewer = pg(&db);
    let cancelled = operator::cancel(&*reviewer, "g", "carol", "stop", Timestamp::now()).unwrap();
    let _ = rtm.block_on(s.execute());
    drop(s);
    let got: Vec<Row> = seen.lock().unwrap().iter().map(row_of).collect();
    let mut s = PgStore::open_existing(&db.pg_url()).unwrap();
    s.sequence_all().unwrap();
    let stored = stored_events(&db, "g");
    let theirs: Vec<(String, String)> = cancelled
        .events
        .iter()
        .map(|e| (e.kind.clone(), e.payload.clone()))
        .collect();
    let ours: Vec<Row> = stored
        .iter()
        .filter(|r| !theirs.contains(&(r.4.clone(), r.5.clone())))
        .cloned()
        .collect();
    assert!(!theirs.is_empty() && ours.len() + theirs.len() == stored.len());
    assert_eq!(got, ours, "the Gate's events, chained, in seq order");
    drop(gate);
}

/// The driver's own sequencer loses its connection between two runs (an administrator's
/// `pg_terminate_backend`): it connects again, and the observer of the second run is still
/// handed every event chained by the time the run returns (the wait outlasts the reconnect).
#[test]
fn pg_observers_get_chained_events_after_the_sequencer_reconnects() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let (driver, seen) = observed_driver(&db, look_agent("k", 4, 2), true);
    let rtm = rt();
    let run = rtm
        .block_on(driver.start_with_id("k1", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    // The sequencer's connection is the one whose last statement is its look at the inbox.
    let killed: i64 = db
        .client()
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() \
             AND query = 'SELECT EXISTS (SELECT 1 FROM event_inbox)'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(killed, 1, "the sequencer's connection was cut");
    let run = rtm
        .block_on(driver.start_with_id("k2", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    let got: Vec<Row> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.run_id == "k2")
        .map(row_of)
        .collect();
    assert_eq!(
        got,
        stored_events(&db, "k2"),
        "handed on once chained again"
    );
}

/// On PostgreSQL, two resumes of one grant that the policy, asked again, no longer accepts ask
/// one new question, not two (the second's pause finds the grant superseded: `ErrRunState`).
/// Found from outside: three workers left two pending approvals for one step, and approving
/// one of them did nothing.
#[test]
fn pg_two_resumes_of_a_grant_the_policy_no_longer_accepts_ask_one_question() {
    use countersign::runtime::policy::{self, FnPolicy};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let store = pg(&db);
    let asked = Arc::new(AtomicUsize::new(0));
    let (a2, s2) = (asked.clone(), store.clone());
    let policy = Arc::new(FnPolicy(
        move |_r: &policy::PolicyRequest, _v: &policy::RunView| {
            let n = a2.fetch_add(1, SeqCst);
            let until = std::time::Instant::now() + Duration::from_secs(30);
            let wait = |done: &dyn Fn() -> bool| {
                while !done() && std::time::Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(10));
                }
            };
            match n {
                1 => wait(&|| a2.load(SeqCst) >= 3),
                2 => wait(&|| s2.list_approvals(b"r").unwrap().len() >= 2),
                _ => {}
            }
            policy::need_approval("ask", "asked", b"{}", format!(r#"{{"n":{n}}}"#).as_bytes())
        },
    ));
    let (tools, calls) = echo_registry("push", SideEffect::RemoteMutation);
    let config = |agent: Arc<ScriptedAgent>| {
        let mut c = pg_config(&store, tools.clone(), agent);
        c.policy = policy.clone();
        c.ids = None;
        Driver::new(c).unwrap()
    };
    let rtm = rt();
    let d = config(push_agent());
    let run = rtm.block_on(d.start_with_id("r", "g", limits())).unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let a = operator::pending_approval(&*store, "r", None).unwrap();
    operator::approve_shown(
        &*store,
        "r",
        &a.id,
        &a.hash,
        "alice",
        "ok",
        Timestamp::now(),
    )
    .unwrap();
    let (d1, d2) = (config(push_agent()), config(push_agent()));
    let h1 = rtm.spawn(async move { d1.resume("r").await });
    let h2 = rtm.spawn(async move { d2.resume("r").await });
    let results = [rtm.block_on(h1).unwrap(), rtm.block_on(h2).unwrap()];
    assert_eq!(asked.load(SeqCst), 3, "both resumes asked the policy");
    assert_eq!(paused_and_refused(&results), (1, 1), "{results:?}");
    let approvals = store.list_approvals(b"r").unwrap();
    assert_eq!(approvals.len(), 2, "the grant and one new question");
    assert!(calls.lock().unwrap().is_empty(), "nothing ran");
}
