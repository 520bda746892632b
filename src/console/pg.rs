//! The console on a PostgreSQL run database (issue 19): its reader is the console's own reader
//! (`console::sqlite`'s row conversions, written once over [`ConsoleReads`]) on PostgreSQL's
//! bounded page reads (`pgstore::console`), and it learns that something changed by
//! LISTEN/NOTIFY (decision 0084): `data_version` is the count of notifications a connection of
//! its own has received from sequencer passes, never a poll of a table. Decisions go through
//! [`StoreDecider`] on a `PgStore`, the operator's functions over the store trait.

use super::data::DataError;
use super::decider::StoreDecider;
use super::reads::{ConsoleReads, same_reads};
use super::sqlite::StoreData;
use crate::pgstore::{Canceller, Listener, PgStore, PgUrl};
use crate::runtime::stats::Stats;
use crate::runtime::store::{
    ApprovalView, ChainReport, DamagedColumn, MarkedEvent, ModelCallView, Near, ProxyCall,
    QueueItem, QueueOrder, RunOverview, SortValue, StoreError, ViewCounts, WindowPage,
};
use crate::runtime::types::{Approval, Key, Run, RunStatus, Step, Timestamp};

/// PostgreSQL's reads for the console, and (on the reading lane) its listener.
pub struct PgReads {
    store: PgStore,
    listener: Option<Listener>,
}

/// The console's reader on a PostgreSQL run database.
pub type PgData = StoreData<PgReads>;

fn open_err(url: &PgUrl, cause: impl ToString) -> DataError {
    DataError::Open {
        path: url.to_string().into(),
        cause: cause.to_string().into(),
    }
}

impl StoreData<PgReads> {
    /// Connects (the database must be at this build's schema; it is never migrated), makes
    /// the session's read functions and LISTENs on a second connection.
    pub fn open_pg(url: &PgUrl) -> Result<PgData, DataError> {
        Self::connect(url, true)
    }

    /// As [`StoreData::open_pg`], for the counting lane: no listener (it does not poll).
    pub fn open_pg_counting(url: &PgUrl) -> Result<PgData, DataError> {
        Self::connect(url, false)
    }

    /// Cancels the statement this reader's connection is running, from another thread
    /// (taken at open, before the reader moves to its lane).
    pub fn canceller(&self) -> Canceller {
        self.reads().store.canceller()
    }

    fn connect(url: &PgUrl, listen: bool) -> Result<PgData, DataError> {
        let store = PgStore::open_existing(url).map_err(|e| open_err(url, e))?;
        store
            .prepare_console_reads()
            .map_err(|e| open_err(url, e))?;
        let listener = if listen {
            store.read_serially().map_err(|e| open_err(url, e))?;
            Some(Listener::open(url).map_err(|e| open_err(url, e))?)
        } else {
            None
        };
        Ok(StoreData::over(PgReads { store, listener }))
    }
}

/// The console's decisions on PostgreSQL: a connection of its own (never migrated).
pub fn pg_decider(url: &PgUrl) -> Result<StoreDecider<PgStore>, String> {
    let store = PgStore::open_existing(url).map_err(|e| e.to_string())?;
    Ok(StoreDecider::over(store))
}

impl ConsoleReads for PgReads {
    fn data_version(&mut self) -> Result<i64, StoreError> {
        match &mut self.listener {
            Some(l) => l.version().map_err(|e| StoreError::Backend(e.to_string())),
            None => Ok(0),
        }
    }

    same_reads!((self.store));

    forward! { &self => (self.store);
        fn verify_chain() -> Result<ChainReport, StoreError>;
        fn get_step(id: &[u8]) -> Result<Step, StoreError> = get_step_whole;
        fn runs_capped(ids: &[Key]) -> Result<Vec<Option<Run>>, StoreError>;
        fn steps_capped(ids: &[Key]) -> Result<Vec<Option<Step>>, StoreError>;
        fn last_two_approvals(runs: &[Key]) -> Result<Vec<Vec<Approval>>, StoreError>;
    }

    fn proxy_call(&self, run: &Key) -> Result<Option<ProxyCall>, StoreError> {
        // The MCP proxy's index (agentrt's `proxy_calls`, schema migration 3, decision 0085).
        self.store.proxy_call(run.as_bytes())
    }
    // The counts are one read of PostgreSQL's, by table.
    fn count_steps(&self, run: &Key) -> Result<i64, StoreError> {
        self.store.count_of_run("steps", run.as_bytes())
    }
    fn count_run_approvals(&self, run: &Key) -> Result<i64, StoreError> {
        self.store.count_of_run("approvals", run.as_bytes())
    }
    fn count_model_calls(&self, run: &Key) -> Result<i64, StoreError> {
        self.store.count_of_run("model_calls", run.as_bytes())
    }
    fn approval_view(&self, id: &Key) -> Result<Option<ApprovalView>, StoreError> {
        self.store.approval_view_of(id.as_bytes(), false)
    }
    fn approval_view_capped(&self, id: &Key) -> Result<Option<ApprovalView>, StoreError> {
        self.store.approval_view_of(id.as_bytes(), true)
    }
}
