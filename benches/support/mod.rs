//! What the benches that run the real binary share: building it, finding `../shared`, and
//! timing one run of it with its peak resident set. Not a bench itself (Cargo finds benches
//! only as `benches/*.rs` and `benches/*/main.rs`).
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Builds the release binary and returns its path (honouring `CARGO_TARGET_DIR`).
pub fn binary() -> PathBuf {
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

/// The shared tools and vectors: `../shared` beside the checkout, else `/work/shared`.
pub fn shared() -> PathBuf {
    let near = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if near.join("tools").exists() {
        near
    } else {
        PathBuf::from("/work/shared")
    }
}

/// Runs `bin args` with no input or output and returns its wall time in ms, its peak resident
/// set in KiB (from `wait4`'s rusage) and its exit code.
// The child is reaped by wait4 (which also gives its rusage), not by Child::wait.
#[allow(clippy::zombie_processes)]
pub fn measured<S: AsRef<OsStr>>(bin: &Path, args: &[S]) -> (f64, i64, i32) {
    let start = Instant::now();
    let child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
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
    (
        start.elapsed().as_secs_f64() * 1e3,
        usage.ru_maxrss,
        libc::WEXITSTATUS(status),
    )
}
