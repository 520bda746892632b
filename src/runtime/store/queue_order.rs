//! The approval queue in another order than its insertion order (issue 21: sort and group by
//! tool, by a presentation member such as the target, or by an amount), read a window at a
//! time by key as [`Store::list_queue_rows_near`] reads it.
//!
//! The sort key of a row is `(state, value, rowid)`: `state` 0 when the row has the member, 1
//! when it has none (or not of the kind asked for) and 2 when the member is named twice, so a
//! row without the key sorts last, ties keep the queue's insertion order, and the order is
//! total and stable. Members are read with SQLite's `json_each` (never `json_extract`, which
//! takes the first of two equal keys where Go takes the last): a member named twice is not
//! read at all. Text values are compared as their bytes (a BLOB), so a value that is not UTF-8
//! still sorts and is handed back whole. The key is handed back with each row, so a front end
//! shows the value a row was sorted by, never a value read another way.
//!
//! No index holds these keys (agentrt's schema is shared and unchanged): each window sorts the
//! pending approvals of waiting runs that match the filter, a cost that grows with the queue,
//! not with the database.

use rusqlite::Connection;
use rusqlite::types::Value;

use super::Store;
use super::error::StoreError;
use super::pages::{check_page, query};
use super::views::{QUEUE_COND, QueueItem, queue_item};
use super::window::{COUNT_CAP, KeyedList, WindowPage, int};

/// The order of the queue.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum QueueOrder {
    /// Insertion order, oldest first (the queue's own order).
    #[default]
    Age,
    /// By the request's tool (`spec.name`), A to Z by bytes.
    Tool,
    /// By the first of these presentation members present, A to Z by bytes (a target).
    Member(Vec<String>),
    /// By the first of these presentation members present, an integer, largest first (an
    /// amount); a member that is not an integer counts as none.
    Amount(Vec<String>),
}

/// The value a row was sorted by.
#[derive(Debug, Clone, PartialEq)]
pub enum SortValue {
    /// The member's value when it is an integer (an amount).
    Int(i64),
    /// The member's value as its bytes (a text's content, or another value's JSON).
    Bytes(Vec<u8>),
    /// The row has no such member (or not an integer where one is asked for).
    Missing,
    /// The member is named more than once; which one counts is not guessed.
    Twice,
}

/// Keys (`?2`, `?3`, ...) the first present of which a row is read by.
fn first_present(doc: &str, path: Option<&str>, keys: usize, amount: bool) -> (String, String) {
    let each = match path {
        Some(p) => format!("json_each({doc}, '{p}')"),
        None => format!("json_each({doc})"),
    };
    let object = match path {
        Some(p) => format!("json_valid({doc}) AND json_type({doc}, '{p}') = 'object'"),
        None => format!("json_valid({doc}) AND json_type({doc}) = 'object'"),
    };
    let mut state = format!("CASE WHEN NOT ({object}) THEN 1");
    let mut value = String::from("CASE");
    for i in 0..keys {
        let k = i + 2;
        let n = format!("(SELECT COUNT(*) FROM {each} WHERE key = ?{k})");
        let ok = if amount {
            format!("(SELECT type = 'integer' FROM {each} WHERE key = ?{k})")
        } else {
            "1".into()
        };
        state.push_str(&format!(
            " WHEN {n} > 1 THEN 2 WHEN {n} = 1 THEN CASE WHEN {ok} THEN 0 ELSE 1 END"
        ));
        let v = if amount {
            format!("-(SELECT value FROM {each} WHERE key = ?{k})")
        } else {
            format!("CAST((SELECT value FROM {each} WHERE key = ?{k}) AS BLOB)")
        };
        value.push_str(&format!(" WHEN {n} = 1 THEN {v}"));
    }
    state.push_str(" ELSE 1 END");
    value.push_str(" ELSE 0 END");
    (state, value)
}

/// The sort key's `state` and `value` expressions over `a` (the approval).
fn key_sql(order: &QueueOrder) -> (String, String) {
    let (state, value) = match order {
        QueueOrder::Age => ("0".into(), "0".into()),
        // `spec` named once and its `name` named once: `?2` is `name`, `?3` is `spec`.
        QueueOrder::Tool => {
            let (state, value) = first_present("a.request_json", Some("$.spec"), 1, false);
            let spec = "(SELECT COUNT(*) FROM json_each(a.request_json) WHERE key = ?3)";
            (
                format!(
                    "CASE WHEN NOT json_valid(a.request_json) THEN 1 WHEN {spec} > 1 THEN 2 ELSE {state} END"
                ),
                format!(
                    "CASE WHEN json_valid(a.request_json) AND {spec} = 1 THEN {value} ELSE 0 END"
                ),
            )
        }
        QueueOrder::Member(keys) => first_present("a.presentation_json", None, keys.len(), false),
        QueueOrder::Amount(keys) => first_present("a.presentation_json", None, keys.len(), true),
    };
    // Only a row that has the key sorts by its value: the others keep the queue's order.
    let value = format!("CASE WHEN ({state}) = 0 THEN {value} ELSE 0 END");
    (state, value)
}

/// The keys the expressions bind after the filter (`?2`, ...).
fn key_args(order: &QueueOrder) -> Vec<String> {
    match order {
        QueueOrder::Age => Vec::new(),
        QueueOrder::Tool => vec!["name".into(), "spec".into()],
        QueueOrder::Member(k) | QueueOrder::Amount(k) => k.clone(),
    }
}

/// The value a row was sorted by, from its key's `state` and `value` (an amount is stored
/// negated, so the largest sorts first).
fn sort_value(state: &Value, value: &Value) -> SortValue {
    match (int(state), value) {
        (0, Value::Integer(i)) => SortValue::Int(i.checked_neg().unwrap_or(i64::MAX)),
        (0, Value::Real(f)) => SortValue::Bytes((-f).to_string().into_bytes()),
        (0, Value::Blob(b)) => SortValue::Bytes(b.clone()),
        (0, Value::Text(t)) => SortValue::Bytes(t.clone().into_bytes()),
        (2, _) => SortValue::Twice,
        _ => SortValue::Missing,
    }
}

impl Store {
    /// A window of the queue in `order` (as [`Store::list_queue_rows_near`] reads the queue in
    /// its own order), each row with the value it was sorted by. `anchor` is the index and
    /// approval id of a row already read in this same order. The total is counted up to
    /// [`COUNT_CAP`]; [`Store::count_queue`] counts past it.
    pub fn list_queue_sorted_near(
        &self,
        filter: &str,
        order: &QueueOrder,
        limit: i64,
        offset: i64,
        anchor: Option<(i64, &str)>,
        end: Option<i64>,
    ) -> Result<WindowPage<(QueueItem, SortValue)>, StoreError> {
        check_page("queue", limit, offset)?;
        let filter = filter.to_lowercase();
        let keys = key_args(order);
        let (state, value) = key_sql(order);
        self.read(|c| {
            let mut args: Vec<&dyn rusqlite::ToSql> = vec![&filter];
            for k in &keys {
                args.push(k);
            }
            let list = KeyedList {
                what: "queue",
                from: format!(
                    "FROM (SELECT a.rowid AS rid, a.id AS aid, {state} AS ks, {value} AS kv \
                     FROM approvals a JOIN runs r ON r.id = a.run_id WHERE {QUEUE_COND}) q WHERE 1"
                ),
                args,
                key: &["q.ks", "q.kv", "q.rid"],
                desc: false,
            };
            let anchor = match anchor {
                Some((ai, id)) if ai >= 0 => anchor_key(c, &list, id)?.map(|k| (ai, k)),
                _ => None,
            };
            let w = list.window(c, offset, limit, anchor, end, Some(COUNT_CAP))?;
            let mut items = Vec::with_capacity(w.keys.len());
            for k in &w.keys {
                let (Some(s), Some(v), Some(rid)) = (k.first(), k.get(1), k.get(2)) else {
                    continue;
                };
                if let Some(item) = queue_item(c, int(rid))? {
                    items.push((item, sort_value(s, v)));
                }
            }
            Ok(WindowPage::of(w, items))
        })
    }
}

/// The sort key of the queue row with approval id `id`, if it is still in the list.
fn anchor_key(
    c: &Connection,
    list: &KeyedList<'_>,
    id: &str,
) -> Result<Option<Vec<Value>>, StoreError> {
    let mut args = list.args.clone();
    args.push(&id);
    let sql = format!(
        "SELECT q.ks, q.kv, q.rid {} AND q.aid = ?{} LIMIT 1",
        list.from,
        args.len()
    );
    let rows = query(c, &sql, &args, "queue anchor", |r| {
        (0..3)
            .map(|i| r.get::<_, Value>(i).unwrap_or(Value::Null))
            .collect::<Vec<_>>()
    })?;
    Ok(rows.into_iter().next())
}
