//! Leases (spec 7): who may drive a RUNNING run. Times are from the wall clock only. A
//! heartbeat thread renews the lease every TTL/3 on a connection of its own; losing it (0 rows
//! renewed) or letting it lapse stops the loop before its next tool call or model request.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{OptionalExtension, params};

use super::db::{self, Tx};
use crate::runtime::store::StoreError;
use crate::runtime::types::{RunStatus, Timestamp};

/// agentrt's `DefaultLeaseTTL`.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

pub(crate) fn ttl_ns(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX)
}

/// The expiry a write stamps now.
pub(crate) fn expiry(ttl: Duration) -> Timestamp {
    Timestamp::now().add_nanos(ttl_ns(ttl))
}

struct State {
    run_id: String,
    owner: String,
    lost: AtomicBool,
    /// Unix ns of the last expiry written.
    expires: AtomicI64,
}

/// A held lease and its heartbeat. Dropping it stops the heartbeat (also on panic).
pub struct Lease {
    state: Arc<State>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Lease {
    /// Starts the heartbeat for a lease just written with `expires_at`.
    pub fn hold(
        path: PathBuf,
        run_id: &str,
        owner: &str,
        ttl: Duration,
        expires_at: Timestamp,
    ) -> Lease {
        let state = Arc::new(State {
            run_id: run_id.to_string(),
            owner: owner.to_string(),
            lost: AtomicBool::new(false),
            expires: AtomicI64::new(clamp(expires_at.unix_nanos())),
        });
        let (tx, rx) = mpsc::channel::<()>();
        let st = state.clone();
        let every = (ttl / 3).max(Duration::from_millis(1));
        let thread = std::thread::Builder::new()
            .name("agentrt-lease".into())
            .spawn(move || heartbeat(path, st, ttl, every, rx))
            .ok();
        Lease {
            state,
            stop: Some(tx),
            thread,
        }
    }

    /// Not lost and the wall clock is before the last expiry written.
    pub fn ok(&self) -> bool {
        !self.state.lost.load(Ordering::SeqCst)
            && clamp(Timestamp::now().unix_nanos()) < self.state.expires.load(Ordering::SeqCst)
    }

    pub fn owner(&self) -> &str {
        &self.state.owner
    }

    /// Records an expiry the loop itself wrote (a move to RUNNING).
    pub fn written(&self, expires_at: Timestamp) {
        self.state
            .expires
            .store(clamp(expires_at.unix_nanos()), Ordering::SeqCst);
    }

    pub fn mark_lost(&self) {
        self.state.lost.store(true, Ordering::SeqCst);
    }

    pub fn lost_error(&self) -> StoreError {
        StoreError::LeaseLost {
            detail: format!("run {}", self.state.run_id),
        }
    }

    /// Stops the heartbeat and waits for it.
    pub fn stop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop();
    }
}

fn clamp(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn heartbeat(path: PathBuf, st: Arc<State>, ttl: Duration, every: Duration, rx: mpsc::Receiver<()>) {
    let mut conn = None;
    loop {
        match rx.recv_timeout(every) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => return, // stopped
        }
        if st.lost.load(Ordering::SeqCst) {
            return;
        }
        if conn.is_none() {
            conn = db::connect(&path).ok();
        }
        let Some(c) = conn.as_ref() else { continue };
        let until = expiry(ttl);
        match c.execute(
            "UPDATE runs SET lease_expires_at = ? WHERE id = ? AND lease_owner = ?",
            params![until.to_rfc3339(), st.run_id, st.owner],
        ) {
            Ok(0) => {
                st.lost.store(true, Ordering::SeqCst);
                return;
            }
            Ok(_) => st.expires.store(clamp(until.unix_nanos()), Ordering::SeqCst),
            Err(_) => {} // retried next tick
        }
    }
}

/// Inside a write that starts a side effect: the run is RUNNING, leased by `owner`, and the
/// stored expiry is after the wall clock now.
pub(crate) fn require_lease(tx: &Tx<'_>, run_id: &str, owner: &str) -> Result<(), StoreError> {
    tx.require_status(run_id, &[RunStatus::Running], Some(owner))?;
    let exp: Option<String> = tx
        .conn()
        .query_row(
            "SELECT lease_expires_at FROM runs WHERE id = ?",
            [run_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| StoreError::sqlite("read lease", e))?;
    let exp = exp.unwrap_or_default();
    let t = Timestamp::parse(&exp).unwrap_or_default();
    if t <= Timestamp::now() {
        return Err(StoreError::LeaseLost {
            detail: format!("run {run_id}: the lease expired at {exp}"),
        });
    }
    Ok(())
}

/// Releases a lease this owner still holds (no event).
pub(crate) fn release(store: &db::Store, run_id: &str, owner: &str) {
    let _ = store.write(|tx| -> Result<(), StoreError> {
        tx.conn()
            .execute(
                "UPDATE runs SET lease_owner = '', lease_expires_at = '' WHERE id = ? AND lease_owner = ?",
                params![run_id, owner],
            )
            .map_err(|e| StoreError::sqlite("release lease", e))?;
        Ok(())
    });
}
