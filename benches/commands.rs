//! `show --limit 5` on a run of 3000 steps of 40 kB each against a run of 5 small steps, in the
//! same database and the same run of this benchmark: time and peak memory of the real binary.
//!
//! Run: `cargo bench --bench commands` (builds the release binary first).

mod support;
use support::{binary, measured, shared};

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// `show RUN --limit 5`: wall time (ms) and peak resident set (KiB).
fn show(bin: &Path, db: &Path, run: &str) -> (f64, i64) {
    let args: [&OsStr; 6] = [
        "--db".as_ref(),
        db.as_os_str(),
        "show".as_ref(),
        run.as_ref(),
        "--limit".as_ref(),
        "5".as_ref(),
    ];
    let (ms, kib, _) = measured(bin, &args);
    (ms, kib)
}

fn main() {
    let bin = binary();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("huge.db");
    let ok = Command::new("python3")
        .arg(shared().join("tools/agentrt_fixture.py"))
        .arg(&db)
        .args(["--scenario", "completed"])
        .status()
        .expect("fixture");
    assert!(ok.success());
    let script = include_str!("huge_run.py");
    let ok = Command::new("python3")
        .args(["-c", script])
        .arg(&db)
        .args(["3000", "40000"])
        .status()
        .expect("python3");
    assert!(ok.success());
    let reps = 15;
    let mut results = Vec::new();
    for run in ["small-run", "huge-run"] {
        let _ = show(&bin, &db, run); // warm the page cache
        let mut times: Vec<f64> = Vec::new();
        let mut peak = 0;
        for _ in 0..reps {
            let (ms, kib) = show(&bin, &db, run);
            times.push(ms);
            peak = peak.max(kib);
        }
        times.sort_by(|a, b| a.total_cmp(b));
        let median = times[reps / 2];
        println!(
            "show --limit 5 {run:9}: median {median:7.2} ms over {reps}, peak RSS {:.1} MiB",
            peak as f64 / 1024.0
        );
        results.push((median, peak));
    }
    println!(
        "ratio huge/small: time {:.2}, peak memory {:.2} (database {:.0} MB)",
        results[1].0 / results[0].0,
        results[1].1 as f64 / results[0].1 as f64,
        std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0) as f64 / 1e6
    );
}
