//! The operations a run database offers the operator (and, later, the driver), as traits both
//! backends implement: SQLite's [`Store`] with its [`Tx`], and PostgreSQL's `PgStore` (the
//! `postgres` feature) with its transaction. The operator's functions (decide, deny, expire,
//! cancel) are written once against them (docs/decisions/0082).
//!
//! A [`RunStore`] reads a run and its approvals and runs one write transaction; a [`RunTx`]
//! is that transaction: it reads the run under the write lock (SQLite's `BEGIN IMMEDIATE`
//! holds the whole file; PostgreSQL locks the run's row until the commit), compare-and-sets
//! runs, steps and approvals, and appends events (SQLite chains each at once; PostgreSQL
//! commits it to the inbox a sequencer chains, decision 0081). Both traits are sealed: only
//! this crate implements them, and a transaction is opened only from inside it, so outside
//! the crate state changes still go through the driver and the operator functions.

use super::error::StoreError;
use super::keyset::KeyPage;
use super::reads::ProxyCall;
use super::run_state::{check_state, check_unexpired};
use super::tx::Transition;
use super::window::Page;
use super::writes::{
    ApprovalDecision, Charge, Failing, NewApproval, NewModelCall, NewRun, StepFailure, StepUpdate,
};
use super::{Store, Tx};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::runtime::types::{
    Approval, ApprovalStatus, Event, Key, Lease, Run, RunStatus, Step, StepStatus, Timestamp,
};

pub(crate) mod sealed {
    /// Implemented by this crate's stores and transactions only.
    pub trait Sealed {}
}

/// The capability to open a write transaction through [`RunStore::write`]: only this crate
/// can make one.
#[derive(Debug, Clone, Copy)]
pub struct InCrate(());

/// The one [`InCrate`].
pub(crate) const IN_CRATE: InCrate = InCrate(());

/// A run database the operator works on: reads outside a transaction and one write
/// transaction at a time.
pub trait RunStore: sealed::Sealed {
    /// The store's write transaction.
    type Tx<'t>: RunTx
    where
        Self: 't;

    /// The run row (whole; a damaged column is named in `decode_error`).
    fn get_run(&self, run_id: &[u8]) -> Result<Run, StoreError>;

    /// One approval of a run, whole.
    fn get_approval(&self, run_id: &[u8], approval_id: &[u8]) -> Result<Approval, StoreError>;

    /// A run's approvals with `status` (`""` for all) in insertion order, `limit` from
    /// `offset`, with the total, read together.
    fn list_approvals_page(
        &self,
        run_id: &[u8],
        status: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<Approval>, StoreError>;

    /// How many runs there are, of one status or all (`""`).
    fn count_runs(&self, status: &str) -> Result<i64, StoreError>;

    /// Every step of a run, in insertion order (the driver's cache of a run it drives).
    fn list_steps(&self, run_id: &[u8]) -> Result<Vec<Step>, StoreError>;

    /// Every approval of a run, in insertion order.
    fn list_approvals(&self, run_id: &[u8]) -> Result<Vec<Approval>, StoreError>;

    /// Runs newest first, of one status or all (`""`), before the key `before`, after
    /// skipping `skip`, at most `limit`: a bounded page by key.
    fn runs_page_by_key(
        &self,
        status: &str,
        before: Option<i64>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Run>, StoreError>;

    /// The MCP proxy call `run_id` answers, when an MCP proxy began it (its `proxy_calls`
    /// row); `None` for every other run and a database with no proxy index.
    fn proxy_call(&self, run_id: &[u8]) -> Result<Option<ProxyCall>, StoreError>;

    /// The first `max` pending approvals of each waiting run among `run_ids`.
    fn pending_approval_ids_of(
        &self,
        run_ids: &[&[u8]],
        max: i64,
    ) -> Result<BTreeMap<Key, Vec<Key>>, StoreError>;

    /// Runs `f` in one write transaction: committed when it returns `Ok` (then the value and
    /// the events it appended are returned, to hand to observers), rolled back on `Err`.
    fn write<T, E: From<StoreError>>(
        &self,
        _: InCrate,
        f: impl FnOnce(&mut Self::Tx<'_>) -> Result<T, E>,
    ) -> Result<(T, Vec<Event>), E>;
}

/// A write transaction in progress. Every read of the run is under the write lock, and every
/// change a compare-and-set or a write the lock already makes safe.
pub trait RunTx: sealed::Sealed {
    /// The run's status as stored and its lease, read under the write lock.
    fn run_state(&mut self, run_id: &[u8]) -> Result<(String, Lease), StoreError>;

    /// The run row, read under the write lock.
    fn get_run(&mut self, run_id: &[u8]) -> Result<Run, StoreError>;

    /// How many step rows the run has (what stands for its step count when the stored count
    /// does not read as an integer).
    fn count_steps(&mut self, run_id: &[u8]) -> Result<i64, StoreError>;

    /// One step, read inside the transaction.
    fn get_step(&mut self, step_id: &[u8]) -> Result<Step, StoreError>;

    /// One approval of a run, read inside the transaction.
    fn get_approval(&mut self, run_id: &[u8], approval_id: &[u8]) -> Result<Approval, StoreError>;

    /// The id of a step's latest approval (by insertion order), read inside the transaction,
    /// after the writes before it took their locks.
    fn latest_approval_id(
        &mut self,
        run_id: &[u8],
        step_id: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError>;

    /// The update of a [`RunTx::transition`], once its `from` was checked.
    fn write_transition(&mut self, t: &Transition<'_>) -> Result<(), StoreError>;

    /// Sets an approval's decision only if it is still `d.expected_status` with `d.hash`
    /// (false when no row changed). `decided_by = None` leaves that column.
    fn set_approval_status(
        &mut self,
        approval_id: &[u8],
        d: &ApprovalDecision<'_>,
    ) -> Result<bool, StoreError>;

    /// Sets an approval's status only, keeping who and when, if still `expected_status` with
    /// `hash`.
    fn set_approval_status_only(
        &mut self,
        approval_id: &[u8],
        expected_status: &str,
        hash: &str,
        status: &str,
    ) -> Result<bool, StoreError>;

    /// Expires `a` (spec 4.5) only if it still has the status and hash it was read with
    /// (false when no row changed): a pending one also gets `decided_at = at` and
    /// `note = "expired"` (decided_by untouched); a grant keeps who decided it and when.
    fn expire_approval(&mut self, a: &Approval, at: Timestamp) -> Result<bool, StoreError> {
        if a.status == ApprovalStatus::Pending {
            let d = ApprovalDecision {
                expected_status: "pending",
                hash: &a.hash,
                status: "expired",
                decided_at: at,
                decided_by: None,
                note: "expired",
            };
            self.set_approval_status(a.id_bytes(), &d)
        } else {
            self.set_approval_status_only(a.id_bytes(), a.status.as_str(), &a.hash, "expired")
        }
    }

    /// The steps of the run `which` names become `failed` with this observation: every one
    /// in `deciding`, `awaiting_approval` or `executing`, or one whatever its status; returns
    /// how many.
    fn fail_steps(
        &mut self,
        run_id: &[u8],
        which: Failing<'_>,
        f: &StepFailure<'_>,
    ) -> Result<usize, StoreError>;

    /// Appends an event (an empty payload is `{}`). SQLite chains it at once; PostgreSQL
    /// commits it to the inbox and the event the transaction returns has seq 0 and no hash
    /// until a sequencer chains it.
    fn append_event(
        &mut self,
        run_id: &[u8],
        step_id: &[u8],
        at: &Timestamp,
        kind: &str,
        payload: &[u8],
    ) -> Result<(), StoreError>;

    /// Inserts a run RUNNING, leased as `r` says, with `run.created` and `run.started`.
    fn insert_run(&mut self, r: &NewRun<'_>) -> Result<(), StoreError>;

    /// Claims step `index` (`step_count` must equal it, the run RUNNING and leased by
    /// `lease_owner`), inserts the step `deciding` and appends `step.started`.
    fn start_step(
        &mut self,
        run_id: &str,
        step_id: &str,
        index: i64,
        lease_owner: &str,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// Updates a step only if its status is one of `expected` (else `RunState` naming the
    /// status found, or `NotFound`).
    fn update_step(
        &mut self,
        step_id: &str,
        expected: &[StepStatus],
        u: &StepUpdate<'_>,
    ) -> Result<(), StoreError>;

    /// Inserts an approval `pending`.
    fn insert_approval(&mut self, a: &NewApproval<'_>) -> Result<(), StoreError>;

    /// Stores a tool spec under its hash unless one is there already.
    fn insert_tool_spec(&mut self, hash: &str, spec_json: &str) -> Result<(), StoreError>;

    /// `active_ms += ms` (clamped at 0, saturating).
    fn add_active_ms(&mut self, run_id: &str, ms: i64) -> Result<(), StoreError>;

    /// Adds to the run's model accounting (each charge clamped at 0, totals saturating).
    fn add_usage(&mut self, run_id: &str, charge: &Charge) -> Result<(), StoreError>;

    /// Inserts a `model_calls` row.
    fn insert_model_call(&mut self, m: &NewModelCall<'_>) -> Result<(), StoreError>;

    /// Records a model call's outcome (the row by id).
    fn finish_model_call(&mut self, m: &NewModelCall<'_>) -> Result<(), StoreError>;

    /// Sets the lease columns (a takeover inside a resume transaction).
    fn set_lease(
        &mut self,
        run_id: &str,
        owner: &str,
        expires_at: Timestamp,
    ) -> Result<(), StoreError>;

    /// The time leases are judged by in this transaction, given the writer's own reading
    /// `local`. SQLite (one host's file) takes the writer's clock; PostgreSQL, shared by many
    /// hosts, reads its server's clock, so a client's clock never decides a lease there.
    fn lease_now(&mut self, local: Timestamp) -> Result<Timestamp, StoreError> {
        Ok(local)
    }

    /// The expiry to stamp for a lease of `ttl` that the writer, by its own clock, would stamp
    /// as `local_until`: that on SQLite, the judging clock's now plus `ttl` on PostgreSQL.
    fn lease_until(
        &mut self,
        local_until: Timestamp,
        ttl: Duration,
    ) -> Result<Timestamp, StoreError> {
        let _ = ttl;
        Ok(local_until)
    }

    /// `requireLease`: the run RUNNING, leased by `owner`, its stored expiry after the judging
    /// clock's now ([`RunTx::lease_now`] of the writer's `local` reading).
    fn require_lease(
        &mut self,
        run_id: &str,
        owner: &str,
        local: Timestamp,
    ) -> Result<(), StoreError> {
        let (status, lease) = self.run_state(run_id.as_bytes())?;
        let (_, lease) = check_state(
            run_id.as_bytes(),
            &status,
            lease,
            &[RunStatus::Running],
            Some(owner),
        )?;
        let now = self.lease_now(local)?;
        check_unexpired(run_id.as_bytes(), &lease, now)
    }

    /// Reads the run's status under the write lock and checks it is one of `from`; with
    /// `lease_owner`, a RUNNING run must be leased by it. Returns the status.
    fn require_status(
        &mut self,
        run_id: &[u8],
        from: &[RunStatus],
        lease_owner: Option<&str>,
    ) -> Result<RunStatus, StoreError> {
        let (status, lease) = self.run_state(run_id)?;
        check_state(run_id, &status, lease, from, lease_owner).map(|(s, _)| s)
    }

    /// [`RunTx::require_status`], then the state change (spec 3.4).
    fn transition(&mut self, t: &Transition<'_>) -> Result<(), StoreError> {
        self.require_status(t.run_id, t.from, t.lease_owner)?;
        self.write_transition(t)
    }
}

impl sealed::Sealed for Store {}
impl sealed::Sealed for Tx<'_> {}

/// The [`RunStore`] reads every store answers with a method of its own of the same name,
/// listed once for the impls over SQLite's store, an `Arc` of a store and PostgreSQL's.
macro_rules! store_reads {
    ($to:tt) => {
        forward! { &self => $to;
            fn get_run(run_id: &[u8]) -> Result<Run, StoreError>;
            fn get_approval(run_id: &[u8], approval_id: &[u8]) -> Result<Approval, StoreError>;
            fn list_approvals_page(run_id: &[u8], status: &str, limit: i64, offset: i64)
                -> Result<Page<Approval>, StoreError>;
            fn count_runs(status: &str) -> Result<i64, StoreError>;
            fn list_steps(run_id: &[u8]) -> Result<Vec<Step>, StoreError>;
            fn list_approvals(run_id: &[u8]) -> Result<Vec<Approval>, StoreError>;
            fn runs_page_by_key(status: &str, before: Option<i64>, skip: i64, limit: i64)
                -> Result<KeyPage<Run>, StoreError>;
            fn pending_approval_ids_of(run_ids: &[&[u8]], max: i64)
                -> Result<BTreeMap<Key, Vec<Key>>, StoreError>;
            fn proxy_call(run_id: &[u8]) -> Result<Option<ProxyCall>, StoreError>;
        }
    };
}
#[cfg(feature = "postgres")]
pub(crate) use store_reads;

/// The [`RunTx`] writes of a driver's step every transaction answers with a method of its
/// own of the same name, listed once for SQLite's, PostgreSQL's and the driver's dispatch
/// (whose methods are `pub(crate)`: the visibility after the target).
macro_rules! tx_writes {
    ($to:tt $(, $vis:vis)?) => {
        forward! { $($vis)? &mut self => $to;
            fn insert_run(r: &NewRun<'_>) -> Result<(), StoreError>;
            fn start_step(run_id: &str, step_id: &str, index: i64, lease_owner: &str,
                now: Timestamp) -> Result<(), StoreError>;
            fn update_step(step_id: &str, expected: &[StepStatus], u: &StepUpdate<'_>)
                -> Result<(), StoreError>;
            fn insert_approval(a: &NewApproval<'_>) -> Result<(), StoreError>;
            fn insert_tool_spec(hash: &str, spec_json: &str) -> Result<(), StoreError>;
            fn insert_model_call(m: &NewModelCall<'_>) -> Result<(), StoreError>;
            fn finish_model_call(m: &NewModelCall<'_>) -> Result<(), StoreError>;
            fn set_lease(run_id: &str, owner: &str, expires_at: Timestamp)
                -> Result<(), StoreError>;
        }
    };
}
pub(crate) use tx_writes;

impl RunStore for Store {
    type Tx<'t> = Tx<'t>;

    store_reads!(Store);

    fn write<T, E: From<StoreError>>(
        &self,
        _: InCrate,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T, E>,
    ) -> Result<(T, Vec<Event>), E> {
        Store::write(self, f)
    }
}

impl RunTx for Tx<'_> {
    forward! { &mut self => Tx;
        fn run_state(run_id: &[u8]) -> Result<(String, Lease), StoreError>;
        fn get_run(run_id: &[u8]) -> Result<Run, StoreError>;
        fn count_steps(run_id: &[u8]) -> Result<i64, StoreError>;
        fn get_step(step_id: &[u8]) -> Result<Step, StoreError>;
        fn get_approval(run_id: &[u8], approval_id: &[u8]) -> Result<Approval, StoreError>;
        fn latest_approval_id(run_id: &[u8], step_id: &[u8])
            -> Result<Option<Vec<u8>>, StoreError>;
        fn write_transition(t: &Transition<'_>) -> Result<(), StoreError>;
        fn set_approval_status(approval_id: &[u8], d: &ApprovalDecision<'_>)
            -> Result<bool, StoreError>;
        fn set_approval_status_only(approval_id: &[u8], expected_status: &str, hash: &str,
            status: &str) -> Result<bool, StoreError>;
        fn fail_steps(run_id: &[u8], which: Failing<'_>, f: &StepFailure<'_>)
            -> Result<usize, StoreError>;
        fn add_active_ms(run_id: &str, ms: i64) -> Result<(), StoreError>;
        fn add_usage(run_id: &str, charge: &Charge) -> Result<(), StoreError>;
        fn require_lease(run_id: &str, owner: &str, local: Timestamp) -> Result<(), StoreError>;
        fn require_status(run_id: &[u8], from: &[RunStatus], lease_owner: Option<&str>)
            -> Result<RunStatus, StoreError>;
        fn transition(t: &Transition<'_>) -> Result<(), StoreError>;
        fn append_event(run_id: &[u8], step_id: &[u8], at: &Timestamp, kind: &str,
            payload: &[u8]) -> Result<(), StoreError> = append;
    }

    tx_writes!(Tx);
}

impl<S: RunStore + ?Sized> sealed::Sealed for std::sync::Arc<S> {}

/// A store shared between threads is the store.
impl<S: RunStore + ?Sized> RunStore for std::sync::Arc<S> {
    type Tx<'t>
        = S::Tx<'t>
    where
        Self: 't;

    store_reads!((**self));

    fn write<T, E: From<StoreError>>(
        &self,
        token: InCrate,
        f: impl FnOnce(&mut S::Tx<'_>) -> Result<T, E>,
    ) -> Result<(T, Vec<Event>), E> {
        (**self).write(token, f)
    }
}
