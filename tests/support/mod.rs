//! Shared test helpers: where the shared tools live, fixture databases written by the
//! independent Python implementation, and its verifier.
#![allow(dead_code)]

pub mod bin;
pub mod hostile;

use std::path::{Path, PathBuf};
use std::process::Command;

/// `<manifest>/../shared` in the final layout, else `/work/shared`.
pub fn shared_dir() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let beside = manifest.join("../shared");
    if beside.join("tools/agentrt_fixture.py").exists() {
        return beside;
    }
    PathBuf::from("/work/shared")
}

/// Writes a fixture database with `agentrt_fixture.py` and returns its manifest.
pub fn fixture(db: &Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new("python3")
        .arg(shared_dir().join("tools/agentrt_fixture.py"))
        .arg(db)
        .args(args)
        .arg("--manifest")
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "agentrt_fixture.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("manifest is JSON")
}

/// Runs `agentrt_verify.py --json` on a database: (exit code, report).
pub fn verify(db: &Path) -> (i32, serde_json::Value) {
    let out = Command::new("python3")
        .arg(shared_dir().join("tools/agentrt_verify.py"))
        .arg(db)
        .arg("--json")
        .output()
        .expect("python3 runs");
    let report = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), report)
}

/// Asserts `agentrt_verify.py` accepts the database.
pub fn assert_verifies(db: &Path) {
    let (code, report) = verify(db);
    assert_eq!(
        code,
        0,
        "agentrt_verify.py refused {}: {report:#}",
        db.display()
    );
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// The string at a JSON pointer of a manifest.
pub fn s<'a>(v: &'a serde_json::Value, ptr: &str) -> &'a str {
    v.pointer(ptr)
        .and_then(|x| x.as_str())
        .unwrap_or_else(|| panic!("manifest has no {ptr}"))
}

pub mod huge;
pub mod long;
pub mod runs;
