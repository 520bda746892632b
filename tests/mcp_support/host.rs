//! A plain JSON-RPC host for the serving tests: starts `countersign mcp-proxy --config FILE`,
//! speaks newline JSON-RPC on its stdin and stdout, and keeps its stderr.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

pub struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<String>,
    next: u64,
    pub stderr: Arc<Mutex<String>>,
    /// Notifications seen (progress).
    pub notes: Vec<Value>,
    /// Responses read while waiting for another id.
    early: Vec<Value>,
}

/// `countersign` with `args`: (exit code, stdout, stderr).
pub fn cs(args: &[&str]) -> (i32, String, String) {
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

/// Pins the configuration's servers.
pub fn pin(cfg: &Path) {
    let (code, _, err) = cs(&["mcp-proxy", "pin", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
}

impl Host {
    /// Starts the proxy and initializes; panics with its stderr when it exits instead.
    pub fn start(cfg: &Path) -> Host {
        let mut h = Host::spawn(cfg);
        let r = h.request("initialize", r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test-host","version":"1"}}"#);
        assert_eq!(r["result"]["serverInfo"]["name"], "gated-tools", "{r}");
        h.notify("notifications/initialized", "{}");
        h
    }

    /// Starts the proxy without talking to it.
    pub fn spawn(cfg: &Path) -> Host {
        let mut child = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(["mcp-proxy", "--config", cfg.to_str().unwrap()])
            .env_remove("COUNTERSIGN_DB")
            .env_remove("AGENTRT_DB")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (e, s2) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(e).lines() {
                let Ok(line) = line else { break };
                let mut s = s2.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Host {
            stdin: child.stdin.take(),
            child,
            rx,
            next: 1,
            stderr,
            notes: Vec::new(),
            early: Vec::new(),
        }
    }

    pub fn notify(&mut self, method: &str, params: &str) {
        let line = format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":{params}}}"#);
        self.write(&line);
    }

    pub fn write(&mut self, line: &str) {
        let w = self.stdin.as_mut().unwrap();
        w.write_all(line.as_bytes()).unwrap();
        w.write_all(b"\n").unwrap();
        w.flush().unwrap();
    }

    /// Sends a request; returns its id.
    pub fn send(&mut self, method: &str, params: &str) -> u64 {
        let id = self.next;
        self.next += 1;
        self.write(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
        ));
        id
    }

    /// The response to `id` (notifications are kept in `notes`).
    pub fn wait(&mut self, id: u64) -> Value {
        if let Some(i) = self.early.iter().position(|v| v["id"] == id) {
            return self.early.remove(i);
        }
        loop {
            // A guard against a hung proxy, not a timing assertion.
            let line = match self.rx.recv_timeout(Duration::from_secs(120)) {
                Ok(l) => l,
                Err(_) => panic!("no answer to {id}; stderr:\n{}", self.stderr()),
            };
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"));
            if v.get("id").is_none() {
                self.notes.push(v);
            } else if v["id"] == id {
                return v;
            } else {
                self.early.push(v);
            }
        }
    }

    pub fn request(&mut self, method: &str, params: &str) -> Value {
        let id = self.send(method, params);
        self.wait(id)
    }

    /// Sends a tools/call; returns its id.
    pub fn send_call(&mut self, tool: &str, args: &str) -> u64 {
        self.send(
            "tools/call",
            &format!(r#"{{"name":"{tool}","arguments":{args}}}"#),
        )
    }

    /// (text, isError) of a tools/call.
    pub fn call(&mut self, tool: &str, args: &str) -> (String, bool) {
        let id = self.send_call(tool, args);
        text_of(&self.wait(id))
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The proxy's stderr once it contains `text`: its lines are read by another thread, so a
    /// line written before an answer may arrive after it. Panics (with the stderr) when the
    /// line has not come after two minutes: a guard against a hung proxy, not a timing check.
    pub fn stderr_with(&self, text: &str) -> String {
        let start = std::time::Instant::now();
        loop {
            let err = self.stderr();
            if err.contains(text) {
                return err;
            }
            if start.elapsed() > Duration::from_secs(120) {
                panic!("no {text:?} on stderr:\n{err}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Closes stdin and waits: (exit code, stderr).
    pub fn close(mut self) -> (i32, String) {
        drop(self.stdin.take());
        let code = self.child.wait().unwrap().code().unwrap_or(-1);
        std::thread::sleep(Duration::from_millis(50));
        (code, self.stderr())
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// SIGKILL: a crash mid-call.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit by itself: (exit code, stderr).
    pub fn exit(mut self) -> (i32, String) {
        let code = self.child.wait().unwrap().code().unwrap_or(-1);
        std::thread::sleep(Duration::from_millis(50));
        (code, self.stderr())
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (text, isError) of a tools/call response.
pub fn text_of(v: &Value) -> (String, bool) {
    let r = &v["result"];
    assert!(r.is_object(), "not a tool result: {v}");
    (
        r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        r["isError"].as_bool().unwrap_or(false),
    )
}

/// The approval id a PENDING/INTERRUPTED/UNKNOWN/BLOCKED text names.
pub fn approval_in(text: &str) -> String {
    let i = text
        .find("(approval ")
        .unwrap_or_else(|| panic!("no approval in: {text}"));
    text[i + 10..].split(')').next().unwrap().to_string()
}

/// The run an approval belongs to.
pub fn run_of(db: &Path, approval: &str) -> String {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(
        "SELECT run_id FROM approvals WHERE id = ?1",
        [approval],
        |r| r.get(0),
    )
    .unwrap()
}

/// `countersign approve` (or `reject`) of the approval, from the command line.
pub fn decide(db: &Path, verb: &str, approval: &str, note: &str) {
    let run = run_of(db, approval);
    let dbs = db.to_str().unwrap();
    let mut args = vec![
        "--db",
        dbs,
        verb,
        run.as_str(),
        "--approval",
        approval,
        "--yes",
    ];
    if !note.is_empty() {
        args.extend(["--note", note]);
    }
    let (code, out, err) = cs(&args);
    assert_eq!(code, 0, "{verb}: {out}{err}");
}

/// The calls the test server answered (or died on), in order.
pub fn server_calls(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("state.json.calls"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn shared_dir() -> std::path::PathBuf {
    let up = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if up.is_dir() {
        up
    } else {
        std::path::PathBuf::from("/work/shared")
    }
}

/// agentrt's own checker accepts the database. The checker knows the runtime's schema only,
/// so it reads a copy without agentrt's proxy tables (tests/mcp_index checks those).
pub fn verify(db: &Path) {
    let copy = db.with_extension("verify.db");
    let _ = std::fs::remove_file(&copy);
    {
        let c = rusqlite::Connection::open(db).unwrap();
        c.execute("VACUUM INTO ?1", [copy.to_str().unwrap()])
            .unwrap();
    }
    let c = rusqlite::Connection::open(&copy).unwrap();
    c.execute_batch(
        "DROP TABLE IF EXISTS proxy_calls; DROP TABLE IF EXISTS proxy_schema_migrations;",
    )
    .unwrap();
    drop(c);
    let out = Command::new("python3")
        .arg(shared_dir().join("tools/agentrt_verify.py"))
        .arg(&copy)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "agentrt_verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
