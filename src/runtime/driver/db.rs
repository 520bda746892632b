//! The run database a driver works on, SQLite's or PostgreSQL's (docs/decisions/0083): one
//! enum of stores and one of their write transactions, each method a `match` that hands the
//! call to the backend's [`RunStore`] / [`RunTx`]. The driver's logic is written once against
//! these; the traits are not object safe (their `write` is generic), so the driver does not
//! hold a `dyn` store, and an enum keeps the driver's types (Driver, Gate, Config) free of a
//! store parameter.

use crate::runtime::store::Charge;
use std::sync::Arc;
use std::time::Duration;

use crate::runtime::store::{
    Failing, LeaseHandle, LeasedRun, NewApproval, NewModelCall, NewRun, ResumableRun, RunStore,
    RunTx, StepFailure, StepUpdate, Store, StoreError, Transition, Tx, tx_writes,
};
use crate::runtime::types::{Approval, Event, Run, RunStatus, Step, StepStatus, Timestamp};

#[cfg(feature = "postgres")]
use crate::pgstore::{PgLeaseHandle, PgStore, PgTx};

/// The run database a [`Config`](super::Config) gives the driver: SQLite's [`Store`] (what
/// `Config::new(Arc<Store>, ..)` makes) or, with the `postgres` feature, a `PgStore` (from an
/// `Arc<PgStore>`).
///
/// The second field is where a PostgreSQL write puts its events, placed in their run's chain,
/// to be handed to observers once chained (set by the driver when it has an observer;
/// decision 0083 item 4).
#[derive(Clone)]
pub struct RunDb(Db, Owing);

/// Where a PostgreSQL write's events go for the driver's observer (none: returned as written).
#[derive(Clone, Default)]
struct Owing(#[cfg(feature = "postgres")] Option<Arc<crate::pgstore::observe::OwedEvents>>);

/// The events one write committed, to hand to the driver's observers: chained already on
/// SQLite (and on PostgreSQL's naive chain); on PostgreSQL, when the driver has an observer,
/// none here: they were owed (`owed`), still in the inbox, with where each will sit in its
/// run's chain.
pub(crate) struct Written {
    pub events: Vec<Event>,
    #[cfg(feature = "postgres")]
    pub owed: bool,
}

impl Written {
    fn chained(events: Vec<Event>) -> Written {
        Written {
            events,
            #[cfg(feature = "postgres")]
            owed: false,
        }
    }
}

#[derive(Clone)]
enum Db {
    Sqlite(Arc<Store>),
    #[cfg(feature = "postgres")]
    Postgres(OffTask<Arc<PgStore>>),
}

impl std::fmt::Debug for RunDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Db::Sqlite(s) => write!(f, "RunDb::Sqlite({})", s.path().display()),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => match p.get() {
                Some(p) => write!(f, "RunDb::Postgres({})", p.url()),
                None => f.write_str("RunDb::Postgres(closed)"),
            },
        }
    }
}

impl From<Arc<Store>> for RunDb {
    fn from(s: Arc<Store>) -> RunDb {
        RunDb(Db::Sqlite(s), Owing::default())
    }
}

#[cfg(feature = "postgres")]
impl From<Arc<PgStore>> for RunDb {
    fn from(s: Arc<PgStore>) -> RunDb {
        RunDb(Db::Postgres(OffTask(Some(s))), Owing::default())
    }
}

/// A value holding a PostgreSQL connection, dropped where the client may block: closing a
/// `postgres::Client` blocks on the client's own runtime, which tokio refuses on a thread
/// running async tasks, so a driver dropped at the end of an async function would otherwise
/// panic there. `None` only while it is being dropped.
#[cfg(feature = "postgres")]
pub(crate) struct OffTask<T: Send>(Option<T>);

#[cfg(feature = "postgres")]
impl<T: Send> OffTask<T> {
    pub(crate) fn new(v: T) -> OffTask<T> {
        OffTask(Some(v))
    }

    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_ref()
    }

    pub(crate) fn get_mut(&mut self) -> Option<&mut T> {
        self.0.as_mut()
    }
}

#[cfg(feature = "postgres")]
impl<T: Send + Clone> Clone for OffTask<T> {
    fn clone(&self) -> OffTask<T> {
        OffTask(self.0.clone())
    }
}

#[cfg(feature = "postgres")]
impl<T: Send> Drop for OffTask<T> {
    fn drop(&mut self) {
        if let Some(v) = self.0.take() {
            pg(move || drop(v));
        }
    }
}

/// The error of a store used while it is being dropped (cannot happen through the driver).
#[cfg(feature = "postgres")]
fn closed() -> StoreError {
    StoreError::Invalid("the PostgreSQL store is closed".into())
}

/// A write transaction on either backend, as the driver uses it.
pub(crate) enum DbTx<'a, 'c> {
    Sqlite(&'a mut Tx<'c>),
    #[cfg(feature = "postgres")]
    Postgres(&'a mut PgTx<'c>),
}

/// `$e` with `$t` bound to the backend's transaction (`&mut &mut` it).
macro_rules! on_tx {
    ($s:expr, $t:ident => $e:expr) => {
        match $s {
            DbTx::Sqlite($t) => $e,
            #[cfg(feature = "postgres")]
            DbTx::Postgres($t) => $e,
        }
    };
}

/// `RunTx::$name(tx, args..)` on the backend's transaction: the dispatch `forward!` writes
/// [`DbTx`]'s methods with.
macro_rules! tx_call {
    ($s:expr, $name:ident($($a:expr),*)) => {
        on_tx!($s, t => RunTx::$name(&mut **t, $($a),*))
    };
}

/// `$e` with `$s` bound to the backend's store (PostgreSQL's call made through [`pg`]).
macro_rules! on_db {
    ($d:expr, $s:ident => $e:expr) => {
        match &$d.0 {
            Db::Sqlite($s) => $e,
            #[cfg(feature = "postgres")]
            Db::Postgres(h) => match h.get() {
                Some($s) => pg(|| $e),
                None => Err(closed().into()),
            },
        }
    };
}

/// Runs `f`, a call of the synchronous PostgreSQL client, where the client may block: the
/// client drives its connection with a runtime of its own, which tokio refuses to start on a
/// thread that is running async tasks. On a multi-thread runtime's worker the thread first
/// hands its tasks on (`block_in_place`, as the driver's store work does on SQLite); outside a
/// runtime, and on a blocking-pool thread, `f` just runs. A task of a current-thread runtime
/// cannot hand its thread on: the driver's own async paths reach the store from the blocking
/// pool there, but the model handle's accounting, a Gate's synchronous calls and
/// `Driver::cancel` called from such a task are not supported on PostgreSQL (decision 0083).
#[cfg(feature = "postgres")]
pub(crate) fn pg<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

impl RunDb {
    /// The SQLite store, when the driver runs on one.
    pub fn sqlite(&self) -> Option<&Arc<Store>> {
        match &self.0 {
            Db::Sqlite(s) => Some(s),
            #[cfg(feature = "postgres")]
            Db::Postgres(_) => None,
        }
    }

    /// The PostgreSQL store, when the driver runs on one.
    #[cfg(feature = "postgres")]
    pub fn postgres(&self) -> Option<&Arc<PgStore>> {
        match &self.0 {
            Db::Postgres(s) => s.get(),
            Db::Sqlite(_) => None,
        }
    }

    /// The run row.
    pub(crate) fn get_run(&self, run_id: &str) -> Result<Run, StoreError> {
        on_db!(self, s => RunStore::get_run(&**s, run_id.as_bytes()))
    }

    /// The run's steps in insertion order.
    pub(crate) fn list_steps(&self, run_id: &str) -> Result<Vec<Step>, StoreError> {
        on_db!(self, s => RunStore::list_steps(&**s, run_id.as_bytes()))
    }

    /// The run's approvals in insertion order.
    pub(crate) fn list_approvals(&self, run_id: &str) -> Result<Vec<Approval>, StoreError> {
        on_db!(self, s => RunStore::list_approvals(&**s, run_id.as_bytes()))
    }

    /// The same store; on PostgreSQL its writes place their events in their run's chain and
    /// push them to `owed` once committed (what the driver's observers need, decision 0083
    /// item 4).
    #[cfg(feature = "postgres")]
    pub(crate) fn owing(self, owed: Arc<crate::pgstore::observe::OwedEvents>) -> RunDb {
        RunDb(self.0, Owing(Some(owed)))
    }

    /// Runs `f` in one write transaction (committed on `Ok`), returning the events appended.
    pub(crate) fn write<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&mut DbTx<'_, '_>) -> Result<T, E>,
    ) -> Result<(T, Written), E> {
        match &self.0 {
            Db::Sqlite(s) => RunStore::write(&**s, crate::runtime::store::IN_CRATE, |tx| {
                f(&mut DbTx::Sqlite(tx))
            })
            .map(|(v, events)| (v, Written::chained(events))),
            #[cfg(feature = "postgres")]
            Db::Postgres(h) => {
                let s = h.get().ok_or_else(closed)?;
                let owed = self.1.0.as_deref();
                pg(|| s.write_placing(owed, |tx| f(&mut DbTx::Postgres(tx))))
                    .map(|(v, events, owed)| (v, Written { events, owed }))
            }
        }
    }

    /// A lease connection of its own (renew, release).
    pub(crate) fn lease_conn(&self) -> Result<LeaseConn, StoreError> {
        match &self.0 {
            Db::Sqlite(s) => s.lease_handle().map(LeaseConn::Sqlite),
            #[cfg(feature = "postgres")]
            Db::Postgres(h) => {
                let s = h.get().ok_or_else(closed)?;
                pg(|| s.lease_handle()).map(|c| LeaseConn::Postgres(OffTask::new(Box::new(c))))
            }
        }
    }

    /// The time leases are judged by now, given this process's lease clock reading `local`:
    /// `local` on SQLite, the server's clock on PostgreSQL (as [`RunTx::lease_now`], outside
    /// a transaction).
    pub(crate) fn lease_now(&self, local: Timestamp) -> Result<Timestamp, StoreError> {
        match &self.0 {
            Db::Sqlite(_) => Ok(local),
            #[cfg(feature = "postgres")]
            Db::Postgres(h) => {
                let s = h.get().ok_or_else(closed)?;
                pg(|| s.server_clock())
            }
        }
    }

    /// At most `limit` runs a worker may resume now, oldest first.
    pub(crate) fn resumable_runs(&self, limit: u32) -> Result<Vec<ResumableRun>, StoreError> {
        on_db!(self, s => s.resumable_runs(limit))
    }

    /// At most `limit` RUNNING runs that hold a lease, oldest first.
    pub(crate) fn leased_runs(&self, limit: u32) -> Result<Vec<LeasedRun>, StoreError> {
        on_db!(self, s => s.leased_runs(limit))
    }

    /// A number that changes when another connection commits (the worker's wake-up).
    pub(crate) fn data_version(&self) -> Result<i64, StoreError> {
        match &self.0 {
            Db::Sqlite(s) => s.data_version(),
            #[cfg(feature = "postgres")]
            Db::Postgres(h) => {
                let s = h.get().ok_or_else(closed)?;
                pg(|| s.change_mark())
            }
        }
    }

    /// The run's `approval.decided` events, oldest first, with their links in the chain.
    pub(crate) fn decision_events(
        &self,
        run_id: &[u8],
    ) -> Result<Vec<crate::runtime::store::DecisionEvent>, StoreError> {
        on_db!(self, s => s.decision_events(run_id))
    }

    /// The kind and payload of the run's first event.
    pub(crate) fn first_event(
        &self,
        run_id: &[u8],
    ) -> Result<Option<(String, String)>, StoreError> {
        match &self.0 {
            Db::Sqlite(s) => Ok(s
                .list_events_page(run_id, 1, 0)?
                .items
                .into_iter()
                .next()
                .map(|e| (e.kind, e.payload))),
            #[cfg(feature = "postgres")]
            Db::Postgres(h) => {
                let s = h.get().ok_or_else(closed)?;
                pg(|| s.first_event(run_id))
            }
        }
    }

    /// An operator's cancel.
    pub(crate) fn cancel(
        &self,
        run_id: &str,
        by: &str,
        note: &str,
        now: Timestamp,
    ) -> Result<crate::runtime::operator::Cancelled, crate::runtime::operator::OperatorError> {
        on_db!(self, s => crate::runtime::operator::cancel(&**s, run_id, by, note, now))
    }
}

/// A lease connection on either backend.
pub(crate) enum LeaseConn {
    Sqlite(LeaseHandle),
    #[cfg(feature = "postgres")]
    Postgres(OffTask<Box<PgLeaseHandle>>),
}

impl LeaseConn {
    /// Renews the lease if `owner` still holds it (false: lost). SQLite stamps `local_until`
    /// (the writer's clock judges there); PostgreSQL stamps the server's clock plus `ttl`.
    pub(crate) fn renew(
        &self,
        run_id: &str,
        owner: &str,
        local_until: Timestamp,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        match self {
            LeaseConn::Sqlite(h) => {
                let _ = ttl;
                h.renew(run_id, owner, local_until)
            }
            #[cfg(feature = "postgres")]
            LeaseConn::Postgres(h) => {
                let h = h.get().ok_or_else(closed)?;
                pg(|| h.renew(run_id, owner, ttl).map(|t| t.is_some()))
            }
        }
    }

    /// Clears the lease if `owner` still holds it.
    pub(crate) fn release(&self, run_id: &str, owner: &str) -> Result<bool, StoreError> {
        match self {
            LeaseConn::Sqlite(h) => h.release(run_id, owner),
            #[cfg(feature = "postgres")]
            LeaseConn::Postgres(h) => {
                let h = h.get().ok_or_else(closed)?;
                pg(|| h.release(run_id, owner))
            }
        }
    }
}

impl DbTx<'_, '_> {
    /// Appends an event (SQLite chains it now; PostgreSQL enqueues it for the sequencer).
    pub(crate) fn append(
        &mut self,
        run_id: &str,
        step_id: &str,
        at: &Timestamp,
        kind: &str,
        payload: &[u8],
    ) -> Result<(), StoreError> {
        on_tx!(self, t => RunTx::append_event(&mut **t, run_id.as_bytes(), step_id.as_bytes(), at, kind, payload))
    }

    pub(crate) fn get_run(&mut self, run_id: &str) -> Result<Run, StoreError> {
        on_tx!(self, t => RunTx::get_run(&mut **t, run_id.as_bytes()))
    }

    pub(crate) fn get_step(&mut self, step_id: &str) -> Result<Step, StoreError> {
        on_tx!(self, t => RunTx::get_step(&mut **t, step_id.as_bytes()))
    }

    pub(crate) fn latest_approval_id(
        &mut self,
        run_id: &str,
        step_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        on_tx!(self, t => RunTx::latest_approval_id(&mut **t, run_id.as_bytes(), step_id.as_bytes()))
    }

    pub(crate) fn require_status(
        &mut self,
        run_id: &str,
        from: &[RunStatus],
        lease_owner: Option<&str>,
    ) -> Result<RunStatus, StoreError> {
        on_tx!(self, t => RunTx::require_status(&mut **t, run_id.as_bytes(), from, lease_owner))
    }

    pub(crate) fn fail_steps_in_flight(
        &mut self,
        run_id: &str,
        f: &StepFailure<'_>,
    ) -> Result<usize, StoreError> {
        on_tx!(self, t => RunTx::fail_steps(&mut **t, run_id.as_bytes(), Failing::InFlight, f))
    }

    tx_writes!((tx_call!), pub(crate));

    forward! { pub(crate) &mut self => (tx_call!);
        fn expire_approval(a: &Approval, at: Timestamp) -> Result<bool, StoreError>;
        fn transition(t: &Transition<'_>) -> Result<(), StoreError>;
        fn add_active_ms(run_id: &str, ms: i64) -> Result<(), StoreError>;
        fn add_usage(run_id: &str, charge: &Charge) -> Result<(), StoreError>;
        /// The time leases are judged by ([`RunTx::lease_now`]).
        fn lease_now(local: Timestamp) -> Result<Timestamp, StoreError>;
        /// The lease expiry to stamp ([`RunTx::lease_until`]).
        fn lease_until(local_until: Timestamp, ttl: Duration) -> Result<Timestamp, StoreError>;
        /// `requireLease` on the judging clock ([`RunTx::require_lease`]).
        fn require_lease(run_id: &str, owner: &str, local: Timestamp) -> Result<(), StoreError>;
    }
}
