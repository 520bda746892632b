//! `ConsoleData` on a read-only SQLite connection: bounded page reads (spec section 10), capped
//! columns, totals by `COUNT`, filters in SQL.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Row, params};

use super::data::*;
use super::decode;

/// Characters of a text column read inline (spec `MaxPageText`).
pub const MAX_PAGE_TEXT: i64 = 65536;

/// SQL for a text column capped as spec section 10 says.
fn cap(col: &str) -> String {
    format!(
        "CASE WHEN length({col}) > {MAX_PAGE_TEXT} THEN substr({col},1,{MAX_PAGE_TEXT}) || '…[truncated: ' || length({col}) || ' characters]' ELSE {col} END"
    )
}

pub struct SqliteData {
    conn: Connection,
}

impl SqliteData {
    /// Opens the database read-only (the console's reader never writes).
    pub fn open(path: &Path) -> Result<Self, DataError> {
        let err = |e: rusqlite::Error| DataError::Open {
            path: path.display().to_string(),
            cause: e.to_string(),
        };
        if !path.exists() {
            return Err(DataError::Open {
                path: path.display().to_string(),
                cause: "no such file".into(),
            });
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(2))
            .map_err(err)?;
        conn.execute_batch("PRAGMA query_only = ON; PRAGMA cache_size = -32768;")
            .map_err(err)?;
        conn.query_row("SELECT count(*) FROM runs", [], |_| Ok(()))
            .map_err(err)?;
        Ok(SqliteData { conn })
    }
}

fn rd(e: rusqlite::Error) -> DataError {
    DataError::Read(e.to_string())
}

/// Bytes of a column whatever its storage class (NULL reads as empty).
pub(crate) fn bytes(row: &Row<'_>, i: usize) -> rusqlite::Result<Vec<u8>> {
    Ok(match row.get_ref(i)? {
        ValueRef::Null => Vec::new(),
        ValueRef::Integer(n) => n.to_string().into_bytes(),
        ValueRef::Real(f) => f.to_string().into_bytes(),
        ValueRef::Text(t) | ValueRef::Blob(t) => t.to_vec(),
    })
}

/// A column as a string (lossy); for ids, statuses, kinds and times.
pub(crate) fn text(row: &Row<'_>, i: usize) -> rusqlite::Result<String> {
    Ok(String::from_utf8_lossy(&bytes(row, i)?).into_owned())
}

fn opt_bytes(row: &Row<'_>, i: usize) -> rusqlite::Result<Option<Vec<u8>>> {
    Ok(match row.get_ref(i)? {
        ValueRef::Null => None,
        _ => Some(bytes(row, i)?),
    })
}

fn like(filter: &str) -> String {
    filter.to_lowercase()
}

impl SqliteData {
    fn counts(&self) -> rusqlite::Result<Counts> {
        let mut c = Counts::default();
        let mut st = self
            .conn
            .prepare_cached("SELECT status, COUNT(*) FROM runs GROUP BY status")?;
        let rows = st.query_map([], |r| Ok((text(r, 0)?, r.get::<_, i64>(1)?)))?;
        for row in rows {
            let (s, n) = row?;
            let n = n.max(0) as u64;
            c.runs += n;
            match s.as_str() {
                "WAITING_FOR_APPROVAL" => c.waiting += n,
                "RUNNING" | "INTERRUPTED" => c.running += n,
                "FAILED" => c.failed += n,
                _ => {}
            }
        }
        c.pending = self.conn.query_row(
            "SELECT COUNT(*) FROM approvals a JOIN runs r ON r.id = a.run_id \
             WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL'",
            [],
            |r| r.get::<_, i64>(0),
        )? as u64;
        Ok(c)
    }

    fn queue(&self, filter: &str, offset: u64, limit: u64) -> rusqlite::Result<Page<QueueRow>> {
        let cond = "a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL' AND (?1 = '' OR \
             instr(lower(a.id || ' ' || a.run_id || ' ' || a.kind || ' ' || \
             CASE WHEN json_valid(a.request_json) THEN COALESCE(json_extract(a.request_json, '$.spec.name'), '') || ' ' || \
             COALESCE(substr(json_extract(a.request_json, '$.args'), 1, 4096), '') ELSE '' END), ?1) > 0)";
        let total: i64 = self.conn.query_row(
            &format!(
                "SELECT COUNT(*) FROM approvals a JOIN runs r ON r.id = a.run_id WHERE {cond}"
            ),
            params![like(filter)],
            |r| r.get(0),
        )?;
        let sql = format!(
            "SELECT a.id, a.run_id, a.step_id, s.idx, a.kind, a.created_at, a.expires_at, \
             CASE WHEN json_valid(a.request_json) THEN json_extract(a.request_json, '$.spec.name') END, \
             CASE WHEN json_valid(a.request_json) THEN substr(json_extract(a.request_json, '$.args'), 1, 4096) END \
             FROM approvals a JOIN runs r ON r.id = a.run_id LEFT JOIN steps s ON s.id = a.step_id \
             WHERE {cond} ORDER BY a.rowid LIMIT ?2 OFFSET ?3"
        );
        let mut st = self.conn.prepare_cached(&sql)?;
        let rows = st
            .query_map(params![like(filter), limit as i64, offset as i64], |r| {
                Ok(QueueRow {
                    approval_id: text(r, 0)?,
                    run_id: text(r, 1)?,
                    step_id: text(r, 2)?,
                    step_index: r.get::<_, Option<i64>>(3)?,
                    kind: text(r, 4)?,
                    created_at: text(r, 5)?,
                    expires_at: text(r, 6)?,
                    tool: opt_bytes(r, 7)?,
                    args: opt_bytes(r, 8)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Page {
            offset,
            total: total.max(0) as u64,
            rows,
        })
    }

    /// Runs newest first. With an anchor (a row's index and id from the window already
    /// read), the window is read by key around it (`rowid <` / `rowid >=` the anchor's), so a
    /// page deep in a long list costs what a page near the top does; without one (or when the
    /// anchor is gone) it falls back to OFFSET.
    fn runs(
        &self,
        status: Option<&str>,
        filter: &str,
        offset: u64,
        limit: u64,
        anchor: Option<&(u64, String)>,
    ) -> rusqlite::Result<Page<RunRow>> {
        let cond = "(?1 = '' OR r.status = ?1) AND (?2 = '' OR instr(lower(r.id || ' ' || \
             substr(r.goal, 1, 4096) || ' ' || r.status || ' ' || r.reason), ?2) > 0)";
        let status = status.unwrap_or("");
        let total: i64 = self.conn.query_row(
            &format!("SELECT COUNT(*) FROM runs r WHERE {cond}"),
            params![status, like(filter)],
            |r| r.get(0),
        )?;
        let cols = format!(
            "SELECT r.id, {goal}, r.status, r.reason, {detail}, r.step_count, r.created_at, r.finished_at, \
             (SELECT COUNT(*) FROM approvals a WHERE a.run_id = r.id AND a.status = 'pending'), \
             EXISTS (SELECT 1 FROM steps s WHERE s.run_id = r.id AND ({sbad})) OR \
             EXISTS (SELECT 1 FROM approvals a WHERE a.run_id = r.id AND ({abad})) FROM runs r",
            goal = cap("r.goal"),
            detail = cap("r.reason_detail"),
            sbad = decode::STEP_BAD_SQL,
            abad = decode::APPROVAL_BAD_SQL,
        );
        let row = |r: &Row<'_>| -> rusqlite::Result<RunRow> {
            Ok(RunRow {
                id: text(r, 0)?,
                goal: bytes(r, 1)?,
                status: text(r, 2)?,
                reason: text(r, 3)?,
                reason_detail: bytes(r, 4)?,
                step_count: r.get::<_, Option<i64>>(5)?.unwrap_or(0),
                created_at: text(r, 6)?,
                finished_at: text(r, 7)?,
                pending: r.get::<_, i64>(8)?.max(0) as u64,
                damaged: r.get::<_, bool>(9)?,
            })
        };
        let page = |rows| Page {
            offset,
            total: total.max(0) as u64,
            rows,
        };
        let anchor_rowid: Option<i64> = match anchor {
            Some((_, id)) => self
                .conn
                .query_row("SELECT rowid FROM runs WHERE id = ?1", params![id], |r| {
                    r.get(0)
                })
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })?,
            None => None,
        };
        let (Some((ai, _)), Some(ar)) = (anchor, anchor_rowid) else {
            let sql = format!("{cols} WHERE {cond} ORDER BY r.rowid DESC LIMIT ?3 OFFSET ?4");
            let mut st = self.conn.prepare_cached(&sql)?;
            let rows = st
                .query_map(
                    params![status, like(filter), limit as i64, offset as i64],
                    row,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            return Ok(page(rows));
        };
        let ai = *ai;
        let end = offset + limit; // one past the window
        let mut rows = Vec::new();
        // Rows at or above the anchor (index <= ai): rowid >= anchor, nearest first, reversed.
        if offset <= ai {
            let hi = ai.min(end.saturating_sub(1));
            let sql = format!(
                "{cols} WHERE {cond} AND r.rowid >= ?3 ORDER BY r.rowid ASC LIMIT ?4 OFFSET ?5"
            );
            let mut st = self.conn.prepare_cached(&sql)?;
            let mut up = st
                .query_map(
                    params![
                        status,
                        like(filter),
                        ar,
                        (hi - offset + 1) as i64,
                        (ai - hi) as i64
                    ],
                    row,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            up.reverse();
            rows.extend(up);
        }
        // Rows below the anchor (index > ai): rowid < anchor, newest first.
        let from = offset.max(ai + 1);
        if end > from {
            let sql = format!(
                "{cols} WHERE {cond} AND r.rowid < ?3 ORDER BY r.rowid DESC LIMIT ?4 OFFSET ?5"
            );
            let mut st = self.conn.prepare_cached(&sql)?;
            rows.extend(
                st.query_map(
                    params![
                        status,
                        like(filter),
                        ar,
                        (end - from) as i64,
                        (from - ai - 1) as i64
                    ],
                    row,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?,
            );
        }
        Ok(page(rows))
    }

    fn run(&self, id: &str) -> rusqlite::Result<Option<RunHeader>> {
        let sql = format!(
            "SELECT id, {goal}, status, reason, {detail}, \
             CASE WHEN length(limits_json) > {MAX_PAGE_TEXT} THEN '' ELSE limits_json END, \
             step_count, created_at, started_at, finished_at, model_calls, input_tokens, \
             output_tokens, cached_input_tokens, estimated_cost_micros, active_ms, {owner}, \
             lease_expires_at FROM runs WHERE id = ?1",
            goal = cap("goal"),
            detail = cap("reason_detail"),
            owner = cap("lease_owner"),
        );
        let mut st = self.conn.prepare_cached(&sql)?;
        let mut rows = st.query(params![id])?;
        let Some(r) = rows.next()? else {
            return Ok(None);
        };
        let n =
            |i: usize| -> rusqlite::Result<i64> { Ok(r.get::<_, Option<i64>>(i)?.unwrap_or(0)) };
        Ok(Some(RunHeader {
            id: text(r, 0)?,
            goal: bytes(r, 1)?,
            status: text(r, 2)?,
            reason: text(r, 3)?,
            reason_detail: bytes(r, 4)?,
            limits_json: bytes(r, 5)?,
            step_count: n(6)?,
            created_at: text(r, 7)?,
            started_at: text(r, 8)?,
            finished_at: text(r, 9)?,
            model_calls: n(10)?,
            input_tokens: n(11)?,
            output_tokens: n(12)?,
            cached_input_tokens: n(13)?,
            cost_micros: n(14)?,
            active_ms: n(15)?,
            lease_owner: bytes(r, 16)?,
            lease_expires_at: text(r, 17)?,
            resumable: false,
        }))
    }

    fn total(&self, table: &str, run: &str) -> rusqlite::Result<u64> {
        let n: i64 = self.conn.query_row(
            &format!("SELECT COUNT(*) FROM {table} WHERE run_id = ?1"),
            params![run],
            |r| r.get(0),
        )?;
        Ok(n.max(0) as u64)
    }

    fn steps(&self, run: &str, offset: u64, limit: u64) -> rusqlite::Result<Page<StepRow>> {
        let total = self.total("steps", run)?;
        let sql = format!(
            "SELECT id, idx, status, {d}, {p}, {o}, started_at, finished_at, \
             length(decision_json), length(policy_json), length(observation_json) \
             FROM steps WHERE run_id = ?1 ORDER BY idx LIMIT ?2 OFFSET ?3",
            d = cap("decision_json"),
            p = cap("policy_json"),
            o = cap("observation_json"),
        );
        let mut st = self.conn.prepare_cached(&sql)?;
        let rows = st
            .query_map(params![run, limit as i64, offset as i64], |r| {
                let raw = decode::StepRaw {
                    decision: bytes(r, 3)?,
                    policy: bytes(r, 4)?,
                    observation: bytes(r, 5)?,
                    started_at: bytes(r, 6)?,
                    finished_at: bytes(r, 7)?,
                    lens: [
                        r.get::<_, Option<i64>>(8)?.unwrap_or(0),
                        r.get::<_, Option<i64>>(9)?.unwrap_or(0),
                        r.get::<_, Option<i64>>(10)?.unwrap_or(0),
                    ],
                };
                Ok(decode::step_row(
                    text(r, 0)?,
                    r.get::<_, i64>(1)?,
                    text(r, 2)?,
                    &raw,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Page {
            offset,
            total,
            rows,
        })
    }

    fn events(&self, run: &str, offset: u64, limit: u64) -> rusqlite::Result<Page<EventRow>> {
        let total = self.total("events", run)?;
        // The payload is read capped; an event whose payload is over the cap is not hashed
        // here (its chain mark is unknown; `:verify` walks the whole chain).
        let sql = format!(
            "SELECT e.seq, e.run_id, e.step_id, e.at, e.type, {p}, e.hash, \
             (SELECT p.hash FROM events p WHERE p.seq < e.seq ORDER BY p.seq DESC LIMIT 1), \
             (SELECT MAX(p.seq) FROM events p WHERE p.seq < e.seq), length(e.payload_json) \
             FROM events e WHERE e.run_id = ?1 ORDER BY e.seq LIMIT ?2 OFFSET ?3",
            p = cap("e.payload_json")
        );
        let mut st = self.conn.prepare_cached(&sql)?;
        let rows = st
            .query_map(params![run, limit as i64, offset as i64], |r| {
                let seq: i64 = r.get(0)?;
                let payload = bytes(r, 5)?;
                let len = r.get::<_, Option<i64>>(9)?.unwrap_or(0);
                let prev_seq: Option<i64> = r.get(8)?;
                let prev_hash = opt_bytes(r, 7)?;
                let chain = if len > MAX_PAGE_TEXT {
                    ChainMark::Unknown
                } else {
                    decode::chain_mark(
                        seq,
                        prev_seq,
                        prev_hash.as_deref(),
                        &[
                            &bytes(r, 1)?,
                            &bytes(r, 2)?,
                            &bytes(r, 3)?,
                            &bytes(r, 4)?,
                            &payload,
                        ],
                        &bytes(r, 6)?,
                    )
                };
                Ok(EventRow {
                    seq,
                    step_id: text(r, 2)?,
                    at: text(r, 3)?,
                    kind: text(r, 4)?,
                    payload,
                    chain,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Page {
            offset,
            total,
            rows,
        })
    }

    fn model_calls(
        &self,
        run: &str,
        offset: u64,
        limit: u64,
    ) -> rusqlite::Result<Page<ModelCallRow>> {
        let total = self.total("model_calls", run)?;
        let sql = format!(
            "SELECT id, step_id, attempt, status, {m}, input_tokens, output_tokens, cost_micros, \
             latency_ms, {e} FROM model_calls WHERE run_id = ?1 ORDER BY rowid LIMIT ?2 OFFSET ?3",
            m = cap("model"),
            e = cap("error"),
        );
        let mut st = self.conn.prepare_cached(&sql)?;
        let rows = st
            .query_map(params![run, limit as i64, offset as i64], |r| {
                let n = |i: usize| -> rusqlite::Result<i64> {
                    Ok(r.get::<_, Option<i64>>(i)?.unwrap_or(0))
                };
                Ok(ModelCallRow {
                    id: text(r, 0)?,
                    step_id: text(r, 1)?,
                    attempt: n(2)?,
                    status: text(r, 3)?,
                    model: bytes(r, 4)?,
                    input_tokens: n(5)?,
                    output_tokens: n(6)?,
                    cost_micros: n(7)?,
                    latency_ms: n(8)?,
                    error: bytes(r, 9)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Page {
            offset,
            total,
            rows,
        })
    }

    /// Approvals of a run, capped for showing (spec section 10).
    fn approvals(&self, run: &str, offset: u64, limit: u64) -> rusqlite::Result<Page<ApprovalRow>> {
        let total = self.total("approvals", run)?;
        let sql = format!(
            "SELECT a.id, a.run_id, a.step_id, a.kind, a.status, {c}, {p}, {q}, a.hash, a.created_at, \
             a.decided_at, {by}, {note}, a.expires_at, r.status FROM approvals a \
             JOIN runs r ON r.id = a.run_id WHERE a.run_id = ?1 ORDER BY a.rowid LIMIT ?2 OFFSET ?3",
            c = cap("a.capability_json"),
            p = cap("a.presentation_json"),
            q = cap("a.request_json"),
            by = cap("a.decided_by"),
            note = cap("a.note"),
        );
        let mut st = self.conn.prepare_cached(&sql)?;
        let rows = st
            .query_map(params![run, limit as i64, offset as i64], approval_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Page {
            offset,
            total,
            rows,
        })
    }

    /// One approval read whole: what a decision is taken on.
    fn approval(&self, id: &str) -> rusqlite::Result<Option<ApprovalRow>> {
        let mut st = self.conn.prepare_cached(
            "SELECT a.id, a.run_id, a.step_id, a.kind, a.status, a.capability_json, \
             a.presentation_json, a.request_json, a.hash, a.created_at, a.decided_at, a.decided_by, \
             a.note, a.expires_at, r.status FROM approvals a LEFT JOIN runs r ON r.id = a.run_id \
             WHERE a.id = ?1",
        )?;
        let mut rows = st.query(params![id])?;
        let Some(r) = rows.next()? else {
            return Ok(None);
        };
        let mut a = approval_from_row(r)?;
        drop(rows);
        let reason: Option<Vec<u8>> = self
            .conn
            .query_row(
                &format!(
                    "SELECT {} FROM events WHERE run_id = ?1 AND step_id = ?2 AND type = 'approval.requested' \
                     AND json_valid(payload_json) AND json_extract(payload_json, '$.approval_id') = ?3 \
                     ORDER BY seq LIMIT 1",
                    cap("json_extract(payload_json, '$.reason')")
                ),
                params![a.run_id, a.step_id, a.id],
                |r| opt_bytes(r, 0),
            )
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })?;
        a.reason = reason.unwrap_or_default();
        Ok(Some(a))
    }

    fn damaged(&self, offset: u64, limit: u64) -> rusqlite::Result<Page<DamagedRow>> {
        decode::damaged_page(&self.conn, offset, limit)
    }
}

fn approval_from_row(r: &Row<'_>) -> rusqlite::Result<ApprovalRow> {
    let mut a = ApprovalRow {
        id: text(r, 0)?,
        run_id: text(r, 1)?,
        step_id: text(r, 2)?,
        kind: text(r, 3)?,
        status: text(r, 4)?,
        capability: bytes(r, 5)?,
        presentation: bytes(r, 6)?,
        request: bytes(r, 7)?,
        hash: text(r, 8)?,
        created_at: text(r, 9)?,
        decided_at: text(r, 10)?,
        decided_by: bytes(r, 11)?,
        note: bytes(r, 12)?,
        expires_at: text(r, 13)?,
        decode_error: None,
        run_status: text(r, 14)?,
        reason: Vec::new(),
    };
    a.decode_error = decode::approval_error(&a);
    Ok(a)
}

impl ConsoleData for SqliteData {
    fn data_version(&mut self) -> Result<i64, DataError> {
        self.conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(rd)
    }

    fn query(&mut self, q: &Query) -> Result<Reply, DataError> {
        Ok(match q {
            Query::Counts => Reply::Counts(self.counts().map_err(rd)?),
            Query::Queue {
                filter,
                offset,
                limit,
            } => Reply::Queue(self.queue(filter, *offset, *limit).map_err(rd)?),
            Query::Runs {
                status,
                filter,
                offset,
                limit,
                anchor,
            } => Reply::Runs(
                self.runs(status.as_deref(), filter, *offset, *limit, anchor.as_ref())
                    .map_err(rd)?,
            ),
            Query::Run { id } => Reply::Run(self.run(id).map_err(rd)?.map(Box::new)),
            Query::Steps { run, offset, limit } => {
                Reply::Steps(self.steps(run, *offset, *limit).map_err(rd)?)
            }
            Query::Events { run, offset, limit } => {
                Reply::Events(self.events(run, *offset, *limit).map_err(rd)?)
            }
            Query::Approvals { run, offset, limit } => {
                Reply::Approvals(self.approvals(run, *offset, *limit).map_err(rd)?)
            }
            Query::ModelCalls { run, offset, limit } => {
                Reply::ModelCalls(self.model_calls(run, *offset, *limit).map_err(rd)?)
            }
            Query::Approval { id } => Reply::Approval(self.approval(id).map_err(rd)?.map(Box::new)),
            Query::Damaged { offset, limit } => {
                Reply::Damaged(self.damaged(*offset, *limit).map_err(rd)?)
            }
            Query::Verify => Reply::Verify(decode::verify_chain(&self.conn).map_err(rd)?),
        })
    }
}
