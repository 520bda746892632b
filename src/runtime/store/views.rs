//! Read models of the lists a review front end (the console) shows: the approval queue, the
//! runs overview and the header counts. Each is one read transaction over a bounded page (keys
//! first, then each row through the store's capped selects and decoders); nothing loads a table
//! whole and nothing fails on a damaged row. One run's detail reads are in `detail.rs`, damaged
//! rows in `damaged.rs`.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};

use super::Store;
use super::error::{Ctx, StoreError};
use super::pages::{Page, approval_select, capped_approval, check_page, count, query, run_select};
use super::reads::query_opt;
use super::rows::{Cols, run_from};
use super::window::{KeyedList, Near, Window, WindowPage, row_key};
use crate::runtime::types::{Approval, RawInvalid, Run};
use rusqlite::types::Value;

/// Characters of the arguments a queue item keeps (bytes when they are not UTF-8).
pub const QUEUE_ARGS_HEAD: usize = 4096;

/// A step row SQLite itself sees as undecodable (`s` = steps): what marks a run damaged.
pub(super) const STEP_BAD_SQL: &str = "(s.decision_json != '' AND NOT json_valid(s.decision_json)) OR \
    (s.policy_json != '' AND NOT json_valid(s.policy_json)) OR \
    (s.observation_json != '' AND NOT json_valid(s.observation_json)) OR \
    julianday(s.started_at) IS NULL OR (s.finished_at != '' AND julianday(s.finished_at) IS NULL)";

/// A run whose status is not one the runtime knows, or not TEXT (`r` = runs).
pub(super) const RUN_STATUS_BAD_SQL: &str = "typeof(r.status) != 'text' OR r.status NOT IN \
    ('RUNNING','WAITING_FOR_APPROVAL','INTERRUPTED','COMPLETED','FAILED','CANCELLED')";

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
    /// Whether the run's status, or a step or approval of the run, does not decode.
    pub damaged: bool,
}

/// Counts of runs by status and of pending approvals of waiting runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewCounts {
    /// Every run, whatever its status (unknown ones included).
    pub runs: i64,
    /// WAITING_FOR_APPROVAL.
    pub waiting: i64,
    /// RUNNING and INTERRUPTED.
    pub running: i64,
    /// FAILED.
    pub failed: i64,
    /// Pending approvals of WAITING runs only.
    pub pending: i64,
    /// The stored creation time of the oldest of those (by `julianday`; rows whose time does
    /// not parse are left out), as stored.
    pub oldest_pending: Option<String>,
    /// The largest rowid of those (0 when none): it grows when an approval is added, so a
    /// front end tells a new arrival from a decision.
    pub newest_pending: i64,
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

/// The queue's condition: pending approvals of WAITING runs matching the lowercased filter.
pub(super) const QUEUE_COND: &str = "a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL' AND (?1 = '' OR \
    instr(lower(a.id || ' ' || a.run_id || ' ' || a.kind || ' ' || \
    CASE WHEN json_valid(a.request_json) THEN COALESCE(json_extract(a.request_json, '$.spec.name'), '') || ' ' || \
    COALESCE(substr(json_extract(a.request_json, '$.args'), 1, 4096), '') ELSE '' END), ?1) > 0)";

/// The runs overview's condition: status (all when `''`) and the lowercased filter.
const RUNS_COND: &str = "(?1 = '' OR r.status = ?1) AND (?2 = '' OR instr(lower(r.id || ' ' || \
    substr(r.goal, 1, 4096) || ' ' || r.status || ' ' || r.reason), ?2) > 0)";

pub(super) fn queue_item(c: &Connection, rowid: i64) -> Result<Option<QueueItem>, StoreError> {
    let sql = format!("{} WHERE rowid = ?", approval_select());
    let Some(approval) = query_opt(c, &sql, &[&rowid], "queue", capped_approval)? else {
        return Ok(None);
    };
    let step_index = opt_int(c, "SELECT idx FROM steps WHERE id = ?", &approval.step_id)?;
    Ok(Some(queue_item_of(approval, step_index)))
}

/// A queue item of an approval read as a page reads it and its step's index.
pub(crate) fn queue_item_of(approval: Approval, step_index: Option<i64>) -> QueueItem {
    let tool = approval.request.as_ref().map(|r| r.spec.name.clone());
    let args_head = approval
        .request
        .as_ref()
        .map(|r| head(&r.args, QUEUE_ARGS_HEAD));
    QueueItem {
        approval,
        step_index,
        tool,
        args_head,
    }
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
         ({RUN_STATUS_BAD_SQL}) OR \
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
            let (oldest, newest) = c
                .prepare_cached(
                    "SELECT (SELECT CAST(a.created_at AS TEXT) FROM approvals a                      JOIN runs r ON r.id = a.run_id WHERE a.status = 'pending'                      AND r.status = 'WAITING_FOR_APPROVAL' AND julianday(a.created_at) IS NOT NULL                      ORDER BY julianday(a.created_at), a.rowid LIMIT 1),                      (SELECT COALESCE(MAX(a.rowid), 0) FROM approvals a JOIN runs r ON r.id = a.run_id                      WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL')",
                )
                .ctx("counts")?
                .query_row([], |r| {
                    Ok((
                        r.get::<_, Option<String>>(0).ok().flatten(),
                        r.get::<_, i64>(1).unwrap_or(0),
                    ))
                })
                .ctx("counts")?;
            out.oldest_pending = oldest;
            out.newest_pending = newest;
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
        let (items, _) = self.list_queue_rows(filter, limit, offset)?;
        let total = self.count_queue(filter)?;
        Ok(Page { items, total })
    }

    /// One window of the queue (as [`Store::list_queue_page`]) without its total, and whether
    /// more rows follow it. Reading a window costs what its rows cost; the total is a scan of
    /// the pending approvals (agentrt's schema indexes no status), which a screen can ask for
    /// after it has drawn the rows.
    pub fn list_queue_rows(
        &self,
        filter: &str,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<QueueItem>, bool), StoreError> {
        check_page("queue", limit, offset)?;
        let filter = filter.to_lowercase();
        self.read(|c| {
            let w = queue_of(&filter).window(c, Near::new(limit, offset), None)?;
            Ok((queue_items(c, &w)?, w.more))
        })
    }

    /// A window of the queue read by key (issue 14 item 8): `rowid` walked from the nearest of
    /// the queue's start, `near`'s anchor (the index and approval id of a row of the same queue
    /// already read) and its end (its length as last read, read in reverse), skipping only the
    /// distance from there. The total is counted up to [`super::COUNT_CAP`] (past it,
    /// [`Store::count_queue`] counts when asked). An anchor that has left the queue is not
    /// used. Finding pending approvals is a scan where few are pending (agentrt's schema
    /// indexes no status), so a window costs what the rows it walks past cost.
    pub fn list_queue_rows_near(
        &self,
        filter: &str,
        near: Near<&str>,
    ) -> Result<WindowPage<QueueItem>, StoreError> {
        check_page("queue", near.limit, near.offset)?;
        let filter = filter.to_lowercase();
        self.read(|c| {
            let from = "FROM approvals a JOIN runs r ON r.id = a.run_id";
            let sql = format!(
                "SELECT a.rowid {from} WHERE {QUEUE_COND} AND a.id = ?2 ORDER BY a.rowid LIMIT 1"
            );
            let near = near.anchored(|id| row_key(c, "view keys", &sql, &[&filter], id))?;
            queue_of(&filter).window_page(c, near, queue_items)
        })
    }

    /// How many approvals the queue holds for `filter` (as [`Store::list_queue_page`]).
    pub fn count_queue(&self, filter: &str) -> Result<i64, StoreError> {
        let filter = filter.to_lowercase();
        self.read(|c| {
            count(
                c,
                &format!(
                    "SELECT COUNT(*) FROM approvals a JOIN runs r ON r.id = a.run_id WHERE {QUEUE_COND}"
                ),
                &[&filter],
            )
        })
    }

    /// Runs newest first, only those with `status` (all when empty) whose id, goal (first 4096
    /// characters), status or reason contain `filter`, with the total that match (a count).
    ///
    /// With an `anchor` (the index and id of a row of the same list already read), the page is
    /// read by key around it, as [`Store::list_runs_overview_near`] reads it.
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
            let near = run_anchor(
                c,
                Near {
                    anchor,
                    ..Near::new(limit, offset)
                },
            )?;
            let w = runs_of(&status, &filter).window(c, near, Some(i64::MAX - 1))?;
            Ok(Page {
                items: overviews(c, &w)?,
                total: w.total,
            })
        })
    }

    /// A window of the runs overview read by key (issue 14 item 8): `rowid` walked (newest
    /// first) from the nearest of the list's start, `near`'s anchor (the index and id of a run
    /// of the same list already read) and its end (its length as last read, read in reverse),
    /// with the total counted up to [`super::COUNT_CAP`]; [`Store::count_runs_overview`]
    /// counts when asked. A run that is gone is not used as an anchor.
    pub fn list_runs_overview_near(
        &self,
        status: &str,
        filter: &str,
        near: Near<&str>,
    ) -> Result<WindowPage<RunOverview>, StoreError> {
        check_page("runs", near.limit, near.offset)?;
        let filter = filter.to_lowercase();
        self.read(|c| {
            let near = run_anchor(c, near)?;
            runs_of(&status, &filter).window_page(c, near, overviews)
        })
    }

    /// How many runs the overview lists for `status` and `filter`: a scan, for callers that ask.
    pub fn count_runs_overview(&self, status: &str, filter: &str) -> Result<i64, StoreError> {
        let filter = filter.to_lowercase();
        self.read(|c| runs_of(&status, &filter).count(c))
    }
}

/// The queue, keyed by the approval's rowid (oldest first). The filter is a `&String`
/// because it goes in as a `&dyn ToSql`, which a `&str` (unsized) cannot be.
#[allow(clippy::ptr_arg)]
fn queue_of<'a>(filter: &'a String) -> KeyedList<'a> {
    KeyedList {
        what: "queue",
        from: format!("FROM approvals a JOIN runs r ON r.id = a.run_id WHERE {QUEUE_COND}"),
        args: vec![filter],
        key: &["a.rowid"],
        desc: false,
    }
}

fn queue_items(c: &Connection, w: &Window) -> Result<Vec<QueueItem>, StoreError> {
    w.each(0, |rowid| queue_item(c, rowid))
}

/// The runs overview, keyed by rowid, newest first (`&String`: as for [`queue_of`]).
#[allow(clippy::ptr_arg)]
fn runs_of<'a>(status: &'a &'a str, filter: &'a String) -> KeyedList<'a> {
    KeyedList {
        what: "runs overview",
        from: format!("FROM runs r WHERE {RUNS_COND}"),
        args: vec![status, filter],
        key: &["r.rowid"],
        desc: true,
    }
}

/// `near` with its anchor run named by its rowid (not used when the run is gone).
fn run_anchor(c: &Connection, near: Near<&str>) -> Result<Near<Vec<Value>>, StoreError> {
    near.anchored(|id| row_key(c, "view", "SELECT rowid FROM runs WHERE id = ?", &[], id))
}

fn overviews(c: &Connection, w: &Window) -> Result<Vec<RunOverview>, StoreError> {
    w.each(0, |rowid| overview(c, rowid))
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
