//! Bounded page reads for front ends (spec 10): each reads only its page (plus a COUNT), with
//! every text column capped at [`MAX_PAGE_TEXT`] characters and JSON columns replaced by a
//! `{"truncated":true,...}` stand-in when over it. Nothing fails on a damaged row.

use std::collections::BTreeMap;

#[cfg(feature = "postgres")]
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

use super::Store;
use super::bind::{Text, key};
use super::error::{Ctx, StoreError};
use super::reads::by_id;
use super::rows::{Cols, approval_from, event_from, run_from, step_from};
pub use super::window::Page;
use super::window::{KeyedList, Near, Window, WindowPage, int, row_key};
use crate::runtime::types::{Approval, AsKey, Event, Key, Run, Said, Step};

/// The largest request (bytes) the commands read whole to show and decide on. A larger one
/// is shown by what page reads pick out of it (kind, tool, times, hash) and its size.
pub const SHOWN_REQUEST_MAX: i64 = 1 << 20;

/// The note a page read leaves on an approval whose request it replaced by a stand-in.
pub(crate) fn capped_note(n: i64) -> String {
    // Over SHOWN_REQUEST_MAX the select gives the size in bytes (it never loads the value).
    let unit = if n > SHOWN_REQUEST_MAX {
        "bytes"
    } else {
        "characters"
    };
    format!("request: {n} {unit}, over MaxPageText; its arguments were not read")
}

/// agentrt's MaxPageText: 64 Ki characters (SQLite `length()` on TEXT).
pub const MAX_PAGE_TEXT: i64 = 65536;

/// Text cap: over the limit → head + `…[truncated: N characters]`.
pub(super) fn tc(c: &str) -> String {
    format!(
        "CASE WHEN length({c}) > {MAX_PAGE_TEXT} THEN substr({c},1,{MAX_PAGE_TEXT}) || '\u{2026}[truncated: ' || length({c}) || ' characters]' ELSE {c} END"
    )
}

/// JSON cap: over the limit → `{"truncated":true,"length":N,"head":"…"}`.
fn jc(c: &str) -> String {
    format!(
        "CASE WHEN length({c}) > {MAX_PAGE_TEXT} THEN json_object('truncated', json('true'), 'length', length({c}), 'head', substr({c},1,{MAX_PAGE_TEXT})) ELSE {c} END"
    )
}

/// A string field of an oversized JSON column, capped (`''` when absent or not JSON).
fn jfield(c: &str, path: &str) -> String {
    format!("COALESCE(substr(json_extract({c}, '{path}'),1,{MAX_PAGE_TEXT}),'')")
}

pub(crate) fn check_page(what: &'static str, limit: i64, offset: i64) -> Result<(), StoreError> {
    if limit <= 0 || offset < 0 {
        return Err(StoreError::InvalidPage {
            what,
            limit,
            offset,
        });
    }
    Ok(())
}

pub(crate) fn run_select() -> String {
    let text = |c: &str| tc(c);
    format!(
        "SELECT {}, {}, {}, {}, {}, CASE WHEN length(limits_json) > {MAX_PAGE_TEXT} THEN '' ELSE limits_json END, \
         step_count, {}, {}, {}, {}, model_calls, input_tokens, output_tokens, cached_input_tokens, \
         estimated_cost_micros, active_ms, {}, {} FROM runs",
        text("id"),
        text("goal"),
        text("status"),
        text("reason"),
        text("reason_detail"),
        text("created_at"),
        text("started_at"),
        text("finished_at"),
        jc("result_json"),
        text("lease_owner"),
        text("lease_expires_at"),
    )
}

pub(super) fn step_select() -> String {
    // Over SHOWN_REQUEST_MAX bytes a column is never loaded (`octet_length` reads the record
    // header only; `length` and the JSON functions would load and parse it all): its stand-in
    // has empty fields, and the tool's name comes from the spec the step ran under.
    let huge = SHOWN_REQUEST_MAX;
    let over = |c: &str, repl: String, huge_repl: String| {
        format!(
            "CASE WHEN octet_length({c}) > {huge} THEN {huge_repl} WHEN length({c}) <= {MAX_PAGE_TEXT} THEN {c} \
             WHEN json_valid({c}) THEN {repl} ELSE '' END"
        )
    };
    let spec_name = format!(
        "COALESCE((SELECT substr(json_extract(t.spec_json, '$.name'), 1, {MAX_PAGE_TEXT}) FROM tool_specs t \
         WHERE t.hash = steps.spec_hash AND octet_length(t.spec_json) <= {MAX_PAGE_TEXT} AND json_valid(t.spec_json)), '')"
    );
    let decision = over(
        "decision_json",
        format!(
            "json_object('kind', {}, 'tool', {})",
            jfield("decision_json", "$.kind"),
            jfield("decision_json", "$.tool")
        ),
        format!("json_object('kind', '', 'tool', {spec_name})"),
    );
    let policy = over(
        "policy_json",
        format!(
            "json_object('outcome', {})",
            jfield("policy_json", "$.outcome")
        ),
        "json_object('outcome', '')".into(),
    );
    let observation = over(
        "observation_json",
        format!(
            "json_object('kind', {}, 'summary', {})",
            jfield("observation_json", "$.kind"),
            jfield("observation_json", "$.summary")
        ),
        "json_object('kind', '', 'summary', '')".into(),
    );
    let len = |c: &str| {
        format!("CASE WHEN octet_length({c}) > {huge} THEN octet_length({c}) ELSE length({c}) END")
    };
    format!(
        "SELECT {}, {}, idx, {}, {decision}, {policy}, {observation}, {}, {}, {}, {}, {}, \
         {}, {}, {} FROM steps",
        tc("id"),
        tc("run_id"),
        tc("status"),
        tc("observation_hash"),
        tc("started_at"),
        tc("finished_at"),
        tc("spec_hash"),
        tc("policy_id"),
        len("decision_json"),
        len("policy_json"),
        len("observation_json"),
    )
}

pub(super) fn approval_select() -> String {
    // Over SHOWN_REQUEST_MAX bytes a request is never loaded (`octet_length` reads only the
    // record header; `length`, `json_valid` and `json_extract` would load and parse it all):
    // its stand-in takes the run and step from the row and the tool's name from the spec the
    // step ran under.
    let huge = SHOWN_REQUEST_MAX;
    let request = format!(
        "CASE WHEN octet_length(request_json) > {huge} THEN \
         json_object('run_id', {}, 'step_id', {}, 'spec', json_object('name', COALESCE((SELECT \
         substr(json_extract(t.spec_json, '$.name'), 1, {MAX_PAGE_TEXT}) FROM steps s JOIN tool_specs t \
         ON t.hash = s.spec_hash WHERE s.id = approvals.step_id AND octet_length(t.spec_json) <= {MAX_PAGE_TEXT} \
         AND json_valid(t.spec_json)), '')), 'args', json_object('truncated', json('true'), 'length', \
         octet_length(request_json))) \
         WHEN length(request_json) <= {MAX_PAGE_TEXT} THEN request_json WHEN json_valid(request_json) THEN \
         json_object('run_id', {}, 'step_id', {}, 'spec', json_object('name', {}), 'args', \
         json_object('truncated', json('true'), 'length', length(request_json))) ELSE '' END",
        tc("run_id"),
        tc("step_id"),
        jfield("request_json", "$.run_id"),
        jfield("request_json", "$.step_id"),
        jfield("request_json", "$.spec.name"),
    );
    format!(
        "SELECT {}, {}, {}, {}, {}, {}, {request}, {}, {}, {}, {}, {}, {}, {}, length(request_json) FROM approvals",
        tc("id"),
        tc("run_id"),
        tc("step_id"),
        tc("kind"),
        jc("capability_json"),
        jc("presentation_json"),
        tc("hash"),
        tc("status"),
        tc("created_at"),
        tc("decided_at"),
        tc("decided_by"),
        tc("note"),
        tc("expires_at"),
    )
    .replace(
        ", length(request_json) FROM approvals",
        &format!(
            ", CASE WHEN octet_length(request_json) > {huge} THEN octet_length(request_json) \
             ELSE length(request_json) END FROM approvals"
        ),
    )
}

pub(super) fn event_select() -> String {
    format!(
        "SELECT seq, {}, {}, {}, {}, {}, {} FROM events",
        tc("run_id"),
        tc("step_id"),
        tc("at"),
        tc("type"),
        jc("payload_json"),
        tc("hash"),
    )
}

pub(super) fn capped_step(r: &rusqlite::Row<'_>) -> Step {
    capped_step_from(Cols::new(r))
}

/// A step from values laid out as [`step_select`] gives them (another backend's page read).
#[cfg(feature = "postgres")]
pub(crate) fn capped_step_values(v: &[Value]) -> Step {
    capped_step_from(Cols::values(v))
}

/// An approval from values laid out as [`approval_select`] gives them.
#[cfg(feature = "postgres")]
pub(crate) fn capped_approval_values(v: &[Value]) -> Approval {
    capped_approval_from(Cols::values(v))
}

/// An event from values laid out as [`event_select`] gives them.
#[cfg(feature = "postgres")]
pub(crate) fn event_values(v: &[Value]) -> Event {
    event_from(&mut Cols::values(v))
}

fn capped_step_from(mut c: Cols<'_, '_>) -> Step {
    let mut notes = String::new();
    for (i, name) in [(12, "decision"), (13, "policy"), (14, "observation")] {
        let n = c.int(i, name);
        if n > MAX_PAGE_TEXT {
            if !notes.is_empty() {
                notes.push_str("; ");
            }
            let unit = if n > SHOWN_REQUEST_MAX {
                "bytes"
            } else {
                "characters"
            };
            notes.push_str(&format!(
                "{name}: {n} {unit}, over MaxPageText, not read whole"
            ));
        }
    }
    let mut s = step_from(&mut c);
    join_note(&mut s.decode_error, notes);
    s
}

pub(super) fn capped_approval(r: &rusqlite::Row<'_>) -> Approval {
    capped_approval_from(Cols::new(r))
}

fn capped_approval_from(mut c: Cols<'_, '_>) -> Approval {
    let n = c.int(14, "request");
    let mut a = approval_from(&mut c);
    if n > MAX_PAGE_TEXT {
        join_note(&mut a.decode_error, capped_note(n));
    }
    a
}

fn join_note(acc: &mut String, note: String) {
    if note.is_empty() {
        return;
    }
    if !acc.is_empty() {
        acc.push_str("; ");
    }
    acc.push_str(&note);
}

/// One of a run's lists (its steps, approvals, model calls) as the store reads it by key.
pub(super) struct RunList<T> {
    /// The list as a bad page request names it (`steps`).
    pub name: &'static str,
    /// What its errors say it was doing (`list steps`).
    pub what: &'static str,
    /// `FROM <table> WHERE run_id = ?1`.
    pub from: &'static str,
    /// The key's columns, in list order.
    pub key: &'static [&'static str],
    /// What an anchor's errors say, and the SQL that reads the key of the run's row with an
    /// id (parameters: the run, the id).
    pub anchor: (&'static str, &'static str),
    /// Reads the window's rows by key.
    pub rows: fn(&Connection, &Window) -> Result<Vec<T>, StoreError>,
}

impl<T> RunList<T> {
    /// The list of run `run_id`.
    pub fn of<'a>(&self, run_id: &'a dyn rusqlite::ToSql) -> KeyedList<'a> {
        KeyedList {
            what: self.what,
            from: self.from.into(),
            args: vec![run_id],
            key: self.key,
            desc: false,
        }
    }

    /// Rows `[offset, offset + limit)` of the run's list inside the caller's transaction (the
    /// offset skipped on the key, the total counted whole).
    pub fn page(
        &self,
        c: &Connection,
        run_id: Text<'_>,
        limit: i64,
        offset: i64,
    ) -> Result<Page<T>, StoreError> {
        self.of(&run_id).page(c, offset, limit, self.rows)
    }

    /// A window of the run's list inside the caller's transaction, from the nearest of its
    /// start, the anchor row (its id, its key read by the list's `anchor` SQL; one that is
    /// gone is not used) and its end, with the total counted up to [`super::COUNT_CAP`].
    pub fn window_page(
        &self,
        c: &Connection,
        run_id: Text<'_>,
        near: Near<&str>,
    ) -> Result<WindowPage<T>, StoreError> {
        let (what, sql) = self.anchor;
        let near = near.anchored(|id| row_key(c, what, sql, &[&run_id], id))?;
        self.of(&run_id).window_page(c, near, self.rows)
    }
}

impl Store {
    /// Rows `[offset, offset + limit)` of a run's list as agentrt's page reads read them (the
    /// offset skipped on the key, the total counted whole), capped.
    pub(super) fn run_page<T>(
        &self,
        list: &RunList<T>,
        run_id: impl AsKey,
        limit: i64,
        offset: i64,
    ) -> Result<Page<T>, StoreError> {
        let run_id = key(&run_id);
        check_page(list.name, limit, offset)?;
        self.read(|c| list.page(c, run_id, limit, offset))
    }

    /// A window of a run's list read by key (issue 14 item 8), from the nearest of the list's
    /// start, `near`'s anchor (the index and id of a row of the list already read; one that is
    /// gone is not used) and its end (its length as last read, read in reverse), with the
    /// total counted up to [`super::COUNT_CAP`].
    pub(super) fn run_window<T>(
        &self,
        list: &RunList<T>,
        run_id: impl AsKey,
        near: Near<&str>,
    ) -> Result<WindowPage<T>, StoreError> {
        let run_id = key(&run_id);
        check_page(list.name, near.limit, near.offset)?;
        self.read(|c| list.window_page(c, run_id, near))
    }
}

/// A run's steps, keyed by `(idx, rowid)` on the `(run_id, idx)` index (a damaged, repeated
/// or non-integer `idx` still orders once).
const STEPS: RunList<Step> = RunList {
    name: "steps",
    what: "list steps",
    from: "FROM steps WHERE run_id = ?1",
    key: &["idx", "rowid"],
    anchor: (
        "list steps",
        "SELECT idx, rowid FROM steps WHERE run_id = ? AND id = ? ORDER BY rowid LIMIT 1",
    ),
    rows: steps_by_key,
};

/// The window's approvals, each read by its rowid through the capped select.
pub(super) fn approvals_by_key(c: &Connection, w: &Window) -> Result<Vec<Approval>, StoreError> {
    let sql = format!("{} WHERE rowid = ?", approval_select());
    w.each(0, |rowid| {
        query(c, &sql, &[&rowid], "list approvals", capped_approval)
    })
}

/// The window's steps, each read by its rowid through the capped select.
fn steps_by_key(c: &Connection, w: &Window) -> Result<Vec<Step>, StoreError> {
    let sql = format!("{} WHERE rowid = ?", step_select());
    w.each(1, |rowid| {
        query(c, &sql, &[&rowid], "list steps", capped_step)
    })
}

/// The events of a window keyed by `seq` (its seqs are one range: consecutive in the run, or
/// in the table), read in seq order by one select whose `cond` binds the run, then the
/// range's first and last seq.
pub(super) fn events_in(
    c: &Connection,
    w: &Window,
    cond: &str,
    run_id: &dyn rusqlite::ToSql,
) -> Result<Vec<Event>, StoreError> {
    let (Some(lo), Some(hi)) = (w.keys.first(), w.keys.last()) else {
        return Ok(Vec::new());
    };
    let sql = format!("{} WHERE {cond} ORDER BY seq", event_select());
    let (lo, hi) = (int(&lo[0]), int(&hi[0]));
    query(c, &sql, &[run_id, &lo, &hi], "list events", |r| {
        event_from(&mut Cols::new(r))
    })
}

pub(crate) fn count(
    conn: &Connection,
    sql: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<i64, StoreError> {
    conn.prepare_cached(sql)
        .ctx("count")?
        .query_row(args, |r| r.get(0))
        .ctx("count")
}

pub(crate) fn query<T>(
    conn: &Connection,
    sql: &str,
    args: &[&dyn rusqlite::ToSql],
    what: &str,
    f: impl Fn(&rusqlite::Row<'_>) -> T,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).ctx(what)?;
    let rows = stmt.query_map(args, |r| Ok(f(r))).ctx(what)?;
    rows.collect::<Result<Vec<_>, _>>().ctx(what)
}

impl Store {
    /// Runs newest first (`ORDER BY rowid DESC`), capped, with the total (agentrt's page
    /// read, whose contract is a total: a count of the table). The offset is skipped on the
    /// rowid and only the page's rows are read; a front end that need not count pages with
    /// [`Store::runs_page_by_key`].
    pub fn list_runs_page(&self, limit: i64, offset: i64) -> Result<Page<Run>, StoreError> {
        self.runs_page_counted("", limit, offset)
    }

    /// [`Store::list_runs_page`] of one status (all when `""`), in one read transaction.
    pub(super) fn runs_page_counted(
        &self,
        status: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<Run>, StoreError> {
        check_page("runs", limit, offset)?;
        self.read(|c| {
            let list = KeyedList {
                what: "list runs",
                from: "FROM runs WHERE (?1 = '' OR status = ?1)".into(),
                args: vec![&status],
                key: &["rowid"],
                desc: true,
            };
            let w = list.window(c, Near::new(limit, offset), Some(i64::MAX - 1))?;
            let sql = format!("{} WHERE rowid = ?", run_select());
            let items = w.each(0, |rowid| {
                query(c, &sql, &[&rowid], "list runs", |r| {
                    run_from(&mut Cols::new(r))
                })
            })?;
            Ok(Page {
                items,
                total: w.total,
            })
        })
    }

    /// One step read as a page reads it: a decision, policy or observation over
    /// `MAX_PAGE_TEXT` is not read whole and noted in `decode_error` ([`StoreError::NotFound`]
    /// if absent).
    pub fn get_step_capped(&self, id: impl AsKey) -> Result<Step, StoreError> {
        let id = key(&id);
        let sql = format!("{} WHERE id = ?", step_select());
        self.read(|c| by_id(c, &sql, "step", id, capped_step))
    }

    /// One run read as a page reads it ([`StoreError::NotFound`] if absent).
    pub fn get_run_capped(&self, id: impl AsKey) -> Result<Run, StoreError> {
        let id = key(&id);
        let sql = format!("{} WHERE id = ?", run_select());
        self.read(|c| by_id(c, &sql, "run", id, |r| run_from(&mut Cols::new(r))))
    }

    /// A run's steps by index, capped, with the total. The offset is skipped on the
    /// `(run_id, idx)` index and the total is a count of it (agentrt's page read); a front end
    /// showing a long run reads [`Store::list_steps_page_near`].
    pub fn list_steps_page(
        &self,
        run_id: impl AsKey,
        limit: i64,
        offset: i64,
    ) -> Result<Page<Step>, StoreError> {
        self.run_page(&STEPS, run_id, limit, offset)
    }

    /// A window of a run's steps read by key (issue 14 item 8): `(idx, rowid)` walked from the
    /// nearest of the run's start, `near`'s anchor (the index in the list and the id of a step
    /// of the same run already read; a damaged, repeated or non-integer `idx` still orders
    /// once) and the run's end (its length as last read, read in reverse). The total is
    /// counted up to [`super::COUNT_CAP`]; [`Store::count_steps`] counts when asked. An anchor
    /// that is gone is not used (see `Store::run_window`).
    pub fn list_steps_page_near(
        &self,
        run_id: impl AsKey,
        near: Near<&str>,
    ) -> Result<WindowPage<Step>, StoreError> {
        self.run_window(&STEPS, run_id, near)
    }

    /// A run's approvals in creation order, optionally only those with `status`, capped, with
    /// the total (a count of the run's approvals). For showing only: deciding reads the
    /// approval whole.
    pub fn list_approvals_page(
        &self,
        run_id: impl AsKey,
        status: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Page<Approval>, StoreError> {
        let run_id = key(&run_id);
        check_page("approvals", limit, offset)?;
        self.read(|c| {
            let list = KeyedList {
                what: "list approvals",
                from: "FROM approvals WHERE run_id = ?1 AND (?2 = '' OR status = ?2)".into(),
                args: vec![&run_id, &status],
                key: &["rowid"],
                desc: false,
            };
            list.page(c, offset, limit, approvals_by_key)
        })
    }

    /// Events of a run (or of all runs for `""`) in seq order, capped, with the total (a count
    /// of the run's events, or of the table). The offset is skipped on the seq index and only
    /// the page's rows are read; reading a log whole pages with [`Store::events_page_by_key`].
    pub fn list_events_page(
        &self,
        run_id: impl AsKey,
        limit: i64,
        offset: i64,
    ) -> Result<Page<Event>, StoreError> {
        let run_id = key(&run_id);
        check_page("events", limit, offset)?;
        self.read(|c| {
            let all = run_id.is_empty();
            let list = KeyedList {
                what: "list events",
                from: if all {
                    "FROM events WHERE ?1 = ''".into()
                } else {
                    "FROM events WHERE run_id = ?1".into()
                },
                args: vec![&run_id],
                key: &["seq"],
                desc: false,
            };
            let w = list.window(c, Near::new(limit, offset), Some(i64::MAX - 1))?;
            let cond = "(?1 = '' OR run_id = ?1) AND seq >= ?2 AND seq <= ?3";
            let items = events_in(c, &w, cond, &run_id)?;
            Ok(Page {
                items,
                total: w.total,
            })
        })
    }

    /// Events with seq > `after` in seq (commit) order, of one run or all (`""`), capped.
    pub fn list_events_after(
        &self,
        run_id: impl AsKey,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Event>, StoreError> {
        let run_id = key(&run_id);
        check_page("events", limit, 0)?;
        self.read(|c| {
            if run_id.is_empty() {
                let sql = format!("{} WHERE seq > ? ORDER BY seq LIMIT ?", event_select());
                query(c, &sql, &[&after, &limit], "list events", |r| {
                    event_from(&mut Cols::new(r))
                })
            } else {
                let sql = format!(
                    "{} WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                    event_select()
                );
                query(c, &sql, &[&run_id, &after, &limit], "list events", |r| {
                    event_from(&mut Cols::new(r))
                })
            }
        })
    }

    /// Run → pending approval ids (creation order) for every WAITING run, one join query.
    pub fn pending_approval_ids(&self) -> Result<BTreeMap<String, Vec<String>>, StoreError> {
        self.read(|c| {
            let sql = format!(
                "SELECT {}, {} FROM approvals a JOIN runs r ON r.id = a.run_id \
                 WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL' ORDER BY a.rowid",
                tc("a.run_id"),
                tc("a.id")
            );
            let pairs = query(c, &sql, &[], "pending approvals", |r| {
                let mut c = Cols::new(r);
                (c.text(0, "run_id"), c.text(1, "id"))
            })?;
            let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (run, id) in pairs {
                out.entry(run).or_default().push(id);
            }
            Ok(out)
        })
    }

    /// The same for the named runs only, at most `max` ids per run (window function), by the
    /// ids as stored (a run or approval id need not be UTF-8).
    pub fn pending_approval_ids_of(
        &self,
        run_ids: &[impl AsKey],
        max: i64,
    ) -> Result<BTreeMap<Key, Vec<Key>>, StoreError> {
        let mut out: BTreeMap<Key, Vec<Key>> = BTreeMap::new();
        if run_ids.is_empty() || max <= 0 {
            return Ok(out);
        }
        self.read(|c| {
            // SQLite's variable limit is 32766; the console names a page of runs at a time.
            for chunk in run_ids.chunks(500) {
                let marks = vec!["?"; chunk.len()].join(",");
                let sql = format!(
                    "SELECT rid, aid FROM (SELECT CAST(a.run_id AS BLOB) AS rid, CAST(a.id AS BLOB) AS aid, ROW_NUMBER() OVER \
                     (PARTITION BY a.run_id ORDER BY a.rowid) AS n FROM approvals a JOIN runs r ON r.id = a.run_id \
                     WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL' AND a.run_id IN ({marks})) \
                     WHERE n <= ? ORDER BY rid, n"
                );
                let mut args: Vec<&dyn rusqlite::ToSql> = Vec::with_capacity(chunk.len() + 1);
                let keys: Vec<super::bind::Text<'_>> = chunk.iter().map(|k| key(k)).collect();
                for k in &keys {
                    args.push(k);
                }
                args.push(&max);
                let mut stmt = c.prepare(&sql).ctx("pending approvals")?;
                let rows = stmt
                    .query_map(params_from_iter(args), |r| {
                        let b = |i| r.get::<_, Option<Vec<u8>>>(i).map(Option::unwrap_or_default);
                        Ok((Key::new(b(0)?), Key::new(b(1)?)))
                    })
                    .ctx("pending approvals")?;
                for row in rows {
                    let (run, id) = row.ctx("pending approvals")?;
                    out.entry(run).or_default().push(id);
                }
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// The `reason` of the first `approval.requested` event of the approval's step whose
    /// payload names it (capped); `""` if there is none. [`StoreError::NotFound`] if no such
    /// approval.
    pub fn approval_reason(
        &self,
        run_id: impl AsKey,
        approval_id: impl AsKey,
    ) -> Result<String, StoreError> {
        let (run_id, approval_id) = (key(&run_id), key(&approval_id));
        self.read(|c| approval_reason(c, run_id, approval_id))
    }
}

/// [`Store::approval_reason`] inside a transaction the caller holds.
pub(super) fn approval_reason(
    c: &Connection,
    run_id: impl AsKey,
    approval_id: impl AsKey,
) -> Result<String, StoreError> {
    let (run_id, approval_id) = (key(&run_id), key(&approval_id));
    let step: Option<Vec<u8>> = c
        .prepare_cached("SELECT CAST(step_id AS BLOB) FROM approvals WHERE id = ? AND run_id = ?")
        .ctx("approval reason")?
        .query_row(params![approval_id, run_id], |r| {
            r.get::<_, Option<Vec<u8>>>(0)
                .map(Option::unwrap_or_default)
        })
        .optional()
        .ctx("approval reason")?;
    let step = step.as_deref().map(super::bind::Text);
    let step = step.ok_or_else(|| StoreError::NotFound {
        what: Said::from("approval ")
            .id(approval_id)
            .text(" of run ")
            .id(run_id),
    })?;
    let reason: Option<Vec<u8>> = c
            .prepare_cached(&format!(
                "SELECT CAST(substr(json_extract(payload_json, '$.reason'),1,{MAX_PAGE_TEXT}) AS BLOB) FROM events \
                 WHERE run_id = ? AND step_id = ? AND type = 'approval.requested' AND json_valid(payload_json) \
                 AND json_extract(payload_json, '$.approval_id') = ? ORDER BY seq LIMIT 1"
            ))
            .ctx("approval reason")?
            // The payload is Go JSON: an id that is not UTF-8 is written with one U+FFFD per
            // invalid byte, which json_extract reads back as text.
            .query_row(params![run_id, step, crate::runtime::types::lossy(approval_id.0)], |r| r.get::<_, Option<Vec<u8>>>(0))
            .optional()
            .ctx("approval reason")?
            .flatten();
    Ok(String::from_utf8_lossy(&reason.unwrap_or_default()).into_owned())
}
