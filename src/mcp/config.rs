//! The proxy's configuration in agentrt's format (agentrt mcp 2.2): same keys, same defaults,
//! same refusals, so one file serves either proxy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::duration;
use super::owned::read_owned;
use crate::runtime::store::is_pg_url;

/// What a policy may say about a class or a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Allow,
    RequireApproval,
    Deny,
}

impl Outcome {
    pub fn parse(s: &str) -> Option<Outcome> {
        match s {
            "allow" => Some(Outcome::Allow),
            "require_approval" => Some(Outcome::RequireApproval),
            "deny" => Some(Outcome::Deny),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allow => "allow",
            Outcome::RequireApproval => "require_approval",
            Outcome::Deny => "deny",
        }
    }
}

/// The four side-effect classes and their default outcomes (the runtime's default policy).
pub const CLASSES: [(&str, Outcome); 4] = [
    ("read_only", Outcome::Allow),
    ("local_mutation", Outcome::Allow),
    ("remote_mutation", Outcome::RequireApproval),
    ("destructive", Outcome::Deny),
];

/// An operator's rule for one upstream tool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rule {
    pub side_effect: String,
    pub timeout: Option<Duration>,
    pub terminal: bool,
    pub description: Option<String>,
    pub deny: Vec<String>,
    /// Parameter name to its value as raw JSON bytes.
    pub fixed: BTreeMap<String, Vec<u8>>,
    pub rename: Option<String>,
    pub allow_hint_mismatch: bool,
    pub outcome: Option<Outcome>,
    pub repeat_window: Option<Duration>,
}

/// One upstream server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    /// The stdio argv (empty for an HTTP server).
    pub command: Vec<String>,
    pub endpoint: Option<String>,
    pub env: Vec<String>,
    pub inherit_env: Vec<String>,
    pub connect_timeout: Duration,
    pub default_timeout: Option<Duration>,
    /// Resolved against the configuration's directory.
    pub manifest: PathBuf,
    pub rules: BTreeMap<String, Rule>,
    pub skip_path_check: bool,
}

/// The run database a proxy works on: a SQLite file (relative paths resolved against the
/// configuration's directory) or, with the `postgres` feature, a PostgreSQL database named by
/// a `postgres://` URL (decision 0085).
#[derive(Debug, Clone)]
pub enum Database {
    File(PathBuf),
    #[cfg(feature = "postgres")]
    Postgres(crate::pgstore::PgUrl),
}

impl PartialEq for Database {
    fn eq(&self, other: &Database) -> bool {
        match (self, other) {
            (Database::File(a), Database::File(b)) => a == b,
            #[cfg(feature = "postgres")]
            (Database::Postgres(a), Database::Postgres(b)) => a.redacted() == b.redacted(),
            #[cfg(feature = "postgres")]
            _ => false,
        }
    }
}

impl Database {
    /// The SQLite file, when it is one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Database::File(p) => Some(p),
            #[cfg(feature = "postgres")]
            Database::Postgres(_) => None,
        }
    }

    /// What names it to the commands' `--db`: the path, or the URL without its password
    /// (never printed, not even redacted: a person deciding supplies theirs the way every
    /// command takes one, `PGPASSWORD` or the password file, which a password in the URL
    /// would override).
    pub fn db_arg(&self) -> PathBuf {
        match self {
            Database::File(p) => p.clone(),
            #[cfg(feature = "postgres")]
            Database::Postgres(u) => PathBuf::from(u.for_commands()),
        }
    }

    /// [`check_database`](super::owned::check_database) on a SQLite file; a PostgreSQL
    /// database is no file of this machine's, so nothing is checked for it here (decision
    /// 0085).
    pub fn check_file(&self) -> Result<(), String> {
        match self.file() {
            Some(path) => super::owned::check_database(path),
            None => Ok(()),
        }
    }

    /// How an operator line names it (not yet escaped): the path, or the redacted URL.
    pub fn shown(&self) -> String {
        self.db_arg().display().to_string()
    }
}

/// The whole configuration, validated, with defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyConfig {
    /// The file it was read from.
    pub path: PathBuf,
    pub database: Database,
    pub session: String,
    pub servers: Vec<ServerConfig>,
    /// Every class with its outcome (defaults merged with what the file says).
    pub policy: BTreeMap<String, Outcome>,
    pub hold: Duration,
    pub repeat_window: Duration,
    pub max_pending: usize,
    pub approval_ttl: Duration,
    pub grant_ttl: Duration,
    pub status_tool: String,
    /// `None`: the runtime's default lease.
    pub lease_ttl: Option<Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    database: Option<String>,
    session: Option<String>,
    servers: Option<Vec<FileServer>>,
    policy: Option<BTreeMap<String, String>>,
    hold: Option<Box<RawValue>>,
    repeat_window: Option<Box<RawValue>>,
    max_pending: Option<i64>,
    approval_ttl: Option<Box<RawValue>>,
    grant_ttl: Option<Box<RawValue>>,
    status_tool: Option<String>,
    lease_ttl: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileServer {
    name: Option<String>,
    command: Option<Vec<String>>,
    endpoint: Option<String>,
    env: Option<Vec<String>>,
    inherit_env: Option<Vec<String>>,
    connect_timeout: Option<Box<RawValue>>,
    default_timeout: Option<Box<RawValue>>,
    manifest: Option<String>,
    rules: Option<BTreeMap<String, FileRule>>,
    skip_path_check: Option<bool>,
}

/// A rule as written (agentrt's `FileRule` plus the proxy's `outcome` and `repeat_window`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRule {
    side_effect: Option<String>,
    timeout: Option<Box<RawValue>>,
    terminal: Option<bool>,
    description: Option<String>,
    deny: Option<Vec<String>>,
    fixed: Option<BTreeMap<String, Box<RawValue>>>,
    rename: Option<String>,
    allow_hint_mismatch: Option<bool>,
    outcome: Option<String>,
    repeat_window: Option<Box<RawValue>>,
}

/// Reads and validates a configuration file. Errors are one line: `config: <file error>` or
/// `config <path>: <what is wrong>`.
pub fn read(path: &Path) -> Result<ProxyConfig, String> {
    let bytes = read_owned(path).map_err(|e| format!("config: {e}"))?;
    parse(path, &bytes).map_err(|e| format!("config {}: {e}", path.display()))
}

/// Parses configuration bytes as if read from `path` (relative paths resolve against its
/// directory).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<ProxyConfig, String> {
    crate::runtime::json::check_json(bytes).map_err(|e| format!("not usable JSON: {e}"))?;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let file = FileConfig::deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end()
        .map_err(|_| "trailing data after the configuration".to_string())?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let resolve = |p: &str| {
        let p = PathBuf::from(p);
        if p.is_absolute() { p } else { dir.join(p) }
    };

    let database = match file.database.as_deref() {
        #[cfg(feature = "postgres")]
        Some(d) if is_pg_url(d) => Database::Postgres(
            crate::pgstore::PgUrl::parse(d).map_err(|e| format!("database: {e}"))?,
        ),
        // Read as a path it would name a file under a directory `postgres:`: say what it is.
        #[cfg(not(feature = "postgres"))]
        Some(d) if is_pg_url(d) => {
            return Err(
                "database: this build has no PostgreSQL (feature `postgres`); name a SQLite file"
                    .into(),
            );
        }
        Some(d) if let Some(why) = crate::runtime::store::not_a_path(d) => {
            return Err(format!("database: {why}"));
        }
        Some(d) if !d.is_empty() => Database::File(resolve(d)),
        _ => return Err("database is required".into()),
    };
    let session = file.session.unwrap_or_default();
    if !is_name(&session, 64) {
        return Err(format!(
            "session {} must be 1 to 64 letters, digits, '_' or '-'",
            super::quote(&session)
        ));
    }
    let mut policy: BTreeMap<String, Outcome> =
        CLASSES.iter().map(|(c, o)| (c.to_string(), *o)).collect();
    for (class, outcome) in file.policy.unwrap_or_default() {
        if !CLASSES.iter().any(|(c, _)| *c == class) {
            return Err(format!(
                "policy: unknown side effect {}",
                super::quote(&class)
            ));
        }
        let o = Outcome::parse(&outcome).ok_or_else(|| {
            format!(
                "policy: {class}: outcome {} is not allow, require_approval, or deny",
                super::quote(&outcome)
            )
        })?;
        policy.insert(class, o);
    }
    let hold = dur(file.hold.as_deref(), "hold")?.unwrap_or(Duration::from_secs(15));
    let repeat_window =
        dur(file.repeat_window.as_deref(), "repeat_window")?.unwrap_or(Duration::from_secs(600));
    let max_pending = match file.max_pending {
        None | Some(0) => 5,
        Some(n) if n < 0 => return Err("max_pending must not be negative".into()),
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let day = Duration::from_secs(86_400);
    let approval_ttl = dur(file.approval_ttl.as_deref(), "approval_ttl")?.unwrap_or(day);
    let grant_ttl = dur(file.grant_ttl.as_deref(), "grant_ttl")?.unwrap_or(day);
    let status_tool = file.status_tool.unwrap_or_else(|| "gate_status".into());
    if !is_name(&status_tool, 64) {
        return Err(format!(
            "status_tool {} does not match ^[a-zA-Z0-9_-]{{1,64}}$",
            super::quote(&status_tool)
        ));
    }
    let lease_ttl = dur(file.lease_ttl.as_deref(), "lease_ttl")?;
    if let Some(l) = lease_ttl
        && l < Duration::from_secs(3)
    {
        return Err(format!(
            "lease_ttl {} is shorter than 3s",
            duration::format(l)
        ));
    }

    let file_servers = file.servers.unwrap_or_default();
    if file_servers.is_empty() {
        return Err("at least one server is required".into());
    }
    let mut servers: Vec<ServerConfig> = Vec::with_capacity(file_servers.len());
    for (i, s) in file_servers.into_iter().enumerate() {
        let name = match s.name {
            Some(n) if !n.is_empty() => n,
            _ => return Err(format!("servers[{i}]: name is required")),
        };
        if servers.iter().any(|o| o.name == name) {
            return Err(format!(
                "servers[{i}]: the name {} is used twice",
                super::quote(&name)
            ));
        }
        let q = super::quote(&name);
        let command = s.command.unwrap_or_default();
        let endpoint = s.endpoint.filter(|e| !e.is_empty());
        if command.is_empty() == endpoint.is_none() {
            return Err(format!(
                "server {q}: exactly one of command or endpoint is required"
            ));
        }
        let manifest = match s.manifest.as_deref() {
            Some(m) if !m.is_empty() => resolve(m),
            _ => return Err(format!("server {q}: manifest is required")),
        };
        let env = s.env.unwrap_or_default();
        let inherit_env = s.inherit_env.unwrap_or_default();
        for e in &inherit_env {
            if e.is_empty() || e.contains('=') {
                return Err(format!(
                    "server {q}: inherit_env entry {} is not a variable name",
                    super::quote(e)
                ));
            }
        }
        for e in &env {
            if e.split_once('=').is_none_or(|(n, _)| n.is_empty()) {
                return Err(format!(
                    "server {q}: env entry {} is not NAME=value",
                    super::quote(e)
                ));
            }
        }
        let connect_timeout = dur(s.connect_timeout.as_deref(), "connect_timeout")
            .map_err(|e| format!("server {q}: {e}"))?
            .filter(|d| !d.is_zero())
            .unwrap_or(super::DEFAULT_CONNECT_TIMEOUT);
        let default_timeout = dur(s.default_timeout.as_deref(), "default_timeout")
            .map_err(|e| format!("server {q}: {e}"))?
            .filter(|d| !d.is_zero());
        let mut rules = BTreeMap::new();
        for (tool, r) in s.rules.unwrap_or_default() {
            let at = format!("server {q}: tool {}", super::quote(&tool));
            rules.insert(tool, rule(r).map_err(|e| format!("{at}: {e}"))?);
        }
        servers.push(ServerConfig {
            name,
            command,
            endpoint,
            env,
            inherit_env,
            connect_timeout,
            default_timeout,
            manifest,
            rules,
            skip_path_check: s.skip_path_check.unwrap_or(false),
        });
    }
    Ok(ProxyConfig {
        path: path.to_path_buf(),
        database,
        session,
        servers,
        policy,
        hold,
        repeat_window,
        max_pending,
        approval_ttl,
        grant_ttl,
        status_tool,
        lease_ttl,
    })
}

fn rule(r: FileRule) -> Result<Rule, String> {
    let outcome = match r.outcome {
        None => None,
        Some(o) => Some(Outcome::parse(&o).ok_or_else(|| {
            format!(
                "outcome {} is not allow, require_approval, or deny",
                super::quote(&o)
            )
        })?),
    };
    let timeout = dur(r.timeout.as_deref(), "timeout")?.filter(|d| !d.is_zero());
    Ok(Rule {
        side_effect: r.side_effect.unwrap_or_default(),
        timeout,
        terminal: r.terminal.unwrap_or(false),
        description: r.description,
        deny: r.deny.unwrap_or_default(),
        fixed: r
            .fixed
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.get().as_bytes().to_vec()))
            .collect(),
        rename: r.rename.filter(|n| !n.is_empty()),
        allow_hint_mismatch: r.allow_hint_mismatch.unwrap_or(false),
        outcome,
        repeat_window: dur(r.repeat_window.as_deref(), "repeat_window")?,
    })
}

/// A duration written as a Go duration string.
fn dur(raw: Option<&RawValue>, key: &str) -> Result<Option<Duration>, String> {
    let Some(raw) = raw else { return Ok(None) };
    let s: String = serde_json::from_str(raw.get())
        .map_err(|e| format!("{key}: a duration is a string such as \"15s\": {e}"))?;
    duration::parse(&s)
        .map(Some)
        .map_err(|e| format!("{key}: {e}"))
}

/// `^[a-zA-Z0-9_-]{1,max}$`.
pub fn is_name(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
