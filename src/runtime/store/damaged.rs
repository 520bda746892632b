//! Which columns of which rows do not decode (spec 9), as a bounded page: SQL picks the
//! (row, column) pairs SQLite itself sees as undecodable (`json_valid`, `julianday`) so only the
//! page's keys are read; each row on the page is then read through the store's capped select
//! and decoder, whose decode error for that column is the reason given, with the stored bytes
//! (first 4096) kept for showing escaped.

use rusqlite::{Connection, OptionalExtension, params};

use super::Store;
use super::error::{Ctx, StoreError};
use super::pages::{
    Page, approval_select, capped_approval, capped_step, check_page, run_select, step_select,
};
use super::reads::query_opt;
use super::rows::{Cols, run_from};
use super::window::{KeyedList, Near, Window, WindowPage, int};
use crate::runtime::types::Key;
use rusqlite::types::Value;

/// Stored bytes a damaged column keeps.
pub const DAMAGED_RAW_HEAD: i64 = 4096;

/// One column of one row that does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedColumn {
    /// The run's id as stored (it need not be UTF-8).
    pub run_id: Key,
    /// `steps`, `runs` (its status) or `approvals`.
    pub table: &'static str,
    /// The row's id as stored.
    pub row_id: Key,
    /// The column as decode errors name it (`decision`, `request`, `created_at`, ...).
    pub column: &'static str,
    /// The store decoder's error for the column.
    pub error: String,
    /// The stored bytes, at most [`DAMAGED_RAW_HEAD`].
    pub raw: Vec<u8>,
    /// The stored length in bytes.
    pub raw_len: i64,
}

/// (table, decode-error column name, SQL column) by candidate number.
pub(crate) const COLUMNS: [(&str, &str, &str); 10] = [
    ("steps", "decision", "decision_json"),
    ("steps", "policy", "policy_json"),
    ("steps", "observation", "observation_json"),
    ("steps", "started_at", "started_at"),
    ("steps", "finished_at", "finished_at"),
    ("approvals", "request", "request_json"),
    ("approvals", "created_at", "created_at"),
    ("approvals", "expires_at", "expires_at"),
    ("approvals", "decided_at", "decided_at"),
    ("runs", "status", "status"),
];

/// One line per undecodable (row, column): run, table, table rank (steps 1, runs 2, approvals
/// 3: the list's order), row key, candidate number (1..=10).
const CANDIDATES: &str = "SELECT s.run_id AS run, 'steps' AS tbl, 1 AS t, s.rowid AS k, c.n AS n FROM steps s \
    JOIN (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5) c ON \
    (c.n = 1 AND s.decision_json != '' AND NOT json_valid(s.decision_json)) OR \
    (c.n = 2 AND s.policy_json != '' AND NOT json_valid(s.policy_json)) OR \
    (c.n = 3 AND s.observation_json != '' AND NOT json_valid(s.observation_json)) OR \
    (c.n = 4 AND julianday(s.started_at) IS NULL) OR \
    (c.n = 5 AND s.finished_at != '' AND julianday(s.finished_at) IS NULL) \
    UNION ALL \
    SELECT a.run_id, 'approvals', 3, a.rowid, c.n FROM approvals a \
    JOIN (SELECT 6 AS n UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c ON \
    (c.n = 6 AND NOT json_valid(a.request_json)) OR \
    (c.n = 7 AND julianday(a.created_at) IS NULL) OR \
    (c.n = 8 AND a.expires_at != '' AND julianday(a.expires_at) IS NULL) OR \
    (c.n = 9 AND a.decided_at != '' AND julianday(a.decided_at) IS NULL) \
    UNION ALL \
    SELECT r.id, 'runs', 2, r.rowid, 10 FROM runs r WHERE typeof(r.status) != 'text' OR r.status NOT IN \
    ('RUNNING','WAITING_FOR_APPROVAL','INTERRUPTED','COMPLETED','FAILED','CANCELLED')";

/// The parts of a `"; "`-joined decode error that name `column`.
pub(crate) fn error_of(decode_error: &str, column: &str) -> Option<String> {
    let prefix = format!("{column}: ");
    let parts: Vec<&str> = decode_error
        .split("; ")
        .filter(|p| p.starts_with(&prefix))
        .map(|p| &p[prefix.len()..])
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn damaged_column(
    c: &Connection,
    rowid: i64,
    n: usize,
) -> Result<Option<DamagedColumn>, StoreError> {
    let (table, column, sqlcol) = COLUMNS[n.clamp(1, COLUMNS.len()) - 1];
    // The row as a page reads it: (its run's id, its own id, its decode errors).
    let by_rowid = |select: String, row: &dyn Fn(&rusqlite::Row<'_>) -> (Key, Key, String)| {
        let sql = format!("{select} WHERE rowid = ?");
        query_opt(c, &sql, &[&rowid], "damaged rows", row)
    };
    let decoded = match table {
        "runs" => by_rowid(run_select(), &|r| {
            let run = run_from(&mut Cols::new(r));
            let id = Key::new(run.id_bytes());
            (id.clone(), id, run.decode_error)
        })?,
        "steps" => by_rowid(step_select(), &|r| {
            let s = capped_step(r);
            (
                Key::new(s.run_id_bytes()),
                Key::new(s.id_bytes()),
                s.decode_error,
            )
        })?,
        _ => by_rowid(approval_select(), &|r| {
            let a = capped_approval(r);
            (
                Key::new(a.run_id_bytes()),
                Key::new(a.id_bytes()),
                a.decode_error,
            )
        })?,
    };
    let Some((run_id, row_id, decode_error)) = decoded else {
        return Ok(None);
    };
    let (raw, raw_len): (Vec<u8>, i64) = c
        .prepare_cached(&format!(
            "SELECT substr(CAST({sqlcol} AS BLOB), 1, {DAMAGED_RAW_HEAD}), length(CAST({sqlcol} AS BLOB)) \
             FROM {table} WHERE rowid = ?"
        ))
        .ctx("damaged rows")?
        .query_row(params![rowid], |r| {
            Ok((
                r.get::<_, Option<Vec<u8>>>(0)?.unwrap_or_default(),
                r.get::<_, Option<i64>>(1)?.unwrap_or(0),
            ))
        })
        .ctx("damaged rows")?;
    let error = error_of(&decode_error, column).unwrap_or_else(|| {
        "SQLite does not read it as JSON or as a time, though the decoder accepts it".into()
    });
    Ok(Some(DamagedColumn {
        run_id,
        table,
        row_id,
        column,
        error,
        raw,
        raw_len,
    }))
}

/// The key of a damaged column already read (its table, row id and column) in the list
/// keyed by (table rank, row key, candidate): `row` finds the row's key in its table (SQLite's
/// rowid, PostgreSQL's `ord`). `None` when the column is not a candidate or the row is gone.
pub(crate) fn anchor_key(
    table: &str,
    column: &str,
    row: impl FnOnce(&'static str) -> Result<Option<i64>, StoreError>,
) -> Result<Option<Vec<Value>>, StoreError> {
    let Some(n) = COLUMNS
        .iter()
        .position(|(t, col, _)| *t == table && *col == column)
    else {
        return Ok(None);
    };
    let (tbl, _, _) = COLUMNS[n];
    let rank = match tbl {
        "steps" => 1,
        "runs" => 2,
        _ => 3,
    };
    Ok(row(tbl)?.map(|k| {
        vec![
            Value::Integer(rank),
            Value::Integer(k),
            Value::Integer(n as i64 + 1),
        ]
    }))
}

/// The damaged columns, keyed by (table rank, rowid, candidate): steps, runs, approvals.
fn damaged_list() -> KeyedList<'static> {
    KeyedList {
        what: "damaged rows",
        from: format!("FROM ({CANDIDATES}) WHERE 1"),
        args: vec![],
        key: &["t", "k", "n"],
        desc: false,
    }
}

fn damaged_items(c: &Connection, w: &Window) -> Result<Vec<DamagedColumn>, StoreError> {
    let mut items = Vec::with_capacity(w.keys.len());
    for key in &w.keys {
        let (k, n) = (
            key.get(1).map(int).unwrap_or(0),
            key.get(2).map(int).unwrap_or(1),
        );
        items.extend(damaged_column(
            c,
            k,
            n.clamp(1, COLUMNS.len() as i64) as usize,
        )?);
    }
    Ok(items)
}

impl Store {
    /// Undecodable columns of steps, run statuses and approvals, one per (row, column): steps,
    /// then runs, then approvals, each by insertion order and column, with the total. Which
    /// columns do not decode only a scan can say (no index knows), so the total is a scan of
    /// every step, approval and run; a front end reads [`Store::list_damaged_near`], which
    /// counts up to [`super::COUNT_CAP`].
    pub fn list_damaged_page(
        &self,
        limit: i64,
        offset: i64,
    ) -> Result<Page<DamagedColumn>, StoreError> {
        check_page("damaged rows", limit, offset)?;
        self.read(|c| damaged_list().page(c, offset, limit, damaged_items))
    }

    /// A window of the damaged columns read by key (issue 14 item 8): `(table, rowid, column)`
    /// walked from the nearest of the list's start, `near`'s anchor (the index, and the table,
    /// row id and column of a damaged column already read) and its end (its length as last
    /// read), with the total counted up to [`super::COUNT_CAP`]; [`Store::count_damaged`]
    /// counts when asked. The rows are still found by a scan (SQLite must look at each column
    /// to see it does not decode), stopping once the window and one row past it are found.
    pub fn list_damaged_near(
        &self,
        near: Near<(&str, &str, &str)>,
    ) -> Result<WindowPage<DamagedColumn>, StoreError> {
        check_page("damaged rows", near.limit, near.offset)?;
        self.read(|c| {
            let near = near.anchored(|(table, row_id, column)| {
                anchor_key(table, column, |t| {
                    c.prepare_cached(&format!(
                        "SELECT rowid FROM {t} WHERE id = ? ORDER BY rowid LIMIT 1"
                    ))
                    .ctx("damaged rows")?
                    .query_row([row_id], |r| r.get::<_, i64>(0))
                    .optional()
                    .ctx("damaged rows")
                })
            })?;
            damaged_list().window_page(c, near, damaged_items)
        })
    }

    /// How many columns do not decode: a scan of every step, approval and run, for callers
    /// that ask.
    pub fn count_damaged(&self) -> Result<i64, StoreError> {
        self.read(|c| damaged_list().count(c))
    }
}
