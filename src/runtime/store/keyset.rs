//! Pages read by key (issue 14 item 8): each page continues after the last key of the one
//! before (`rowid` for runs, `idx` for steps, `seq` for events), so reading a whole list is
//! linear in its size and a page costs the same at any depth and on any size of database. A
//! page says whether more follow (one row read past it) instead of counting the table; a
//! count is its own call, made only when a caller asks for one. An `--offset` is skipped once,
//! walking the key index only.

use super::Store;
use super::bind::key;
use super::error::StoreError;
use super::pages::{capped_step, check_page, count, event_select, query, run_select, step_select};
use super::rows::{Cols, event_from, run_from};
use crate::runtime::types::{AsKey, Event, Run, Step};
use rusqlite::types::Value;

/// One page read by key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyPage<T, K = i64> {
    /// The page's rows, in key order.
    pub items: Vec<T>,
    /// Whether rows follow the last one on the page.
    pub more: bool,
    /// The key to pass for the next page (the last row's), `None` for an empty page.
    pub last_key: Option<K>,
}

/// Where a page of steps continues: after this (`idx`, `rowid`). `idx` is kept as SQLite
/// stored it, so a damaged (non-integer) index still orders and pages without repeating rows.
#[derive(Debug, Clone, PartialEq)]
pub struct StepKey(Value, i64);

#[cfg(feature = "postgres")]
impl StepKey {
    /// The key of a step another backend read: its index and insertion order.
    pub(crate) fn of(idx: i64, ord: i64) -> StepKey {
        StepKey(Value::Integer(idx), ord)
    }

    /// The index (0 when not an integer) and insertion order.
    pub(crate) fn parts(&self) -> (i64, i64) {
        (super::window::int(&self.0), self.1)
    }
}

fn page<T, K: Clone>(mut items: Vec<(K, T)>, limit: i64) -> KeyPage<T, K> {
    let more = items.len() as i64 > limit;
    items.truncate(limit.max(0) as usize);
    let last_key = items.last().map(|(k, _)| k.clone());
    KeyPage {
        items: items.into_iter().map(|(_, t)| t).collect(),
        more,
        last_key,
    }
}

impl Store {
    /// Runs newest first (`rowid` descending), of one status or all (`""`): those with a
    /// rowid below `before` (`None`: from the newest), after skipping `skip` of them.
    pub fn runs_page_by_key(
        &self,
        status: &str,
        before: Option<i64>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Run>, StoreError> {
        check_page("runs", limit, skip)?;
        let before = before.unwrap_or(i64::MAX);
        let select = run_select();
        let select = select.strip_suffix(" FROM runs").unwrap_or(&select);
        self.read(|c| {
            let sql = format!(
                "{select}, rowid FROM runs WHERE rowid < ?1 AND (?2 = '' OR status = ?2) \
                 AND (?3 = 0 OR rowid <= (SELECT rowid FROM runs WHERE rowid < ?1 \
                 AND (?2 = '' OR status = ?2) ORDER BY rowid DESC LIMIT 1 OFFSET ?3)) \
                 ORDER BY rowid DESC LIMIT ?4"
            );
            let items = query(
                c,
                &sql,
                &[&before, &status, &skip, &(limit + 1)],
                "list runs",
                |r| {
                    let mut cols = Cols::new(r);
                    let run = run_from(&mut cols);
                    (r.get::<_, i64>(19).unwrap_or(i64::MIN), run)
                },
            )?;
            Ok(page(items, limit))
        })
    }

    /// How many runs there are, of one status or all (`""`): a scan, for callers that ask.
    pub fn count_runs(&self, status: &str) -> Result<i64, StoreError> {
        self.read(|c| {
            count(
                c,
                "SELECT COUNT(*) FROM runs WHERE (?1 = '' OR status = ?1)",
                &[&status],
            )
        })
    }

    /// A run's steps by index (ties by insertion): those after `after` (`None`: from the
    /// first), after skipping `skip` of them, capped as pages cap them.
    pub fn steps_page_by_key(
        &self,
        run_id: impl AsKey,
        after: Option<&StepKey>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Step, StepKey>, StoreError> {
        let run_id = key(&run_id);
        check_page("steps", limit, skip)?;
        let (idx, rowid) = match after {
            Some(StepKey(v, r)) => (v.clone(), *r),
            None => (Value::Null, 0),
        };
        let select = step_select();
        let select = select.strip_suffix(" FROM steps").unwrap_or(&select);
        self.read(|c| {
            let after = "(?2 IS NULL OR (idx, rowid) > (?2, ?3))";
            let sql = format!(
                "{select}, idx, rowid FROM steps WHERE run_id = ?1 AND {after} AND (?4 = 0 OR \
                 (idx, rowid) >= (SELECT idx, rowid FROM steps WHERE run_id = ?1 AND {after} \
                 ORDER BY idx, rowid LIMIT 1 OFFSET ?4)) ORDER BY idx, rowid LIMIT ?5"
            );
            let items = query(
                c,
                &sql,
                &[&run_id, &idx, &rowid, &skip, &(limit + 1)],
                "list steps",
                |r| {
                    let key = StepKey(
                        r.get::<_, Value>(15).unwrap_or(Value::Null),
                        r.get::<_, i64>(16).unwrap_or(0),
                    );
                    (key, capped_step(r))
                },
            )?;
            Ok(page(items, limit))
        })
    }

    /// A run's events in seq order: those with `seq` above `after` (`None`: from the first),
    /// after skipping `skip` of them, capped as pages cap them.
    pub fn events_page_by_key(
        &self,
        run_id: impl AsKey,
        after: Option<i64>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Event>, StoreError> {
        let run_id = key(&run_id);
        check_page("events", limit, skip)?;
        let after = after.unwrap_or(i64::MIN);
        self.read(|c| {
            let sql = format!(
                "{} WHERE run_id = ?1 AND seq > ?2 AND (?3 = 0 OR seq >= (SELECT seq FROM events \
                 WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT 1 OFFSET ?3)) ORDER BY seq LIMIT ?4",
                event_select()
            );
            let items = query(
                c,
                &sql,
                &[&run_id, &after, &skip, &(limit + 1)],
                "list events",
                |r| {
                    let e = event_from(&mut Cols::new(r));
                    (e.seq, e)
                },
            )?;
            Ok(page(items, limit))
        })
    }

    /// How many events a run has: a scan of its index range, for callers that ask.
    pub fn count_events(&self, run_id: impl AsKey) -> Result<i64, StoreError> {
        let run_id = key(&run_id);
        self.read(|c| {
            count(
                c,
                "SELECT COUNT(*) FROM events WHERE run_id = ?",
                &[&run_id],
            )
        })
    }

    /// How many steps a run has, for callers that ask.
    pub fn count_steps(&self, run_id: impl AsKey) -> Result<i64, StoreError> {
        let run_id = key(&run_id);
        self.read(|c| count(c, "SELECT COUNT(*) FROM steps WHERE run_id = ?", &[&run_id]))
    }
}
