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
use crate::runtime::types::{ApprovalStatus, Key, RunStatus, Said, Timestamp};

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
pub use who::{NAME_MAX, account_name, default_operator, default_operator_checked, name_refused};

/// Why an operator action did not happen. Messages keep agentrt's text first and say what to
/// do. Ids are kept as stored ([`Key`]); [`OperatorError::said`] is the message with their
/// bytes, and `Display` the same message with an id that is not UTF-8 written lossily.
#[derive(Debug, Error)]
pub enum OperatorError {
    /// The run is not WAITING_FOR_APPROVAL (agentrt's ErrRunState, view's ErrRunNotWaiting):
    /// `agentrt: run is not in the required state: run <id> is <S>, not waiting for approval`.
    #[error("{}", self.said())]
    RunNotWaiting {
        /// The run asked about, as given.
        run_id: Key,
        /// The status the run has.
        status: RunStatus,
    },

    /// Cancel of a run that already ended (view's ErrRunFinished): `agentrt: run is not in the
    /// required state: run <id> is already <S>`.
    #[error("{}", self.said())]
    RunFinished {
        /// The run asked about.
        run_id: Key,
        /// Its terminal status.
        status: RunStatus,
    },

    /// No such approval in that run: `agentrt: not found: approval <id> of run <id>`.
    #[error("{}", self.said())]
    NotFound {
        /// The run asked about.
        run_id: Key,
        /// The approval id that is not in it.
        approval_id: Key,
    },

    /// Someone decided first: who, how and when (`agentrt: approval is not pending: approval
    /// <id> is already <S> (by <who> at <when>)`).
    #[error("{}", self.said())]
    NotPending {
        /// The approval asked about.
        approval_id: Key,
        /// Its status now: approved, rejected, or a status this build does not know.
        status: ApprovalStatus,
        /// Who decided it, as stored; empty when not recorded.
        decided_by: String,
        /// When it was decided; zero when not recorded.
        decided_at: Timestamp,
    },

    /// The approval expired: `already` when it was expired before this call, else it expired
    /// at `at` and this call recorded it (run cancelled).
    #[error("{}", self.said())]
    Expired {
        /// The approval asked about.
        approval_id: Key,
        /// Its `expires_at`.
        at: Timestamp,
        /// Whether it was already `expired` before this call (nothing written by this call).
        already: bool,
    },

    /// The row is not the one the reviewer was shown (or no hash was shown).
    #[error("{}", self.said())]
    Changed {
        /// The approval asked about.
        approval_id: Key,
        /// Empty when the hashes differ; `": no hash was shown"` when the decision named none.
        detail: String,
    },

    /// The stored hash does not match the stored request (tampered or undecodable row).
    #[error("{}", self.said())]
    HashMismatch {
        /// The approval asked about.
        approval_id: Key,
        /// The row's decode error, or which approval and why its hash could not be recomputed.
        detail: Said,
    },

    /// The name to record as who decided or cancelled is not one ([`name_refused`]: blank,
    /// over [`NAME_MAX`] bytes, or holding a character every screen shows escaped). The audit
    /// trail keeps it for good, so nothing is written; the name is repeated only
    /// escaped, where the reason needs it (`name_refused`), never as typed.
    #[error("{}", self.said())]
    NameRefused {
        /// Why, as [`name_refused`] says it.
        why: String,
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

/// Refuses a name the audit trail must not keep, before anything is read or written.
fn check_name(by: &str) -> Result<(), OperatorError> {
    match name_refused(by) {
        Some(why) => Err(OperatorError::NameRefused { why }),
        None => Ok(()),
    }
}

/// agentrt's sentinel for a run in another state (spec 2.1).
const RUN_STATE: &str = "agentrt: run is not in the required state: ";
/// agentrt's sentinel for an approval no longer pending.
const NOT_PENDING: &str = "agentrt: approval is not pending: approval ";

impl OperatorError {
    /// The message with every id it names as stored ([`Said::bytes`], for a sanitiser to show
    /// as `\xNN`); `Display` is this message with such ids lossy (U+FFFD), as agentrt prints it.
    pub fn said(&self) -> Said {
        match self {
            OperatorError::RunNotWaiting { run_id, status } => Said::from(RUN_STATE)
                .text("run ")
                .id(run_id)
                .text(format!(" is {status}, not waiting for approval")),
            OperatorError::RunFinished { run_id, status } => Said::from(RUN_STATE)
                .text("run ")
                .id(run_id)
                .text(format!(" is already {status}")),
            OperatorError::NotFound {
                run_id,
                approval_id,
            } => Said::from("agentrt: not found: approval ")
                .id(approval_id)
                .text(" of run ")
                .id(run_id),
            OperatorError::NotPending {
                approval_id,
                status,
                decided_by,
                decided_at,
            } if *status == ApprovalStatus::Pending => {
                Said::from(NOT_PENDING).id(approval_id).text(
                    " reads as pending but is not stored as the text 'pending' (a damaged row): \
                     it cannot be decided; cancel the run instead",
                )
            }
            OperatorError::NotPending {
                approval_id,
                status,
                decided_by,
                decided_at,
            } => Said::from(NOT_PENDING).id(approval_id).text(format!(
                " is already {status}{}",
                by_at(decided_by, decided_at)
            )),
            OperatorError::Expired {
                approval_id,
                at,
                already,
            } => Said::from(NOT_PENDING).id(approval_id).text(if *already {
                " is already expired".to_string()
            } else {
                format!(" expired at {}", at.format_rfc3339_seconds())
            }),
            OperatorError::Changed {
                approval_id,
                detail,
            } => Said::from("agentrt: approval is not the one that was shown: approval ")
                .id(approval_id)
                .text(detail)
                .text("; show it again and decide on what is shown"),
            OperatorError::HashMismatch { detail, .. } => {
                Said::from("agentrt: approval hash does not match its recorded request: ")
                    .and(detail)
                    .text("; it cannot be approved or rejected, cancel the run instead")
            }
            OperatorError::NameRefused { why } => Said::from(format!(
                "the name to record as who decides cannot be recorded: {why}; nothing was written"
            )),
            OperatorError::Store(e) => e.said(),
            other @ OperatorError::Locked { .. } => Said::from(other.to_string()),
        }
    }
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
