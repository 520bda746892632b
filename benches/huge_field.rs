//! Peak memory on a huge field (issue 14 item 6), measured on the real release binary: a
//! waiting run whose approval's request and the step's decision that made it are each grown
//! to about 100 MB (one string argument), against the same run with a 1 kB argument in the
//! same run of this benchmark. Each command's peak resident set comes from `wait4`'s rusage.
//! `approve` of the huge request is refused after saying what was shown (decision 0011); it
//! still reads the approval to say so, which is what is measured.
//!
//! Run: `cargo bench --bench huge_field` (builds the release binary first).
//! `COUNTERSIGN_BENCH_FIELD_MB` sets the huge field's size (default 100).

mod support;
use support::{binary, measured, shared};

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// The fixture's waiting run with its request's and decision's `"damaged"` argument replaced
/// by a string of `bytes` bytes, written by Python so this process never holds it (a child's
/// peak starts from its parent's at fork): (run, approval).
fn database(db: &Path, bytes: usize) -> (String, String) {
    let man = db.with_extension("json");
    let ok = Command::new("python3")
        .arg(shared().join("tools/agentrt_fixture.py"))
        .arg(db)
        .args(["--scenario", "waiting", "--manifest"])
        .arg(&man)
        .status()
        .expect("fixture");
    assert!(ok.success());
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&man).expect("manifest")).expect("manifest json");
    let run = m
        .pointer("/scenarios/waiting/runs/0/id")
        .and_then(|v| v.as_str())
        .expect("waiting run")
        .to_string();
    let script = "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\n\
        n=int(sys.argv[2])\n\
        for t,col in (('approvals','request_json'),('steps','decision_json')):\n\
        \x20   c.execute(\"UPDATE \"+t+\" SET \"+col+\" = replace(\"+col+\", '\\\"damaged\\\"', \
        '\\\"' || replace(hex(zeroblob(?)), '0', 'x') || '\\\"') WHERE run_id = ?\", (n // 2, sys.argv[3]))\n\
        c.commit()\nprint(c.execute('SELECT id FROM approvals WHERE run_id = ?', (sys.argv[3],)).fetchone()[0])";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(db)
        .arg(bytes.to_string())
        .arg(&run)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (run, String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let bin = binary();
    let mb: usize = std::env::var("COUNTERSIGN_BENCH_FIELD_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let dir = tempfile::tempdir().expect("tempdir");
    let small = dir.path().join("small.db");
    let huge = dir.path().join("huge.db");
    let (run_s, id_s) = database(&small, 1_000);
    let (run_h, id_h) = database(&huge, mb * 1_000_000);
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
    println!(
        "databases: small {:.1} MB, huge {:.1} MB (request and decision of about {mb} MB each)",
        size(&small),
        size(&huge)
    );
    let reps = 5;
    println!(
        "{:30} {:>12} {:>12} {:>7} {:>9}",
        "command", "small peak", "huge peak", "ratio", "huge ms"
    );
    for cmd in ["show", "approve", "events", "events --json"] {
        let mut peaks = Vec::new();
        let mut huge_ms = Vec::new();
        for (db, run, id) in [(&small, &run_s, &id_s), (&huge, &run_h, &id_h)] {
            let mut args: Vec<&OsStr> = vec![OsStr::new("--db"), db.as_os_str()];
            match cmd {
                "approve" => args.extend(
                    [
                        "approve",
                        run.as_str(),
                        "--approval",
                        id.as_str(),
                        "--by",
                        "bench",
                    ]
                    .map(OsStr::new),
                ),
                "events --json" => args.extend(["--json", "events", run.as_str()].map(OsStr::new)),
                c => args.extend([c, run.as_str()].map(OsStr::new)),
            }
            let _ = measured(&bin, &args); // warm the page cache
            let mut peak = 0;
            let mut times = Vec::new();
            for _ in 0..reps {
                let (ms, kib, _) = measured(&bin, &args);
                peak = peak.max(kib);
                times.push(ms);
            }
            times.sort_by(|a, b| a.total_cmp(b));
            peaks.push(peak);
            huge_ms.push(times[reps / 2]);
        }
        println!(
            "{cmd:30} {:>8.1} MiB {:>8.1} MiB {:>7.2} {:>9.1}",
            peaks[0] as f64 / 1024.0,
            peaks[1] as f64 / 1024.0,
            peaks[1] as f64 / peaks[0] as f64,
            huge_ms[1]
        );
        assert!(
            peaks[1] < 64 * 1024,
            "{cmd} peaked at {} KiB on the huge field",
            peaks[1]
        );
    }
}
