//! The MCP server a host talks to (agentrt mcp 2.4, 2.13, 2.14): newline-delimited JSON-RPC on
//! stdin and stdout, nothing else on stdout. `tools/call` requests run concurrently; once the
//! input closes no new call is accepted, holds end, and calls in flight finish first.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::Proxy;
use super::answer::Answer;
use crate::mcp::MAX_MESSAGE_BYTES;
use crate::mcp::canonical::json_string;

/// The status tool's description and schema (agentrt's, exactly: model input).
pub const STATUS_DESCRIPTION: &str = "Report the requests in this session that are waiting for an operator's approval, or, given approval_id, what became of that one: pending, approved, executed, rejected, or expired. This tool only reports; it never runs or approves anything.";
pub const STATUS_SCHEMA: &str = r#"{"type":"object","properties":{"approval_id":{"type":"string","description":"The approval id a pending result named."}},"additionalProperties":false}"#;

type Out = Arc<Mutex<Box<dyn Write + Send>>>;

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<String>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    name: String,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow)]
    meta: Option<&'a RawValue>,
}

fn send(out: &Out, line: &str) {
    let mut w = out.lock().unwrap_or_else(|p| p.into_inner());
    let _ = w.write_all(line.as_bytes());
    let _ = w.write_all(b"\n");
    let _ = w.flush();
}

fn reply(out: &Out, id: &str, result: &str) {
    send(
        out,
        &format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#),
    );
}

fn error(out: &Out, id: &str, code: i64, msg: &str) {
    let m = String::from_utf8_lossy(&json_string(msg)).into_owned();
    send(
        out,
        &format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{m}}}}}"#),
    );
}

/// A tool result of an answer.
pub fn result_json(a: &Answer) -> String {
    let text = String::from_utf8_lossy(&json_string(&a.text)).into_owned();
    let mut r = format!(
        r#"{{"content":[{{"type":"text","text":{text}}}],"isError":{}"#,
        a.is_error
    );
    if let Some(s) = &a.structured {
        r.push_str(",\"structuredContent\":");
        r.push_str(&String::from_utf8_lossy(s));
    }
    r.push('}');
    r
}

fn tools_list(p: &Proxy) -> String {
    let mut items = Vec::new();
    for t in &p.o.offered {
        items.push(format!(
            r#"{{"name":{},"description":{},"inputSchema":{}}}"#,
            String::from_utf8_lossy(&json_string(&t.built.name)),
            String::from_utf8_lossy(&json_string(&t.built.description)),
            String::from_utf8_lossy(&t.built.input_schema)
        ));
    }
    items.push(format!(
        r#"{{"name":{},"description":{},"inputSchema":{STATUS_SCHEMA}}}"#,
        String::from_utf8_lossy(&json_string(&p.o.cfg.status_tool)),
        String::from_utf8_lossy(&json_string(STATUS_DESCRIPTION)),
    ));
    format!(r#"{{"tools":[{}]}}"#, items.join(","))
}

fn initialize(params: Option<&RawValue>) -> String {
    #[derive(Deserialize)]
    struct Init {
        #[serde(rename = "protocolVersion")]
        version: Option<String>,
    }
    let v = params
        .and_then(|p| serde_json::from_str::<Init>(p.get()).ok())
        .and_then(|i| i.version)
        .filter(|v| !v.is_empty() && v.len() < 64)
        .unwrap_or_else(|| "2025-06-18".into());
    format!(
        r#"{{"protocolVersion":{},"capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"gated-tools","version":"0.1.0"}}}}"#,
        String::from_utf8_lossy(&json_string(&v))
    )
}

/// Reads one line of at most the message cap; `None` at the end of input.
fn read_line(input: &mut dyn BufRead) -> Option<Result<Vec<u8>, ()>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buf = input.fill_buf().ok()?;
        if buf.is_empty() {
            return if line.is_empty() && !too_long {
                None
            } else if too_long {
                Some(Err(()))
            } else {
                Some(Ok(line))
            };
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long {
            line.extend_from_slice(chunk);
            if line.len() > MAX_MESSAGE_BYTES {
                too_long = true;
                line.clear();
            }
        }
        let n = done.unwrap_or(buf.len());
        input.consume(n);
        if done.is_some() {
            return Some(if too_long { Err(()) } else { Ok(line) });
        }
    }
}

/// Serves until the input ends, then waits for the calls in flight.
pub fn serve(proxy: Arc<Proxy>, mut input: Box<dyn BufRead + Send>, out: Box<dyn Write + Send>) {
    let out: Out = Arc::new(Mutex::new(out));
    let cancelled: Arc<Cancels> = Arc::default();
    let mut workers = Vec::new();
    while let Some(line) = read_line(&mut *input) {
        let Ok(line) = line else {
            error(&out, "null", -32700, "the message is larger than 16 MiB");
            continue;
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(msg) = serde_json::from_slice::<Msg<'_>>(&line) else {
            error(&out, "null", -32700, "the message is not a JSON-RPC object");
            continue;
        };
        let method = msg.method.clone().unwrap_or_default();
        let Some(id) = msg.id.map(|i| i.get().to_string()) else {
            if method == "notifications/cancelled" {
                cancel(&cancelled, msg.params);
            }
            continue;
        };
        match method.as_str() {
            "initialize" => reply(&out, &id, &initialize(msg.params)),
            "ping" => reply(&out, &id, "{}"),
            "tools/list" => reply(&out, &id, &tools_list(&proxy)),
            "tools/call" if proxy.shutting.load(Ordering::SeqCst) => {
                error(&out, &id, -32000, "the proxy is shutting down");
            }
            "tools/call" => match start_call(&proxy, &out, &cancelled, id, msg.params) {
                Some(w) => {
                    workers.push(w);
                    workers.retain(|w| !w.is_finished());
                }
                None => continue,
            },
            _ => error(&out, &id, -32601, "method not found"),
        }
    }
    proxy.shutting.store(true, Ordering::SeqCst);
    for w in workers {
        let _ = w.join();
    }
    proxy.close();
}

type Cancels = Mutex<HashMap<String, Arc<AtomicBool>>>;

/// Starts a `tools/call` on its own thread (answering a malformed one at once).
fn start_call(
    proxy: &Arc<Proxy>,
    out: &Out,
    cancelled: &Arc<Cancels>,
    id: String,
    params: Option<&RawValue>,
) -> Option<std::thread::JoinHandle<()>> {
    let Some(params) = params.and_then(|p| serde_json::from_str::<CallParams<'_>>(p.get()).ok())
    else {
        error(out, &id, -32602, "tools/call needs a name");
        return None;
    };
    let args = match params.arguments.map(|a| a.get().trim()) {
        None | Some("null") => b"{}".to_vec(),
        Some(a) => a.as_bytes().to_vec(),
    };
    let token = params.meta.and_then(|m| {
        serde_json::from_str::<serde_json::Value>(m.get())
            .ok()?
            .get("progressToken")
            .map(|t| t.to_string())
    });
    let flag = Arc::new(AtomicBool::new(false));
    if let Ok(mut c) = cancelled.lock() {
        c.insert(id.clone(), flag.clone());
    }
    let (p, o, name, cmap) = (proxy.clone(), out.clone(), params.name, cancelled.clone());
    p.inflight.fetch_add(1, Ordering::SeqCst);
    Some(std::thread::spawn(move || {
        let live = || !flag.load(Ordering::SeqCst);
        let progress = |elapsed: f64, total: f64| {
            if let Some(t) = &token {
                send(
                    &o,
                    &format!(
                        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{t},"progress":{elapsed},"total":{total},"message":"waiting for an operator's approval"}}}}"#
                    ),
                );
            }
        };
        let a = if name == p.o.cfg.status_tool {
            super::status::status(&p, &args)
        } else {
            p.handle_call(&name, &args, &live, Some(&progress))
        };
        // A request the host cancelled gets no answer (MCP); the call itself went on.
        if live() {
            reply(&o, &id, &result_json(&a));
        }
        if let Ok(mut c) = cmap.lock() {
            c.remove(&id);
        }
        p.inflight.fetch_sub(1, Ordering::SeqCst);
    }))
}

fn cancel(map: &Mutex<HashMap<String, Arc<AtomicBool>>>, params: Option<&RawValue>) {
    #[derive(Deserialize)]
    struct C<'a> {
        #[serde(rename = "requestId", borrow)]
        request_id: Option<&'a RawValue>,
    }
    let Some(id) = params
        .and_then(|p| serde_json::from_str::<C<'_>>(p.get()).ok())
        .and_then(|c| c.request_id.map(|r| r.get().to_string()))
    else {
        return;
    };
    if let Ok(m) = map.lock()
        && let Some(f) = m.get(&id)
    {
        f.store(true, Ordering::SeqCst);
    }
}
