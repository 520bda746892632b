//! What an operator does to a run (spec 4.4, 4.5, 4.8, 8.1): decide an approval (approve or
//! reject, optionally bound to the hash the reviewer was shown, or deny it with feedback for the
//! agent), expire one, pick the pending approval of a run, and cancel a run. Every change is one write transaction that re-checks
//! what it expects under the write lock. Each function takes the clock reading `now` (the wall
//! clock in production, a fixed time in tests) and returns the events it appended, to be
//! handed to observers after the commit.

mod cancel;
mod common;
mod decide;
mod deny;
mod expire;
mod select;
mod who;

use thiserror::Error;

use crate::runtime::store::StoreError;
use crate::runtime::types::{ApprovalStatus, RunStatus, Timestamp};

pub use cancel::{Cancelled, cancel, cancel_shown};
#[cfg(feature = "testing")]
pub use decide::decide_hooked;
pub use decide::{
    Decided, Review, Ruling, Shown, approve, approve_shown, decide, reject, reject_shown,
    verify_hash,
};
pub use deny::{DENIED_KIND, denied_summary, deny_shown};
pub use expire::{expire, expire_in};
pub use select::{MAX_NAMED, SelectError, pending_approval};
pub use who::{account_name, default_operator};

/// Why an operator action did not happen. Messages keep agentrt's text first and say what to
/// do.
#[derive(Debug, Error)]
pub enum OperatorError {
    /// The run is not WAITING_FOR_APPROVAL (agentrt's ErrRunState, view's ErrRunNotWaiting).
    #[error(
        "agentrt: run is not in the required state: run {run_id} is {status}, not waiting for approval"
    )]
    RunNotWaiting {
        /// The run asked about, as given (lossy when not UTF-8).
        run_id: String,
        /// The status the run has.
        status: RunStatus,
    },

    /// Cancel of a run that already ended (view's ErrRunFinished).
    #[error("agentrt: run is not in the required state: run {run_id} is already {status}")]
    RunFinished {
        /// The run asked about.
        run_id: String,
        /// Its terminal status.
        status: RunStatus,
    },

    /// No such approval in that run.
    #[error("agentrt: not found: approval {approval_id} of run {run_id}")]
    NotFound {
        /// The run asked about.
        run_id: String,
        /// The approval id that is not in it.
        approval_id: String,
    },

    /// Someone decided first: who, how and when.
    #[error(
        "agentrt: approval is not pending: approval {approval_id} is already {status}{}",
        by_at(decided_by, decided_at)
    )]
    NotPending {
        /// The approval asked about.
        approval_id: String,
        /// Its status now: approved, rejected, or a status this build does not know.
        status: ApprovalStatus,
        /// Who decided it, as stored; empty when not recorded.
        decided_by: String,
        /// When it was decided; zero when not recorded.
        decided_at: Timestamp,
    },

    /// The approval expired: `already` when it was expired before this call, else it expired
    /// at `at` and this call recorded it (run cancelled).
    #[error("agentrt: approval is not pending: approval {approval_id} {}", if *already { "is already expired".to_string() } else { format!("expired at {}", at.format_rfc3339_seconds()) })]
    Expired {
        /// The approval asked about.
        approval_id: String,
        /// Its `expires_at`.
        at: Timestamp,
        /// Whether it was already `expired` before this call (nothing written by this call).
        already: bool,
    },

    /// The row is not the one the reviewer was shown (or no hash was shown).
    #[error(
        "agentrt: approval is not the one that was shown: approval {approval_id}{detail}; show it again and decide on what is shown"
    )]
    Changed {
        /// The approval asked about.
        approval_id: String,
        /// Empty when the hashes differ; `": no hash was shown"` when the decision named none.
        detail: String,
    },

    /// The stored hash does not match the stored request (tampered or undecodable row).
    #[error(
        "agentrt: approval hash does not match its recorded request: {detail}; it cannot be approved or rejected, cancel the run instead"
    )]
    HashMismatch {
        /// The approval asked about.
        approval_id: String,
        /// The row's decode error, or which approval and why its hash could not be recomputed.
        detail: String,
    },

    /// Another writer held the database past the busy timeout.
    #[error("database is locked by another consumer: {detail}; try again when its write finishes")]
    Locked {
        /// SQLite's message.
        detail: String,
    },

    /// Any other store failure.
    #[error(transparent)]
    Store(StoreError),
}

fn by_at(by: &str, at: &Timestamp) -> String {
    match (by.is_empty(), at.is_zero()) {
        (true, true) => String::new(),
        (false, true) => format!(" (by {by})"),
        (true, false) => format!(" (at {at})"),
        (false, false) => format!(" (by {by} at {at})"),
    }
}

impl From<StoreError> for OperatorError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Locked { detail } => OperatorError::Locked { detail },
            other => OperatorError::Store(other),
        }
    }
}
