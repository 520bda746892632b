//! `countersign mcp-proxy pin` and `check` as real processes against the suite's MCP server.

mod mcp_support;

use std::process::Command;

use mcp_support::*;

fn cs(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(args)
        .env_remove("COUNTERSIGN_DB")
        .env_remove("AGENTRT_DB")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_pin_and_check() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "normal", RULES, "");
    let cfg_s = cfg.to_str().unwrap();
    let (code, out, err) = cs(&["mcp-proxy", "pin", "--config", cfg_s]);
    assert_eq!(code, 0, "{err}");
    let manifest = dir.path().join("fs.manifest.json");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "server fs: 3 tools pinned in {}, with the server's own hints, which classify nothing:",
            manifest.display()
        )
    );
    assert_eq!(
        lines[1],
        format!(
            "  {:<28} {:<26} {}",
            "read_file", "readOnly", "Read a file."
        )
    );
    assert_eq!(
        lines[2],
        format!(
            "  {:<28} {:<26} {}",
            "set_description", "no annotations", "Change read_file's description."
        )
    );
    assert_eq!(
        lines[3],
        format!(
            "  {:<28} {:<26} {}",
            "write_file", "claims nothing", "Write a file."
        )
    );
    assert!(lines[4].starts_with("classify the tools in the configuration's rules, then: countersign mcp-proxy check --config "));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&manifest).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    let (code, out, err) = cs(&["mcp-proxy", "check", "--config", cfg_s]);
    assert_eq!(code, 0, "{err}");
    let db = dir.path().join("runs.db");
    assert_eq!(
        out,
        format!(
            "fs: registered read_file as fs_read_file (read_only)\n\
             fs: registered write_file as fs_write_file (remote_mutation)\n\
             fs: unclassified set_description: no rule\n\
             status tool: gate_status\nsession: s1\ndatabase: {}\n",
            db.display()
        )
    );
    // check opened the database as serving would: the runtime's tables and the call index.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let v: i64 = conn
        .query_row(
            "SELECT MAX(version) FROM proxy_schema_migrations",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(v, 2);
    let runs: i64 = conn
        .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 0);
}

/// A server that cannot be listed fails the pin before any manifest is written: the servers
/// before it keep the manifests they had (found from outside: they were re-pinned).
#[test]
fn a_pin_that_fails_on_one_server_writes_no_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let argv = serde_json::to_string(&server_argv("normal")).unwrap();
    let text = format!(
        r#"{{"database": "runs.db", "session": "s1", "servers": [
  {{"name": "fs", "command": {argv}, "manifest": "fs.manifest.json", "connect_timeout": "10s"}},
  {{"name": "gone", "command": ["{}"], "manifest": "gone.manifest.json", "connect_timeout": "10s"}}]}}"#,
        dir.path().join("no-such-server").display()
    );
    let cfg = dir.path().join("proxy.json");
    write_file(&cfg, &text, 0o600);
    let before = "{\"server\": \"fs\", \"pinned_at\": \"2026-01-01T00:00:00Z\", \"tools\": {}}\n";
    let manifest = dir.path().join("fs.manifest.json");
    write_file(&manifest, before, 0o600);
    let (code, out, err) = cs(&["mcp-proxy", "pin", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("gone"), "{err}");
    assert_eq!(out, "", "nothing is reported pinned");
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), before);
    assert!(!dir.path().join("gone.manifest.json").exists());
    // With the second server's command there, the same pin writes both.
    let argv = server_argv("normal");
    write_file(
        &dir.path().join("no-such-server"),
        &format!("#!/bin/sh\nexec '{}' '{}' normal\n", argv[0], argv[1]),
        0o700,
    );
    let (code, out, err) = cs(&["mcp-proxy", "pin", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ne!(std::fs::read_to_string(&manifest).unwrap(), before);
    assert!(dir.path().join("gone.manifest.json").exists());
}

/// Listed entries without a string name cannot be pinned (agentrt skips them); pin says how
/// many it skipped instead of dropping them silently (found from outside).
#[test]
fn pin_says_how_many_entries_had_no_name() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "nameless", RULES, "");
    let (code, out, err) = cs(&["mcp-proxy", "pin", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("server fs: 2 tools pinned"), "{out}");
    assert!(
        out.contains("  and 2 listed entries without a string name, not pinned"),
        "{out}"
    );
    let (_, out, _) = cs(&[
        "mcp-proxy",
        "pin",
        "--config",
        config(dir.path(), "normal", RULES, "").to_str().unwrap(),
    ]);
    assert!(!out.contains("without a string name"), "{out}");
}

#[test]
fn cli_check_refuses_what_would_not_serve() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing classified: exit 1, the report is still printed.
    let cfg = config(dir.path(), "normal", "{}", "");
    let cfg_s = cfg.to_str().unwrap();
    assert_eq!(cs(&["mcp-proxy", "pin", "--config", cfg_s]).0, 0);
    let (code, out, err) = cs(&["mcp-proxy", "check", "--config", cfg_s]);
    assert_eq!(code, 1);
    assert!(out.contains("fs: unclassified read_file: no rule"), "{out}");
    assert_eq!(err, "error: mcp: server \"fs\": no tool registered\n");
    assert!(
        !dir.path().join("runs.db").exists(),
        "a refused check creates no database"
    );

    // A tool renamed to the status tool's name refuses start.
    let rules =
        r#"{"read_file": {"side_effect": "read_only", "timeout": "5s", "rename": "gate_status"}}"#;
    let cfg = config(dir.path(), "normal", rules, "");
    let (code, _, err) = cs(&["mcp-proxy", "check", "--config", cfg_s]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "error: server \"fs\" registers tool \"read_file\" under \"gate_status\", the status tool's name: rename one (status_tool or the rule's rename)\n"
    );
    // ...and renaming the status tool fixes it.
    let cfg2 = config(dir.path(), "normal", rules, r#""status_tool": "status""#);
    assert_eq!(cfg, cfg2);
    let (code, out, err) = cs(&["mcp-proxy", "check", "--config", cfg_s]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("status tool: status"));

    // A configuration others can write: one line, exit 1, nothing pinned or opened.
    write_file(&cfg, &std::fs::read_to_string(&cfg).unwrap(), 0o666);
    let (code, out, err) = cs(&["mcp-proxy", "pin", "--config", cfg_s]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.ends_with("which lets its group or others write it: chmod go-w it\n"),
        "{err}"
    );
}

#[test]
fn cli_usage_and_a_missing_configuration() {
    let (code, _, err) = cs(&["mcp-proxy"]);
    assert_eq!(code, 2);
    assert_eq!(err, "usage: mcp-proxy: --config FILE is required\n");
    let (code, _, _) = cs(&["mcp-proxy", "pin"]);
    assert_eq!(code, 2);
    let (code, out, err) = cs(&["mcp-proxy", "--config", "/nonexistent/proxy.json"]);
    assert_eq!((code, out.as_str()), (1, ""));
    // Serving is built: a missing configuration is one line, and stdout (the host's MCP
    // channel) stays empty.
    assert_eq!(
        err,
        "error: config: /nonexistent/proxy.json: No such file or directory (os error 2)\n"
    );
}

#[test]
fn the_suggested_check_command_names_the_configuration_as_one_shell_word() {
    // A configuration path with a space and a `$`: the line to copy quotes it, so a shell
    // reads back exactly the path (the display escaper would leave both bare).
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("my $HOME cfg");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let cfg = config(&dir, "normal", RULES, "");
    let (code, out, err) = cs(&["mcp-proxy", "pin", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let last = out.lines().last().unwrap();
    let (_, cmd) = last.split_once("then: ").expect(last);
    let echoed = Command::new("sh")
        .args([
            "-c",
            &format!(
                "printf %s {}",
                cmd.trim_start_matches("countersign mcp-proxy check --config ")
            ),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(echoed.stdout).unwrap(),
        cfg.to_str().unwrap()
    );
}
