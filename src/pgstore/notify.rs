//! Live by LISTEN/NOTIFY (issue 19, docs/decisions/0084): the sequencer sends one notification
//! per chained batch, in the batch's own transaction (PostgreSQL delivers it at the commit, and
//! only if it commits), and a reader that wants to know when something changed LISTENs on a
//! connection of its own. Writers never NOTIFY: PostgreSQL serialises the commits of
//! notifying transactions on one global lock (decision 0081), which would put back the
//! bottleneck the inbox removed. Every state change in this runtime appends an event, so a
//! change is chained, and so notified, by the pass that chains its events.

use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use super::error::{PgCtx, PgError};
use super::{PgUrl, connect};

/// The channel the sequencer notifies on; its payload is the chain head's seq after the batch.
pub const CHANNEL: &str = "countersign_events";

/// Queues the notification of a chained batch in the sequencer's transaction.
pub(crate) fn chained(
    tx: &mut impl super::stmts::Cached,
    url: &PgUrl,
    head: i64,
) -> Result<(), PgError> {
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &head.to_string()])
        .ctx(url, "sequence: notify")?;
    Ok(())
}

/// A connection that LISTENs on [`CHANNEL`]: a change count that moves when a batch is
/// chained. A connection lost is made again, and the count moves (what was notified while
/// it was gone is not known).
pub struct Listener {
    client: postgres::Client,
    url: PgUrl,
    seen: i64,
    /// The last seq a notification named.
    head: i64,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Listener({}, seen {})", self.url, self.seen)
    }
}

fn listen(url: &PgUrl) -> Result<postgres::Client, PgError> {
    let mut client = connect(url)?;
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .ctx(url, "listen")?;
    Ok(client)
}

impl Listener {
    /// Connects and LISTENs.
    pub fn open(url: &PgUrl) -> Result<Listener, PgError> {
        Ok(Listener {
            client: listen(url)?,
            url: url.clone(),
            seen: 0,
            head: 0,
        })
    }

    /// How many notifications (and reconnections) so far: takes those that have arrived,
    /// without waiting.
    pub fn version(&mut self) -> Result<i64, PgError> {
        // Waited for, briefly: the client's non-blocking read never turns its runtime's I/O
        // driver, so it would not see what arrived on the socket since the last wait.
        self.take(Some(Duration::from_millis(1)))?;
        Ok(self.seen)
    }

    /// Waits up to `timeout` for a notification; true when one (or more) arrived.
    pub fn wait(&mut self, timeout: Duration) -> Result<bool, PgError> {
        let before = self.seen;
        self.take(Some(timeout))?;
        Ok(self.seen != before)
    }

    /// The chain head the last notification named (0 before any).
    pub fn head(&self) -> i64 {
        self.head
    }

    fn take(&mut self, timeout: Option<Duration>) -> Result<(), PgError> {
        match self.drain(timeout) {
            Ok(()) => Ok(()),
            Err(_) if self.client.is_closed() => {
                self.client = listen(&self.url)?;
                self.seen += 1;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn drain(&mut self, timeout: Option<Duration>) -> Result<(), PgError> {
        let url = self.url.clone();
        let mut n = self.client.notifications();
        let mut got = Vec::new();
        match timeout {
            // The first one waited for, then whatever else has arrived.
            Some(t) => {
                let first = n.timeout_iter(t).next().ctx(&url, "listen")?;
                if let Some(m) = first {
                    got.push(m);
                    let mut rest = n.iter();
                    while let Some(m) = rest.next().ctx(&url, "listen")? {
                        got.push(m);
                    }
                }
            }
            None => {
                let mut it = n.iter();
                while let Some(m) = it.next().ctx(&url, "listen")? {
                    got.push(m);
                }
            }
        }
        for m in got {
            self.seen += 1;
            if let Ok(h) = m.payload().parse::<i64>() {
                self.head = self.head.max(h);
            }
        }
        Ok(())
    }
}
