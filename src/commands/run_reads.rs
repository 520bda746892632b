//! The reads `show` and `events` make, on either run database: SQLite's [`Store`], or with the
//! `postgres` feature PostgreSQL's (the same capped page reads, so the same output).

use crate::runtime::store::{KeyPage, Page, StepKey, Store, StoreError};
use crate::runtime::types::{Approval, Event, Run, Step};

#[cfg(feature = "postgres")]
use crate::pgstore::PgStore;

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
    /// A run's model calls dispatched without a recorded outcome.
    fn count_unrecorded_model_calls(&self, run: &[u8]) -> Result<i64, StoreError>;
}

/// The [`RunReads`] both databases answer with a method of the same name and arguments,
/// listed once for the two impls.
macro_rules! same_reads {
    ($to:ident) => {
        forward! { &self => $to;
            fn get_run_capped(id: &[u8]) -> Result<Run, StoreError>;
            fn list_steps_page(run: &[u8], limit: i64, offset: i64)
                -> Result<Page<Step>, StoreError>;
            fn approval_reason(run: &[u8], approval: &[u8]) -> Result<String, StoreError>;
            fn steps_page_by_key(run: &[u8], after: Option<&StepKey>, skip: i64, limit: i64)
                -> Result<KeyPage<Step, StepKey>, StoreError>;
            fn events_page_by_key(run: &[u8], after: Option<i64>, skip: i64, limit: i64)
                -> Result<KeyPage<Event>, StoreError>;
            fn count_events(run: &[u8]) -> Result<i64, StoreError>;
            fn count_unrecorded_model_calls(run: &[u8]) -> Result<i64, StoreError>;
        }
    };
}

impl RunReads for Store {
    same_reads!(Store);

    forward! { &self => Store;
        fn approvals_page(run: &[u8], status: &str, limit: i64, offset: i64)
            -> Result<Page<Approval>, StoreError> = list_approvals_page;
    }
}

#[cfg(feature = "postgres")]
impl RunReads for PgStore {
    same_reads!(PgStore);

    forward! { &self => PgStore;
        fn approvals_page(run: &[u8], status: &str, limit: i64, offset: i64)
            -> Result<Page<Approval>, StoreError>;
    }
}
