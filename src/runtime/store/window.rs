//! Windows of a list read by key (issue 14 item 8), for front ends that show a list a window
//! at a time (the console). A window is found by walking the list's key from the nearest of
//! three places: the list's start, a row already read (its index and key), or the list's end
//! (read in reverse, `ORDER BY key DESC`). Only the window's keys are walked and only its
//! rows are read, so a window costs what its distance from that place costs, whatever the size
//! of the database. The total is counted only up to [`COUNT_CAP`] rows (`COUNT(*)` over a
//! `LIMIT cap + 1` subquery): past it the window says "at least this many" and an exact count
//! is a separate call, made only when a caller asks for one.

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, ToSql};

use super::error::{Ctx, StoreError};

/// Rows a window's total is counted up to; past it the total is a lower bound.
pub const COUNT_CAP: i64 = 1000;

/// Which window of a list to read: `limit` rows from index `offset`, found by walking the
/// list's key from the nearest of its start, the `anchor` row and its end (`end`). Every
/// windowed read of both run databases (`Store::list_*_near`, PostgreSQL's of the same names)
/// takes one, so a front end names a window the same way whatever the list and database.
///
/// `A` is what names the anchor row: an id (`&str`) for most lists, an event's `seq` (`i64`)
/// for a run's events, `(table, row id, column)` for the damaged columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Near<A> {
    /// How many rows the window holds (a read refuses 0 or less).
    pub limit: i64,
    /// The index of the window's first row (a read refuses a negative one).
    pub offset: i64,
    /// A row of the same list already read: its index in the list and what names it. An
    /// anchor with a negative index, or whose row is gone, is not used.
    pub anchor: Option<(i64, A)>,
    /// The list's length as last read, so a window near the end is read from there, in
    /// reverse (a negative one is not used).
    pub end: Option<i64>,
}

impl<A> Near<A> {
    /// `limit` rows from `offset`, with no anchor and no end known.
    pub fn new(limit: i64, offset: i64) -> Near<A> {
        Near {
            limit,
            offset,
            anchor: None,
            end: None,
        }
    }

    /// The same window with its anchor named by its key: `key` is handed what names the
    /// anchor row and reads the row's key, `None` when the row is gone. An anchor with a
    /// negative index is not looked up; one whose row is gone is dropped.
    pub(crate) fn anchored<B>(
        self,
        key: impl FnOnce(A) -> Result<Option<B>, StoreError>,
    ) -> Result<Near<B>, StoreError> {
        let anchor = match self.anchor.filter(|(i, _)| *i >= 0) {
            Some((i, a)) => key(a)?.map(|k| (i, k)),
            None => None,
        };
        Ok(Near {
            limit: self.limit,
            offset: self.offset,
            anchor,
            end: self.end,
        })
    }
}

/// One window of a list as a front end shows it: rows `[offset, offset + items.len())`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowPage<T> {
    /// The window's rows, in list order.
    pub items: Vec<T>,
    /// The index of the first row (the one asked for, moved with its anchor row when the list
    /// is short enough to count and rows came or left before that row).
    pub offset: i64,
    /// Whether rows follow the window.
    pub more: bool,
    /// The list's length when `exact` (counted, the list being at most [`COUNT_CAP`] rows, or
    /// seen to end with this window); else a lower bound (more than [`COUNT_CAP`] rows).
    pub total: i64,
    /// Whether `total` is the list's length rather than a lower bound.
    pub exact: bool,
}

impl<T> WindowPage<T> {
    pub(crate) fn of(w: Window, items: Vec<T>) -> WindowPage<T> {
        WindowPage {
            items,
            offset: w.offset,
            more: w.more,
            total: w.total,
            exact: w.exact,
        }
    }
}

/// One window of keys: indices `[offset, offset + keys.len())` of the list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Window {
    pub keys: Vec<Vec<Value>>,
    /// Where the window starts (the index asked for, moved by as many rows as came or left
    /// before the anchor when the list is short enough to count).
    pub offset: i64,
    /// Whether rows follow the window.
    pub more: bool,
    /// The list's length when `exact`, else a lower bound.
    pub total: i64,
    pub exact: bool,
}

impl Window {
    /// The window's rows read one key at a time: `read` is handed the integer in column `col`
    /// of each key (a rowid) and returns the row, if it is still there.
    pub fn each<T, I: IntoIterator<Item = T>>(
        &self,
        col: usize,
        mut read: impl FnMut(i64) -> Result<I, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let mut items = Vec::with_capacity(self.keys.len());
        for k in &self.keys {
            items.extend(read(k.get(col).map(int).unwrap_or(0))?);
        }
        Ok(items)
    }
}

/// The key of an anchor row named by its id: `sql` reads the row's key columns (the first row
/// it returns), its parameters `args` then the id. `None` for a row that is gone.
pub(super) fn row_key(
    c: &Connection,
    what: &str,
    sql: &str,
    args: &[&dyn ToSql],
    id: &str,
) -> Result<Option<Vec<Value>>, StoreError> {
    let mut args = args.to_vec();
    args.push(&id);
    let mut stmt = c.prepare_cached(sql).ctx(what)?;
    let width = stmt.column_count();
    stmt.query_row(args.as_slice(), |r| {
        (0..width).map(|i| r.get::<_, Value>(i)).collect()
    })
    .optional()
    .ctx(what)
}

/// A list read by a unique key: `from` is `FROM … WHERE …` with its parameters numbered
/// `?1..?n` (`args`), `key` the key's columns, in the list's order (descending if `desc`).
pub(super) struct KeyedList<'a> {
    pub what: &'static str,
    pub from: String,
    pub args: Vec<&'a dyn ToSql>,
    pub key: &'a [&'a str],
    pub desc: bool,
}

impl KeyedList<'_> {
    fn cols(&self) -> String {
        self.key.join(", ")
    }

    /// `(k1, k2) OP (?a, ?b)`: rows at or after the key in list order (`after`), or before it.
    fn cmp(&self, after: bool, first: usize) -> String {
        let op = match (after, self.desc) {
            (true, false) => ">=",
            (true, true) => "<=",
            (false, false) => "<",
            (false, true) => ">",
        };
        let marks: Vec<String> = (0..self.key.len())
            .map(|i| format!("?{}", first + i))
            .collect();
        format!("({}) {op} ({})", self.cols(), marks.join(", "))
    }

    /// The list's parameters and, with `near`, the key's after them and the condition
    /// (` AND …`) that keeps the rows at/after (`true`) or before that key.
    fn near<'b>(&'b self, near: Option<(bool, &'b [Value])>) -> (Vec<&'b dyn ToSql>, String) {
        let mut args: Vec<&dyn ToSql> = self.args.clone();
        let cond = match near {
            Some((after, key)) => {
                let first = args.len() + 1;
                for v in key {
                    args.push(v);
                }
                format!(" AND {}", self.cmp(after, first))
            }
            None => String::new(),
        };
        (args, cond)
    }

    fn order(&self, reverse: bool) -> String {
        let dir = if self.desc != reverse { "DESC" } else { "ASC" };
        self.key
            .iter()
            .map(|k| format!("{k} {dir}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The exact number of rows: a scan of the list's keys, for callers that ask.
    pub fn count(&self, c: &Connection) -> Result<i64, StoreError> {
        let sql = format!("SELECT COUNT(*) {}", self.from);
        c.prepare_cached(&sql)
            .ctx(self.what)?
            .query_row(self.args.as_slice(), |r| r.get(0))
            .ctx(self.what)
    }

    /// Rows `[offset, offset + limit)` as agentrt's page reads read them: the offset skipped
    /// from the list's start and the total counted whole; `rows` reads the page's rows by key.
    pub fn page<T>(
        &self,
        c: &Connection,
        offset: i64,
        limit: i64,
        rows: impl FnOnce(&Connection, &Window) -> Result<Vec<T>, StoreError>,
    ) -> Result<Page<T>, StoreError> {
        let w = self.window(c, Near::new(limit, offset), Some(i64::MAX - 1))?;
        Ok(Page {
            items: rows(c, &w)?,
            total: w.total,
        })
    }

    /// As [`KeyedList::window`] with the total counted up to [`COUNT_CAP`], the window's rows
    /// read by `rows`.
    pub fn window_page<T>(
        &self,
        c: &Connection,
        near: Near<Vec<Value>>,
        rows: impl FnOnce(&Connection, &Window) -> Result<Vec<T>, StoreError>,
    ) -> Result<WindowPage<T>, StoreError> {
        let w = self.window(c, near, Some(COUNT_CAP))?;
        let items = rows(c, &w)?;
        Ok(WindowPage::of(w, items))
    }

    /// The window `near` names (its anchor named by its key), as [`walk`] finds it.
    pub fn window(
        &self,
        c: &Connection,
        near: Near<Vec<Value>>,
        cap: Option<i64>,
    ) -> Result<Window, StoreError> {
        walk(&(self, c), near, cap)
    }
}

/// A list whose keys can be walked: SQLite's [`KeyedList`] on a connection, or another
/// backend's list (PostgreSQL's, for the console there), so both find a window the same way.
pub(crate) trait KeyWalk {
    /// Keys in list order (or reversed), optionally only those at/after (`true`) or before
    /// the key, `limit` of them after skipping `offset`.
    fn keys(
        &self,
        near: Option<(bool, &[Value])>,
        reverse: bool,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<Vec<Value>>, StoreError>;

    /// How many rows, counted up to `cap + 1`; with `before`, only those before that key.
    fn count_to(&self, before: Option<&[Value]>, cap: i64) -> Result<i64, StoreError>;
}

impl KeyWalk for (&KeyedList<'_>, &Connection) {
    fn keys(
        &self,
        near: Option<(bool, &[Value])>,
        reverse: bool,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<Vec<Value>>, StoreError> {
        let (list, c) = *self;
        let (mut args, cond) = list.near(near);
        let m = args.len();
        args.push(&limit);
        args.push(&offset);
        let sql = format!(
            "SELECT {} {}{cond} ORDER BY {} LIMIT ?{} OFFSET ?{}",
            list.cols(),
            list.from,
            list.order(reverse),
            m + 1,
            m + 2
        );
        let width = list.key.len();
        let mut stmt = c.prepare_cached(&sql).ctx(list.what)?;
        let rows = stmt
            .query_map(args.as_slice(), |r| {
                (0..width).map(|i| r.get::<_, Value>(i)).collect()
            })
            .ctx(list.what)?;
        rows.collect::<Result<Vec<Vec<Value>>, _>>().ctx(list.what)
    }

    fn count_to(&self, before: Option<&[Value]>, cap: i64) -> Result<i64, StoreError> {
        let (list, c) = *self;
        let (mut args, cond) = list.near(before.map(|key| (false, key)));
        let lim = cap.saturating_add(1);
        args.push(&lim);
        let sql = format!(
            "SELECT COUNT(*) FROM (SELECT 1 {}{cond} LIMIT ?{})",
            list.from,
            args.len()
        );
        c.prepare_cached(&sql)
            .ctx(list.what)?
            .query_row(args.as_slice(), |r| r.get(0))
            .ctx(list.what)
    }
}

/// The window `[offset, offset + limit)` of `list` that `near` names, read from the nearest of
/// the list's start, the anchor row (its index and key, of a row already read) and the list's
/// end (its length as last read). The total is counted up to `cap` rows (`None`: not at all;
/// the total is then what was read).
pub(crate) fn walk(
    list: &impl KeyWalk,
    near: Near<Vec<Value>>,
    cap: Option<i64>,
) -> Result<Window, StoreError> {
    let Near {
        limit,
        offset,
        anchor,
        end,
    } = near;
    let limit = limit.max(1);
    let mut offset = offset.max(0);
    let counted = match cap {
        Some(cap) => {
            let n = list.count_to(None, cap)?;
            (n <= cap).then_some(n)
        }
        None => None,
    };
    // A short list is counted, so an anchor's index and the end are known exactly: the
    // window moves with its anchor row when rows came or left before it.
    let mut anchor = anchor.filter(|(i, _)| *i >= 0);
    if let (Some(n), Some((ai, key))) = (counted, anchor.as_mut()) {
        let before = list.count_to(Some(key), n)?;
        offset = offset.saturating_add(before - *ai).max(0);
        *ai = before;
    }
    let end = match counted {
        Some(n) => Some(n),
        None => end.filter(|e| *e >= 0),
    };
    // Indices [offset, stop): one row past the window, to say whether more follow.
    let stop = offset.saturating_add(limit).saturating_add(1);
    let from_start = offset;
    let from_row = anchor.as_ref().map(|(ai, _)| ai.abs_diff(offset));
    let from_end = end.map(|e| e.saturating_sub(stop).max(0));
    let mut keys = match (from_row, from_end) {
        (Some(r), e) if r < from_start as u64 && e.is_none_or(|e| r <= e as u64) => {
            let (ai, key) = anchor
                .as_ref()
                .map(|(i, k)| (*i, k.as_slice()))
                .unwrap_or((0, &[]));
            let mut keys = Vec::new();
            let hi = stop.min(ai);
            if offset < hi {
                let mut up = list.keys(Some((false, key)), true, hi - offset, ai - hi)?;
                up.reverse();
                keys.extend(up);
            }
            let from = offset.max(ai);
            if stop > from {
                keys.extend(list.keys(Some((true, key)), false, stop - from, from - ai)?);
            }
            keys
        }
        (_, Some(e)) if e < from_start => {
            // From the end, in reverse: skip the rows after the window, then read it.
            let len = end.unwrap_or(0);
            let upto = stop.min(len);
            let mut keys = if upto > offset {
                list.keys(None, true, upto - offset, len - upto)?
            } else {
                Vec::new()
            };
            keys.reverse();
            keys
        }
        _ => list.keys(None, false, stop - offset, offset)?,
    };
    let more = keys.len() as i64 > limit;
    keys.truncate(usize::try_from(limit).unwrap_or(0));
    let read = offset
        .saturating_add(keys.len() as i64)
        .saturating_add(i64::from(more));
    let (total, exact) = match (counted, cap) {
        (Some(n), _) => (n, true),
        // Past the cap the length is known only where the window reached the list's end:
        // as exactly as its offset is (counted from the start, or from an end or anchor
        // the caller read).
        (None, _) if !more && (!keys.is_empty() || offset == 0) => (read, true),
        (None, Some(cap)) => (read.max(cap.saturating_add(1)), false),
        (None, None) => (read, false),
    };
    Ok(Window {
        keys,
        offset,
        more,
        total,
        exact,
    })
}

/// The integer in a key column (0 for anything else: a key the caller put there is an integer).
pub(crate) fn int(v: &Value) -> i64 {
    match v {
        Value::Integer(i) => *i,
        _ => 0,
    }
}

/// One page of rows and how many there are in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page<T> {
    /// The rows of the page, in the order the read names (insertion order unless it says
    /// otherwise).
    pub items: Vec<T>,
    /// How many rows the whole list has, read in the same transaction as the rows.
    pub total: i64,
}
