//! What the driver's observers get on PostgreSQL (issue 19; decision 0083 item 4, amended):
//! each event the driver wrote, once a sequencer has chained it, with the seq and hash that
//! `events` holds for it, never one still in the inbox.
//!
//! A write places its events in their run's chain and, once committed and before its
//! connection's lock is let go, owes them to the observer: so what is owed is in the order
//! the driver's writes committed, which for one run is the chain's order. The driver nudges its own
//! sequencer (when it runs one), then reads the events back from `events` by their place in
//! their run's chain (`pgstore::observe`), waiting between reads for the sequencer's
//! notification (decision 0084) on a LISTEN connection of its own, opened at the first wait.
//! The write waits at most [`CHAINED_WAIT`]. If its events are not chained by then (no
//! sequencer runs, or it is down), the write goes on and hands nothing; what is owed is handed
//! on, in order, at a later write once chained, without waiting again until something owed has
//! been handed on, and at the driver's drop after its own sequencer drained the inbox. At most
//! [`OWED_MAX`] are kept owed (past that the oldest are dropped). A read that fails leaves the
//! events owed too. A row found at an event's place that is not the
//! event written (a row written around the run's lock) is not handed on, and neither is the
//! event. A write that finds the delivery lock held by a call in the observer does not wait:
//! its events are left to that holder, which hands them on after the call (an observer that
//! writes through the driver it observes would otherwise wait for itself).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

use super::Observer;
use super::db::OffTask;
use crate::pgstore::observe::{OwedEvents, Placed, same_event};
use crate::pgstore::{Listener, Nudge, PgStore};
use crate::runtime::store::StoreError;
use crate::runtime::types::Event;

/// How long a write on PostgreSQL waits for its events to be chained before it goes on with
/// them still owed to the observer (handed on later, once chained).
pub const CHAINED_WAIT: Duration = Duration::from_secs(2);

/// The most events kept owed (nothing chains them): past this the oldest are dropped, not
/// handed on, so that a driver whose events are never chained does not grow without bound.
pub const OWED_MAX: usize = 1 << 16;

/// The longest one wait for a notification lasts before the chain is read again anyway.
const RECHECK: Duration = Duration::from_millis(100);

/// The events a driver on PostgreSQL owes its observer.
pub(crate) struct Owed {
    /// Wakes the driver's own sequencer, if it runs one.
    nudge: Option<Nudge>,
    /// What the writes pushed, in commit order (a leaf lock: taken briefly, never while
    /// another lock is waited for, since a write pushes here holding its connection's lock).
    pushed: Arc<OwedEvents>,
    /// The delivery lock: held while reading back and handing on (it takes the connection's
    /// lock to read, never the other way round).
    state: Mutex<State>,
    /// The delivery lock's holder is in the observer's call: a write that finds the lock held
    /// then leaves its events to the holder instead of waiting, since the observer may be
    /// what made that write (it wrote through this driver), and would wait for it forever.
    in_observer: AtomicBool,
}

#[derive(Default)]
struct State {
    /// Written and committed, not yet handed on: in commit order, each with its place.
    owed: VecDeque<(Event, Placed)>,
    /// LISTENs for the sequencers' notifications (opened at the first wait).
    listener: Option<OffTask<Listener>>,
    /// The listener could not be opened during this delivery: poll instead.
    no_listener: bool,
    /// The last wait ran out with events still owed: the next writes do not wait until
    /// something owed is handed on.
    stalled: bool,
}

impl Owed {
    pub(crate) fn new(nudge: Option<Nudge>) -> Owed {
        Owed {
            nudge,
            pushed: Arc::default(),
            state: Mutex::new(State::default()),
            in_observer: AtomicBool::new(false),
        }
    }

    /// Where the driver's writes push what they owe (`RunDb::owing`).
    pub(crate) fn pushed(&self) -> Arc<OwedEvents> {
        self.pushed.clone()
    }

    /// Hands on what is owed and chained, in order, after a write pushed its events, waiting
    /// (bounded, see the module) for them to be chained.
    ///
    /// When the delivery lock is held by a call in the observer, this write's events (already
    /// pushed) are left to that holder, which takes what was pushed before it lets go: an
    /// observer that writes through the driver it observes gets that write's events after its
    /// call returns, instead of both waiting on each other.
    pub(crate) fn deliver(&self, store: &PgStore, o: &Observer) {
        // Held while handing on, so that one driver's events reach the observer in order.
        let mut st = match self.state.try_lock() {
            Ok(st) => st,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                if self.in_observer.load(Ordering::SeqCst) {
                    if let Some(n) = &self.nudge {
                        n.nudge();
                    }
                    return;
                }
                self.state.lock().unwrap_or_else(|p| p.into_inner())
            }
        };
        self.take_pushed(&mut st);
        if st.owed.is_empty() {
            return;
        }
        if let Some(n) = &self.nudge {
            n.nudge();
        }
        st.no_listener = false;
        let mut start = Instant::now();
        loop {
            match st.hand_on(store, o, &self.in_observer) {
                Ok(true) => st.stalled = false,
                Ok(false) => {}
                Err(_) => {
                    st.stalled = true;
                    return;
                }
            }
            // What writes left to this holder while it was in the observer: waited for as
            // long as this write's own events were.
            if self.take_pushed(&mut st) > 0 {
                start = Instant::now();
            }
            if st.owed.is_empty() {
                return;
            }
            let bound = if st.stalled {
                Duration::ZERO
            } else {
                CHAINED_WAIT
            };
            let left = bound.saturating_sub(start.elapsed());
            if left.is_zero() {
                st.stalled = true;
                return;
            }
            st.wait(store, left.min(RECHECK));
        }
    }

    /// Hands on what is owed and chained by now, without waiting (the driver's drop).
    pub(crate) fn flush(&self, store: &PgStore, o: &Observer) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.take_pushed(&mut st);
        let _ = st.hand_on(store, o, &self.in_observer);
    }

    /// Moves what the writes pushed behind what is owed, keeping at most [`OWED_MAX`].
    /// Returns how many it moved.
    fn take_pushed(&self, st: &mut State) -> usize {
        let mut pushed = self.pushed.lock().unwrap_or_else(|p| p.into_inner());
        let n = pushed.len();
        st.owed.extend(pushed.drain(..));
        drop(pushed);
        while st.owed.len() > OWED_MAX {
            st.owed.pop_front();
        }
        n
    }
}

impl State {
    /// Hands on, from the front, every owed event that is chained; true if any was taken off.
    /// `in_observer` is set around each call of the observer.
    fn hand_on(
        &mut self,
        store: &PgStore,
        o: &Observer,
        in_observer: &AtomicBool,
    ) -> Result<bool, StoreError> {
        let mut progressed = false;
        while let Some((_, first)) = self.owed.front() {
            let (run, pos) = (first.run_id.clone(), first.pos);
            // The owed events at the front that follow one another in one run: one read.
            let n = self
                .owed
                .iter()
                .zip(0i64..)
                .take_while(|((_, p), i)| p.run_id == run && p.pos == pos.saturating_add(*i))
                .count();
            let rows = store.chained_from(&run, pos, n as i64)?;
            let got = rows.len();
            for row in rows {
                let Some((mut e, _)) = self.owed.pop_front() else {
                    break;
                };
                progressed = true;
                if same_event(&row, &e) {
                    e.seq = row.seq;
                    e.hash = row.hash;
                    let _call = InCall::enter(in_observer);
                    super::hand_on(o, &e);
                }
            }
            if got < n {
                break;
            }
        }
        Ok(progressed)
    }

    /// Waits up to `d` for a sequencer's notification (or polls, without a listener).
    fn wait(&mut self, store: &PgStore, d: Duration) {
        if self.listener.is_none() && !self.no_listener {
            match Listener::open(store.url()) {
                // Opened after the last read: read again before waiting, so that a batch
                // chained in between is not waited for in vain.
                Ok(l) => self.listener = Some(OffTask::new(l)),
                Err(_) => self.no_listener = true,
            }
            return;
        }
        match self.listener.as_mut().and_then(OffTask::get_mut) {
            Some(l) => {
                if l.wait(d).is_err() {
                    self.listener = None;
                }
            }
            None => std::thread::sleep(d.min(Duration::from_millis(5))),
        }
    }
}

/// Marks a call of the observer; unmarked when dropped, even if the observer panics.
struct InCall<'a>(&'a AtomicBool);

impl<'a> InCall<'a> {
    fn enter(flag: &'a AtomicBool) -> InCall<'a> {
        flag.store(true, Ordering::SeqCst);
        InCall(flag)
    }
}

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}
