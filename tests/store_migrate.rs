//! Older databases migrate forward in one transaction: migration 5 gives RUNNING runs a
//! placeholder lease, migration 6 backfills the event hash chain deterministically.

mod support;

use std::path::Path;

use countersign::runtime::json::event_hash;
use countersign::runtime::store::{MIGRATIONS, PRE_LEASE_OWNER, SCHEMA_MIGRATIONS_DDL, Store};
use countersign::runtime::types::{RunStatus, Timestamp};
use support::{assert_verifies, tempdir};

/// A database as an older agentrt left it: migrations 1..=upto, two runs and their events.
fn old_database(db: &Path, upto: usize) {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(db)
        .unwrap();
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
        .unwrap();
    c.execute_batch(SCHEMA_MIGRATIONS_DDL).unwrap();
    for (i, m) in MIGRATIONS[..upto].iter().enumerate() {
        c.execute_batch(m).unwrap();
        c.execute(
            "INSERT INTO schema_migrations VALUES (?, '2025-01-01T00:00:00Z')",
            [i as i64 + 1],
        )
        .unwrap();
    }
    c.execute_batch(
        "INSERT INTO runs (id, goal, status, limits_json, created_at, started_at) VALUES \
           ('live', 'g', 'RUNNING', '{\"max_steps\":3,\"max_consecutive_tool_failures\":3,\"loop_threshold\":5}', '2025-01-01T00:00:00Z', '2025-01-01T00:00:00Z'), \
           ('done', 'g', 'COMPLETED', '{\"max_steps\":3,\"max_consecutive_tool_failures\":3,\"loop_threshold\":5}', '2025-01-01T00:00:00Z', '2025-01-01T00:00:00Z'); \
         INSERT INTO events (run_id, step_id, at, type, payload_json) VALUES \
           ('live', '', '2025-01-01T00:00:00Z', 'run.started', '{}'), \
           ('done', '', '2025-01-01T00:00:00.25Z', 'run.started', '{}'), \
           ('done', '', '2025-01-01T00:00:01Z', 'run.finished', '{\"detail\":\"\",\"reason\":\"goal_completed\",\"status\":\"COMPLETED\",\"steps\":0}');",
    )
    .unwrap();
}

#[test]
fn store_v021_database_migrates_with_its_runs() {
    let dir = tempdir();
    let db = dir.path().join("v4.db");
    old_database(&db, 4);
    let before = Timestamp::now();
    let store = Store::open(&db).unwrap();
    let after = Timestamp::now();
    let live = store.lease("live").unwrap();
    assert_eq!(live.owner, PRE_LEASE_OWNER);
    assert!(
        live.expires_at >= before.add_nanos(30_000_000_000)
            && live.expires_at <= after.add_nanos(30_000_000_000)
    );
    assert_eq!(
        store.lease("done").unwrap().owner,
        "",
        "only RUNNING runs get the placeholder"
    );
    assert_eq!(store.get_run("live").unwrap().status, RunStatus::Running);
    assert!(store.verify_events(0, 0).unwrap().ok());
    drop(store);
    assert_verifies(&db);
}

#[test]
fn store_v040_database_migrates_with_chained_events() {
    let dir = tempdir();
    let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    old_database(&a, 5);
    old_database(&b, 5);
    let hashes = |p: &Path| {
        let store = Store::open(p).unwrap();
        let page = store.list_events_page("", 10, 0).unwrap();
        page.items.into_iter().map(|e| e.hash).collect::<Vec<_>>()
    };
    let (ha, hb) = (hashes(&a), hashes(&b));
    assert_eq!(ha, hb, "the backfill is deterministic");
    let h1 = event_hash(
        "",
        1,
        "live",
        "",
        "2025-01-01T00:00:00Z",
        "run.started",
        "{}",
    );
    let h2 = event_hash(
        &h1,
        2,
        "done",
        "",
        "2025-01-01T00:00:00.25Z",
        "run.started",
        "{}",
    );
    assert_eq!(&ha[..2], [h1, h2]);
    assert_eq!(ha.len(), 3);
    // A migrated store appends after the backfilled head.
    let store = Store::open(&a).unwrap();
    let ((), evs) = store
        .write(|tx| {
            tx.append_event("live", "", &Timestamp::now(), "run.note", b"{}")
                .map(|_| ())
        })
        .unwrap();
    assert_eq!(evs[0].seq, 4);
    assert!(store.verify_events(0, 0).unwrap().ok());
    drop(store);
    assert_verifies(&a);
}
