//! Read models of one run's detail for a review front end: a run's approvals with its status,
//! one approval whole with its run's status and reason, events with their chain marks (by the
//! store's own verification), and model calls. Each is one read transaction over a bounded
//! page through the store's capped selects and decoders.

use rusqlite::{Connection, OptionalExtension, params};

use super::Store;
use super::bind::key;
use super::error::{Ctx, StoreError};
use super::events::verify;
use super::pages::{
    MAX_PAGE_TEXT, Page, approval_reason, approval_select, capped_approval, check_page, count,
    event_select, query, tc,
};
use super::rows::{APPROVAL_COLUMNS, Cols, approval_from, event_from};
use crate::runtime::types::{Approval, AsKey, Event, RawInvalid, RunStatus, Timestamp};

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
    /// one transaction.
    pub fn list_run_approvals(
        &self,
        run_id: impl AsKey,
        limit: i64,
        offset: i64,
    ) -> Result<RunApprovals, StoreError> {
        let run_id = key(&run_id);
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
    pub fn approval_view(&self, id: impl AsKey) -> Result<Option<ApprovalView>, StoreError> {
        let id = key(&id);
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
            let reason = approval_reason(c, approval.run_id_bytes(), approval.id_bytes())
                .unwrap_or_default();
            Ok(Some(ApprovalView {
                run_status: run_status(c, approval.run_id_bytes())?,
                reason,
                approval,
            }))
        })
    }

    /// As [`Store::approval_view`], but the approval read as a page reads it (issue 14 item 6):
    /// a request over [`MAX_PAGE_TEXT`] characters is replaced by its stand-in (see
    /// [`crate::runtime::store::capped_request`]) and one over
    /// [`crate::runtime::store::SHOWN_REQUEST_MAX`] bytes is never loaded, so showing an
    /// approval costs what the screen shows whatever the request's size.
    pub fn approval_view_capped(&self, id: impl AsKey) -> Result<Option<ApprovalView>, StoreError> {
        let id = key(&id);
        self.read(|c| {
            let Some(approval) = c
                .prepare_cached(&format!(
                    "{} WHERE id = ? ORDER BY rowid LIMIT 1",
                    approval_select()
                ))
                .ctx("get approval")?
                .query_row([id], |r| Ok(capped_approval(r)))
                .optional()
                .ctx("get approval")?
            else {
                return Ok(None);
            };
            let reason = approval_reason(c, approval.run_id_bytes(), approval.id_bytes())
                .unwrap_or_default();
            Ok(Some(ApprovalView {
                run_status: run_status(c, approval.run_id_bytes())?,
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
        run_id: impl AsKey,
        limit: i64,
        offset: i64,
    ) -> Result<Page<MarkedEvent>, StoreError> {
        let run_id = key(&run_id);
        self.list_marked_events_near(run_id, limit, offset, None)
    }

    /// As [`Store::list_marked_events`], read by key (issue 14 item 8) around an `anchor`: the
    /// index and `seq` of an event of the same run already read. The page's seqs are found by
    /// walking the `(run_id, seq)` index from the anchor (`seq <` / `>=` it, skipping only the
    /// distance from the anchor), so a page deep in a long log costs what a page near its
    /// anchor does; without an anchor, or when the anchor event is gone, it reads by OFFSET.
    /// Events are only ever appended with a larger seq, so an anchor's index stays valid.
    pub fn list_marked_events_near(
        &self,
        run_id: impl AsKey,
        limit: i64,
        offset: i64,
        anchor: Option<(i64, i64)>,
    ) -> Result<Page<MarkedEvent>, StoreError> {
        let run_id = key(&run_id);
        check_page("events", limit, offset)?;
        self.read(|c| {
            let anchor = match anchor {
                Some((ai, seq)) if ai >= 0 => c
                    .prepare_cached("SELECT 1 FROM events WHERE run_id = ? AND seq = ?")
                    .ctx("list events")?
                    .exists(params![run_id, seq])
                    .ctx("list events")?
                    .then_some((ai, seq)),
                _ => None,
            };
            let events = match anchor {
                None => {
                    let sql = format!(
                        "{} WHERE run_id = ? ORDER BY seq LIMIT ? OFFSET ?",
                        event_select()
                    );
                    query(c, &sql, &[&run_id, &limit, &offset], "list events", |r| {
                        event_from(&mut Cols::new(r))
                    })?
                }
                Some((ai, aseq)) => {
                    let end = offset.saturating_add(limit); // one past the page
                    let key = |r: &rusqlite::Row<'_>| r.get::<_, i64>(0).unwrap_or(0);
                    let mut seqs = Vec::new();
                    // Indices [offset, min(end, ai)): before the anchor, nearest first.
                    let hi = end.min(ai);
                    if offset < hi {
                        let mut up = query(
                            c,
                            "SELECT seq FROM events WHERE run_id = ?1 AND seq < ?2 \
                             ORDER BY seq DESC LIMIT ?3 OFFSET ?4",
                            &[&run_id, &aseq, &(hi - offset), &(ai - hi)],
                            "list events",
                            key,
                        )?;
                        up.reverse();
                        seqs.extend(up);
                    }
                    // Indices [max(offset, ai), end): the anchor and after it.
                    let from = offset.max(ai);
                    if end > from {
                        seqs.extend(query(
                            c,
                            "SELECT seq FROM events WHERE run_id = ?1 AND seq >= ?2 \
                             ORDER BY seq ASC LIMIT ?3 OFFSET ?4",
                            &[&run_id, &aseq, &(end - from), &(from - ai)],
                            "list events",
                            key,
                        )?);
                    }
                    match (seqs.first(), seqs.last()) {
                        (Some(lo), Some(hi)) => {
                            let sql = format!(
                                "{} WHERE run_id = ? AND seq >= ? AND seq <= ? ORDER BY seq",
                                event_select()
                            );
                            query(c, &sql, &[&run_id, lo, hi], "list events", |r| {
                                event_from(&mut Cols::new(r))
                            })?
                        }
                        _ => Vec::new(),
                    }
                }
            };
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
        run_id: impl AsKey,
        limit: i64,
        offset: i64,
    ) -> Result<Page<ModelCallView>, StoreError> {
        let run_id = key(&run_id);
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
                    id: c.key(0, "id"),
                    run_id: c.key(1, "run_id"),
                    step_id: c.key(2, "step_id"),
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
