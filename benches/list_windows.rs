//! A window of each list the console pages (issue 14 item 8), on a database whose lists hold
//! 2 000 rows against one whose lists hold 1 000 000 (`COUNTERSIGN_BENCH_ROWS`), in the same
//! run: a run's events, steps, approvals and model calls, the queue and the runs, each read
//! through the console's own reader (`SqliteData`, the queries the screens send) from the
//! list's start, 40 rows past a row already read half way down, and at the end (`G`: read by
//! key in reverse). Run `a` holds the long lists; run `b` 1 500 approvals and model calls in
//! both databases: a run's approvals and model calls are in rowid order, which agentrt's
//! index `(run_id, created_at)` does not hold, so their window costs what the run's own rows
//! cost (shown for `a`), never what other runs' do (shown for `b`). The runs are the completed
//! ones (all but `a`, whose overview row checks its own million steps for damage). The damaged list is a scan by nature (only SQLite's look at each column
//! says it does not decode) and is reported apart, on databases without damage.
//!
//! Run: `cargo bench --bench list_windows`.

use std::path::Path;
use std::time::Instant;

use countersign::console::testing::SqliteData;
use countersign::console::testing::{ConsoleData, Query, Reply};
use countersign::runtime::store::Store;

const WIN: u64 = 75;

/// Run `a` (waiting) with `n` events, steps, pending approvals and model calls, and `n` other
/// runs, by SQL in one transaction.
fn write(db: &Path, n: i64) {
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
    for sql in [
        "INSERT INTO runs (id, goal, status, limits_json, created_at) \
         SELECT printf('r%07d', x), 'other', 'COMPLETED', '{}', ?2 FROM i",
        "INSERT INTO events (run_id, at, type, payload_json) \
         SELECT 'a', ?2, 'note', printf('{\"i\":%d}', x) FROM i",
        "INSERT INTO steps (id, run_id, idx, status, started_at) \
         SELECT printf('s%07d', x), 'a', x, 'completed', ?2 FROM i",
        "INSERT INTO approvals (id, run_id, step_id, kind, capability_json, presentation_json, \
         request_json, hash, status, created_at) SELECT printf('p%07d', x), 'a', \
         printf('s%07d', x), 'tool_call', '{}', '{}', '{\"args\":{}}', 'h', 'pending', ?2 FROM i",
        "INSERT INTO model_calls (id, run_id, step_id, attempt, status, model, dispatched_at) \
         SELECT printf('m%07d', x), 'a', printf('s%07d', x), 1, 'ok', 'm', ?2 FROM i",
    ] {
        c.execute(
            &format!(
                "WITH RECURSIVE i(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM i WHERE x + 1 < ?1) {sql}"
            ),
            rusqlite::params![n, t],
        )
        .unwrap();
    }
    // Run `b`: 1 500 approvals and model calls whatever `n` is.
    for sql in [
        "INSERT INTO runs (id, goal, status, limits_json, created_at) SELECT 'b', 'short', \
         'COMPLETED', '{}', ?2 WHERE ?1 > 0",
        "INSERT INTO approvals (id, run_id, step_id, kind, capability_json, presentation_json, \
         request_json, hash, status, created_at) SELECT printf('q%07d', x), 'b', \
         printf('t%07d', x), 'tool_call', '{}', '{}', '{\"args\":{}}', 'h', 'approved', ?2 FROM i",
        "INSERT INTO model_calls (id, run_id, step_id, attempt, status, model, dispatched_at) \
         SELECT printf('n%07d', x), 'b', printf('t%07d', x), 1, 'ok', 'm', ?2 FROM i",
    ] {
        c.execute(
            &format!(
                "WITH RECURSIVE i(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM i WHERE x + 1 < ?1) {sql}"
            ),
            rusqlite::params![B as i64, t],
        )
        .unwrap();
    }
    c.execute_batch("COMMIT;").unwrap();
}

/// Approvals and model calls of run `b`, in both databases.
const B: u64 = 1_500;

/// The console's query for `list` at `place` (0 start, 1 near a row read, 2 end) of `n` rows.
fn query(list: &str, place: usize, n: u64) -> Query {
    let (list, run, n) = match list.strip_suffix(" of b") {
        Some(l) => (l, "b", B),
        None => (list, "a", n),
    };
    let deep = n / 2;
    let offset = [0, deep + 40, n.saturating_sub(WIN / 3 + 1)][place];
    let near = place == 1;
    let end = (place == 2).then_some(n);
    let id = |p: &str, i: u64| near.then(|| (i, format!("{p}{i:07}")));
    let run = countersign::runtime::types::Key::from(run);
    match list {
        "events" => Query::Events {
            run,
            offset,
            limit: WIN,
            anchor: near.then_some((deep, deep as i64 + 1)),
            end,
        },
        "steps" => Query::Steps {
            run,
            offset,
            limit: WIN,
            anchor: id("s", deep),
            end,
        },
        "approvals" => Query::Approvals {
            run,
            offset,
            limit: WIN,
            anchor: id("p", deep),
            end,
        },
        "model calls" => Query::ModelCalls {
            run,
            offset,
            limit: WIN,
            anchor: id("m", deep),
            end,
        },
        "queue" => Query::Queue {
            filter: String::new(),
            sort: Default::default(),
            offset,
            limit: WIN,
            anchor: id("p", deep),
            end,
        },
        // The completed runs: every run but `a`, whose overview row (its pending count and
        // damage check over its own `n` approvals and steps) would cost what `a` holds.
        _ => Query::Runs {
            status: Some(countersign::runtime::types::RunStatus::Completed),
            filter: String::new(),
            offset: offset + 1,
            limit: WIN,
            anchor: near.then(|| (deep + 1, format!("r{:07}", n - 1 - deep))),
            end: end.map(|e| e + 1),
        },
    }
}

fn median_ms(data: &mut SqliteData, q: &Query, reps: usize) -> f64 {
    let mut t = Vec::new();
    for _ in 0..reps {
        let s = Instant::now();
        let r = data.query(q).expect("query");
        t.push(s.elapsed().as_secs_f64() * 1e3);
        assert!(!matches!(r, Reply::Failed(_)));
    }
    t.sort_by(|a, b| a.total_cmp(b));
    t[reps / 2]
}

fn main() {
    let big: u64 = std::env::var("COUNTERSIGN_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let small: u64 = 2_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut dbs = Vec::new();
    for n in [small, big] {
        let db = dir.path().join(format!("l{n}.db"));
        let s = Instant::now();
        write(&db, n as i64);
        println!(
            "{n} rows per list: written in {:.1} s, {:.0} MB",
            s.elapsed().as_secs_f64(),
            std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0) as f64 / 1e6
        );
        dbs.push((n, SqliteData::open(&db).expect("open")));
    }
    let reps = 15;
    println!(
        "{:16} {:16} {:>10} {:>10} {:>7}",
        "list", "window", "2k ms", "big ms", "ratio"
    );
    let mut worst: f64 = 0.0;
    for list in [
        "events",
        "steps",
        "approvals of b",
        "model calls of b",
        "approvals",
        "model calls",
        "queue",
        "runs",
    ] {
        for (place, name) in ["start", "near a row read", "end (G)"].iter().enumerate() {
            let mut ms = Vec::new();
            for (n, data) in dbs.iter_mut() {
                let q = query(list, place, *n);
                let _ = data.query(&q); // warm the cache
                ms.push(median_ms(data, &q, reps));
            }
            let ratio = ms[1] / ms[0];
            if !matches!(list, "approvals" | "model calls") {
                worst = worst.max(ratio);
            }
            println!(
                "{list:16} {name:16} {:>10.3} {:>10.3} {:>7.2}",
                ms[0], ms[1], ratio
            );
        }
    }
    println!(
        "worst ratio big/small (but a's own approvals and model calls, which grow with it): {worst:.2}"
    );
    // The damaged list: a scan of every step, approval and run for undecodable columns.
    let mut ms = Vec::new();
    for (_, data) in dbs.iter_mut() {
        let q = Query::Damaged {
            offset: 0,
            limit: WIN,
            anchor: None,
            end: None,
        };
        ms.push(median_ms(data, &q, 3));
    }
    println!(
        "damaged (a scan, no damage present): {:.1} / {:.1} ms = {:.0}x",
        ms[0],
        ms[1],
        ms[1] / ms[0]
    );
}
