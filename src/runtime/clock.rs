//! Clocks. The driver reads its configured clock (`Config::now`) for every time it records;
//! leases always use the wall clock (spec 7).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::types::Timestamp;

/// A source of "now".
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The wall clock.
pub fn wall() -> Clock {
    Arc::new(Timestamp::now)
}

/// A clock for tests: starts at `start` and moves on by `step_ns` at every reading, so the
/// number and order of readings show in what is recorded.
pub fn stepping(start: Timestamp, step_ns: i64) -> (Clock, Arc<AtomicI64>) {
    let offset = Arc::new(AtomicI64::new(0));
    let o = offset.clone();
    let clock: Clock = Arc::new(move || {
        let n = o.fetch_add(step_ns, Ordering::SeqCst);
        start.add_nanos(n)
    });
    (clock, offset)
}

/// A clock that reads `start` plus an offset the test moves with the returned handle.
pub fn manual(start: Timestamp) -> (Clock, Arc<AtomicI64>) {
    stepping(start, 0)
}

/// A way to wait. The model caller waits through it (a retry's backoff, an attempt's
/// deadline), so a test can see every wait it asks for and move a manual clock instead of
/// sleeping.
pub type Sleep = Arc<
    dyn Fn(std::time::Duration) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

/// Waiting on tokio's timer.
pub fn tokio_sleep() -> Sleep {
    Arc::new(|d| Box::pin(tokio::time::sleep(d)))
}
