//! The event chain (spec 1.5, 5.3) and the approval hashes (spec 4.2) checked over rows as
//! they stream past, whichever database they come from; PostgreSQL's verification and the
//! naive append (the head row locked until commit).

use super::PgUrl;
use super::error::{PgCtx, PgError};
use super::stmts::Cached;
use crate::runtime::json::event_hash;
pub use crate::runtime::store::ApprovalCheck;
use crate::runtime::store::{ChainBreak, ChainReport, below_one, cut_hash, event_gap};

/// Events per verification query.
const PAGE: i64 = 256;

/// One stored event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    pub seq: i64,
    pub run_id: String,
    pub step_id: String,
    pub at: String,
    pub kind: String,
    pub payload: String,
    pub hash: String,
}

/// An event's columns as a writer hands them, before it has a seq and a hash.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewEvent<'a> {
    pub run_id: &'a str,
    pub step_id: &'a str,
    pub at: &'a str,
    pub kind: &'a str,
    pub payload: &'a str,
}

impl<'a> NewEvent<'a> {
    pub(crate) fn new(
        run_id: &'a str,
        step_id: &'a str,
        at: &'a str,
        kind: &'a str,
        payload: &'a str,
    ) -> Self {
        NewEvent {
            run_id,
            step_id,
            at,
            kind,
            payload,
        }
    }
}

/// The chain checked one event at a time, in seq order; it stops at the first break.
#[derive(Debug, Clone, Default)]
pub struct ChainCheck {
    prev: String,
    last: Option<i64>,
    report: ChainReport,
}

impl ChainCheck {
    /// A check of `from..=to`; `prev` is the stored hash of the event before `from` (`""`
    /// from the start) and `last` its seq.
    pub fn new(from: i64, to: i64, prev: String, last: Option<i64>) -> ChainCheck {
        ChainCheck {
            prev,
            last,
            report: ChainReport {
                from,
                to,
                ..ChainReport::default()
            },
        }
    }

    /// Checks the next event; false once the chain is broken (at this event or before).
    pub fn push(&mut self, e: &EventRow) -> bool {
        if self.report.chain_break.is_some() {
            return false;
        }
        if let Some(detail) = event_gap(self.report.from, self.last, e.seq) {
            self.fail(e.seq, String::new(), String::new(), detail);
            return false;
        }
        let want = event_hash(
            &self.prev, e.seq, &e.run_id, &e.step_id, &e.at, &e.kind, &e.payload,
        );
        self.report.checked += 1;
        self.report.hash = cut_hash(&e.hash);
        self.last = Some(e.seq);
        if want != e.hash {
            let detail = format!("event {} does not hash to its stored hash", e.seq);
            self.fail(e.seq, want, cut_hash(&e.hash), detail);
            return false;
        }
        self.prev = e.hash.clone();
        true
    }

    /// After the last event: the events must reach `head`, the highest seq the database
    /// records as given (a cut tail, such as a deleted last run, is a break).
    pub fn reaches(&mut self, head: i64) {
        let last = self.last.unwrap_or(0);
        // `to` below 1 is a check to the end (a copy's): it covers the head too (found from
        // outside: a copy out of PostgreSQL with its last event deleted went through, and the
        // SQLite file it wrote verified).
        let covers = self.report.to < 1 || self.report.to >= head;
        if self.report.chain_break.is_none() && covers && last < head {
            let detail = format!(
                "the events end at seq {last} but the chain head records seq {head}: events are missing"
            );
            self.fail(last + 1, String::new(), String::new(), detail);
        }
    }

    /// After the last event: no stored event may lie past `head`, the highest seq the database
    /// records as given (a head moved back would hide them from a check that stops at it).
    pub fn within(&mut self, highest: i64, head: i64) {
        if self.report.chain_break.is_none() && highest > head {
            let detail = format!(
                "the events go on to seq {highest} but the chain head records seq {head}: the head was moved back"
            );
            self.fail(head.saturating_add(1), String::new(), String::new(), detail);
        }
    }

    fn fail(&mut self, seq: i64, expected: String, found: String, detail: String) {
        self.report.chain_break = Some(ChainBreak {
            seq,
            expected,
            found,
            detail,
        });
    }

    /// The stored hash of the last event checked.
    pub fn last_hash(&self) -> &str {
        &self.prev
    }

    /// The seq of the last event checked.
    pub fn last_seq(&self) -> i64 {
        self.last.unwrap_or(0)
    }

    /// What was checked.
    pub fn report(&self) -> &ChainReport {
        &self.report
    }

    /// What was checked, owned.
    pub fn into_report(self) -> ChainReport {
        self.report
    }
}

/// Reads events `cursor..=to` a page at a time into `check`.
pub(crate) fn check_events(
    tx: &mut impl Cached,
    url: &PgUrl,
    check: &mut ChainCheck,
    mut cursor: i64,
    to: i64,
) -> Result<(), PgError> {
    let page = "SELECT seq, run_id, step_id, at, type, payload_json, hash FROM events \
                WHERE seq >= $1 AND seq <= $2 ORDER BY seq LIMIT $3";
    loop {
        let rows = tx
            .query(page, &[&cursor, &to, &PAGE])
            .ctx(url, "verify events")?;
        if rows.is_empty() {
            return Ok(());
        }
        for r in &rows {
            let e = EventRow {
                seq: r.get(0),
                run_id: r.get(1),
                step_id: r.get(2),
                at: r.get(3),
                kind: r.get(4),
                payload: r.get(5),
                hash: r.get(6),
            };
            cursor = e.seq.saturating_add(1);
            if !check.push(&e) || e.seq == i64::MAX {
                return Ok(());
            }
        }
    }
}

/// The chain over `from..=to` (from < 1 = 1, to < 1 = the recorded head).
pub(crate) fn verify(
    tx: &mut impl Cached,
    url: &PgUrl,
    from: i64,
    to: i64,
) -> Result<ChainReport, PgError> {
    let from = from.max(1);
    let head: i64 = tx
        .query_one("SELECT seq FROM event_chain", &[])
        .ctx(url, "chain head")?
        .get(0);
    let to = if to < 1 { head } else { to };
    let (prev, last) = if from > 1 {
        match tx
            .query_opt(
                "SELECT seq, hash FROM events WHERE seq < $1 ORDER BY seq DESC LIMIT 1",
                &[&from],
            )
            .ctx(url, "verify events")?
        {
            Some(r) => (r.get::<_, String>(1), Some(r.get::<_, i64>(0))),
            None => (String::new(), None),
        }
    } else {
        (String::new(), None)
    };
    let mut check = ChainCheck::new(from, to, prev, last);
    // The table's CHECK (seq > 0) keeps such an event out unless someone dropped it.
    if let Some(r) = tx
        .query_opt(
            "SELECT seq FROM events WHERE seq < 1 ORDER BY seq LIMIT 1",
            &[],
        )
        .ctx(url, "verify events")?
    {
        check.report.chain_break = Some(below_one(r.get(0)));
        return Ok(check.into_report());
    }
    check_events(tx, url, &mut check, from, to)?;
    check.reaches(head.min(to));
    if to >= head {
        let highest: i64 = tx
            .query_one("SELECT COALESCE(MAX(seq), 0)::bigint FROM events", &[])
            .ctx(url, "verify events")?
            .get(0);
        check.within(highest, head);
    }
    Ok(check.into_report())
}

/// Every approval's hash, in insertion order.
pub(crate) fn verify_approvals(
    tx: &mut impl Cached,
    url: &PgUrl,
) -> Result<ApprovalCheck, PgError> {
    let mut check = ApprovalCheck::default();
    let page = "SELECT ord, id, kind, capability_json, presentation_json, request_json, hash \
                FROM approvals WHERE ord > $1 ORDER BY ord LIMIT $2";
    let mut cursor = i64::MIN;
    loop {
        let rows = tx
            .query(page, &[&cursor, &PAGE])
            .ctx(url, "verify approvals")?;
        if rows.is_empty() {
            break;
        }
        for r in &rows {
            cursor = r.get(0);
            check.push(r.get(1), r.get(2), r.get(3), r.get(4), r.get(5), r.get(6));
        }
    }
    // Each status against its last decision: the chained ones in seq order, then those
    // committed to the inbox and not chained yet.
    let mut decisions = crate::runtime::store::Decisions::default();
    let rows = tx
        .query(
            "SELECT run_id, step_id, at, payload_json FROM ( \
               SELECT 0 AS src, seq AS k, run_id, step_id, at, payload_json FROM events \
               WHERE type = 'approval.decided' \
               UNION ALL \
               SELECT 1, id, run_id, step_id, at, payload_json FROM event_inbox \
               WHERE type = 'approval.decided') AS d ORDER BY src, k",
            &[],
        )
        .ctx(url, "verify decisions")?;
    for r in &rows {
        let f: [String; 4] = std::array::from_fn(|i| r.get(i));
        decisions.push(
            f[0].as_bytes(),
            f[1].as_bytes(),
            f[2].as_bytes(),
            f[3].as_bytes(),
        );
    }
    let rows = tx
        .query(
            "SELECT run_id, id, step_id, status, decided_by, note, decided_at FROM approvals \
             ORDER BY ord",
            &[],
        )
        .ctx(url, "verify decisions")?;
    for r in &rows {
        let f: [Vec<u8>; 7] = std::array::from_fn(|i| r.get::<_, String>(i).into_bytes());
        check.push_decision(&decisions, &crate::runtime::store::ApprovalRow::of(&f));
    }
    Ok(check)
}

/// Appends one event after the head, which stays locked until the caller commits.
pub(crate) fn append(
    tx: &mut impl Cached,
    url: &PgUrl,
    e: NewEvent<'_>,
) -> Result<(i64, String), PgError> {
    let NewEvent {
        run_id,
        step_id,
        at,
        kind,
        payload,
    } = e;
    let head = tx
        .query_one("SELECT seq, hash FROM event_chain FOR UPDATE", &[])
        .ctx(url, "append: chain head")?;
    let (seq, prev): (i64, String) = (head.get::<_, i64>(0) + 1, head.get(1));
    let hash = event_hash(&prev, seq, run_id, step_id, at, kind, payload);
    tx.execute(
        "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[&seq, &run_id, &step_id, &at, &kind, &payload, &hash],
    )
    .ctx(url, "append: event")?;
    tx.execute("UPDATE event_chain SET seq = $1, hash = $2", &[&seq, &hash])
        .ctx(url, "append: chain head")?;
    Ok((seq, hash))
}

/// Commits an event to the inbox without touching the chain head (decision 0081): the
/// writer's transaction takes no lock another writer waits on. Returns the inbox id.
pub(crate) fn enqueue(tx: &mut impl Cached, url: &PgUrl, e: NewEvent<'_>) -> Result<i64, PgError> {
    Ok(tx
        .query_one(
            "INSERT INTO event_inbox (run_id, step_id, at, type, payload_json) \
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
            &[&e.run_id, &e.step_id, &e.at, &e.kind, &e.payload],
        )
        .ctx(url, "enqueue: event")?
        .get(0))
}

/// The bytes of inbox rows one sequencer pass reads at most, beyond its first row.
pub const BATCH_BYTES: i64 = 16 << 20;

/// What one pass of the sequencer chained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Chained {
    /// Events moved from the inbox onto the chain.
    pub events: i64,
    /// The chain head's seq afterwards.
    pub head: i64,
}

/// Chains up to `max` committed inbox events (and about [`BATCH_BYTES`]) after the head, in inbox-id order, in the
/// caller's transaction: the head row is locked (so sequencers take turns), the events are
/// taken out of the inbox, given the next seqs and their hashes, inserted into `events` in
/// one statement, and the head moves to the last. Rolled back, nothing is lost: the inbox
/// rows come back.
pub(crate) fn sequence(tx: &mut impl Cached, url: &PgUrl, max: i64) -> Result<Chained, PgError> {
    let head = tx
        .query_one("SELECT seq, hash FROM event_chain FOR UPDATE", &[])
        .ctx(url, "sequence: chain head")?;
    let (mut seq, mut prev): (i64, String) = (head.get(0), head.get(1));
    // Read after the head's lock, so this snapshot sees what an earlier sequencer took out.
    // The lowest ids, at most `max`, and only while the bytes taken before a row stay under
    // BATCH_BYTES (the first row is always taken): inbox rows are written by whoever may
    // insert there, and a batch of huge payloads must not be read into memory at once.
    let take = "DELETE FROM event_inbox WHERE id IN \
             (SELECT id FROM \
                (SELECT id, sum(size) OVER (ORDER BY id) - size AS before FROM \
                   (SELECT id, octet_length(run_id) + octet_length(step_id) + octet_length(at) \
                           + octet_length(type) + octet_length(payload_json) AS size \
                    FROM event_inbox ORDER BY id LIMIT $1) AS first \
                ) AS sized \
              WHERE before < $2) \
             RETURNING id, run_id, step_id, at, type, payload_json";
    let mut rows = tx
        .query(take, &[&max.max(1), &BATCH_BYTES])
        .ctx(url, "sequence: take")?;
    if rows.is_empty() {
        return Ok(Chained {
            events: 0,
            head: seq,
        });
    }
    rows.sort_by_key(|r| r.get::<_, i64>(0));
    let n = rows.len();
    let mut cols: [Vec<String>; 6] = Default::default();
    let mut seqs = Vec::with_capacity(n);
    for r in &rows {
        let (run_id, step_id, at, kind, payload): (String, String, String, String, String) =
            (r.get(1), r.get(2), r.get(3), r.get(4), r.get(5));
        seq = seq.checked_add(1).ok_or_else(|| PgError::Unusable {
            db: url.to_string(),
            detail: "the event chain's seq is at its largest value".into(),
        })?;
        let hash = event_hash(&prev, seq, &run_id, &step_id, &at, &kind, &payload);
        seqs.push(seq);
        for (c, v) in cols
            .iter_mut()
            .zip([run_id, step_id, at, kind, payload, hash.clone()])
        {
            c.push(v);
        }
        prev = hash;
    }
    let put = "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) \
             SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], \
             $5::text[], $6::text[], $7::text[])";
    let [a, b, c, d, e, f] = &cols;
    tx.execute(put, &[&seqs, a, b, c, d, e, f])
        .ctx(url, "sequence: events")?;
    tx.execute("UPDATE event_chain SET seq = $1, hash = $2", &[&seq, &prev])
        .ctx(url, "sequence: chain head")?;
    // One notification for the batch, delivered when (and only if) it commits (decision 0084).
    super::notify::chained(tx, url, seq)?;
    Ok(Chained {
        events: n as i64,
        head: seq,
    })
}
