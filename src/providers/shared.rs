//! What every adapter shares and nothing here needs the network for: the endpoint and key
//! rules (checked on the URL as written), status classification, `Retry-After`, usage
//! validation, truncation and the price helpers (spec §2).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, SystemTime};

use thiserror::Error;

use super::wire::ChatResponse;
use crate::runtime::model::{ModelError, Price, Usage};

/// The most of any response body that is read (16 MiB).
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// The whole-request backstop on a client an adapter builds itself.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// The most of a body repeated in an error.
pub const BODY_EXCERPT_BYTES: usize = 2048;
/// A longer `Retry-After` counts as absent.
pub const RETRY_AFTER_CEILING: Duration = Duration::from_secs(3600);

/// How an adapter's attempt failed, in the accounting caller's terms (spec §3).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Failure {
    /// Nothing was served; worth another attempt (after `retry_after`, when set).
    #[error("transient: {message}")]
    Transient {
        message: String,
        retry_after: Duration,
    },
    /// The request may have been served (timeout, connection lost mid-exchange): charged the
    /// estimate, retried.
    #[error("{0}")]
    Ambiguous(String),
    /// The provider served (and billed) the call but the reply is unusable: charged what it
    /// reported, not retried.
    #[error("{message}")]
    Served { message: String, usage: Usage },
    /// Served, but its usage cannot be charged: charged the estimate, not retried.
    #[error("{0}")]
    UnusableUsage(String),
    /// The same request would fail the same way.
    #[error("{0}")]
    Permanent(String),
}

impl From<Failure> for ModelError {
    fn from(f: Failure) -> ModelError {
        match f {
            Failure::Transient {
                message,
                retry_after,
            } if !retry_after.is_zero() => ModelError::RetryAfter {
                message: format!("transient: {message}"),
                after: retry_after,
            },
            Failure::Transient { message, .. } => {
                ModelError::Transient(format!("transient: {message}"))
            }
            Failure::Ambiguous(m) => ModelError::Ambiguous(m),
            Failure::Served { message, usage } => ModelError::Served { message, usage },
            Failure::UnusableUsage(m) => {
                ModelError::UnusableUsage(m.replacen("unusable usage: ", "", 1))
            }
            Failure::Permanent(m) => ModelError::Fatal(m),
        }
    }
}

/// A base URL split as written: nothing normalised (spec §13: a WHATWG parser would turn
/// `127.1` into `127.0.0.1` and lowercase `LOCALHOST`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `http` or `https` (lowercased).
    pub scheme: String,
    /// The host and port as written (`[::1]:8080`).
    pub authority: String,
    /// The host as written, without port or brackets.
    pub hostname: String,
    /// The rest (`/v1`), without a trailing `/`.
    pub path: String,
}

/// True only for the exact string `localhost` or a literal loopback IP with no zone
/// (127.0.0.0/8, `::1`, `::ffff:127.x.y.z`). `host` is as written, without port or brackets.
pub fn loopback(host: &str) -> bool {
    if host == "localhost" {
        return true;
    }
    if let Ok(v4) = host.parse::<Ipv4Addr>() {
        return v4.is_loopback();
    }
    if let Ok(v6) = host.parse::<Ipv6Addr>() {
        return ip_loopback(IpAddr::V6(v6));
    }
    false
}

/// An address (of a connected peer) is loopback, IPv4-mapped forms unmapped.
pub fn ip_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.is_loopback(),
            None => v6.is_loopback(),
        },
    }
}

fn not_http(provider: &str, base: &str) -> String {
    format!(
        "{provider}: base URL {} is not an http or https URL",
        crate::runtime::json::go_quote(&redacted_url(base))
    )
}

/// A URL as a refusal may repeat it: user information shown `***@`, a query `?***`, a
/// fragment `#***` (a password or a token in any of them is never repeated).
pub fn redacted_url(u: &str) -> String {
    let start = u.find("://").map_or(0, |i| i + 3);
    let auth_end = u[start..]
        .find(['/', '?', '#'])
        .map_or(u.len(), |i| start + i);
    let mut out = match u[start..auth_end].rfind('@') {
        Some(at) => format!("{}***{}", &u[..start], &u[start + at..auth_end]),
        None => u[..auth_end].to_string(),
    };
    let rest = &u[auth_end..];
    let path_end = rest.find(['?', '#']).unwrap_or(rest.len());
    out.push_str(&rest[..path_end]);
    if rest[path_end..].starts_with('?') {
        out.push_str("?***");
    }
    if rest[path_end..].contains('#') {
        out.push_str("#***");
    }
    out
}

/// Refuses an adapter's config without a model.
pub fn require_model(provider: &str, model: &str) -> Result<(), String> {
    if model.is_empty() {
        return Err(format!("{provider}: model is required"));
    }
    Ok(())
}

/// The configured accounting name, else the adapter's default for its model.
pub fn name_or(configured: &str, default: impl FnOnce() -> String) -> String {
    if configured.is_empty() {
        default()
    } else {
        configured.to_string()
    }
}

/// Splits a base URL as written; `Err` is the message for a URL that is not http(s).
pub fn split_url(provider: &str, base: &str) -> Result<(Endpoint, bool), String> {
    let bad = || not_http(provider, base);
    let (scheme, rest) = base.split_once("://").ok_or_else(bad)?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(bad());
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if tail.starts_with('?') || tail.starts_with('#') {
        return Err(bad());
    }
    // The endpoint's path is appended to the base, so a query or fragment in it would end up
    // before that path (found from outside: `…/v1?api-key=K` was called as
    // `…/v1?api-key=K/chat/completions`, and printed in the resume hint).
    if tail.contains(['?', '#']) {
        return Err(format!(
            "{provider}: base URL {} has a query or a fragment: the endpoint's path is appended \
             to the base URL, so it cannot carry either",
            crate::runtime::json::go_quote(&redacted_url(base))
        ));
    }
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((_, h)) => (true, h),
        None => (false, authority),
    };
    let (hostname, port) = if let Some(inner) = hostport.strip_prefix('[') {
        let (h, after) = inner.split_once(']').ok_or_else(bad)?;
        (h, after)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, &hostport[h.len()..][..p.len() + 1]),
            None => (hostport, ""),
        }
    };
    if !port.is_empty() {
        let digits = port.strip_prefix(':').ok_or_else(bad)?;
        if !digits.bytes().all(|b| b.is_ascii_digit())
            || digits.parse::<u16>().is_err() && !digits.is_empty()
        {
            return Err(bad());
        }
    }
    if hostname.is_empty()
        || hostname.bytes().any(|b| {
            b.is_ascii_whitespace()
                || b.is_ascii_control()
                || b == b'\\'
                || b == b'%' && !hostport.starts_with('[')
        })
    {
        return Err(bad());
    }
    Ok((
        Endpoint {
            scheme,
            authority: hostport.to_string(),
            hostname: hostname.to_string(),
            path: tail.trim_end_matches('/').to_string(),
        },
        userinfo,
    ))
}

/// agentrt's `CheckEndpoint`: an http(s) URL with a host, no user information, and a key goes
/// over plain http only to [`loopback`] hosts as written.
pub fn check_endpoint(provider: &str, base: &str, key_present: bool) -> Result<Endpoint, String> {
    let (ep, userinfo) = split_url(provider, base)?;
    if userinfo {
        return Err(format!(
            "{provider}: base URL for {} carries user information",
            ep.authority
        ));
    }
    if key_present && ep.scheme == "http" && !loopback(&ep.hostname) {
        return Err(format!(
            "{provider}: refusing to send an API key over plain http to {}",
            ep.authority
        ));
    }
    Ok(ep)
}

/// 408, 409, 425, 429 and every 5xx (Anthropic's 529 too).
pub fn transient_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 425 | 429) || status >= 500
}

/// A body for an error: trimmed, cut to 2048 bytes on a character boundary (`…` marks a cut).
pub fn excerpt(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(body);
    truncate(s.trim(), BODY_EXCERPT_BYTES)
}

/// `<provider>: <status>: <body>`.
pub fn status_error(provider: &str, status: u16, body: &str) -> String {
    format!("{provider}: {status}: {body}")
}

/// Classifies a non-2xx response (`location` for a 3xx, `retry_after` already parsed).
pub fn classify_response(
    provider: &str,
    status: u16,
    location: Option<&str>,
    retry_after: Duration,
    body: &[u8],
) -> Failure {
    if (300..400).contains(&status) {
        let why = match location {
            None => "redirects are not followed".to_string(),
            Some(l) => match location_host(l) {
                LocationHost::Unparsable => {
                    "redirects are not followed; the Location header does not parse".into()
                }
                LocationHost::Relative => {
                    "redirects are not followed; the response pointed elsewhere on the same host"
                        .into()
                }
                LocationHost::Host(h) => {
                    format!(
                        "redirects are not followed; the response pointed to host {}",
                        crate::runtime::json::go_quote(&h)
                    )
                }
            },
        };
        return Failure::Permanent(status_error(provider, status, &why));
    }
    let msg = status_error(provider, status, &excerpt(body));
    if transient_status(status) {
        Failure::Transient {
            message: msg,
            retry_after,
        }
    } else {
        Failure::Permanent(msg)
    }
}

enum LocationHost {
    Unparsable,
    Relative,
    Host(String),
}

/// Only the host (and port) of a redirect's target: its path and query are never repeated.
fn location_host(l: &str) -> LocationHost {
    let l = l.trim();
    if l.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return LocationHost::Unparsable;
    }
    let rest = if let Some(r) = l.strip_prefix("//") {
        r
    } else if let Some((scheme, r)) = l.split_once("://") {
        if scheme.is_empty()
            || !scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        {
            return LocationHost::Unparsable;
        }
        r
    } else {
        return LocationHost::Relative;
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let auth = &rest[..end];
    let host = auth.rsplit_once('@').map(|(_, h)| h).unwrap_or(auth);
    if host.is_empty() {
        LocationHost::Relative
    } else if !host_parses(host) {
        LocationHost::Unparsable
    } else {
        LocationHost::Host(host.to_string())
    }
}

/// Whether a URL's `host[:port]` is one Go's `url.Parse` reads: a bracketed IPv6 literal is
/// closed, a port is digits, and every `%` starts an escape of two hex digits.
fn host_parses(host: &str) -> bool {
    let port_ok = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    let escapes_ok = |h: &str| {
        let b = h.as_bytes();
        b.iter().enumerate().all(|(i, &c)| {
            c != b'%'
                || (b.len() > i + 2 && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit())
        })
    };
    if let Some(inner) = host.strip_prefix('[') {
        return match inner.split_once(']') {
            Some((_, "")) => true,
            Some((_, rest)) => rest.strip_prefix(':').is_some_and(port_ok),
            None => false,
        };
    }
    let (name, port) = host.rsplit_once(':').unwrap_or((host, ""));
    !name.contains(['[', ']']) && port_ok(port) && escapes_ok(name)
}

/// agentrt's `RetryAfter`: seconds or an HTTP date; absent, negative, past or over an hour
/// (or overflowing) is zero.
pub fn retry_after(value: Option<&str>, now: SystemTime) -> Duration {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Duration::ZERO;
    };
    let digits = v.strip_prefix(['+', '-']).unwrap_or(v);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if v.starts_with('-') {
            return Duration::ZERO;
        }
        return match digits.parse::<u64>() {
            Ok(s) if s <= RETRY_AFTER_CEILING.as_secs() => Duration::from_secs(s),
            _ => Duration::ZERO,
        };
    }
    match httpdate::parse_http_date(v) {
        Ok(at) => match at.duration_since(now) {
            Ok(d) if !d.is_zero() && d <= RETRY_AFTER_CEILING => d,
            _ => Duration::ZERO,
        },
        Err(_) => Duration::ZERO,
    }
}

/// The text agentrt's `ErrUnusableUsage` carries (its exact words were not readable; these
/// are ours).
pub const UNUSABLE_USAGE: &str = "unusable usage";

/// agentrt's `UsageCount`: empty or `null` is 0; otherwise a base-10 integer that fits i64,
/// ≥ 0, without a leading `+`.
pub fn usage_count(field: &str, raw: Option<&str>) -> Result<i64, String> {
    let t = raw.map(str::trim).unwrap_or("");
    if t.is_empty() || t == "null" {
        return Ok(0);
    }
    let ok = t.bytes().all(|b| b.is_ascii_digit());
    match t.parse::<i64>() {
        Ok(n) if ok && n >= 0 => Ok(n),
        _ => Err(format!(
            "{UNUSABLE_USAGE}: {field} is {}, not a count",
            cut_bytes(t, 64)
        )),
    }
}

/// agentrt's `CheckUsage`: no negative counts, no more cached than input tokens.
pub fn check_usage(u: &Usage) -> Result<(), String> {
    if u.input_tokens < 0 {
        return Err(format!("{UNUSABLE_USAGE}: input tokens {}", u.input_tokens));
    }
    if u.output_tokens < 0 {
        return Err(format!(
            "{UNUSABLE_USAGE}: output tokens {}",
            u.output_tokens
        ));
    }
    if u.cached_input_tokens < 0 {
        return Err(format!(
            "{UNUSABLE_USAGE}: cached input tokens {}",
            u.cached_input_tokens
        ));
    }
    if u.cached_input_tokens > u.input_tokens {
        return Err(format!(
            "{UNUSABLE_USAGE}: cached input tokens {} exceed input tokens {}",
            u.cached_input_tokens, u.input_tokens
        ));
    }
    Ok(())
}

/// At most `n` bytes of `s`, backed up to a character boundary, unmarked.
pub fn cut_bytes(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut i = n;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[..i]
}

/// agentrt's `providers.Truncate`: cut to at most `n` bytes on a character boundary, then `…`
/// (so the result may be `n + 3` bytes).
pub fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    format!("{}…", cut_bytes(s, n))
}

/// An id for a tool call that arrived without one (unique within a request).
pub fn synthesize_tool_use_id(i: usize) -> String {
    let ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("call_{ns}_{i}")
}

/// A price table: model name → price.
pub type PriceTable = HashMap<String, Price>;

/// `<name>: no price for this model`: an unknown name would be charged nothing, silently
/// defeating a budget.
pub fn price_for(table: &PriceTable, name: &str) -> Result<Price, String> {
    table
        .get(name)
        .copied()
        .ok_or_else(|| format!("{name}: no price for this model"))
}

/// Zero prices for these names ("free" is not "unpriced").
pub fn free<S: AsRef<str>>(names: &[S]) -> PriceTable {
    names
        .iter()
        .map(|n| (n.as_ref().to_string(), Price::default()))
        .collect()
}

/// The union; later tables win.
pub fn merge(tables: &[PriceTable]) -> PriceTable {
    let mut out = PriceTable::new();
    for t in tables {
        out.extend(t.iter().map(|(k, v)| (k.clone(), *v)));
    }
    out
}

/// Dollars to micros: `5`, `4.41`, `$0.50`, ` $2 `; negatives, NaN, infinities and amounts
/// of 2^63 micros or more are refused.
pub fn parse_dollars(s: &str) -> Result<i64, String> {
    let t = s.trim();
    let t = t.strip_prefix('$').unwrap_or(t).trim();
    let invalid = || format!("providers: invalid dollar amount {s:?}");
    if t.is_empty()
        || !t
            .bytes()
            .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
    {
        return Err(invalid());
    }
    let f: f64 = t.parse().map_err(|_| invalid())?;
    if !f.is_finite() || f < 0.0 || t.starts_with('-') {
        return Err(invalid());
    }
    let m = (f * 1e6 + 0.5).floor();
    if m >= 2f64.powi(63) {
        return Err(format!("providers: dollar amount {s:?} is too large"));
    }
    Ok(m as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_localhost_and_literal_loopback_addresses() {
        for h in [
            "localhost",
            "127.0.0.1",
            "127.9.8.7",
            "::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(loopback(h), "{h}");
        }
        for h in [
            "127.1",
            "2130706433",
            "0177.0.0.1",
            "0.0.0.0",
            "127.0.0.1.nip.io",
            "evil.example",
            "",
            "fe80::1%lo0",
            "LOCALHOST",
            "localhost.",
            "foo.localhost",
        ] {
            assert!(!loopback(h), "{h}");
        }
    }

    #[test]
    fn a_base_url_with_a_query_or_fragment_after_its_path_is_refused_unrepeated() {
        for base in [
            "http://127.0.0.1:18950/v1?api-key=AZURESECRET",
            "https://gw.example/openai/deployments/x?api-version=2024-01-01&key=AZURESECRET",
            "http://127.0.0.1/v1#AZURESECRET",
        ] {
            let e = check_endpoint("openai", base, true).unwrap_err();
            assert!(e.contains("has a query or a fragment"), "{e}");
            assert!(!e.contains("AZURESECRET"), "{e}");
        }
        assert!(check_endpoint("openai", "http://127.0.0.1:18950/v1", true).is_ok());
    }

    #[test]
    fn check_endpoint_key_over_plain_http_only_to_loopback() {
        for (base, key) in [
            ("https://api.example.com/", true),
            ("http://127.0.0.1:8080/v1", true),
            ("http://localhost/v1", true),
            ("http://[::1]/v1", true),
            ("http://gateway.example.net/", false),
        ] {
            assert!(check_endpoint("openai", base, key).is_ok(), "{base}");
        }
        assert_eq!(
            check_endpoint("openai", "http://gateway.example.net/", true).unwrap_err(),
            "openai: refusing to send an API key over plain http to gateway.example.net"
        );
        assert_eq!(
            check_endpoint("openai", "http://evil.example@127.0.0.1/v1", true).unwrap_err(),
            "openai: base URL for 127.0.0.1 carries user information"
        );
        for base in [
            "http://LOCALHOST/v1",
            "http://127.0.0.1.nip.io/v1",
            "HTTP://evil.example/v1",
            "http://127.1/v1",
            "http://0177.0.0.1/v1",
            "http://2130706433/v1",
        ] {
            assert!(
                check_endpoint("openai", base, true)
                    .unwrap_err()
                    .contains("refusing to send an API key over plain http"),
                "{base}"
            );
        }
        for base in ["ftp://127.0.0.1/", "https:///v1", "127.0.0.1:8080", ""] {
            assert_eq!(
                check_endpoint("openai", base, true).unwrap_err(),
                format!("openai: base URL {base:?} is not an http or https URL")
            );
        }
    }

    #[test]
    fn retry_after_seconds_or_date_within_an_hour() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert_eq!(retry_after(Some(" 7 "), now), Duration::from_secs(7));
        assert_eq!(retry_after(Some("3600"), now), Duration::from_secs(3600));
        for v in ["3601", "-5", "soon", "", "99999999999999999999999"] {
            assert_eq!(retry_after(Some(v), now), Duration::ZERO, "{v}");
        }
        let at = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(retry_after(Some(&at), now), Duration::from_secs(90));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(90));
        assert_eq!(retry_after(Some(&past), now), Duration::ZERO);
        let far = httpdate::fmt_http_date(now + Duration::from_secs(7200));
        assert_eq!(retry_after(Some(&far), now), Duration::ZERO);
    }

    #[test]
    fn usage_counts_and_checks() {
        for (raw, n) in [
            ("0", 0),
            ("17", 17),
            (" 9223372036854775807 ", i64::MAX),
            ("null", 0),
        ] {
            assert_eq!(usage_count("f", Some(raw)), Ok(n), "{raw}");
        }
        for raw in [
            "-1",
            "9223372036854775808",
            "1e3",
            "1.5",
            "\"12\"",
            "true",
            "{}",
            "+1",
        ] {
            assert!(usage_count("f", Some(raw)).is_err(), "{raw}");
        }
        let u = |i, o, c| Usage {
            input_tokens: i,
            output_tokens: o,
            cached_input_tokens: c,
        };
        assert!(check_usage(&u(5, 1, 5)).is_ok());
        assert_eq!(
            check_usage(&u(5, 1, 6)).unwrap_err(),
            "unusable usage: cached input tokens 6 exceed input tokens 5"
        );
    }

    #[test]
    fn dollars_and_truncation() {
        for (s, m) in [
            ("5", 5_000_000),
            ("4.41", 4_410_000),
            ("$0.50", 500_000),
            (" $2 ", 2_000_000),
            ("0", 0),
            ("0.000001", 1),
        ] {
            assert_eq!(parse_dollars(s), Ok(m), "{s}");
        }
        for s in [
            "",
            "-1",
            "$-0.5",
            "free",
            "1,50",
            "NaN",
            "Inf",
            "1e13",
            "9223372036854.775807",
            "1e300",
        ] {
            assert!(parse_dollars(s).is_err(), "{s}");
        }
        assert_eq!(truncate("héllo", 2), "h…");
        assert_eq!(excerpt(&[b'x'; 5000]).len(), 2048 + 3);
    }

    #[test]
    fn redirect_errors_name_only_the_host() {
        let f = classify_response(
            "openai",
            307,
            Some("http://127.0.0.1:9/steal?key=sk-1"),
            Duration::ZERO,
            b"",
        );
        assert_eq!(
            f,
            Failure::Permanent(
                "openai: 307: redirects are not followed; the response pointed to host \"127.0.0.1:9\"".into()
            )
        );
        // What Go's url.Parse refuses is said so, never named as a host.
        for l in [
            "http://[bad",
            "http://%zz/",
            "http://h:abc/",
            "http://[::1]x/",
        ] {
            let f = classify_response("openai", 302, Some(l), Duration::ZERO, b"");
            assert!(
                f.to_string()
                    .ends_with("the Location header does not parse"),
                "{l}: {f}"
            );
        }
        for (l, host) in [("http://[::1]:8/", "[::1]:8"), ("http://a%41b/", "a%41b")] {
            let f = classify_response("openai", 302, Some(l), Duration::ZERO, b"");
            assert!(
                f.to_string().ends_with(&format!("host \"{host}\"")),
                "{l}: {f}"
            );
        }
        let f = classify_response("openai", 302, Some("/elsewhere?x"), Duration::ZERO, b"");
        assert!(
            f.to_string()
                .ends_with("pointed elsewhere on the same host")
        );
        assert!(matches!(
            classify_response("anthropic", 529, None, Duration::from_secs(3), b" overloaded "),
            Failure::Transient { ref message, retry_after } if message == "anthropic: 529: overloaded" && retry_after == Duration::from_secs(3)
        ));
    }
}

/// Reads a 2xx reply as Go's decoder reads it (one stray escaped surrogate is one U+FFFD, not
/// an undecodable reply) with `read`; the response keeps the bytes as received.
pub fn read_as_go(
    body: &[u8],
    read: impl FnOnce(&[u8]) -> Result<ChatResponse, Failure>,
) -> Result<ChatResponse, Failure> {
    let mut reply = read(&lone_surrogates_as_fffd(body))?;
    reply.raw = body.to_vec();
    Ok(reply)
}

pub use crate::runtime::json::lone_surrogates_as_fffd;

#[cfg(test)]
mod surrogate_tests {
    use super::lone_surrogates_as_fffd as f;

    #[test]
    fn lone_surrogates_become_fffd_and_nothing_else_changes() {
        let cases: [(&[u8], &[u8]); 7] = [
            (br#"{"t":"a \ud83d b"}"#, br#"{"t":"a \ufffd b"}"#),
            (br#"{"t":"\udc00"}"#, br#"{"t":"\ufffd"}"#),
            (br#"{"t":"\ud83d\ude00"}"#, br#"{"t":"\ud83d\ude00"}"#),
            (br#"{"t":"\\ud83d"}"#, br#"{"t":"\\ud83d"}"#),
            (br#"{"t":"\ud83d\u0041"}"#, br#"{"t":"\ufffd\u0041"}"#),
            (br#"{"t":"x\"\ud800"}"#, br#"{"t":"x\"\ufffd"}"#),
            (br#"{"\ud800":1}"#, br#"{"\ufffd":1}"#),
        ];
        for (input, want) in cases {
            assert_eq!(
                f(input).as_ref(),
                want,
                "{}",
                String::from_utf8_lossy(input)
            );
        }
        assert!(matches!(f(br#"{"a":"b"}"#), std::borrow::Cow::Borrowed(_)));
        // What serde then reads: one U+FFFD.
        let v: serde_json::Value = serde_json::from_slice(&f(br#"{"t":"a\ud83db"}"#)).unwrap();
        assert_eq!(v["t"], "a\u{fffd}b");
    }
}
