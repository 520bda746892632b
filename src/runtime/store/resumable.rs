//! The runs a worker may resume now (issue 15 item 6): WAITING runs whose awaiting step's
//! latest approval is granted (spec 4.9: only the latest approval of a step can be a grant),
//! and INTERRUPTED runs (a denial with feedback hands the run back to its program so; spec 8.3).
//! One read transaction, oldest run first, bounded by `limit`. Also the RUNNING runs that hold
//! a lease, which a worker takes over when the lease runs out (their holder died).

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

/// A RUNNING run that holds a lease, and the lease's expiry as stored: a worker takes the run
/// over once that time has passed (its holder died or stopped renewing), as `resume` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedRun {
    /// The run's id as stored.
    pub id: Key,
    /// `lease_expires_at` as stored (the reader judges it; an unreadable one is no expiry).
    pub lease_expires_at: String,
}

/// The leased RUNNING runs' query, for both databases as [`resumable_sql`].
pub(crate) fn leased_sql(key: &str, limit: &str) -> String {
    format!(
        "SELECT r.id, r.lease_expires_at FROM runs r \
         WHERE r.status = 'RUNNING' AND r.lease_owner <> '' ORDER BY r.{key} LIMIT {limit}"
    )
}

/// A run id as SQLite stored it (text or a blob), by its bytes.
fn stored_key(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Key> {
    Ok(Key::new(match r.get_ref(i)? {
        rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => b.to_vec(),
        _ => Vec::new(),
    }))
}

/// A text column, lossily (a status or a time: compared, never shown).
fn stored_text(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<String> {
    Ok(match r.get_ref(i)? {
        rusqlite::types::ValueRef::Text(b) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    })
}

impl Store {
    /// At most `limit` RUNNING runs that hold a lease, oldest first.
    pub fn leased_runs(&self, limit: u32) -> Result<Vec<LeasedRun>, StoreError> {
        self.runs_read(&leased_sql("rowid", "?"), "leased runs", limit, |r| {
            Ok(LeasedRun {
                id: stored_key(r, 0)?,
                lease_expires_at: stored_text(r, 1)?,
            })
        })
    }

    /// At most `limit` runs a worker may resume now, oldest first.
    pub fn resumable_runs(&self, limit: u32) -> Result<Vec<ResumableRun>, StoreError> {
        self.runs_read(&resumable_sql("rowid", "?"), "resumable runs", limit, |r| {
            Ok(ResumableRun {
                id: stored_key(r, 0)?,
                status: RunStatus::parse(&stored_text(r, 1)?),
            })
        })
    }

    /// The rows of one of the worker's queries (`sql`, its limit bound as `?`), each made by
    /// `row`, in one read transaction.
    fn runs_read<T>(
        &self,
        sql: &str,
        what: &'static str,
        limit: u32,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, StoreError> {
        self.read(|conn| {
            let mut st = conn.prepare_cached(sql).ctx(what)?;
            let rows = st.query_map(params![limit], row).ctx(what)?;
            rows.map(|r| r.ctx(what)).collect()
        })
    }
}
