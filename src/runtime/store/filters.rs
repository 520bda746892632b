//! Filtered page reads for front ends: runs by status. The filter runs in SQL; only the page's
//! rows are read, capped as `list_runs_page` caps them, in one read transaction with the total.

use super::Store;
use super::error::StoreError;
use super::pages::{Page, check_page, count, query, run_select};
use super::rows::{Cols, run_from};
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
        check_page("runs", limit, offset)?;
        self.read(|c| {
            let sql = format!(
                "{} WHERE status = ? ORDER BY rowid DESC LIMIT ? OFFSET ?",
                run_select()
            );
            let items = query(
                c,
                &sql,
                &[&status, &limit, &offset],
                "list runs by status",
                |r| run_from(&mut Cols::new(r)),
            )?;
            let total = count(c, "SELECT COUNT(*) FROM runs WHERE status = ?", &[&status])?;
            Ok(Page { items, total })
        })
    }
}
