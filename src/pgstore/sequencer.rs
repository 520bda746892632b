//! The chain without a global bottleneck (decision 0081): writers commit their events to
//! `event_inbox` without touching the chain head, and a sequencer moves them onto the chain in
//! batches, one transaction a batch. Only the sequencer locks the head, so writers' commits
//! overlap and PostgreSQL's group commit serves them; readers of `events` see an event once it
//! is chained.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::chain::{self, Chained};
use super::error::{PgCtx, PgError};
use super::stmts::Cached;
use super::{PgStore, PgUrl};

/// Events one sequencer transaction chains at most.
pub const BATCH: i64 = 1000;

/// How long an idle sequencer waits before it looks at the inbox again, at most.
const IDLE_MAX: Duration = Duration::from_millis(20);

impl PgStore {
    /// Commits one event to the inbox, in a transaction of its own; the sequencer chains it.
    /// Returns its inbox id.
    pub fn enqueue_event(
        &mut self,
        run_id: &str,
        step_id: &str,
        at: &str,
        kind: &str,
        payload: &str,
    ) -> Result<i64, PgError> {
        let e = chain::NewEvent::new(run_id, step_id, at, kind, payload);
        let steps = ("enqueue: begin", "enqueue: commit");
        self.in_tx(false, steps, |tx, url| chain::enqueue(tx, url, e))
    }

    /// One sequencer pass: chains up to `max` committed inbox events in one transaction.
    pub fn sequence(&mut self, max: i64) -> Result<Chained, PgError> {
        let steps = ("sequence: begin", "sequence: commit");
        self.in_tx(false, steps, |tx, url| chain::sequence(tx, url, max))
    }

    /// Chains every event committed to the inbox so far; returns how many.
    pub fn sequence_all(&mut self) -> Result<i64, PgError> {
        let mut total = 0;
        loop {
            // A pass may stop short of BATCH on its byte budget: only an empty one means done.
            let pass = self.sequence(BATCH)?;
            if pass.events == 0 {
                return Ok(total);
            }
            total += pass.events;
        }
    }

    /// Whether any event waits in the inbox (one plain read: no lock, nothing to commit).
    fn inbox_waits(&mut self) -> Result<bool, PgError> {
        Ok(self
            .client_mut()
            .query_one("SELECT EXISTS (SELECT 1 FROM event_inbox)", &[])
            .ctx(&self.url, "look at the inbox")?
            .get(0))
    }

    /// Whether this login may chain (move inbox rows onto the chain): the owner, or a login
    /// holding `countersign_sequencer`; a reviewer's or the runtime's alone may not.
    pub fn can_chain(&mut self) -> Result<bool, PgError> {
        Ok(self
            .client_mut()
            .query_one(
                "SELECT has_table_privilege('event_chain', 'UPDATE') \
                 AND has_table_privilege('event_inbox', 'DELETE') \
                 AND has_table_privilege('events', 'INSERT')",
                &[],
            )
            .ctx(&self.url, "may this login chain")?
            .get(0))
    }

    /// Chains every event committed to the inbox when this login may ([`Self::can_chain`]):
    /// how many, or `None` when it may not (its events wait for the runtime's sequencers).
    pub fn chain_if_allowed(&mut self) -> Result<Option<i64>, PgError> {
        if !self.can_chain()? {
            return Ok(None);
        }
        self.sequence_all().map(Some)
    }

    /// Events committed to the inbox and not chained yet.
    pub fn unchained(&mut self) -> Result<i64, PgError> {
        Ok(self
            .client_mut()
            .query_one("SELECT count(*) FROM event_inbox", &[])
            .ctx(&self.url, "count the inbox")?
            .get(0))
    }
}

/// Wakes a sequencer that waits out its idle back-off (up to 20 ms): a writer that has just
/// committed to the inbox and wants its events chained now (the driver's observers, decision
/// 0083 item 4) nudges it. Cheap to clone; nudging a stopped sequencer does nothing.
#[derive(Clone, Default)]
pub struct Nudge(Arc<(Mutex<bool>, Condvar)>);

impl std::fmt::Debug for Nudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Nudge")
    }
}

impl Nudge {
    /// Asks the sequencer to look at the inbox now.
    pub fn nudge(&self) {
        let (flag, cv) = &*self.0;
        *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
    }

    /// Sleeps up to `d`, less if nudged (a nudge since the last sleep ends it at once).
    fn sleep(&self, d: Duration) {
        let (flag, cv) = &*self.0;
        let mut g = flag.lock().unwrap_or_else(|p| p.into_inner());
        if !*g {
            g = match cv.wait_timeout(g, d) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        *g = false;
    }
}

/// A sequencer on a thread of its own with its own connection. Several may run, on one host
/// or many: they take turns on the chain head's lock.
pub struct Sequencer {
    db: String,
    stop: Arc<AtomicBool>,
    nudge: Nudge,
    thread: JoinHandle<Result<i64, PgError>>,
}

impl Sequencer {
    /// Connects (the database must be at this build's schema) and starts chaining; the first
    /// error stops it (`stop` returns that error).
    pub fn spawn(url: &PgUrl) -> Result<Sequencer, PgError> {
        Sequencer::start(url, false)
    }

    /// As [`Sequencer::spawn`], but an error does not stop it: it waits (up to a second),
    /// connects again and goes on, until stopped. What a runtime process runs beside its
    /// driver (decision 0083), whose events must not stay unchained after a dropped
    /// connection or a failover. `stop` returns the last error only if the final drain fails.
    pub fn spawn_retrying(url: &PgUrl) -> Result<Sequencer, PgError> {
        Sequencer::start(url, true)
    }

    fn start(url: &PgUrl, retry: bool) -> Result<Sequencer, PgError> {
        let store = PgStore::open_existing(url)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let nudge = Nudge::default();
        let woken = nudge.clone();
        let again = url.clone();
        let thread = std::thread::Builder::new()
            .name("pg-sequencer".into())
            .spawn(move || {
                if retry {
                    run_retrying(store, &again, &flag, &woken)
                } else {
                    let (mut store, mut total) = (store, 0);
                    run(&mut store, &flag, &woken, &mut total).map(|()| total)
                }
            })
            .map_err(|e| PgError::Unusable {
                db: url.to_string(),
                detail: format!("cannot start the sequencer's thread: {e}"),
            })?;
        Ok(Sequencer {
            db: url.to_string(),
            stop,
            nudge,
            thread,
        })
    }

    /// What wakes this sequencer out of its idle back-off (see [`Nudge`]).
    pub fn nudger(&self) -> Nudge {
        self.nudge.clone()
    }

    /// Stops after chaining what is committed by now; returns how many events it chained in
    /// all, or the error that stopped it.
    pub fn stop(self) -> Result<i64, PgError> {
        self.stop.store(true, Ordering::Release);
        self.nudge.nudge();
        match self.thread.join() {
            Ok(r) => r,
            Err(_) => Err(PgError::Unusable {
                db: self.db,
                detail: "the sequencer's thread panicked".into(),
            }),
        }
    }
}

/// [`run`] until stopped, whatever fails: after an error it waits (doubling from 50 ms up to
/// a second, in steps that notice a stop), reconnects and goes on.
fn run_retrying(
    store: PgStore,
    url: &PgUrl,
    stop: &AtomicBool,
    nudge: &Nudge,
) -> Result<i64, PgError> {
    let mut total = 0;
    let mut store = Some(store);
    let mut backoff = Duration::from_millis(50);
    loop {
        let s = match store.as_mut() {
            Some(s) => s,
            None => match PgStore::open_existing(url) {
                Ok(s) => store.insert(s),
                Err(e) => {
                    if stop.load(Ordering::Acquire) {
                        return Err(e);
                    }
                    pause(backoff, stop);
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            },
        };
        match run(s, stop, nudge, &mut total) {
            Ok(()) => return Ok(total),
            Err(e) => {
                if stop.load(Ordering::Acquire) {
                    return Err(e);
                }
                store = None;
                pause(backoff, stop);
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// Sleeps `d` in 10 ms steps, returning early once `stop` is set.
fn pause(d: Duration, stop: &AtomicBool) {
    let step = Duration::from_millis(10);
    let mut left = d;
    while !left.is_zero() && !stop.load(Ordering::Acquire) {
        let now = left.min(step);
        std::thread::sleep(now);
        left -= now;
    }
}

/// Chains batches while there is work; when the inbox is empty it waits, longer each idle
/// pass up to [`IDLE_MAX`], or until nudged. On stop it drains what is committed, then returns.
fn run(
    store: &mut PgStore,
    stop: &AtomicBool,
    nudge: &Nudge,
    total: &mut i64,
) -> Result<(), PgError> {
    let mut idle = Duration::from_micros(250);
    loop {
        if stop.load(Ordering::Acquire) {
            *total += store.sequence_all()?;
            return Ok(());
        }
        // An empty inbox is seen by a plain read, which takes no lock and commits nothing: a
        // pass would lock the head (a lock record in the WAL) and flush its commit for nothing.
        let events = if store.inbox_waits()? {
            store.sequence(BATCH)?.events
        } else {
            0
        };
        *total += events;
        if events == 0 {
            nudge.sleep(idle);
            idle = (idle * 2).min(IDLE_MAX);
        } else {
            idle = Duration::from_micros(250);
        }
    }
}
