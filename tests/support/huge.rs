//! A database with one huge run (3000 steps of about 40 kB each) and one small run (5 steps),
//! written with Python's sqlite3 on top of a fixture database. For the "reads only the page it
//! prints" checks; the chain is not kept for the added rows (nothing here verifies it).

use std::path::Path;
use std::process::Command;

pub const HUGE: &str = "huge-run";
pub const SMALL: &str = "small-run";

pub fn write(db: &Path, steps: usize, bytes: usize) {
    super::fixture(db, &["--scenario", "completed", "--seed", "3"]);
    let script = include_str!("../../benches/huge_run.py");
    let o = Command::new("python3")
        .args(["-c", script])
        .arg(db)
        .arg(steps.to_string())
        .arg(bytes.to_string())
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Runs the binary and returns (exit code, peak resident set in KiB, stdout bytes).
///
/// The binary is started by a small Python parent that forks, execs it and reads its rusage
/// with wait4. Linux records, at exec, the peak resident set of the memory the process leaves
/// into its rusage. A child this test process spawned directly (posix_spawn's vfork, or a fork)
/// would carry this process's peak or current size, which depends on what the other tests here
/// are doing at the time. A fork of the small Python parent carries only that parent's few MB.
pub fn run_measured(args: &[&std::ffi::OsStr]) -> (i32, i64, usize) {
    use std::process::Stdio;
    const PARENT: &str = "import os, sys\n\
pid = os.fork()\n\
if pid == 0:\n    os.execv(sys.argv[1], sys.argv[1:])\n\
_, status, ru = os.wait4(pid, 0)\n\
sys.stderr.write('%d %d\\n' % (os.waitstatus_to_exitcode(status), ru.ru_maxrss))\n";
    let out = Command::new("python3")
        .args(["-c", PARENT, env!("CARGO_BIN_EXE_countersign")])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("python3 runs the measured binary");
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap_or_default();
    let mut it = last.split(' ').map(|n| n.parse::<i64>());
    match (it.next(), it.next()) {
        (Some(Ok(code)), Some(Ok(kib))) => (code as i32, kib, out.stdout.len()),
        _ => panic!("the measuring parent said: {err}"),
    }
}
