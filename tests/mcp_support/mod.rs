//! Shared by the MCP tests: the suite's MCP server (tests/mcp_support/server.py, newline JSON-RPC
//! over stdio), owner-only files, and configurations in agentrt's format.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// argv of the test server in `mode`.
pub fn server_argv(mode: &str) -> Vec<String> {
    vec![
        python(),
        format!("{}/tests/mcp_support/server.py", env!("CARGO_MANIFEST_DIR")),
        mode.into(),
    ]
}

/// The Python interpreter itself (not a shim that would add its own environment).
pub fn python() -> String {
    static PY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PY.get_or_init(|| {
        let out = std::process::Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 is required by the tests");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
    .clone()
}

/// Writes `text` to `path` with `mode`.
pub fn write_file(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A configuration for one server named `fs` running the test server in `mode`, with `rules`
/// (a JSON object) and `extra` top-level members (JSON text without braces, may be empty).
pub fn config(dir: &Path, mode: &str, rules: &str, extra: &str) -> PathBuf {
    let argv = serde_json::to_string(&server_argv(mode)).unwrap();
    let state = dir.join("state.json");
    let sep = if extra.is_empty() { "" } else { "," };
    let text = format!(
        r#"{{"database": "runs.db", "session": "s1",
  "servers": [{{"name": "fs", "command": {argv}, "manifest": "fs.manifest.json",
    "inherit_env": ["MCP_TEST_STATE"], "env": ["MCP_TEST_STATE={}"],
    "connect_timeout": "10s", "rules": {rules}}}]{sep}{extra}}}"#,
        state.display()
    );
    let path = dir.join("proxy.json");
    write_file(&path, &text, 0o600);
    path
}

/// Rules classifying read_file (read_only, 5s) and write_file (remote_mutation, 5s).
pub const RULES: &str = r#"{"read_file": {"side_effect": "read_only", "timeout": "5s"},
  "write_file": {"side_effect": "remote_mutation", "timeout": "5s", "deny": ["mode"]}}"#;
