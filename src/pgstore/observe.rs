//! A writer's events read back once chained (issue 19; decision 0083 item 4, amended): the
//! driver's observers on PostgreSQL get each event with the seq and hash `events` holds for
//! it, never one still in the inbox.
//!
//! `events` does not keep the inbox id an event had, so an event is found by its place in its
//! run's chain. Every transaction that writes a run's events first locks the run's row
//! (decision 0082: the driver's and the operator's transitions alike; placing takes it again
//! before it counts), so one run's
//! transactions commit one after another; each one's inbox ids are given after the one before
//! committed, so they are higher, and a sequencer chains committed rows in id order. A run's
//! events therefore reach the chain in the order its transactions committed, each
//! transaction's events together and in the order written. So an event's place is the number
//! of the run's events committed before it (chained, or still in the inbox: counted in one
//! statement, so one snapshot, which a sequencer's pass moving rows between the two tables
//! cannot split) plus its rank in its transaction. Read back, each row is compared with what
//! was written (step, time, kind, payload) before it is handed on: a row written around the
//! run's lock (raw SQL) shifts the places, and is then found out instead of misattributed.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::stmts::Cached;

use super::error::PgCtx;
use super::{PgStore, PgUrl};
use crate::runtime::store::StoreError;
use crate::runtime::types::Event;

/// Where one enqueued event will sit in its run's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placed {
    /// The run.
    pub run_id: String,
    /// How many of the run's events precede it in the chain (0: its first).
    pub pos: i64,
}

/// Events committed and not yet handed to the observer, each with its place, in the order
/// their transactions committed on one connection (pushed before its lock is let go).
pub(crate) type OwedEvents = Mutex<VecDeque<(Event, Placed)>>;

/// Pushes a committed transaction's events, each with its place, to `owed`.
pub(crate) fn owe(owed: &OwedEvents, events: Vec<Event>, placed: Vec<Placed>) {
    owed.lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend(events.into_iter().zip(placed));
}

/// The places a write transaction's events will take, as it enqueues them.
#[derive(Debug, Default)]
pub(crate) struct Placing {
    /// One per event enqueued, in order.
    pub placed: Vec<Placed>,
}

impl Placing {
    /// Records the place of the event about to be enqueued for `run`. The transaction's first
    /// event of a run counts the run's events committed so far; the next ones follow it.
    pub(super) fn place(
        &mut self,
        tx: &mut impl Cached,
        url: &PgUrl,
        run: &str,
    ) -> Result<(), StoreError> {
        let pos = match self.placed.iter().rev().find(|p| p.run_id == run) {
            Some(p) => p.pos.saturating_add(1),
            None => {
                // The run's row lock first (a no-op when this transaction holds it, as every
                // transition's does), so that no other writer of the run commits between the
                // count and this commit; then the count, in a statement of its own whose
                // snapshot is taken after the lock (a locking read's subqueries would keep the
                // snapshot from before a wait for the lock).
                tx.execute(
                    "SELECT 1 FROM runs WHERE id = $1 FOR NO KEY UPDATE",
                    &[&run],
                )
                .ctx(url, "place an event in its run's chain")?;
                count_run_events(tx, url, run)?
            }
        };
        self.placed.push(Placed {
            run_id: run.to_string(),
            pos,
        });
        Ok(())
    }
}

/// The run's events committed so far (chained or in the inbox), in one snapshot.
fn count_run_events(tx: &mut impl Cached, url: &PgUrl, run: &str) -> Result<i64, StoreError> {
    tx.query_one(
        "SELECT (SELECT count(*) FROM events WHERE run_id = $1) \
         + (SELECT count(*) FROM event_inbox WHERE run_id = $1)",
        &[&run],
    )
    .ctx(url, "place an event in its run's chain")?
    .try_get::<_, i64>(0)
    .map_err(|e| StoreError::Backend(format!("{url}: an event's place: {e}")))
}

/// Whether a chained row is the event that was written (all but its seq and hash).
pub(crate) fn same_event(chained: &Event, written: &Event) -> bool {
    chained.run_id == written.run_id
        && chained.step_id == written.step_id
        && chained.at_text == written.at_text
        && chained.kind == written.kind
        && chained.payload == written.payload
}

impl PgStore {
    /// The run's chained events from place `pos` (0: its first), at most `n`, in seq order:
    /// fewer when the rest are not chained yet. `at` is left unparsed (the zero time): the
    /// caller compares `at_text` with what it wrote and keeps its own.
    pub(crate) fn chained_from(
        &self,
        run_id: &str,
        pos: i64,
        n: i64,
    ) -> Result<Vec<Event>, StoreError> {
        let rows = self
            .lock()
            .query(
                "SELECT seq, step_id, at, type, payload_json, hash FROM events \
                 WHERE run_id = $1 ORDER BY seq OFFSET $2 LIMIT $3",
                &[&run_id, &pos.max(0), &n.max(0)],
            )
            .ctx(&self.url, "read chained events")?;
        let text = |r: &postgres::Row, i: usize| r.try_get::<_, String>(i).unwrap_or_default();
        Ok(rows
            .iter()
            .map(|r| Event {
                seq: r.try_get(0).unwrap_or(0),
                run_id: run_id.to_string(),
                step_id: text(r, 1),
                at_text: text(r, 2),
                kind: text(r, 3),
                payload: text(r, 4),
                hash: text(r, 5),
                ..Event::default()
            })
            .collect())
    }
}
