//! The store's reads the console's reader is made of, as one trait both run databases give:
//! SQLite's [`Store`] (its own bounded page reads and decoders) and, with the `postgres`
//! feature, PostgreSQL's (`console::pg`). The console's reader (`console::sqlite`), the fate
//! of a run's latest call (`console::fate`) and the decision page's context
//! (`console::context`) are written once against it, so a screen is filled by the same row
//! conversions whichever database it reads.

use crate::runtime::stats::Stats;
use crate::runtime::store::{
    ApprovalView, ChainReport, DamagedColumn, MarkedEvent, ModelCallView, Near, ProxyCall,
    QueueItem, QueueOrder, RunOverview, SortValue, Store, StoreError, ViewCounts, WindowPage,
};
use crate::runtime::types::{Approval, Key, Run, RunStatus, Step, Timestamp};

/// The reads a console's reader makes (each a bounded read by key; see `runtime::store`).
pub trait ConsoleReads: Send {
    /// A number that changes when another connection commits something a screen shows.
    fn data_version(&mut self) -> Result<i64, StoreError>;
    /// Called before each query: a reader whose connection the server dropped connects
    /// again here (PostgreSQL); nothing by default.
    fn ready(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
    fn view_counts(&self) -> Result<ViewCounts, StoreError>;
    fn list_queue_rows_near(
        &self,
        filter: &str,
        near: Near<&str>,
    ) -> Result<WindowPage<QueueItem>, StoreError>;
    fn list_queue_sorted_near(
        &self,
        filter: &str,
        order: &QueueOrder,
        near: Near<&str>,
    ) -> Result<WindowPage<(QueueItem, SortValue)>, StoreError>;
    /// The queue's first `limit` rows after `offset`, and whether more follow.
    fn list_queue_rows(
        &self,
        filter: &str,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<QueueItem>, bool), StoreError>;
    fn count_queue(&self, filter: &str) -> Result<i64, StoreError>;
    fn list_runs_overview_near(
        &self,
        status: &str,
        filter: &str,
        near: Near<&str>,
    ) -> Result<WindowPage<RunOverview>, StoreError>;
    fn count_runs_overview(&self, status: &str, filter: &str) -> Result<i64, StoreError>;
    fn get_run_capped(&self, id: &Key) -> Result<Run, StoreError>;
    fn get_step_capped(&self, id: &Key) -> Result<Step, StoreError>;
    /// One step, whole.
    fn get_step(&self, id: &[u8]) -> Result<Step, StoreError>;
    fn proxy_call(&self, run: &Key) -> Result<Option<ProxyCall>, StoreError>;
    fn list_steps_page_near(
        &self,
        run: &Key,
        near: Near<&str>,
    ) -> Result<WindowPage<Step>, StoreError>;
    fn count_steps(&self, run: &Key) -> Result<i64, StoreError>;
    fn list_marked_events_near(
        &self,
        run: &Key,
        near: Near<i64>,
    ) -> Result<WindowPage<MarkedEvent>, StoreError>;
    fn count_events(&self, run: &Key) -> Result<i64, StoreError>;
    fn list_run_approvals_near(
        &self,
        run: &Key,
        near: Near<&str>,
    ) -> Result<(WindowPage<Approval>, Option<RunStatus>), StoreError>;
    fn count_run_approvals(&self, run: &Key) -> Result<i64, StoreError>;
    fn list_model_calls_near(
        &self,
        run: &Key,
        near: Near<&str>,
    ) -> Result<WindowPage<ModelCallView>, StoreError>;
    fn count_model_calls(&self, run: &Key) -> Result<i64, StoreError>;
    /// One approval by id, whole, with its run's status and reason.
    fn approval_view(&self, id: &Key) -> Result<Option<ApprovalView>, StoreError>;
    /// As [`ConsoleReads::approval_view`], read as a page reads it (a huge request is not).
    fn approval_view_capped(&self, id: &Key) -> Result<Option<ApprovalView>, StoreError>;
    fn list_damaged_near(
        &self,
        near: Near<(&str, &str, &str)>,
    ) -> Result<WindowPage<DamagedColumn>, StoreError>;
    fn count_damaged(&self) -> Result<i64, StoreError>;
    fn runs_with_prefix(&self, prefix: &[u8], limit: u32) -> Result<Vec<Key>, StoreError>;
    /// The whole chain.
    fn verify_chain(&self) -> Result<ChainReport, StoreError>;
    fn stats(&self, since: Option<Timestamp>, now: Timestamp) -> Result<Stats, StoreError>;

    // A window's worth of rows at once: the queue reads these for every row it shows. SQLite
    // reads them one by one in its own process; PostgreSQL in one statement each, since a
    // round trip a row made its first frame as slow as the window is long.

    /// Each of `ids`' run as a page reads it (`None`: not there).
    fn runs_capped(&self, ids: &[Key]) -> Result<Vec<Option<Run>>, StoreError> {
        ids.iter()
            .map(|id| found(self.get_run_capped(id)))
            .collect()
    }
    /// Each of `ids`' step as a page reads it (`None`: not there).
    fn steps_capped(&self, ids: &[Key]) -> Result<Vec<Option<Step>>, StoreError> {
        ids.iter()
            .map(|id| found(self.get_step_capped(id)))
            .collect()
    }
    /// Each of `runs`' last two approvals, oldest first (fewer when it has fewer).
    fn last_two_approvals(&self, runs: &[Key]) -> Result<Vec<Vec<Approval>>, StoreError> {
        runs.iter()
            .map(|run| {
                let n = self.count_run_approvals(run)?;
                if n <= 0 {
                    return Ok(Vec::new());
                }
                let near = Near {
                    end: Some(n),
                    ..Near::new(2, (n - 2).max(0))
                };
                Ok(self.list_run_approvals_near(run, near)?.0.items)
            })
            .collect()
    }
}

/// A row read by key: `None` when it is not there.
pub fn found<T>(r: Result<T, StoreError>) -> Result<Option<T>, StoreError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The [`ConsoleReads`] both databases answer with a method of the same name and arguments:
/// listed once for SQLite's `Store` and PostgreSQL's store under `console::pg`.
macro_rules! same_reads {
    ($to:tt) => {
        forward! { &self => $to;
            fn view_counts() -> Result<ViewCounts, StoreError>;
            fn list_queue_rows(filter: &str, limit: i64, offset: i64)
                -> Result<(Vec<QueueItem>, bool), StoreError>;
            fn count_queue(filter: &str) -> Result<i64, StoreError>;
            fn count_runs_overview(status: &str, filter: &str) -> Result<i64, StoreError>;
            fn list_damaged_near(near: Near<(&str, &str, &str)>)
                -> Result<WindowPage<DamagedColumn>, StoreError>;
            fn count_damaged() -> Result<i64, StoreError>;
            fn runs_with_prefix(prefix: &[u8], limit: u32) -> Result<Vec<Key>, StoreError>;
            fn stats(since: Option<Timestamp>, now: Timestamp) -> Result<Stats, StoreError>;
            fn get_run_capped(id: &Key) -> Result<Run, StoreError>;
            fn get_step_capped(id: &Key) -> Result<Step, StoreError>;
            fn list_marked_events_near(run: &Key, near: Near<i64>)
                -> Result<WindowPage<MarkedEvent>, StoreError>;
            fn count_events(run: &Key) -> Result<i64, StoreError>;
            fn list_queue_rows_near(filter: &str, near: Near<&str>)
                -> Result<WindowPage<QueueItem>, StoreError>;
            fn list_queue_sorted_near(filter: &str, order: &QueueOrder, near: Near<&str>)
                -> Result<WindowPage<(QueueItem, SortValue)>, StoreError>;
            fn list_runs_overview_near(status: &str, filter: &str, near: Near<&str>)
                -> Result<WindowPage<RunOverview>, StoreError>;
            fn list_steps_page_near(run: &Key, near: Near<&str>)
                -> Result<WindowPage<Step>, StoreError>;
            fn list_run_approvals_near(run: &Key, near: Near<&str>)
                -> Result<(WindowPage<Approval>, Option<RunStatus>), StoreError>;
            fn list_model_calls_near(run: &Key, near: Near<&str>)
                -> Result<WindowPage<ModelCallView>, StoreError>;
        }
    };
}
#[cfg(feature = "postgres")]
pub(crate) use same_reads;

impl ConsoleReads for Store {
    fn data_version(&mut self) -> Result<i64, StoreError> {
        Store::data_version(self)
    }

    same_reads!(Store);

    forward! { &self => Store;
        fn get_step(id: &[u8]) -> Result<Step, StoreError>;
        fn proxy_call(run: &Key) -> Result<Option<ProxyCall>, StoreError>;
        fn count_steps(run: &Key) -> Result<i64, StoreError>;
        fn count_run_approvals(run: &Key) -> Result<i64, StoreError>;
        fn count_model_calls(run: &Key) -> Result<i64, StoreError>;
        fn approval_view(id: &Key) -> Result<Option<ApprovalView>, StoreError>;
        fn approval_view_capped(id: &Key) -> Result<Option<ApprovalView>, StoreError>;
    }

    fn verify_chain(&self) -> Result<ChainReport, StoreError> {
        Store::verify_events(self, 0, 0)
    }
}
