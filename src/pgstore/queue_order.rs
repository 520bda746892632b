//! The queue in another order than its insertion order, on PostgreSQL (issue 21's sort,
//! SQLite's `runtime::store::queue_order`): the same sort key `(state, value, ord)`, `state` 0
//! when the row has the member, 1 when it has none (or not of the kind asked for), 2 when the
//! member is named twice. Members are read with `json_each` over the `json` type, which keeps
//! a key named twice (as SQLite's `json_each` does), so a member named twice is not read. A
//! document that is not JSON, or not an object, reads as `{}`. Text values compare by their
//! bytes (`COLLATE "C"` on UTF-8 text). An amount is an integer of at most 18 digits here
//! (SQLite's `integer` type reaches 19); a number written with a fraction or an exponent is
//! not one, as there.

use super::PgStore;
use super::console::{Arg, List, Place, queue_item_row, queue_list_cond, window};
use crate::runtime::store::{
    Near, QueueItem, QueueOrder, QueueSql, SortValue, StoreError, WindowPage, check_page,
    queue_key_args, sorted_queue_from as sorted_from, sorted_queue_items as sorted_items,
};

/// PostgreSQL's text of the sorted queue: `json_each` over the `json` type WITH ORDINALITY (a
/// key named twice stays twice), a document that is not an object read as `{}`, values as
/// text compared by their bytes (`COLLATE "C"`), amounts as `bigint`.
const PG_QUEUE: QueueSql = QueueSql {
    rows: "FROM approvals a",
    rid: "a.ord",
    group: "a.ord, a.id",
    zero: "0::bigint",
    truth: "true",
    mark: '$',
    count: "count",
    max: "max",
    spec_path: " -> 'spec'",
    safe: |doc| {
        format!(
            "(CASE WHEN pg_temp.countersign_json_ok({doc}) THEN {doc}::json ELSE '{{}}'::json END)"
        )
    },
    each: |doc, alias| {
        format!(
            "LATERAL json_each((CASE WHEN json_typeof({doc}) = 'object' THEN {doc} ELSE '{{}}'::json END)) \
             WITH ORDINALITY AS {alias}(key, value, n)"
        )
    },
    member_n: "j.n",
    member_value: "j.value #>> '{}'",
    member_type: "json_typeof(j.value)",
    is_int: |i| format!("t{i} = 'number' AND v{i} ~ '^-?[0-9]{{1,18}}$'"),
    negated: |i| format!("-(v{i}::bigint)"),
    bytes: |i| format!("v{i}"),
    kv: |value, amount| {
        if amount {
            (format!("({value})::bigint"), "0::bigint")
        } else {
            (format!("({value}) COLLATE \"C\""), "''::text COLLATE \"C\"")
        }
    },
    ks: |state| format!("({state})::bigint"),
    inner: (" AS t1", " AS t2"),
};

/// The list's `FROM … WHERE …` (SQLite's builder in PostgreSQL's text): `$1` is the filter;
/// the keys asked for ([`queue_key_args`]) are `$2`, `$3`, ...
fn from_sql(order: &QueueOrder) -> String {
    sorted_from(order, &PG_QUEUE, &queue_list_cond())
}

impl PgStore {
    /// A window of the queue in `order`, each row with the value it was sorted by, as
    /// SQLite's `Store::list_queue_sorted_near` reads it.
    pub fn list_queue_sorted_near(
        &self,
        filter: &str,
        order: &QueueOrder,
        near: Near<&str>,
    ) -> Result<WindowPage<(QueueItem, SortValue)>, StoreError> {
        check_page("queue", near.limit, near.offset)?;
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
            let at = Place::by_id(tx, url, &anchor, &list.args, near)?;
            window(tx, url, &list, at, |tx, url, w| {
                sorted_items(w, |rid| queue_item_row(tx, url, rid))
            })
        })
    }
}
