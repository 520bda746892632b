//! Leases (spec 7): who may drive a RUNNING run. Times are from the process's lease clock
//! (the wall clock unless configured); on PostgreSQL the server's clock judges the stored
//! expiry (decision 0083) and the process's clock only times its own renewals. A heartbeat
//! thread renews the lease every TTL/3 on a connection of its own; losing it (0 rows renewed)
//! or letting it lapse stops the loop before its next tool call or model request.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use super::db::{LeaseConn, RunDb};
use crate::runtime::clock::Clock;
use crate::runtime::store::StoreError;
use crate::runtime::types::{Said, Timestamp};

/// agentrt's `DefaultLeaseTTL`.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

pub(crate) fn ttl_ns(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX)
}

struct State {
    /// The process's lease clock.
    clock: Clock,
    run_id: String,
    owner: String,
    lost: AtomicBool,
    /// Unix ns of the last expiry written.
    expires: AtomicI64,
}

/// A read-only probe of a held lease (for the model handle).
#[derive(Clone)]
pub struct LeaseProbe(Arc<State>);

impl LeaseProbe {
    /// Not lost and not lapsed.
    pub fn ok(&self) -> bool {
        !self.0.lost.load(Ordering::SeqCst)
            && clamp((self.0.clock)().unix_nanos()) < self.0.expires.load(Ordering::SeqCst)
    }
}

/// A held lease and its heartbeat. Dropping it stops the heartbeat (also on panic).
pub struct Lease {
    state: Arc<State>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Lease {
    /// Starts the heartbeat for a lease just written; `expires_at` is its expiry by the
    /// process's lease `clock` (on PostgreSQL the stored one is the server's).
    pub(crate) fn hold(
        store: &RunDb,
        run_id: &str,
        owner: &str,
        ttl: Duration,
        expires_at: Timestamp,
        clock: Clock,
    ) -> Lease {
        let state = Arc::new(State {
            clock,
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
            .spawn({
                let handle = store.lease_conn().ok();
                move || heartbeat(handle, st, ttl, every, rx)
            })
            .ok();
        Lease {
            state,
            stop: Some(tx),
            thread,
        }
    }

    /// A lease not (yet) held: `ok()` is false and there is no heartbeat.
    pub fn inactive(run_id: &str, owner: &str) -> Lease {
        Lease {
            state: Arc::new(State {
                clock: crate::runtime::clock::wall(),
                run_id: run_id.to_string(),
                owner: owner.to_string(),
                lost: AtomicBool::new(false),
                expires: AtomicI64::new(i64::MIN),
            }),
            stop: None,
            thread: None,
        }
    }

    /// Not lost and the wall clock is before the last expiry written.
    pub fn ok(&self) -> bool {
        !self.state.lost.load(Ordering::SeqCst)
            && clamp((self.state.clock)().unix_nanos()) < self.state.expires.load(Ordering::SeqCst)
    }

    /// A probe that shares this lease's state, for code that must check it without owning it.
    pub fn probe(&self) -> LeaseProbe {
        LeaseProbe(self.state.clone())
    }

    /// The owner name written in `runs.lease_owner`.
    pub fn owner(&self) -> &str {
        &self.state.owner
    }

    pub(crate) fn mark_lost(&self) {
        self.state.lost.store(true, Ordering::SeqCst);
    }

    /// agentrt's `ErrLeaseLost` for this run, to return when [`Lease::ok`] is false.
    pub fn lost_error(&self) -> StoreError {
        StoreError::LeaseLost {
            detail: Said::from("run ").id(&self.state.run_id),
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

fn heartbeat(
    handle: Option<LeaseConn>,
    st: Arc<State>,
    ttl: Duration,
    every: Duration,
    rx: mpsc::Receiver<()>,
) {
    loop {
        match rx.recv_timeout(every) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => return, // stopped
        }
        if st.lost.load(Ordering::SeqCst) {
            return;
        }
        let Some(h) = handle.as_ref() else { continue };
        let until = (st.clock)().add_nanos(ttl_ns(ttl));
        match h.renew(&st.run_id, &st.owner, until, ttl) {
            Ok(false) => {
                st.lost.store(true, Ordering::SeqCst);
                return;
            }
            Ok(true) => st
                .expires
                .store(clamp(until.unix_nanos()), Ordering::SeqCst),
            Err(_) => {} // retried next tick
        }
    }
}

/// Releases a lease this owner still holds (no event).
pub(crate) fn release(store: &RunDb, run_id: &str, owner: &str) {
    if let Ok(h) = store.lease_conn() {
        let _ = h.release(run_id, owner);
    }
}
