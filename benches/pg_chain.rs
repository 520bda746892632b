//! The event chain on PostgreSQL (issue 19), three ways, in one run so that the ratios compare
//! like with like: the naive chain (every writing transaction locks the chain head row, appends
//! its event after it and holds the lock through its commit); the sequenced chain of decision
//! 0081 (writers commit to the inbox, one sequencer thread chains batches; timed until every
//! event is chained); and writers inserting rows that take no shared lock (what group commit
//! allows). Aggregate events per second of 1, 4 and 16 concurrent writers, each with its own
//! connection. The server is `tests/pg_support`'s (a
//! throwaway cluster with fsync on, or `COUNTERSIGN_TEST_PG`). Bounded by a count of
//! transactions, never by time.
//!
//! `cargo bench --bench pg_chain` (PG_CHAIN_TX=N transactions per configuration, default 3000).

#[path = "../tests/pg_support/mod.rs"]
mod pg_support;

use std::time::Instant;

use countersign::pgstore::{PgStore, Sequencer};

fn setup(db: &pg_support::TestDb) {
    let mut s = PgStore::open(&db.pg_url()).expect("migrate");
    s.client()
        .batch_execute(
            "INSERT INTO runs (id, goal, status, limits_json, created_at) \
             VALUES ('bench', 'bench', 'RUNNING', '{}', '2030-01-01T00:00:00Z'); \
             CREATE TABLE unchained (id bigserial PRIMARY KEY, run_id text, payload text)",
        )
        .expect("setup");
}

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Naive,
    Sequenced,
    Unchained,
}

/// Runs `total` transactions split over `writers` threads; returns events per second (for
/// the sequenced chain, until the last one is chained).
fn measure(db: &pg_support::TestDb, writers: usize, total: usize, way: Way) -> f64 {
    let per = total / writers;
    let mut stores: Vec<PgStore> = (0..writers)
        .map(|_| PgStore::open_existing(&db.pg_url()).expect("connect"))
        .collect();
    let start = Instant::now();
    let sequencer =
        (way == Way::Sequenced).then(|| Sequencer::spawn(&db.pg_url()).expect("sequencer"));
    std::thread::scope(|sc| {
        for (w, s) in stores.iter_mut().enumerate() {
            sc.spawn(move || {
                for i in 0..per {
                    let payload = format!("{{\"writer\":{w},\"i\":{i}}}");
                    let (at, kind) = ("2030-01-01T00:00:00Z", "bench.tick");
                    match way {
                        Way::Naive => {
                            s.append_event("bench", "", at, kind, &payload)
                                .expect("append");
                        }
                        Way::Sequenced => {
                            s.enqueue_event("bench", "", at, kind, &payload)
                                .expect("enqueue");
                        }
                        Way::Unchained => {
                            s.client()
                                .execute(
                                    "INSERT INTO unchained (run_id, payload) VALUES ('bench', $1)",
                                    &[&payload],
                                )
                                .expect("insert");
                        }
                    }
                }
            });
        }
    });
    if let Some(seq) = sequencer {
        let chained = seq.stop().expect("sequencer");
        assert_eq!(chained as usize, per * writers, "every event chained");
    }
    (per * writers) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    // SAFETY: set before any thread starts.
    unsafe { std::env::set_var("COUNTERSIGN_TEST_PG_DURABLE", "1") };
    let total: usize = std::env::var("PG_CHAIN_TX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    setup(&db);
    println!("pg_chain: {total} transactions per configuration, one event or row each, fsync on");
    let mut base = [0.0f64; 3];
    for writers in [1usize, 4, 16] {
        let naive = measure(&db, writers, total, Way::Naive);
        let sequenced = measure(&db, writers, total, Way::Sequenced);
        let free = measure(&db, writers, total, Way::Unchained);
        if writers == 1 {
            base = [naive, sequenced, free];
        }
        println!(
            "writers {writers:>2}: naive chain {naive:>7.0}/s ({:.2}x one writer)   sequenced {sequenced:>7.0}/s ({:.2}x)   unchained {free:>7.0}/s ({:.2}x)",
            naive / base[0],
            sequenced / base[1],
            free / base[2]
        );
    }
    let mut s = PgStore::open_existing(&db.pg_url()).expect("connect");
    let report = s.verify_events(0, 0).expect("verify");
    assert!(report.ok(), "the chain holds after the bench: {report:?}");
    println!("chain verified: {} events", report.checked);
}
