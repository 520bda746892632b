//! The pending-approval selection rule (spec 4.8).

use thiserror::Error;

use crate::runtime::store::{Store, StoreError};
use crate::runtime::types::{Approval, ApprovalStatus, AsKey, lossy};

/// At most this many candidates are read and named.
pub const MAX_NAMED: i64 = 20;

/// Why no single pending approval was selected.
#[derive(Debug, Error)]
pub enum SelectError {
    /// The named approval does not exist in that run.
    #[error("approval {approval_id} of run {run_id}: {source}")]
    NotFound {
        /// The run asked about (lossy when not UTF-8).
        run_id: String,
        /// The approval id named.
        approval_id: String,
        /// The store's error reading it: usually `NotFound`, but any failure to read the named
        /// approval (a locked or damaged database) is reported here too.
        source: Box<StoreError>,
    },
    /// The named approval is decided or expired.
    #[error("approval {approval_id} is {status}: approval is not pending")]
    NotPending {
        /// The approval id named.
        approval_id: String,
        /// Its status now.
        status: ApprovalStatus,
    },
    /// The run has none.
    #[error("run {run_id}: no pending approval")]
    NoPending {
        /// The run asked about.
        run_id: String,
    },
    /// The run has several: name one. `candidates` holds at most [`MAX_NAMED`] ids.
    #[error("run {run_id} has {total} pending approvals, name one of {}: more than one pending approval", name_list(candidates, *total))]
    Ambiguous {
        /// The run asked about.
        run_id: String,
        /// How many approvals of the run are pending.
        total: i64,
        /// The ids of the first of them (at most [`MAX_NAMED`]), in the store's page order.
        candidates: Vec<String>,
    },
    /// Reading failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn name_list(ids: &[String], total: i64) -> String {
    let mut s = ids.join(", ");
    let more = total - ids.len() as i64;
    if more > 0 {
        s.push_str(&format!(", and {more} more"));
    }
    s
}

/// With an id: that approval, whole, if pending. Without: the run's only pending approval,
/// read whole (at most [`MAX_NAMED`] candidates are read to tell). Ids are bytes as stored (a
/// run or approval id need not be UTF-8); messages name them lossily.
pub fn pending_approval(
    store: &Store,
    run_id: impl AsKey,
    approval_id: Option<&[u8]>,
) -> Result<Approval, SelectError> {
    let run_id = run_id.key_bytes();
    if let Some(id) = approval_id {
        let a = store
            .get_approval(run_id, id)
            .map_err(|source| SelectError::NotFound {
                run_id: lossy(run_id).into_owned(),
                approval_id: lossy(id).into_owned(),
                source: Box::new(source),
            })?;
        if a.status != ApprovalStatus::Pending {
            return Err(SelectError::NotPending {
                approval_id: lossy(id).into_owned(),
                status: a.status,
            });
        }
        return Ok(a);
    }
    let page = store.list_approvals_page(run_id, "pending", MAX_NAMED, 0)?;
    match page.total {
        0 => Err(SelectError::NoPending {
            run_id: lossy(run_id).into_owned(),
        }),
        1 if page.items.len() == 1 => Ok(store.get_approval(run_id, page.items[0].id_bytes())?),
        total => Err(SelectError::Ambiguous {
            run_id: lossy(run_id).into_owned(),
            total,
            candidates: page.items.into_iter().map(|a| a.id).collect(),
        }),
    }
}
