//! Pin and load (agentrt mcp 1.5, 1.7, 1.9): connect under one deadline, read every page of
//! `tools/list` from the raw bytes, then either record a pin or check each pinned tool against
//! its rule and report what is offered, refused, unclassified and unpinned.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::canonical::{canonical_schema, description_hash, json_string, schema_hash};
use super::client::{CallError, Connection, ServerSpec};
use super::config::{Rule, ServerConfig};
use super::manifest::{Annotations, Manifest, PinnedTool};
use super::rules::{Built, LiveTool, build};
use super::{MAX_TOOL_PAGES, MAX_TOOLS, sanitize};

impl From<&ServerConfig> for ServerSpec {
    fn from(s: &ServerConfig) -> ServerSpec {
        ServerSpec {
            name: s.name.clone(),
            command: s.command.clone(),
            env: s.env.clone(),
            inherit_env: s.inherit_env.clone(),
            connect_timeout: s.connect_timeout,
        }
    }
}

/// A connection and the tools it listed while connecting.
pub struct Listed {
    pub conn: Connection,
    pub tools: Vec<LiveTool>,
    /// Entries without a string `name`, skipped as agentrt's SDK skips them.
    pub nameless: usize,
}

/// Starts a server, initializes and reads the whole listing under one deadline. Errors carry
/// the step, and for a stdio server the tail of its stderr; the connection is closed first.
pub fn connect(spec: &ServerSpec, endpoint: Option<&str>) -> Result<Listed, String> {
    let q = super::quote(&spec.name);
    let bound = if spec.connect_timeout.is_zero() {
        super::DEFAULT_CONNECT_TIMEOUT
    } else {
        spec.connect_timeout
    };
    let deadline = Instant::now() + bound;
    let conn = match endpoint {
        Some(url) => Connection::endpoint(spec, url),
        None => Connection::spawn(spec),
    }
    .map_err(|e| format!("mcp: server {q}: connect: {e}"))?;
    let phase = |conn: &Connection, step: &str, e: CallError| {
        let why = match e {
            CallError::TimedOut(_) => {
                format!("timed out after {}", super::duration::format(bound))
            }
            other => other.to_string(),
        };
        conn.close();
        format!("mcp: server {q}: {step}: {why}{}", conn.stderr_suffix())
    };
    if let Err(e) = conn.initialize(deadline) {
        return Err(phase(&conn, "connect", e));
    }
    match list_tools(&conn, deadline) {
        Ok((tools, nameless)) => Ok(Listed {
            conn,
            tools,
            nameless,
        }),
        Err(e) => Err(phase(&conn, "list tools", e)),
    }
}

#[derive(Deserialize)]
struct Page {
    tools: Option<Vec<Box<RawValue>>>,
    #[serde(rename = "nextCursor")]
    next_cursor: Option<String>,
}

/// Every page of `tools/list`, bounded (100 pages, 1000 tools, no repeating cursor, no name
/// twice), each tool's schema canonicalised from the raw bytes; with the number of entries
/// skipped for having no string name.
pub fn list_tools(
    conn: &Connection,
    deadline: Instant,
) -> Result<(Vec<LiveTool>, usize), CallError> {
    let p = CallError::Protocol;
    let mut out: Vec<LiveTool> = Vec::new();
    let mut nameless = 0;
    let mut names: HashSet<String> = HashSet::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut cursor = String::new();
    for page_no in 0.. {
        if page_no >= MAX_TOOL_PAGES {
            return Err(p(format!("more than {MAX_TOOL_PAGES} pages")));
        }
        let params = if cursor.is_empty() {
            b"{}".to_vec()
        } else {
            let mut b = b"{\"cursor\":".to_vec();
            b.extend_from_slice(&json_string(&cursor));
            b.push(b'}');
            b
        };
        let raw = conn.request("tools/list", &params, deadline)?;
        let page: Page = serde_json::from_slice(&raw)
            .map_err(|e| p(format!("the tools/list result is not usable: {e}")))?;
        for entry in page.tools.unwrap_or_default() {
            let fields: HashMap<String, Box<RawValue>> = serde_json::from_str(entry.get())
                .map_err(|e| p(format!("a listed tool is not an object: {e}")))?;
            let Some(name) = fields
                .get("name")
                .and_then(|n| serde_json::from_str::<String>(n.get()).ok())
            else {
                nameless += 1; // no string name: skipped, as the SDK skips it
                continue;
            };
            if !names.insert(name.clone()) {
                return Err(p(format!(
                    "the server lists tool {} twice",
                    super::quote(&name)
                )));
            }
            if names.len() > MAX_TOOLS {
                return Err(p(format!("more than {MAX_TOOLS} tools")));
            }
            let description = match fields.get("description") {
                None => String::new(),
                Some(d) if d.get() == "null" => String::new(),
                Some(d) => serde_json::from_str(d.get())
                    .map_err(|e| p(format!("tool {}: description: {e}", super::quote(&name))))?,
            };
            let annotations: Option<Annotations> =
                match fields.get("annotations") {
                    None => None,
                    Some(a) if a.get() == "null" => None,
                    Some(a) => Some(serde_json::from_str(a.get()).map_err(|e| {
                        p(format!("tool {}: annotations: {e}", super::quote(&name)))
                    })?),
                };
            let schema_raw = fields.get("inputSchema").map_or("", |s| s.get());
            let input_schema = canonical_schema(schema_raw.as_bytes())
                .map_err(|e| p(format!("tool {}: input schema: {e}", super::quote(&name))))?;
            out.push(LiveTool {
                name,
                description,
                annotations,
                input_schema,
            });
        }
        let next = page.next_cursor.unwrap_or_default();
        if next.is_empty() {
            break;
        }
        if !seen.insert(next.clone()) {
            return Err(p(format!("the cursor {} repeats", super::quote(&next))));
        }
        cursor = next;
    }
    Ok((out, nameless))
}

/// A pin of everything the server lists now.
pub fn pin(server: &ServerConfig, now: &str) -> Result<Manifest, String> {
    pin_counting(server, now).map(|(m, _)| m)
}

/// [`pin`], with the number of listed entries skipped for having no string name (which a pin
/// cannot record, and a person pinning should hear of).
pub fn pin_counting(server: &ServerConfig, now: &str) -> Result<(Manifest, usize), String> {
    let listed = connect(&server.into(), server.endpoint.as_deref())?;
    listed.conn.close();
    Ok((
        manifest_of(&server.name, now, &listed.tools),
        listed.nameless,
    ))
}

/// The manifest recording these tools.
pub fn manifest_of(server: &str, now: &str, tools: &[LiveTool]) -> Manifest {
    let tools = tools
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                PinnedTool {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    schema_hash: schema_hash(&t.input_schema),
                    description_hash: description_hash(&t.description),
                    input_schema: t.input_schema.clone(),
                    annotations: t.annotations.clone(),
                },
            )
        })
        .collect();
    Manifest {
        server: server.to_string(),
        pinned_at: now.to_string(),
        tools,
    }
}

/// What a load made of a server's tools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub server: String,
    pub registered: Vec<Built>,
    /// (tool, reason)
    pub refused: Vec<(String, String)>,
    pub unpinned: Vec<String>,
    pub unclassified: Vec<String>,
}

impl Report {
    /// One line per tool, every server-chosen value escaped: registered, refused, unclassified,
    /// unpinned.
    pub fn lines(&self) -> Vec<String> {
        let s = sanitize(&self.server);
        let mut out = Vec::new();
        for b in &self.registered {
            let mut l = format!(
                "{s}: registered {} as {} ({})",
                sanitize(&b.tool),
                sanitize(&b.name),
                sanitize(&b.side_effect)
            );
            if let Some(m) = &b.hint_mismatch {
                l.push_str(&format!(" [hint mismatch allowed: {}]", sanitize(m)));
            }
            out.push(l);
        }
        for (t, why) in &self.refused {
            out.push(format!(
                "{s}: refused {}: {}",
                sanitize(t),
                super::sanitize_message(why)
            ));
        }
        for t in &self.unclassified {
            out.push(format!("{s}: unclassified {}: no rule", sanitize(t)));
        }
        for t in &self.unpinned {
            out.push(format!(
                "{s}: unpinned {}: not in the manifest",
                sanitize(t)
            ));
        }
        out
    }
}

/// The checks before connecting (agentrt mcp 1.9 steps 2-4).
pub fn precheck(server: &ServerConfig, manifest: &Manifest) -> Result<(), String> {
    let q = super::quote(&server.name);
    if manifest.server != server.name {
        return Err(format!(
            "mcp: manifest is for server {}, not {q}",
            super::quote(&manifest.server)
        ));
    }
    let stray: Vec<&str> = server
        .rules
        .keys()
        .filter(|t| !manifest.tools.contains_key(*t))
        .map(String::as_str)
        .collect();
    if !stray.is_empty() {
        return Err(format!(
            "mcp: server {q}: rules name tools the manifest does not pin: {}",
            stray
                .iter()
                .map(|t| sanitize(t))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(())
}

/// Checks every pinned tool against the live listing and its rule.
pub fn report(
    server: &str,
    manifest: &Manifest,
    rules: &BTreeMap<String, Rule>,
    default_timeout: Option<Duration>,
    live: &[LiveTool],
) -> Report {
    let by_name: HashMap<&str, &LiveTool> = live.iter().map(|t| (t.name.as_str(), t)).collect();
    let mut r = Report {
        server: server.to_string(),
        ..Report::default()
    };
    let mut unpinned: Vec<String> = live
        .iter()
        .filter(|t| !manifest.tools.contains_key(&t.name))
        .map(|t| t.name.clone())
        .collect();
    unpinned.sort();
    r.unpinned = unpinned;
    let mut taken: HashMap<String, String> = HashMap::new();
    for (tool, pinned) in &manifest.tools {
        let Some(rule) = rules.get(tool) else {
            r.unclassified.push(tool.clone());
            continue;
        };
        match build(
            server,
            pinned,
            by_name.get(tool.as_str()).copied(),
            rule,
            default_timeout,
        ) {
            Err(why) => r.refused.push((tool.clone(), why)),
            Ok(b) => {
                if let Some(other) = taken.get(&b.name) {
                    r.refused.push((
                        tool.clone(),
                        format!(
                            "the name {} is already taken by tool {}",
                            super::quote(&b.name),
                            super::quote(other)
                        ),
                    ));
                } else {
                    taken.insert(b.name.clone(), tool.clone());
                    r.registered.push(b);
                }
            }
        }
    }
    r
}

/// A loaded server: the open connection and the tools it may offer.
pub struct Loaded {
    pub conn: Connection,
    pub report: Report,
}

/// A failed load: the one-line error, and the report when the server was listed.
pub type LoadError = (String, Option<Box<Report>>);

/// Load: manifest checks, connect and list, then the report. Nothing registered is an error
/// that still carries the report.
pub fn load(server: &ServerConfig, manifest: &Manifest) -> Result<Loaded, LoadError> {
    precheck(server, manifest).map_err(|e| (e, None))?;
    let listed = connect(&server.into(), server.endpoint.as_deref()).map_err(|e| (e, None))?;
    let report = report(
        &server.name,
        manifest,
        &server.rules,
        server.default_timeout,
        &listed.tools,
    );
    if report.registered.is_empty() {
        listed.conn.close();
        return Err((
            format!(
                "mcp: server {}: no tool registered",
                super::quote(&server.name)
            ),
            Some(Box::new(report)),
        ));
    }
    Ok(Loaded {
        conn: listed.conn,
        report,
    })
}
