//! The operator commands: the console's actions for scripts, pipelines and plain terminals.
//!
//! Every argument is validated before the database is touched: a typo never opens, creates or
//! migrates anything. Exit codes: 0 done, 1 refused or failed, 2 usage.

#[cfg(feature = "providers")]
pub mod agent;

/// The terminal tool `agent`'s runs end with (named here too, so that a build without the
/// providers still tells such a run from another program's).
pub(crate) const AGENT_FINISH: &str = "finish";
pub mod approval;
mod bulk;
pub mod cli;
#[cfg(feature = "postgres")]
mod copy;
mod decide;
pub mod demo;
mod events;
#[cfg(feature = "mcp")]
pub mod mcp_proxy;
#[cfg(feature = "mcp")]
mod mcp_recheck;
mod open;
pub mod out;
mod prefix;
mod recheck;
mod resume;
mod run_reads;
mod runs;
pub mod shell;
mod show;
mod stats;
pub mod text;
mod verify;
#[cfg(feature = "postgres")]
mod verify_pg;
mod watch;
pub mod worker;

use clap::Parser;
use std::path::{Path, PathBuf};

pub use cli::{Cli, Command};

/// What ended a command: a usage error (exit 2) or a refusal/failure (exit 1). The message is
/// one line a person can act on; it never carries untrusted text unescaped.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("usage: {0}")]
    Usage(String),
    #[error("error: {0}")]
    Failed(String),
    /// Stopped by a signal (SIGINT, SIGTERM) before it was done; exit 128 + the signal.
    #[error("interrupted: {message}")]
    Signalled {
        /// What was left, and how to go on.
        message: String,
        /// The signal's number.
        signal: i32,
    },
}

impl CommandError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CommandError::Usage(_) => 2,
            CommandError::Failed(_) => 1,
            CommandError::Signalled { signal, .. } => 128 + signal,
        }
    }

    /// What it says, without its `usage:`/`error:` label (for a caller with its own).
    pub fn into_message(self) -> String {
        match self {
            CommandError::Usage(m) | CommandError::Failed(m) => m,
            CommandError::Signalled { message, .. } => message,
        }
    }
}

/// A line to stderr that cannot panic: `eprintln!` panics when stderr is closed or full
/// (`2>/dev/full`, `2>&1 | head -1`), which turned a refusal into exit 101; a line that cannot
/// be written is lost, and the exit code still says what happened.
macro_rules! say_err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say_err;

/// Entry point of the binary; returns the process exit code.
pub fn main_entry() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help and version to stdout (exit 0) and usage errors to stderr (exit 2).
            if let Some(line) = escaped_usage(&e) {
                crate::commands::say_err!("{line}");
                return 2;
            }
            if e.use_stderr() {
                let line = one_line_usage(&e.render().to_string());
                crate::commands::say_err!("{}", never_raw(&line));
                return 2;
            }
            // Help and version go to stdout: one that cannot be written is a failure, as
            // every command's output is (found from outside: `--help >/dev/full` exited 0).
            return match e
                .print()
                .and_then(|()| std::io::Write::flush(&mut std::io::stdout()))
            {
                Ok(()) => 0,
                Err(w) => {
                    let e = CommandError::Failed(format!("writing output: {w}"));
                    crate::commands::say_err!("{}", never_raw(&e.to_string()));
                    e.exit_code()
                }
            };
        }
    };
    match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            crate::commands::say_err!("{}", never_raw(&e.to_string()));
            e.exit_code()
        }
    }
}

/// The last guard before an error line reaches the terminal: each of its lines that still
/// holds a control, bidi or invisible character (a message that quoted a value without
/// escaping it) is escaped whole; a line already escaped is left as it is, so that `\x1b`
/// is not shown `\\x1b`.
fn never_raw(message: &str) -> String {
    message
        .split('\n')
        .map(crate::safetext::escaped_once)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A usage error whose offending value or argument holds characters a terminal acts on or
/// hides, written here with them escaped: clap's own rendering drops them (it strips what
/// looks like styling), so it would name a value other than the one given. `None`: clap's
/// rendering shows the value as given.
fn escaped_usage(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let text = |k| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let hides = |s: &str| {
        s.chars()
            .any(|c| c.is_control() || crate::safetext::json_escapes(c))
    };
    let quoted = |s: &str| format!("'{}'", text::clean(s, 200));
    match e.kind() {
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            let value = text(ContextKind::InvalidValue).filter(|v| hides(v))?;
            let arg = text(ContextKind::InvalidArg).unwrap_or_else(|| "an argument".into());
            let why = std::error::Error::source(e)
                .map(|s| format!(": {}", text::clean(&s.to_string(), 400)))
                .unwrap_or_default();
            Some(format!(
                "usage: invalid value {} for '{}'{why}",
                quoted(&value),
                text::clean(&arg, 80)
            ))
        }
        ErrorKind::UnknownArgument => {
            let arg = text(ContextKind::InvalidArg).filter(|a| hides(a))?;
            Some(format!("usage: unexpected argument {}", quoted(&arg)))
        }
        // A command of a feature this build was made without: say so, rather than suggest a
        // command of a similar name.
        ErrorKind::InvalidSubcommand
            if let Some(feature) = text(ContextKind::InvalidSubcommand)
                .as_deref()
                .and_then(not_built) =>
        {
            let name = text(ContextKind::InvalidSubcommand).unwrap_or_default();
            Some(format!(
                "usage: {name} is not in this build (it was built without the feature `{feature}`); build countersign with its default features to have it"
            ))
        }
        // Any other error that names what was given (an unknown command, a value a flag does
        // not take): clap would print it raw, or strip what looks like styling.
        kind => {
            let named: Vec<String> = [
                ContextKind::InvalidSubcommand,
                ContextKind::InvalidValue,
                ContextKind::InvalidArg,
            ]
            .into_iter()
            .filter_map(text)
            .collect();
            if !named.iter().any(|v| hides(v)) {
                return None;
            }
            let what = kind.as_str().unwrap_or("invalid arguments");
            let named: Vec<String> = named.iter().map(|v| quoted(v)).collect();
            Some(format!("usage: {what}: {}", named.join(", ")))
        }
    }
}

/// clap's usage error, rendered over several lines (the error, a tip, the usage, a pointer to
/// `--help`), as the one line every other refusal is: `usage: ERROR; TIP (USAGE; --help says
/// more)`.
fn one_line_usage(rendered: &str) -> String {
    let (mut head, mut tips, mut usage) = (Vec::new(), Vec::new(), None);
    for l in rendered.lines().map(str::trim) {
        if l.is_empty() || l.starts_with("For more information") {
            continue;
        }
        if let Some(x) = l.strip_prefix("error: ") {
            head.push(x);
        } else if let Some(x) = l.strip_prefix("tip: ") {
            tips.push(x);
        } else if let Some(x) = l.strip_prefix("Usage: ") {
            usage = Some(x);
        } else {
            head.push(l);
        }
    }
    let mut line = format!("usage: {}", head.join(" "));
    for t in tips {
        line.push_str("; ");
        line.push_str(t);
    }
    if let Some(u) = usage {
        line.push_str(&format!(" ({u}; --help says more)"));
    }
    line
}

/// The feature a command needs when this build was made without it.
fn not_built(name: &str) -> Option<&'static str> {
    let needs = match name {
        "copy" | "migrate" => "postgres",
        "agent" => "providers",
        "mcp-proxy" => "mcp",
        _ => return None,
    };
    let built = match needs {
        "postgres" => cfg!(feature = "postgres"),
        "providers" => cfg!(feature = "providers"),
        _ => cfg!(feature = "mcp"),
    };
    (!built).then_some(needs)
}

/// The database path: `--db`, else `COUNTERSIGN_DB`, else `AGENTRT_DB`. A name that is
/// neither a `postgres://` URL nor plausibly a path (another URL, a libpq connection string)
/// is a usage error that hides its password.
pub fn database_path(flag: Option<PathBuf>) -> Result<PathBuf, CommandError> {
    let named = flag.map(|p| ("--db", p)).or_else(|| {
        ["COUNTERSIGN_DB", "AGENTRT_DB"]
            .into_iter()
            .find_map(|var| {
                std::env::var_os(var)
                    .filter(|v| !v.is_empty())
                    .map(|v| (var, PathBuf::from(v)))
            })
    });
    if let Some((from, p)) = named {
        check_db_name(from, &p)?;
        return Ok(p);
    }
    Err(CommandError::Usage(
        "no database: pass --db or set COUNTERSIGN_DB (or AGENTRT_DB); to try countersign on an example, run `countersign demo`".into(),
    ))
}

/// Refuses a database name (from `from`: `--db` or a variable) that is neither a SQLite path
/// nor, in this build, a PostgreSQL URL: a URL of another kind or a libpq string, and a
/// `postgres://` URL in a build without the `postgres` feature. Read as a path, it would be
/// created as directories and a file of that name and printed, password and all.
fn check_db_name(from: &str, p: &Path) -> Result<(), CommandError> {
    let Some(t) = p.to_str() else {
        return Ok(());
    };
    let why = if crate::runtime::store::is_pg_url(t) {
        #[cfg(feature = "postgres")]
        let why = None;
        #[cfg(not(feature = "postgres"))]
        let why = crate::runtime::store::no_postgres_here(t);
        why
    } else {
        crate::runtime::store::not_a_path(t)
    };
    match why {
        Some(why) => Err(CommandError::Usage(format!("{from}: {why}"))),
        None => Ok(()),
    }
}

/// Refuses an order backend (`--backend`, always a SQLite file) named by a URL or a libpq
/// string that names no file: it would be reported missing, or created, under that name,
/// password and all.
fn check_backend_name(p: &Path) -> Result<(), CommandError> {
    let Some(t) = p.to_str() else {
        return Ok(());
    };
    let why = if crate::runtime::store::is_pg_url(t) {
        std::fs::symlink_metadata(t).is_err().then(|| {
            format!(
                "{} is a URL; the example consumer's order backend is a SQLite file's path, also beside a PostgreSQL run database",
                crate::runtime::store::name_shown(t)
            )
        })
    } else {
        crate::runtime::store::not_a_path(t)
    };
    match why {
        Some(why) => Err(CommandError::Usage(format!("--backend: {why}"))),
        None => Ok(()),
    }
}

/// A decision's result, after what it committed is chained on PostgreSQL
/// ([`verify_pg::chain_after`], whether it succeeded or not: a bulk decision may have
/// committed rows before failing); on SQLite every event is chained as it commits.
fn chain_after<T>(_db: &std::path::Path, decided: T) -> T {
    #[cfg(feature = "postgres")]
    verify_pg::chain_after(_db);
    decided
}

/// Who decides: the flag, else `COUNTERSIGN_BY`, else `USER`, else the OS account's name;
/// never empty.
pub fn who(flag: Option<&str>, verb: &str) -> Result<String, CommandError> {
    if let Some(b) = flag {
        if b.trim().is_empty() {
            return Err(CommandError::Usage(format!("{verb}: --by is empty")));
        }
        name_checked(b, "--by", verb)?;
        return Ok(b.to_string());
    }
    let name = crate::runtime::operator::default_operator_checked()
        .map_err(|why| CommandError::Usage(format!("{verb}: {why}; pass --by NAME")))?
        .ok_or_else(|| {
        CommandError::Usage(format!(
            "{verb}: no operator name: neither COUNTERSIGN_BY nor USER is set and this account has no name; pass --by"
        ))
    })?;
    name_checked(&name, "the operator name (COUNTERSIGN_BY, else USER)", verb)?;
    Ok(name)
}

/// A usage error when `name` (from `from`) cannot be recorded as who decided
/// ([`crate::runtime::operator::name_refused`]); the name is shown escaped.
fn name_checked(name: &str, from: &str, verb: &str) -> Result<(), CommandError> {
    match crate::runtime::operator::name_refused(name) {
        Some(why) => Err(CommandError::Usage(format!(
            "{verb}: {from} {} cannot be recorded: {why}",
            text::clean(name, 80)
        ))),
        None => Ok(()),
    }
}

/// Checks what clap cannot: relations between arguments. Runs before anything is opened.
fn validate(cmd: &Command) -> Result<(), CommandError> {
    match cmd {
        Command::Verify(v) => {
            if v.to != 0 && v.to < v.from {
                return Err(CommandError::Usage(format!(
                    "verify: --to {} is before --from {}",
                    v.to, v.from
                )));
            }
            if let Some((seq, _)) = &v.head
                && ((v.to != 0 && *seq > v.to) || *seq < v.from)
            {
                let to = match v.to {
                    0 => "the head".to_string(),
                    to => to.to_string(),
                };
                return Err(CommandError::Usage(format!(
                    "verify: --head seq {seq} is outside the range checked, --from {} to {to}",
                    v.from
                )));
            }
        }
        Command::Reject(d) | Command::Deny(d) if d.select.any() && d.consent.approval.is_some() => {
            return Err(CommandError::Usage(
                "--approval names one run's approval and goes with a RUN, not with --status, --tool or --older-than (which decide every row they select)".into(),
            ));
        }
        Command::Reject(d) | Command::Deny(d) if d.select.dry_run && !d.select.any() => {
            return Err(CommandError::Usage(
                "--dry-run goes with --status, --tool or --older-than (the rows to list)".into(),
            ));
        }
        Command::Cancel(c) if c.select.dry_run && !c.select.any() => {
            return Err(CommandError::Usage(
                "--dry-run goes with --status, --tool or --older-than (the rows to list)".into(),
            ));
        }
        Command::Reject(d) if d.note.as_deref().is_none_or(|n| n.trim().is_empty()) => {
            return Err(CommandError::Usage(
                "reject: --note is required: say why, it is recorded with the decision".into(),
            ));
        }
        Command::Deny(d) if d.note.as_deref().is_none_or(|n| n.trim().is_empty()) => {
            return Err(CommandError::Usage(
                "deny: --note is required: it is what the agent is told instead of the call's result".into(),
            ));
        }
        Command::Cancel(c) if c.note.trim().is_empty() => {
            return Err(CommandError::Usage(
                "cancel: --note is required: say why, it is recorded with the cancel".into(),
            ));
        }
        _ => {}
    }
    Ok(())
}

// Without PostgreSQL the readers' labelled blocks have no early exit.
#[cfg_attr(not(feature = "postgres"), allow(unused_labels))]
fn run(cli: Cli) -> Result<(), CommandError> {
    let mut cli = cli;
    // Every command takes --db through the same check as the variables (demo and agent,
    // which read --db themselves, created a mistyped URL as a file and printed it whole).
    if let Some(db) = &cli.db {
        check_db_name("--db", db)?;
    }
    // `demo --backend PATH` is `--backend PATH demo`.
    if let Some(Command::Demo(a)) = &cli.command
        && a.backend.is_some()
    {
        cli.backend = a.backend.clone();
    }
    // And --backend before the command (or demo's), for the console too (no command at all).
    if let Some(b) = &cli.backend {
        check_backend_name(b)?;
    }
    let flags = ConsoleFlags {
        by: cli.by.clone(),
        read_only: cli.read_only,
        theme: cli.theme.clone(),
        mouse: cli.mouse,
        backend: cli.backend.clone(),
    };
    let Some(cmd) = cli.command else {
        let db = database_path(cli.db)?;
        return open_console(&db, &flags);
    };
    validate(&cmd)?;
    if cli.read_only {
        // The console's flag: on a command that writes it would be ignored, and a person who
        // asked for nothing to be written would see a decision land.
        let writes = match &cmd {
            Command::Approve(_) => Some("approve"),
            Command::Reject(_) => Some("reject"),
            Command::Deny(_) => Some("deny"),
            Command::Cancel(_) => Some("cancel"),
            Command::Resume(_) => Some("resume"),
            Command::Worker(_) => Some("worker"),
            #[cfg(feature = "postgres")]
            Command::Copy(_) => Some("copy"),
            #[cfg(feature = "postgres")]
            Command::Migrate => Some("migrate"),
            #[cfg(feature = "providers")]
            Command::Agent(_) => Some("agent"),
            #[cfg(feature = "mcp")]
            Command::McpProxy(_) => Some("mcp-proxy"),
            _ => None,
        };
        if let Some(name) = writes {
            return Err(CommandError::Usage(format!(
                "{name} writes, and --read-only is the console's (it opens the database with actions off); leave it out, or open the console to look"
            )));
        }
    }
    if cli.json {
        let text_only = match &cmd {
            Command::Demo(_) => Some("demo"),
            Command::Worker(_) => Some("worker"),
            #[cfg(feature = "providers")]
            Command::Agent(_) => Some("agent"),
            _ => None,
        };
        if let Some(name) = text_only {
            return Err(CommandError::Usage(format!(
                "{name} prints text only: --json goes with the commands that read or decide (runs, show, events, stats, verify, approve, ...)"
            )));
        }
    }
    #[cfg(feature = "postgres")]
    if let Some(e) = verify_pg::only_some_on_postgres(cli.db.as_deref(), &cmd) {
        return Err(e);
    }
    let mut cmd = cmd;
    // A command's own --backend, else the one given before the command.
    let own = match &mut cmd {
        Command::Resume(a) => Some(&mut a.orders.backend),
        Command::Recheck(a) => Some(&mut a.orders.backend),
        Command::Worker(a) => Some(&mut a.orders.backend),
        #[cfg(feature = "providers")]
        Command::Agent(a) => Some(&mut a.backend),
        _ => None,
    };
    if let Some(own) = own {
        if let Some(b) = &cli.backend {
            own.get_or_insert_with(|| b.clone());
        }
        if let Some(b) = own.as_deref() {
            check_backend_name(b)?;
        }
    }
    if let Some(run) = prefix::run_arg(&mut cmd) {
        *run = prefix::resolve(&database_path(cli.db.clone())?, run)?;
    }
    let mut out = out::Out::stdout();
    let json = cli.json;
    // A read-only command: on PostgreSQL's reader for a URL (`$pg`), else on the SQLite
    // database opened for reading (`$sqlite`).
    macro_rules! on_reader {
        ($pg:path, $sqlite:path, $a:expr) => {
            'read: {
                let db = database_path(cli.db)?;
                #[cfg(feature = "postgres")]
                if let Some(store) = verify_pg::open_reader(&db)? {
                    break 'read $pg(&store, json, &mut out, $a);
                }
                $sqlite(open::reading(db, json, &mut out)?, $a)
            }
        };
    }
    let res = match &cmd {
        Command::Runs(a) => on_reader!(runs::list, runs::run, a),
        Command::Show(a) => 'show: {
            let db = database_path(cli.db)?;
            #[cfg(feature = "postgres")]
            if let Some((store, shown)) = verify_pg::open_named(&db)? {
                break 'show show::show(&store, &shown, json, &mut out, a);
            }
            show::run(open::reading(db, json, &mut out)?, a)
        }
        Command::Events(a) => on_reader!(events::events, events::run, a),
        Command::Verify(a) => {
            let db = database_path(cli.db)?;
            #[cfg(feature = "postgres")]
            if let Some(url) = db.to_str().filter(|s| crate::pgstore::is_pg_url(s)) {
                return verify_pg::run(url, json, a, &mut out);
            }
            verify::run(open::reading(db, json, &mut out)?, a)
        }
        #[cfg(feature = "postgres")]
        Command::Copy(a) => copy::run(json, a, &mut out),
        #[cfg(feature = "postgres")]
        Command::Migrate => verify_pg::migrate(&database_path(cli.db)?, json, &mut out),
        Command::Stats(a) => on_reader!(stats::run_pg, stats::run, a),
        Command::Watch(a) => on_reader!(watch::run_pg, watch::run, a),
        Command::Reject(a) | Command::Deny(a) if a.select.any() => {
            let verb = match cmd {
                Command::Reject(_) => bulk::BulkVerb::Reject,
                _ => bulk::BulkVerb::Deny,
            };
            let db = database_path(cli.db)?;
            let by = who(cli.by.as_deref(), verb.name())?;
            bulk::check_consent(verb, &a.select, a.consent.yes, json)?;
            let note = a.note.as_deref().unwrap_or("");
            chain_after(&db, bulk::run(&db, json, verb, &a.select, (note, a.consent.yes, &by), &mut out))
        }
        Command::Cancel(a) if a.select.any() => {
            let db = database_path(cli.db)?;
            let by = who(cli.by.as_deref(), "cancel")?;
            bulk::check_consent(bulk::BulkVerb::Cancel, &a.select, a.yes, json)?;
            let args = (a.note.as_str(), a.yes, by.as_str());
            chain_after(&db, bulk::run(&db, json, bulk::BulkVerb::Cancel, &a.select, args, &mut out))
        }
        Command::Approve(a) => {
            let verb = decide::Verb::Approve;
            let a = a.decide_args();
            let db = database_path(cli.db)?;
            let by = who(cli.by.as_deref(), verb.name())?;
            decide::check_consent(verb, &a, json)?;
            chain_after(&db, decide::run(&db, json, verb, &a, &by, &mut out))
        }
        Command::Reject(a) | Command::Deny(a) => {
            let verb = match cmd {
                Command::Reject(_) => decide::Verb::Reject,
                _ => decide::Verb::Deny,
            };
            let db = database_path(cli.db)?;
            let by = who(cli.by.as_deref(), verb.name())?;
            decide::check_consent(verb, a, json)?;
            chain_after(&db, decide::run(&db, json, verb, a, &by, &mut out))
        }
        Command::Cancel(a) => {
            let db = database_path(cli.db)?;
            let by = who(cli.by.as_deref(), "cancel")?;
            chain_after(&db, decide::cancel(&db, json, a, &by, &mut out))
        }
        Command::Resume(a) => resume::run(
            &database_path(cli.db)?,
            a.orders.backend.as_deref(),
            json,
            a.run.as_bytes(),
            &mut out,
        ),
        Command::Recheck(a) => recheck::run(
            &database_path(cli.db)?,
            a.orders.backend.as_deref(),
            json,
            a.run.as_bytes(),
            a.all,
            &mut out,
        ),
        Command::Worker(a) => worker::run(
            &database_path(cli.db)?,
            a.orders.backend.as_deref(),
            a.once,
        ),
        #[cfg(feature = "providers")]
        Command::Agent(a) => agent::run(cli.db.as_deref(), a, &mut out),
        #[cfg(feature = "mcp")]
        Command::McpProxy(a) => mcp_proxy::run(a, json, &mut out),
        #[cfg(feature = "postgres")]
        Command::Demo(a)
            if cli
                .db
                .as_deref()
                .and_then(|d| d.to_str())
                .is_some_and(crate::pgstore::is_pg_url) =>
        {
            let db = cli.db.clone().unwrap_or_default();
            let url = crate::pgstore::PgUrl::parse(db.to_str().unwrap_or_default())
                .map_err(|e| CommandError::Usage(text::clean(&e.to_string(), 600)))?;
            if !a.no_tui {
                console_config_checked(&flags)?;
            }
            let Some(backend) = cli.backend.clone() else {
                return Err(CommandError::Usage(
                    "demo: on PostgreSQL, name where to write the example consumer's order backend with --backend PATH (a run database on a server has nothing beside it)".into(),
                ));
            };
            if !a.no_tui && std::fs::symlink_metadata(&backend).is_err() {
                crate::commands::say_err!(
                    "writing the demo into {} ...",
                    text::clean(url.redacted(), 300)
                );
            }
            let prepared = demo::prepare_pg(&url, &backend)?;
            if a.no_tui {
                demo::describe_pg(&url, &backend, &prepared, &mut out)
            } else {
                out.flush()?;
                let _worker = (!flags.read_only).then(|| worker::beside(&db, Some(&backend)));
                open_console(&db, &flags)
            }
        }
        Command::Demo(_) if cli.backend.is_some() => Err(CommandError::Usage(
            "demo: --backend goes with a postgres:// --db; a SQLite demo keeps its order backend beside it".into(),
        )),
        Command::Demo(a) => {
            // Never COUNTERSIGN_DB/AGENTRT_DB: they may name a real database.
            let db = cli.db.clone().unwrap_or_else(demo::default_path);
            if !a.no_tui {
                console_config_checked(&flags)?;
            }
            if !a.no_tui && !db.exists() {
                // Writing takes a few seconds: say so rather than leave the screen blank.
                crate::commands::say_err!(
                    "writing the demo to {} ...",
                    text::clean_bytes(db.as_os_str().as_encoded_bytes(), 300)
                );
            }
            let prepared = demo::prepare(&db)?;
            if a.no_tui {
                demo::describe(&db, &prepared, &mut out)
            } else {
                out.flush()?;
                // Approved refunds execute with no second key: a worker resumes them.
                let _worker = (!flags.read_only).then(|| worker::beside(&db, None));
                open_console(&db, &flags)
            }
        }
    };
    // Output already written stays written even when the command then fails.
    let flushed = out.flush();
    res.and(flushed)
}

/// Resumes, from the console, the runs this build can resume (the example consumer's), and
/// asks its policy again, with its order backend: `--backend`, else beside a SQLite
/// database. On PostgreSQL (decision 0083) the same driver resumes them; without `--backend`
/// a resume or a recheck says in one line to name it.
struct ConsumerResume {
    db: PathBuf,
    backend: Option<PathBuf>,
    /// On PostgreSQL, the connection the checks of which runs resume are read on (opened at
    /// the first check, opened again after it broke), rather than one connection per check.
    #[cfg(feature = "postgres")]
    checks: std::sync::Mutex<Option<crate::pgstore::PgStore>>,
}

impl crate::console::data::ResumeHook for ConsumerResume {
    fn can_resume(&self, run_id: &str) -> bool {
        #[cfg(feature = "postgres")]
        if self.db.to_str().is_some_and(crate::pgstore::is_pg_url) {
            let mut kept = self.checks.lock().unwrap_or_else(|p| p.into_inner());
            if kept.is_none() {
                *kept = open::pg_store(&self.db).ok().flatten();
            }
            let Some(store) = kept.as_ref() else {
                return false;
            };
            let ok = resume::resumable_on(store, run_id.as_bytes()).is_ok();
            if !ok && store.is_closed() {
                *kept = None;
            }
            return ok;
        }
        resume::resumable(&self.db, self.backend.as_deref(), run_id.as_bytes()).is_ok()
    }

    fn resume(&self, db_path: &std::path::Path, run_id: &str) -> Result<String, String> {
        resume::resume_run(db_path, self.backend.as_deref(), run_id.as_bytes())
            .map(|r| resume::outcome_line(&r))
            .map_err(CommandError::into_message)
    }

    fn recheck(
        &self,
        db_path: &std::path::Path,
        run_id: &str,
    ) -> Result<crate::runtime::driver::RecheckReport, String> {
        recheck::for_console(db_path, self.backend.as_deref(), run_id)
    }
}

/// The console's own flags.
struct ConsoleFlags {
    by: Option<String>,
    read_only: bool,
    theme: Option<String>,
    mouse: bool,
    /// The example consumer's order backend (`--backend`).
    backend: Option<PathBuf>,
}

/// The console's configuration refused as [`open_console`] would, before anything is
/// written (a demo that then could not open its console left its files behind).
fn console_config_checked(cli: &ConsoleFlags) -> Result<(), CommandError> {
    crate::console::check_terminal().map_err(|e| {
        CommandError::Failed(format!(
            "{e}; demo --no-tui writes the demo and says what to try"
        ))
    })?;
    crate::console::check_config(cli.theme.as_deref())
        .map_err(|e| CommandError::Failed(text::said(&e.said(), 4000)))
}

/// Opens the review console on `db`. Its errors are printed after the terminal is restored,
/// escaped like every other message.
fn open_console(db: &std::path::Path, cli: &ConsoleFlags) -> Result<(), CommandError> {
    // A URL that does not read is a usage error, as for every command (exit 2).
    #[cfg(feature = "postgres")]
    if let Some(url) = db.to_str().filter(|s| crate::pgstore::is_pg_url(s)) {
        crate::pgstore::PgUrl::parse(url)
            .map_err(|e| CommandError::Usage(text::clean(&e.to_string(), 600)))?;
    }
    // Decisions record the name: one that cannot be recorded is refused before the console
    // opens (none at all still opens it, read-only).
    if cli.by.is_some()
        || !matches!(
            crate::runtime::operator::default_operator_checked(),
            Ok(None)
        )
    {
        who(cli.by.as_deref(), "console")?;
    }
    let mut opts = crate::console::ConsoleOptions::new(db);
    opts.by = cli.by.clone();
    opts.read_only = cli.read_only;
    opts.theme = cli.theme.clone();
    opts.mouse = cli.mouse;
    opts.resume = Some(std::sync::Arc::new(ConsumerResume {
        db: db.to_path_buf(),
        backend: cli.backend.clone(),
        #[cfg(feature = "postgres")]
        checks: std::sync::Mutex::new(None),
    }));
    crate::console::run(opts).map_err(|e| CommandError::Failed(text::said(&e.said(), 4000)))
}
