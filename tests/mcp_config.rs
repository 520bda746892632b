//! The proxy configuration in agentrt's format (agentrt mcp 2.2): same keys, defaults and
//! refusals; files others can write are refused.

mod mcp_support;

use std::path::Path;
use std::time::Duration;

use countersign::mcp::config::{self, Outcome};
use mcp_support::write_file;

const MIN: &str = r#"{"database": "runs.db", "session": "s1",
  "servers": [{"name": "fs", "command": ["srv"], "manifest": "fs.json"}]}"#;

fn parse(text: &str) -> Result<config::ProxyConfig, String> {
    config::parse(Path::new("/etc/cs/proxy.json"), text.as_bytes())
}

/// `MIN` with `key: value` added at the top level.
fn with(key: &str, value: &str) -> String {
    MIN.replacen('{', &format!("{{\"{key}\": {value}, "), 1)
}

#[test]
fn config_defaults_and_relative_paths() {
    let c = parse(MIN).unwrap();
    assert_eq!(c.database.file(), Some(Path::new("/etc/cs/runs.db")));
    assert_eq!(c.servers[0].manifest, Path::new("/etc/cs/fs.json"));
    assert_eq!(c.hold, Duration::from_secs(15));
    assert_eq!(c.repeat_window, Duration::from_secs(600));
    assert_eq!(c.max_pending, 5);
    assert_eq!(c.approval_ttl, Duration::from_secs(86_400));
    assert_eq!(c.grant_ttl, Duration::from_secs(86_400));
    assert_eq!(c.status_tool, "gate_status");
    assert_eq!(c.lease_ttl, None);
    assert_eq!(c.servers[0].connect_timeout, Duration::from_secs(30));
    assert_eq!(c.policy["read_only"], Outcome::Allow);
    assert_eq!(c.policy["local_mutation"], Outcome::Allow);
    assert_eq!(c.policy["remote_mutation"], Outcome::RequireApproval);
    assert_eq!(c.policy["destructive"], Outcome::Deny);
    let c = parse(&with("policy", r#"{"destructive": "require_approval"}"#)).unwrap();
    assert_eq!(c.policy["destructive"], Outcome::RequireApproval);
    assert_eq!(parse(&with("hold", "\"0s\"")).unwrap().hold, Duration::ZERO);
    let abs = MIN.replace("\"runs.db\"", "\"/var/db/runs.db\"");
    assert_eq!(
        parse(&abs).unwrap().database.file(),
        Some(Path::new("/var/db/runs.db"))
    );
}

/// A `postgres://` database is a PostgreSQL URL (decision 0085), never a path under a
/// directory `postgres:`; how it is shown never carries its password.
#[test]
fn config_takes_a_postgres_url() {
    let c = parse(&MIN.replace("runs.db", "postgresql://alice:s3cret@db.example/cs")).unwrap();
    assert_eq!(c.database.file(), None);
    let shown = c.database.shown();
    assert!(shown.starts_with("postgresql://alice"), "{shown}");
    assert!(shown.contains("db.example/cs"), "{shown}");
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(!format!("{:?}", c.database).contains("s3cret"));
    let c = parse(&MIN.replace("runs.db", "POSTGRES://db.example/cs")).unwrap();
    assert_eq!(c.database.file(), None);
}

#[test]
fn config_refuses_unknown_fields() {
    for (text, want) in [
        (with("sesion", "\"x\""), "unknown field `sesion`"),
        (
            MIN.replace("\"manifest\"", "\"manifset\": 1, \"manifest\""),
            "unknown field `manifset`",
        ),
        (
            MIN.replace(
                "\"manifest\": \"fs.json\"",
                r#""manifest": "fs.json", "rules": {"t": {"side_effect": "read_only", "timeot": "1s"}}"#,
            ),
            "unknown field `timeot`",
        ),
        (format!("{MIN} {{}}"), "not usable JSON"),
        (with("policy", r#"{"harmless": "allow"}"#), "policy: unknown side effect \"harmless\""),
        (
            with("policy", r#"{"read_only": "maybe"}"#),
            "policy: read_only: outcome \"maybe\" is not allow, require_approval, or deny",
        ),
        (with("hold", "15"), "hold: a duration is a string such as \"15s\""),
        (with("hold", "\"-1s\""), "hold: duration \"-1s\" is negative"),
        (with("max_pending", "-1"), "max_pending must not be negative"),
        (with("lease_ttl", "\"2s\""), "lease_ttl 2s is shorter than 3s"),
        (
            with("status_tool", "\"gate status\""),
            "status_tool \"gate status\" does not match ^[a-zA-Z0-9_-]{1,64}$",
        ),
        (MIN.replace("\"database\": \"runs.db\", ", ""), "database is required"),
        (
            MIN.replace("runs.db", "postgresql://alice@db.example/cs?sslmode=bogus"),
            "database: sslmode=bogus is not one of disable, prefer, require, verify-full",
        ),
        (
            MIN.replace(r#""command": ["srv"], "#, ""),
            "server \"fs\": exactly one of command or endpoint is required",
        ),
        (
            MIN.replace(r#""command": ["srv"]"#, r#""command": ["srv"], "endpoint": "http://x""#),
            "server \"fs\": exactly one of command or endpoint is required",
        ),
        (
            MIN.replace(r#", "manifest": "fs.json""#, ""),
            "server \"fs\": manifest is required",
        ),
        (
            MIN.replace(
                r#""manifest": "fs.json"}"#,
                r#""manifest": "fs.json"}, {"name": "fs", "command": ["b"], "manifest": "b"}"#,
            ),
            "servers[1]: the name \"fs\" is used twice",
        ),
        (
            MIN.replace(
                "\"manifest\": \"fs.json\"",
                r#""manifest": "fs.json", "rules": {"t": {"side_effect": "read_only", "outcome": "sure"}}"#,
            ),
            "server \"fs\": tool \"t\": outcome \"sure\" is not allow, require_approval, or deny",
        ),
        (
            MIN.replace(
                "\"manifest\": \"fs.json\"",
                r#""manifest": "fs.json", "rules": {"t": {"side_effect": "read_only", "timeout": "5"}}"#,
            ),
            "server \"fs\": tool \"t\": timeout: time: missing unit in duration \"5\"",
        ),
        (MIN.replace("]}", "], \"servers\": []}"), "not usable JSON: duplicate key \"servers\""),
    ] {
        let e = parse(&text).unwrap_err();
        assert!(e.contains(want), "{text}\n -> {e}\n want {want}");
    }
}

#[test]
fn config_refuses_an_unsafe_session_name() {
    for bad in ["", "a b", "a/b", "ä", &"x".repeat(65)] {
        let e = parse(&MIN.replace("\"s1\"", &format!("\"{bad}\""))).unwrap_err();
        assert!(
            e.contains("must be 1 to 64 letters, digits, '_' or '-'"),
            "{e}"
        );
    }
    assert!(parse(&MIN.replace("\"s1\"", &format!("\"{}\"", "x".repeat(64)))).is_ok());
}

#[test]
fn config_refuses_files_others_can_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proxy.json");
    for (mode, ok) in [
        (0o600, true),
        (0o644, true),
        (0o444, true),
        (0o620, false),
        (0o602, false),
        (0o666, false),
    ] {
        write_file(&path, MIN, mode);
        let r = config::read(&path);
        if ok {
            assert!(r.is_ok(), "{mode:o}: {r:?}");
        } else {
            let e = r.unwrap_err();
            assert!(
                e.starts_with(&format!("config: {}", path.display()))
                    && e.ends_with("which lets its group or others write it: chmod go-w it"),
                "{mode:o}: {e}"
            );
        }
    }
    write_file(&path, MIN, 0o620);
    assert!(
        config::read(&path)
            .unwrap_err()
            .contains("has mode -rw--w----")
    );
    let e = config::read(dir.path()).unwrap_err();
    assert!(e.ends_with("is not a regular file"), "{e}");
}

#[test]
fn config_refuses_what_could_read_two_ways() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.json");
    write_file(
        &m,
        r#"{"server": "fs", "server": "git", "tools": {}}"#,
        0o600,
    );
    let e = countersign::mcp::manifest::Manifest::read(&m).unwrap_err();
    assert!(e.contains("duplicate key \"server\""), "{e}");
    let e = parse(&with("hold", "\"1s\"").replacen("{", "{\"hold\": \"2s\", ", 1)).unwrap_err();
    assert!(e.contains("duplicate key \"hold\""), "{e}");
    let e = parse(&with("max_pending", "1e400")).unwrap_err();
    assert!(e.contains("not usable JSON"), "{e}");
    let db = dir.path().join("real.db");
    write_file(&db, "", 0o600);
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let e = countersign::mcp::owned::check_database(&link).unwrap_err();
    assert!(
        e.ends_with("is a symbolic link; name the database file itself"),
        "{e}"
    );
}
