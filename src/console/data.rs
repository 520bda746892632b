//! What the console reads and asks for: row types, queries, replies and the two traits the
//! worker thread drives (`ConsoleData` for reads, `Decider` for decisions).
//!
//! Every value that came from the database and may have been chosen by a model, tool or policy
//! is kept as raw bytes (`Vec<u8>`) so nothing is lost before it reaches the sanitiser; ids
//! (run, approval, step ids) are [`Key`]s, their stored bytes, so a lookup, a decision or a
//! cancel acts on exactly the row that was shown, even when the id is not UTF-8;
//! statuses and times keep the runtime's types ([`RunStatus`], [`Timestamp`], ...; the zero
//! time is a column left empty) and are drawn through the sanitiser like every stored string.

use std::fmt;

pub use super::sort::Sort;
pub use crate::runtime::store::{DamagedColumn, SortValue};
pub use crate::runtime::types::{ApprovalStatus, Key, RunStatus, Said, StepStatus, Timestamp};

/// One window of a list read by key, with its total: counted up to a bound, and a lower bound
/// past it (`exact: false`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page<T> {
    pub offset: u64,
    pub total: u64,
    pub rows: Vec<T>,
    /// Whether `total` is the count. When not, it is a lower bound (the rows read, plus one
    /// when more follow) and the count comes after the rows as [`Reply::Total`] for the same
    /// request, so a screen draws its rows without waiting for a scan.
    pub exact: bool,
}

/// A pending approval as the queue shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueRow {
    pub approval_id: Key,
    pub run_id: Key,
    pub step_id: Key,
    pub step_index: Option<i64>,
    /// Stored bytes (`\xNN` when not UTF-8).
    pub kind: Vec<u8>,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    /// The stored expiry does not read as a time (then `expires_at` is zero, which alone would
    /// read as "never").
    pub expires_unreadable: bool,
    /// `request.spec.name`, absent when the request does not decode.
    pub tool: Option<Vec<u8>>,
    /// The arguments as stored (capped), absent when the request does not decode.
    pub args: Option<Vec<u8>>,
    /// The arguments repeat a key ([`super::fields::repeats_a_key`], judged once when the row
    /// is read; false for arguments cut short, which do not parse).
    pub args_repeat_a_key: bool,
    /// The call was approved before and its resume paused again for this approval (issue 15
    /// item 5): the policy, asked again, wanted a new one.
    pub paused_again: bool,
    /// The run's goal and the agent's stated reason for the call (for the hostile mark).
    pub goal: Vec<u8>,
    pub agent_reason: Vec<u8>,
    /// The value the row was sorted by, in an order other than age (issue 21).
    pub sorted_by: Option<SortValue>,
    /// The approval's hash as read with the row: a mark remembers it, and a bulk decision is
    /// bound to it (issue 21).
    pub hash: String,
}

/// Counts shown in the header.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    pub pending: u64,
    pub runs: u64,
    pub waiting: u64,
    pub running: u64,
    pub failed: u64,
    /// When the oldest pending approval was created (issue 21: the header's oldest age).
    pub oldest: Option<Timestamp>,
    /// A mark that grows when an approval arrives in the queue (the store's row order): a
    /// larger one than before means a new approval (issue 21: notifications).
    pub newest: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: Key,
    pub goal: Vec<u8>,
    pub status: RunStatus,
    /// Stored bytes (`\xNN` when not UTF-8, never a lossy U+FFFD).
    pub reason: Vec<u8>,
    pub reason_detail: Vec<u8>,
    pub step_count: i64,
    pub created_at: Timestamp,
    pub finished_at: Timestamp,
    pub pending: u64,
    pub damaged: bool,
    /// What became of its latest approved call.
    pub fate: Option<Fate>,
}

/// What became of a run's latest approved call (issue 15 item 5). Untrusted parts are kept as
/// bytes and escaped when drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum Fate {
    /// Approved; its program has not resumed the run since.
    AwaitingResume { decided_at: Timestamp },
    /// Resumed and in flight (no observation yet).
    Resumed,
    /// The tool ran; the observation's summary (`failed`: a tool error).
    Executed { failed: bool, summary: Vec<u8> },
    /// Asked again on resume, the policy denied it: its reason.
    DeniedOnResume { reason: Vec<u8> },
    /// Asked again on resume, the policy wanted a new approval: that one.
    PausedAgain { approval: Key },
    /// Denied with feedback (decision 0040): the note the agent was told.
    DeniedWithFeedback { note: Vec<u8> },
}

/// The header of the run detail screen.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunHeader {
    pub id: Key,
    pub goal: Vec<u8>,
    pub status: RunStatus,
    /// Stored bytes (`\xNN` when not UTF-8, never a lossy U+FFFD).
    pub reason: Vec<u8>,
    pub reason_detail: Vec<u8>,
    pub limits_json: Vec<u8>,
    pub step_count: i64,
    pub created_at: Timestamp,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    pub model_calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_input_tokens: i64,
    pub cost_micros: i64,
    pub active_ms: i64,
    pub lease_owner: Vec<u8>,
    pub lease_expires_at: Timestamp,
    /// Whether this build can resume the run (set by the worker from the resume hook).
    pub resumable: bool,
    /// What became of its latest approved call.
    pub fate: Option<Fate>,
    /// The MCP proxy session whose call this run answers (agentrt's `proxy_calls`): its
    /// approved request is collected by the host's next identical call, not resumed here.
    pub proxy_session: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    pub id: Key,
    pub idx: i64,
    pub status: StepStatus,
    pub tool: Option<Vec<u8>>,
    pub decision_kind: Option<String>,
    pub policy_outcome: Option<String>,
    pub observation_kind: Option<String>,
    pub summary: Option<Vec<u8>>,
    pub decode_error: Option<String>,
}

/// Whether one event's stored hash is the one its fields and the previous hash give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainMark {
    Ok,
    Broken,
    /// The previous event is missing (seq gap) or its hash could not be read.
    Unknown,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub seq: i64,
    pub step_id: Key,
    pub at: String,
    pub kind: Vec<u8>,
    pub payload: Vec<u8>,
    pub chain: ChainMark,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelCallRow {
    pub id: Key,
    pub step_id: Key,
    pub attempt: i64,
    pub status: String,
    pub model: Vec<u8>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_micros: i64,
    pub latency_ms: i64,
    pub error: Vec<u8>,
}

/// An approval row; from `approval()` it is the whole row, from a page it may be capped.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ApprovalRow {
    pub id: Key,
    pub run_id: Key,
    pub step_id: Key,
    /// Stored bytes (`\xNN` when not UTF-8).
    pub kind: Vec<u8>,
    pub status: ApprovalStatus,
    pub capability: Vec<u8>,
    pub presentation: Vec<u8>,
    pub request: Vec<u8>,
    pub hash: String,
    pub created_at: Timestamp,
    pub decided_at: Timestamp,
    pub decided_by: Vec<u8>,
    pub note: Vec<u8>,
    pub expires_at: Timestamp,
    /// `<column>: <error>` joined by `; ` when a column does not decode (spec section 9).
    pub decode_error: Option<String>,
    /// The run's status when the row was read (decisions need WAITING_FOR_APPROVAL).
    pub run_status: RunStatus,
    /// The `reason` of the `approval.requested` event, if found.
    pub reason: Vec<u8>,
    /// When the request was too large to be read for showing (issue 14 item 6): its length,
    /// and whether that length is in bytes (else characters). `request` is then the store's
    /// stand-in, never the tool call's arguments.
    pub request_not_shown: Option<(i64, bool)>,
    /// Whether this build can resume the approval's run (set by the worker from the resume
    /// hook, as [`RunHeader::resumable`]).
    pub resumable: bool,
    /// The MCP proxy session whose call the approval's run answers, as
    /// [`RunHeader::proxy_session`].
    pub proxy_session: Option<Vec<u8>>,
    /// Approve and reject would refuse this approval: its stored hash does not recompute from
    /// what is stored, or a field could not be read (`runtime::operator::verify_hash`, run once
    /// when the row is read whole; never for a request a page read left out, which the
    /// decision judges).
    pub hash_refused: bool,
}

/// What the decision page reads beside the approval row (issue 15 items 1 and 2): the run's
/// goal, the agent's stated reason for the call, and the other pending approvals it relates to.
/// Every byte here is untrusted and drawn through the sanitiser.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PageContext {
    /// The run's goal as stored (capped as a page reads it).
    pub goal: Vec<u8>,
    /// The `reason` of the step's recorded decision: what the model said this call is for.
    pub agent_reason: Vec<u8>,
    /// Why the step's decision was not read (damaged, or too large for a page), if it was not.
    pub decision_unread: Option<String>,
    /// Other pending approvals of the same run, and of other runs whose presentation names
    /// the same target (decision 0050), oldest first.
    pub related: Vec<RelatedRow>,
    /// How many pending approvals were compared, and whether more were not (a bound).
    pub compared: usize,
    pub more: bool,
}

/// A pending approval related to the one on the page.
#[derive(Debug, Clone, PartialEq)]
pub struct RelatedRow {
    pub approval_id: Key,
    pub run_id: Key,
    pub same_run: bool,
    pub same_target: bool,
    /// The presentation's title, else the tool's name, else empty.
    pub title: Vec<u8>,
    /// The presentation's amount (decision 0050), when it is an integer.
    pub amount: Option<(Vec<u8>, i64)>,
    pub expires_at: Timestamp,
}

/// The policy asked again, read-only, about the call on the page (issue 15 item 3).
#[derive(Debug, Clone, PartialEq)]
pub enum Recheck {
    /// This build cannot ask the run's policy, and why.
    Unavailable(String),
    /// Today's answer is the recorded one (the answer, `outcome: reason`).
    Same(String),
    /// Today's answer differs: one phrase per difference (`policy now: ...`, a presentation
    /// member's old and new value, the hash a grant would bind).
    Differs(Vec<String>),
}

/// One column of one row that does not decode, with its run's status.
#[derive(Debug, Clone, PartialEq)]
pub struct DamagedRow {
    /// The column as the store found it (its stored bytes, first 4 KiB, are shown escaped
    /// byte by byte; its length is never below 0).
    pub damage: DamagedColumn,
    /// The run's status when the row was read; `None` when the run could not be read.
    pub run_status: Option<RunStatus>,
}

impl DamagedRow {
    /// Where a read by key resumes after this row (table, row id, column); `None` when the
    /// row id is not UTF-8.
    pub fn anchor(&self) -> Option<(&'static str, String, &'static str)> {
        let d = &self.damage;
        d.row_id
            .as_str()
            .map(|id| (d.table, id.to_string(), d.column))
    }

    /// The row's place in the list, to find it again after a reload: table, row id, column.
    pub fn key(&self) -> Key {
        let d = &self.damage;
        let mut k = format!("{}/", d.table).into_bytes();
        k.extend_from_slice(d.row_id.as_bytes());
        k.extend_from_slice(format!("/{}", d.column).as_bytes());
        Key::new(k)
    }
}

/// Result of verifying the whole event chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainReport {
    pub checked: u64,
    pub head: String,
    pub broken_at: Option<(i64, String)>,
}

/// Which tab of the run detail a page belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tab {
    Steps,
    Events,
    Approvals,
    ModelCalls,
}

impl Tab {
    pub const ALL: [Tab; 4] = [Tab::Steps, Tab::Events, Tab::Approvals, Tab::ModelCalls];
    pub fn title(self) -> &'static str {
        match self {
            Tab::Steps => "steps",
            Tab::Events => "events",
            Tab::Approvals => "approvals",
            Tab::ModelCalls => "model calls",
        }
    }
}

/// A read the UI asks the worker for.
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    Counts,
    Queue {
        filter: String,
        /// The order (issue 21); anchors and ends are of a list read in this order.
        sort: Sort,
        offset: u64,
        limit: u64,
        /// The index and approval id of a row already read near the window: the window is
        /// read by key around it (issue 14 item 8).
        anchor: Option<(u64, String)>,
        /// The list's length when last read exactly: a window near the end is read from it.
        end: Option<u64>,
    },
    /// The queue's count for `filter` (sent by the worker after an inexact queue page).
    QueueTotal {
        filter: String,
    },
    Runs {
        status: Option<RunStatus>,
        filter: String,
        offset: u64,
        limit: u64,
        /// A row already read (its index and id) to read the window by key around.
        anchor: Option<(u64, String)>,
        /// The list's length when last read exactly: a window near the end is read from it.
        end: Option<u64>,
    },
    Run {
        id: Key,
    },
    Steps {
        run: Key,
        offset: u64,
        limit: u64,
        /// The index and id of a step already read near the window: the window is read by
        /// key around it (issue 14 item 8).
        anchor: Option<(u64, String)>,
        /// The list's length when last read exactly: a window near the end is read from it.
        end: Option<u64>,
    },
    Events {
        run: Key,
        offset: u64,
        limit: u64,
        /// The index and seq of an event already read near the window: the page is read by
        /// key around it (issue 14 item 8).
        anchor: Option<(u64, i64)>,
        /// The list's length when last read exactly: a window near the end is read from it.
        end: Option<u64>,
    },
    Approvals {
        run: Key,
        offset: u64,
        limit: u64,
        /// The index and id of an approval already read near the window.
        anchor: Option<(u64, String)>,
        /// The list's length when last read exactly.
        end: Option<u64>,
    },
    ModelCalls {
        run: Key,
        offset: u64,
        limit: u64,
        /// The index and id of a model call already read near the window.
        anchor: Option<(u64, String)>,
        /// The list's length when last read exactly.
        end: Option<u64>,
    },
    Approval {
        id: Key,
    },
    /// The run ids `prefix` starts, in id order, at most `limit` (by key: `:run PREFIX`).
    RunPrefix {
        prefix: Key,
        limit: u32,
    },
    /// The decision page's context of an approval: goal, the agent's reason, related work.
    /// `target` is the presentation's target member (decision 0050), when it names one.
    Context {
        approval: Key,
        run: Key,
        step: Key,
        target: Option<(Vec<u8>, crate::safetext::JsonNode)>,
    },
    /// The policy asked again about the call of `step` (answered by the worker through the
    /// binary's hook, never on the UI thread; writes nothing).
    Recheck {
        run: Key,
        step: Key,
    },
    Damaged {
        offset: u64,
        limit: u64,
        /// The index and (table, row id, column) of a damaged column already read.
        anchor: Option<(u64, DamagedKey)>,
        /// The list's length when last read exactly.
        end: Option<u64>,
    },
    /// The exact length of the list the inner query reads (a count, on the counting lane),
    /// asked only when the list is longer than a window counts (`G` to its end).
    Length(Box<Query>),
    /// A list (`Queue`, `Runs` or `Damaged`, read with no SQL filter) narrowed to the rows
    /// whose shown text contains `filter` (`console::filter`): the window of the narrowed
    /// list at the inner query's offset and limit, with its exact length. Answered by a scan
    /// of the list by key (`console::scan`), never by matching stored bytes in SQL.
    Filtered {
        filter: String,
        list: Box<Query>,
    },
    Verify,
    /// The queue's numbers (issue 21), as `countersign stats` computes them, with oldest
    /// ages measured from `now` (Unix seconds); on the counting lane: it scans.
    Stats {
        now: i64,
    },
    /// The marked approvals read again by id, each as the detail reads it (issue 21): to drop
    /// marks that left the queue, to list them in a bulk confirmation, for a dry run and for
    /// the approve table. Answered by the worker one approval at a time.
    Marked {
        ids: Vec<Key>,
    },
    /// The runs marked on the runs list read again by id (a bulk cancel). Answered by the
    /// worker one run header at a time.
    MarkedRuns {
        ids: Vec<Key>,
    },
    /// Every queue row `filter` matches, at most `max`, read a window at a time by key
    /// (issue 21: "mark all in the current filter"). Answered by the worker.
    QueueAll {
        filter: String,
        max: u64,
    },
}

/// Which damaged column: table, row id, column.
pub type DamagedKey = (&'static str, String, &'static str);

/// The three answers to an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Approve,
    Reject,
    /// Deny with feedback (decision 0040): the run goes INTERRUPTED and the agent is handed
    /// the note when its program resumes it.
    Deny,
}

/// A write the UI asks the worker for (only after a confirmation).
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// An answer to an approval, bound to the hash the reviewer was shown
    /// (`operator::approve_shown`, `reject_shown`, `deny_shown`).
    Decide {
        choice: Choice,
        run: Key,
        approval: Key,
        shown_hash: String,
        by: String,
        note: String,
    },
    Cancel {
        run: Key,
        by: String,
        reason: String,
    },
    Resume {
        run: Key,
    },
    /// Cancel the run of an approval only while that approval is still pending with the hash
    /// the reviewer was shown (`operator::cancel_shown`; a bulk cancel of marked rows).
    CancelShown {
        run: Key,
        approval: Key,
        shown_hash: String,
        by: String,
        reason: String,
    },
}

/// What came back for a `Query`.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Counts(Counts),
    Queue(Page<QueueRow>),
    Runs(Page<RunRow>),
    Run(Option<Box<RunHeader>>),
    Steps(Page<StepRow>),
    Events(Page<EventRow>),
    Approvals(Page<ApprovalRow>),
    ModelCalls(Page<ModelCallRow>),
    Approval(Option<Box<ApprovalRow>>),
    /// The run ids a prefix starts (at most the limit asked).
    RunPrefix(Vec<Key>),
    Context(Box<PageContext>),
    Recheck(Recheck),
    Damaged(Page<DamagedRow>),
    Verify(ChainReport),
    Stats(Box<crate::runtime::stats::Stats>),
    /// The exact total of the list a page with `exact: false` came from.
    Total(u64),
    /// The marked approvals as read now, in the order asked (`None`: no such approval).
    Marked(Vec<(Key, Option<Box<ApprovalRow>>)>),
    /// The marked runs as read now, in the order asked (`None`: no such run).
    MarkedRuns(Vec<(Key, Option<Box<RunHeader>>)>),
    /// The queue rows a filter matches (at most the `max` asked), and whether more matched.
    QueueAll(Vec<QueueRow>, bool),
    /// The read failed; drawn as the error's one sentence.
    Failed(DataError),
}

/// Why a decision did not happen, as the console explains it.
#[derive(Debug, Clone, PartialEq)]
pub enum DecideError {
    /// The row's hash is not the one shown: reload and show again.
    Changed,
    /// Someone decided first.
    AlreadyDecided {
        status: ApprovalStatus,
        by: String,
        /// When it was decided; `None` when the row does not say.
        at: Option<Timestamp>,
    },
    /// The operator's message, its ids as stored.
    Expired(Said),
    /// The run is not in a state that allows this (the operator's message, its ids as stored).
    RunState(Said),
    Locked,
    /// This build cannot do it (no writer, no resume hook, read-only).
    Unavailable(String),
    /// Any other refusal or failure; a runtime error keeps the ids it names as stored.
    Other(Said),
}

impl DecideError {
    /// The sentence [`Display`](fmt::Display) writes, with every id it names as its stored
    /// bytes: what a notice holds, so an id that is not UTF-8 is drawn as `\xNN` (never as a
    /// lossy U+FFFD, which may be another run's id).
    pub fn bytes(&self) -> Vec<u8> {
        let (head, said) = match self {
            DecideError::Expired(m) => ("approval expired: ", m),
            DecideError::RunState(m) => ("run state: ", m),
            DecideError::Other(m) => ("", m),
            other => return other.to_string().into_bytes(),
        };
        Said::from(head).and(said).bytes()
    }
}

impl fmt::Display for DecideError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecideError::Changed => write!(f, "approval changed since you read it; reloaded"),
            DecideError::AlreadyDecided { status, by, at } => match at {
                Some(at) => write!(f, "already {status} by {by} at {at}"),
                None => write!(f, "already {status} by {by} at "),
            },
            DecideError::Expired(m) => write!(f, "approval expired: {m}"),
            DecideError::RunState(m) => write!(f, "run state: {m}"),
            DecideError::Locked => write!(f, "database is locked by another writer; try again"),
            DecideError::Unavailable(m) => write!(f, "{m}"),
            DecideError::Other(m) => write!(f, "{m}"),
        }
    }
}

/// Outcome of a [`Write`].
pub type WriteResult = Result<String, DecideError>;

/// Errors of the read side; one sentence each.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DataError {
    /// The name and the cause keep their bytes (a name that is not UTF-8, an id in the cause);
    /// [`ConsoleError::said`](crate::console::ConsoleError::said) has them.
    #[error("cannot open the run database {path}: {cause}")]
    Open { path: Said, cause: Said },
    #[error("database read failed: {0}")]
    Read(String),
}

/// The reads the console needs. Implemented on a read-only SQLite connection and on
/// PostgreSQL (`console::pg`); tests of `update()` may use a fake.
pub trait ConsoleData: Send {
    /// A number that changes when another connection commits: SQLite's `PRAGMA data_version`,
    /// or on PostgreSQL the count of the sequencer's notifications received (decision 0084).
    fn data_version(&mut self) -> Result<i64, DataError>;
    fn query(&mut self, q: &Query) -> Result<Reply, DataError>;
}

/// The writes the console can ask for. Implemented on the store's operator calls.
pub trait Decider: Send {
    fn run(&mut self, write: &Write) -> WriteResult;
}

/// Resumes runs whose tools this build registers (supplied by the binary).
pub trait ResumeHook: Send + Sync {
    /// Whether this build can resume the run (knows every tool it needs).
    fn can_resume(&self, run_id: &str) -> bool;
    /// Resume the run to its next pause or end; returns a one-line result.
    fn resume(&self, db_path: &std::path::Path, run_id: &str) -> Result<String, String>;
    /// Asks the run's policy again, read-only, about the calls waiting on a person
    /// (`Driver::recheck` with `RecheckScope::Awaiting`), or says why this build cannot. Must
    /// write nothing. The console calls it on its worker thread. The default cannot.
    fn recheck(
        &self,
        db_path: &std::path::Path,
        run_id: &str,
    ) -> Result<crate::runtime::driver::RecheckReport, String> {
        let _ = (db_path, run_id);
        Err("this build does not hold this run's policy".into())
    }
}
