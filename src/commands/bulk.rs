//! `reject`, `deny` and `cancel` over queue rows chosen by filters instead of one RUN (issue 21):
//! `reject --status waiting --tool issue_refund --older-than 2h --dry-run`.
//!
//! The rows are the queue's (pending approvals of waiting runs), read by key a window at a
//! time. Each is then decided by the shown-hash call with the hash it was listed with
//! (`reject_shown`, `deny_shown`, `cancel_shown`), each in its own compare-and-set
//! transaction, so a row that changed, was decided or whose run moved on after the listing is
//! skipped and reported by name, and nothing else is touched. A request too large to be read
//! whole (decision 0011) is skipped too. `--dry-run` lists the rows and decides nothing.
//! Approving is never done in bulk here: each approval is read in full before it is granted.
//!
//! Exit: 0 when every selected row was decided (or none matched, or a dry run), 1 when any was
//! skipped, 2 for usage.
//!
//! On a `postgres://` URL the same code runs over `PgStore` (issue 19): the queue's windows
//! are the console's reads of it, and each row's decision is the same operator function over
//! the store trait (one transaction, the run's row locked, compare-and-set on the listed hash;
//! decision 0082). Its events go to the inbox, for a sequencer to chain.

use std::io::BufRead;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::CommandError;
use super::cli::Select;
use super::decide::interactive;
use super::open::{fail, open};
use super::out::{Out, Raws, id_field};
use super::text::{clean_bytes, ident, said};
use crate::console::time::span;
use crate::runtime::operator::{self, OperatorError};
use crate::runtime::store::{
    Near, QueueItem, RunStore, SHOWN_REQUEST_MAX, Store, StoreError, WindowPage, capped_request,
};
use crate::runtime::types::{RunStatus, Said, Timestamp};

/// How many queue rows one read takes.
const WINDOW: i64 = 500;

/// What the bulk decisions work on: the operator's store and the queue read a window at a
/// time by key. SQLite's [`Store`], and PostgreSQL's `PgStore` with the `postgres` feature.
trait QueueStore: RunStore {
    /// The queue's window `near` says (`limit` rows from `offset`, kept in place by the last
    /// row read: its index and approval id). `tool` may narrow the rows read (every row of that
    /// tool is among them); the exact comparison is the caller's.
    fn queue_window(&self, tool: Option<&str>, near: Near<&str>) -> QueuePage;
}

/// A window of the queue, as a store reads it.
type QueuePage = Result<WindowPage<QueueItem>, StoreError>;

impl QueueStore for Store {
    fn queue_window(&self, tool: Option<&str>, near: Near<&str>) -> QueuePage {
        // SQLite's queue filter matches the tool's name among the request's fields.
        let filter = tool.unwrap_or_default();
        self.list_queue_rows_near(filter, near)
    }
}

#[cfg(feature = "postgres")]
impl QueueStore for crate::pgstore::PgStore {
    fn queue_window(&self, _tool: Option<&str>, near: Near<&str>) -> QueuePage {
        // PostgreSQL's text filter looks at the request's first 8192 characters only, so a
        // tool named further in would be missed: every row is read and compared exactly.
        self.list_queue_rows_near("", near)
    }
}

/// What is done to each selected row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkVerb {
    Reject,
    Deny,
    Cancel,
}

impl BulkVerb {
    pub fn name(self) -> &'static str {
        match self {
            BulkVerb::Reject => "reject",
            BulkVerb::Deny => "deny",
            BulkVerb::Cancel => "cancel",
        }
    }

    fn done(self) -> &'static str {
        match self {
            BulkVerb::Reject => "rejected",
            BulkVerb::Deny => "denied",
            BulkVerb::Cancel => "cancelled",
        }
    }
}

/// One selected row, as listed.
struct Row {
    run: Vec<u8>,
    approval: Vec<u8>,
    hash: String,
    tool: String,
    /// The presentation's title, else the head of the arguments as stored (bytes: they need
    /// not be UTF-8).
    title: Vec<u8>,
    created: Timestamp,
    expires: Timestamp,
    /// The request's size when it is too large to decide here.
    too_large: Option<i64>,
}

/// The consent rule, checked before the database is opened: a dry run or `--yes` needs no
/// one; otherwise a person must be there to answer.
pub fn check_consent(
    verb: BulkVerb,
    sel: &Select,
    yes: bool,
    json_out: bool,
) -> Result<(), CommandError> {
    // With --json the prompt would land in the JSON on stdout: consent must be --yes.
    if sel.dry_run || yes || (interactive() && !json_out) {
        return Ok(());
    }
    Err(CommandError::Usage(format!(
        "{}: refusing to decide selected rows without --yes or (without --json) an interactive terminal to confirm at; list them first with --dry-run",
        verb.name()
    )))
}

/// Lists the queue rows `sel` matches and, unless it is a dry run, decides each.
pub fn run(
    db: &Path,
    json_out: bool,
    verb: BulkVerb,
    sel: &Select,
    (note, yes, by): (&str, bool, &str),
    out: &mut Out,
) -> Result<(), CommandError> {
    let b = Bulk {
        verb,
        sel,
        note,
        yes,
        by,
        json_out,
    };
    #[cfg(feature = "postgres")]
    if let Some(store) = super::open::pg_store(db)? {
        return run_on(&store, b, out);
    }
    run_on(&open(db, !sel.dry_run)?, b, out)
}

/// One bulk command as given: what is done to which rows, with what note, whether it was
/// confirmed by `--yes`, by whom, and whether the answer is JSON.
#[derive(Clone, Copy)]
struct Bulk<'a> {
    verb: BulkVerb,
    sel: &'a Select,
    note: &'a str,
    yes: bool,
    by: &'a str,
    json_out: bool,
}

/// [`run`] on an open store.
fn run_on<S: QueueStore>(store: &S, b: Bulk<'_>, out: &mut Out) -> Result<(), CommandError> {
    let Bulk {
        verb,
        sel,
        json_out,
        ..
    } = b;
    let now = Timestamp::now();
    let rows = select(store, sel, now)?;
    if !json_out {
        let n = rows.len();
        let (name, which) = (verb.name(), describe(sel));
        out.line(&if sel.dry_run {
            format!("would {name} {n} queue row(s){which}:")
        } else {
            format!("{n} queue row(s) to {name}{which}:")
        })?;
        let verb_word = if sel.dry_run { verb.name() } else { "selected" };
        for r in &rows {
            out.line(&format!("  {verb_word}: {}", row_line(r, now)))?;
        }
    }
    if sel.dry_run || rows.is_empty() {
        if json_out {
            return out.json(&report(verb, sel, &rows, &[], &[]), &Raws::default());
        }
        return out.line(if rows.is_empty() {
            "nothing matches; nothing was decided"
        } else {
            "nothing was decided (--dry-run)"
        });
    }
    if !b.yes {
        ask(verb, rows.len(), out)?;
    }
    let mut done = Vec::new();
    let mut skipped = Vec::new();
    let mut interrupted = 0;
    for r in &rows {
        match decide_one(store, verb, r, b.note, b.by) {
            Ok(status) => {
                let rejected = verb == BulkVerb::Deny && status == RunStatus::Cancelled;
                interrupted += usize::from(status == RunStatus::Interrupted);
                if !json_out && rejected {
                    // deny_shown rejects an MCP proxy's call with the note (decision 0040).
                    out.line(&format!(
                        "rejected with the note (an MCP proxy's call: its host is told): {}",
                        row_ids(r)
                    ))?;
                } else if !json_out {
                    out.line(&format!("{}: {}", verb.done(), row_ids(r)))?;
                }
                done.push(r);
            }
            Err(why) => {
                if !json_out {
                    out.line(&format!("skipped: {}: {}", row_ids(r), said(&why, 400)))?;
                }
                skipped.push((r, why));
            }
        }
    }
    if json_out {
        out.json(&report(verb, sel, &rows, &done, &skipped), &Raws::default())?;
    } else {
        out.line(&format!(
            "{} {}, skipped {} of {} selected",
            verb.done(),
            done.len(),
            skipped.len(),
            rows.len()
        ))?;
        if interrupted > 0 {
            out.line(&format!(
                "{interrupted} denied run(s) wait INTERRUPTED until resumed: `countersign worker` resumes the example consumer's at once; a run `agent` made goes on with its `agent ... --resume` line"
            ))?;
        }
    }
    if skipped.is_empty() {
        Ok(())
    } else {
        Err(CommandError::Failed(format!(
            "{}: {} of the selected row(s) were skipped (each is named above with why)",
            verb.name(),
            skipped.len()
        )))
    }
}

/// The queue's rows matching every filter, read a window at a time by key.
fn select<S: QueueStore>(
    store: &S,
    sel: &Select,
    now: Timestamp,
) -> Result<Vec<Row>, CommandError> {
    let cutoff = sel
        .older_than
        .map(|d| now.add_nanos(-(d.as_nanos().min(i64::MAX as u128) as i64)));
    // The store may narrow by the tool; the exact tool is compared below.
    let mut rows = Vec::new();
    let mut offset = 0i64;
    let mut anchor: Option<(i64, String)> = None;
    loop {
        let page = store
            .queue_window(
                sel.tool.as_deref(),
                Near {
                    anchor: anchor.as_ref().map(|(i, id)| (*i, id.as_str())),
                    ..Near::new(WINDOW, offset)
                },
            )
            .map_err(fail)?;
        let n = page.items.len() as i64;
        if let Some(last) = page.items.last() {
            anchor = Some((page.offset + n - 1, last.approval.id.clone()));
        }
        rows.extend(
            page.items
                .into_iter()
                .filter(|q| matches(q, sel, cutoff))
                .map(row_of),
        );
        if !page.more || n == 0 {
            return Ok(rows);
        }
        offset = page.offset + n;
    }
}

fn matches(q: &QueueItem, sel: &Select, cutoff: Option<Timestamp>) -> bool {
    if let Some(tool) = &sel.tool
        && q.tool.as_deref() != Some(tool.as_str())
    {
        return false;
    }
    cutoff.is_none_or(|c| q.approval.created_at <= c)
}

fn row_of(q: QueueItem) -> Row {
    let a = &q.approval;
    let title = serde_json::from_str::<Value>(&a.presentation)
        .ok()
        .and_then(|p| {
            p.get("title")
                .and_then(Value::as_str)
                .map(|t| t.as_bytes().to_vec())
        })
        .or_else(|| q.args_head.clone())
        .unwrap_or_default();
    let too_large = capped_request(a).filter(|n| *n > SHOWN_REQUEST_MAX);
    Row {
        run: a.run_id_bytes().to_vec(),
        approval: a.id_bytes().to_vec(),
        hash: a.hash.clone(),
        tool: q.tool.clone().unwrap_or_default(),
        title,
        created: a.created_at,
        expires: a.expires_at,
        too_large,
    }
}

fn decide_one<S: QueueStore>(
    store: &S,
    verb: BulkVerb,
    r: &Row,
    note: &str,
    by: &str,
) -> Result<RunStatus, Said> {
    if let Some(n) = r.too_large {
        return Err(format!(
            "its request is {n} bytes, more than the {SHOWN_REQUEST_MAX} countersign reads to check one; cancel that run by name"
        )
        .into());
    }
    let now = Timestamp::now();
    let (run, ap, hash) = (r.run.as_slice(), r.approval.as_slice(), r.hash.as_str());
    let res = match verb {
        BulkVerb::Reject => {
            operator::reject_shown(store, run, ap, hash, by, note, now).map(|d| d.run.status)
        }
        BulkVerb::Deny => {
            operator::deny_shown(store, run, ap, hash, by, note, now).map(|d| d.run.status)
        }
        BulkVerb::Cancel => {
            operator::cancel_shown(store, run, ap, hash, by, note, now).map(|c| c.run.status)
        }
    };
    res.map_err(|e| why(&e))
}

/// Why a row was skipped; the operator's message keeps the ids it names as stored.
fn why(e: &OperatorError) -> Said {
    let within = |head: &str| Said::from(head).text(" (").and(&e.said()).text(")");
    match e {
        OperatorError::Changed { .. } => "it changed after it was listed".into(),
        OperatorError::NotPending { .. } => within("it was decided after it was listed"),
        OperatorError::Expired { already: false, .. } => {
            within("it had expired, so deciding it recorded the expiry and its run is cancelled")
        }
        OperatorError::Expired { .. } => within("it expired after it was listed"),
        OperatorError::RunNotWaiting { .. } => within("its run moved on after it was listed"),
        other => other.said(),
    }
}

fn ask(verb: BulkVerb, n: usize, out: &mut Out) -> Result<(), CommandError> {
    out.raw(&format!("{} these {n} row(s)? [y/N] ", verb.name()))?;
    out.flush()?;
    let mut line = String::new();
    let read = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| CommandError::Failed(format!("{}: reading the answer: {e}", verb.name())))?;
    if read == 0 {
        return Err(CommandError::Usage(format!(
            "{}: no answer was typed; pass --yes",
            verb.name()
        )));
    }
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(CommandError::Failed(format!(
            "{}: declined at the prompt; nothing was decided",
            verb.name()
        ))),
    }
}

fn describe(sel: &Select) -> String {
    let mut parts = Vec::new();
    if let Some(t) = &sel.tool {
        parts.push(format!("tool {}", ident(t.as_bytes(), 64)));
    }
    if let Some(d) = sel.older_than {
        parts.push(format!(
            "requested more than {} ago",
            span(d.as_secs() as i64)
        ));
    }
    if parts.is_empty() {
        " (every pending approval of a waiting run)".into()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

fn row_ids(r: &Row) -> String {
    format!(
        "approval {} of run {}",
        ident(&r.approval, 64),
        ident(&r.run, 64)
    )
}

fn row_line(r: &Row, now: Timestamp) -> String {
    let mut s = format!(
        "{}  {}  {}",
        row_ids(r),
        ident(r.tool.as_bytes(), 40),
        crate::console::time::ago(&r.created, &now)
    );
    if !r.title.is_empty() {
        s.push_str("  ");
        s.push_str(&clean_bytes(&r.title, 80));
    }
    if !r.expires.is_zero() && now > r.expires {
        s.push_str("  (expired: deciding it records the expiry and cancels its run)");
    }
    if let Some(n) = r.too_large {
        s.push_str(&format!("  (request of {n} bytes: will be skipped)"));
    }
    s
}

fn row_json(r: &Row) -> Value {
    let mut m = Map::new();
    id_field(&mut m, "run_id", &r.run);
    id_field(&mut m, "approval_id", &r.approval);
    m.insert("tool".into(), json!(r.tool));
    m.insert("title".into(), json!(String::from_utf8_lossy(&r.title)));
    m.insert("hash".into(), json!(r.hash));
    m.insert(
        "created_at".into(),
        json!(r.created.format_rfc3339_seconds()),
    );
    Value::Object(m)
}

fn report(
    verb: BulkVerb,
    sel: &Select,
    rows: &[Row],
    done: &[&Row],
    skipped: &[(&Row, Said)],
) -> Value {
    json!({
        "verb": verb.name(),
        "dry_run": sel.dry_run,
        "selected": rows.iter().map(row_json).collect::<Vec<_>>(),
        "decided": done.iter().map(|r| row_json(r)).collect::<Vec<_>>(),
        "skipped": skipped.iter().map(|(r, why)| {
            let mut v = row_json(r);
            v["why"] = json!(why.to_string());
            v
        }).collect::<Vec<_>>(),
    })
}
