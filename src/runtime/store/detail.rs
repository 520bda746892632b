//! Read models of one run's detail for a review front end: a run's approvals with its status,
//! one approval whole with its run's status and reason, events with their chain marks (by the
//! store's own verification), and model calls. Each is one read transaction over a bounded
//! page through the store's capped selects and decoders.

use rusqlite::{Connection, OptionalExtension, params};

use super::Store;
use super::bind::{Text, key};
use super::error::{Ctx, StoreError};
use super::events::verify;
use super::pages::{
    MAX_PAGE_TEXT, Page, RunList, approval_reason, approval_select, approvals_by_key,
    capped_approval, check_page, events_in, query, tc,
};
use super::reads::query_opt;
use super::rows::{APPROVAL_COLUMNS, Cols, approval_from};
use super::window::{KeyedList, Near, Window, WindowPage};
use crate::runtime::types::{Approval, AsKey, Event, RawInvalid, RunStatus, Timestamp};
use rusqlite::types::Value;

/// A page of a run's approvals and the run's status, read together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunApprovals {
    /// The approvals of the page, capped as pages cap them.
    pub page: Page<Approval>,
    /// `None` when the run does not exist.
    pub run_status: Option<RunStatus>,
}

/// One approval read whole (what a decision is taken on) with its run's status and the
/// `reason` of its `approval.requested` event.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalView {
    /// The approval, every column whole (not capped).
    pub approval: Approval,
    /// Its run's status; `None` when the run row is missing.
    pub run_status: Option<RunStatus>,
    /// The policy's reason from the approval's first `approval.requested` event, at most
    /// [`MAX_PAGE_TEXT`] characters; empty when there is no such event or it holds no reason.
    pub reason: String,
}

/// Whether one event's stored hash is the one its fields and the previous event's hash give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainMark {
    /// The stored hash is the one recomputed from the event and its predecessor's hash.
    Holds,
    /// The stored hash differs from the recomputed one: the event, or the one before it, was
    /// changed after it was written.
    Broken,
    /// Not checked here: the previous event is missing, or the payload is over
    /// [`MAX_PAGE_TEXT`] (verifying the whole chain checks it).
    Unknown,
}

/// An event read as a page reads it, with its chain mark.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkedEvent {
    /// The event, its text capped as pages cap it.
    pub event: Event,
    /// Whether its hash checks out against the previous event's.
    pub mark: ChainMark,
}

/// A `model_calls` row (text capped as pages cap it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelCallView {
    /// The attempt's id (`model_calls.id`).
    pub id: String,
    /// The run it was charged to.
    pub run_id: String,
    /// The step whose agent made it.
    pub step_id: String,
    /// Its number within the call, from 1.
    pub attempt: i64,
    /// `dispatched`, `ok`, `error` or `ambiguous`, as stored (unchecked).
    pub status: String,
    /// The model's name as recorded.
    pub model: String,
    /// Input tokens charged.
    pub input_tokens: i64,
    /// Output tokens charged.
    pub output_tokens: i64,
    /// The part of `input_tokens` served from cache.
    pub cached_input_tokens: i64,
    /// Cost charged, in micros; 0 for an unpriced model.
    pub cost_micros: i64,
    /// Milliseconds from dispatch to the recorded outcome.
    pub latency_ms: i64,
    /// The attempt's error; empty on success or while dispatched.
    pub error: String,
    /// When the attempt was dispatched.
    pub dispatched_at: Timestamp,
    /// When its outcome was recorded; zero while still `dispatched` (or never recorded).
    pub completed_at: Timestamp,
    /// `<column>: <error>` joined by `"; "`; empty when the row decoded.
    pub decode_error: String,
    /// Stored bytes of the TEXT columns that were not valid UTF-8.
    pub raw_invalid: RawInvalid,
}

fn run_status(c: &Connection, run_id: impl AsKey) -> Result<Option<RunStatus>, StoreError> {
    let run_id = key(&run_id);
    let s: Option<Vec<u8>> = c
        .prepare_cached("SELECT CAST(status AS BLOB) FROM runs WHERE id = ?")
        .ctx("run status")?
        .query_row([run_id], |r| r.get::<_, Option<Vec<u8>>>(0))
        .optional()
        .ctx("run status")?
        .map(Option::unwrap_or_default);
    Ok(s.map(|s| RunStatus::parse(&String::from_utf8_lossy(&s))))
}

impl Store {
    /// A run's approvals in creation order (capped, for showing) and the run's status, read in
    /// one transaction, with the total (a count of the run's approvals).
    pub fn list_run_approvals(
        &self,
        run_id: impl AsKey,
        limit: i64,
        offset: i64,
    ) -> Result<RunApprovals, StoreError> {
        let run_id = key(&run_id);
        check_page("approvals", limit, offset)?;
        self.read(|c| {
            Ok(RunApprovals {
                page: APPROVALS.page(c, run_id, limit, offset)?,
                run_status: run_status(c, run_id)?,
            })
        })
    }

    /// A window of a run's approvals (capped, for showing) read by key (issue 14 item 8): rowid
    /// walked from the nearest of the run's first approval, `near`'s anchor (the index and id of
    /// an approval of the run already read) and the end (its length as last read), with the
    /// total counted up to [`super::COUNT_CAP`] and the run's status, in one transaction.
    pub fn list_run_approvals_near(
        &self,
        run_id: impl AsKey,
        near: Near<&str>,
    ) -> Result<(WindowPage<Approval>, Option<RunStatus>), StoreError> {
        let run_id = key(&run_id);
        check_page("approvals", near.limit, near.offset)?;
        self.read(|c| {
            let page = APPROVALS.window_page(c, run_id, near)?;
            Ok((page, run_status(c, run_id)?))
        })
    }

    /// How many approvals a run has, for callers that ask.
    pub fn count_run_approvals(&self, run_id: impl AsKey) -> Result<i64, StoreError> {
        let run_id = key(&run_id);
        self.read(|c| APPROVALS.of(&run_id).count(c))
    }

    /// One approval by id, whole, with its run's status and its reason; `None` if absent.
    pub fn approval_view(&self, id: impl AsKey) -> Result<Option<ApprovalView>, StoreError> {
        let id = key(&id);
        self.read(|c| {
            let select = format!("SELECT {APPROVAL_COLUMNS} FROM approvals");
            approval_view(c, &select, id, |r| approval_from(&mut Cols::new(r)))
        })
    }

    /// As [`Store::approval_view`], but the approval read as a page reads it (issue 14 item 6):
    /// a request over [`MAX_PAGE_TEXT`] characters is replaced by its stand-in (see
    /// [`crate::runtime::store::capped_request`]) and one over
    /// [`crate::runtime::store::SHOWN_REQUEST_MAX`] bytes is never loaded, so showing an
    /// approval costs what the screen shows whatever the request's size.
    pub fn approval_view_capped(&self, id: impl AsKey) -> Result<Option<ApprovalView>, StoreError> {
        let id = key(&id);
        self.read(|c| approval_view(c, &approval_select(), id, capped_approval))
    }

    /// A run's events in seq order (capped), each with its chain mark, with the total. The
    /// mark is computed with the store's chain verification over that one event; an event
    /// whose payload is over [`MAX_PAGE_TEXT`] or whose previous event is missing is
    /// [`ChainMark::Unknown`]. The offset is skipped on the `(run_id, seq)` index and the
    /// total is a count of it; a front end showing a long log reads
    /// [`Store::list_marked_events_near`].
    pub fn list_marked_events(
        &self,
        run_id: impl AsKey,
        limit: i64,
        offset: i64,
    ) -> Result<Page<MarkedEvent>, StoreError> {
        let run_id = key(&run_id);
        check_page("events", limit, offset)?;
        self.read(|c| events_of(&run_id).page(c, offset, limit, |c, w| marked_events(c, run_id, w)))
    }

    /// A window of a run's events, read by key (issue 14 item 8) from the nearest of the log's
    /// start, `near`'s anchor (the index and `seq` of an event of the same run already read) and
    /// the log's end (its length as last read, read in reverse): only the window's seqs are
    /// walked on the `(run_id, seq)` index, so a window deep in a long log costs what one near
    /// its anchor or end does. The total is counted up to [`super::COUNT_CAP`]; past it the window says
    /// so (`exact: false`) and [`Store::count_events`] counts when asked. An anchor that is
    /// gone is not used.
    pub fn list_marked_events_near(
        &self,
        run_id: impl AsKey,
        near: Near<i64>,
    ) -> Result<WindowPage<MarkedEvent>, StoreError> {
        let run_id = key(&run_id);
        check_page("events", near.limit, near.offset)?;
        self.read(|c| {
            let near = near.anchored(|seq| {
                Ok(
                    c.prepare_cached("SELECT 1 FROM events WHERE run_id = ? AND seq = ?")
                        .ctx("list events")?
                        .exists(params![run_id, seq])
                        .ctx("list events")?
                        .then_some(vec![Value::Integer(seq)]),
                )
            })?;
            events_of(&run_id).window_page(c, near, |c, w| marked_events(c, run_id, w))
        })
    }

    /// A run's model calls in insertion order (text capped), with the total (a count of the
    /// run's calls).
    pub fn list_model_calls_page(
        &self,
        run_id: impl AsKey,
        limit: i64,
        offset: i64,
    ) -> Result<Page<ModelCallView>, StoreError> {
        self.run_page(&CALLS, run_id, limit, offset)
    }

    /// A window of a run's model calls read by key (issue 14 item 8), as
    /// [`Store::list_run_approvals_near`] reads approvals.
    pub fn list_model_calls_near(
        &self,
        run_id: impl AsKey,
        near: Near<&str>,
    ) -> Result<WindowPage<ModelCallView>, StoreError> {
        self.run_window(&CALLS, run_id, near)
    }

    /// How many model calls a run has, for callers that ask.
    pub fn count_model_calls(&self, run_id: impl AsKey) -> Result<i64, StoreError> {
        let run_id = key(&run_id);
        self.read(|c| CALLS.of(&run_id).count(c))
    }

    /// How many of a run's model calls were dispatched and have no recorded outcome: in
    /// flight, or their process stopped mid-call (agentrt charges a call when it returns, so
    /// such a call is in none of the run's totals).
    pub fn count_unrecorded_model_calls(&self, run_id: impl AsKey) -> Result<i64, StoreError> {
        let run_id = key(&run_id);
        self.read(|c| {
            c.prepare_cached(UNRECORDED_CALLS)
                .and_then(|mut s| s.query_row([&run_id], |r| r.get(0)))
                .ctx("count model calls")
        })
    }
}

/// A run's model calls dispatched without a recorded outcome (the same text on PostgreSQL,
/// `?1` read as `$1`).
pub(crate) const UNRECORDED_CALLS: &str =
    "SELECT count(*) FROM model_calls WHERE run_id = ?1 AND status = 'dispatched'";

/// The first approval with this id as `select` (`SELECT … FROM approvals`) reads it and `row`
/// decodes it, with its run's status and its reason; `None` if there is none.
fn approval_view(
    c: &Connection,
    select: &str,
    id: Text<'_>,
    row: impl FnOnce(&rusqlite::Row<'_>) -> Approval,
) -> Result<Option<ApprovalView>, StoreError> {
    let sql = format!("{select} WHERE id = ? ORDER BY rowid LIMIT 1");
    let Some(approval) = query_opt(c, &sql, &[&id], "get approval", row)? else {
        return Ok(None);
    };
    let reason =
        approval_reason(c, approval.run_id_bytes(), approval.id_bytes()).unwrap_or_default();
    Ok(Some(ApprovalView {
        run_status: run_status(c, approval.run_id_bytes())?,
        reason,
        approval,
    }))
}

/// A run's approvals, keyed by rowid (creation order).
const APPROVALS: RunList<Approval> = RunList {
    name: "approvals",
    what: "list approvals",
    from: "FROM approvals WHERE run_id = ?1",
    key: &["rowid"],
    anchor: (
        "anchor",
        "SELECT rowid FROM approvals WHERE run_id = ?1 AND id = ?2",
    ),
    rows: approvals_by_key,
};

/// A run's model calls, keyed by rowid (insertion order).
const CALLS: RunList<ModelCallView> = RunList {
    name: "model calls",
    what: "list model calls",
    from: "FROM model_calls WHERE run_id = ?1",
    key: &["rowid"],
    anchor: (
        "anchor",
        "SELECT rowid FROM model_calls WHERE run_id = ?1 AND id = ?2",
    ),
    rows: calls_by_key,
};

/// The window's model calls, each read by rowid (text capped).
fn calls_by_key(c: &Connection, w: &Window) -> Result<Vec<ModelCallView>, StoreError> {
    let sql = format!(
        "SELECT {}, {}, {}, attempt, {}, {}, input_tokens, output_tokens, cached_input_tokens, \
         cost_micros, latency_ms, {}, {}, {} FROM model_calls WHERE rowid = ?",
        tc("id"),
        tc("run_id"),
        tc("step_id"),
        tc("status"),
        tc("model"),
        tc("error"),
        tc("dispatched_at"),
        tc("completed_at"),
    );
    w.each(0, |rowid| {
        query(c, &sql, &[&rowid], "list model calls", model_call)
    })
}

fn model_call(r: &rusqlite::Row<'_>) -> ModelCallView {
    model_call_from(Cols::new(r))
}

/// A model call from values laid out as `calls_by_key` selects them (another backend's read).
#[cfg(feature = "postgres")]
pub(crate) fn model_call_values(v: &[rusqlite::types::Value]) -> ModelCallView {
    model_call_from(Cols::values(v))
}

fn model_call_from(mut c: Cols<'_, '_>) -> ModelCallView {
    let mut m = ModelCallView {
        id: c.text(0, "id"),
        run_id: c.text(1, "run_id"),
        step_id: c.text(2, "step_id"),
        attempt: c.int(3, "attempt"),
        status: c.text(4, "status"),
        model: c.text(5, "model"),
        input_tokens: c.int(6, "input_tokens"),
        output_tokens: c.int(7, "output_tokens"),
        cached_input_tokens: c.int(8, "cached_input_tokens"),
        cost_micros: c.int(9, "cost_micros"),
        latency_ms: c.int(10, "latency_ms"),
        error: c.text(11, "error"),
        dispatched_at: c.time(12, "dispatched_at"),
        completed_at: c.time(13, "completed_at"),
        ..ModelCallView::default()
    };
    (m.decode_error, m.raw_invalid) = c.take_notes();
    m
}

/// A run's events, keyed by `seq` on the `(run_id, seq)` index.
fn events_of<'a>(run_id: &'a dyn rusqlite::ToSql) -> KeyedList<'a> {
    KeyedList {
        what: "list events",
        from: "FROM events WHERE run_id = ?1".into(),
        args: vec![run_id],
        key: &["seq"],
        desc: false,
    }
}

/// The window's events (one range read: its seqs are consecutive in the run) with marks.
fn marked_events(
    c: &Connection,
    run_id: Text<'_>,
    w: &Window,
) -> Result<Vec<MarkedEvent>, StoreError> {
    let events = events_in(c, w, "run_id = ? AND seq >= ? AND seq <= ?", &run_id)?;
    let mut items = Vec::with_capacity(events.len());
    for event in events {
        let mark = mark(c, event.seq)?;
        items.push(MarkedEvent { event, mark });
    }
    Ok(items)
}

/// The chain mark of event `seq` inside the caller's transaction.
fn mark(c: &Connection, seq: i64) -> Result<ChainMark, StoreError> {
    let (len, prev): (i64, Option<i64>) = c
        .prepare_cached(
            "SELECT COALESCE(length(payload_json), 0), (SELECT MAX(seq) FROM events WHERE seq < ?1) \
             FROM events WHERE seq = ?1",
        )
        .ctx("chain mark")?
        .query_row(params![seq], |r| Ok((r.get(0)?, r.get(1)?)))
        .ctx("chain mark")?;
    let prev_ok = match prev {
        None => seq == 1,
        Some(p) => p.checked_add(1) == Some(seq),
    };
    if len > MAX_PAGE_TEXT || !prev_ok {
        return Ok(ChainMark::Unknown);
    }
    Ok(mark_of(&verify(c, seq, seq)?))
}

/// An event's mark from the store's verification of that one event.
pub(crate) fn mark_of(report: &super::events::ChainReport) -> ChainMark {
    match &report.chain_break {
        None if report.checked == 1 => ChainMark::Holds,
        None => ChainMark::Unknown,
        Some(b) if b.expected.is_empty() => ChainMark::Unknown,
        Some(_) => ChainMark::Broken,
    }
}
