//! The reads the review console makes, on PostgreSQL (issue 19): the queue, the runs list, a
//! run's steps, events, approvals and model calls, one approval, the header's counts and the
//! damaged columns. Each list is walked by key with the window walk SQLite's lists use
//! (`runtime::store::walk`, from the list's start, a row already read or its end; the total
//! counted up to `COUNT_CAP`), in one repeatable-read snapshot, and each row is read by its
//! key (`ord`, SQLite's rowid, or `seq`) and laid out as SQLite's capped page select lays it
//! out, so it decodes through the same functions and a screen shows the same thing on both.
//!
//! SQLite caps a page's columns with its own SQL functions (`length`, `json_valid`,
//! `json_extract`, `json_object`); PostgreSQL 15 has no JSON test that does not raise, so here
//! a column is read with its head and its length (`substr`, `char_length`) and capped in Rust
//! the same way, and a JSON column over the cap is read whole only up to `SHOWN_REQUEST_MAX`
//! bytes (never past it, as SQLite never loads it) to pick its fields. Text in PostgreSQL is
//! UTF-8 (the database is refused otherwise and `copy` refuses a column that is not), and no
//! column is `bytea`, so every value arrives as the text stored; a SQLite column that is not
//! UTF-8 has no equivalent here.
//!
//! Which rows are damaged is asked of PostgreSQL with two session functions in `pg_temp`
//! (`countersign_json_ok`, `countersign_time_ok`: a cast to `json` or `timestamptz` that
//! answers false instead of raising), made when the console's reader connects
//! ([`PgStore::prepare_console_reads`]); they need only the TEMP privilege every role has by
//! default, and change nothing in the database.

use std::cell::RefCell;

use postgres::Transaction;
use postgres::types::ToSql;
use rusqlite::types::Value;

use super::operate::{store_error, text_id, values};
use super::reads::{capped, run_of_page_row, run_page_select, run_page_select_with};
use super::stmts::Cached;
use super::{PgStore, PgUrl, chain};
use crate::runtime::store::{
    APPROVAL_COLUMNS, ApprovalView, COUNT_CAP, ChainMark, ChainReport, DAMAGED_COLUMNS as COLUMNS,
    DAMAGED_RAW_HEAD, DamagedColumn, KeyPage, KeyWalk, MAX_PAGE_TEXT, MarkedEvent, ModelCallView,
    Near, Page, QueueItem, RunOverview, SHOWN_REQUEST_MAX, STEP_COLUMNS, StepKey, StoreError,
    ViewCounts, Window, WindowPage, approval_from_values, capped_approval_values,
    capped_step_values, check_page, damaged_anchor, damaged_error_of as error_of, event_values,
    int, mark_of, model_call_values, queue_item_of, step_from_values, walk,
};
use crate::runtime::types::{Approval, AsKey, Event, Key, Run, RunStatus, Step, Timestamp};

/// A parameter of a list's SQL.
#[derive(Debug, Clone)]
pub(super) enum Arg {
    Int(i64),
    Text(String),
}

impl Arg {
    fn of(v: &Value) -> Arg {
        match v {
            Value::Text(s) => Arg::Text(s.clone()),
            other => Arg::Int(int(other)),
        }
    }
}

fn refs(args: &[Arg]) -> Vec<&(dyn ToSql + Sync)> {
    args.iter()
        .map(|a| match a {
            Arg::Int(i) => i as &(dyn ToSql + Sync),
            Arg::Text(s) => s as &(dyn ToSql + Sync),
        })
        .collect()
}

fn text(s: &str) -> Arg {
    Arg::Text(s.to_string())
}

/// A list read by a unique key: `from` is `FROM … WHERE …` with parameters `$1..$n` (`args`),
/// `key` its key's columns in list order (descending if `desc`).
pub(super) struct List {
    pub what: &'static str,
    pub from: String,
    pub args: Vec<Arg>,
    pub key: &'static [&'static str],
    pub desc: bool,
}

/// A [`List`] walked inside one transaction.
struct Walker<'a, 'b> {
    tx: RefCell<&'a mut Transaction<'b>>,
    url: &'a PgUrl,
    list: &'a List,
}

impl Walker<'_, '_> {
    /// The list's parameters and, with `near`, the condition keeping rows at/after or before
    /// the key.
    fn near(&self, near: Option<(bool, &[Value])>) -> (Vec<Arg>, String) {
        let l = self.list;
        let mut args = l.args.clone();
        let Some((after, key)) = near else {
            return (args, String::new());
        };
        let op = match (after, l.desc) {
            (true, false) => ">=",
            (true, true) => "<=",
            (false, false) => "<",
            (false, true) => ">",
        };
        let marks: Vec<String> = key
            .iter()
            .map(|v| {
                args.push(Arg::of(v));
                format!("${}", args.len())
            })
            .collect();
        (
            args,
            format!(" AND ({}) {op} ({})", l.key.join(", "), marks.join(", ")),
        )
    }
}

impl KeyWalk for Walker<'_, '_> {
    fn keys(
        &self,
        near: Option<(bool, &[Value])>,
        reverse: bool,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<Vec<Value>>, StoreError> {
        let l = self.list;
        let (mut args, cond) = self.near(near);
        let dir = if l.desc != reverse { "DESC" } else { "ASC" };
        let order: Vec<String> = l.key.iter().map(|k| format!("{k} {dir}")).collect();
        args.push(Arg::Int(limit));
        args.push(Arg::Int(offset));
        let sql = format!(
            "SELECT {} {}{cond} ORDER BY {} LIMIT ${} OFFSET ${}",
            l.key.join(", "),
            l.from,
            order.join(", "),
            args.len() - 1,
            args.len()
        );
        let rows = self
            .tx
            .borrow_mut()
            .query(&sql, &refs(&args))
            .map_err(|e| store_error(self.url, l.what, e))?;
        Ok(rows.iter().map(values).collect())
    }

    fn count_to(&self, before: Option<&[Value]>, cap: i64) -> Result<i64, StoreError> {
        let l = self.list;
        let (mut args, cond) = self.near(before.map(|k| (false, k)));
        args.push(Arg::Int(cap.saturating_add(1)));
        let sql = format!(
            "SELECT count(*) FROM (SELECT 1 {}{cond} LIMIT ${}) AS t",
            l.from,
            args.len()
        );
        self.tx
            .borrow_mut()
            .query_one(&sql, &refs(&args))
            .and_then(|r| r.try_get::<_, i64>(0))
            .map_err(|e| store_error(self.url, l.what, e))
    }
}

/// Where a window of a list lies: the window `near` names (its anchor row named by its key),
/// the total counted up to `cap` (`None`: not counted).
pub(super) struct Place {
    pub near: Near<Vec<Value>>,
    pub cap: Option<i64>,
}

impl Place {
    /// A screen's window, its anchor's key read by `key` (see [`Near::anchored`]), the total
    /// counted up to [`COUNT_CAP`].
    fn near<A>(
        near: Near<A>,
        key: impl FnOnce(A) -> Result<Option<Vec<Value>>, StoreError>,
    ) -> Result<Place, StoreError> {
        Ok(Place {
            near: near.anchored(key)?,
            cap: Some(COUNT_CAP),
        })
    }

    /// A screen's window whose anchor is named by its id: its key read by `sql`, parameters
    /// `args` then the id.
    pub(super) fn by_id(
        tx: &mut Transaction<'_>,
        url: &PgUrl,
        sql: &str,
        args: &[Arg],
        near: Near<&str>,
    ) -> Result<Place, StoreError> {
        Place::near(near, |id| anchor_key(tx, url, sql, args.to_vec(), id))
    }

    /// Rows from `offset`, with the total counted whole (`count`) or not at all.
    fn from(limit: i64, offset: i64, count: bool) -> Place {
        Place {
            near: Near::new(limit, offset),
            cap: count.then_some(i64::MAX - 1),
        }
    }
}

/// The window of `list` at `at` (see `runtime::store::walk`), its rows read by `rows`.
pub(super) fn window<T>(
    tx: &mut Transaction<'_>,
    url: &PgUrl,
    list: &List,
    at: Place,
    rows: impl FnOnce(&mut Transaction<'_>, &PgUrl, &Window) -> Result<Vec<T>, StoreError>,
) -> Result<WindowPage<T>, StoreError> {
    let w = {
        let walker = Walker {
            tx: RefCell::new(&mut *tx),
            url,
            list,
        };
        walk(&walker, at.near, at.cap)?
    };
    let items = rows(tx, url, &w)?;
    Ok(WindowPage::of(w, items))
}

/// The exact length of `list`.
fn count(tx: &mut Transaction<'_>, url: &PgUrl, list: &List) -> Result<i64, StoreError> {
    tx.query_one(&format!("SELECT count(*) {}", list.from), &refs(&list.args))
        .and_then(|r| r.try_get::<_, i64>(0))
        .map_err(|e| store_error(url, list.what, e))
}

/// The key of the anchor row with id `id`: `sql` (parameters `args`, then the id) reads its
/// key columns; `None` when the row is gone.
fn anchor_key(
    tx: &mut Transaction<'_>,
    url: &PgUrl,
    sql: &str,
    mut args: Vec<Arg>,
    id: &str,
) -> Result<Option<Vec<Value>>, StoreError> {
    args.push(text(id));
    let row = tx
        .query_opt(sql, &refs(&args))
        .map_err(|e| store_error(url, "anchor", e))?;
    Ok(row.map(|r| values(&r)))
}

// ---- capping, as SQLite's page selects cap ----

fn nchars(s: &str) -> i64 {
    i64::try_from(s.chars().count()).unwrap_or(i64::MAX)
}

fn head(s: &str, n: i64) -> String {
    s.chars().take(usize::try_from(n).unwrap_or(0)).collect()
}

fn txt(v: &[Value], i: usize) -> String {
    match v.get(i) {
        Some(Value::Text(s)) => s.clone(),
        _ => String::new(),
    }
}

fn num(v: &[Value], i: usize) -> i64 {
    v.get(i).map(int).unwrap_or(0)
}

/// SQLite's JSON cap: over [`MAX_PAGE_TEXT`] characters, `{"truncated":true,"length":N,
/// "head":…}`; `head` is the first characters read, `len` the column's length.
fn jc(head: String, len: i64) -> Value {
    if len > MAX_PAGE_TEXT {
        let stand_in = serde_json::json!({"truncated": true, "length": len, "head": head});
        Value::Text(stand_in.to_string())
    } else {
        Value::Text(head)
    }
}

/// `COALESCE(substr(json_extract(json, path), 1, MAX), '')` of SQLite.
fn jfield(json: &serde_json::Value, path: &[&str]) -> String {
    let mut node = json;
    for p in path {
        match node.get(p) {
            Some(n) => node = n,
            None => return String::new(),
        }
    }
    let s = match node {
        serde_json::Value::Null => return String::new(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
        other => other.to_string(),
    };
    head(&s, MAX_PAGE_TEXT)
}

/// A JSON column as SQLite's page select gives it: read whole up to `SHOWN_REQUEST_MAX`
/// bytes (`whole`, `None` past it; `bytes` its size); over the cap its `fields` (picked from
/// the parsed value), past `SHOWN_REQUEST_MAX` `huge`, and `''` when it is over the cap and not
/// JSON. Returns the value and the length SQLite's select gives (bytes past
/// `SHOWN_REQUEST_MAX`, else characters).
fn json_col(
    whole: Option<String>,
    bytes: i64,
    fields: impl FnOnce(&serde_json::Value) -> serde_json::Value,
    huge: impl FnOnce() -> serde_json::Value,
) -> (Value, i64) {
    let Some(whole) = whole.filter(|_| bytes <= SHOWN_REQUEST_MAX) else {
        return (Value::Text(huge().to_string()), bytes);
    };
    let n = nchars(&whole);
    if n <= MAX_PAGE_TEXT {
        return (Value::Text(whole), n);
    }
    match serde_json::from_str::<serde_json::Value>(&whole) {
        Ok(v) => (Value::Text(fields(&v).to_string()), n),
        Err(_) => (Value::Text(String::new()), n),
    }
}

/// The name in a spec read whole (at most [`MAX_PAGE_TEXT`] bytes), `''` when it has none.
fn spec_name(spec: &str) -> String {
    serde_json::from_str::<serde_json::Value>(spec)
        .map(|v| jfield(&v, &["name"]))
        .unwrap_or_default()
}

/// A JSON column read whole up to `SHOWN_REQUEST_MAX` bytes, then its size in bytes.
fn whole(c: &str) -> String {
    format!(
        "CASE WHEN octet_length({c}) > {SHOWN_REQUEST_MAX} THEN NULL ELSE {c} END, octet_length({c})::bigint"
    )
}

/// A JSON column's head and length, for [`jc`].
fn head_len(c: &str) -> String {
    format!("substr({c}, 1, {MAX_PAGE_TEXT}), char_length({c})::bigint")
}

fn opt_text(v: &[Value], i: usize) -> Option<String> {
    match v.get(i) {
        Some(Value::Text(s)) => Some(s.clone()),
        _ => None,
    }
}

/// The approvals select: SQLite's `approval_select` read with heads and lengths.
fn approval_sql() -> String {
    approval_select("")
}

/// [`approval_sql`] with more columns (`extra`, each after a comma) after its own.
fn approval_select(extra: &str) -> String {
    format!(
        "SELECT {}, {}, {}, {}, {}, {}, {}, \
         (SELECT t.spec_json FROM steps s JOIN tool_specs t ON t.hash = s.spec_hash \
          WHERE s.id = approvals.step_id AND octet_length(t.spec_json) <= {MAX_PAGE_TEXT} ORDER BY s.ord LIMIT 1), \
         {}, {}, {}, {}, {}, {}, {}{extra} FROM approvals",
        capped("id"),
        capped("run_id"),
        capped("step_id"),
        capped("kind"),
        head_len("capability_json"),
        head_len("presentation_json"),
        whole("request_json"),
        capped("hash"),
        capped("status"),
        capped("created_at"),
        capped("decided_at"),
        capped("decided_by"),
        capped("note"),
        capped("expires_at"),
    )
}

/// An approval row of [`approval_sql`] as SQLite's capped select gives it, decoded.
fn approval_row(r: &postgres::Row) -> Approval {
    let v = values(r);
    let (run_id, step_id) = (txt(&v, 1), txt(&v, 2));
    let spec = opt_text(&v, 10).unwrap_or_default();
    let (request, len) = json_col(
        opt_text(&v, 8),
        num(&v, 9),
        |j| {
            serde_json::json!({
                "run_id": jfield(j, &["run_id"]),
                "step_id": jfield(j, &["step_id"]),
                "spec": {"name": jfield(j, &["spec", "name"])},
                "args": {"truncated": true, "length": 0},
            })
        },
        || {
            serde_json::json!({
                "run_id": run_id,
                "step_id": step_id,
                "spec": {"name": spec_name(&spec)},
                "args": {"truncated": true, "length": num(&v, 9)},
            })
        },
    );
    // The stand-in of a request over the cap names its length in characters.
    let request = match request {
        Value::Text(s) if len <= SHOWN_REQUEST_MAX && len > MAX_PAGE_TEXT && !s.is_empty() => {
            let mut j: serde_json::Value = serde_json::from_str(&s).unwrap_or_default();
            if let Some(args) = j.get_mut("args") {
                args["length"] = serde_json::json!(len);
            }
            Value::Text(j.to_string())
        }
        other => other,
    };
    let laid = vec![
        v[0].clone(),
        v[1].clone(),
        v[2].clone(),
        v[3].clone(),
        jc(txt(&v, 4), num(&v, 5)),
        jc(txt(&v, 6), num(&v, 7)),
        request,
        v[11].clone(),
        v[12].clone(),
        v[13].clone(),
        v[14].clone(),
        v[15].clone(),
        v[16].clone(),
        v[17].clone(),
        Value::Integer(len),
    ];
    capped_approval_values(&laid)
}

/// The steps select: SQLite's `step_select` read with whole JSON up to its bound.
fn step_sql() -> String {
    format!(
        "SELECT {}, {}, idx, {}, {}, {}, {}, {}, {}, {}, {}, {}, \
         (SELECT t.spec_json FROM tool_specs t WHERE t.hash = steps.spec_hash \
          AND octet_length(t.spec_json) <= {MAX_PAGE_TEXT}) FROM steps",
        capped("id"),
        capped("run_id"),
        capped("status"),
        whole("decision_json"),
        whole("policy_json"),
        whole("observation_json"),
        capped("observation_hash"),
        capped("started_at"),
        capped("finished_at"),
        capped("spec_hash"),
        capped("policy_id"),
    )
}

fn step_row(r: &postgres::Row) -> Step {
    let v = values(r);
    let spec = opt_text(&v, 15).unwrap_or_default();
    let (decision, dl) = json_col(
        opt_text(&v, 4),
        num(&v, 5),
        |j| serde_json::json!({"kind": jfield(j, &["kind"]), "tool": jfield(j, &["tool"])}),
        || serde_json::json!({"kind": "", "tool": spec_name(&spec)}),
    );
    let (policy, pl) = json_col(
        opt_text(&v, 6),
        num(&v, 7),
        |j| serde_json::json!({"outcome": jfield(j, &["outcome"])}),
        || serde_json::json!({"outcome": ""}),
    );
    let (observation, ol) = json_col(
        opt_text(&v, 8),
        num(&v, 9),
        |j| serde_json::json!({"kind": jfield(j, &["kind"]), "summary": jfield(j, &["summary"])}),
        || serde_json::json!({"kind": "", "summary": ""}),
    );
    let laid = vec![
        v[0].clone(),
        v[1].clone(),
        v[2].clone(),
        v[3].clone(),
        decision,
        policy,
        observation,
        v[10].clone(),
        v[11].clone(),
        v[12].clone(),
        v[13].clone(),
        v[14].clone(),
        Value::Integer(dl),
        Value::Integer(pl),
        Value::Integer(ol),
    ];
    capped_step_values(&laid)
}

fn event_sql() -> String {
    format!(
        "SELECT seq, {}, {}, {}, {}, {}, {} FROM events",
        capped("run_id"),
        capped("step_id"),
        capped("at"),
        capped("type"),
        head_len("payload_json"),
        capped("hash"),
    )
}

fn event_row(r: &postgres::Row) -> crate::runtime::types::Event {
    let v = values(r);
    let laid = vec![
        v[0].clone(),
        v[1].clone(),
        v[2].clone(),
        v[3].clone(),
        v[4].clone(),
        jc(txt(&v, 5), num(&v, 6)),
        v[7].clone(),
    ];
    event_values(&laid)
}

fn model_call_sql() -> String {
    format!(
        "SELECT {}, {}, {}, attempt, {}, {}, input_tokens, output_tokens, cached_input_tokens, \
         cost_micros, latency_ms, {}, {}, {} FROM model_calls",
        capped("id"),
        capped("run_id"),
        capped("step_id"),
        capped("status"),
        capped("model"),
        capped("error"),
        capped("dispatched_at"),
        capped("completed_at"),
    )
}

// ---- the lists ----

/// The queue on PostgreSQL: pending approvals of waiting runs (the run tested by key, so a
/// window's count stops at its cap instead of joining every run).
const QUEUE_FROM: &str = "FROM approvals a \
    WHERE a.status = 'pending' AND EXISTS (SELECT 1 FROM runs r WHERE r.id = a.run_id \
    AND r.status = 'WAITING_FOR_APPROVAL')";

/// The queue's text filter, `$1` the lowercased text, matched on the ids, kind and the
/// request's first 8192 characters as stored: the console narrows by its own `/` scan
/// (`console::scan`) and always passes an empty filter, which adds no condition (so the
/// server plans the list without it).
const QUEUE_FILTER: &str = "strpos(lower(a.id || ' ' || a.run_id || ' ' || a.kind || ' ' || \
    left(a.request_json, 8192)), $1) > 0";

/// The queue's condition (after `WHERE`) on `a`, its filter `$1` (all when empty).
pub(super) fn queue_list_cond() -> String {
    let base = QUEUE_FROM
        .split_once(" WHERE ")
        .map(|x| x.1)
        .unwrap_or("false");
    format!("{base} AND ($1 = '' OR {QUEUE_FILTER})")
}

/// The queue item of the approval with this `ord`, if it is still there.
pub(super) fn queue_item_row(
    tx: &mut Transaction<'_>,
    url: &PgUrl,
    ord: i64,
) -> Result<Option<QueueItem>, StoreError> {
    let sql = format!("{} WHERE ord = $1", queue_sql());
    Ok(tx
        .query_opt(&sql, &[&ord])
        .map_err(|e| store_error(url, "queue", e))?
        .map(|r| queue_item(&r)))
}

fn queue_list(filter: &str) -> List {
    let mut list = List {
        what: "queue",
        from: QUEUE_FROM.into(),
        args: Vec::new(),
        key: &["a.ord"],
        desc: false,
    };
    if !filter.is_empty() {
        list.from = format!("{QUEUE_FROM} AND {QUEUE_FILTER}");
        list.args.push(text(&filter.to_lowercase()));
    }
    list
}

/// The runs overview: of one status (all when `''`), and with the lowercased filter on id,
/// goal (first 4096 characters), status and reason (all when `''`); a condition left out is
/// not in the SQL, so the server plans the list without it.
fn runs_list(status: &str, filter: &str) -> List {
    let mut list = List {
        what: "runs overview",
        from: "FROM runs r WHERE true".into(),
        args: Vec::new(),
        key: &["r.ord"],
        desc: true,
    };
    if !status.is_empty() {
        list.args.push(text(status));
        list.from
            .push_str(&format!(" AND r.status = ${}", list.args.len()));
    }
    if !filter.is_empty() {
        list.args.push(text(&filter.to_lowercase()));
        list.from.push_str(&format!(
            " AND strpos(lower(r.id || ' ' || left(r.goal, 4096) || ' ' || r.status || ' ' || r.reason), ${}) > 0",
            list.args.len()
        ));
    }
    list
}

/// One of a run's lists read by key, as SQLite's `RunList` describes it.
struct RunTab<T> {
    /// The list as a bad page request names it (`steps`).
    name: &'static str,
    /// What its errors say it was doing (`list steps`).
    what: &'static str,
    table: &'static str,
    /// The key's columns in list order; the last is `ord`.
    key: &'static [&'static str],
    /// The capped select (`SELECT … FROM <table>`) and the row it gives.
    select: fn() -> String,
    row: fn(&postgres::Row) -> T,
}

impl<T> RunTab<T> {
    fn list(&self, run: &str) -> List {
        List {
            what: self.what,
            from: format!("FROM {} WHERE run_id = $1", self.table),
            args: vec![text(run)],
            key: self.key,
            desc: false,
        }
    }

    /// The window's rows, each read by its `ord`.
    fn rows(
        &self,
        tx: &mut Transaction<'_>,
        url: &PgUrl,
        w: &Window,
    ) -> Result<Vec<T>, StoreError> {
        let select = (self.select)();
        each(tx, url, w, self.key.len() - 1, &select, self.what, self.row)
    }
}

const STEPS: RunTab<Step> = RunTab {
    name: "steps",
    what: "list steps",
    table: "steps",
    key: &["idx", "ord"],
    select: step_sql,
    row: step_row,
};

const APPROVALS: RunTab<Approval> = RunTab {
    name: "approvals",
    what: "list approvals",
    table: "approvals",
    key: &["ord"],
    select: approval_sql,
    row: approval_row,
};

fn model_call_row(r: &postgres::Row) -> ModelCallView {
    model_call_values(&values(r))
}

const CALLS: RunTab<ModelCallView> = RunTab {
    name: "model calls",
    what: "list model calls",
    table: "model_calls",
    key: &["ord"],
    select: model_call_sql,
    row: model_call_row,
};

fn events_list(run: &str) -> List {
    List {
        what: "list events",
        from: "FROM events WHERE run_id = $1".into(),
        args: vec![text(run)],
        key: &["seq"],
        desc: false,
    }
}

/// The rows of `select` (`SELECT … FROM <table>`) whose `cond` holds for each of `keys` (a
/// PostgreSQL array of type `array`), in one statement, each with the index of its key in
/// `keys`: `cond` names the key `k.cs_key` (`WHERE ord = k.cs_key`). A window's rows are read
/// so, never one statement a row: a round trip a row made the console's first frame as slow
/// as its window is long times the server's delay (issue 19's first-frame bench).
fn by_keys(
    client: &mut impl postgres::GenericClient,
    url: &PgUrl,
    (select, cond): (&str, &str),
    (array, keys): (&str, &(dyn ToSql + Sync)),
    what: &'static str,
) -> Result<Vec<(usize, postgres::Row)>, StoreError> {
    let sql = format!(
        "SELECT x.*, k.cs_i FROM unnest($1::{array}) WITH ORDINALITY AS k(cs_key, cs_i) \
         CROSS JOIN LATERAL ({select} {cond}) AS x ORDER BY k.cs_i"
    );
    let rows = client
        .query(&sql, &[keys])
        .map_err(|e| store_error(url, what, e))?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let i = r.try_get::<_, i64>(r.len() - 1).ok()?;
            Some((usize::try_from(i - 1).ok()?, r))
        })
        .collect())
}

/// Each key's row of `select`, read by the integer in key column `col` (matched against the
/// table's `ord`), in the window's order; a key whose row is gone is left out.
fn each<T>(
    tx: &mut Transaction<'_>,
    url: &PgUrl,
    w: &Window,
    col: usize,
    select: &str,
    what: &'static str,
    row: impl Fn(&postgres::Row) -> T,
) -> Result<Vec<T>, StoreError> {
    let keys: Vec<i64> = w
        .keys
        .iter()
        .map(|k| k.get(col).map(int).unwrap_or(0))
        .collect();
    let rows = by_keys(
        tx,
        url,
        (select, "WHERE ord = k.cs_key"),
        ("bigint[]", &keys),
        what,
    )?;
    Ok(rows.iter().map(|(_, r)| row(r)).collect())
}

/// Each of `ids`' row of `select` by `cond` (`k.cs_key` the id), at the id's place (`None`:
/// no row).
fn by_ids<T>(
    client: &mut impl postgres::GenericClient,
    url: &PgUrl,
    ids: &[Key],
    select: (&str, &str),
    what: &'static str,
    row: impl Fn(&postgres::Row) -> T,
) -> Result<Vec<Option<T>>, StoreError> {
    Ok(by_ids_all(client, url, ids, select, what, row)?
        .into_iter()
        .map(|mut v| v.pop())
        .collect())
}

/// Each of `ids`' rows of `select` by `cond` (`k.cs_key` the id), at the id's place; an id
/// that is not UTF-8 names no row in PostgreSQL.
fn by_ids_all<T>(
    client: &mut impl postgres::GenericClient,
    url: &PgUrl,
    ids: &[Key],
    (select, cond): (&str, &str),
    what: &'static str,
    row: impl Fn(&postgres::Row) -> T,
) -> Result<Vec<Vec<T>>, StoreError> {
    let (places, texts): (Vec<usize>, Vec<&str>) = ids
        .iter()
        .enumerate()
        .filter_map(|(i, k)| Some((i, text_id(k.as_bytes())?)))
        .unzip();
    let mut out: Vec<Vec<T>> = ids.iter().map(|_| Vec::new()).collect();
    for (i, r) in by_keys(client, url, (select, cond), ("text[]", &texts), what)? {
        if let Some(slot) = places.get(i).and_then(|&p| out.get_mut(p)) {
            slot.push(row(&r));
        }
    }
    Ok(out)
}

fn run_status(
    tx: &mut Transaction<'_>,
    url: &PgUrl,
    run: &str,
) -> Result<Option<RunStatus>, StoreError> {
    Ok(tx
        .query_opt("SELECT status FROM runs WHERE id = $1", &[&run])
        .map_err(|e| store_error(url, "run status", e))?
        .map(|r| RunStatus::parse(&r.try_get::<_, String>(0).unwrap_or_default())))
}

/// The queue's select: an approval's columns, then its step's `idx` (SQLite's queue reads
/// it by the step's id).
fn queue_sql() -> String {
    approval_select(
        ", (SELECT s2.idx FROM steps s2 WHERE s2.id = approvals.step_id ORDER BY s2.ord LIMIT 1)",
    )
}

/// A queue item of a [`queue_sql`] row.
fn queue_item(r: &postgres::Row) -> QueueItem {
    let idx = r.try_get::<_, Option<i64>>(QUEUE_IDX).ok().flatten();
    queue_item_of(approval_row(r), idx)
}

/// Where [`queue_sql`] puts the step's `idx`: after the approval's 18 columns.
const QUEUE_IDX: usize = 18;

/// A step whose columns PostgreSQL does not read as JSON or a time (`s` = steps).
const STEP_BAD: &str = "(s.decision_json <> '' AND NOT pg_temp.countersign_json_ok(s.decision_json)) OR \
    (s.policy_json <> '' AND NOT pg_temp.countersign_json_ok(s.policy_json)) OR \
    (s.observation_json <> '' AND NOT pg_temp.countersign_json_ok(s.observation_json)) OR \
    NOT pg_temp.countersign_time_ok(s.started_at) OR \
    (s.finished_at <> '' AND NOT pg_temp.countersign_time_ok(s.finished_at))";

/// An approval whose columns PostgreSQL does not read as JSON or a time (`a` = approvals).
const APPROVAL_BAD: &str = "NOT pg_temp.countersign_json_ok(a.request_json) OR \
    NOT pg_temp.countersign_time_ok(a.created_at) OR \
    (a.expires_at <> '' AND NOT pg_temp.countersign_time_ok(a.expires_at)) OR \
    (a.decided_at <> '' AND NOT pg_temp.countersign_time_ok(a.decided_at))";

/// A run status the runtime does not know (`r` = runs).
const RUN_STATUS_BAD: &str = "r.status NOT IN \
    ('RUNNING','WAITING_FOR_APPROVAL','INTERRUPTED','COMPLETED','FAILED','CANCELLED')";

/// The runs overview's select (`r` = runs): a run's page columns, then how many of its
/// approvals are pending (while it waits) and whether any of its rows is damaged.
fn overview_sql() -> String {
    let extra = format!(
        ", CASE WHEN r.status = 'WAITING_FOR_APPROVAL' THEN \
         (SELECT count(*) FROM approvals a WHERE a.run_id = r.id AND a.status = 'pending') ELSE 0 END, \
         ({RUN_STATUS_BAD}) OR \
         EXISTS (SELECT 1 FROM steps s WHERE s.run_id = r.id AND ({STEP_BAD})) OR \
         EXISTS (SELECT 1 FROM approvals a WHERE a.run_id = r.id AND ({APPROVAL_BAD}))"
    );
    format!("{} r", run_page_select_with(&extra))
}

/// A runs overview row of an [`overview_sql`] row.
fn overview(r: &postgres::Row) -> RunOverview {
    RunOverview {
        run: run_of_page_row(r).1,
        pending: r.try_get(22).unwrap_or(0),
        damaged: r.try_get(23).unwrap_or(false),
    }
}

/// The damaged columns' candidates (as SQLite's `damaged.rs` lists them): run, table rank
/// (steps 1, runs 2, approvals 3), row key, candidate number (1..=10).
const CANDIDATES: &str = "SELECT s.run_id AS run, 1 AS t, s.ord AS k, c.n AS n FROM steps s \
    JOIN (VALUES (1), (2), (3), (4), (5)) AS c(n) ON \
    (c.n = 1 AND s.decision_json <> '' AND NOT pg_temp.countersign_json_ok(s.decision_json)) OR \
    (c.n = 2 AND s.policy_json <> '' AND NOT pg_temp.countersign_json_ok(s.policy_json)) OR \
    (c.n = 3 AND s.observation_json <> '' AND NOT pg_temp.countersign_json_ok(s.observation_json)) OR \
    (c.n = 4 AND NOT pg_temp.countersign_time_ok(s.started_at)) OR \
    (c.n = 5 AND s.finished_at <> '' AND NOT pg_temp.countersign_time_ok(s.finished_at)) \
    UNION ALL \
    SELECT a.run_id, 3, a.ord, c.n FROM approvals a \
    JOIN (VALUES (6), (7), (8), (9)) AS c(n) ON \
    (c.n = 6 AND NOT pg_temp.countersign_json_ok(a.request_json)) OR \
    (c.n = 7 AND NOT pg_temp.countersign_time_ok(a.created_at)) OR \
    (c.n = 8 AND a.expires_at <> '' AND NOT pg_temp.countersign_time_ok(a.expires_at)) OR \
    (c.n = 9 AND a.decided_at <> '' AND NOT pg_temp.countersign_time_ok(a.decided_at)) \
    UNION ALL \
    SELECT r.id, 2, r.ord, 10 FROM runs r WHERE r.status NOT IN \
    ('RUNNING','WAITING_FOR_APPROVAL','INTERRUPTED','COMPLETED','FAILED','CANCELLED')";

fn damaged_list() -> List {
    List {
        what: "damaged rows",
        from: format!("FROM ({CANDIDATES}) AS d WHERE true"),
        args: Vec::new(),
        key: &["t", "k", "n"],
        desc: false,
    }
}

fn damaged_column(
    tx: &mut Transaction<'_>,
    url: &PgUrl,
    ord: i64,
    n: usize,
) -> Result<Option<DamagedColumn>, StoreError> {
    let (table, column, sqlcol) = COLUMNS[n.clamp(1, COLUMNS.len()) - 1];
    let q = |tx: &mut Transaction<'_>, sql: String| {
        tx.query_opt(&format!("{sql} WHERE ord = $1"), &[&ord])
            .map_err(|e| store_error(url, "damaged rows", e))
    };
    let decoded = match table {
        "runs" => q(tx, run_page_select())?.map(|r| {
            let run = run_of_page_row(&r).1;
            let id = Key::new(run.id_bytes());
            (id.clone(), id, run.decode_error)
        }),
        "steps" => q(tx, step_sql())?.map(|r| {
            let s = step_row(&r);
            (
                Key::new(s.run_id_bytes()),
                Key::new(s.id_bytes()),
                s.decode_error,
            )
        }),
        _ => q(tx, approval_sql())?.map(|r| {
            let a = approval_row(&r);
            (
                Key::new(a.run_id_bytes()),
                Key::new(a.id_bytes()),
                a.decode_error,
            )
        }),
    };
    let Some((run_id, row_id, decode_error)) = decoded else {
        return Ok(None);
    };
    let raw = tx
        .query_one(
            &format!(
                "SELECT substring(convert_to({sqlcol}, 'UTF8') FROM 1 FOR {DAMAGED_RAW_HEAD}), \
                 octet_length({sqlcol})::bigint FROM {table} WHERE ord = $1"
            ),
            &[&ord],
        )
        .map_err(|e| store_error(url, "damaged rows", e))?;
    let error = error_of(&decode_error, column).unwrap_or_else(|| {
        "PostgreSQL does not read it as JSON or as a time, though the decoder accepts it".into()
    });
    Ok(Some(DamagedColumn {
        run_id,
        table,
        row_id,
        column,
        error,
        raw: raw.try_get::<_, Vec<u8>>(0).unwrap_or_default(),
        raw_len: raw.try_get(1).unwrap_or(0),
    }))
}

impl PgStore {
    /// Makes this session's two functions the damaged-row reads use (`pg_temp`, gone when
    /// the connection closes; nothing in the database changes), and has the server stop a
    /// read of this session within 100 ms of the console going away
    /// (`client_connection_check_interval`): the header's counts scan the whole queue, and a
    /// console that exits (or is killed) in the middle of one left the server scanning for
    /// up to a second, for nobody, on a server other reviewers share. Best effort: a server
    /// that has no such setting (before PostgreSQL 14, or a platform without the kernel's
    /// support) keeps its default, and the reads work as before.
    pub fn prepare_console_reads(&self) -> Result<(), StoreError> {
        let _ = self
            .lock()
            .batch_execute("SET client_connection_check_interval = '100ms'");
        self.lock()
            .batch_execute(
                "CREATE OR REPLACE FUNCTION pg_temp.countersign_json_ok(t text) RETURNS boolean \
                 LANGUAGE plpgsql IMMUTABLE AS $f$ BEGIN PERFORM t::json; RETURN true; \
                 EXCEPTION WHEN others THEN RETURN false; END $f$; \
                 CREATE OR REPLACE FUNCTION pg_temp.countersign_time_ok(t text) RETURNS boolean \
                 LANGUAGE plpgsql STABLE AS $f$ BEGIN PERFORM t::timestamptz; RETURN true; \
                 EXCEPTION WHEN others THEN RETURN false; END $f$;",
            )
            .map_err(|e| store_error(&self.url, "prepare the console's reads", e))
    }

    /// Plans this session's reads without parallel workers (`max_parallel_workers_per_gather
    /// = 0`). For the console's reading lane, whose reads are windows of some hundred rows by
    /// key: there, starting workers cost more than the read (the queue's first keys on 1M runs
    /// took 6.4 ms with two workers against 0.3 ms without, since the planner cannot tell how
    /// few rows a waiting run's pending approvals yield). The counting lane keeps them for its
    /// scans.
    pub fn read_serially(&self) -> Result<(), StoreError> {
        self.lock()
            .batch_execute("SET max_parallel_workers_per_gather = 0")
            .map_err(|e| store_error(&self.url, "plan reads serially", e))
    }

    /// The header's counts: runs by status, pending approvals of waiting runs, the oldest
    /// one's creation time and the largest `ord` among them.
    pub fn view_counts(&self) -> Result<ViewCounts, StoreError> {
        self.snapshot(|tx, url| {
            let err = |e| store_error(url, "counts", e);
            let mut out = ViewCounts::default();
            for r in tx
                .query("SELECT status, count(*) FROM runs GROUP BY status", &[])
                .map_err(err)?
            {
                let status: String = r.try_get(0).unwrap_or_default();
                let n: i64 = r.try_get(1).unwrap_or(0);
                out.runs += n;
                match status.as_str() {
                    "WAITING_FOR_APPROVAL" => out.waiting += n,
                    "RUNNING" | "INTERRUPTED" => out.running += n,
                    "FAILED" => out.failed += n,
                    _ => {}
                }
            }
            let pending = "FROM approvals a JOIN runs r ON r.id = a.run_id \
                           WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL'";
            let row = tx
                .query_one(
                    &format!("SELECT count(*), COALESCE(max(a.ord), 0) {pending}"),
                    &[],
                )
                .map_err(err)?;
            out.pending = row.try_get(0).unwrap_or(0);
            out.newest_pending = row.try_get(1).unwrap_or(0);
            // The oldest by time: the earliest stored seconds first (agentrt writes UTC), then
            // exactly among the first few; a time that does not parse is left out, as
            // SQLite's `julianday` leaves it out (a cheap pattern first, then the parse here:
            // the session's time test would run once per pending approval).
            let rows = tx
                .query(
                    &format!(
                        "SELECT a.created_at {pending} AND a.created_at ~ '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}T' \
                         ORDER BY left(a.created_at, 19), a.ord LIMIT 64"
                    ),
                    &[],
                )
                .map_err(err)?;
            out.oldest_pending = rows
                .iter()
                .filter_map(|r| r.try_get::<_, String>(0).ok())
                .filter_map(|s| Timestamp::parse(&s).ok().map(|t| (t, s)))
                .min_by_key(|(t, _)| *t)
                .map(|(_, s)| s);
            Ok(out)
        })
    }

    /// A window of the queue (pending approvals of waiting runs, oldest first), as SQLite's
    /// `Store::list_queue_rows_near` reads it.
    pub fn list_queue_rows_near(
        &self,
        filter: &str,
        near: Near<&str>,
    ) -> Result<WindowPage<QueueItem>, StoreError> {
        check_page("queue", near.limit, near.offset)?;
        let list = queue_list(filter);
        let anchor = format!(
            "SELECT a.ord {} AND a.id = ${} ORDER BY a.ord LIMIT 1",
            list.from,
            list.args.len() + 1
        );
        self.snapshot(|tx, url| {
            let at = Place::by_id(tx, url, &anchor, &list.args, near)?;
            window(tx, url, &list, at, queue_rows)
        })
    }

    /// The queue's first rows after `offset`, and whether more follow.
    pub fn list_queue_rows(
        &self,
        filter: &str,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<QueueItem>, bool), StoreError> {
        check_page("queue", limit, offset)?;
        let list = queue_list(filter);
        self.snapshot(|tx, url| {
            let w = window(
                tx,
                url,
                &list,
                Place::from(limit, offset, false),
                queue_rows,
            )?;
            Ok((w.items, w.more))
        })
    }

    /// How many approvals the queue holds for `filter`.
    pub fn count_queue(&self, filter: &str) -> Result<i64, StoreError> {
        let list = queue_list(filter);
        self.snapshot(|tx, url| count(tx, url, &list))
    }

    /// A window of the runs overview, newest first, as SQLite's reads it.
    pub fn list_runs_overview_near(
        &self,
        status: &str,
        filter: &str,
        near: Near<&str>,
    ) -> Result<WindowPage<RunOverview>, StoreError> {
        check_page("runs", near.limit, near.offset)?;
        let list = runs_list(status, filter);
        self.snapshot(|tx, url| {
            let at = Place::by_id(tx, url, "SELECT ord FROM runs WHERE id = $1", &[], near)?;
            let select = overview_sql();
            window(tx, url, &list, at, |tx, url, w| {
                each(tx, url, w, 0, &select, "runs overview", overview)
            })
        })
    }

    /// How many runs the overview lists for `status` and `filter`.
    pub fn count_runs_overview(&self, status: &str, filter: &str) -> Result<i64, StoreError> {
        let list = runs_list(status, filter);
        self.snapshot(|tx, url| count(tx, url, &list))
    }

    /// One run as a page reads it.
    pub fn get_run_capped(&self, id: impl AsKey) -> Result<Run, StoreError> {
        let id = id.key_bytes();
        let missing = || StoreError::NotFound {
            what: crate::runtime::types::Said::from("run ").id(id),
        };
        let id = text_id(id).ok_or_else(missing)?;
        let sql = format!("{} WHERE id = $1", run_page_select());
        let row = self
            .lock()
            .query_opt(&sql, &[&id])
            .map_err(|e| store_error(&self.url, "get run", e))?
            .ok_or_else(missing)?;
        Ok(run_of_page_row(&row).1)
    }

    /// Each of `ids`' run as a page reads it (`None`: not there), in one statement.
    pub fn runs_capped(&self, ids: &[Key]) -> Result<Vec<Option<Run>>, StoreError> {
        let select = run_page_select();
        by_ids(
            &mut **self.lock(),
            &self.url,
            ids,
            (&select, "WHERE id = k.cs_key"),
            "get runs",
            |r| run_of_page_row(r).1,
        )
    }

    /// Each of `ids`' step as a page reads it (`None`: not there), in one statement.
    pub fn steps_capped(&self, ids: &[Key]) -> Result<Vec<Option<Step>>, StoreError> {
        by_ids(
            &mut **self.lock(),
            &self.url,
            ids,
            (&step_sql(), "WHERE id = k.cs_key ORDER BY ord LIMIT 1"),
            "get steps",
            step_row,
        )
    }

    /// Each of `runs`' last two approvals, oldest first, as a page reads them, in one
    /// statement.
    pub fn last_two_approvals(&self, runs: &[Key]) -> Result<Vec<Vec<Approval>>, StoreError> {
        // The approval's ord after its 18 columns, to put each run's two in order.
        let select = approval_select(", approvals.ord");
        let rows = by_ids_all(
            &mut **self.lock(),
            &self.url,
            runs,
            (&select, "WHERE run_id = k.cs_key ORDER BY ord DESC LIMIT 2"),
            "list approvals",
            |r| (r.try_get::<_, i64>(18).unwrap_or(0), approval_row(r)),
        )?;
        Ok(rows
            .into_iter()
            .map(|mut two| {
                two.sort_by_key(|(ord, _)| *ord);
                two.into_iter().map(|(_, a)| a).collect()
            })
            .collect())
    }

    /// One step as a page reads it.
    pub fn get_step_capped(&self, id: impl AsKey) -> Result<Step, StoreError> {
        self.step_by(
            id.key_bytes(),
            &format!("{} WHERE id = $1 ORDER BY ord LIMIT 1", step_sql()),
            step_row,
        )
    }

    /// One step, whole.
    pub fn get_step_whole(&self, id: &[u8]) -> Result<Step, StoreError> {
        let sql = format!("SELECT {STEP_COLUMNS} FROM steps WHERE id = $1 ORDER BY ord LIMIT 1");
        self.step_by(id, &sql, |r| step_from_values(&values(r)))
    }

    fn step_by(
        &self,
        id: &[u8],
        sql: &str,
        row: impl FnOnce(&postgres::Row) -> Step,
    ) -> Result<Step, StoreError> {
        let missing = || StoreError::NotFound {
            what: crate::runtime::types::Said::from("step ").id(id),
        };
        let key = text_id(id).ok_or_else(missing)?;
        let r = self
            .lock()
            .query_opt(sql, &[&key])
            .map_err(|e| store_error(&self.url, "get step", e))?
            .ok_or_else(missing)?;
        Ok(row(&r))
    }

    /// A window of one of a run's lists (steps, approvals, model calls) by key, and what
    /// `also` reads in the same snapshot.
    fn run_tab<T, X>(
        &self,
        tab: &RunTab<T>,
        run: &[u8],
        near: Near<&str>,
        also: impl FnOnce(&mut Transaction<'_>, &PgUrl, &str) -> Result<X, StoreError>,
    ) -> Result<(WindowPage<T>, Option<X>), StoreError> {
        check_page(tab.name, near.limit, near.offset)?;
        let Some(run) = text_id(run) else {
            return Ok((empty(), None));
        };
        let list = tab.list(run);
        let anchor = format!(
            "SELECT {} FROM {} WHERE run_id = $1 AND id = $2 ORDER BY ord LIMIT 1",
            tab.key.join(", "),
            tab.table
        );
        self.snapshot(|tx, url| {
            let at = Place::by_id(tx, url, &anchor, &list.args, near)?;
            let page = window(tx, url, &list, at, |tx, url, w| tab.rows(tx, url, w))?;
            Ok((page, Some(also(tx, url, run)?)))
        })
    }

    /// A window of one of a run's lists by key, with nothing else read.
    fn run_window<T>(
        &self,
        tab: &RunTab<T>,
        run: &[u8],
        near: Near<&str>,
    ) -> Result<WindowPage<T>, StoreError> {
        Ok(self.run_tab(tab, run, near, |_, _, _| Ok(()))?.0)
    }

    /// A window of a run's steps by `(idx, ord)`.
    pub fn list_steps_page_near(
        &self,
        run: impl AsKey,
        near: Near<&str>,
    ) -> Result<WindowPage<Step>, StoreError> {
        self.run_window(&STEPS, run.key_bytes(), near)
    }

    /// A window of a run's approvals by `ord`, and the run's status.
    pub fn list_run_approvals_near(
        &self,
        run: impl AsKey,
        near: Near<&str>,
    ) -> Result<(WindowPage<Approval>, Option<RunStatus>), StoreError> {
        let run = run.key_bytes();
        let (page, status) = self.run_tab(&APPROVALS, run, near, run_status)?;
        Ok((page, status.flatten()))
    }

    /// A window of a run's model calls by `ord`.
    pub fn list_model_calls_near(
        &self,
        run: impl AsKey,
        near: Near<&str>,
    ) -> Result<WindowPage<ModelCallView>, StoreError> {
        self.run_window(&CALLS, run.key_bytes(), near)
    }

    /// A window of a run's events by `seq`, each with its chain mark.
    pub fn list_marked_events_near(
        &self,
        run: impl AsKey,
        near: Near<i64>,
    ) -> Result<WindowPage<MarkedEvent>, StoreError> {
        let run = run.key_bytes();
        check_page("events", near.limit, near.offset)?;
        let Some(run) = text_id(run) else {
            return Ok(empty());
        };
        let list = events_list(run);
        self.snapshot(|tx, url| {
            let at = Place::near(near, |seq| {
                Ok(tx
                    .query_opt(
                        "SELECT seq FROM events WHERE run_id = $1 AND seq = $2",
                        &[&run, &seq],
                    )
                    .map_err(|e| store_error(url, "list events", e))?
                    .map(|_| vec![Value::Integer(seq)]))
            })?;
            window(tx, url, &list, at, |tx, url, w| {
                marked_events(tx, url, run, w)
            })
        })
    }

    /// The exact length of one of a run's lists (`steps`, `events`, `approvals`,
    /// `model_calls`).
    /// How many of a run's model calls were dispatched without a recorded outcome, as SQLite's
    /// `Store::count_unrecorded_model_calls`.
    pub fn count_unrecorded_model_calls(&self, run: &[u8]) -> Result<i64, StoreError> {
        let Some(run) = text_id(run) else {
            return Ok(0);
        };
        let sql = crate::runtime::store::UNRECORDED_CALLS.replace("?1", "$1");
        self.snapshot(|tx, url| {
            tx.query_one(sql.as_str(), &[&run])
                .map(|r| r.get::<_, i64>(0))
                .map_err(|e| store_error(url, "count model calls", e))
        })
    }

    pub fn count_of_run(&self, table: &'static str, run: &[u8]) -> Result<i64, StoreError> {
        let Some(run) = text_id(run) else {
            return Ok(0);
        };
        let list = match table {
            "steps" => STEPS.list(run),
            "events" => events_list(run),
            "approvals" => APPROVALS.list(run),
            _ => CALLS.list(run),
        };
        self.snapshot(|tx, url| count(tx, url, &list))
    }

    /// One approval by id (the first with it), whole or (`capped`) as a page reads it, with
    /// its run's status and the reason the policy gave.
    pub fn approval_view_of(
        &self,
        id: &[u8],
        capped: bool,
    ) -> Result<Option<ApprovalView>, StoreError> {
        let Some(key) = text_id(id) else {
            return Ok(None);
        };
        let found = self.snapshot(|tx, url| {
            let sql = if capped {
                format!("{} WHERE id = $1 ORDER BY ord LIMIT 1", approval_sql())
            } else {
                format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1 ORDER BY ord LIMIT 1"
                )
            };
            let Some(r) = tx
                .query_opt(&sql, &[&key])
                .map_err(|e| store_error(url, "get approval", e))?
            else {
                return Ok(None);
            };
            let approval = if capped {
                approval_row(&r)
            } else {
                approval_from_values(&values(&r))
            };
            let status = match text_id(approval.run_id_bytes()) {
                Some(run) => run_status(tx, url, run)?,
                None => None,
            };
            Ok(Some((approval, status)))
        })?;
        let Some((approval, run_status)) = found else {
            return Ok(None);
        };
        let reason = self
            .approval_reason(approval.run_id_bytes(), approval.id_bytes())
            .unwrap_or_default();
        Ok(Some(ApprovalView {
            approval,
            run_status,
            reason,
        }))
    }

    /// A window of the damaged columns (steps, then runs, then approvals; by `ord` and
    /// column), as SQLite's `Store::list_damaged_near` lists them.
    pub fn list_damaged_near(
        &self,
        near: Near<(&str, &str, &str)>,
    ) -> Result<WindowPage<DamagedColumn>, StoreError> {
        check_page("damaged rows", near.limit, near.offset)?;
        let list = damaged_list();
        self.snapshot(|tx, url| {
            let at = Place::near(near, |(table, row_id, column)| {
                damaged_anchor(table, column, |t| {
                    tx.query_opt(
                        &format!("SELECT ord FROM {t} WHERE id = $1 ORDER BY ord LIMIT 1"),
                        &[&row_id],
                    )
                    .map(|r| r.and_then(|r| r.try_get::<_, i64>(0).ok()))
                    .map_err(|e| store_error(url, "damaged rows", e))
                })
            })?;
            window(tx, url, &list, at, |tx, url, w| {
                let mut items = Vec::with_capacity(w.keys.len());
                for key in &w.keys {
                    let (k, n) = (
                        key.get(1).map(int).unwrap_or(0),
                        key.get(2).map(int).unwrap_or(1),
                    );
                    let n = usize::try_from(n.clamp(1, COLUMNS.len() as i64)).unwrap_or(1);
                    items.extend(damaged_column(tx, url, k, n)?);
                }
                Ok(items)
            })
        })
    }

    /// How many columns do not decode.
    pub fn count_damaged(&self) -> Result<i64, StoreError> {
        self.snapshot(|tx, url| count(tx, url, &damaged_list()))
    }

    /// The whole chain, from one snapshot.
    pub fn verify_chain(&self) -> Result<ChainReport, StoreError> {
        self.snapshot(|tx, url| {
            chain::verify(tx, url, 0, 0).map_err(|e| StoreError::Backend(e.to_string()))
        })
    }
}

/// The reads of `show` and `events` (as SQLite's `Store` gives them, for the same output).
impl PgStore {
    /// A run's approvals with `status` (`""` for all) in creation order, capped as a page
    /// caps them, `limit` from `offset`, with the total.
    pub fn approvals_page(
        &self,
        run: &[u8],
        status: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<Approval>, StoreError> {
        self.tab_page(&APPROVALS, run, status, limit, offset)
    }

    /// How many events a run has.
    pub fn count_events(&self, run: impl AsKey) -> Result<i64, StoreError> {
        self.count_of_run("events", run.key_bytes())
    }

    /// A run's steps by index, capped, `limit` from `offset`, with the total.
    pub fn list_steps_page(
        &self,
        run: &[u8],
        limit: i64,
        offset: i64,
    ) -> Result<Page<Step>, StoreError> {
        self.tab_page(&STEPS, run, "", limit, offset)
    }

    /// Rows `[offset, offset + limit)` of one of a run's lists, of one status or all (`""`),
    /// with the total counted whole (agentrt's page read).
    fn tab_page<T>(
        &self,
        tab: &RunTab<T>,
        run: &[u8],
        status: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<T>, StoreError> {
        check_page(tab.name, limit, offset)?;
        let Some(run) = text_id(run) else {
            return Ok(Page {
                items: Vec::new(),
                total: 0,
            });
        };
        let mut list = tab.list(run);
        if !status.is_empty() {
            list.from.push_str(" AND status = $2");
            list.args.push(text(status));
        }
        self.snapshot(|tx, url| {
            let at = Place::from(limit, offset, true);
            let w = window(tx, url, &list, at, |tx, url, w| tab.rows(tx, url, w))?;
            Ok(Page {
                items: w.items,
                total: w.total,
            })
        })
    }

    /// A run's steps by `(idx, ord)`: those after `after`, after skipping `skip`, capped.
    pub fn steps_page_by_key(
        &self,
        run: &[u8],
        after: Option<&StepKey>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Step, StepKey>, StoreError> {
        check_page("steps", limit, skip)?;
        let Some(run) = text_id(run) else {
            return Ok(key_page(Vec::new(), limit));
        };
        let (idx, ord) = match after.map(StepKey::parts) {
            Some((i, o)) => (Some(i), o),
            None => (None, 0),
        };
        let select = step_sql();
        let select = select.strip_suffix(" FROM steps").unwrap_or(&select);
        let after = "($2::bigint IS NULL OR (idx, ord) > ($2::bigint, $3::bigint))";
        let sql = format!(
            "{select}, idx, ord FROM steps WHERE run_id = $1 AND {after} AND ($4::bigint = 0 OR \
             (idx, ord) >= (SELECT idx, ord FROM steps WHERE run_id = $1 AND {after} \
             ORDER BY idx, ord LIMIT 1 OFFSET $4::bigint)) ORDER BY idx, ord LIMIT $5::bigint"
        );
        let rows = self
            .lock()
            .query(&sql, &[&run, &idx, &ord, &skip, &(limit.saturating_add(1))])
            .map_err(|e| store_error(&self.url, "list steps", e))?;
        let items = rows
            .iter()
            .map(|r| {
                let key = StepKey::of(r.try_get(16).unwrap_or(0), r.try_get(17).unwrap_or(0));
                (key, step_row(r))
            })
            .collect();
        Ok(key_page(items, limit))
    }

    /// A run's events by `seq`: those above `after`, after skipping `skip`, capped. Only
    /// chained events are read; one still in the inbox is not on the run's log yet.
    pub fn events_page_by_key(
        &self,
        run: &[u8],
        after: Option<i64>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Event>, StoreError> {
        check_page("events", limit, skip)?;
        let Some(run) = text_id(run) else {
            return Ok(KeyPage::default());
        };
        let after = after.unwrap_or(i64::MIN);
        let sql = format!(
            "{} WHERE run_id = $1 AND seq > $2::bigint AND ($3::bigint = 0 OR seq >= (SELECT seq FROM events \
             WHERE run_id = $1 AND seq > $2::bigint ORDER BY seq LIMIT 1 OFFSET $3::bigint)) \
             ORDER BY seq LIMIT $4::bigint",
            event_sql()
        );
        let rows = self
            .lock()
            .query(&sql, &[&run, &after, &skip, &(limit.saturating_add(1))])
            .map_err(|e| store_error(&self.url, "list events", e))?;
        let items = rows
            .iter()
            .map(|r| {
                let e = event_row(r);
                (e.seq, e)
            })
            .collect();
        Ok(key_page(items, limit))
    }
}

fn key_page<T, K: Clone>(mut items: Vec<(K, T)>, limit: i64) -> KeyPage<T, K> {
    let more = items.len() as i64 > limit;
    items.truncate(usize::try_from(limit).unwrap_or(0));
    let last_key = items.last().map(|(k, _)| k.clone());
    KeyPage {
        items: items.into_iter().map(|(_, t)| t).collect(),
        more,
        last_key,
    }
}

fn empty<T>() -> WindowPage<T> {
    WindowPage {
        items: Vec::new(),
        offset: 0,
        more: false,
        total: 0,
        exact: true,
    }
}

fn queue_rows(
    tx: &mut Transaction<'_>,
    url: &PgUrl,
    w: &Window,
) -> Result<Vec<QueueItem>, StoreError> {
    each(tx, url, w, 0, &queue_sql(), "queue", queue_item)
}

/// The window's events (its seqs lie in one range of the run's) with their marks.
fn marked_events(
    tx: &mut Transaction<'_>,
    url: &PgUrl,
    run: &str,
    w: &Window,
) -> Result<Vec<MarkedEvent>, StoreError> {
    let (Some(lo), Some(hi)) = (w.keys.first(), w.keys.last()) else {
        return Ok(Vec::new());
    };
    let (lo, hi) = (
        lo.first().map(int).unwrap_or(0),
        hi.first().map(int).unwrap_or(0),
    );
    let sql = format!(
        "{} WHERE run_id = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
        event_sql()
    );
    let rows = tx
        .query(&sql, &[&run, &lo, &hi])
        .map_err(|e| store_error(url, "list events", e))?;
    let mut items = Vec::with_capacity(rows.len());
    for r in &rows {
        let event = event_row(r);
        let mark = mark(tx, url, event.seq)?;
        items.push(MarkedEvent { event, mark });
    }
    Ok(items)
}

/// The chain mark of event `seq`, as SQLite's page marks it.
fn mark(tx: &mut Transaction<'_>, url: &PgUrl, seq: i64) -> Result<ChainMark, StoreError> {
    let r = tx
        .query_one(
            "SELECT COALESCE(char_length(payload_json), 0)::bigint, \
             (SELECT max(seq) FROM events WHERE seq < $1) FROM events WHERE seq = $1",
            &[&seq],
        )
        .map_err(|e| store_error(url, "chain mark", e))?;
    let len: i64 = r.try_get(0).unwrap_or(0);
    let prev: Option<i64> = r.try_get(1).unwrap_or(None);
    let prev_ok = match prev {
        None => seq == 1,
        Some(p) => p.checked_add(1) == Some(seq),
    };
    if len > MAX_PAGE_TEXT || !prev_ok {
        return Ok(ChainMark::Unknown);
    }
    let report =
        chain::verify(tx, url, seq, seq).map_err(|e| StoreError::Backend(e.to_string()))?;
    Ok(mark_of(&report))
}
