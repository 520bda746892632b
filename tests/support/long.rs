//! Long lists for issue 14 item 8, written by SQL in one transaction (fast even for a million
//! rows): run `a` (WAITING_FOR_APPROVAL) with `n` events, `n` steps, `n` pending approvals and
//! `n` model calls, beside `n` other completed runs, and run `b` (completed) with [`B`]
//! approvals and [`B`] model calls whatever `n` is. Rows are plain and decode; the chain is
//! not valid (events are not hashed), which paging does not look at. Also: counting the SQLite
//! virtual-machine steps a store call costs, with SQLite's progress handler on the store's own
//! connection, a measure that depends only on the queries and the data, never on the clock.

#![allow(dead_code)]

use std::os::raw::{c_int, c_void};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use countersign::runtime::store::{Store, StoreError};

/// Approvals and model calls of run `b`.
pub const B: i64 = 1_500;

/// Writes the lists into a new database at `db`.
pub fn write(db: &Path, n: i64) {
    drop(Store::open(db).unwrap());
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch("PRAGMA foreign_keys = OFF; BEGIN;")
        .unwrap();
    let t = "2026-10-01T09:00:00Z";
    c.execute(
        "INSERT INTO runs (id, goal, status, limits_json, created_at) \
         VALUES ('a', 'long', 'WAITING_FOR_APPROVAL', '{}', ?1)",
        [t],
    )
    .unwrap();
    let fill = |sql: &str| {
        c.execute(
            &format!(
                "WITH RECURSIVE i(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM i WHERE x + 1 < ?1) {sql}"
            ),
            rusqlite::params![n, t],
        )
        .unwrap();
    };
    fill(
        "INSERT INTO runs (id, goal, status, limits_json, created_at) \
         SELECT printf('r%07d', x), 'other', 'COMPLETED', '{}', ?2 FROM i",
    );
    fill(
        "INSERT INTO events (run_id, at, type, payload_json) \
         SELECT 'a', ?2, 'note', printf('{\"i\":%d}', x) FROM i",
    );
    fill(
        "INSERT INTO steps (id, run_id, idx, status, started_at) \
         SELECT printf('s%07d', x), 'a', x, 'completed', ?2 FROM i",
    );
    fill(
        "INSERT INTO approvals (id, run_id, step_id, kind, capability_json, presentation_json, \
         request_json, hash, status, created_at) \
         SELECT printf('p%07d', x), 'a', printf('s%07d', x), 'tool_call', '{}', '{}', \
         '{\"args\":{}}', 'h', 'pending', ?2 FROM i",
    );
    fill(
        "INSERT INTO model_calls (id, run_id, step_id, attempt, status, model, dispatched_at) \
         SELECT printf('m%07d', x), 'a', printf('s%07d', x), 1, 'ok', 'm', ?2 FROM i",
    );
    c.execute(
        "INSERT INTO runs (id, goal, status, limits_json, created_at) \
         VALUES ('b', 'short', 'COMPLETED', '{}', ?1)",
        [t],
    )
    .unwrap();
    c.execute(
        "WITH RECURSIVE i(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM i WHERE x + 1 < ?1) \
         INSERT INTO approvals (id, run_id, step_id, kind, capability_json, presentation_json, \
         request_json, hash, status, created_at) \
         SELECT printf('q%07d', x), 'b', printf('t%07d', x), 'tool_call', '{}', '{}', \
         '{\"args\":{}}', 'h', 'approved', ?2 FROM i",
        rusqlite::params![B, t],
    )
    .unwrap();
    c.execute(
        "WITH RECURSIVE i(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM i WHERE x + 1 < ?1) \
         INSERT INTO model_calls (id, run_id, step_id, attempt, status, model, dispatched_at) \
         SELECT printf('n%07d', x), 'b', printf('t%07d', x), 1, 'ok', 'm', ?2 FROM i",
        rusqlite::params![B, t],
    )
    .unwrap();
    c.execute_batch("COMMIT;").unwrap();
}

extern "C" fn tick(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the leaked counter `count` installed below; it is never freed.
    let n = unsafe { &*(arg as *const AtomicU64) };
    n.fetch_add(1, Ordering::Relaxed);
    0
}

/// A store on `db` whose connection counts its VM steps into the returned counter.
pub fn counted(db: &Path) -> (Store, &'static AtomicU64) {
    let store = Store::open(db).unwrap();
    let n: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
    store
        .write(|tx| {
            // SAFETY: the handle is the store's live connection; the handler and its argument
            // (leaked, so it outlives the connection) are what SQLite documents for it.
            unsafe {
                rusqlite::ffi::sqlite3_progress_handler(
                    tx.conn().handle(),
                    1,
                    Some(tick),
                    n as *const AtomicU64 as *mut c_void,
                );
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    (store, n)
}

/// The VM steps `f` costs on `counter`'s connection.
pub fn steps<T>(counter: &AtomicU64, f: impl FnOnce() -> T) -> (T, u64) {
    let before = counter.load(Ordering::Relaxed);
    let out = f();
    (out, counter.load(Ordering::Relaxed) - before)
}
