//! The client side of MCP over stdio (agentrt mcp 1.2, 1.4, 1.5), and the same connection over
//! streamable HTTP (`http.rs`, agentrt mcp 1.3): the server is a child in
//! its own process group with only the environment it is given, killed with its descendants
//! on close; the tail of its stderr goes into connect errors; one deadline covers connect,
//! initialize and the whole listing; `tools/list` is read from the bytes the server sent.
//!
//! JSON-RPC 2.0, one message per line. A reader thread matches responses to requests by id,
//! answers the server's `ping` and refuses its other requests (no sampling, no elicitation).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::canonical::json_string;
use super::{MAX_MESSAGE_BYTES, STDERR_TAIL_BYTES, sanitize};

/// The protocol version asked for in `initialize` (the server answers with its own).
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// What to start and how (the parts of a server's configuration the client needs).
#[derive(Debug, Clone, Default)]
pub struct ServerSpec {
    pub name: String,
    pub command: Vec<String>,
    pub env: Vec<String>,
    pub inherit_env: Vec<String>,
    pub connect_timeout: Duration,
}

pub use super::rpc::CallError;
use super::rpc::{Envelope, answer_of};

type Reply = Result<Vec<u8>, CallError>;

struct Shared {
    pending: Mutex<HashMap<u64, Sender<Reply>>>,
    stdin: Mutex<Option<ChildStdin>>,
    dead: Mutex<Option<String>>,
    closed: AtomicBool,
}

/// A live stdio connection to one server.
pub struct Connection {
    name: String,
    shared: Arc<Shared>,
    child: Mutex<Option<Child>>,
    pgid: i32,
    next_id: AtomicU64,
    tail: Arc<Mutex<Vec<u8>>>,
    stderr_done: Mutex<Option<Receiver<()>>>,
    /// A streamable HTTP server (no child, no pipes).
    http: Option<super::http::Http>,
}

/// The child's environment, built, never inherited (agentrt mcp 1.2): `PATH`, `HOME`,
/// `TMPDIR` if set, then each `inherit_env` name if set, then each `env` entry; a later entry
/// of the same name replaces the earlier one in place.
pub fn child_env(
    spec: &ServerSpec,
    parent: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| match out.iter_mut().find(|(n, _)| n == k) {
        Some(slot) => slot.1 = v,
        None => out.push((k.to_string(), v)),
    };
    for k in ["PATH", "HOME", "TMPDIR"] {
        if let Some(v) = parent(k) {
            put(k, v);
        }
    }
    for k in &spec.inherit_env {
        if let Some(v) = parent(k) {
            put(k, v);
        }
    }
    for e in &spec.env {
        if let Some((k, v)) = e.split_once('=') {
            put(k, v.to_string());
        }
    }
    out
}

impl Connection {
    /// Starts the server (no shell: `argv[0]` is executed directly).
    pub fn spawn(spec: &ServerSpec) -> Result<Connection, String> {
        let Some((prog, args)) = spec.command.split_first() else {
            return Err("no command".into());
        };
        let env = child_env(spec, &|k| std::env::var(k).ok());
        let mut cmd = Command::new(prog);
        cmd.args(args)
            .env_clear()
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                // A clean signal mask: the proxy blocks SIGINT/SIGTERM to take them on one
                // thread, and a mask is inherited across exec.
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                if libc::setpgid(0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                #[cfg(target_os = "linux")]
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("start {}: {e}", sanitize(prog)))?;
        let pgid = i32::try_from(child.id()).unwrap_or(0);
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            stdin: Mutex::new(child.stdin.take()),
            dead: Mutex::new(None),
            closed: AtomicBool::new(false),
        });
        let tail = Arc::new(Mutex::new(Vec::new()));
        let (done_tx, done_rx) = channel();
        if let Some(mut err) = stderr {
            let tail = tail.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                    t.extend_from_slice(&buf[..n]);
                    let excess = t.len().saturating_sub(STDERR_TAIL_BYTES);
                    t.drain(..excess);
                }
                let _ = done_tx.send(());
            });
        }
        if let Some(out) = stdout {
            let shared = shared.clone();
            std::thread::spawn(move || read_loop(out, &shared));
        }
        Ok(Connection {
            name: spec.name.clone(),
            shared,
            child: Mutex::new(Some(child)),
            pgid,
            next_id: AtomicU64::new(1),
            tail,
            stderr_done: Mutex::new(Some(done_rx)),
            http: None,
        })
    }

    /// A streamable HTTP server at `endpoint` (nothing is sent until `initialize`).
    pub fn endpoint(spec: &ServerSpec, endpoint: &str) -> Result<Connection, String> {
        Ok(Connection {
            name: spec.name.clone(),
            shared: Arc::new(Shared {
                pending: Mutex::new(HashMap::new()),
                stdin: Mutex::new(None),
                dead: Mutex::new(None),
                closed: AtomicBool::new(false),
            }),
            child: Mutex::new(None),
            pgid: 0,
            next_id: AtomicU64::new(1),
            tail: Arc::new(Mutex::new(Vec::new())),
            stderr_done: Mutex::new(None),
            http: Some(super::http::Http::new(endpoint)?),
        })
    }

    /// The server's name as configured.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sends a request and waits for its raw `result` until `deadline`. A connection already
    /// gone is not reopened (decision 0070): the request is not sent ([`CallError::NotSent`],
    /// naming the failure that ended the connection, which is not this request's).
    pub fn request(&self, method: &str, params: &[u8], deadline: Instant) -> Reply {
        let started = Instant::now();
        if let Some(why) = self.lost() {
            return Err(not_sent(&why));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Some(h) = &self.http {
            return h.request(id, method, params, deadline);
        }
        let (tx, rx) = channel();
        lock(&self.shared.pending).insert(id, tx);
        let mut line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":").into_bytes();
        line.extend_from_slice(&json_string(method));
        line.extend_from_slice(b",\"params\":");
        line.extend_from_slice(params);
        line.extend_from_slice(b"}\n");
        if let Err(e) = self.send(&line) {
            lock(&self.shared.pending).remove(&id);
            return Err(e);
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        let got = rx.recv_timeout(wait);
        lock(&self.shared.pending).remove(&id);
        match got {
            Ok(reply) => reply,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(CallError::TimedOut(
                deadline.saturating_duration_since(started),
            )),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(CallError::Closed(
                self.dead()
                    .unwrap_or_else(|| "the connection was closed".into()),
            )),
        }
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: &[u8]) -> Result<(), String> {
        if let Some(h) = &self.http {
            if let Some(why) = self.dead() {
                return Err(why);
            }
            return h.notify(method, params);
        }
        let mut line = b"{\"jsonrpc\":\"2.0\",\"method\":".to_vec();
        line.extend_from_slice(&json_string(method));
        line.extend_from_slice(b",\"params\":");
        line.extend_from_slice(params);
        line.extend_from_slice(b"}\n");
        self.send(&line).map_err(|e| match e {
            CallError::NotSent(why) | CallError::Closed(why) => why,
            e => e.to_string(),
        })
    }

    /// Writes one line: `NotSent` when the server's stdin is already gone (closed), `Closed`
    /// when the write failed (part of the line may have reached the server).
    fn send(&self, line: &[u8]) -> Result<(), CallError> {
        let mut stdin = lock(&self.shared.stdin);
        let Some(w) = stdin.as_mut() else {
            return Err(not_sent(
                &self
                    .lost()
                    .unwrap_or_else(|| "the connection was closed".into()),
            ));
        };
        w.write_all(line)
            .and_then(|()| w.flush())
            .map_err(|e| CallError::Closed(format!("write to the server: {e}")))
    }

    fn dead(&self) -> Option<String> {
        lock(&self.shared.dead).clone()
    }

    /// Why the connection is gone, `None` while it is up: the failure that ended it (the
    /// server exited or closed its output, a read failed, a message passed the cap), or its
    /// close. Nothing is sent on it any more.
    pub fn lost(&self) -> Option<String> {
        self.dead().or_else(|| {
            self.shared
                .closed
                .load(Ordering::SeqCst)
                .then(|| "the connection was closed".to_string())
        })
    }

    /// The `initialize` handshake, then `notifications/initialized`.
    pub fn initialize(&self, deadline: Instant) -> Result<(), CallError> {
        let params = format!(
            "{{\"protocolVersion\":\"{PROTOCOL_VERSION}\",\"capabilities\":{{}},\"clientInfo\":{{\"name\":\"countersign\",\"version\":\"{}\"}}}}",
            env!("CARGO_PKG_VERSION")
        );
        let raw = self.request("initialize", params.as_bytes(), deadline)?;
        #[derive(Deserialize)]
        struct Init {
            #[serde(rename = "protocolVersion")]
            protocol_version: String,
        }
        let init: Init = serde_json::from_slice(&raw).map_err(|e| {
            CallError::Protocol(format!("the initialize result is not usable: {e}"))
        })?;
        if init.protocol_version.is_empty() {
            return Err(CallError::Protocol(
                "the initialize result names no protocol version".into(),
            ));
        }
        if let Some(h) = &self.http {
            h.set_protocol(&init.protocol_version);
        }
        self.notify("notifications/initialized", b"{}")
            .map_err(CallError::Closed)
    }

    /// The server's stderr tail as agentrt appends it to a failed connect: waits up to 2 s for
    /// the pipe to close; empty when the server wrote nothing.
    pub fn stderr_suffix(&self) -> String {
        if let Some(rx) = lock(&self.stderr_done).take() {
            let _ = rx.recv_timeout(Duration::from_secs(2));
        }
        let tail = lock(&self.tail).clone();
        let text = String::from_utf8_lossy(&tail);
        let t = text.trim();
        if t.is_empty() {
            String::new()
        } else {
            format!("; stderr: {}", super::quote(t))
        }
    }

    /// Ends the server and every process in its group. Safe to call more than once and while
    /// a request waits (it fails as closed).
    pub fn close(&self) {
        if self.shared.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(h) = &self.http {
            h.close();
        }
        lock(&self.shared.stdin).take(); // EOF on the server's stdin: its cue to exit
        let mut child = lock(&self.child).take();
        if let Some(c) = child.as_mut() {
            let until = Instant::now() + Duration::from_millis(500);
            while Instant::now() < until {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        if self.pgid > 0 {
            // SAFETY: kill has no memory preconditions; a negative pid names the group.
            unsafe {
                libc::kill(-self.pgid, libc::SIGKILL);
            }
        }
        if let Some(mut c) = child {
            let _ = c.kill();
            let _ = c.wait();
        }
        mark_dead(&self.shared, "the connection was closed");
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}

/// A request not written because the connection was already gone (`why`, another failure's).
fn not_sent(why: &str) -> CallError {
    CallError::NotSent(format!(
        "the server is not connected since an earlier failure: {why}"
    ))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn mark_dead(shared: &Shared, why: &str) {
    {
        let mut d = lock(&shared.dead);
        if d.is_none() {
            *d = Some(why.to_string());
        }
    }
    let why = lock(&shared.dead).clone().unwrap_or_default();
    for (_, tx) in lock(&shared.pending).drain() {
        let _ = tx.send(Err(CallError::Closed(why.clone())));
    }
}

fn read_loop(out: impl Read, shared: &Shared) {
    let mut r = BufReader::new(out);
    loop {
        let mut line = Vec::new();
        let n = match (&mut r)
            .take(MAX_MESSAGE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(n) => n,
            Err(e) => {
                mark_dead(shared, &format!("read from the server: {e}"));
                return;
            }
        };
        if n == 0 {
            mark_dead(shared, "the server closed its output");
            return;
        }
        if line.len() > MAX_MESSAGE_BYTES && line.last() != Some(&b'\n') {
            mark_dead(
                shared,
                &format!("the server sent a message longer than {MAX_MESSAGE_BYTES} bytes"),
            );
            return;
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let Ok(env) = serde_json::from_slice::<Envelope>(text) else {
            continue; // not JSON-RPC: ignored, as a log line would be
        };
        match (env.id, env.method) {
            (Some(id), Some(method)) => {
                // A request from the server: only ping is answered.
                let reply = if method == "ping" {
                    format!(
                        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{}}}}\n",
                        id.get()
                    )
                } else {
                    format!(
                        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":-32601,\"message\":\"method not supported by this client\"}}}}\n",
                        id.get()
                    )
                };
                if let Some(w) = lock(&shared.stdin).as_mut() {
                    let _ = w.write_all(reply.as_bytes()).and_then(|()| w.flush());
                }
            }
            (Some(id), None) => {
                let Ok(id) = id.get().parse::<u64>() else {
                    continue;
                };
                let Some(tx) = lock(&shared.pending).remove(&id) else {
                    continue;
                };
                let _ = tx.send(answer_of(env.result, env.error));
            }
            _ => {} // a notification: list_changed and logging are ignored
        }
    }
}
