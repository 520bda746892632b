//! The pending-approval selection rule (spec 4.8).

use thiserror::Error;

use crate::runtime::store::{RunStore, StoreError};
use crate::runtime::types::{Approval, ApprovalStatus, AsKey, Key, Said};

/// At most this many candidates are read and named.
pub const MAX_NAMED: i64 = 20;

/// Why no single pending approval was selected. Ids are kept as stored ([`Key`]);
/// [`SelectError::said`] is the message with their bytes, `Display` the same with an id that is
/// not UTF-8 written lossily.
#[derive(Debug, Error)]
pub enum SelectError {
    /// The named approval does not exist in that run: `approval <id> of run <id>: <source>`.
    #[error("{}", self.said())]
    NotFound {
        /// The run asked about.
        run_id: Key,
        /// The approval id named.
        approval_id: Key,
        /// The store's error reading it: usually `NotFound`, but any failure to read the named
        /// approval (a locked or damaged database) is reported here too.
        source: Box<StoreError>,
    },
    /// The named approval is decided or expired: `approval <id> is <S>: approval is not
    /// pending`.
    #[error("{}", self.said())]
    NotPending {
        /// The approval id named.
        approval_id: Key,
        /// Its status now.
        status: ApprovalStatus,
    },
    /// The run has none: `run <id>: no pending approval`.
    #[error("{}", self.said())]
    NoPending {
        /// The run asked about.
        run_id: Key,
    },
    /// The run has several: name one (`run <id> has <n> pending approvals, name one of <ids>:
    /// more than one pending approval`). `candidates` holds at most [`MAX_NAMED`] ids.
    #[error("{}", self.said())]
    Ambiguous {
        /// The run asked about.
        run_id: Key,
        /// How many approvals of the run are pending.
        total: i64,
        /// The ids of the first of them (at most [`MAX_NAMED`]), in the store's page order, as
        /// stored.
        candidates: Vec<Key>,
    },
    /// Reading failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SelectError {
    /// The message with every id it names as stored (see [`Said`]).
    pub fn said(&self) -> Said {
        match self {
            SelectError::NotFound {
                run_id,
                approval_id,
                source,
            } => Said::from("approval ")
                .id(approval_id)
                .text(" of run ")
                .id(run_id)
                .text(": ")
                .and(&source.said()),
            SelectError::NotPending {
                approval_id,
                status,
            } => Said::from("approval ")
                .id(approval_id)
                .text(format!(" is {status}: approval is not pending")),
            SelectError::NoPending { run_id } => {
                Said::from("run ").id(run_id).text(": no pending approval")
            }
            SelectError::Ambiguous {
                run_id,
                total,
                candidates,
            } => {
                let mut s = Said::from("run ")
                    .id(run_id)
                    .text(format!(" has {total} pending approvals, name one of "));
                for (i, id) in candidates.iter().enumerate() {
                    if i > 0 {
                        s = s.text(", ");
                    }
                    s = s.id(id);
                }
                let more = total - candidates.len() as i64;
                if more > 0 {
                    s = s.text(format!(", and {more} more"));
                }
                s.text(": more than one pending approval")
            }
            SelectError::Store(e) => e.said(),
        }
    }
}

/// With an id: that approval, whole, if pending. Without: the run's only pending approval,
/// read whole (at most [`MAX_NAMED`] candidates are read to tell). Ids are bytes as stored (a
/// run or approval id need not be UTF-8); messages keep them as stored ([`SelectError::said`]).
pub fn pending_approval<S: RunStore + ?Sized>(
    store: &S,
    run_id: impl AsKey,
    approval_id: Option<&[u8]>,
) -> Result<Approval, SelectError> {
    let run_id = run_id.key_bytes();
    if let Some(id) = approval_id {
        let a = store
            .get_approval(run_id, id)
            .map_err(|source| SelectError::NotFound {
                run_id: Key::new(run_id),
                approval_id: Key::new(id),
                source: Box::new(source),
            })?;
        if a.status != ApprovalStatus::Pending {
            return Err(SelectError::NotPending {
                approval_id: Key::new(id),
                status: a.status,
            });
        }
        return Ok(a);
    }
    let page = store.list_approvals_page(run_id, "pending", MAX_NAMED, 0)?;
    match page.total {
        0 => Err(SelectError::NoPending {
            run_id: Key::new(run_id),
        }),
        1 if page.items.len() == 1 => Ok(store.get_approval(run_id, page.items[0].id_bytes())?),
        total => Err(SelectError::Ambiguous {
            run_id: Key::new(run_id),
            total,
            candidates: page.items.iter().map(|a| Key::new(a.id_bytes())).collect(),
        }),
    }
}
