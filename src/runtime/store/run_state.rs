//! The run-state check every write transaction makes, on either backend, on what it read under
//! the write lock (spec 3.4): the run is in one of the statuses the write expects, and a
//! RUNNING run is leased by the writer when it names itself.

use super::error::StoreError;
use crate::runtime::types::{Key, Lease, RunStatus, Said, Timestamp};

/// `a or b or c`.
fn or_list(from: &[RunStatus]) -> String {
    from.iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The run-state check both backends make on what they read under the write lock: the stored
/// `status` must be one of `from`; with `lease_owner`, a RUNNING run must be leased by it.
pub(crate) fn check_state(
    run_id: &[u8],
    status: &str,
    lease: Lease,
    from: &[RunStatus],
    lease_owner: Option<&str>,
) -> Result<(RunStatus, Lease), StoreError> {
    let status = RunStatus::parse(status);
    if !from.contains(&status) {
        return Err(StoreError::RunState {
            detail: Said::from("run ")
                .id(run_id)
                .text(format!(" is {status}, not {}", or_list(from))),
        });
    }
    if let Some(owner) = lease_owner
        && status == RunStatus::Running
        && lease.owner != owner
    {
        return Err(StoreError::RunLeased {
            run_id: Key::new(run_id),
            owner: lease.owner,
            expires_at: lease.expires_at,
        });
    }
    Ok((status, lease))
}

/// The end of `requireLease`, on either backend: the lease's stored expiry must be after `now`
/// (the judging clock's reading), else [`StoreError::LeaseLost`].
pub(crate) fn check_unexpired(
    run_id: &[u8],
    lease: &Lease,
    now: Timestamp,
) -> Result<(), StoreError> {
    if lease.expires_at <= now {
        return Err(StoreError::LeaseLost {
            detail: Said::from("run ").id(run_id).text(format!(
                ": the lease expired at {}",
                lease.expires_at.format_always()
            )),
        });
    }
    Ok(())
}
