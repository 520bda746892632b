//! `countersign mcp-proxy recheck` (agentrt mcp 2.16): the proxy's policy as configured now
//! asked again, read-only, about the calls a real proxy process judged. Test names follow
//! agentrt's (`TestRecheck_*`, `TestCLI_Recheck*`).

#[path = "mcp_support/host.rs"]
mod host;
mod mcp_support;

use std::path::{Path, PathBuf};

use host::*;
use mcp_support::*;

/// read_file asks a person by the operator's rule; write_file (remote_mutation) by the class.
const RULES_ASKING: &str = r#"{"read_file": {"side_effect": "read_only", "timeout": "5s", "outcome": "require_approval"},
  "write_file": {"side_effect": "remote_mutation", "timeout": "5s", "deny": ["mode"]}}"#;

/// A session whose proxy asked about one write and one read (both left pending).
fn judged(dir: &Path) -> (PathBuf, PathBuf) {
    let cfg = config(dir, "normal", RULES_ASKING, r#""hold": "0s""#);
    pin(&cfg);
    let mut h = Host::start(&cfg);
    let (w, _) = h.call("fs_write_file", r#"{"path": "/tmp/a", "text": "hi"}"#);
    assert!(w.starts_with("PENDING_APPROVAL: "), "{w}");
    let (r, _) = h.call("fs_read_file", r#"{"path": "/etc/hostname"}"#);
    assert!(r.starts_with("PENDING_APPROVAL: "), "{r}");
    let (code, err) = h.close();
    assert_eq!(code, 0, "{err}");
    (cfg, dir.join("runs.db"))
}

fn recheck(cfg: &Path, more: &[&str]) -> (i32, String, String) {
    let mut args = vec!["mcp-proxy", "recheck", "--config", cfg.to_str().unwrap()];
    args.extend_from_slice(more);
    cs(&args)
}

/// Every row of every table, for "nothing written" (an owner's reader may fold the `-wal`
/// into the main file when it closes, by design: the bytes of the files move, the rows do not).
fn files(db: &Path) -> Vec<String> {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = Vec::new();
    for t in tables {
        let mut st = c.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = st.column_count();
        let rows = st
            .query_map([], |r| {
                let v: Vec<String> = (0..n)
                    .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                    .collect();
                Ok(format!("{t}: {}", v.join(" | ")))
            })
            .unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

#[test]
fn recheck_same_config_is_the_same_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, db) = judged(dir.path());
    let before = files(&db);
    let (code, out, err) = recheck(&cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("2 run(s) re-checked under agentrt-proxy/sha256:")
            && out.contains(
                ": 2 decision(s) re-checked, 0 not re-checkable and skipped; 0 run(s) differ"
            ),
        "{out}"
    );
    assert!(out.contains("step 0 (fs_write_file): same as recorded (require_approval: side effect remote_mutation is require_approval by policy)"), "{out}");
    assert!(out.contains("not covered: the duplicate rule"), "{out}");
    assert_eq!(files(&db), before, "recheck writes nothing");
    // JSON: one object per run, newest first.
    let (code, out, err) = cs(&[
        "--json",
        "mcp-proxy",
        "recheck",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let runs = v.as_array().unwrap();
    assert_eq!(runs.len(), 2, "{v}");
    assert_eq!(runs[0]["checked"][0]["tool"], "fs_read_file", "{v}");
    assert!(runs.iter().all(|r| r["differs"] == false), "{v}");
    // --run names one; --limit takes the newest.
    let run = runs[1]["run_id"].as_str().unwrap().to_string();
    let (code, out, _) = recheck(&cfg, &["--run", &run]);
    assert_eq!(code, 0);
    assert!(
        out.contains("1 run(s) re-checked") && out.contains("fs_write_file"),
        "{out}"
    );
    let (code, out, _) = recheck(&cfg, &["--limit", "1"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("1 run(s) re-checked") && out.contains("fs_read_file"),
        "{out}"
    );
}

#[test]
fn recheck_changed_policy_names_the_calls_now_denied() {
    let dir = tempfile::tempdir().unwrap();
    let (_, db) = judged(dir.path());
    // The operator now denies remote mutations: the write's recorded approval no longer holds.
    let cfg = config(
        dir.path(),
        "normal",
        RULES_ASKING,
        r#""hold": "0s", "policy": {"remote_mutation": "deny"}"#,
    );
    let before = files(&db);
    let (code, out, err) = recheck(&cfg, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("step 0 (fs_write_file): DIFFERS from the recorded answer"),
        "{out}"
    );
    assert!(
        out.contains("policy now: deny: side effect remote_mutation is deny by policy"),
        "{out}"
    );
    assert!(
        out.contains("step 0 (fs_read_file): same as recorded"),
        "{out}"
    );
    assert!(out.contains("; 1 run(s) differ"), "{out}");
    assert!(
        err.contains("recheck: the policy now answers differently in 1 run(s)"),
        "{err}"
    );
    assert_eq!(files(&db), before, "recheck writes nothing");
}

#[test]
fn recheck_current_tools_after_a_description_change() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, _) = judged(dir.path());
    std::fs::write(
        dir.path().join("state.json"),
        r#"{"description": "Read a file, now described otherwise."}"#,
    )
    .unwrap();
    pin(&cfg);
    // Without current tools nothing is reached: the policy's answer is the same.
    let (code, out, err) = recheck(&cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    // With them, the read's spec changed, so a grant of its recorded approval would not run.
    let (code, out, err) = recheck(&cfg, &["--current-tools"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("step 0 (fs_read_file): DIFFERS"), "{out}");
    assert!(out.contains("approval hash: "), "{out}");
    assert!(
        out.contains("step 0 (fs_write_file): same as recorded"),
        "{out}"
    );
}

#[test]
fn cli_recheck_of_nothing_fails_and_usage_errors_exit_two() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, db) = judged(dir.path());
    let (code, _, err) = recheck(&cfg, &["--session", "nope"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("recheck: no run of session \"nope\" was found, so nothing was re-checked"),
        "{err}"
    );
    let (code, _, err) = recheck(&cfg, &["--run", "s1.missing"]);
    assert_eq!(code, 1);
    assert!(err.contains("recheck: run \"s1.missing\": "), "{err}");
    // A run id that would retitle the terminal and reverse the line is escaped wherever the
    // message names it, never written raw (the store's "not found" named it raw).
    let (code, _, err) = recheck(&cfg, &["--run", "x\u{1b}]0;TITLE\u{7}\u{202e}y"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        !err.contains(['\u{1b}', '\u{7}', '\u{202e}']),
        "a raw control reached stderr: {err:?}"
    );
    let (code, _, _) = recheck(&cfg, &["--limit", "0"]);
    assert_eq!(code, 2);
    let (code, _, _) = recheck(&cfg, &["--run", "a", "--session", "b"]);
    assert_eq!(code, 2);
    // A database others can write is refused before it is read, as serving refuses it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (code, _, err) = recheck(&cfg, &[]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn recheck_re_run_of_an_unknown_outcome_is_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let rules = r#"{"read_file": {"side_effect": "read_only", "timeout": "5s"},
      "write_file": {"side_effect": "local_mutation", "timeout": "5s"}}"#;
    let cfg = config(dir.path(), "normal", rules, r#""hold": "0s""#);
    pin(&cfg);
    let mut h = Host::start(&cfg);
    // The server dies mid-call: the outcome is unknown and the re-run waits on an
    // interruption approval the proxy asked for itself.
    let (u, _) = h.call("fs_write_file", r#"{"path": "/die", "text": "x"}"#);
    assert!(u.starts_with("UNKNOWN_OUTCOME: "), "{u}");
    h.close();
    let (code, out, err) = recheck(&cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("; 0 run(s) differ"), "{out}");
    assert!(
        out.contains("(require_approval: interrupted while executing; outcome unknown)"),
        "the re-run's question is re-checked, from its recorded interruption: {out}"
    );
}

/// Rules without a timeout of their own take the server's `default_timeout` in recheck as
/// they do when serving (found from outside: check and serving took the configuration, and
/// recheck refused it with "has no timeout").
#[test]
fn recheck_takes_the_servers_default_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let rules = r#"{"read_file": {"side_effect": "read_only", "outcome": "require_approval"},
  "write_file": {"side_effect": "remote_mutation"}}, "default_timeout": "5s""#;
    let cfg = config(dir.path(), "normal", rules, r#""hold": "0s""#);
    pin(&cfg);
    let mut h = Host::start(&cfg);
    let (r, _) = h.call("fs_read_file", r#"{"path": "/etc/hostname"}"#);
    assert!(r.starts_with("PENDING_APPROVAL: "), "{r}");
    let (code, err) = h.close();
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = recheck(&cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
}
