//! The reads `show` and `events` make, on either run database: SQLite's [`Store`], or with the
//! `postgres` feature PostgreSQL's (the same capped page reads, so the same output).

use crate::runtime::store::{KeyPage, Page, StepKey, Store, StoreError};
use crate::runtime::types::{Approval, Event, Run, Step};

pub trait RunReads {
    fn get_run_capped(&self, id: &[u8]) -> Result<Run, StoreError>;
    /// A run's approvals with `status` (`""` for all), capped, with the total.
    fn approvals_page(
        &self,
        run: &[u8],
        status: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<Approval>, StoreError>;
    fn list_steps_page(
        &self,
        run: &[u8],
        limit: i64,
        offset: i64,
    ) -> Result<Page<Step>, StoreError>;
    fn approval_reason(&self, run: &[u8], approval: &[u8]) -> Result<String, StoreError>;
    fn steps_page_by_key(
        &self,
        run: &[u8],
        after: Option<&StepKey>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Step, StepKey>, StoreError>;
    fn events_page_by_key(
        &self,
        run: &[u8],
        after: Option<i64>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Event>, StoreError>;
    fn count_events(&self, run: &[u8]) -> Result<i64, StoreError>;
}

impl RunReads for Store {
    fn get_run_capped(&self, id: &[u8]) -> Result<Run, StoreError> {
        Store::get_run_capped(self, id)
    }
    fn approvals_page(
        &self,
        run: &[u8],
        status: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<Approval>, StoreError> {
        Store::list_approvals_page(self, run, status, limit, offset)
    }
    fn list_steps_page(
        &self,
        run: &[u8],
        limit: i64,
        offset: i64,
    ) -> Result<Page<Step>, StoreError> {
        Store::list_steps_page(self, run, limit, offset)
    }
    fn approval_reason(&self, run: &[u8], approval: &[u8]) -> Result<String, StoreError> {
        Store::approval_reason(self, run, approval)
    }
    fn steps_page_by_key(
        &self,
        run: &[u8],
        after: Option<&StepKey>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Step, StepKey>, StoreError> {
        Store::steps_page_by_key(self, run, after, skip, limit)
    }
    fn events_page_by_key(
        &self,
        run: &[u8],
        after: Option<i64>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Event>, StoreError> {
        Store::events_page_by_key(self, run, after, skip, limit)
    }
    fn count_events(&self, run: &[u8]) -> Result<i64, StoreError> {
        Store::count_events(self, run)
    }
}

#[cfg(feature = "postgres")]
impl RunReads for crate::pgstore::PgStore {
    fn get_run_capped(&self, id: &[u8]) -> Result<Run, StoreError> {
        crate::pgstore::PgStore::get_run_capped(self, id)
    }
    fn approvals_page(
        &self,
        run: &[u8],
        status: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<Approval>, StoreError> {
        self.list_approvals_capped(run, status, limit, offset)
    }
    fn list_steps_page(
        &self,
        run: &[u8],
        limit: i64,
        offset: i64,
    ) -> Result<Page<Step>, StoreError> {
        crate::pgstore::PgStore::list_steps_page(self, run, limit, offset)
    }
    fn approval_reason(&self, run: &[u8], approval: &[u8]) -> Result<String, StoreError> {
        crate::pgstore::PgStore::approval_reason(self, run, approval)
    }
    fn steps_page_by_key(
        &self,
        run: &[u8],
        after: Option<&StepKey>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Step, StepKey>, StoreError> {
        crate::pgstore::PgStore::steps_page_by_key(self, run, after, skip, limit)
    }
    fn events_page_by_key(
        &self,
        run: &[u8],
        after: Option<i64>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Event>, StoreError> {
        crate::pgstore::PgStore::events_page_by_key(self, run, after, skip, limit)
    }
    fn count_events(&self, run: &[u8]) -> Result<i64, StoreError> {
        self.count_of_run("events", run)
    }
}
