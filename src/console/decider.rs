//! The console's decisions on the store's operator calls: approve and reject bound to the hash
//! of the row that was rendered (spec 4.4 ApproveShown/RejectShown), deny with feedback bound
//! the same way (decision 0040), and cancel (spec 8.1), also bound to a shown approval for a
//! bulk cancel of marked rows (issue 21).
//! Runs on the worker thread with its own read-write connection: SQLite's [`Store`], or with
//! the `postgres` feature PostgreSQL's `PgStore` (the same operator functions over the store
//! trait both implement, so a decision is the same compare-and-set on either).

use std::path::Path;

use super::data::{Choice, DecideError, Decider, Write, WriteResult};
use crate::runtime::operator::{self, Decided, OperatorError};
use crate::runtime::store::{RunStore, SHOWN_REQUEST_MAX, Store, StoreError};
use crate::runtime::types::{Key, Said, Timestamp};

/// `operator::approve_shown`, `reject_shown` or `deny_shown`: a decision bound to the hash the
/// reviewer was shown.
type ShownDecision<'k, S> =
    fn(&S, &'k Key, &'k Key, &str, &str, &str, Timestamp) -> Result<Decided, OperatorError>;

/// A run database the console decides on: the operator's store, and the size of a request
/// before it is read.
pub trait DecidingStore: RunStore + Send {
    /// The stored size in bytes of an approval's request; `None` if there is no such approval.
    fn request_size(&self, run: &Key, approval: &Key) -> Result<Option<i64>, StoreError>;

    /// After a write committed: on PostgreSQL, chain what is in the inbox when this login may
    /// (as the decision commands do), so the decision is on the log, and other consoles hear
    /// of it, with no runtime running; a reviewer-only login leaves it to the runtime's
    /// sequencers. A failure here changes nothing of the decision (it committed).
    fn after_write(&mut self) {}
}

impl DecidingStore for Store {
    fn request_size(&self, run: &Key, approval: &Key) -> Result<Option<i64>, StoreError> {
        Store::request_bytes(self, run, approval)
    }
}

#[cfg(feature = "postgres")]
impl DecidingStore for crate::pgstore::PgStore {
    fn request_size(&self, run: &Key, approval: &Key) -> Result<Option<i64>, StoreError> {
        crate::pgstore::PgStore::request_bytes(self, run.as_bytes(), approval.as_bytes())
    }

    fn after_write(&mut self) {
        let _ = self.chain_if_allowed();
    }
}

pub struct StoreDecider<S = Store> {
    store: S,
    /// A fixed clock for tests; `None` = the wall clock.
    now: Option<Timestamp>,
}

impl StoreDecider<Store> {
    /// Opens the database for writing (never creates or migrates it).
    pub fn open(path: &Path) -> Result<StoreDecider, Said> {
        let store = Store::open_existing(path, false).map_err(|e| e.said())?;
        Ok(StoreDecider { store, now: None })
    }
}

impl<S: DecidingStore> StoreDecider<S> {
    /// A decider over an open store.
    pub fn over(store: S) -> StoreDecider<S> {
        StoreDecider { store, now: None }
    }

    /// The store it decides on.
    pub fn store(&self) -> &S {
        &self.store
    }

    pub fn with_clock(mut self, now: Timestamp) -> StoreDecider<S> {
        self.now = Some(now);
        self
    }

    fn now(&self) -> Timestamp {
        self.now.unwrap_or_else(Timestamp::now)
    }
}

fn map(e: OperatorError) -> DecideError {
    match e {
        OperatorError::Changed { .. } => DecideError::Changed,
        OperatorError::NotPending {
            status,
            decided_by,
            decided_at,
            ..
        } => DecideError::AlreadyDecided {
            status,
            by: decided_by,
            at: (!decided_at.is_zero()).then_some(decided_at),
        },
        e @ OperatorError::Expired { .. } => DecideError::Expired(e.said()),
        e @ (OperatorError::RunNotWaiting { .. } | OperatorError::RunFinished { .. }) => {
            DecideError::RunState(e.said())
        }
        OperatorError::Locked { .. } => DecideError::Locked,
        e => DecideError::Other(e.said()),
    }
}

impl<S: DecidingStore> StoreDecider<S> {
    /// Refuses, before the operator reads the row whole, a decision on a request the console
    /// did not read (issue 14 item 6): the detail showed none of its arguments.
    fn refuse_huge(&self, run: &Key, approval: &Key) -> Result<(), DecideError> {
        match self.store.request_size(run, approval) {
            Ok(Some(n)) if n > SHOWN_REQUEST_MAX => Err(DecideError::Other(
                format!(
                    "the request is {n} bytes and none of its arguments were shown; nothing was decided (cancel the run instead)"
                )
                .into(),
            )),
            _ => Ok(()),
        }
    }
}

impl<S: DecidingStore> Decider for StoreDecider<S> {
    fn run(&mut self, cmd: &Write) -> WriteResult {
        let done = self.write(cmd);
        if done.is_ok() {
            self.store.after_write();
        }
        done
    }
}

impl<S: DecidingStore> StoreDecider<S> {
    fn write(&mut self, cmd: &Write) -> WriteResult {
        let now = self.now();
        match cmd {
            Write::Decide {
                choice,
                run,
                approval,
                shown_hash,
                by,
                note,
            } => {
                self.refuse_huge(run, approval)?;
                let (decide, done, then): (ShownDecision<'_, S>, &str, &str) = match choice {
                    Choice::Approve => (
                        operator::approve_shown,
                        "approved",
                        "the run goes on when its runtime resumes it",
                    ),
                    Choice::Reject => (operator::reject_shown, "rejected", "the run is cancelled"),
                    Choice::Deny => (
                        operator::deny_shown,
                        "denied",
                        "the agent is told your note when its program resumes the run",
                    ),
                };
                let d =
                    decide(&self.store, run, approval, shown_hash, by, note, now).map_err(map)?;
                // An MCP proxy's call has no program to resume it: its host collects it.
                if self
                    .store
                    .proxy_call(d.run.id_bytes())
                    .ok()
                    .flatten()
                    .is_some()
                {
                    return Ok(match choice {
                        Choice::Approve => format!(
                            "approved by {by}; the MCP host's call still held runs it now, else its next identical call does, once"
                        ),
                        _ => format!(
                            "rejected by {by} with your note (an MCP proxy's call has no agent to continue): its host is answered REJECTED with it"
                        ),
                    });
                }
                Ok(format!("{done} by {by}; {then}"))
            }
            Write::Cancel { run, by, reason } => {
                let c = operator::cancel(&self.store, run, by, reason, now).map_err(map)?;
                Ok(format!(
                    "run cancelled by {by}; {} step(s) failed",
                    c.steps_failed
                ))
            }
            Write::CancelShown {
                run,
                approval,
                shown_hash,
                by,
                reason,
            } => {
                let c =
                    operator::cancel_shown(&self.store, run, approval, shown_hash, by, reason, now)
                        .map_err(map)?;
                Ok(format!(
                    "run cancelled by {by}; {} step(s) failed",
                    c.steps_failed
                ))
            }
            Write::Resume { .. } => Err(DecideError::Unavailable(
                "resume goes through the resume hook".into(),
            )),
        }
    }
}
