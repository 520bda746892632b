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
use super::window::{KeyedList, Near, Window, WindowPage, int};

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

/// What the sorted queue's SQL says differently on each database (placeholders, casts,
/// collation, how `json_each` is joined); [`sorted_from`] writes the rest once. SQLite's is
/// [`SQLITE_QUEUE`]; PostgreSQL's is in `pgstore::queue_order`.
pub(crate) struct QueueSql {
    /// The join of a queue row to its run (and the table's alias `a`).
    pub rows: &'static str,
    /// A queue row's key in insertion order, and what the rows are grouped by.
    pub rid: &'static str,
    pub group: &'static str,
    /// An integer zero, true, and the placeholder sign (`?` or `$`).
    pub zero: &'static str,
    pub truth: &'static str,
    pub mark: char,
    /// `COUNT` and `MAX` as each database's text writes them.
    pub count: &'static str,
    pub max: &'static str,
    /// The path from a request to its `spec`, appended to the request's document.
    pub spec_path: &'static str,
    /// A document as JSON, `{}` when it is not JSON.
    pub safe: fn(&str) -> String,
    /// `json_each` of a document as the alias `j` or `s` (a member's key, value and number).
    pub each: fn(String, &str) -> String,
    /// A member's number, value (as text) and type, of the `j` alias.
    pub member_n: &'static str,
    pub member_value: &'static str,
    pub member_type: &'static str,
    /// Whether member `i`'s value is an integer; an amount negated; a text as its bytes.
    pub is_int: fn(usize) -> String,
    pub negated: fn(usize) -> String,
    pub bytes: fn(usize) -> String,
    /// The sort value's column and its zero, by whether the order is an amount.
    pub kv: fn(&str, bool) -> (String, &'static str),
    /// The state's column, and the aliases of the two inner selects.
    pub ks: fn(&str) -> String,
    pub inner: (&'static str, &'static str),
}

/// SQLite's text of the sorted queue: `json_each` joined plainly (a member named twice stays
/// twice), values compared as BLOBs.
pub(crate) const SQLITE_QUEUE: QueueSql = QueueSql {
    rows: "FROM approvals a JOIN runs r ON r.id = a.run_id",
    rid: "a.rowid",
    group: "a.rowid",
    zero: "0",
    truth: "1",
    mark: '?',
    count: "COUNT",
    max: "MAX",
    spec_path: ", '$.spec'",
    safe: |doc| format!("CASE WHEN json_valid({doc}) THEN {doc} ELSE '{{}}' END"),
    each: |doc, alias| format!("json_each({doc}) {alias}"),
    member_n: "j.id",
    member_value: "j.value",
    member_type: "j.type",
    is_int: |i| format!("t{i} = 'integer'"),
    negated: |i| format!("-v{i}"),
    bytes: |i| format!("CAST(v{i} AS BLOB)"),
    kv: |value, _| (value.to_string(), "0"),
    ks: |state| state.to_string(),
    inner: ("", ""),
};

/// The list's `FROM … WHERE …` in dialect `d`: the queue's rows (`rid`, `aid`) with their sort
/// key (`ks`, `kv`), `cond` choosing them (the filter is the first placeholder). Each row's
/// document is read once per window: `json_each` joined on the keys asked for (a document
/// that is not JSON reads as `{}`), grouped by row, so a member's count, value and type are
/// aggregates of that one pass. Keys are the second placeholder on ([`key_args`]).
pub(crate) fn sorted_from(order: &QueueOrder, d: &QueueSql, cond: &str) -> String {
    let (doc, path, keys, amount, spec) = match order {
        QueueOrder::Age => ("", "", 0, false, false),
        // `spec` named once, and its `name` once: the first key is `name`, the second `spec`.
        QueueOrder::Tool => ("a.request_json", d.spec_path, 1, false, true),
        QueueOrder::Member(k) => ("a.presentation_json", "", k.len(), false, false),
        QueueOrder::Amount(k) => ("a.presentation_json", "", k.len(), true, false),
    };
    let (rows, rid, truth, count, max) = (d.rows, d.rid, d.truth, d.count, d.max);
    if keys == 0 {
        let zero = d.zero;
        return format!(
            "FROM (SELECT {rid} AS rid, a.id AS aid, {zero} AS ks, {zero} AS kv {rows} WHERE {cond}) q WHERE {truth}"
        );
    }
    let safe = (d.safe)(doc);
    let mark = |i: usize| format!("{}{}", d.mark, i + 2);
    let marks: Vec<String> = (0..keys).map(mark).collect();
    let mut cols = String::new();
    let mut joins = format!(
        " LEFT JOIN {} ON j.key IN ({})",
        (d.each)(format!("{safe}{path}"), "j"),
        marks.join(", ")
    );
    let mut state = String::from("CASE");
    if spec {
        let n = d.member_n.replace("j.", "s.");
        cols.push_str(&format!(", {count}(DISTINCT {n}) AS ns"));
        joins.push_str(&format!(
            " LEFT JOIN {} ON s.key = {}",
            (d.each)(safe.clone(), "s"),
            mark(keys)
        ));
        state.push_str(" WHEN ns > 1 THEN 2");
    }
    let mut value = String::from("CASE");
    let (n, v, t) = (d.member_n, d.member_value, d.member_type);
    for (i, m) in marks.iter().enumerate() {
        cols.push_str(&format!(
            ", {count}(DISTINCT CASE WHEN j.key = {m} THEN {n} END) AS n{i}, \
             {max}(CASE WHEN j.key = {m} THEN {v} END) AS v{i}, \
             {max}(CASE WHEN j.key = {m} THEN {t} END) AS t{i}"
        ));
        let ok = if amount { (d.is_int)(i) } else { truth.into() };
        state.push_str(&format!(
            " WHEN n{i} > 1 THEN 2 WHEN n{i} = 1 THEN CASE WHEN {ok} THEN 0 ELSE 1 END"
        ));
        let v = if amount { (d.negated)(i) } else { (d.bytes)(i) };
        value.push_str(&format!(" WHEN n{i} = 1 THEN {v}"));
    }
    state.push_str(" ELSE 1 END");
    value.push_str(" END");
    let (kv, zero) = (d.kv)(&value, amount);
    let (ks, group, (t1, t2)) = ((d.ks)(&state), d.group, d.inner);
    // Only a row that has the key sorts by its value: the others keep the queue's order.
    format!(
        "FROM (SELECT rid, aid, ks, CASE WHEN ks = 0 THEN {kv} ELSE {zero} END AS kv \
         FROM (SELECT *, {ks} AS ks FROM (SELECT {rid} AS rid, a.id AS aid{cols} \
         {rows}{joins} WHERE {cond} GROUP BY {group}){t1}){t2}) q WHERE {truth}"
    )
}

/// The keys the expressions bind after the filter (`?2`, ... here, `$2`, ... on PostgreSQL).
pub(crate) fn key_args(order: &QueueOrder) -> Vec<String> {
    match order {
        QueueOrder::Age => Vec::new(),
        QueueOrder::Tool => vec!["name".into(), "spec".into()],
        QueueOrder::Member(k) | QueueOrder::Amount(k) => k.clone(),
    }
}

/// The rows of a window of the sorted queue, each with the value it was sorted by, on either
/// database: a key is `(state, value, rid)`, and `row` reads the queue row with that rid
/// (`None` when it is gone).
pub(crate) fn sorted_items(
    w: &Window,
    mut row: impl FnMut(i64) -> Result<Option<QueueItem>, StoreError>,
) -> Result<Vec<(QueueItem, SortValue)>, StoreError> {
    let mut items = Vec::with_capacity(w.keys.len());
    for k in &w.keys {
        let (Some(s), Some(v), Some(rid)) = (k.first(), k.get(1), k.get(2)) else {
            continue;
        };
        if let Some(item) = row(int(rid))? {
            items.push((item, sort_value(s, v)));
        }
    }
    Ok(items)
}

/// The value a row was sorted by, from its key's `state` and `value` (an amount is stored
/// negated, so the largest sorts first), on either database (PostgreSQL's keys are only
/// integers and text).
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
    /// its own order), each row with the value it was sorted by. `near`'s anchor is the index
    /// and approval id of a row already read in this same order. The total is counted up to
    /// [`super::COUNT_CAP`]; [`Store::count_queue`] counts past it.
    pub fn list_queue_sorted_near(
        &self,
        filter: &str,
        order: &QueueOrder,
        near: Near<&str>,
    ) -> Result<WindowPage<(QueueItem, SortValue)>, StoreError> {
        check_page("queue", near.limit, near.offset)?;
        let filter = filter.to_lowercase();
        let keys = key_args(order);
        let from = sorted_from(order, &SQLITE_QUEUE, QUEUE_COND);
        self.read(|c| {
            let mut args: Vec<&dyn rusqlite::ToSql> = vec![&filter];
            for k in &keys {
                args.push(k);
            }
            let list = KeyedList {
                what: "queue",
                from,
                args,
                key: &["q.ks", "q.kv", "q.rid"],
                desc: false,
            };
            let near = near.anchored(|id| anchor_key(c, &list, id))?;
            list.window_page(c, near, |c, w| sorted_items(w, |rid| queue_item(c, rid)))
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
