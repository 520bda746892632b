//! Read models for a review front end (the console): the approval queue, the runs overview,
//! header counts, a run's approvals with its status, one approval whole with its reason, events
//! with their chain marks, and model calls. Each is one read transaction over a bounded page
//! (keys first, then each row through the store's capped selects and decoders); nothing loads a
//! table whole and nothing fails on a damaged row. Damaged rows themselves are in
//! `damaged.rs`.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};

use super::Store;
use super::error::{Ctx, StoreError};
use super::events::verify;
use super::pages::{
    MAX_PAGE_TEXT, Page, approval_reason, approval_select, capped_approval, check_page, count,
    event_select, query, run_select, tc,
};
use super::rows::{APPROVAL_COLUMNS, Cols, approval_from, event_from, run_from};
use crate::runtime::types::{Approval, Event, RawInvalid, Run, RunStatus, Timestamp};

/// Characters of the arguments a queue item keeps (bytes when they are not UTF-8).
pub const QUEUE_ARGS_HEAD: usize = 4096;

/// A step row SQLite itself sees as undecodable (`s` = steps): what marks a run damaged.
pub(super) const STEP_BAD_SQL: &str = "(s.decision_json != '' AND NOT json_valid(s.decision_json)) OR \
    (s.policy_json != '' AND NOT json_valid(s.policy_json)) OR \
    (s.observation_json != '' AND NOT json_valid(s.observation_json)) OR \
    julianday(s.started_at) IS NULL OR (s.finished_at != '' AND julianday(s.finished_at) IS NULL)";

/// An approval row SQLite itself sees as undecodable (`a` = approvals).
pub(super) const APPROVAL_BAD_SQL: &str = "NOT json_valid(a.request_json) OR \
    julianday(a.created_at) IS NULL OR (a.expires_at != '' AND julianday(a.expires_at) IS NULL) OR \
    (a.decided_at != '' AND julianday(a.decided_at) IS NULL)";

/// A pending approval of a WAITING run as the queue shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueItem {
    /// The approval read as a page reads it (capped; an oversized request is reduced).
    pub approval: Approval,
    /// The index of the approval's step, if the step exists and its index is an integer.
    pub step_index: Option<i64>,
    /// The tool named by the request (`spec.name`), absent when the request does not decode.
    pub tool: Option<String>,
    /// The first [`QUEUE_ARGS_HEAD`] characters of the request's arguments as stored, absent
    /// when the request does not decode.
    pub args_head: Option<Vec<u8>>,
}

/// A run as the runs overview shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOverview {
    /// The run read as a page reads it (capped).
    pub run: Run,
    /// Pending approvals, counted only while the run is WAITING_FOR_APPROVAL (a cancelled run
    /// may keep a pending approval; it is not waiting).
    pub pending: i64,
    /// Whether a step or approval of the run does not decode.
    pub damaged: bool,
}

/// Counts of runs by status and of pending approvals of waiting runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewCounts {
    pub runs: i64,
    pub waiting: i64,
    /// RUNNING and INTERRUPTED.
    pub running: i64,
    pub failed: i64,
    /// Pending approvals of WAITING runs only.
    pub pending: i64,
}

/// A page of a run's approvals and the run's status, read together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunApprovals {
    pub page: Page<Approval>,
    /// `None` when the run does not exist.
    pub run_status: Option<RunStatus>,
}

/// One approval read whole (what a decision is taken on) with its run's status and the
/// `reason` of its `approval.requested` event.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalView {
    pub approval: Approval,
    pub run_status: Option<RunStatus>,
    pub reason: String,
}

/// Whether one event's stored hash is the one its fields and the previous event's hash give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainMark {
    Holds,
    Broken,
    /// Not checked here: the previous event is missing, or the payload is over
    /// [`MAX_PAGE_TEXT`] (verifying the whole chain checks it).
    Unknown,
}

/// An event read as a page reads it, with its chain mark.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkedEvent {
    pub event: Event,
    pub mark: ChainMark,
}

/// A `model_calls` row (text capped as pages cap it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelCallView {
    pub id: String,
    pub run_id: String,
    pub step_id: String,
    pub attempt: i64,
    pub status: String,
    pub model: String,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_input_tokens: i64,
    pub cost_micros: i64,
    pub latency_ms: i64,
    pub error: String,
    pub dispatched_at: Timestamp,
    pub completed_at: Timestamp,
    pub decode_error: String,
    pub raw_invalid: RawInvalid,
}

/// The stored bytes of `column` when it was not valid UTF-8, else the decoded text's bytes.
pub fn raw_bytes(raw_invalid: &RawInvalid, column: &str, text: &str) -> Vec<u8> {
    raw_invalid
        .iter()
        .find(|(c, _)| *c == column)
        .map(|(_, b)| b.clone())
        .unwrap_or_else(|| text.as_bytes().to_vec())
}

/// The first `max` characters of `b` (the first `max` bytes when `b` is not UTF-8).
fn head(b: &[u8], max: usize) -> Vec<u8> {
    match std::str::from_utf8(b) {
        Ok(s) => match s.char_indices().nth(max) {
            Some((end, _)) => b[..end].to_vec(),
            None => b.to_vec(),
        },
        Err(_) => b[..b.len().min(max)].to_vec(),
    }
}

fn opt_int(
    c: &Connection,
    sql: &str,
    arg: &dyn rusqlite::ToSql,
) -> Result<Option<i64>, StoreError> {
    let v = c
        .prepare_cached(sql)
        .ctx("view")?
        .query_row([arg], |r| {
            Ok(match r.get_ref(0)? {
                ValueRef::Integer(i) => Some(i),
                _ => None,
            })
        })
        .optional()
        .ctx("view")?;
    Ok(v.flatten())
}

fn run_status(c: &Connection, run_id: &str) -> Result<Option<RunStatus>, StoreError> {
    let s: Option<Vec<u8>> = c
        .prepare_cached("SELECT CAST(status AS BLOB) FROM runs WHERE id = ?")
        .ctx("run status")?
        .query_row([run_id], |r| r.get::<_, Option<Vec<u8>>>(0))
        .optional()
        .ctx("run status")?
        .map(Option::unwrap_or_default);
    Ok(s.map(|s| RunStatus::parse(&String::from_utf8_lossy(&s))))
}

/// The queue's condition: pending approvals of WAITING runs matching the lowercased filter.
const QUEUE_COND: &str = "a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL' AND (?1 = '' OR \
    instr(lower(a.id || ' ' || a.run_id || ' ' || a.kind || ' ' || \
    CASE WHEN json_valid(a.request_json) THEN COALESCE(json_extract(a.request_json, '$.spec.name'), '') || ' ' || \
    COALESCE(substr(json_extract(a.request_json, '$.args'), 1, 4096), '') ELSE '' END), ?1) > 0)";

/// The runs overview's condition: status (all when `''`) and the lowercased filter.
const RUNS_COND: &str = "(?1 = '' OR r.status = ?1) AND (?2 = '' OR instr(lower(r.id || ' ' || \
    substr(r.goal, 1, 4096) || ' ' || r.status || ' ' || r.reason), ?2) > 0)";

fn queue_item(c: &Connection, rowid: i64) -> Result<Option<QueueItem>, StoreError> {
    let sql = format!("{} WHERE rowid = ?", approval_select());
    let Some(approval) = c
        .prepare_cached(&sql)
        .ctx("queue")?
        .query_row([rowid], |r| Ok(capped_approval(r)))
        .optional()
        .ctx("queue")?
    else {
        return Ok(None);
    };
    let step_index = opt_int(c, "SELECT idx FROM steps WHERE id = ?", &approval.step_id)?;
    let tool = approval.request.as_ref().map(|r| r.spec.name.clone());
    let args_head = approval
        .request
        .as_ref()
        .map(|r| head(&r.args, QUEUE_ARGS_HEAD));
    Ok(Some(QueueItem {
        approval,
        step_index,
        tool,
        args_head,
    }))
}

fn overview(c: &Connection, rowid: i64) -> Result<Option<RunOverview>, StoreError> {
    let sql = format!("{} WHERE rowid = ?", run_select());
    let Some(run) = c
        .prepare_cached(&sql)
        .ctx("runs overview")?
        .query_row([rowid], |r| Ok(run_from(&mut Cols::new(r))))
        .optional()
        .ctx("runs overview")?
    else {
        return Ok(None);
    };
    let sql = format!(
        "SELECT CASE WHEN r.status = 'WAITING_FOR_APPROVAL' THEN \
         (SELECT COUNT(*) FROM approvals a WHERE a.run_id = r.id AND a.status = 'pending') ELSE 0 END, \
         EXISTS (SELECT 1 FROM steps s WHERE s.run_id = r.id AND ({STEP_BAD_SQL})) OR \
         EXISTS (SELECT 1 FROM approvals a WHERE a.run_id = r.id AND ({APPROVAL_BAD_SQL})) \
         FROM runs r WHERE r.rowid = ?"
    );
    let (pending, damaged) = c
        .prepare_cached(&sql)
        .ctx("runs overview")?
        .query_row([rowid], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, bool>(1)?)))
        .ctx("runs overview")?;
    Ok(Some(RunOverview {
        run,
        pending,
        damaged,
    }))
}

fn rowids(
    c: &Connection,
    sql: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<Vec<i64>, StoreError> {
    query(c, sql, args, "view keys", |r| {
        r.get::<_, i64>(0).unwrap_or(0)
    })
}

impl Store {
    /// Header counts: runs by status and pending approvals of WAITING runs.
    pub fn view_counts(&self) -> Result<ViewCounts, StoreError> {
        self.read(|c| {
            let mut out = ViewCounts::default();
            let by_status = query(
                c,
                "SELECT CAST(status AS BLOB), COUNT(*) FROM runs GROUP BY status",
                &[],
                "counts",
                |r| {
                    let s: Option<Vec<u8>> = r.get(0).unwrap_or_default();
                    (s.unwrap_or_default(), r.get::<_, i64>(1).unwrap_or(0))
                },
            )?;
            for (status, n) in by_status {
                out.runs += n;
                match status.as_slice() {
                    b"WAITING_FOR_APPROVAL" => out.waiting += n,
                    b"RUNNING" | b"INTERRUPTED" => out.running += n,
                    b"FAILED" => out.failed += n,
                    _ => {}
                }
            }
            out.pending = count(
                c,
                "SELECT COUNT(*) FROM approvals a JOIN runs r ON r.id = a.run_id \
                 WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL'",
                &[],
            )?;
            Ok(out)
        })
    }

    /// The approval queue: pending approvals of WAITING runs, oldest first, whose id, run id,
    /// kind, tool or first 4096 characters of arguments contain `filter` (case-insensitive for
    /// ASCII; all when empty), with the total that match.
    pub fn list_queue_page(
        &self,
        filter: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<QueueItem>, StoreError> {
        check_page("queue", limit, offset)?;
        let filter = filter.to_lowercase();
        self.read(|c| {
            let from = "FROM approvals a JOIN runs r ON r.id = a.run_id";
            let total = count(
                c,
                &format!("SELECT COUNT(*) {from} WHERE {QUEUE_COND}"),
                &[&filter],
            )?;
            let keys = rowids(
                c,
                &format!(
                    "SELECT a.rowid {from} WHERE {QUEUE_COND} ORDER BY a.rowid LIMIT ?2 OFFSET ?3"
                ),
                &[&filter, &limit, &offset],
            )?;
            let mut items = Vec::with_capacity(keys.len());
            for k in keys {
                items.extend(queue_item(c, k)?);
            }
            Ok(Page { items, total })
        })
    }

    /// Runs newest first, only those with `status` (all when empty) whose id, goal (first 4096
    /// characters), status or reason contain `filter`, with the total that match.
    ///
    /// With an `anchor` (the index and id of a row of the same list already read), the page is
    /// read by key around it (`rowid >=` / `<` the anchor's), so a page deep in a long list
    /// costs what a page near the top does; without one, or when the anchor run is gone, it
    /// reads by OFFSET.
    pub fn list_runs_overview(
        &self,
        status: &str,
        filter: &str,
        limit: i64,
        offset: i64,
        anchor: Option<(i64, &str)>,
    ) -> Result<Page<RunOverview>, StoreError> {
        check_page("runs", limit, offset)?;
        let filter = filter.to_lowercase();
        self.read(|c| {
            let total = count(
                c,
                &format!("SELECT COUNT(*) FROM runs r WHERE {RUNS_COND}"),
                &[&status, &filter],
            )?;
            let anchor_rowid = match anchor {
                Some((i, id)) if i >= 0 => {
                    opt_int(c, "SELECT rowid FROM runs WHERE id = ?", &id)?.map(|r| (i, r))
                }
                _ => None,
            };
            let sel = "SELECT r.rowid FROM runs r WHERE";
            let keys = match anchor_rowid {
                None => rowids(
                    c,
                    &format!("{sel} {RUNS_COND} ORDER BY r.rowid DESC LIMIT ?3 OFFSET ?4"),
                    &[&status, &filter, &limit, &offset],
                )?,
                Some((ai, ar)) => {
                    let end = offset.saturating_add(limit); // one past the page
                    let mut keys = Vec::new();
                    // Rows at or above the anchor (index <= ai): nearest first, then reversed.
                    if offset <= ai {
                        let hi = ai.min(end - 1);
                        let mut up = rowids(
                            c,
                            &format!(
                                "{sel} {RUNS_COND} AND r.rowid >= ?3 ORDER BY r.rowid ASC LIMIT ?4 OFFSET ?5"
                            ),
                            &[&status, &filter, &ar, &(hi - offset + 1), &(ai - hi)],
                        )?;
                        up.reverse();
                        keys.extend(up);
                    }
                    // Rows below the anchor (index > ai): newest first.
                    let from = offset.max(ai + 1);
                    if end > from {
                        keys.extend(rowids(
                            c,
                            &format!(
                                "{sel} {RUNS_COND} AND r.rowid < ?3 ORDER BY r.rowid DESC LIMIT ?4 OFFSET ?5"
                            ),
                            &[&status, &filter, &ar, &(end - from), &(from - ai - 1)],
                        )?);
                    }
                    keys
                }
            };
            let mut items = Vec::with_capacity(keys.len());
            for k in keys {
                items.extend(overview(c, k)?);
            }
            Ok(Page { items, total })
        })
    }

    /// A run's approvals in creation order (capped, for showing) and the run's status, read in
    /// one transaction.
    pub fn list_run_approvals(
        &self,
        run_id: &str,
        limit: i64,
        offset: i64,
    ) -> Result<RunApprovals, StoreError> {
        check_page("approvals", limit, offset)?;
        self.read(|c| {
            let sql = format!(
                "{} WHERE run_id = ? ORDER BY rowid LIMIT ? OFFSET ?",
                approval_select()
            );
            let items = query(
                c,
                &sql,
                &[&run_id, &limit, &offset],
                "list approvals",
                capped_approval,
            )?;
            let total = count(
                c,
                "SELECT COUNT(*) FROM approvals WHERE run_id = ?",
                &[&run_id],
            )?;
            Ok(RunApprovals {
                page: Page { items, total },
                run_status: run_status(c, run_id)?,
            })
        })
    }

    /// One approval by id, whole, with its run's status and its reason; `None` if absent.
    pub fn approval_view(&self, id: &str) -> Result<Option<ApprovalView>, StoreError> {
        self.read(|c| {
            let Some(approval) = c
                .prepare_cached(&format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ? ORDER BY rowid LIMIT 1"
                ))
                .ctx("get approval")?
                .query_row([id], |r| Ok(approval_from(&mut Cols::new(r))))
                .optional()
                .ctx("get approval")?
            else {
                return Ok(None);
            };
            let reason = approval_reason(c, &approval.run_id, &approval.id).unwrap_or_default();
            Ok(Some(ApprovalView {
                run_status: run_status(c, &approval.run_id)?,
                reason,
                approval,
            }))
        })
    }

    /// A run's events in seq order (capped), each with its chain mark, with the total. The
    /// mark is computed with the store's chain verification over that one event; an event
    /// whose payload is over [`MAX_PAGE_TEXT`] or whose previous event is missing is
    /// [`ChainMark::Unknown`].
    pub fn list_marked_events(
        &self,
        run_id: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<MarkedEvent>, StoreError> {
        check_page("events", limit, offset)?;
        self.read(|c| {
            let sql = format!(
                "{} WHERE run_id = ? ORDER BY seq LIMIT ? OFFSET ?",
                event_select()
            );
            let events = query(c, &sql, &[&run_id, &limit, &offset], "list events", |r| {
                event_from(&mut Cols::new(r))
            })?;
            let mut items = Vec::with_capacity(events.len());
            for event in events {
                let mark = mark(c, event.seq)?;
                items.push(MarkedEvent { event, mark });
            }
            let total = count(
                c,
                "SELECT COUNT(*) FROM events WHERE run_id = ?",
                &[&run_id],
            )?;
            Ok(Page { items, total })
        })
    }

    /// A run's model calls in insertion order (text capped), with the total.
    pub fn list_model_calls_page(
        &self,
        run_id: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<ModelCallView>, StoreError> {
        check_page("model calls", limit, offset)?;
        self.read(|c| {
            let sql = format!(
                "SELECT {}, {}, {}, attempt, {}, {}, input_tokens, output_tokens, cached_input_tokens, \
                 cost_micros, latency_ms, {}, {}, {} FROM model_calls WHERE run_id = ? \
                 ORDER BY rowid LIMIT ? OFFSET ?",
                tc("id"),
                tc("run_id"),
                tc("step_id"),
                tc("status"),
                tc("model"),
                tc("error"),
                tc("dispatched_at"),
                tc("completed_at"),
            );
            let items = query(c, &sql, &[&run_id, &limit, &offset], "list model calls", |r| {
                let mut c = Cols::new(r);
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
                m.decode_error = std::mem::take(&mut c.decode_error);
                m.raw_invalid = std::mem::take(&mut c.raw_invalid);
                m
            })?;
            let total = count(
                c,
                "SELECT COUNT(*) FROM model_calls WHERE run_id = ?",
                &[&run_id],
            )?;
            Ok(Page { items, total })
        })
    }
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
    let report = verify(c, seq, seq)?;
    Ok(match report.chain_break {
        None if report.checked == 1 => ChainMark::Holds,
        None => ChainMark::Unknown,
        Some(b) if b.expected.is_empty() => ChainMark::Unknown,
        Some(_) => ChainMark::Broken,
    })
}

impl Store {
    /// Sets this connection's page cache to `kib` KiB (`PRAGMA cache_size = -kib`): a front
    /// end paging through a large database keeps the pages it re-reads. Not a hardening
    /// setting; the connection's other settings are unchanged.
    pub fn set_page_cache_kib(&self, kib: i64) -> Result<(), StoreError> {
        let kib = kib.clamp(0, 1 << 30);
        self.lock()
            .execute_batch(&format!("PRAGMA cache_size = -{kib};"))
            .ctx("page cache")
    }
}
