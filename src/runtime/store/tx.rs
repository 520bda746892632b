//! Write transactions (spec 1.5, 3.4): [`Store::write`] runs a closure inside one
//! `BEGIN IMMEDIATE` transaction; the closure appends hash-chained events and changes rows
//! through [`Tx`], each change a compare-and-set on the state it expects. The run-state checks
//! and the event append live here; the row writes in `writes.rs`.

use rusqlite::{Connection, params};

use super::bind::key;
use super::error::{Ctx, StoreError};
use super::events::event_payload;
use super::run_state::{check_state, check_unexpired};
use super::{Store, events, reads};
use crate::runtime::json::event_hash_bytes;
use crate::runtime::types::{Approval, AsKey, Event, Key, Lease, Run, RunStatus, Step, Timestamp};

/// A `BEGIN IMMEDIATE` transaction on the writer's connection, begun and committed through
/// cached statements (rusqlite's `Transaction` has SQLite parse `BEGIN` and `COMMIT` afresh
/// for every transaction). Dropped without a commit that succeeded (an error, a panic in the
/// closure, a failed `COMMIT`) it rolls back, as rusqlite's does: unless SQLite has already
/// rolled the transaction back itself.
pub(super) struct Immediate<'a> {
    conn: &'a Connection,
    committed: bool,
}

impl<'a> Immediate<'a> {
    fn begin(conn: &'a Connection) -> rusqlite::Result<Immediate<'a>> {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Immediate {
            conn,
            committed: false,
        })
    }

    fn commit(mut self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        self.committed = true;
        Ok(())
    }
}

impl std::ops::Deref for Immediate<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Immediate<'_> {
    fn drop(&mut self) {
        if !self.committed && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// A write transaction in progress.
pub struct Tx<'a> {
    pub(super) tx: Immediate<'a>,
    head: Option<(i64, String)>,
    events: Vec<Event>,
}

impl Store {
    testing_pub! {
    /// Runs `f` in one `BEGIN IMMEDIATE` transaction. On `Ok` it commits and returns the value
    /// with the events appended (hand them to observers now, after the commit); an `Err` or a
    /// panic in `f` rolls everything back. SQLITE_BUSY past the busy timeout is
    /// [`StoreError::Locked`].
    ///
    /// Public only with the `testing` feature: outside the runtime, state changes go through
    /// the driver and the operator functions, which compare-and-set on what they expect.
    ///
    /// A transaction lands whole or not at all, and a compare-and-set that finds another
    /// state refuses the write:
    ///
    /// ```
    /// # use countersign::runtime::driver::default_limits;
    /// # use countersign::runtime::store::{NewRun, Store, StoreError};
    /// # use countersign::runtime::types::Timestamp;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path().join("runs.db"))?;
    /// let (now, limits) = (Timestamp::now(), default_limits());
    /// let run = NewRun {
    ///     id: "r1",
    ///     goal: "refund order A-1",
    ///     limits: &limits,
    ///     now,
    ///     tools: &[],
    ///     lease_owner: "worker-a",
    ///     lease_expires_at: now.add_nanos(30_000_000_000),
    /// };
    /// // Committed: the run, and its two events to hand to observers now.
    /// let ((), events) = store.write(|tx| tx.insert_run(&run))?;
    /// let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    /// assert_eq!(kinds, ["run.created", "run.started"]);
    ///
    /// // Another owner cannot claim a step of a run leased to worker-a.
    /// let claimed = store.write(|tx| tx.start_step("r1", "s0", 0, "worker-b", now));
    /// assert!(matches!(claimed, Err(StoreError::RunLeased { .. })));
    ///
    /// // An error from the closure rolls back what it wrote before failing.
    /// let failed = store.write(|tx| {
    ///     tx.start_step("r1", "s0", 0, "worker-a", now)?;
    ///     Err::<(), _>(StoreError::Invalid("the agent gave up".into()))
    /// });
    /// assert!(failed.is_err());
    /// assert_eq!(store.get_run("r1")?.step_count, 0);
    /// assert_eq!(store.verify_events(0, 0)?.checked, 2);
    /// # Ok(()) }
    /// ```
    fn write<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T, E>,
    ) -> Result<(T, Vec<Event>), E> {
        if self.read_only {
            return Err(StoreError::Invalid(format!(
                "{} was opened read-only; open it for writing to change it",
                self.path.display()
            ))
            .into());
        }
        self.check_same_file()?;
        let conn = self.lock();
        let tx = Immediate::begin(&conn).ctx("begin write")?;
        let mut w = Tx {
            tx,
            head: None,
            events: Vec::new(),
        };
        let out = f(&mut w)?;
        let Tx { tx, events, .. } = w;
        tx.commit().ctx("commit")?;
        Ok((out, events))
    }
    }
}

/// A run state change (spec 3.4).
#[derive(Debug, Clone)]
pub struct Transition<'a> {
    /// The run's id as stored (bytes: it need not be UTF-8).
    pub run_id: &'a [u8],
    /// The statuses the run may be in; any other is [`StoreError::RunState`] and nothing is
    /// written.
    pub from: &'a [RunStatus],
    /// The status it moves to.
    pub to: RunStatus,
    /// `runs.reason` (spec 3.3); written as given, empty included.
    pub reason: &'a str,
    /// `runs.reason_detail`; written as given.
    pub detail: &'a str,
    /// `runs.finished_at`; zero writes `''` (a move that does not finish the run).
    pub finished_at: Timestamp,
    /// `runs.result_json`; written as given (empty = none).
    pub result_json: &'a str,
    /// The writer's lease owner: checked on a RUNNING run (driver writes) and stamped on a
    /// move to RUNNING; `None` for operator paths.
    pub lease_owner: Option<&'a str>,
    /// The lease expiry stamped on a move to RUNNING (wall now + TTL).
    pub lease_expires_at: Timestamp,
}

impl Transition<'_> {
    /// The lease columns the move writes: a move to RUNNING stamps the writer's lease, any
    /// other clears it.
    pub(crate) fn lease_written(&self) -> (&str, String) {
        if self.to == RunStatus::Running {
            (
                self.lease_owner.unwrap_or(""),
                self.lease_expires_at.to_rfc3339(),
            )
        } else {
            ("", String::new())
        }
    }
}

impl<'a> Tx<'a> {
    testing_pub! {
    /// The connection, for reads or custom SQL inside this transaction (tests only: the
    /// `testing` feature).
    fn conn(&self) -> &Connection {
        &self.tx
    }
    }

    /// Events appended so far in this transaction.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Appends an event: seq = chain head + 1, hash chained to the previous event (spec 1.5).
    /// An empty payload is stored as `{}`.
    pub fn append_event(
        &mut self,
        run_id: impl AsKey,
        step_id: impl AsKey,
        at: &Timestamp,
        kind: &str,
        payload: &[u8],
    ) -> Result<Event, StoreError> {
        self.append(run_id, step_id, at, kind, payload)?;
        self.events
            .last()
            .cloned()
            .ok_or_else(|| StoreError::Invalid("the appended event is missing".into()))
    }

    /// [`Tx::append_event`] without a copy of the event for the caller (the transaction keeps
    /// its own for the observers).
    pub(crate) fn append(
        &mut self,
        run_id: impl AsKey,
        step_id: impl AsKey,
        at: &Timestamp,
        kind: &str,
        payload: &[u8],
    ) -> Result<(), StoreError> {
        let (run_id, step_id) = (key(&run_id), key(&step_id));
        let payload = event_payload(kind, payload)?;
        if self.head.is_none() {
            self.head = Some(events::head(&self.tx)?);
        }
        let (head, prev) = self.head.clone().unwrap_or_default();
        let seq = head.checked_add(1).ok_or_else(|| {
            StoreError::Invalid(
                "the event sequence is exhausted: no event can follow seq 9223372036854775807"
                    .into(),
            )
        })?;
        let at_text = at.to_rfc3339();
        let hash = event_hash_bytes(&prev, seq, run_id.0, step_id.0, &at_text, kind, payload);
        self.tx
            .prepare_cached(
                "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?,?,?,?,?,?,?)",
            )
            .ctx("append event")?
            .execute(params![seq, run_id, step_id, at_text, kind, payload, hash])
            .ctx("append event")?;
        self.head = Some((seq, hash.clone()));
        // Ids that are not UTF-8 are kept as stored, as a read of the row would keep them.
        let mut raw_invalid = Vec::new();
        for (column, k) in [("run_id", run_id), ("step_id", step_id)] {
            if std::str::from_utf8(k.0).is_err() {
                raw_invalid.push((column, k.0.to_vec()));
            }
        }
        let ev = Event {
            seq,
            run_id: Key::new(run_id.0).lossy().into_owned(),
            step_id: Key::new(step_id.0).lossy().into_owned(),
            raw_invalid,
            at_text,
            at: *at,
            kind: kind.into(),
            payload: payload.into(),
            hash,
            ..Event::default()
        };
        self.events.push(ev);
        Ok(())
    }

    /// Reads the run's status and checks it is one of `from`; with `lease_owner`, a RUNNING
    /// run must be leased by it (else [`StoreError::RunLeased`]). Returns the status.
    pub fn require_status(
        &self,
        run_id: impl AsKey,
        from: &[RunStatus],
        lease_owner: Option<&str>,
    ) -> Result<RunStatus, StoreError> {
        self.checked_state(run_id, from, lease_owner)
            .map(|(status, _)| status)
    }

    /// [`Tx::require_status`], also returning the lease it read: the status and the lease
    /// columns come from one read of the run's row.
    fn checked_state(
        &self,
        run_id: impl AsKey,
        from: &[RunStatus],
        lease_owner: Option<&str>,
    ) -> Result<(RunStatus, Lease), StoreError> {
        let run_id = key(&run_id);
        let (status, lease) = self.run_state(run_id.0)?;
        check_state(run_id.0, &status, lease, from, lease_owner)
    }

    /// The run's status as stored and its lease columns (the write lock is the transaction's).
    pub(super) fn run_state(&self, run_id: impl AsKey) -> Result<(String, Lease), StoreError> {
        reads::state(&self.tx, key(&run_id))
    }

    /// `requireLease`: RUNNING, leased by `owner`, stored expiry after `now` (wall clock).
    pub fn require_lease(
        &self,
        run_id: impl AsKey,
        owner: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let run_id = key(&run_id);
        let (_, lease) = self.checked_state(run_id.0, &[RunStatus::Running], Some(owner))?;
        check_unexpired(run_id.0, &lease, now)
    }

    /// requireStatus then the state change (spec 3.4). A move to RUNNING stamps the writer's
    /// lease; any other move clears it. Never touches step_count or accounting.
    pub fn transition(&self, t: &Transition<'_>) -> Result<(), StoreError> {
        self.require_status(t.run_id, t.from, t.lease_owner)?;
        self.write_transition(t)
    }

    /// The update of [`Tx::transition`], its `from` already checked.
    pub(super) fn write_transition(&self, t: &Transition<'_>) -> Result<(), StoreError> {
        let (owner, expires) = t.lease_written();
        self.tx
            .prepare_cached(
                "UPDATE runs SET status=?, reason=?, reason_detail=?, finished_at=?, result_json=?, \
                 lease_owner=?, lease_expires_at=? WHERE id=?",
            )
            .ctx("transition")?
            .execute(params![
                t.to.as_str(),
                t.reason,
                t.detail,
                t.finished_at.to_rfc3339(),
                t.result_json,
                owner,
                expires,
                key(t.run_id)
            ])
            .ctx("transition")?;
        Ok(())
    }

    /// Sets the lease columns (a takeover inside a resume transaction).
    pub fn set_lease(
        &self,
        run_id: impl AsKey,
        owner: &str,
        expires_at: Timestamp,
    ) -> Result<(), StoreError> {
        self.tx
            .prepare_cached("UPDATE runs SET lease_owner=?, lease_expires_at=? WHERE id=?")
            .ctx("set lease")?
            .execute(params![owner, expires_at.to_rfc3339(), key(&run_id)])
            .ctx("set lease")?;
        Ok(())
    }

    /// The run row, read inside this transaction.
    pub fn get_run(&self, id: impl AsKey) -> Result<Run, StoreError> {
        reads::get_run(&self.tx, id)
    }

    /// How many step rows the run has, read inside this transaction.
    pub fn count_steps(&self, run_id: impl AsKey) -> Result<i64, StoreError> {
        self.tx
            .prepare_cached("SELECT count(*) FROM steps WHERE run_id = ?")
            .ctx("count steps")?
            .query_row(params![key(&run_id)], |r| r.get(0))
            .ctx("count steps")
    }

    /// The run's steps, read inside this transaction.
    pub fn list_steps(&self, run_id: impl AsKey) -> Result<Vec<Step>, StoreError> {
        reads::list_steps(&self.tx, run_id)
    }

    /// One step, read inside this transaction.
    pub fn get_step(&self, id: impl AsKey) -> Result<Step, StoreError> {
        reads::get_step(&self.tx, id)
    }

    /// The run's approvals, read inside this transaction.
    pub fn list_approvals(&self, run_id: impl AsKey) -> Result<Vec<Approval>, StoreError> {
        reads::list_approvals(&self.tx, run_id)
    }

    /// One approval, read whole inside this transaction.
    pub fn get_approval(&self, run_id: impl AsKey, id: impl AsKey) -> Result<Approval, StoreError> {
        reads::get_approval(&self.tx, run_id, id)
    }

    /// The id of a step's last-inserted approval, as stored, read inside this transaction.
    pub fn latest_approval_id(
        &self,
        run_id: impl AsKey,
        step_id: impl AsKey,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        use rusqlite::OptionalExtension;
        self.tx
            .prepare_cached(
                "SELECT CAST(id AS BLOB) FROM approvals WHERE run_id = ?1 AND step_id = ?2 \
                 ORDER BY rowid DESC LIMIT 1",
            )
            .ctx("latest approval")?
            .query_row(rusqlite::params![key(&run_id), key(&step_id)], |r| {
                r.get::<_, Vec<u8>>(0)
            })
            .optional()
            .ctx("latest approval")
    }

    /// The last-inserted approval of a step, read inside this transaction.
    pub fn latest_approval_of_step(
        &self,
        run_id: impl AsKey,
        step_id: impl AsKey,
    ) -> Result<Option<Approval>, StoreError> {
        reads::latest_approval_of_step(&self.tx, run_id, step_id)
    }
}
