//! A PostgreSQL URL as the operator gives it (`postgres://` or `postgresql://`), and the one
//! redacted form every line, error and `--json` uses to name the database. The password never
//! leaves this module except into the client's connection settings.

use std::fmt;

use super::error::PgError;
use super::passfile;

/// What replaces a password wherever the URL is shown.
pub const REDACTED: &str = "***";

pub use crate::runtime::store::is_pg_url;

/// `sslmode`, as libpq names it. `verify-ca` is refused (see `docs/postgres.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it, else plain (libpq's default). Not verified.
    Prefer,
    /// TLS or no connection; the certificate is not verified (libpq's `require`).
    Require,
    /// TLS, the chain verified against `sslrootcert` and the host name checked.
    VerifyFull,
}

/// A parsed URL: the text for the client (without the options this module handles) and the
/// redacted text for people.
#[derive(Clone)]
pub struct PgUrl {
    /// The URL handed to the client, minus `sslmode`, `sslrootcert` and any password.
    client: String,
    redacted: String,
    /// The URL printed in a command for a person to run: no password at all.
    command: String,
    password: Option<String>,
    user: Option<String>,
    /// Hosts and ports as written (for the password file).
    host: String,
    port: String,
    dbname: String,
    ssl: SslMode,
    root_cert: Option<String>,
}

impl fmt::Display for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted)
    }
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgUrl({})", self.redacted)
    }
}

/// Percent-decodes `s` (a malformed escape is kept as written).
pub(crate) fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The parts of the authority: user info (user, password) and the host list.
struct Authority<'a> {
    user: Option<&'a str>,
    password: Option<&'a str>,
    hosts: &'a str,
}

/// The query options whose values may be shown; any other option's value is shown as
/// [`REDACTED`] (a password given under another spelling, or an option this build does not
/// know, is never printed).
const SHOWN_OPTIONS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "user",
    "dbname",
    "sslmode",
    "sslnegotiation",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "application_name",
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "tcp_user_timeout",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
    "options",
];

/// Why a URL with a '#' after its host is refused.
const FRAGMENT: &str = "the URL has a '#' after its host: a PostgreSQL URL has no fragment, and a \
     '#' in a database name or an option's value must be percent-encoded (%23); the URL is not \
     shown, in case what follows the '#' is a secret";

/// Why a URL whose user info the client could read otherwise than this module is refused.
const AMBIGUOUS: &str = "the URL is ambiguous: a '/', '?', '#' or '@' in the user name or password \
     must be percent-encoded (%2F, %3F, %23, %40), and any '@' after the host likewise (%40)";

const NOT_A_PORT: &str = "what follows ':' in the host is not a port number, and the URL has no \
     '@': a password goes between the user name and '@' (postgres://user:password@host/db); \
     the URL is not shown, in case that was one";

/// Splits what follows `://` into the user info and the rest. The user info ends at the
/// first '@' of the whole text, as the client (`tokio-postgres`) reads it; so that both read
/// one URL alike, a user info holding '/', '?' or '#', or any '@' after the first (a password
/// with an unencoded '@'), is refused rather than read one way here and another there.
fn split_authority(after: &str) -> Result<(Authority<'_>, &str), PgError> {
    let (info, rest) = match after.find('@') {
        Some(at) => (Some(&after[..at]), &after[at + 1..]),
        None => (None, after),
    };
    let host_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (hosts, rest) = rest.split_at(host_end);
    // Any '@' after the first: in the host list, the path, the query or the fragment. A
    // password `P@ss/w@host` would otherwise be read as password `P` on host `ss`, its tail
    // shown as a database name and sent to DNS as a host name.
    if info.is_some_and(|i| i.contains(['/', '?', '#']))
        || hosts.contains('@')
        || rest.contains('@')
    {
        return Err(PgError::Url(AMBIGUOUS.into()));
    }
    // With no '@', a ':' in the host list followed by what is not a port number is most
    // likely `user:password` without its host; the client would print it in its error.
    if info.is_none()
        && hosts.split(',').any(|h| {
            let port = if h.starts_with('[') {
                h.find(']').map_or("", |e| &h[e + 1..])
            } else {
                h
            };
            port.rfind(':')
                .is_some_and(|c| !port[c + 1..].bytes().all(|b| b.is_ascii_digit()))
        })
    {
        return Err(PgError::Url(NOT_A_PORT.into()));
    }
    let (user, password) = match info {
        Some(info) => match info.split_once(':') {
            Some((u, p)) => (Some(u), Some(p)),
            None => (Some(info), None),
        },
        None => (None, None),
    };
    let auth = Authority {
        user: user.filter(|u| !u.is_empty()),
        password,
        hosts,
    };
    Ok((auth, rest))
}

impl PgUrl {
    /// Parses `s`. Anything that is not `postgres://` or `postgresql://` is an error, as is an
    /// `sslmode` this build does not implement.
    pub fn parse(s: &str) -> Result<PgUrl, PgError> {
        if !is_pg_url(s) {
            return Err(PgError::Url(
                "not a PostgreSQL URL (postgres://... or postgresql://...)".into(),
            ));
        }
        let after = &s[s.find("://").map(|i| i + 3).unwrap_or(0)..];
        let scheme = &s[..s.len() - after.len()];
        let (a, rest) = split_authority(after)?;
        // The client reads a '#' as part of the database name or an option's value; a person
        // may have meant a fragment, or typed a secret after it. Refused, the URL not shown.
        if rest.contains('#') {
            return Err(PgError::Url(FRAGMENT.into()));
        }
        let (path, query) = match rest.find('?') {
            Some(q) => (&rest[..q], Some(&rest[q + 1..])),
            None => (rest, None),
        };
        let mut url = PgUrl {
            client: String::new(),
            redacted: String::new(),
            command: String::new(),
            password: a.password.map(decode).filter(|p| !p.is_empty()),
            user: a.user.map(decode),
            host: decode(a.hosts),
            port: String::new(),
            dbname: decode(path.trim_start_matches('/')),
            ssl: SslMode::Prefer,
            root_cert: None,
        };
        let shown_auth = match (a.user, a.password) {
            (Some(u), Some(_)) => format!("{u}:{REDACTED}@{}", a.hosts),
            (Some(u), None) => format!("{u}@{}", a.hosts),
            (None, Some(_)) => format!(":{REDACTED}@{}", a.hosts),
            (None, None) => a.hosts.to_string(),
        };
        let client_auth = match a.user {
            Some(u) => format!("{u}@{}", a.hosts),
            None => a.hosts.to_string(),
        };
        let (client_q, shown_q) = url.take_options(query)?;
        url.split_port();
        // The client takes the scheme in lower case only (`POSTGRES://` it reads as a
        // `key=value` string); this module takes it in any case.
        url.client = join(&scheme.to_ascii_lowercase(), &client_auth, path, &client_q);
        url.redacted = join(scheme, &shown_auth, path, &shown_q);
        let command_q: Vec<String> = shown_q
            .into_iter()
            .filter(|p| !p.ends_with(&format!("={REDACTED}")))
            .collect();
        url.command = join(scheme, &client_auth, path, &command_q);
        // What the client will refuse (an unknown option, a port out of range), refused now,
        // as a usage error that says which part.
        url.client
            .parse::<postgres::Config>()
            .map_err(|e| PgError::Url(format!("{}: {}", url.redacted, super::error::detail(&e))))?;
        Ok(url)
    }

    /// Takes `sslmode`, `sslrootcert`, `password`, `user`, `host`, `port` and `dbname` from
    /// the query; returns the query for the client and the one shown.
    fn take_options(&mut self, query: Option<&str>) -> Result<(Vec<String>, Vec<String>), PgError> {
        let (mut client, mut shown) = (Vec::new(), Vec::new());
        let mut ssl_given = false;
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let Some((raw_key, v)) = pair.split_once('=') else {
                // The client's "unterminated parameter" names nothing; a word without `=`
                // may be a secret typed in the wrong place, so it is named only if harmless.
                let named = if SHOWN_OPTIONS.contains(&decode(pair).as_str()) {
                    format!("the option `{pair}`")
                } else {
                    "an option".to_string()
                };
                return Err(PgError::Url(format!(
                    "the URL's query has {named} with no `=value`: write key=value pairs joined by `&`"
                )));
            };
            // The client decodes keys too: `pass%77ord` is `password`.
            let k = decode(raw_key);
            match k.as_str() {
                "sslmode" => {
                    if std::mem::replace(&mut ssl_given, true) {
                        return Err(PgError::Url(
                            "sslmode is given twice in the URL: give it once".into(),
                        ));
                    }
                    self.ssl = parse_sslmode(&decode(v))?;
                    shown.push(pair.to_string());
                    continue;
                }
                "sslrootcert" => {
                    self.root_cert = Some(decode(v));
                    shown.push(pair.to_string());
                    continue;
                }
                "password" => {
                    self.password = Some(decode(v)).filter(|p| !p.is_empty());
                    shown.push(format!("password={REDACTED}"));
                    continue;
                }
                "user" => self.user = Some(decode(v)),
                "host" => self.host = decode(v),
                "port" => self.port = decode(v),
                "dbname" => self.dbname = decode(v),
                _ => {}
            }
            client.push(pair.to_string());
            // `options=-c password=…` or any other value that names a password is hidden too.
            let names_a_password = decode(v).to_ascii_lowercase().contains("password");
            if SHOWN_OPTIONS.contains(&k.as_str()) && !names_a_password {
                shown.push(pair.to_string());
            } else {
                shown.push(format!("{raw_key}={REDACTED}"));
            }
        }
        // As libpq: the environment's TLS settings where the URL gives none.
        if !ssl_given && let Some(mode) = env_var("PGSSLMODE") {
            self.ssl = parse_sslmode(&mode).map_err(|e| PgError::Url(format!("PGSSLMODE: {e}")))?;
        }
        if self.root_cert.is_none() {
            self.root_cert = env_var("PGSSLROOTCERT");
        }
        if self.ssl == SslMode::VerifyFull && self.root_cert.is_none() && !self.sockets_only() {
            return Err(PgError::Url(
                "sslmode=verify-full needs sslrootcert=PATH (the CA certificate, PEM) in the URL or PGSSLROOTCERT"
                    .into(),
            ));
        }
        Ok((client, shown))
    }

    /// Splits a `host:port` written in the authority (one host; a list keeps its text).
    fn split_port(&mut self) {
        if !self.port.is_empty() || self.host.contains(',') || self.host.starts_with('/') {
            return;
        }
        // `[::1]:5432` or `db.example:5432`; a bare IPv6 address has no port here.
        let bracketed = self.host.starts_with('[');
        if let Some((h, p)) = self.host.rsplit_once(':')
            && !h.is_empty()
            && (!bracketed || h.ends_with(']'))
            && (bracketed || !h.contains(':'))
            && !p.is_empty()
            && p.bytes().all(|b| b.is_ascii_digit())
        {
            let (h, p) = (h.to_string(), p.to_string());
            self.host = h;
            self.port = p;
        }
    }

    /// The redacted URL (what `Display` writes).
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// The URL as a printed command names the database (`decide with: countersign --db …`):
    /// without any password or option whose value is not shown, so that the person who runs
    /// it gives their own password through `PGPASSWORD` or the password file (a password in
    /// the URL, even a redacted one, would take precedence over both and fail).
    pub fn for_commands(&self) -> &str {
        &self.command
    }

    /// The TLS mode that applies: the one asked for, but `Disable` when every host is a Unix
    /// socket (as libpq, a socket never uses TLS, so a `PGSSLMODE=verify-full` set for remote
    /// servers neither needs a CA nor breaks a local connection).
    pub fn ssl_mode(&self) -> SslMode {
        if self.sockets_only() {
            SslMode::Disable
        } else {
            self.ssl
        }
    }

    /// The hosts a connection tries, as libpq: the URL's, else `PGHOST`, else the default
    /// socket directory.
    fn hosts(&self) -> String {
        if self.host.is_empty() {
            env_var("PGHOST").unwrap_or_else(|| "/var/run/postgresql".into())
        } else {
            self.host.clone()
        }
    }

    /// Whether every host tried is a Unix-socket directory.
    fn sockets_only(&self) -> bool {
        self.hosts().split(',').all(|h| h.starts_with('/'))
    }

    /// The CA file for `verify-full`.
    pub fn root_cert(&self) -> Option<&str> {
        self.root_cert.as_deref()
    }

    /// The client's settings: the URL's, the password from the URL, else `PGPASSWORD`, else
    /// the password file (`PGPASSFILE`, else `~/.pgpass`).
    pub fn config(&self) -> Result<postgres::Config, PgError> {
        let mut cfg: postgres::Config = self.client.parse().map_err(|e: postgres::Error| {
            PgError::Url(format!("{}: {}", self.redacted, super::error::detail(&e)))
        })?;
        // As libpq: a URL naming no host or port takes them from PGHOST and PGPORT, else the
        // default socket directory.
        if cfg.get_hosts().is_empty() {
            for h in self.hosts().split(',') {
                cfg.host(h);
            }
        }
        if cfg.get_ports().is_empty()
            && let Some(port) = env_var("PGPORT").and_then(|p| p.parse::<u16>().ok())
        {
            cfg.port(port);
        }
        // A connection over Unix-domain sockets only ignores sslmode (`ssl_mode`).
        cfg.ssl_mode(match self.ssl_mode() {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyFull => postgres::config::SslMode::Require,
        });
        let user = cfg
            .get_user()
            .map(str::to_string)
            .or_else(|| self.user.clone())
            .or_else(|| std::env::var("PGUSER").ok())
            .or_else(default_user);
        if let Some(u) = &user {
            cfg.user(u);
        }
        if let Some(p) = self.password() {
            cfg.password(p);
        } else if let Some(p) = passfile::lookup(
            &self.host,
            &self.port,
            &self.dbname,
            user.as_deref().unwrap_or(""),
        ) {
            cfg.password(p);
        }
        Ok(cfg)
    }

    fn password(&self) -> Option<String> {
        self.password
            .clone()
            .or_else(|| std::env::var("PGPASSWORD").ok().filter(|p| !p.is_empty()))
    }
}

/// An environment variable that is set and not empty.
fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The account name, as libpq defaults the user.
fn default_user() -> Option<String> {
    env_var("USER")
}

fn join(scheme: &str, auth: &str, path: &str, query: &[String]) -> String {
    let mut s = format!("{scheme}{auth}{path}");
    if !query.is_empty() {
        s.push('?');
        s.push_str(&query.join("&"));
    }
    s
}

fn parse_sslmode(v: &str) -> Result<SslMode, PgError> {
    match v {
        "disable" => Ok(SslMode::Disable),
        "allow" | "prefer" => Ok(SslMode::Prefer),
        "require" => Ok(SslMode::Require),
        "verify-full" => Ok(SslMode::VerifyFull),
        "verify-ca" => Err(PgError::Url(
            "sslmode=verify-ca is not supported: use verify-full (chain and host name checked)"
                .into(),
        )),
        other => Err(PgError::Url(format!(
            "sslmode={} is not one of disable, prefer, require, verify-full",
            crate::safetext::plain_line(other.as_bytes(), 40)
        ))),
    }
}
