//! The queue in another order than its insertion order, on PostgreSQL (issue 21's sort,
//! SQLite's `runtime::store::queue_order`): the same sort key `(state, value, ord)`, `state` 0
//! when the row has the member, 1 when it has none (or not of the kind asked for), 2 when the
//! member is named twice. Members are read with `json_each` over the `json` type, which keeps
//! a key named twice (as SQLite's `json_each` does), so a member named twice is not read. A
//! document that is not JSON, or not an object, reads as `{}`. Text values compare by their
//! bytes (`COLLATE "C"` on UTF-8 text). An amount is an integer of at most 18 digits here
//! (SQLite's `integer` type reaches 19); a number written with a fraction or an exponent is
//! not one, as there.

use rusqlite::types::Value;

use super::PgStore;
use super::console::{Arg, List, Near, Place, queue_item_row, queue_list_cond, window};
use crate::runtime::store::{
    QueueItem, QueueOrder, SortValue, StoreError, WindowPage, check_page, int, queue_key_args,
};

/// The list's `FROM … WHERE …`: the queue's rows (`rid`, `aid`) with their sort key (`ks`,
/// `kv`). `$1` is the filter; the keys asked for ([`queue_key_args`]) are `$2`, `$3`, ...
fn from_sql(order: &QueueOrder) -> String {
    let (doc, path, keys, amount, spec) = match order {
        QueueOrder::Age => ("", "", 0, false, false),
        QueueOrder::Tool => ("a.request_json", " -> 'spec'", 1, false, true),
        QueueOrder::Member(k) => ("a.presentation_json", "", k.len(), false, false),
        QueueOrder::Amount(k) => ("a.presentation_json", "", k.len(), true, false),
    };
    let rows = "FROM approvals a";
    let cond = queue_list_cond();
    if keys == 0 {
        return format!(
            "FROM (SELECT a.ord AS rid, a.id AS aid, 0::bigint AS ks, 0::bigint AS kv {rows} WHERE {cond}) q WHERE true"
        );
    }
    let safe = format!(
        "(CASE WHEN pg_temp.countersign_json_ok({doc}) THEN {doc}::json ELSE '{{}}'::json END)"
    );
    let object = |j: String| {
        format!("(CASE WHEN json_typeof({j}) = 'object' THEN {j} ELSE '{{}}'::json END)")
    };
    let marks: Vec<String> = (0..keys).map(|i| format!("${}", i + 2)).collect();
    let mut cols = String::new();
    let mut joins = format!(
        " LEFT JOIN LATERAL json_each({}) WITH ORDINALITY AS j(key, value, n) ON j.key IN ({})",
        object(format!("{safe}{path}")),
        marks.join(", ")
    );
    let mut state = String::from("CASE");
    if spec {
        cols.push_str(", count(DISTINCT s.n) AS ns");
        joins.push_str(&format!(
            " LEFT JOIN LATERAL json_each({}) WITH ORDINALITY AS s(key, value, n) ON s.key = ${}",
            object(safe.clone()),
            keys + 2
        ));
        state.push_str(" WHEN ns > 1 THEN 2");
    }
    let mut value = String::from("CASE");
    for (i, m) in marks.iter().enumerate() {
        cols.push_str(&format!(
            ", count(DISTINCT CASE WHEN j.key = {m} THEN j.n END) AS n{i}, \
             max(CASE WHEN j.key = {m} THEN j.value #>> '{{}}' END) AS v{i}, \
             max(CASE WHEN j.key = {m} THEN json_typeof(j.value) END) AS t{i}"
        ));
        let ok = if amount {
            format!("t{i} = 'number' AND v{i} ~ '^-?[0-9]{{1,18}}$'")
        } else {
            "true".into()
        };
        state.push_str(&format!(
            " WHEN n{i} > 1 THEN 2 WHEN n{i} = 1 THEN CASE WHEN {ok} THEN 0 ELSE 1 END"
        ));
        let v = if amount {
            format!("-(v{i}::bigint)")
        } else {
            format!("v{i}")
        };
        value.push_str(&format!(" WHEN n{i} = 1 THEN {v}"));
    }
    state.push_str(" ELSE 1 END");
    value.push_str(" END");
    let (kv, zero) = if amount {
        (format!("({value})::bigint"), "0::bigint")
    } else {
        (format!("({value}) COLLATE \"C\""), "''::text COLLATE \"C\"")
    };
    format!(
        "FROM (SELECT rid, aid, ks, CASE WHEN ks = 0 THEN {kv} ELSE {zero} END AS kv \
         FROM (SELECT *, ({state})::bigint AS ks FROM (SELECT a.ord AS rid, a.id AS aid{cols} \
         {rows}{joins} WHERE {cond} GROUP BY a.ord, a.id) AS t1) AS t2) q WHERE true"
    )
}

/// The value a row was sorted by (an amount is stored negated, so the largest sorts first).
fn sort_value(state: &Value, value: &Value) -> SortValue {
    match (int(state), value) {
        (0, Value::Integer(i)) => SortValue::Int(i.checked_neg().unwrap_or(i64::MAX)),
        (0, Value::Text(t)) => SortValue::Bytes(t.clone().into_bytes()),
        (2, _) => SortValue::Twice,
        _ => SortValue::Missing,
    }
}

impl PgStore {
    /// A window of the queue in `order`, each row with the value it was sorted by, as
    /// SQLite's `Store::list_queue_sorted_near` reads it.
    pub fn list_queue_sorted_near(
        &self,
        filter: &str,
        order: &QueueOrder,
        near: Near<'_>,
    ) -> Result<WindowPage<(QueueItem, SortValue)>, StoreError> {
        check_page("queue", near.0, near.1)?;
        let mut args = vec![Arg::Text(filter.to_lowercase())];
        args.extend(queue_key_args(order).into_iter().map(Arg::Text));
        let list = List {
            what: "queue",
            from: from_sql(order),
            args,
            key: &["q.ks", "q.kv", "q.rid"],
            desc: false,
        };
        let anchor = format!(
            "SELECT q.ks, q.kv, q.rid {} AND q.aid = ${} LIMIT 1",
            list.from,
            list.args.len() + 1
        );
        self.snapshot(|tx, url| {
            let at = Place::near(tx, url, &anchor, &list.args, near)?;
            window(tx, url, &list, at, |tx, url, w| {
                let mut items = Vec::with_capacity(w.keys.len());
                for k in &w.keys {
                    let (Some(s), Some(v), Some(rid)) = (k.first(), k.get(1), k.get(2)) else {
                        continue;
                    };
                    if let Some(item) = queue_item_row(tx, url, int(rid))? {
                        items.push((item, sort_value(s, v)));
                    }
                }
                Ok(items)
            })
        })
    }
}
