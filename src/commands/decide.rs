//! `approve` / `reject` / `deny` / `cancel`: print the approval in full, get consent, then decide bound
//! to the hash of exactly what was printed.

use std::io::{BufRead, IsTerminal};
use std::path::Path;

use serde_json::json;

use super::CommandError;
use super::approval;
use super::cli::{CancelArgs, DecideArgs};
use super::events::event_line;
use super::open::open;
use super::out::{Out, Raws, approval_json, summary_json};
use super::shell;
use super::text::{clean, ident, said};
use crate::runtime::operator::{self, Cancelled, OperatorError, SelectError};
use crate::runtime::store::{RunStore, Store, StoreError};
use crate::runtime::types::{Approval, Event, Key, Run, RunStatus, Timestamp};

/// What `approve`, `reject`, `deny` and `cancel` work on: the operator's store (its decisions
/// and cancels are the runtime's [`operator`] functions, written once over [`RunStore`]) and
/// the reads that show an approval before it is decided. SQLite's [`Store`], and PostgreSQL's
/// `PgStore` with the `postgres` feature.
pub(crate) trait Reviewing: RunStore {
    /// The stored size in bytes of an approval's request; `None` if there is no such approval.
    fn request_bytes(&self, run: &[u8], approval: &[u8]) -> Result<Option<i64>, StoreError>;
    /// A run's pending approvals (at most `max`) with their request sizes in bytes.
    fn pending_request_bytes(&self, run: &[u8], max: i64) -> Result<Vec<(Key, i64)>, StoreError>;
    /// One approval as a page shows it (a request too large to read replaced by a stand-in).
    fn approval_capped(&self, run: &[u8], approval: &[u8]) -> Result<Option<Approval>, StoreError>;
    /// The reason the policy gave when it asked for the approval.
    fn approval_reason(&self, run: &[u8], approval: &[u8]) -> Result<String, StoreError>;
    /// Whether `countersign agent` made the run (its tools include the agent's `finish`).
    fn agent_made(&self, run: &[u8]) -> bool;
}

impl Reviewing for Store {
    fn request_bytes(&self, run: &[u8], approval: &[u8]) -> Result<Option<i64>, StoreError> {
        Store::request_bytes(self, run, approval)
    }
    fn pending_request_bytes(&self, run: &[u8], max: i64) -> Result<Vec<(Key, i64)>, StoreError> {
        Store::pending_request_bytes(self, run, max)
    }
    fn approval_capped(&self, run: &[u8], approval: &[u8]) -> Result<Option<Approval>, StoreError> {
        Store::approval_capped(self, run, approval)
    }
    fn approval_reason(&self, run: &[u8], approval: &[u8]) -> Result<String, StoreError> {
        Store::approval_reason(self, run, approval)
    }
    fn agent_made(&self, run: &[u8]) -> bool {
        super::resume::tools_of(self, run).is_ok_and(|t| t.iter().any(|n| n == super::AGENT_FINISH))
    }
}

#[cfg(feature = "postgres")]
impl Reviewing for crate::pgstore::PgStore {
    fn request_bytes(&self, run: &[u8], approval: &[u8]) -> Result<Option<i64>, StoreError> {
        crate::pgstore::PgStore::request_bytes(self, run, approval)
    }
    fn pending_request_bytes(&self, run: &[u8], max: i64) -> Result<Vec<(Key, i64)>, StoreError> {
        crate::pgstore::PgStore::pending_request_bytes(self, run, max)
    }
    fn approval_capped(&self, run: &[u8], approval: &[u8]) -> Result<Option<Approval>, StoreError> {
        crate::pgstore::PgStore::approval_capped(self, run, approval)
    }
    fn approval_reason(&self, run: &[u8], approval: &[u8]) -> Result<String, StoreError> {
        crate::pgstore::PgStore::approval_reason(self, run, approval)
    }
    fn agent_made(&self, run: &[u8]) -> bool {
        super::resume::pg::tools_of(self, run)
            .is_ok_and(|t| t.iter().any(|n| n == super::AGENT_FINISH))
    }
}

/// The PostgreSQL database `db` names, opened (never migrated) for a reviewer's command,
/// with the redacted URL its printed commands name it by; `None` for a SQLite path.
#[cfg(feature = "postgres")]
fn open_pg(
    db: &Path,
) -> Result<Option<(crate::pgstore::PgStore, std::path::PathBuf)>, CommandError> {
    let Some(url) = db.to_str().filter(|s| crate::pgstore::is_pg_url(s)) else {
        return Ok(None);
    };
    let url = crate::pgstore::PgUrl::parse(url)
        .map_err(|e| CommandError::Usage(clean(&e.to_string(), 600)))?;
    let store = crate::pgstore::PgStore::open_existing(&url)
        .map_err(|e| CommandError::Failed(clean(&e.to_string(), 4000)))?;
    let shown = std::path::PathBuf::from(url.for_commands());
    Ok(Some((store, shown)))
}

/// Approve, reject, or deny with feedback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Approve,
    Reject,
    Deny,
}

impl Verb {
    pub fn name(self) -> &'static str {
        match self {
            Verb::Approve => "approve",
            Verb::Reject => "reject",
            Verb::Deny => "deny",
        }
    }
}

/// Whether a person can be asked: stdin is a terminal (so `/dev/null`, a file or a pipe is not).
pub fn interactive() -> bool {
    std::io::stdin().is_terminal()
}

/// The consent rule, checked before the database is opened: naming the approval or `--yes` is
/// consent; otherwise a person must be there to type `y`.
pub fn check_consent(verb: Verb, a: &DecideArgs, json_out: bool) -> Result<(), CommandError> {
    if a.consent.approval.is_some() || a.consent.yes || (interactive() && !json_out) {
        return Ok(());
    }
    Err(CommandError::Usage(format!(
        "{0}: refusing without --approval, --yes, or an interactive terminal to confirm at; pass --approval <id> or --yes",
        verb.name()
    )))
}

/// One deciding command as given: its verb and arguments, who decides, and whether the answer
/// is JSON.
#[derive(Clone, Copy)]
struct Decision<'a> {
    verb: Verb,
    args: &'a DecideArgs,
    by: &'a str,
    json_out: bool,
}

pub fn run(
    db: &Path,
    json_out: bool,
    verb: Verb,
    a: &DecideArgs,
    by: &str,
    out: &mut Out,
) -> Result<(), CommandError> {
    let d = Decision {
        verb,
        args: a,
        by,
        json_out,
    };
    #[cfg(feature = "postgres")]
    if let Some((store, shown)) = open_pg(db)? {
        return decide_on(&store, &shown, d, out);
    }
    decide_on(&open(db, true)?, db, d, out)
}

/// [`run`] on an open store; `db` is how printed commands name the database.
fn decide_on<S: Reviewing>(
    store: &S,
    db: &Path,
    d: Decision<'_>,
    out: &mut Out,
) -> Result<(), CommandError> {
    let Decision {
        verb,
        args: a,
        by,
        json_out,
    } = d;
    let name = verb.name();
    let run_key = named_run(a.select.run.as_ref(), name)?;
    refuse_unshowable(store, db, name, run_key, a, json_out, out)?;
    let run = run_key.as_bytes();
    let approval = a.consent.approval.as_ref().map(Key::as_bytes);
    let ap = operator::pending_approval(store, run, approval).map_err(|e| {
        CommandError::Failed(format!(
            "{name}: {}",
            select_message(store, run, approval, &e)
        ))
    })?;
    if !json_out {
        let reason = store
            .approval_reason(run, ap.id_bytes())
            .unwrap_or_default();
        let (text, shown) = approval::render(&ap, db, &reason);
        out.raw(&text)?;
        if shown.cut > 0 || shown.escapes > 0 {
            let again = match run_command(db, run, "show") {
                Ok(cmd) => format!("the same text again: {cmd}"),
                Err(why) => why,
            };
            out.line(&format!(
                "note: {} field(s) above were cut head-and-tail and {} escape(s) are shown; the console shows every field whole; {again}",
                shown.cut, shown.escapes,
            ))?;
        }
    }
    if a.consent.approval.is_none() && !a.consent.yes {
        out.raw(&format!(
            "{name} approval {} of run {}? [y/N] ",
            ident(ap.id_bytes(), 64),
            ident(run, 64)
        ))?;
        out.flush()?;
        let mut line = String::new();
        let n = std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| CommandError::Failed(format!("{name}: reading the answer: {e}")))?;
        if n == 0 {
            return Err(CommandError::Usage(format!(
                "{name}: no answer was typed; pass --approval <id> or --yes"
            )));
        }
        let answer = line.trim().to_ascii_lowercase();
        if answer != "y" && answer != "yes" {
            return Err(CommandError::Failed(format!(
                "{name}: declined at the prompt"
            )));
        }
    }
    let note = a.note.as_deref().unwrap_or("");
    let now = Timestamp::now();
    let decided = match verb {
        Verb::Approve => {
            operator::approve_shown(store, run, ap.id_bytes(), &ap.hash, by, note, now)
        }
        Verb::Reject => operator::reject_shown(store, run, ap.id_bytes(), &ap.hash, by, note, now),
        Verb::Deny => operator::deny_shown(store, run, ap.id_bytes(), &ap.hash, by, note, now),
    }
    .map_err(|e| decide_error(name, ap.id_bytes(), e))?;
    trace(&decided.events);
    if json_out {
        let mut raws = Raws::default();
        let doc = json!({
            "run": summary_json(&decided.run, b""),
            "approval": approval_json(&decided.approval, &mut raws),
        });
        return out.json(&doc, &raws);
    }
    out.line(&format!(
        "approval {}: {} by {}",
        ident(decided.approval.id_bytes(), 64),
        decided.approval.status.as_str(),
        clean(by, 200)
    ))?;
    out.line(&run_line(&decided.run))?;
    if let Some(p) = store.proxy_call(decided.run.id_bytes()).ok().flatten() {
        // An MCP proxy's call: no resume; its host collects the decision (docs/mcp.md).
        let session = ident(&p.session, 64);
        out.line(&match verb {
            Verb::Approve => format!(
                "an MCP proxy's call: the host's call still held runs it now, else the host's next identical call (proxy session {session}) does, once; nothing is resumed"
            ),
            Verb::Reject => format!(
                "an MCP proxy's call: the host (proxy session {session}) is answered REJECTED with the note"
            ),
            Verb::Deny if decided.run.status == RunStatus::Cancelled => format!(
                "an MCP proxy's call has no agent to continue, so it was rejected with your note: the host (proxy session {session}) is answered REJECTED with it, and an identical call within the repeat window the same"
            ),
            Verb::Deny => format!(
                "an MCP proxy's call: the host (proxy session {session}) is told nothing until its next identical call"
            ),
        })?;
        return Ok(());
    }
    // A decision that leaves the run for its program: say what continues it.
    let head = match (verb, &decided.run.status) {
        (Verb::Approve, RunStatus::WaitingForApproval) => "the run stays waiting until it is",
        (Verb::Deny, RunStatus::Interrupted) => {
            "the call did not run; the agent is told the note when the run is"
        }
        _ => return Ok(()),
    };
    let id = decided.run.id_bytes();
    if store.agent_made(id) {
        out.line(&format!(
            "{head} continued: it is a `countersign agent` run, so with the `agent ... --resume` line `agent` printed (the model is not stored with the run)"
        ))
    } else {
        // `resume` runs the example consumer's tools.
        let worker = if verb == Verb::Deny {
            " (a worker does it at once)"
        } else {
            ""
        };
        out.line(&match run_command(db, id, "resume") {
            Ok(cmd) => format!("{head} resumed{worker}: {cmd}"),
            Err(why) => format!("{head} resumed; {why}"),
        })
    }
}

pub fn cancel(
    db: &Path,
    json_out: bool,
    a: &CancelArgs,
    by: &str,
    out: &mut Out,
) -> Result<(), CommandError> {
    #[cfg(feature = "postgres")]
    if let Some((store, _)) = open_pg(db)? {
        return print_cancelled(&cancel_on(&store, a, by)?, json_out, out);
    }
    print_cancelled(&cancel_on(&open(db, true)?, a, by)?, json_out, out)
}

/// [`cancel`] on an open store: the run cancelled, its events traced.
fn cancel_on<S: RunStore>(store: &S, a: &CancelArgs, by: &str) -> Result<Cancelled, CommandError> {
    let run = named_run(a.select.run.as_ref(), "cancel")?;
    let done =
        operator::cancel(store, run, by, &a.note, Timestamp::now()).map_err(|e| match e {
            OperatorError::RunFinished { .. } => CommandError::Failed(format!(
                "run is already finished: {}",
                said(&e.said(), 4000)
            )),
            other => CommandError::Failed(said(&other.said(), 4000)),
        })?;
    trace(&done.events);
    Ok(done)
}

/// What [`cancel`] prints of the run it cancelled.
fn print_cancelled(done: &Cancelled, json_out: bool, out: &mut Out) -> Result<(), CommandError> {
    if json_out {
        return out.json(
            &json!({"run": summary_json(&done.run, b"")}),
            &Raws::default(),
        );
    }
    out.line(&run_line(&done.run))
}

/// The RUN a one-run command was given (clap requires it unless rows are selected, and
/// selected rows never reach the one-run path).
fn named_run<'a>(run: Option<&'a Key>, name: &str) -> Result<&'a Key, CommandError> {
    run.ok_or_else(|| CommandError::Usage(format!("{name}: name a RUN")))
}

/// `countersign --db PATH VERB RUN` with every word quoted for a POSIX shell, or why no such
/// command can be printed. Printable ASCII only (see [`shell`]); callers print it last on its
/// line so what a person copies ends where the line ends.
fn run_command(db: &Path, run: impl AsRef<[u8]>, verb: &str) -> Result<String, String> {
    #[cfg(feature = "postgres")]
    if db.to_str().is_some_and(crate::pgstore::is_pg_url) && verb != "show" {
        if verb == "resume" {
            // It runs there (decision 0083), but needs the run's order backend, which a
            // command deciding on a server does not know.
            return Err(
                "no `resume` command is printed: on PostgreSQL, `resume` also needs the example consumer's order backend (--backend PATH)".into(),
            );
        }
        return Err(format!(
            "no `{verb}` command is printed: `{verb}` does not run on PostgreSQL in this build"
        ));
    }
    let r = shell::id_word(run.as_ref())
        .map_err(|why| format!("no `{verb}` command is printed: the run's id {}", why.why()))?;
    shell::command(db, &format!("{verb} {r}"))
        .map_err(|why| format!("no `{verb}` command is printed: {why}"))
}

fn run_line(r: &Run) -> String {
    let mut s = format!("run {}: {}", ident(r.id_bytes(), 64), r.status.as_str());
    if !r.reason.is_empty() {
        s.push_str(&format!(
            " ({})",
            super::text::col(&r.raw_invalid, "reason", &r.reason, 64)
        ));
    }
    s
}

/// The decision's events, one escaped line each, on stderr (stdout stays the report).
fn trace(events: &[Event]) {
    for e in events {
        crate::commands::say_err!("{}", event_line(e));
    }
}

/// Why no approval was selected; an already decided one says by whom, how and when.
fn select_message<S: RunStore>(
    store: &S,
    run: &[u8],
    approval: Option<&[u8]>,
    e: &SelectError,
) -> String {
    if let SelectError::NotPending { .. } = e
        && let Some(approval) = approval
        && let Ok(a) = store.get_approval(run, approval)
    {
        let mut s = format!(
            "approval {} is already {}",
            ident(a.id_bytes(), 64),
            clean(a.status.as_str(), 64)
        );
        if !a.decided_by.is_empty() {
            s.push_str(&format!(" by {}", clean(&a.decided_by, 200)));
        }
        if !a.decided_at.is_zero() {
            s.push_str(&format!(" at {}", super::text::stamp(&a.decided_at)));
        }
        if !a.note.is_empty() {
            s.push_str(&format!(" ({})", clean(&a.note, 400)));
        }
        return s;
    }
    said(&e.said(), 4000)
}

fn decide_error(name: &str, approval_id: &[u8], e: OperatorError) -> CommandError {
    let text = match &e {
        OperatorError::Changed { .. } => format!(
            "{name}: approval {} changed after it was shown; run the command again and read it before deciding",
            ident(approval_id, 64)
        ),
        OperatorError::NotPending { status, .. }
            if *status == crate::runtime::types::ApprovalStatus::Pending =>
        {
            format!("approval cannot be decided: {}", said(&e.said(), 4000))
        }
        OperatorError::NotPending { .. } => {
            format!("approval is already decided: {}", said(&e.said(), 4000))
        }
        OperatorError::Expired { .. } => format!(
            "approval expired before it was decided, so the run is cancelled: {}",
            said(&e.said(), 4000)
        ),
        OperatorError::RunNotWaiting { .. } => {
            format!("run is not waiting for approval: {}", said(&e.said(), 4000))
        }
        _ => said(&e.said(), 4000),
    };
    CommandError::Failed(text)
}

/// A request over [`SHOWN_REQUEST_MAX`] bytes is never read whole (deciding reads it whole to
/// check its hash): print what can be shown of it, say exactly what was not, and refuse
/// before anything is asked or decided (issue 14 item 6).
fn refuse_unshowable<S: Reviewing>(
    store: &S,
    db: &Path,
    name: &str,
    run: &Key,
    a: &DecideArgs,
    json_out: bool,
    out: &mut Out,
) -> Result<(), CommandError> {
    use crate::runtime::store::SHOWN_REQUEST_MAX;
    let candidate = match &a.consent.approval {
        Some(id) => store
            .request_bytes(run.as_bytes(), id.as_bytes())
            .map_err(super::open::fail)?
            .map(|n| (id.clone(), n)),
        None => match store
            .pending_request_bytes(run.as_bytes(), 2)
            .map_err(super::open::fail)?
            .as_slice()
        {
            [one] => Some(one.clone()),
            _ => None,
        },
    };
    let Some((id, bytes)) = candidate else {
        return Ok(());
    };
    if bytes <= SHOWN_REQUEST_MAX {
        return Ok(());
    }
    if !json_out
        && let Some(capped) = store
            .approval_capped(run.as_bytes(), id.as_bytes())
            .map_err(super::open::fail)?
    {
        let reason = store
            .approval_reason(run.as_bytes(), id.as_bytes())
            .unwrap_or_default();
        let (text, _) = approval::render(&capped, db, &reason);
        out.raw(&text)?;
    }
    Err(CommandError::Failed(format!(
        "{name}: approval {} has a request of {bytes} bytes, more than the {SHOWN_REQUEST_MAX} countersign reads to show and check one: above are its kind, tool, times and hash, and none of its arguments; nothing was decided: a person cannot review it here, so end the run with `cancel` if it should not go on",
        ident(id.as_bytes(), 64)
    )))
}
