//! The streamable HTTP transport (agentrt mcp 1.3): each JSON-RPC message is POSTed to the
//! server's endpoint; a response comes back as `application/json` or as a `text/event-stream`
//! whose `message` events carry it. No redirect is followed, no standalone server-to-client
//! stream is opened, and every response body is capped at 16 MiB (a longer one fails, never is
//! cut silently). The session id the server gives at `initialize` (`Mcp-Session-Id`) and the
//! negotiated protocol version go with every later message. Proxies named by `HTTP_PROXY`,
//! `HTTPS_PROXY` and `NO_PROXY` apply, as agentrt's transport clone of Go's default does.
//!
//! Blocking (reqwest's blocking client): it is used from plain threads and from the runtime's
//! blocking pool, never from an async task.

use std::io::{BufRead, BufReader, Read};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;

use super::MAX_MESSAGE_BYTES;
use super::canonical::json_string;
use super::rpc::{CallError, Envelope, answer_of};
use super::sanitize;

static CRYPTO: Once = Once::new();

/// One server's endpoint.
pub struct Http {
    client: reqwest::blocking::Client,
    url: reqwest::Url,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What one message in a response body says about request `want`.
enum Seen {
    Answer(Result<Vec<u8>, CallError>),
    /// A request from the server (answered with a ping reply or a refusal).
    Request(String, String),
    Other,
}

fn look(msg: &[u8], want: u64) -> Seen {
    let Ok(env) = serde_json::from_slice::<Envelope>(msg) else {
        return Seen::Other;
    };
    match (env.id, env.method) {
        (Some(id), Some(method)) => Seen::Request(id.get().to_string(), method),
        (Some(id), None) if id.get().parse::<u64>() == Ok(want) => {
            Seen::Answer(answer_of(env.result, env.error))
        }
        _ => Seen::Other,
    }
}

fn too_long() -> CallError {
    CallError::Protocol(format!(
        "mcp: response body exceeds {MAX_MESSAGE_BYTES} bytes"
    ))
}

impl Http {
    /// A client for `endpoint` (`http` or `https`).
    pub fn new(endpoint: &str) -> Result<Http, String> {
        let url = reqwest::Url::parse(endpoint)
            .map_err(|e| format!("endpoint {}: {e}", super::quote(endpoint)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "endpoint {}: only http and https are supported",
                super::quote(endpoint)
            ));
        }
        CRYPTO.call_once(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        let client = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(None)
            .build()
            .map_err(|e| format!("endpoint: {}", sanitize(&e.to_string())))?;
        Ok(Http {
            client,
            url,
            session: Mutex::new(None),
            protocol: Mutex::new(None),
        })
    }

    /// The protocol version the server chose at `initialize`, sent with every later message.
    pub fn set_protocol(&self, version: &str) {
        *lock(&self.protocol) = Some(version.to_string());
    }

    fn post(
        &self,
        body: Vec<u8>,
        deadline: Option<Instant>,
    ) -> Result<reqwest::blocking::Response, CallError> {
        let mut rq = self
            .client
            .post(self.url.clone())
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body);
        if let Some(s) = lock(&self.session).clone() {
            rq = rq.header("Mcp-Session-Id", s);
        }
        if let Some(v) = lock(&self.protocol).clone() {
            rq = rq.header("MCP-Protocol-Version", v);
        }
        let started = Instant::now();
        if let Some(d) = deadline {
            rq = rq.timeout(
                d.saturating_duration_since(started)
                    .max(Duration::from_millis(1)),
            );
        }
        let resp = rq.send().map_err(|e| {
            // The endpoint is the operator's, but its URL may hold credentials: never echoed.
            let e = e.without_url();
            if e.is_timeout() {
                CallError::TimedOut(started.elapsed())
            } else {
                CallError::Closed(format!("post: {}", sanitize(&error_chain(&e))))
            }
        })?;
        let status = resp.status();
        if status.is_redirection() {
            return Err(CallError::Closed(format!(
                "the server answered HTTP {} and redirects are not followed",
                status.as_u16()
            )));
        }
        if !status.is_success() {
            return Err(CallError::Closed(format!(
                "the server answered HTTP {}",
                status.as_u16()
            )));
        }
        if let Some(s) = resp.headers().get("mcp-session-id")
            && let Ok(s) = s.to_str()
        {
            *lock(&self.session) = Some(s.to_string());
        }
        if let Some(n) = resp.content_length()
            && n > MAX_MESSAGE_BYTES as u64
        {
            return Err(CallError::Protocol(format!(
                "mcp: response body of {n} bytes exceeds {MAX_MESSAGE_BYTES}"
            )));
        }
        Ok(resp)
    }

    /// Sends request `id` and reads its raw `result` from the response, until `deadline`.
    pub fn request(
        &self,
        id: u64,
        method: &str,
        params: &[u8],
        deadline: Instant,
    ) -> Result<Vec<u8>, CallError> {
        let mut body = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":").into_bytes();
        body.extend_from_slice(&json_string(method));
        body.extend_from_slice(b",\"params\":");
        body.extend_from_slice(params);
        body.push(b'}');
        let resp = self.post(body, Some(deadline))?;
        let stream = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        let capped = resp.take(MAX_MESSAGE_BYTES as u64 + 1);
        let found = if stream {
            self.read_events(capped, id, deadline)?
        } else {
            let mut all = Vec::new();
            BufReader::new(capped)
                .read_to_end(&mut all)
                .map_err(|e| read_error(&e))?;
            if all.len() > MAX_MESSAGE_BYTES {
                return Err(too_long());
            }
            self.read_json(&all, id, deadline)
        };
        found.unwrap_or_else(|| {
            Err(CallError::Protocol(format!(
                "the server's response holds no answer to request {id}"
            )))
        })
    }

    /// An `application/json` body: one message or a batch.
    fn read_json(
        &self,
        body: &[u8],
        want: u64,
        deadline: Instant,
    ) -> Option<Result<Vec<u8>, CallError>> {
        let messages: Vec<Box<RawValue>> = match serde_json::from_slice::<Box<RawValue>>(body) {
            Ok(v) if v.get().trim_start().starts_with('[') => {
                serde_json::from_str(v.get()).unwrap_or_default()
            }
            Ok(v) => vec![v],
            Err(e) => {
                return Some(Err(CallError::Protocol(format!(
                    "the server's response is not JSON: {e}"
                ))));
            }
        };
        for m in messages {
            match look(m.get().as_bytes(), want) {
                Seen::Answer(a) => return Some(a),
                Seen::Request(id, method) => self.answer_server(&id, &method, deadline),
                Seen::Other => {}
            }
        }
        None
    }

    /// A `text/event-stream` body: `data:` lines joined per event; only events named `message`
    /// (or unnamed) are read.
    fn read_events(
        &self,
        body: impl Read,
        want: u64,
        deadline: Instant,
    ) -> Result<Option<Result<Vec<u8>, CallError>>, CallError> {
        let mut r = BufReader::new(body);
        let (mut data, mut event, mut total) = (Vec::<u8>::new(), String::new(), 0usize);
        let mut has_data = false;
        loop {
            let mut line = Vec::new();
            let n = r.read_until(b'\n', &mut line).map_err(|e| read_error(&e))?;
            total += n;
            if total > MAX_MESSAGE_BYTES {
                return Err(too_long());
            }
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if n == 0 || text.is_empty() {
                if has_data && (event.is_empty() || event == "message") {
                    match look(&data, want) {
                        Seen::Answer(a) => return Ok(Some(a)),
                        Seen::Request(id, method) => self.answer_server(&id, &method, deadline),
                        Seen::Other => {}
                    }
                }
                (data, event, has_data) = (Vec::new(), String::new(), false);
                if n == 0 {
                    return Ok(None);
                }
                continue;
            }
            if let Some(v) = text.strip_prefix(b"data:") {
                if has_data {
                    data.push(b'\n');
                }
                data.extend_from_slice(v.strip_prefix(b" ").unwrap_or(v));
                has_data = true;
            } else if let Some(v) = text.strip_prefix(b"event:") {
                event = String::from_utf8_lossy(v).trim().to_string();
            }
        }
    }

    /// A server's request inside a response: `ping` is answered, anything else refused (no
    /// sampling, no elicitation), each by its own POST.
    fn answer_server(&self, id: &str, method: &str, deadline: Instant) {
        let body = if method == "ping" {
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}")
        } else {
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32601,\"message\":\"method not supported by this client\"}}}}"
            )
        };
        let _ = self.post(body.into_bytes(), Some(deadline));
    }

    /// Sends a notification (the server answers 202 with no body).
    pub fn notify(&self, method: &str, params: &[u8]) -> Result<(), String> {
        let mut body = b"{\"jsonrpc\":\"2.0\",\"method\":".to_vec();
        body.extend_from_slice(&json_string(method));
        body.extend_from_slice(b",\"params\":");
        body.extend_from_slice(params);
        body.push(b'}');
        let deadline = Instant::now() + super::DEFAULT_CONNECT_TIMEOUT;
        self.post(body, Some(deadline))
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// Ends the session on the server (a DELETE naming it), when it gave one. Best effort.
    pub fn close(&self) {
        if let Some(s) = lock(&self.session).take() {
            let _ = self
                .client
                .delete(self.url.clone())
                .header("Mcp-Session-Id", s)
                .timeout(Duration::from_secs(2))
                .send();
        }
    }
}

fn read_error(e: &std::io::Error) -> CallError {
    CallError::Closed(format!(
        "read the server's response: {}",
        sanitize(&e.to_string())
    ))
}

/// An error with its sources, so "error sending request" says why.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}
