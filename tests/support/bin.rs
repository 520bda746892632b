//! The `countersign` binary as a test starts it: cut off from what the shell running the
//! tests would choose for it, so a developer's `COUNTERSIGN_DB`, `COUNTERSIGN_BY` or console
//! configuration cannot change what a test sees.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_countersign");

/// `countersign` with no database and no reviewer taken from the environment
/// (`COUNTERSIGN_DB`, `AGENTRT_DB` and `COUNTERSIGN_BY` removed), `USER` set to `ci-user`,
/// `TZ` to UTC (the text output's times are local), `XDG_CONFIG_HOME` a directory with no
/// configuration in it, and standard input empty. A test sets on the result whatever it means
/// to vary.
pub fn countersign() -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("COUNTERSIGN_DB")
        .env_remove("AGENTRT_DB")
        .env_remove("COUNTERSIGN_BY")
        .env("USER", "ci-user")
        .env("TZ", "UTC")
        .env("XDG_CONFIG_HOME", no_config())
        .stdin(Stdio::null());
    c
}

/// [`countersign`] with `--db db` as its first arguments.
pub fn on(db: impl AsRef<OsStr>) -> Command {
    let mut c = countersign();
    c.arg("--db").arg(db);
    c
}

/// Runs `countersign --db db args…` to its end.
pub fn cs<S: AsRef<OsStr>>(db: impl AsRef<OsStr>, args: &[S]) -> Output {
    on(db).args(args).output().expect("countersign runs")
}

/// Runs `countersign args…` to its end (the database, if any, among `args`).
pub fn cli<S: AsRef<OsStr>>(args: &[S]) -> Output {
    countersign().args(args).output().expect("countersign runs")
}

/// A directory that holds no configuration (it is never created).
fn no_config() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("countersign-tests-no-config")
}
