//! Pages by key (issue 14 item 8), timed on the real binary in the same run:
//!
//! * `events RUN --limit 0` over a run of N events (default 200 000; `COUNTERSIGN_BENCH_EVENTS`)
//!   against `verify` over the same events: the whole log must stream in time linear in its
//!   size, within 1.5x of verify (which reads and hashes every event once).
//! * `runs --limit 50` on a database of 100 runs against one of 100 000: a page must cost the
//!   same on any size of database (no whole-table COUNT per page).
//!
//! Run: `cargo bench --bench event_log`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use countersign::runtime::json::event_hash;
use countersign::runtime::store::Store;

const AT: &str = "2030-01-01T10:00:00Z";

fn run_row(conn: &rusqlite::Connection, id: &str) {
    conn.execute(
        "INSERT INTO runs (id, goal, status, limits_json, created_at) VALUES (?, 'bench', 'COMPLETED', '{}', ?)",
        [id, AT],
    )
    .unwrap();
}

/// One run holding `n` events with a chain that verifies.
fn event_db(path: &Path, n: i64) {
    drop(Store::open(path).unwrap());
    let mut conn = rusqlite::Connection::open(path).unwrap();
    let tx = conn.transaction().unwrap();
    run_row(&tx, "log-run");
    {
        let mut ins = tx
            .prepare(
                "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?, 'log-run', ?, ?, ?, ?, ?)",
            )
            .unwrap();
        let mut prev = String::new();
        for seq in 1..=n {
            let step = format!("s{}", seq / 4);
            let payload = format!("{{\"index\":{seq},\"summary\":\"looked up order ord_{seq}\"}}");
            let kind = "step.finished";
            let h = event_hash(&prev, seq, "log-run", &step, AT, kind, &payload);
            ins.execute(rusqlite::params![seq, step, AT, kind, payload, h])
                .unwrap();
            prev = h;
        }
    }
    tx.commit().unwrap();
}

/// `n` runs (rows only).
fn runs_db(path: &Path, n: i64) {
    drop(Store::open(path).unwrap());
    let mut conn = rusqlite::Connection::open(path).unwrap();
    let tx = conn.transaction().unwrap();
    for i in 0..n {
        run_row(&tx, &format!("run-{i:06}"));
    }
    tx.commit().unwrap();
}

fn time(db: &Path, args: &[&str]) -> f64 {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .arg("--db")
        .arg(db)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("countersign runs");
    let ms = start.elapsed().as_secs_f64() * 1e3;
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    ms
}

fn median(db: &Path, args: &[&str], reps: usize) -> f64 {
    let _ = time(db, args); // warm the page cache
    let mut v: Vec<f64> = (0..reps).map(|_| time(db, args)).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let n: i64 = std::env::var("COUNTERSIGN_BENCH_EVENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.db");
    event_db(&log, n);
    let reps = 5;
    let events = median(&log, &["events", "log-run", "--limit", "0"], reps);
    let verify = median(&log, &["verify"], reps);
    println!(
        "events --limit 0 over {n} events: {events:.0} ms; verify over the same: {verify:.0} ms; ratio {:.2} (goal <= 1.5)",
        events / verify
    );
    // Linear: half the events take about half the time.
    let half = dir.path().join("half.db");
    event_db(&half, n / 2);
    let events_half = median(&half, &["events", "log-run", "--limit", "0"], reps);
    println!(
        "events --limit 0 over {} events: {events_half:.0} ms; full/half {:.2} (linear: about 2)",
        n / 2,
        events / events_half
    );

    let small = dir.path().join("small.db");
    let big = dir.path().join("big.db");
    runs_db(&small, 100);
    runs_db(&big, 100_000);
    let reps = 15;
    let s = median(&small, &["runs", "--limit", "50"], reps);
    let b = median(&big, &["runs", "--limit", "50"], reps);
    println!(
        "runs --limit 50: 100 runs {s:.2} ms, 100 000 runs {b:.2} ms; ratio {:.2} (goal: the same)",
        b / s
    );
    let sj = median(&small, &["--json", "runs", "--limit", "50"], reps);
    let bj = median(&big, &["--json", "runs", "--limit", "50"], reps);
    println!(
        "--json runs --limit 50 (counts the total once, as its contract says): {sj:.2} ms vs {bj:.2} ms; ratio {:.2}",
        bj / sj
    );
}
