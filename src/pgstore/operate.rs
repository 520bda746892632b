//! The operator's store on PostgreSQL (docs/decisions/0082): `PgStore` implements
//! [`RunStore`] and its transaction [`RunTx`], so approve, reject, deny, expire and cancel run
//! the same code as on SQLite.
//!
//! One decision is one READ COMMITTED transaction. Its first read of the run locks the run's
//! row (`SELECT … FOR NO KEY UPDATE`, the lock an `UPDATE` of the row takes) until the commit:
//! that is SQLite's write lock, for one run. A second decision on the same run waits there and
//! then reads what the first committed, so it is refused with the state it found; decisions on
//! other runs do not wait. Every change is still a compare-and-set (`WHERE status = … AND hash
//! = …`), which READ COMMITTED re-evaluates on the latest row version. Events go to the inbox
//! through `chain::enqueue` (decision 0081) in the same transaction; a sequencer chains them.
//! Rows decode through the same functions as SQLite's rows, from the same stored text.

use std::collections::BTreeMap;

use postgres::IsolationLevel;
use postgres::types::{ToSql, Type};
use rusqlite::types::Value;

use super::chain;
use super::error::{PgError, detail};
use super::stmts::{Cached, Tx};
use super::{PgStore, PgUrl};
use crate::runtime::store::ProxyCall;
use crate::runtime::store::{
    APPROVAL_COLUMNS, ApprovalDecision, Failing, InCrate, NewApproval, NewModelCall, NewRun, Page,
    RUN_COLUMNS, RunStore, RunTx, STEP_COLUMNS, StepFailure, StepUpdate, StoreError, Transition,
    approval_from_values, check_page, event_payload, run_from_values, sealed, step_from_values,
    store_reads, tx_writes,
};
use crate::runtime::store::{Charge, KeyPage};
use crate::runtime::types::Key;
use crate::runtime::types::{Approval, Event, Lease, Run, Said, Step, StepStatus, Timestamp};
use std::time::Duration;

/// A write transaction on PostgreSQL: the operator's [`RunTx`].
pub struct PgTx<'c> {
    pub(super) tx: Tx<'c>,
    pub(super) url: PgUrl,
    pub(super) events: Vec<Event>,
    /// Events are appended after the locked chain head, not enqueued
    /// ([`PgStore::set_naive_chain`], the bench's baseline).
    pub(super) naive: bool,
    /// When the writer wants its events back once chained (the driver's observers), where
    /// each enqueued event will sit in its run's chain (`observe.rs`).
    pub(super) place: Option<super::observe::Placing>,
}

impl std::fmt::Debug for PgTx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgTx({})", self.url)
    }
}

/// A client error as the store's: a lock wait that ended in a deadlock or a lock timeout is
/// [`StoreError::Locked`] (try again), anything else [`StoreError::Backend`] naming the
/// database by its redacted URL.
pub(crate) fn store_error(url: &PgUrl, what: &'static str, e: postgres::Error) -> StoreError {
    let code = e.code().map(|c| c.code().to_string());
    if matches!(code.as_deref(), Some("40P01" | "55P03" | "40001")) {
        return StoreError::Locked {
            detail: format!("{url}: {what}: {}", detail(&e)),
        };
    }
    StoreError::Backend(
        PgError::Query {
            db: url.to_string(),
            what,
            detail: detail(&e),
        }
        .to_string(),
    )
}

/// Maps a client result to the store's.
pub(super) trait StoreCtx<T> {
    fn at(self, url: &PgUrl, what: &'static str) -> Result<T, StoreError>;
}

impl<T> StoreCtx<T> for Result<T, postgres::Error> {
    fn at(self, url: &PgUrl, what: &'static str) -> Result<T, StoreError> {
        self.map_err(|e| store_error(url, what, e))
    }
}

/// An id bound as PostgreSQL text: text there is UTF-8, so an id that is not names no row.
pub(super) fn text_id(id: &[u8]) -> Option<&str> {
    std::str::from_utf8(id).ok()
}

fn run_not_found(run_id: &[u8]) -> StoreError {
    StoreError::NotFound {
        what: Said::from("run ").id(run_id),
    }
}

fn approval_not_found(run_id: &[u8], approval_id: &[u8]) -> StoreError {
    StoreError::NotFound {
        what: Said::from("approval ")
            .id(approval_id)
            .text(" of run ")
            .id(run_id),
    }
}

/// A row's columns as the values a SQLite row would hold (text and integers), for the shared
/// decoders. A column this schema does not hold (none should) is read as NULL, which the
/// decoders treat as an empty value.
pub(crate) fn values(row: &postgres::Row) -> Vec<Value> {
    (0..row.len())
        .map(|i| {
            let ty = row.columns().get(i).map(|c| c.type_().clone());
            match ty {
                Some(Type::INT8) => row
                    .try_get::<_, Option<i64>>(i)
                    .ok()
                    .flatten()
                    .map_or(Value::Null, Value::Integer),
                Some(Type::INT4) => row
                    .try_get::<_, Option<i32>>(i)
                    .ok()
                    .flatten()
                    .map_or(Value::Null, |v| Value::Integer(v.into())),
                _ => row
                    .try_get::<_, Option<String>>(i)
                    .ok()
                    .flatten()
                    .map_or(Value::Null, Value::Text),
            }
        })
        .collect()
}

/// The lease columns as SQLite's read gives them: an unparsable expiry is the zero time.
fn lease(owner: String, expires: &str) -> Lease {
    Lease {
        owner,
        expires_at: Timestamp::parse(expires).unwrap_or(Timestamp::ZERO),
    }
}

/// `SELECT … FROM runs WHERE id = $1`, with `lock` appended (the row lock, or nothing).
fn run_sql(lock: &str) -> String {
    format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1{lock}")
}

fn approval_sql() -> String {
    format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1 AND run_id = $2")
}

/// The run row, read on `c` (a transaction's read takes the row's `lock`).
fn run_on(c: &mut impl Cached, url: &PgUrl, run_id: &[u8], lock: &str) -> Result<Run, StoreError> {
    let id = text_id(run_id).ok_or_else(|| run_not_found(run_id))?;
    let row = c
        .query_opt(&run_sql(lock), &[&id])
        .at(url, "get run")?
        .ok_or_else(|| run_not_found(run_id))?;
    Ok(run_from_values(&values(&row)))
}

/// One approval of a run, whole, read on `c`.
fn approval_on(
    c: &mut impl Cached,
    url: &PgUrl,
    run_id: &[u8],
    approval_id: &[u8],
) -> Result<Approval, StoreError> {
    let missing = || approval_not_found(run_id, approval_id);
    let (Some(run), Some(id)) = (text_id(run_id), text_id(approval_id)) else {
        return Err(missing());
    };
    let row = c
        .query_opt(&approval_sql(), &[&id, &run])
        .at(url, "get approval")?
        .ok_or_else(missing)?;
    Ok(approval_from_values(&values(&row)))
}

/// The lock a decision holds on its run's row until it commits.
const ROW_LOCK: &str = " FOR NO KEY UPDATE";

impl sealed::Sealed for PgTx<'_> {}
impl sealed::Sealed for PgStore {}

impl RunTx for PgTx<'_> {
    fn run_state(&mut self, run_id: &[u8]) -> Result<(String, Lease), StoreError> {
        let id = text_id(run_id).ok_or_else(|| run_not_found(run_id))?;
        let row = self
            .tx
            .query_opt(
                "SELECT status, lease_owner, lease_expires_at FROM runs WHERE id = $1 FOR NO KEY UPDATE",
                &[&id],
            )
            .at(&self.url, "require status")?
            .ok_or_else(|| run_not_found(run_id))?;
        let text = |i: usize| row.try_get::<_, String>(i).unwrap_or_default();
        Ok((text(0), lease(text(1), &text(2))))
    }

    fn get_run(&mut self, run_id: &[u8]) -> Result<Run, StoreError> {
        run_on(&mut self.tx, &self.url, run_id, ROW_LOCK)
    }

    fn count_steps(&mut self, run_id: &[u8]) -> Result<i64, StoreError> {
        let Some(id) = text_id(run_id) else {
            return Ok(0);
        };
        Ok(self
            .tx
            .query_one("SELECT count(*) FROM steps WHERE run_id = $1", &[&id])
            .at(&self.url, "count steps")?
            .get(0))
    }

    fn get_step(&mut self, step_id: &[u8]) -> Result<Step, StoreError> {
        let missing = || StoreError::NotFound {
            what: Said::from("step ").id(step_id),
        };
        let id = text_id(step_id).ok_or_else(missing)?;
        let row = self
            .tx
            .query_opt(
                &format!("SELECT {STEP_COLUMNS} FROM steps WHERE id = $1"),
                &[&id],
            )
            .at(&self.url, "get step")?
            .ok_or_else(missing)?;
        Ok(step_from_values(&values(&row)))
    }

    fn get_approval(&mut self, run_id: &[u8], approval_id: &[u8]) -> Result<Approval, StoreError> {
        approval_on(&mut self.tx, &self.url, run_id, approval_id)
    }

    fn latest_approval_id(
        &mut self,
        run_id: &[u8],
        step_id: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let (Some(run), Some(step)) = (text_id(run_id), text_id(step_id)) else {
            return Ok(None);
        };
        let row = self
            .tx
            .query_opt(
                "SELECT id FROM approvals WHERE run_id = $1 AND step_id = $2 \
                 ORDER BY ord DESC LIMIT 1",
                &[&run, &step],
            )
            .at(&self.url, "latest approval")?;
        Ok(row.map(|r| r.try_get::<_, String>(0).unwrap_or_default().into_bytes()))
    }

    fn write_transition(&mut self, t: &Transition<'_>) -> Result<(), StoreError> {
        let id = text_id(t.run_id).ok_or_else(|| run_not_found(t.run_id))?;
        let (owner, expires) = t.lease_written();
        self.tx
            .execute(
                "UPDATE runs SET status = $1, reason = $2, reason_detail = $3, finished_at = $4, \
                 result_json = $5, lease_owner = $6, lease_expires_at = $7 WHERE id = $8",
                &[
                    &t.to.as_str(),
                    &t.reason,
                    &t.detail,
                    &t.finished_at.to_rfc3339(),
                    &t.result_json,
                    &owner,
                    &expires,
                    &id,
                ],
            )
            .at(&self.url, "transition")?;
        Ok(())
    }

    fn set_approval_status(
        &mut self,
        approval_id: &[u8],
        d: &ApprovalDecision<'_>,
    ) -> Result<bool, StoreError> {
        let Some(id) = text_id(approval_id) else {
            return Ok(false);
        };
        let at = d.decided_at.to_rfc3339();
        let n = match d.decided_by {
            Some(by) => self.tx.execute(
                "UPDATE approvals SET status = $1, decided_at = $2, decided_by = $3, note = $4 \
                 WHERE id = $5 AND status = $6 AND hash = $7",
                &[
                    &d.status,
                    &at,
                    &by,
                    &d.note,
                    &id,
                    &d.expected_status,
                    &d.hash,
                ],
            ),
            None => self.tx.execute(
                "UPDATE approvals SET status = $1, decided_at = $2, note = $3 \
                 WHERE id = $4 AND status = $5 AND hash = $6",
                &[&d.status, &at, &d.note, &id, &d.expected_status, &d.hash],
            ),
        }
        .at(&self.url, "decide approval")?;
        Ok(n == 1)
    }

    fn set_approval_status_only(
        &mut self,
        approval_id: &[u8],
        expected_status: &str,
        hash: &str,
        status: &str,
    ) -> Result<bool, StoreError> {
        let Some(id) = text_id(approval_id) else {
            return Ok(false);
        };
        let n = self
            .tx
            .execute(
                "UPDATE approvals SET status = $1 WHERE id = $2 AND status = $3 AND hash = $4",
                &[&status, &id, &expected_status, &hash],
            )
            .at(&self.url, "expire approval")?;
        Ok(n == 1)
    }

    fn fail_steps(
        &mut self,
        run_id: &[u8],
        which: Failing<'_>,
        f: &StepFailure<'_>,
    ) -> Result<usize, StoreError> {
        let Some(run) = text_id(run_id) else {
            return Ok(0);
        };
        let (what, cond, step) = match which {
            Failing::InFlight => (
                "fail steps in flight",
                "run_id = $4 AND status IN ('deciding', 'awaiting_approval', 'executing')",
                None,
            ),
            Failing::Step(step_id) => match text_id(step_id) {
                Some(step) => ("fail step", "id = $4 AND run_id = $5", Some(step)),
                None => return Ok(0),
            },
        };
        let at = f.finished_at.to_rfc3339();
        let mut p: Vec<&(dyn ToSql + Sync)> = vec![&f.observation_json, &f.observation_hash, &at];
        p.extend(step.as_ref().map(|s| s as &(dyn ToSql + Sync)));
        p.push(&run);
        let sql = format!(
            "UPDATE steps SET status = 'failed', observation_json = $1, observation_hash = $2, \
             finished_at = $3 WHERE {cond}"
        );
        let n = self.tx.execute(sql.as_str(), &p).at(&self.url, what)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn append_event(
        &mut self,
        run_id: &[u8],
        step_id: &[u8],
        at: &Timestamp,
        kind: &str,
        payload: &[u8],
    ) -> Result<(), StoreError> {
        let payload = event_payload(kind, payload)?;
        let (Some(run), Some(step)) = (text_id(run_id), text_id(step_id)) else {
            return Err(StoreError::Invalid(format!(
                "event {kind}: a run or step id that is not UTF-8 cannot be stored in PostgreSQL"
            )));
        };
        let at_text = at.to_rfc3339();
        let e = chain::NewEvent::new(run, step, &at_text, kind, payload);
        // Not chained yet: a sequencer gives it its seq and hash (decision 0081); the naive
        // chain gives them now.
        if !self.naive
            && let Some(p) = self.place.as_mut()
        {
            // Before the enqueue: the run's events committed so far, this one not among them.
            p.place(&mut self.tx, &self.url, run)?;
        }
        let (seq, hash) = if self.naive {
            chain::append(&mut self.tx, &self.url, e)
        } else {
            chain::enqueue(&mut self.tx, &self.url, e).map(|_| (0, String::new()))
        }
        .map_err(|e| StoreError::Backend(e.to_string()))?;
        self.events.push(Event {
            seq,
            hash,
            run_id: run.to_string(),
            step_id: step.to_string(),
            at_text,
            at: *at,
            kind: kind.into(),
            payload: payload.into(),
            ..Event::default()
        });
        Ok(())
    }

    tx_writes!(PgTx);

    fn add_active_ms(&mut self, run_id: &str, ms: i64) -> Result<(), StoreError> {
        self.pg_add_counters(run_id, &[("active_ms", ms)])
    }

    fn add_usage(&mut self, run_id: &str, charge: &Charge) -> Result<(), StoreError> {
        self.pg_add_counters(run_id, &charge.columns())
    }

    fn lease_now(&mut self, _local: Timestamp) -> Result<Timestamp, StoreError> {
        self.server_now()
    }

    fn lease_until(
        &mut self,
        _local_until: Timestamp,
        ttl: Duration,
    ) -> Result<Timestamp, StoreError> {
        let ttl = i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX);
        Ok(self.server_now()?.add_nanos(ttl))
    }
}

impl PgStore {
    /// Runs `read` in one read-only repeatable-read snapshot, for reads that must agree (a
    /// page and its total); errors are the store's.
    pub(crate) fn snapshot<T>(
        &self,
        read: impl FnOnce(&mut postgres::Transaction<'_>, &PgUrl) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut client = self.lock();
        let mut tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .at(&self.url, "read: begin")?;
        let out = read(&mut tx, &self.url)?;
        tx.commit().at(&self.url, "read: end")?;
        Ok(out)
    }

    /// The run row (the [`RunStore`] read).
    pub(crate) fn get_run(&self, run_id: &[u8]) -> Result<Run, StoreError> {
        run_on(&mut *self.lock(), &self.url, run_id, "")
    }

    /// One approval of a run, whole.
    pub(crate) fn get_approval(
        &self,
        run_id: &[u8],
        approval_id: &[u8],
    ) -> Result<Approval, StoreError> {
        approval_on(&mut *self.lock(), &self.url, run_id, approval_id)
    }

    /// A run's approvals with `status` (`""` for all), `limit` from `offset`, with the
    /// total, from one snapshot.
    pub(crate) fn list_approvals_page(
        &self,
        run_id: &[u8],
        status: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<Approval>, StoreError> {
        check_page("approvals", limit, offset)?;
        let Some(run) = text_id(run_id) else {
            return Ok(Page {
                items: Vec::new(),
                total: 0,
            });
        };
        self.snapshot(|tx, url| {
            let total: i64 = tx
                .query_one(
                    "SELECT count(*) FROM approvals WHERE run_id = $1 AND ($2 = '' OR status = $2)",
                    &[&run, &status],
                )
                .at(url, "list approvals")?
                .get(0);
            let rows = tx
                .query(
                    &format!(
                        "SELECT {APPROVAL_COLUMNS} FROM approvals \
                         WHERE run_id = $1 AND ($2 = '' OR status = $2) ORDER BY ord LIMIT $3 OFFSET $4"
                    ),
                    &[&run, &status, &limit, &offset],
                )
                .at(url, "list approvals")?;
            Ok(Page {
                items: rows
                    .iter()
                    .map(|r| approval_from_values(&values(r)))
                    .collect(),
                total,
            })
        })
    }
}

impl RunStore for PgStore {
    type Tx<'t> = PgTx<'t>;

    store_reads!(PgStore);

    fn write<T, E: From<StoreError>>(
        &self,
        _: InCrate,
        f: impl FnOnce(&mut PgTx<'_>) -> Result<T, E>,
    ) -> Result<(T, Vec<Event>), E> {
        self.write_placing(None, f)
            .map(|(v, events, _)| (v, events))
    }
}

impl PgStore {
    /// One write transaction, as [`RunStore::write`]. With `owed`, each event it enqueued is
    /// placed in its run's chain and, once committed, pushed to `owed` (before this
    /// connection's lock is let go, so `owed` is in commit order) instead of returned; the
    /// `bool` says so (false: the events are returned, chained already on the naive chain).
    pub(crate) fn write_placing<T, E: From<StoreError>>(
        &self,
        owed: Option<&super::observe::OwedEvents>,
        f: impl FnOnce(&mut PgTx<'_>) -> Result<T, E>,
    ) -> Result<(T, Vec<Event>, bool), E> {
        let mut client = self.lock();
        let tx = client.begin(false).at(&self.url, "begin write")?;
        let mut w = PgTx {
            tx,
            url: self.url.clone(),
            events: Vec::new(),
            naive: self.naive_chain,
            place: (owed.is_some() && !self.naive_chain).then(super::observe::Placing::default),
        };
        let out = f(&mut w)?;
        let PgTx {
            tx, events, place, ..
        } = w;
        tx.commit().at(&self.url, "commit")?;
        match (owed, place) {
            (Some(owed), Some(p)) => {
                super::observe::owe(owed, events, p.placed);
                Ok((out, Vec::new(), true))
            }
            _ => Ok((out, events, false)),
        }
    }
}
