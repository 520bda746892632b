//! The runs a worker may resume now (issue 15 item 6): WAITING runs whose awaiting step's
//! latest approval is granted (spec 4.9: only the latest approval of a step can be a grant),
//! and INTERRUPTED runs (a denial with feedback hands the run back to its program so; spec 8.3).
//! One read transaction, oldest run first, bounded by `limit`.

use rusqlite::params;

use super::Store;
use super::error::{Ctx, StoreError};
use crate::runtime::types::{Key, RunStatus};

/// A run a worker may resume, as the store read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumableRun {
    /// The run's id as stored.
    pub id: Key,
    /// `WAITING_FOR_APPROVAL` (a grant waits) or `INTERRUPTED`.
    pub status: RunStatus,
}

/// The resumable runs' query, written once for both databases: `key` is the column of a
/// row's insertion order (SQLite's `rowid`, PostgreSQL's `ord`), `limit` the limit's
/// placeholder.
pub(crate) fn resumable_sql(key: &str, limit: &str) -> String {
    format!(
        "SELECT r.id, r.status FROM runs r \
         WHERE (r.status = 'WAITING_FOR_APPROVAL' AND EXISTS ( \
            SELECT 1 FROM steps s JOIN approvals a ON a.step_id = s.id AND a.run_id = s.run_id \
            WHERE s.run_id = r.id AND s.status = 'awaiting_approval' AND a.status = 'approved' \
              AND a.{key} = (SELECT MAX(b.{key}) FROM approvals b WHERE b.step_id = s.id AND b.run_id = s.run_id))) \
            OR r.status = 'INTERRUPTED' \
         ORDER BY r.{key} LIMIT {limit}"
    )
}

impl Store {
    /// At most `limit` runs a worker may resume now, oldest first.
    pub fn resumable_runs(&self, limit: u32) -> Result<Vec<ResumableRun>, StoreError> {
        self.read(|conn| {
            let mut st = conn
                .prepare_cached(&resumable_sql("rowid", "?"))
                .ctx("resumable runs")?;
            let rows = st
                .query_map(params![limit], |r| {
                    let id: Vec<u8> = match r.get_ref(0)? {
                        rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => {
                            b.to_vec()
                        }
                        _ => Vec::new(),
                    };
                    let text = |i: usize| -> rusqlite::Result<String> {
                        Ok(match r.get_ref(i)? {
                            rusqlite::types::ValueRef::Text(b) => {
                                String::from_utf8_lossy(b).into_owned()
                            }
                            _ => String::new(),
                        })
                    };
                    Ok(ResumableRun {
                        id: Key::new(id),
                        status: RunStatus::parse(&text(1)?),
                    })
                })
                .ctx("resumable runs")?;
            let mut out = Vec::new();
            for row in rows {
                out.push(row.ctx("resumable runs")?);
            }
            Ok(out)
        })
    }
}
