//! The command line: every flag and argument, validated before the database is touched.

use clap::builder::{OsStringValueParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};

use crate::runtime::types::Key;

/// countersign: review and decide what AI agents want to do, over an agentrt run database.
///
/// With no command, the interactive review console opens on the database.
#[derive(Debug, Parser)]
#[command(
    name = "countersign",
    version,
    about,
    long_about = None,
    after_help = "The database comes from --db, else COUNTERSIGN_DB, else AGENTRT_DB.\n\
Exit codes: 0 done, 1 refused or failed, 2 usage."
)]
pub struct Cli {
    /// The run database (else $COUNTERSIGN_DB, else $AGENTRT_DB).
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<std::path::PathBuf>,

    /// Print JSON instead of text (stored values, unsanitised, as JSON).
    #[arg(long, global = true)]
    pub json: bool,

    /// Console only: open the database read-only; actions are off.
    #[arg(long, global = true)]
    pub read_only: bool,

    /// Who decides or cancels (else $COUNTERSIGN_BY, else $USER, else this account's name).
    #[arg(long, global = true, value_name = "WHO")]
    pub by: Option<String>,

    /// Console only: the theme (default, light, high-contrast, mono, or one of yours).
    #[arg(long, global = true, value_name = "NAME")]
    pub theme: Option<String>,

    /// Console only: clicks select and open rows, the wheel scrolls (off by default; also
    /// `mouse = true` in config.toml).
    #[arg(long, global = true)]
    pub mouse: bool,

    #[cfg_attr(
        feature = "postgres",
        doc = "Console and demo: the example consumer's order backend, to resume and recheck its \
               runs (default: beside a SQLite run database, `<stem>.orders.db`; needed with a \
               postgres:// URL, which has nothing beside it)."
    )]
    #[cfg_attr(
        not(feature = "postgres"),
        doc = "Console and demo: the example consumer's order backend, to resume and recheck its \
               runs (default: beside the run database, `<stem>.orders.db`)."
    )]
    #[arg(long, value_name = "PATH")]
    pub backend: Option<std::path::PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List runs, newest first.
    Runs(RunsArgs),
    /// Show a run: its usage and lease, every pending approval in full, then its steps.
    Show(PageArgsWithRun),
    /// Print a run's audit trail (JSON Lines with --json).
    Events(PageArgsWithRun),
    /// Grant a run's pending approval after printing it in full.
    Approve(ApproveArgs),
    /// Refuse a run's pending approval (cancels the run); --note is required.
    Reject(DecideArgs),
    /// Deny a run's pending approval with feedback: the call does not run, the agent is told --note.
    Deny(DecideArgs),
    /// End a run that is not finished; --note is required.
    Cancel(CancelArgs),
    /// Resume a run whose tools this build registers (the example consumer's).
    Resume(ResumeArgs),
    /// Ask the policy again, read-only, about a run's waiting calls; exit 1 if it now differs.
    Recheck(RecheckArgs),
    /// Resume the example consumer's runs as soon as they are decided, and those whose process died, until stopped.
    Worker(WorkerArgs),
    #[cfg_attr(
        feature = "postgres",
        doc = "Check the hash chain over every run's events (and, on PostgreSQL, every approval \
               hash)."
    )]
    #[cfg_attr(
        not(feature = "postgres"),
        doc = "Check the hash chain over every run's events."
    )]
    Verify(VerifyArgs),
    /// Copy a whole run database between SQLite and PostgreSQL, into an empty target,
    /// checking the chain and every approval hash on both sides.
    #[cfg(feature = "postgres")]
    Copy(CopyArgs),
    /// Bring a PostgreSQL run database's schema to this build's version (its owner's login);
    /// one transaction, and a newer schema is refused with nothing changed.
    #[cfg(feature = "postgres")]
    Migrate,
    /// Write a demo database of the example consumer and open the console on it.
    ///
    /// The demo is written to --db when given, else to $XDG_DATA_HOME/countersign/demo.db
    /// (~/.local/share/countersign/demo.db), never to $COUNTERSIGN_DB or $AGENTRT_DB: those may
    /// name a real database. Its orders live beside it in demo.orders.db.
    Demo(DemoArgs),
    /// Per tool, what the policy and the reviewers did with its calls, and the review
    /// threshold L* = c / (q·p) computed from the database.
    Stats(StatsArgs),
    /// Print one line per new pending approval as it arrives (JSON Lines with --json), for a
    /// chat or paging tool; idle between commits.
    Watch(WatchArgs),
    /// Run the example consumer on one goal with a live model (PROVIDER:MODEL).
    #[cfg(feature = "providers")]
    Agent(super::agent::AgentArgs),
    /// MCP proxy configuration: `pin` the servers' tools, `check` what would be offered.
    #[cfg(feature = "mcp")]
    McpProxy(super::mcp_proxy::McpProxyArgs),
}

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Only runs in this status (RUNNING, WAITING_FOR_APPROVAL, COMPLETED, FAILED, CANCELLED, INTERRUPTED).
    #[arg(long, value_name = "STATUS", value_parser = parse_status)]
    pub status: Option<String>,
    /// How many runs to print; 0 prints every run, page by page.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub limit: u32,
    /// How many runs to skip.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub offset: u32,
}

#[derive(Debug, Args)]
pub struct PageArgsWithRun {
    /// The run id.
    #[arg(value_name = "RUN", value_parser = id_parser())]
    pub run: Key,
    /// How many rows to print; 0 prints all, page by page.
    #[arg(long, default_value_t = 500, value_name = "N")]
    pub limit: u32,
    /// How many rows to skip.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub offset: u32,
}

/// Which approval of a run is decided, and whether the decision is confirmed without asking:
/// the options `approve`, `reject` and `deny` share.
#[derive(Debug, Args, Clone, Default)]
pub struct Consent {
    /// The approval to decide (naming it is consent); needed when the run has several.
    #[arg(long, value_name = "ID", value_parser = id_parser())]
    pub approval: Option<Key>,
    /// Decide without asking.
    #[arg(long)]
    pub yes: bool,
}

#[derive(Debug, Args)]
pub struct DecideArgs {
    #[command(flatten)]
    pub consent: Consent,
    /// A note recorded with the decision (required for reject and deny; deny tells the agent).
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
    #[command(flatten)]
    pub select: Select,
}

/// `approve`: one run's approval, always printed in full first (never rows chosen by filters).
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The run id (or a unique prefix of it).
    #[arg(value_name = "RUN", value_parser = id_parser())]
    pub run: Key,
    #[command(flatten)]
    pub consent: Consent,
    /// A note recorded with the decision.
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
}

impl ApproveArgs {
    /// The same as the deciding commands' arguments, with no rows selected.
    pub fn decide_args(&self) -> DecideArgs {
        DecideArgs {
            consent: self.consent.clone(),
            note: self.note.clone(),
            select: Select {
                run: Some(self.run.clone()),
                ..Select::default()
            },
        }
    }
}

/// Which rows `reject`, `deny` and `cancel` act on: one RUN's, or, chosen by what they are
/// instead, every pending approval of a waiting run that matches all the given filters.
#[derive(Debug, Args, Clone, Default)]
pub struct Select {
    /// The run id (or a unique prefix of it); absent when queue rows are selected by
    /// --status/--tool/--older-than.
    #[arg(
        value_name = "RUN",
        value_parser = id_parser(),
        required_unless_present_any = ["status", "tool", "older_than"]
    )]
    pub run: Option<Key>,
    /// Every queue row (pending approvals of waiting runs): only `waiting` is accepted.
    #[arg(long, value_name = "STATUS", value_parser = parse_queue_status, conflicts_with = "run")]
    pub status: Option<String>,
    /// Only rows whose call is to this tool (exact name).
    #[arg(long, value_name = "NAME", conflicts_with = "run")]
    pub tool: Option<String>,
    /// Only rows requested longer ago than this (e.g. 90m, 2h, 7d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "run")]
    pub older_than: Option<std::time::Duration>,
    /// List what would be decided, and decide nothing.
    #[arg(long)]
    pub dry_run: bool,
}

impl Select {
    /// Whether rows are selected by filters (no RUN).
    pub fn any(&self) -> bool {
        self.status.is_some() || self.tool.is_some() || self.older_than.is_some()
    }
}

fn parse_queue_status(s: &str) -> Result<String, String> {
    match s.to_ascii_lowercase().as_str() {
        "waiting" | "waiting_for_approval" | "pending" => Ok("waiting".into()),
        _ => Err(format!(
            "{s:?}: the queue holds only runs waiting for approval; use --status waiting"
        )),
    }
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Why the run is cancelled (required).
    #[arg(long, value_name = "TEXT")]
    pub note: String,
    /// With selected rows: cancel without asking.
    #[arg(long)]
    pub yes: bool,
    #[command(flatten)]
    pub select: Select,
}

#[derive(Debug, Args)]
pub struct RunArg {
    /// The run id.
    #[arg(value_name = "RUN", value_parser = id_parser())]
    pub run: Key,
}

/// `--backend PATH` of the commands that resume or recheck the example consumer's runs.
#[derive(Debug, Args)]
pub struct BackendArg {
    #[cfg_attr(
        feature = "postgres",
        doc = "The example consumer's order backend (default: beside a SQLite run database, \
               `<stem>.orders.db`; required with a postgres:// URL, which has no \"beside\")."
    )]
    #[cfg_attr(
        not(feature = "postgres"),
        doc = "The example consumer's order backend (default: beside the run database, \
               `<stem>.orders.db`)."
    )]
    #[arg(long, value_name = "PATH")]
    pub backend: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run id.
    #[arg(value_name = "RUN", value_parser = id_parser())]
    pub run: Key,
    #[command(flatten)]
    pub orders: BackendArg,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// First seq to check (chains from the stored hash of the event before it); past the
    /// head's next seq, the chain is shorter than asked (exit 1).
    #[arg(long, default_value_t = 0, value_name = "SEQ")]
    pub from: u64,
    /// Last seq to check (0: the head as read when verify starts).
    #[arg(long, default_value_t = 0, value_name = "SEQ")]
    pub to: u64,
    /// A head kept from an earlier verify, as SEQ:HASH; the chain must still reach it.
    #[arg(long, value_name = "SEQ:HASH", value_parser = parse_head)]
    pub head: Option<(u64, String)>,
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The database to read: a SQLite path or a postgres:// URL.
    #[arg(long, value_name = "DB", value_parser = OsStringValueParser::new())]
    pub from: std::ffi::OsString,
    /// The empty database to write: a postgres:// URL or a SQLite path (created if missing).
    #[arg(long, value_name = "DB", value_parser = OsStringValueParser::new())]
    pub to: std::ffi::OsString,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Only steps started and approvals requested in this last span (e.g. 90m, 24h, 7d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub since: Option<std::time::Duration>,
    /// c: what one review costs (in the unit you measure losses in).
    #[arg(long, default_value_t = 1.5, value_name = "C", value_parser = parse_positive)]
    pub review_cost: f64,
    /// q: the share of wrong calls a reviewer catches (0 < q <= 1).
    #[arg(long, default_value_t = 0.9, value_name = "Q", value_parser = parse_share)]
    pub catch: f64,
}

/// `90s`, `15m`, `24h`, `7d`, `2w` (one number and one unit; the console's configuration reads
/// the same).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    crate::console::settings::parse_duration(s)
}

/// The bounds keep L* = c / (q·p) a finite number for every share of wrong calls a count can
/// give: `1e308` and `1e-308` made it infinite, printed `inf` and written `null`, the null
/// that also means "no review data" (found from outside).
const REVIEW_COST_MAX: f64 = 1e12;
const CATCH_MIN: f64 = 1e-6;

fn parse_positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= REVIEW_COST_MAX => Ok(x),
        _ => Err(format!(
            "{} is not a positive number of at most {REVIEW_COST_MAX:e}",
            crate::safetext::quoted_line(s, 80)
        )),
    }
}

fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && (CATCH_MIN..=1.0).contains(&x) => Ok(x),
        _ => Err(format!(
            "{} is not a share between {CATCH_MIN:e} and 1",
            crate::safetext::quoted_line(s, 80)
        )),
    }
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Announce the approvals already pending first.
    #[arg(long)]
    pub existing: bool,
    /// Stop after this many announcements (0: never).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub count: u64,
}

#[derive(Debug, Args)]
pub struct RecheckArgs {
    /// The run id.
    #[arg(value_name = "RUN", value_parser = id_parser())]
    pub run: Key,
    /// Every recorded evaluation of the policy, not only the calls waiting on a person.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub orders: BackendArg,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Resume what is decided now, then exit (instead of waiting for decisions).
    #[arg(long)]
    pub once: bool,
    #[command(flatten)]
    pub orders: BackendArg,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print where the demo was written and what to try instead of opening the console.
    #[arg(long)]
    pub no_tui: bool,
    #[cfg_attr(
        feature = "postgres",
        doc = "With a postgres:// --db: where to write the example consumer's order backend (as \
               `--backend` before the command)."
    )]
    #[cfg_attr(
        not(feature = "postgres"),
        doc = "Where to write the example consumer's order backend (as `--backend` before the \
               command)."
    )]
    #[arg(long, value_name = "PATH")]
    pub backend: Option<std::path::PathBuf>,
}

/// An id argument as the bytes of the argument (argv is bytes on Unix): a run whose id is not
/// UTF-8 can be named exactly, e.g. `show "$(printf 't-\377')"`.
fn id_parser() -> impl TypedValueParser<Value = Key> {
    OsStringValueParser::new().try_map(|s| {
        use std::os::unix::ffi::OsStringExt;
        let b = s.into_vec();
        if b.is_empty() {
            return Err("an id cannot be empty");
        }
        if b[0] == b'-' {
            // The value is not echoed: clap prints this to the terminal, and the value is not ours.
            return Err("an id cannot start with '-' (it looks like a flag)");
        }
        Ok(Key::new(b))
    })
}

fn parse_status(s: &str) -> Result<String, String> {
    const KNOWN: &[&str] = crate::runtime::types::RunStatus::KNOWN;
    // The short lower-case forms a person types: `waiting`, `canceled`, dashes for `_`.
    let up = s.trim().to_ascii_uppercase().replace('-', "_");
    let up = match up.as_str() {
        "WAITING" | "PENDING" => "WAITING_FOR_APPROVAL".to_string(),
        "CANCELED" => "CANCELLED".to_string(),
        _ => up,
    };
    if KNOWN.contains(&up.as_str()) {
        Ok(up)
    } else {
        Err(format!(
            "unknown status; one of running, waiting, interrupted, completed, failed, cancelled (or {})",
            KNOWN.join(", ")
        ))
    }
}

fn parse_head(s: &str) -> Result<(u64, String), String> {
    let (seq, hash) = s
        .split_once(':')
        .ok_or_else(|| "expected SEQ:HASH, e.g. 42:ab12...".to_string())?;
    let seq: u64 = seq
        .parse()
        .map_err(|_| "SEQ is not a whole number".to_string())?;
    if seq == 0 {
        return Err("the kept head's seq starts at 1".into());
    }
    if hash.is_empty() {
        return Err("the kept head's hash is empty".into());
    }
    // An event's hash is SHA-256 in lowercase hex, as verify prints it: anything else is a
    // mistyped argument, not a broken chain.
    if hash.len() != 64 || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err("the kept head's hash is 64 lowercase hex digits, as verify prints it".into());
    }
    Ok((seq, hash.to_string()))
}

#[cfg(test)]
mod tests {
    /// Every help text, the top level's and each command's, in one string.
    fn all_help() -> String {
        use clap::CommandFactory;
        let mut top = super::Cli::command();
        let mut text = top.render_long_help().to_string();
        for sub in top.get_subcommands_mut() {
            text.push_str(&sub.render_long_help().to_string());
        }
        text
    }

    /// A build without PostgreSQL does not offer it in its help (found from outside: the
    /// SQLite-only binary's `--backend` and `verify` help spoke of postgres:// URLs and
    /// PostgreSQL's approval hashes); the full build does. `.ci/run` runs this test in the
    /// SQLite-only build too.
    #[test]
    fn help_offers_postgresql_only_where_it_is_built() {
        let text = all_help().to_ascii_lowercase();
        assert_eq!(
            text.contains("postgres"),
            cfg!(feature = "postgres"),
            "{text}"
        );
    }
}
