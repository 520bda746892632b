//! `stats` (issue 21) on the 100 000-run database (1 000 000 steps, the fixture's `--big`)
//! against a ~100-run one, and against a baseline measured in the same run on the same large
//! file: one plain scan of the steps table that reads every decision (`SELECT COUNT(*),
//! SUM(LENGTH(decision_json)) FROM steps`), the least any per-tool count over every step must
//! read. The target is at most one second on the large database. The scan `stats`
//! used before (every count through SQLite's JSON functions, kept as the tests' oracle in
//! `tests/support/stats_oracle.rs`) is timed in the same run on the same files.
//!
//! Run: `cargo bench --bench stats` (set `COUNTERSIGN_BENCH_BIG_DB` to reuse a large fixture;
//! writing one takes minutes).

#[path = "../tests/support/stats_oracle.rs"]
mod stats_oracle;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use countersign::runtime::store::Store;
use countersign::runtime::types::Timestamp;

fn fixture(db: &Path, args: &[&str]) {
    let ok = Command::new("python3")
        .arg(support::shared().join("tools/agentrt_fixture.py"))
        .arg(db)
        .args(args)
        .arg("--no-check")
        .status()
        .expect("python3 runs");
    assert!(ok.success());
}

/// Median of `reps` timings of `f`, in ms.
fn median_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(|a, b| a.total_cmp(b));
    t[reps / 2]
}

fn stats_ms(db: &Path) -> f64 {
    let store = Store::open_existing(db, true).unwrap();
    median_ms(5, || {
        let s = store.stats(None, Timestamp::now()).unwrap();
        assert!(!s.tools.is_empty());
    })
}

fn old_ms(db: &Path, reps: usize) -> f64 {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    median_ms(reps, || {
        let s = stats_oracle::stats_by_sql(&c, None, Timestamp::now());
        assert!(!s.tools.is_empty());
    })
}

fn scan_ms(db: &Path) -> f64 {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    median_ms(5, || {
        let n: i64 = c
            .query_row(
                "SELECT COUNT(*) + COALESCE(SUM(LENGTH(decision_json)), 0) FROM steps",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(n > 0);
    })
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = dir.path().join("small.db");
    fixture(&small, &["--big", "85"]);
    let big = std::env::var_os("COUNTERSIGN_BENCH_BIG_DB")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.path().join("big.db"));
    if !big.exists() {
        eprintln!("writing the large database (100 000 runs, 1 000 000 steps): minutes");
        fixture(&big, &["--big", "100000", "--steps-per-run", "10"]);
    }
    let s = stats_ms(&small);
    let s_old = old_ms(&small, 5);
    let scan = scan_ms(&big);
    let l = stats_ms(&big);
    let l_old = old_ms(&big, 3);
    println!("stats, small (~100 runs)           {s:9.1} ms  (old scan: {s_old:.1} ms)");
    println!("stats, large (100k runs, 1M steps) {l:9.1} ms  (target: at most 1000 ms)");
    println!("old scan (SQLite JSON functions), large {l_old:9.1} ms");
    println!("baseline: one scan of every step's decision on the large file {scan:9.1} ms");
    println!("ratio stats/scan on the large file: {:.2}", l / scan);
    println!("ratio old/scan on the large file: {:.2}", l_old / scan);
}
