//! `show --limit 5` on a run of 3000 steps of 40 kB each against a run of 5 small steps, in the
//! same database and the same run of this benchmark: time and peak memory of the real binary.
//!
//! Run: `cargo bench --bench commands` (builds the release binary first).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

fn binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "--bin", "countersign"])
        .current_dir(root)
        .status()
        .expect("cargo build");
    assert!(status.success());
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("release/countersign")
}

fn shared() -> PathBuf {
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if beside.exists() {
        beside
    } else {
        PathBuf::from("/work/shared")
    }
}

// The child is reaped by wait4 (which also gives its rusage), not by Child::wait.
#[allow(clippy::zombie_processes)]
fn measured(bin: &Path, db: &Path, run: &str) -> (f64, i64) {
    let start = Instant::now();
    let child = Command::new(bin)
        .arg("--db")
        .arg(db)
        .args(["show", run, "--limit", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for this one child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    (start.elapsed().as_secs_f64() * 1e3, usage.ru_maxrss)
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
        let _ = measured(&bin, &db, run); // warm the page cache
        let mut times: Vec<f64> = Vec::new();
        let mut peak = 0;
        for _ in 0..reps {
            let (ms, kib) = measured(&bin, &db, run);
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
