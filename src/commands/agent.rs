//! `agent`: runs the example consumer (the order-support assistant) on one goal with a live
//! model. The run database is opened or created at `--db`, the order backend beside it
//! (`<stem>.orders.db`, created with its seeded orders if missing). The run pauses for an
//! operator's approval as the demo's do; it ends through the terminal tool `finish`.
//!
//! Keys: `--model-key-file` (owner-only, refused otherwise), else the provider's usual
//! environment variable (`ANTHROPIC_API_KEY`; `OPENAI_API_KEY` only for OpenAI's own base).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;

use super::CommandError;
use super::out::Out;
use super::resume::outcome_line;
use super::shell;
use super::text::{clean, said};
use crate::consumer::adapter::{self, ConsumerPolicy};
use crate::consumer::backend::Backend;
use crate::consumer::demo::backend_beside;
use crate::consumer::dispatch::{Dispatcher, DispatcherOptions};
use crate::consumer::policy::ConsequencePolicy;
use crate::consumer::session::Session;
use crate::consumer::tools::Catalog;
use crate::providers::agent::ModelAgent;
use crate::providers::render::Options;
use crate::providers::{Secret, anthropic, ollama, openai};
use crate::runtime::driver::{Config, RunDb, RuntimeError, default_limits};
use crate::runtime::model::{Model, ModelSetup};
use crate::runtime::policy::{
    self as rpolicy, Policy, PolicyDecision, PolicyError, PolicyRequest, RunView,
};
use crate::runtime::store::Store;
use crate::runtime::store::StoreError;
use crate::runtime::tools::{FnTool, SideEffect, ToolDef, ToolOutput};
use crate::runtime::types::RunStatus;

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The model, as PROVIDER:MODEL (openai, anthropic or ollama), e.g. anthropic:claude-opus-5.
    #[arg(long, value_name = "PROVIDER:MODEL")]
    pub model: String,
    /// The provider's base URL (an OpenAI-compatible server, a gateway, an Ollama host).
    #[arg(long, value_name = "URL")]
    pub model_base_url: Option<String>,
    /// A file holding the API key (readable by its owner only).
    #[arg(long, value_name = "PATH")]
    pub model_key_file: Option<PathBuf>,
    /// The customer the assistant acts for (default cu_ana; with --resume, the run's own,
    /// which a different --customer may not replace).
    #[arg(long, value_name = "ID")]
    pub customer: Option<String>,
    /// Continue this run (after a person decided its approval) instead of starting one.
    #[arg(long, value_name = "RUN", conflicts_with = "goal", value_parser = parse_id)]
    pub resume: Option<String>,
    /// What the customer asks (not with --resume).
    #[arg(value_name = "GOAL", required_unless_present = "resume")]
    pub goal: Option<String>,
    /// The order backend (default: beside a SQLite run database, `<stem>.orders.db`; required
    /// with a postgres:// URL, which has no "beside"). Created with its seeded orders if missing.
    #[arg(long, value_name = "PATH")]
    pub backend: Option<PathBuf>,
    /// A new run's cap on input plus output tokens over all its model calls (default
    /// 2000000; 0: none). The run ends `limit_tokens` before a call that would pass it. A
    /// resumed run keeps the limits it started with.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// A new run's cap on its estimated cost in dollars (default 5.00; 0: none), for a model
    /// with prices in this build (Anthropic's); the run ends `limit_cost` before a call that
    /// would pass it. A resumed run keeps the limits it started with.
    #[arg(long, value_name = "DOLLARS", value_parser = parse_cost)]
    pub max_cost: Option<i64>,
}

/// Tokens a new run may use unless `--max-tokens` says otherwise.
pub const DEFAULT_MAX_TOKENS: i64 = 2_000_000;
/// A new run's cost cap in micros unless `--max-cost` says otherwise.
pub const DEFAULT_MAX_COST_MICROS: i64 = 5_000_000;

fn parse_cost(s: &str) -> Result<i64, String> {
    crate::providers::shared::parse_dollars(s)
        .map_err(|_| "not a dollar amount such as 5 or 2.50".to_string())
}

/// The limits of a new run: agentrt's defaults, with a cap on tokens and on cost (found from
/// outside: a server reporting 2^63 tokens a reply was bounded only by the step count, the run
/// ending COMPLETED at an estimated $9 trillion).
fn new_run_limits(a: &AgentArgs) -> crate::runtime::types::Limits {
    let mut l = default_limits();
    l.max_total_tokens = a
        .max_tokens
        .map_or(DEFAULT_MAX_TOKENS, |n| i64::try_from(n).unwrap_or(i64::MAX));
    l.max_estimated_cost_micros = a.max_cost.unwrap_or(DEFAULT_MAX_COST_MICROS);
    l
}

/// The terminal tool the model ends a run with.
pub const FINISH: &str = super::AGENT_FINISH;

const SYSTEM: &str = "You are an order-support assistant acting for one signed-in customer. \
Use the tools to look orders up and act on them; every change is checked, and some wait for a \
person's approval. Call exactly one tool per reply. When the request is handled (or cannot be), \
call `finish` with a short summary for the customer.";

fn failed(m: impl Into<String>) -> CommandError {
    CommandError::Failed(m.into())
}

/// Reads a key file: a regular file, owned by this user, that nobody else may read or write.
pub fn read_key_file(path: &Path) -> Result<Secret, CommandError> {
    let shown = super::text::path(path, 400);
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| failed(format!("cannot read the key file {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(failed(format!(
            "the key file {shown} is not a regular file"
        )));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(failed(format!(
                "the key file {shown} belongs to another user; refusing to use it"
            )));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(failed(format!(
                "the key file {shown} is readable by others (mode {:04o}); refusing it: chmod 600 it",
                meta.mode() & 0o7777
            )));
        }
    }
    // A key is a short token: the file is read no further than this, whatever its size.
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(
            std::fs::File::open(path)
                .map_err(|e| failed(format!("cannot read the key file {shown}: {e}")))?,
            KEY_FILE_MAX + 1,
        ),
        &mut bytes,
    )
    .map_err(|e| failed(format!("cannot read the key file {shown}: {e}")))?;
    if bytes.len() as u64 > KEY_FILE_MAX {
        return Err(failed(format!(
            "the key file {shown} is larger than {KEY_FILE_MAX} bytes, which no API key is: name the file that holds the key"
        )));
    }
    let key = String::from_utf8_lossy(&bytes);
    let key = key.trim();
    if key.is_empty() {
        return Err(failed(format!("the key file {shown} is empty")));
    }
    check_key(key, &format!("the key file {shown}"))?;
    Ok(Secret::new(key))
}

/// The most a key file may hold.
const KEY_FILE_MAX: u64 = 16 * 1024;

/// A key goes into an HTTP header: anything but visible ASCII (a line break inside it, a
/// control, a non-ASCII character) is refused before a run is written, naming where it came
/// from and never the key.
fn check_key(key: &str, whence: &str) -> Result<(), CommandError> {
    if key.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        Ok(())
    } else {
        Err(failed(format!(
            "{whence} holds a character an API key does not (a line break, space, control or non-ASCII character); nothing was sent"
        )))
    }
}

/// Builds the model named `PROVIDER:MODEL`, with `env` for the environment.
pub fn model_for(
    a: &AgentArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Arc<dyn Model>, crate::providers::shared::PriceTable), CommandError> {
    let Some((provider, model)) = a
        .model
        .split_once(':')
        .filter(|(p, m)| !p.is_empty() && !m.is_empty())
    else {
        return Err(CommandError::Usage(format!(
            "agent: --model {} is not PROVIDER:MODEL (openai, anthropic or ollama)",
            clean(&a.model, 200)
        )));
    };
    let key = match &a.model_key_file {
        Some(p) => read_key_file(p)?,
        None => Secret::default(),
    };
    let base = a.model_base_url.clone().unwrap_or_default();
    // A provider that needs a key refuses to start without one from the file or `var`.
    let no_key = |var: &str, who: &str| {
        if key.is_empty() && env(var).is_none_or(|k| k.is_empty()) {
            return Err(failed(format!(
                "no API key for {who}: set {var} or pass --model-key-file"
            )));
        }
        if key.is_empty()
            && let Some(k) = env(var)
        {
            check_key(&k, var)?;
        }
        Ok(())
    };
    match provider {
        "openai" => {
            let default_base = base.trim_end_matches('/').is_empty()
                || base.trim_end_matches('/') == openai::DEFAULT_BASE_URL;
            if default_base {
                no_key("OPENAI_API_KEY", "OpenAI")?;
            }
            let cfg = openai::Config {
                model: model.into(),
                base_url: base,
                api_key: key,
                ..Default::default()
            };
            // OpenAI's prices are not in this build's table: the run is not priced.
            Ok((
                built(openai::OpenAi::new_with_env(cfg, env))?,
                Default::default(),
            ))
        }
        "anthropic" => {
            no_key("ANTHROPIC_API_KEY", "Anthropic")?;
            let cfg = anthropic::Config {
                model: model.into(),
                base_url: base,
                api_key: key,
                ..Default::default()
            };
            let m = built(anthropic::Anthropic::new_with_env(cfg, env))?;
            Ok((m, anthropic::prices()))
        }
        "ollama" => {
            let cfg = ollama::Config {
                model: model.into(),
                host: base,
                ..Default::default()
            };
            let m = built(ollama::Ollama::new_with_env(cfg, env))?;
            Ok((m, ollama::free(&[model])))
        }
        other => Err(CommandError::Usage(format!(
            "agent: unknown provider {}: use openai, anthropic or ollama",
            clean(other, 64)
        ))),
    }
}

/// An adapter as the run's model, or why it could not be built.
fn built<M: Model + 'static>(m: Result<M, String>) -> Result<Arc<dyn Model>, CommandError> {
    match m {
        Ok(m) => Ok(Arc::new(m)),
        Err(e) => Err(failed(clean(&e, 400))),
    }
}

/// The consumer's policy, plus `finish` (read-only, ends the run) allowed.
struct AgentPolicy {
    inner: ConsumerPolicy,
}

impl Policy for AgentPolicy {
    fn evaluate(&self, req: &PolicyRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        if req.tool == FINISH {
            return Ok(rpolicy::allow("finish: ends the run, changes nothing"));
        }
        self.inner.evaluate(req, view)
    }
    fn id(&self) -> Option<String> {
        self.inner.id()
    }
}

fn finish_tool() -> Arc<dyn crate::runtime::tools::Tool> {
    FnTool::new(
        ToolDef {
            name: FINISH.into(),
            description: "End the conversation with a short summary for the customer.".into(),
            input_schema: br#"{"type":"object","properties":{"summary":{"type":"string","maxLength":2000}},"required":["summary"],"additionalProperties":false}"#.to_vec(),
            side_effect: SideEffect::ReadOnly,
            timeout: std::time::Duration::from_secs(5),
            terminal: true,
        },
        |c| {
            let args = c.args.clone();
            Box::pin(async move {
                Ok(ToolOutput {
                    content: args,
                    summary: "finished".into(),
                })
            })
        },
    )
}

pub fn run(db: Option<&Path>, a: &AgentArgs, out: &mut Out) -> Result<(), CommandError> {
    let db = db.ok_or_else(|| CommandError::Usage("agent: --db PATH is required".into()))?;
    if a.resume.is_none() && a.goal.as_deref().is_none_or(|g| g.trim().is_empty()) {
        return Err(CommandError::Usage("agent: the GOAL is empty".into()));
    }
    if a.resume.is_some() && (a.max_tokens.is_some() || a.max_cost.is_some()) {
        return Err(CommandError::Usage(
            "agent: --max-tokens and --max-cost set a new run's limits; a resumed run keeps the limits it started with".into(),
        ));
    }
    // A variable that is set but not UTF-8 is read as U+FFFD, so it is refused for what it
    // holds (a key no header carries, a host that is not one) rather than taken as unset.
    let (model, prices) = model_for(a, &|k| match std::env::var(k) {
        Ok(v) => Some(v),
        Err(std::env::VarError::NotUnicode(_)) => Some("\u{fffd}".into()),
        Err(std::env::VarError::NotPresent) => None,
    })?;
    let on_pg = db.to_str().is_some_and(crate::runtime::store::is_pg_url);
    // Beside a SQLite file by default; a server has nothing beside it.
    let bpath = a
        .backend
        .clone()
        .or_else(|| (!on_pg).then(|| backend_beside(db)));
    refuse_before_creating(db, on_pg, bpath.as_deref(), a)?;
    // The URL is judged (and named, its password hidden) before a missing --backend is.
    let (store, shown) = open_db(db)?;
    let bpath = bpath.ok_or_else(|| {
        CommandError::Usage(
            "agent: on PostgreSQL, name the order backend with --backend PATH (a run database on a server has nothing beside it)".into(),
        )
    })?;
    let backend = if std::fs::symlink_metadata(&bpath).is_ok() {
        Backend::open(&bpath)
    } else {
        Backend::create_new(&bpath)
    }
    .map_err(|e| {
        failed(format!(
            "order backend {}: {}",
            super::text::path(&bpath, 400),
            super::text::naming(&e.to_string().into(), &[&bpath], 400)
        ))
    })?;
    let backend = Arc::new(backend);
    let customer = customer_of(a, &backend)?;
    let known = backend
        .owners()
        .map_err(|e| failed(clean(&e.to_string(), 400)))?
        .iter()
        .any(|(_, c)| *c == customer);
    if !known {
        return Err(failed(format!(
            "no customer {} in the order backend {}",
            clean(&customer, 64),
            super::text::path(&bpath, 400)
        )));
    }
    let catalog = Arc::new(Catalog::new().map_err(|e| failed(clean(&e, 400)))?);
    let dispatcher = Arc::new(Dispatcher::new(
        catalog,
        backend.clone(),
        ConsequencePolicy::default(),
        DispatcherOptions::default(),
    ));
    let mut tools =
        adapter::registry(&dispatcher).map_err(|e| failed(clean(&e.to_string(), 400)))?;
    tools
        .register(finish_tool())
        .map_err(|e| failed(e.to_string()))?;
    let mut setup = ModelSetup::new(model);
    setup.prices = prices.into_iter().collect();
    setup.max_retries = 2;
    let driver = Config::new(
        store,
        tools,
        Arc::new(AgentPolicy {
            inner: ConsumerPolicy::new(dispatcher.clone()),
        }),
    )
    .agent(Arc::new(ModelAgent {
        options: Options::new(Arc::new({
            let customer = customer.clone();
            move |i| format!("Customer {customer} asks: {}", i.goal)
        })),
        system: SYSTEM.into(),
        max_output_tokens: 1024,
    }))
    .lease_owner(crate::consumer::adapter::on_this_host("countersign-agent"))
    .model(setup)
    .build()
    .map_err(|e| failed(clean(&e.to_string(), 400)))?;
    let id = match &a.resume {
        Some(id) => id.clone(),
        None => {
            let id = random_id();
            backend
                .put_session(&Session::full(&id, &customer), "")
                .map_err(|e| failed(clean(&e.to_string(), 400)))?;
            id
        }
    };
    let goal = a.goal.clone().unwrap_or_default();
    let run = std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| failed(e.to_string()))?;
            let run = rt.block_on(async {
                let work = async {
                    if a.resume.is_some() {
                        driver.resume(&id).await
                    } else {
                        driver.start_with_id(&id, &goal, new_run_limits(a)).await
                    }
                };
                tokio::select! {
                    run = work => Ok(run),
                    signal = stop_signal() => Err(signal),
                }
            });
            match run {
                Ok(run) => run.map_err(|e| {
                    let db = shown.as_deref().unwrap_or(db);
                    let what = said(&e.said(), 400);
                    if left_running(&e) {
                        failed(format!("{what}\n{}", after_failure(db, a, &id)))
                    } else {
                        failed(what)
                    }
                }),
                Err(signal) => Err(interrupted(shown.as_deref().unwrap_or(db), a, &id, signal)),
            }
        })
        .join()
        .unwrap_or_else(|_| Err(failed("the agent's thread panicked")))
    })?;
    out.line(&outcome_line(&run))?;
    match run.status {
        RunStatus::Completed => Ok(()),
        RunStatus::WaitingForApproval => {
            out.line(&waiting_hint(shown.as_deref().unwrap_or(db), a, &run.id))?;
            if shown.is_some() {
                out.line("(the URL is printed without a password: give yours through PGPASSWORD or the password file)")?;
            }
            Ok(())
        }
        _ if run.reason == "model_unavailable" => Err(failed(format!(
            "the model could not be reached or answered unusably: {}",
            clean(&run.reason_detail, 400)
        ))),
        _ => Err(failed(format!(
            "run {} ended {}",
            clean(&run.id, 64),
            clean(run.status.as_str(), 64)
        ))),
    }
}

/// The customer a run acts for: `--customer` (default `cu_ana`) for a new run; for a resumed
/// one, the customer its session records (the tools act for it whatever the prompt says, so
/// the prompt must say it too), and a `--customer` naming another is refused.
fn customer_of(a: &AgentArgs, backend: &Backend) -> Result<String, CommandError> {
    const DEFAULT: &str = "cu_ana";
    let given = || a.customer.clone().unwrap_or_else(|| DEFAULT.into());
    let Some(id) = &a.resume else {
        return Ok(given());
    };
    let session = backend
        .session(id)
        .map_err(|e| failed(clean(&e.to_string(), 400)))?;
    match (session, &a.customer) {
        (Some(s), Some(c)) if *c != s.user_id => Err(CommandError::Usage(format!(
            "run {} acts for customer {}; --customer {} names another (leave --customer out with --resume)",
            clean(id, 64),
            clean(&s.user_id, 64),
            clean(c, 64)
        ))),
        (Some(s), _) => Ok(s.user_id),
        (None, _) => Ok(given()),
    }
}

/// The first SIGINT or SIGTERM this process gets (Ctrl-C, `kill`, a supervisor), as its
/// number; never, where the handlers cannot be installed.
async fn stop_signal() -> i32 {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => tokio::select! {
            _ = int.recv() => 2,
            _ = term.recv() => 15,
        },
        _ => std::future::pending().await,
    }
}

/// The run was stopped by `signal` mid-way (a model call or a tool in flight): it stays
/// RUNNING under this process's lease, which lapses within the lease's TTL, and a resume then
/// reconciles whatever was in flight (agentrt's crash semantics). Says so, with the run's id
/// and the command that continues it, and exits 128 + the signal.
fn interrupted(db: &Path, a: &AgentArgs, run: &str, signal: i32) -> CommandError {
    let then = match continue_command(db, a, run) {
        Ok(cmd) => format!("then continue it with:\n  {cmd}"),
        Err(why) => format!("{why}, so no command can be printed for it"),
    };
    CommandError::Signalled {
        signal,
        message: format!(
            "run {} stays RUNNING under this process's lease until it lapses (at most {} s); {then}",
            clean(run, 64),
            crate::runtime::driver::DEFAULT_LEASE_TTL.as_secs()
        ),
    }
}

/// Whether the database failed under the run (a lost connection, a disk error, a lock never
/// given), which may leave it RUNNING for a resume, rather than refusing it as it stood.
fn left_running(e: &RuntimeError) -> bool {
    matches!(
        e,
        RuntimeError::Store(
            StoreError::Backend(_)
                | StoreError::Sqlite { .. }
                | StoreError::Io { .. }
                | StoreError::Locked { .. }
        )
    )
}

/// After the database failed under the run: its id, and the command that continues it once
/// the lease this process held has lapsed (the run may not have been written at all, when the
/// failure came first; the line says so).
fn after_failure(db: &Path, a: &AgentArgs, run: &str) -> String {
    let then = match continue_command(db, a, run) {
        Ok(cmd) => format!("then continue it with:\n  {cmd}"),
        Err(why) => format!("{why}, so no command can be printed for it"),
    };
    format!(
        "run {} (if it was written before the failure) stays RUNNING under this process's lease until it lapses (at most {} s); {then}",
        clean(run, 64),
        crate::runtime::driver::DEFAULT_LEASE_TTL.as_secs()
    )
}

/// `agent … --resume RUN` with the model, its base URL, key file and backend this run was
/// started with, every word quoted by [`shell`]; `Err`: which part cannot be typed.
fn continue_command(db: &Path, a: &AgentArgs, run: &str) -> Result<String, String> {
    Ok(words(db, a, run)?.1)
}

/// What to run next for a paused run: decide it, then continue it with the same model. Every
/// word a shell would read is quoted by [`shell`] (never through the terminal escaper), so the
/// lines run as printed; where the database path cannot be typed, the sentence says so.
fn waiting_hint(db: &Path, a: &AgentArgs, run: &str) -> String {
    match words(db, a, run) {
        Ok((decide, resume)) => format!(
            "the run waits for a person; decide with:\n  {decide}\nthen continue it with:\n  {resume}"
        ),
        Err(why) => format!(
            "the run waits for a person (decide it in the console); {why}, so no command can be printed for it"
        ),
    }
}

/// The decision and the continuation commands for `run`, as shell words.
fn words(db: &Path, a: &AgentArgs, run: &str) -> Result<(String, String), String> {
    {
        let r = shell::id_word(run.as_bytes()).map_err(|w| format!("the run id {}", w.why()))?;
        let mut rest = format!(
            "agent --model {}",
            shell::word(a.model.as_bytes()).map_err(|w| format!("the model {}", w.why()))?
        );
        if let Some(u) = &a.model_base_url {
            let u = shell::word(u.as_bytes()).map_err(|w| format!("the base URL {}", w.why()))?;
            rest.push_str(&format!(" --model-base-url {u}"));
        }
        if let Some(k) = &a.model_key_file {
            use std::os::unix::ffi::OsStrExt;
            let k = shell::word(k.as_os_str().as_bytes())
                .map_err(|w| format!("the key file's path {}", w.why()))?;
            rest.push_str(&format!(" --model-key-file {k}"));
        }
        if let Some(b) = &a.backend {
            use std::os::unix::ffi::OsStrExt;
            let b = shell::word(b.as_os_str().as_bytes())
                .map_err(|w| format!("the backend's path {}", w.why()))?;
            rest.push_str(&format!(" --backend {b}"));
        }
        let decide = shell::command(db, &format!("approve {r}"))?;
        let resume = shell::command(db, &format!("{rest} --resume {r}"))?;
        Ok((decide, resume))
    }
}

/// What would fail only after the run database and the order backend were created, refused
/// before either is (found from outside: `--resume nope` with a mistyped `--db`, or an unknown
/// `--customer`, left two new empty databases behind and blamed the run id): a resume needs
/// the database and the backend its run is in, and a new backend holds only the seeded
/// customers.
fn refuse_before_creating(
    db: &Path,
    on_pg: bool,
    bpath: Option<&Path>,
    a: &AgentArgs,
) -> Result<(), CommandError> {
    let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    if a.resume.is_some() && !on_pg && !exists(db) {
        return Err(failed(format!(
            "no run database at {}: --resume continues a run in the database it started in; nothing was created",
            super::text::path(db, 400)
        )));
    }
    let Some(bpath) = bpath.filter(|b| !exists(b)) else {
        return Ok(());
    };
    if a.resume.is_some() {
        return Err(failed(format!(
            "no order backend at {}: a resumed run's orders are in the backend it started with (--backend); nothing was created",
            super::text::path(bpath, 400)
        )));
    }
    if let Some(c) = &a.customer
        && !crate::consumer::backend::SEED
            .iter()
            .any(|(_, who, _, _)| who == c)
    {
        let mut seeded: Vec<&str> = crate::consumer::backend::SEED.iter().map(|s| s.1).collect();
        seeded.sort_unstable();
        seeded.dedup();
        return Err(failed(format!(
            "no customer {} in a new order backend (its customers are {}); nothing was created",
            clean(c, 64),
            seeded.join(", ")
        )));
    }
    Ok(())
}

/// The run database `db` names: SQLite's (opened or created), or with a postgres:// URL
/// PostgreSQL's (never migrated: its schema comes from its owner), with the redacted URL the
/// printed commands name it by.
fn open_db(db: &Path) -> Result<(RunDb, Option<PathBuf>), CommandError> {
    #[cfg(feature = "postgres")]
    if let Some(url) = db.to_str().filter(|s| crate::pgstore::is_pg_url(s)) {
        let url = crate::pgstore::PgUrl::parse(url)
            .map_err(|e| CommandError::Usage(clean(&e.to_string(), 600)))?;
        let store = crate::pgstore::PgStore::open_existing(&url)
            .map_err(|e| failed(clean(&e.to_string(), 4000)))?;
        return Ok((
            Arc::new(store).into(),
            Some(PathBuf::from(url.for_commands())),
        ));
    }
    let store = Store::open(db).map_err(|e| failed(super::text::said(&e.said(), 400)))?;
    Ok((Arc::new(store).into(), None))
}

fn random_id() -> String {
    use rand::RngCore;
    let mut b = [0u8; 8];
    rand::rng().fill_bytes(&mut b);
    format!("run_{}", hex::encode(b))
}

/// A run id given to `--resume`: not empty, and not something that looks like a flag.
fn parse_id(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("an id cannot be empty".into());
    }
    if s.starts_with('-') {
        // The value is not echoed: clap prints this to the terminal, and the value is not ours.
        return Err("an id cannot start with '-' (it looks like a flag)".into());
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> AgentArgs {
        AgentArgs {
            model: "openai:m".into(),
            model_base_url: None,
            model_key_file: None,
            customer: None,
            resume: None,
            goal: None,
            backend: None,
            max_tokens: None,
            max_cost: None,
        }
    }

    /// Where no command can be typed (a database name ending in a line feed), the hints say
    /// why once, not the clause twice; otherwise they print the command.
    #[test]
    fn hints_say_why_no_command_is_printed_once() {
        let db = Path::new("runs.db\n");
        let wait = waiting_hint(db, &args(), "run_1");
        assert_eq!(
            wait.matches("so no command can be printed").count(),
            1,
            "{wait}"
        );
        assert!(
            wait.contains("the database path ends with a line feed"),
            "{wait}"
        );
        let msg = interrupted(db, &args(), "run_1", 2).into_message();
        assert_eq!(
            msg.matches("so no command can be printed").count(),
            1,
            "{msg}"
        );
        let msg = interrupted(Path::new("runs.db"), &args(), "run_1", 15).to_string();
        assert!(
            msg.ends_with("countersign --db runs.db agent --model openai:m --resume run_1"),
            "{msg}"
        );
    }
}
