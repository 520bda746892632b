//! Statements prepared once a connection on PostgreSQL (docs/decisions/0103), against a real
//! server (`tests/pg_support`): a driver's steps reuse the statements its connection prepared
//! (what it keeps does not grow with the steps it drives); the cache stays bounded however
//! many texts go through it, on the client and on the server; a statement prepared in a
//! transaction that rolled back still serves; and a column another process adds to a table
//! (a migration) breaks no statement already prepared; and a statement whose result type a
//! migration changed is prepared anew: at once on a connection, from the next transaction on
//! in one.

mod pg_support;
mod runtime_support;

use std::sync::Arc;

use countersign::pgstore::PgStore;
use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::driver::{Config, Driver};
use countersign::runtime::operator::{self, OperatorError};
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::store::RunStore;
use countersign::runtime::tools::SideEffect;
use countersign::runtime::types::{RunStatus, Timestamp};
use runtime_support::*;

fn open(db: &pg_support::TestDb) -> Arc<PgStore> {
    Arc::new(PgStore::open(&db.pg_url()).unwrap())
}

/// A run of `calls` read-only tool calls and then `complete`, driven on `store` to its end.
fn drive(store: &Arc<PgStore>, id: &str, calls: usize) {
    let (tools, _) = echo_registry("look", SideEffect::ReadOnly);
    let mut script: Vec<_> = (0..calls)
        .map(|i| agent::tool_call("look", &format!(r#"{{"i": {i}}}"#)))
        .collect();
    script.push(agent::complete(""));
    let mut c = Config::new(store.clone(), tools, Arc::new(DefaultPolicy));
    c.now = Some(clock());
    c.lease_owner = "test".into();
    let driver = Driver::new(c.agent(ScriptedAgent::new(script))).unwrap();
    let run = rt()
        .block_on(driver.start_with_id(id, "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
}

#[test]
fn pg_a_drivers_steps_reuse_the_statements_its_connection_prepared() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let store = open(&db);
    drive(&store, "short", 3);
    let after_short = store.prepared_on_server().unwrap();
    assert!(
        after_short > 0,
        "the driver's statements stay prepared on its connection"
    );
    drive(&store, "long", 40);
    assert_eq!(
        store.prepared_on_server().unwrap(),
        after_short,
        "a run of 40 steps prepares nothing a run of 3 did not"
    );
}

#[test]
fn pg_the_statement_cache_is_bounded_on_the_client_and_the_server() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let store = PgStore::open(&db.pg_url()).unwrap();
    let mut most = 0;
    for i in 0..600 {
        let kept = store.run_cached(&format!("SELECT {i}")).unwrap();
        assert!(kept <= 256, "{kept} statements kept after {i}");
        most = most.max(kept);
    }
    assert_eq!(
        most, 256,
        "the cache fills to its bound before it starts over"
    );
    let on_server = store.prepared_on_server().unwrap();
    assert!(
        (1..=256).contains(&on_server),
        "statements let go are closed on the server too: {on_server} prepared there"
    );
}

#[test]
fn pg_a_statement_prepared_in_a_rolled_back_transaction_still_serves() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let store = open(&db);
    let (tools, _) = echo_registry("push", SideEffect::RemoteMutation);
    let mut c = Config::new(store.clone(), tools, Arc::new(DefaultPolicy));
    c.now = Some(clock());
    c.ids = Some(ids());
    c.lease_owner = "test".into();
    let agent = ScriptedAgent::new([agent::tool_call("push", "{}"), agent::complete("")]);
    let driver = Driver::new(c.agent(agent)).unwrap();
    let run = rt()
        .block_on(driver.start_with_id("r", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    // The reviewer's own connection, nothing prepared on it yet.
    let ops = PgStore::open_existing(&db.pg_url()).unwrap();
    let a = operator::pending_approval(&ops, "r", None).unwrap();
    // Refused inside its transaction (the row changes after the checks made outside it),
    // which rolls back: the statements first prepared in it stay prepared.
    let mut admin = db.client();
    let review = operator::Review {
        ruling: operator::Ruling::Approve,
        shown: operator::Shown::Hash(&a.hash),
        by: "ops",
        note: "",
        now: Timestamp::now(),
    };
    let before = ops.prepared_on_server().unwrap();
    let mut between = 0;
    let e = operator::decide_hooked(&ops, "r", &a.id, review, || {
        between = ops.prepared_on_server().unwrap();
        let other = "f".repeat(64);
        admin
            .execute(
                "UPDATE approvals SET hash = $1 WHERE id = $2",
                &[&other, &a.id],
            )
            .unwrap();
    })
    .unwrap_err();
    assert!(matches!(e, OperatorError::Changed { .. }), "{e}");
    assert!(before <= between, "{before} {between}");
    assert!(
        ops.prepared_on_server().unwrap() > between,
        "the transaction that rolled back prepared statements of its own"
    );
    admin
        .execute(
            "UPDATE approvals SET hash = $1 WHERE id = $2",
            &[&a.hash, &a.id],
        )
        .unwrap();
    operator::approve_shown(&ops, "r", &a.id, &a.hash, "ops", "", Timestamp::now())
        .expect("the statements prepared by the refused decision serve the next one");
    let run = rt().block_on(driver.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
}

#[test]
fn pg_a_column_added_by_another_process_breaks_no_prepared_statement() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let store = open(&db);
    drive(&store, "before", 3);
    db.client()
        .batch_execute(
            "ALTER TABLE runs ADD COLUMN later text; ALTER TABLE steps ADD COLUMN later text; \
             ALTER TABLE event_inbox ADD COLUMN later text",
        )
        .unwrap();
    drive(&store, "after", 3);
    assert_eq!(
        store.get_run(b"after").unwrap().status,
        RunStatus::Completed
    );
}

#[test]
fn pg_a_statement_whose_result_type_changed_is_prepared_anew() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let store = PgStore::open(&db.pg_url()).unwrap();
    let mut admin = db.client();
    admin
        .batch_execute("CREATE TABLE t (x integer); INSERT INTO t VALUES (1)")
        .unwrap();
    let read = "SELECT x FROM t";
    store.run_cached(read).unwrap();
    store.run_cached_in_tx(read).unwrap();
    admin
        .batch_execute("ALTER TABLE t ALTER COLUMN x TYPE bigint")
        .unwrap();
    // On the connection: the stale statement is let go and the call made again.
    store
        .run_cached(read)
        .expect("the connection's call prepares the statement anew");
    admin
        .batch_execute("ALTER TABLE t ALTER COLUMN x TYPE text")
        .unwrap();
    // In a transaction the server aborted, the error is the caller's; the next one serves.
    let e = store.run_cached_in_tx(read).unwrap_err();
    assert!(e.to_string().contains("cached plan"), "{e}");
    store
        .run_cached_in_tx(read)
        .expect("the next transaction prepares the statement anew");
}
