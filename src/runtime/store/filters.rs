//! Filtered page reads for front ends: runs by status. The filter runs in SQL; only the page's
//! rows are read (each capped as `get_run_capped` caps it).

use super::Store;
use super::error::{Ctx, StoreError};
use super::pages::Page;
use crate::runtime::types::Run;

impl Store {
    /// Runs newest first, only those whose status is `status` (all when empty), with the total
    /// that match.
    pub fn list_runs_page_by_status(
        &self,
        status: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<Run>, StoreError> {
        if status.is_empty() {
            return self.list_runs_page(limit, offset);
        }
        if limit <= 0 || offset < 0 {
            return Err(StoreError::InvalidPage {
                what: "runs",
                limit,
                offset,
            });
        }
        let (ids, total) = self.read(|c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT CAST(id AS BLOB) FROM runs WHERE status = ? ORDER BY rowid DESC LIMIT ? OFFSET ?",
                )
                .ctx("list runs by status")?;
            let ids = stmt
                .query_map(rusqlite::params![status, limit, offset], |r| {
                    r.get::<_, Vec<u8>>(0)
                })
                .ctx("list runs by status")?
                .collect::<Result<Vec<_>, _>>()
                .ctx("list runs by status")?;
            let total: i64 = c
                .query_row("SELECT COUNT(*) FROM runs WHERE status = ?", [status], |r| {
                    r.get(0)
                })
                .ctx("count runs by status")?;
            Ok((ids, total))
        })?;
        let mut items = Vec::with_capacity(ids.len());
        for id in ids {
            // An id that is not UTF-8 cannot be looked up by text; read it by its bytes' lossy
            // form only to report it, never to fail the page.
            let id = String::from_utf8_lossy(&id).into_owned();
            match self.get_run_capped(&id) {
                Ok(r) => items.push(r),
                Err(StoreError::NotFound { .. }) => {} // deleted between the two reads
                Err(e) => return Err(e),
            }
        }
        Ok(Page { items, total })
    }
}
