//! The console on a PostgreSQL run database (issue 19): its reader is the console's own reader
//! (`console::sqlite`'s row conversions, written once over [`ConsoleReads`]) on PostgreSQL's
//! bounded page reads (`pgstore::console`), and it learns that something changed by
//! LISTEN/NOTIFY (decision 0084): `data_version` is the count of notifications a connection of
//! its own has received from sequencer passes, never a poll of a table. Decisions go through
//! [`StoreDecider`] on a `PgStore`, the operator's functions over the store trait.

use super::data::{DataError, Decider, Write, WriteResult};
use super::decider::StoreDecider;
use super::reads::{ConsoleReads, same_reads};
use super::sqlite::StoreData;
use crate::pgstore::{Canceller, Listener, PgError, PgStore, PgUrl};
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
    /// What it connected to, to connect again after the server dropped the connection.
    url: PgUrl,
    /// Not before this, the next try to connect again (a server still down is not asked
    /// at every check).
    next_try: Option<std::time::Instant>,
    /// Moves by one each time it connects again, so that `data_version` moves and the
    /// console reads everything again.
    reconnects: i64,
    /// The handle [`StoreData::canceller`] gives out, moved to each new connection.
    canceller: Canceller,
}

/// The least wait between two tries to connect again.
const RETRY: std::time::Duration = std::time::Duration::from_secs(2);

impl PgReads {
    /// A connection ready for the console's reads, and its listener on the reading lane.
    fn connect(url: &PgUrl, listen: bool) -> Result<(PgStore, Option<Listener>), PgError> {
        let store = PgStore::open_existing(url)?;
        let backend = |e: StoreError| PgError::Unusable {
            db: url.to_string(),
            detail: e.to_string(),
        };
        store.prepare_console_reads().map_err(backend)?;
        let listener = if listen {
            store.read_serially().map_err(backend)?;
            Some(Listener::open(url)?)
        } else {
            None
        };
        Ok((store, listener))
    }

    /// When the server dropped this reader's connection (a restart, a failover): connects
    /// again, at most every [`RETRY`]; the console's reads fail in the meantime, saying why.
    fn reconnect_if_lost(&mut self) -> Result<(), StoreError> {
        if !self.store.is_closed() {
            return Ok(());
        }
        let now = std::time::Instant::now();
        if self.next_try.is_some_and(|t| now < t) {
            return Err(StoreError::Backend(format!(
                "{}: the connection was lost; connecting again",
                self.url
            )));
        }
        self.next_try = Some(now + RETRY);
        let (store, listener) = Self::connect(&self.url, self.listener.is_some())
            .map_err(|e| StoreError::Backend(format!("connecting again: {e}")))?;
        self.canceller.follow(&store);
        self.store = store;
        self.listener = listener;
        self.next_try = None;
        self.reconnects += 1;
        Ok(())
    }
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
    /// (taken at open, before the reader moves to its lane); it follows the reader to each
    /// connection it opens after the server dropped one.
    pub fn canceller(&self) -> Canceller {
        self.reads().canceller.clone()
    }

    fn connect(url: &PgUrl, listen: bool) -> Result<PgData, DataError> {
        let (store, listener) = PgReads::connect(url, listen).map_err(|e| open_err(url, e))?;
        Ok(StoreData::over(PgReads {
            canceller: store.canceller(),
            store,
            listener,
            url: url.clone(),
            next_try: None,
            reconnects: 0,
        }))
    }
}

/// The console's decisions on PostgreSQL: a connection of its own (never migrated).
pub fn pg_decider(url: &PgUrl) -> Result<PgDecider, String> {
    let store = PgStore::open_existing(url).map_err(|e| e.to_string())?;
    Ok(PgDecider {
        inner: StoreDecider::over(store),
        url: url.clone(),
    })
}

/// The console's decider on PostgreSQL, connecting again before a decision when the server
/// has dropped its connection since the last one (one round trip asks; decisions are a
/// person's pace). A drop during a decision fails it, as any failed write: nothing is
/// reported decided that was not, and the operator's compare-and-set makes asking again safe.
pub struct PgDecider {
    inner: StoreDecider<PgStore>,
    url: PgUrl,
}

impl Decider for PgDecider {
    fn run(&mut self, write: &Write) -> WriteResult {
        let store = self.inner.store();
        if (store.is_closed() || store.server_clock().is_err())
            && let Ok(store) = PgStore::open_existing(&self.url)
        {
            self.inner = StoreDecider::over(store);
        }
        self.inner.run(write)
    }
}

impl ConsoleReads for PgReads {
    fn ready(&mut self) -> Result<(), StoreError> {
        self.reconnect_if_lost()
    }

    fn data_version(&mut self) -> Result<i64, StoreError> {
        self.reconnect_if_lost()?;
        // Each new connection starts its own count: the reconnections lift it past the old.
        let base = self.reconnects << 40;
        match &mut self.listener {
            Some(l) => l
                .version()
                .map(|v| base + v)
                .map_err(|e| StoreError::Backend(e.to_string())),
            None => Ok(base),
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
