//! The HTTP side every adapter shares: one client per adapter that follows no redirect, reads
//! no proxy from the environment, retries nothing itself, caps every body at 16 MiB and, for a
//! key sent over plain http, checks the connected peer is this machine before a byte is
//! written (spec §2.2–2.4, 2.7).

use std::error::Error as StdError;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Once};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use hyper_util::client::legacy::connect::{Connection, HttpInfo};

use super::Secret;
use super::dns::{DnsError, SystemResolver};
use super::shared::{self, Failure, MAX_BODY_BYTES};

type BoxError = Box<dyn StdError + Send + Sync>;

/// A connection that landed somewhere other than this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("providers: {addr} resolved to {remote}: not a loopback address")]
pub struct NotLoopback {
    pub addr: String,
    pub remote: String,
}

/// The connector layer that refuses a non-loopback peer after dialling, before the request.
#[derive(Clone)]
struct LoopbackLayer {
    addr: String,
}

impl<S> tower_layer::Layer<S> for LoopbackLayer {
    type Service = LoopbackService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        LoopbackService {
            inner,
            addr: self.addr.clone(),
        }
    }
}

#[derive(Clone)]
struct LoopbackService<S> {
    inner: S,
    addr: String,
}

impl<S, Req> tower_service::Service<Req> for LoopbackService<S>
where
    S: tower_service::Service<Req>,
    S::Response: Connection + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let dial = self.inner.call(req);
        let addr = self.addr.clone();
        Box::pin(async move {
            let conn = dial.await.map_err(Into::into)?;
            let mut extras = http::Extensions::new();
            conn.connected().get_extras(&mut extras);
            let remote: Option<SocketAddr> = extras.get::<HttpInfo>().map(|i| i.remote_addr());
            match remote {
                Some(r) if shared::ip_loopback(r.ip()) => Ok(conn),
                // The connection is dropped (closed) here, before any request byte.
                other => Err(Box::new(NotLoopback {
                    addr,
                    remote: other
                        .map(|r| r.to_string())
                        .unwrap_or_else(|| "an unknown peer".into()),
                }) as BoxError),
            }
        })
    }
}

static CRYPTO: Once = Once::new();

/// An adapter's client: no redirects (a 3xx comes back as it is), no proxy, no retries of its
/// own, the 15-minute backstop, and for `loopback_only` the peer check on every connection.
pub fn client(loopback_only: Option<&str>) -> Result<reqwest::Client, String> {
    client_with(loopback_only, &[])
}

/// [`client`] asking `resolver` for addresses instead of the system resolver (what a test
/// uses to see each kind of resolver failure classified without a network). A test hook: only
/// with the `testing` feature.
#[cfg(feature = "testing")]
pub fn client_resolving(
    loopback_only: Option<&str>,
    resolver: impl reqwest::dns::Resolve + 'static,
) -> Result<reqwest::Client, String> {
    build(loopback_only, &[], Arc::new(resolver))
}

/// [`client`] with host names pinned to addresses (what a test uses to make `localhost`
/// land elsewhere). `loopback_only` is the authority named in a refusal.
pub fn client_with(
    loopback_only: Option<&str>,
    resolve: &[(&str, SocketAddr)],
) -> Result<reqwest::Client, String> {
    build(loopback_only, resolve, Arc::new(SystemResolver))
}

fn build(
    loopback_only: Option<&str>,
    resolve: &[(&str, SocketAddr)],
    resolver: Arc<dyn reqwest::dns::Resolve>,
) -> Result<reqwest::Client, String> {
    CRYPTO.call_once(|| {
        // Another part of the process may have installed one: that one is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let mut b = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .no_proxy()
        .timeout(shared::DEFAULT_TIMEOUT)
        .connect_timeout(Duration::from_secs(30))
        .dns_resolver(resolver);
    for (host, addr) in resolve {
        b = b.resolve(host, *addr);
    }
    if let Some(addr) = loopback_only {
        b = b.connector_layer(LoopbackLayer {
            addr: addr.to_string(),
        });
    }
    b.build()
        .map_err(|e| format!("providers: cannot build the HTTP client: {e}"))
}

/// A header to send; a secret value is marked sensitive (kept out of hyper's debug output).
pub enum Header<'a> {
    Plain(&'static str, &'a str),
    Secret(&'static str, &'a Secret, &'static str),
}

/// What came back, read in full (at most 16 MiB).
pub struct Exchange {
    pub status: u16,
    pub location: Option<String>,
    pub retry_after: Duration,
    pub body: Vec<u8>,
}

impl Exchange {
    /// A non-2xx status as the accounting caller sees it.
    pub fn failure(&self, provider: &str) -> Option<Failure> {
        if (200..300).contains(&self.status) {
            return None;
        }
        Some(shared::classify_response(
            provider,
            self.status,
            self.location.as_deref(),
            if (300..400).contains(&self.status) {
                Duration::ZERO
            } else {
                self.retry_after
            },
            &self.body,
        ))
    }

    /// What `parse` reads from a 2xx body; any other status as [`Exchange::failure`] has it.
    pub fn read<T>(
        &self,
        provider: &str,
        parse: impl FnOnce(&[u8]) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        match self.failure(provider) {
            Some(f) => Err(f),
            None => parse(&self.body),
        }
    }
}

/// POSTs a JSON body and reads the reply (status, `Location`, `Retry-After`, body).
pub async fn post(
    provider: &str,
    client: &reqwest::Client,
    url: &str,
    headers: &[Header<'_>],
    body: Vec<u8>,
) -> Result<Exchange, Failure> {
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    for h in headers {
        match h {
            Header::Plain(k, v) => req = req.header(*k, *v),
            Header::Secret(k, s, prefix) => {
                let mut v = http::HeaderValue::from_str(&format!("{prefix}{}", s.expose()))
                    .map_err(|_| {
                        Failure::Permanent(format!(
                            "{provider}: the API key is not a valid header value"
                        ))
                    })?;
                v.set_sensitive(true);
                req = req.header(*k, v);
            }
        }
    }
    let mut resp = req
        .send()
        .await
        .map_err(|e| classify_transport(provider, &e))?;
    let status = resp.status().as_u16();
    let hdr = |n: &str| {
        resp.headers()
            .get(n)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let location = hdr("location");
    let retry_after = shared::retry_after(hdr("retry-after").as_deref(), SystemTime::now());
    let mut out = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                if out.len() + c.len() > MAX_BODY_BYTES {
                    return Err(Failure::Permanent(format!(
                        "providers: response body too large: over the {MAX_BODY_BYTES}-byte limit"
                    )));
                }
                out.extend_from_slice(&c);
            }
            Ok(None) => break,
            Err(e) => {
                // Cut off mid-body: the provider may have served (and billed) the call.
                return Err(Failure::Ambiguous(format!(
                    "{provider}: the response body was cut off after {} bytes: {}",
                    out.len(),
                    chain(&e)
                )));
            }
        }
    }
    Ok(Exchange {
        status,
        location,
        retry_after,
        body: out,
    })
}

/// An error and its causes, `: `-joined, without the URL.
fn chain(e: &reqwest::Error) -> String {
    let mut s = String::new();
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    let mut last = String::new();
    while let Some(c) = cur {
        let t = if let Some(r) = c.downcast_ref::<reqwest::Error>() {
            // reqwest's own text names the URL; the cause says what happened.
            let mut r = format!("{r}");
            if let Some(i) = r.find(" for url (") {
                r.truncate(i);
            }
            r
        } else {
            c.to_string()
        };
        if !t.is_empty() && !last.contains(&t) {
            if !s.is_empty() {
                s.push_str(": ");
            }
            s.push_str(&t);
        }
        last = t;
        cur = c.source();
    }
    s
}

/// Every error in `e`'s chain, and inside each `io::Error` the error it wraps: `source()` skips
/// that one (an `io::Error`'s source is its inner error's source), and a TLS failure arrives as
/// a `rustls::Error` inside two nested `io::Error`s.
fn causes<'a>(e: &'a (dyn StdError + 'static)) -> Vec<&'a (dyn StdError + 'static)> {
    let mut out = Vec::new();
    let mut cur = Some(e);
    while let Some(c) = cur {
        out.push(c);
        let mut io = c.downcast_ref::<std::io::Error>();
        while let Some(inner) = io.and_then(|i| i.get_ref()) {
            let inner: &(dyn StdError + 'static) = inner;
            out.push(inner);
            io = inner.downcast_ref::<std::io::Error>();
        }
        cur = c.source();
    }
    out
}

/// agentrt's `ClassifyTransport`, on error types (never on text): the loopback refusal, a
/// name that does not exist and certificate failures are permanent; a timeout or a connection lost once the request may
/// have gone out is ambiguous; a dial that failed is transient.
pub fn classify_transport(provider: &str, e: &reqwest::Error) -> Failure {
    let mut lost = false;
    for c in causes(e) {
        if let Some(n) = c.downcast_ref::<NotLoopback>() {
            return Failure::Permanent(n.to_string());
        }
        if let Some(d) = c.downcast_ref::<DnsError>()
            && d.is_not_found()
        {
            return Failure::Permanent(format!("{provider}: {d}"));
        }
        if c.downcast_ref::<rustls::Error>().is_some() {
            return Failure::Permanent(format!("{provider}: {}", chain(e)));
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            ) {
                lost = true;
            }
        }
        if let Some(h) = c.downcast_ref::<hyper::Error>()
            && (h.is_incomplete_message() || h.is_closed() || h.is_canceled())
        {
            lost = true;
        }
    }
    let msg = format!("{provider}: {}", chain(e));
    if e.is_builder() {
        return Failure::Permanent(msg);
    }
    if e.is_timeout() {
        return Failure::Ambiguous(msg);
    }
    if e.is_connect() {
        // Nothing was sent: the dial itself failed.
        return Failure::Transient {
            message: msg,
            retry_after: Duration::ZERO,
        };
    }
    if lost {
        return Failure::Ambiguous(msg);
    }
    Failure::Transient {
        message: msg,
        retry_after: Duration::ZERO,
    }
}
