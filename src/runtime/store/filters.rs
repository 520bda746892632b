//! Filtered page reads for front ends: runs by status. The filter runs in SQL; only the page's
//! rows are read, capped as `list_runs_page` caps them, in one read transaction with the total.

use super::Store;
use super::error::StoreError;
use super::pages::Page;
use crate::runtime::types::Run;

impl Store {
    /// Runs newest first, only those whose status is `status` (all when empty), with the total
    /// that match (a count: agentrt's schema indexes no status, so it is a scan of the runs).
    /// The offset is skipped on the rowid; only the page's rows are read. A front end that
    /// need not count pages with [`Store::runs_page_by_key`].
    pub fn list_runs_page_by_status(
        &self,
        status: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<Run>, StoreError> {
        self.runs_page_counted(status, limit, offset)
    }
}
