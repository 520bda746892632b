//! A streamable HTTP MCP server behind the proxy (agentrt mcp 1.3): pinned, checked and served
//! through the real `countersign` binary against the suite's HTTP server
//! (tests/mcp_support/http_server.py, 127.0.0.1 only).

#[path = "mcp_support/host.rs"]
mod host;
mod mcp_support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use host::*;
use mcp_support::*;

struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn server(dir: &Path, mode: &str) -> Server {
    let log = dir.join(format!("http-{mode}.log"));
    let mut child = Command::new(python())
        .arg(format!(
            "{}/tests/mcp_support/http_server.py",
            env!("CARGO_MANIFEST_DIR")
        ))
        .args([mode, log.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().unwrap();
    Server { child, port, log }
}

/// What the server received, one JSON object per request.
fn received(s: &Server) -> Vec<serde_json::Value> {
    std::fs::read_to_string(&s.log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A configuration with one server named `fs` at `endpoint`.
fn config_at(dir: &Path, endpoint: &str) -> PathBuf {
    let text = format!(
        r#"{{"database": "runs.db", "session": "s1", "hold": "0s",
  "servers": [{{"name": "fs", "endpoint": "{endpoint}", "manifest": "fs.manifest.json",
    "connect_timeout": "10s", "rules": {{"read_file": {{"side_effect": "read_only", "timeout": "5s"}},
      "write_file": {{"side_effect": "remote_mutation", "timeout": "5s"}}}}}}]}}"#
    );
    let path = dir.join("proxy.json");
    write_file(&path, &text, 0o600);
    path
}

#[test]
fn http_server_is_pinned_checked_and_served() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), "normal");
    let cfg = config_at(dir.path(), &format!("http://127.0.0.1:{}/mcp", s.port));
    let c = cfg.to_str().unwrap();
    // Pin reads tools/list from an SSE stream (after answering the server's ping).
    let (code, out, err) = cs(&["mcp-proxy", "pin", "--config", c]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("server fs: 2 tools pinned"), "{out}");
    let (code, out, err) = cs(&["mcp-proxy", "check", "--config", c]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("registered read_file as fs_read_file"),
        "{out}"
    );
    let mut h = Host::start(&cfg);
    let (text, is_err) = h.call("fs_read_file", r#"{"path": "/etc/hostname"}"#);
    assert!(!is_err, "{text}");
    assert_eq!(
        text,
        r#"{"tool": "read_file", "arguments": {"path": "/etc/hostname"}}"#
    );
    let (w, _) = h.call("fs_write_file", r#"{"path": "/a", "text": "b"}"#);
    assert!(w.starts_with("PENDING_APPROVAL: "), "{w}");
    let (code, err) = h.close();
    assert_eq!(code, 0, "{err}");
    let got = received(&s);
    // The session the server gave at initialize goes with every later message, with the
    // negotiated protocol version; the client answered the server's ping in the stream.
    let posts: Vec<&serde_json::Value> = got.iter().filter(|r| r["method"] == "POST").collect();
    assert!(posts.iter().any(|r| r["rpc"] == "tools/call"), "{got:?}");
    for r in posts.iter().filter(|r| r["rpc"] != "initialize") {
        assert_eq!(r["session"], "sess-7f3a", "{r}");
        assert_eq!(r["protocol"], "2025-06-18", "{r}");
    }
    assert!(
        posts
            .iter()
            .any(|r| r["rpc"].is_null() && r["id"] == "srv-1"),
        "the ping was answered: {got:?}"
    );
    assert!(
        posts
            .iter()
            .all(|r| r["accept"] == "application/json, text/event-stream"),
        "{got:?}"
    );
    let writes = posts.iter().filter(|r| r["rpc"] == "tools/call").count();
    assert_eq!(writes, 1, "only the read reached the server: {got:?}");
    assert!(
        got.iter()
            .any(|r| r["method"] == "DELETE" && r["session"] == "sess-7f3a"),
        "the session is ended on close: {got:?}"
    );
    verify(&dir.path().join("runs.db"));
}

#[test]
fn http_redirect_and_oversized_body_fail_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), "redirect");
    let cfg = config_at(dir.path(), &format!("http://127.0.0.1:{}/mcp", s.port));
    let (code, out, err) = cs(&["mcp-proxy", "pin", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("connect: the server answered HTTP 307 and redirects are not followed"),
        "{err}"
    );
    assert_eq!(received(&s).len(), 1, "nothing followed the redirect");
    let h = server(dir.path(), "huge");
    let cfg = config_at(dir.path(), &format!("http://127.0.0.1:{}/mcp", h.port));
    let (code, _, err) = cs(&["mcp-proxy", "pin", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "mcp: response body of {} bytes exceeds {}",
            17 << 20,
            16 << 20
        )),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // An endpoint that is not http(s), and one that does not answer, fail on one line too.
    let cfg = config_at(dir.path(), "ftp://127.0.0.1/mcp");
    let (code, _, err) = cs(&["mcp-proxy", "pin", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("only http and https are supported"), "{err}");
}
