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
// The child is reaped by wait4 below (which also gives its rusage), not by Child::wait.
#[allow(clippy::zombie_processes)]
pub fn run_measured(args: &[&std::ffi::OsStr]) -> (i32, i64, usize) {
    use std::process::Stdio;
    let child = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut out = Vec::new();
    let mut stdout = child.stdout.expect("stdout");
    std::io::Read::read_to_end(&mut stdout, &mut out).expect("read");
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for this one child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    (libc::WEXITSTATUS(status), usage.ru_maxrss, out.len())
}
