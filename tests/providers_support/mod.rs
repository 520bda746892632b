//! A local HTTP server for the adapter tests: it listens on 127.0.0.1 (or a given address),
//! answers each connection with the next canned reply, and keeps every request's bytes.
#![allow(dead_code)]

pub mod tls;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One canned answer.
#[derive(Clone)]
pub enum Reply {
    /// Status, extra headers, body (Content-Length set).
    Http(u16, Vec<(String, String)>, Vec<u8>),
    /// These bytes, then the connection is closed.
    Raw(Vec<u8>),
}

pub fn json(status: u16, body: &str) -> Reply {
    Reply::Http(status, vec![], body.as_bytes().to_vec())
}

pub fn with_header(status: u16, k: &str, v: &str, body: &str) -> Reply {
    Reply::Http(status, vec![(k.into(), v.into())], body.as_bytes().to_vec())
}

pub struct Server {
    pub addr: SocketAddr,
    /// Each request's bytes (head and body) as received.
    pub requests: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Bytes received on every connection, counted even when no request completed.
    pub bytes: Arc<Mutex<usize>>,
    pub connections: Arc<Mutex<usize>>,
}

impl Server {
    pub fn start(replies: Vec<Reply>) -> Server {
        Server::start_on("127.0.0.1:0", replies)
    }

    pub fn start_on(bind: &str, replies: Vec<Reply>) -> Server {
        let l = TcpListener::bind(bind).unwrap();
        let addr = l.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let bytes = Arc::new(Mutex::new(0));
        let connections = Arc::new(Mutex::new(0));
        let (r, b, c) = (requests.clone(), bytes.clone(), connections.clone());
        std::thread::spawn(move || {
            let mut replies = replies.into_iter();
            for s in l.incoming() {
                let Ok(s) = s else { break };
                *c.lock().unwrap() += 1;
                let reply = replies.next();
                let (r, b) = (r.clone(), b.clone());
                std::thread::spawn(move || serve(s, reply, r, b));
            }
        });
        Server {
            addr,
            requests,
            bytes,
            connections,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn request(&self, i: usize) -> (String, Vec<u8>) {
        let r = self.requests.lock().unwrap()[i].clone();
        let at = r.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        (
            String::from_utf8_lossy(&r[..at]).into_owned(),
            r[at + 4..].to_vec(),
        )
    }

    pub fn body_json(&self, i: usize) -> serde_json::Value {
        serde_json::from_slice(&self.request(i).1).unwrap()
    }
}

fn serve(
    mut s: TcpStream,
    reply: Option<Reply>,
    requests: Arc<Mutex<Vec<Vec<u8>>>>,
    bytes: Arc<Mutex<usize>>,
) {
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    // Read the head, then Content-Length bytes of body.
    loop {
        let n = match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        *bytes.lock().unwrap() += n;
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..at]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if buf.len() >= at + 4 + len {
                break;
            }
        }
    }
    requests.lock().unwrap().push(buf);
    match reply {
        Some(Reply::Http(status, headers, body)) => {
            let mut out = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str("\r\n");
            let _ = s.write_all(out.as_bytes());
            let _ = s.write_all(&body);
        }
        Some(Reply::Raw(b)) => {
            let _ = s.write_all(&b);
        }
        None => {}
    }
    let _ = s.flush();
    let _ = s.shutdown(std::net::Shutdown::Write);
    // Drain what is left so the close is orderly.
    let _ = s.read(&mut chunk);
}

/// A body of `n` bytes announced but cut off after `sent`.
pub fn cut_off(n: usize, sent: usize) -> Reply {
    let mut b =
        format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {n}\r\n\r\n")
            .into_bytes();
    b.extend(std::iter::repeat_n(b' ', sent));
    b.extend_from_slice(b"{\"partial");
    Reply::Raw(b)
}
