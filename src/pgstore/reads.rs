//! What a reviewer reads on PostgreSQL besides the operator's own reads: the runs, a page at a
//! time by key with each text capped as SQLite's pages cap it, and the pending approval of
//! each waiting run (`runs`); a run named by a prefix of its id, a request's size before it is
//! read (a request over `SHOWN_REQUEST_MAX` bytes is never read whole), that approval with its
//! request replaced by a stand-in, and the reason the policy gave (`approve`, `reject`, `deny`,
//! `cancel`). Each read is bounded.

use std::collections::BTreeMap;

use rusqlite::types::Value;

use super::PgStore;
use super::operate::{store_error, text_id, values};
use super::stmts::Cached;
use crate::runtime::store::{
    APPROVAL_COLUMNS, KeyPage, MAX_PAGE_TEXT, SHOWN_REQUEST_MAX, StoreError, approval_from_values,
    capped_note, run_from_values,
};
use crate::runtime::types::{Approval, Key, Run};

/// `approval.requested` events of one step read at most to find an approval's reason.
const REASON_EVENTS: i64 = 64;

/// Text cut to `n` characters.
fn chars(s: &str, n: i64) -> String {
    s.chars().take(usize::try_from(n).unwrap_or(0)).collect()
}

impl PgStore {
    /// Run ids that start with `prefix`, in byte order, at most `limit` (ids are `COLLATE
    /// "C"`, so they sort by bytes and the ones with a prefix lie together from the prefix on).
    pub fn runs_with_prefix(&self, prefix: &[u8], limit: u32) -> Result<Vec<Key>, StoreError> {
        let Some(p) = text_id(prefix) else {
            return Ok(Vec::new());
        };
        let rows = self
            .lock()
            .query(
                "SELECT id FROM runs WHERE id >= $1 ORDER BY id LIMIT $2",
                &[&p, &i64::from(limit)],
            )
            .map_err(|e| store_error(&self.url, "runs by prefix", e))?;
        Ok(rows
            .iter()
            .filter_map(|r| r.try_get::<_, String>(0).ok())
            .take_while(|id| id.starts_with(p))
            .map(|id| Key::new(id.into_bytes()))
            .collect())
    }

    /// The stored size in bytes of an approval's request; `None` if there is no such approval.
    pub fn request_bytes(
        &self,
        run_id: &[u8],
        approval_id: &[u8],
    ) -> Result<Option<i64>, StoreError> {
        let (Some(run), Some(id)) = (text_id(run_id), text_id(approval_id)) else {
            return Ok(None);
        };
        Ok(self
            .lock()
            .query_opt(
                "SELECT octet_length(request_json)::bigint FROM approvals WHERE id = $1 AND run_id = $2",
                &[&id, &run],
            )
            .map_err(|e| store_error(&self.url, "request size", e))?
            .and_then(|r| r.try_get::<_, i64>(0).ok()))
    }

    /// A run's pending approvals in creation order (at most `max`) with their request sizes.
    pub fn pending_request_bytes(
        &self,
        run_id: &[u8],
        max: i64,
    ) -> Result<Vec<(Key, i64)>, StoreError> {
        let Some(run) = text_id(run_id) else {
            return Ok(Vec::new());
        };
        let rows = self
            .lock()
            .query(
                "SELECT id, octet_length(request_json)::bigint FROM approvals \
                 WHERE run_id = $1 AND status = 'pending' ORDER BY ord LIMIT $2",
                &[&run, &max],
            )
            .map_err(|e| store_error(&self.url, "request sizes", e))?;
        Ok(rows
            .iter()
            .map(|r| {
                (
                    Key::new(r.try_get::<_, String>(0).unwrap_or_default().into_bytes()),
                    r.try_get::<_, i64>(1).unwrap_or(0),
                )
            })
            .collect())
    }

    /// One approval for showing, its request never read when over [`SHOWN_REQUEST_MAX`]
    /// bytes: then (and when it is over [`MAX_PAGE_TEXT`] characters) the request is a
    /// stand-in naming the run, the step, the tool and the request's length, and the decode
    /// error says so, as SQLite's page read gives it. `None` if absent.
    pub fn approval_capped(
        &self,
        run_id: &[u8],
        approval_id: &[u8],
    ) -> Result<Option<Approval>, StoreError> {
        let (Some(run), Some(id)) = (text_id(run_id), text_id(approval_id)) else {
            return Ok(None);
        };
        // The request's column is read only when it can be shown; the tool's name comes from
        // the spec the step ran under when the request is not read.
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS}, char_length(request_json)::bigint, \
             octet_length(request_json)::bigint, \
             (SELECT t.spec_json FROM steps s JOIN tool_specs t ON t.hash = s.spec_hash \
              WHERE s.id = approvals.step_id AND octet_length(t.spec_json) <= {MAX_PAGE_TEXT}) \
             FROM approvals WHERE id = $1 AND run_id = $2"
        )
        .replacen(
            "request_json, hash",
            &format!(
                "CASE WHEN octet_length(request_json) > {SHOWN_REQUEST_MAX} THEN '' \
                 ELSE request_json END, hash"
            ),
            1,
        );
        let Some(row) = self
            .lock()
            .query_opt(&sql, &[&id, &run])
            .map_err(|e| store_error(&self.url, "get approval", e))?
        else {
            return Ok(None);
        };
        let mut v = values(&row);
        let num = |v: &[Value], i: usize| match v.get(i) {
            Some(Value::Integer(n)) => *n,
            _ => 0,
        };
        let text = |v: &[Value], i: usize| match v.get(i) {
            Some(Value::Text(s)) => s.clone(),
            _ => String::new(),
        };
        let (length, bytes) = (num(&v, 14), num(&v, 15));
        let spec = text(&v, 16);
        v.truncate(14);
        let request = text(&v, 6);
        let stand_in = |name: String, n: i64| {
            serde_json::json!({
                "run_id": text(&v, 1),
                "step_id": text(&v, 2),
                "spec": {"name": chars(&name, MAX_PAGE_TEXT)},
                "args": {"truncated": true, "length": n},
            })
            .to_string()
        };
        let field = |json: &str, path: &[&str]| -> Option<String> {
            let mut node: serde_json::Value = serde_json::from_str(json).ok()?;
            for p in path {
                node = node.get(p)?.clone();
            }
            node.as_str().map(str::to_string)
        };
        let capped = if bytes > SHOWN_REQUEST_MAX {
            let name = field(&spec, &["name"]).unwrap_or_default();
            Some((stand_in(name, bytes), bytes))
        } else if length > MAX_PAGE_TEXT {
            match serde_json::from_str::<serde_json::Value>(&request) {
                Ok(_) => {
                    let name = field(&request, &["spec", "name"]).unwrap_or_default();
                    Some((stand_in(name, length), length))
                }
                Err(_) => Some((String::new(), length)),
            }
        } else {
            None
        };
        let Some((req, n)) = capped else {
            return Ok(Some(approval_from_values(&v)));
        };
        v[6] = Value::Text(req);
        let mut a = approval_from_values(&v);
        let note = capped_note(n);
        if a.decode_error.is_empty() {
            a.decode_error = note;
        } else {
            a.decode_error = format!("{}; {note}", a.decode_error);
        }
        Ok(Some(a))
    }

    /// The reason the policy gave when it asked for this approval: `reason` of the step's
    /// first `approval.requested` event that names it, cut to [`MAX_PAGE_TEXT`] characters;
    /// empty when none is chained (an event still in the inbox is not read).
    pub fn approval_reason(&self, run_id: &[u8], approval_id: &[u8]) -> Result<String, StoreError> {
        let missing = || StoreError::NotFound {
            what: crate::runtime::types::Said::from("approval ")
                .id(approval_id)
                .text(" of run ")
                .id(run_id),
        };
        let (Some(run), Some(id)) = (text_id(run_id), text_id(approval_id)) else {
            return Err(missing());
        };
        self.snapshot(|tx, url| {
            let step: String = tx
                .query_opt(
                    "SELECT step_id FROM approvals WHERE id = $1 AND run_id = $2",
                    &[&id, &run],
                )
                .map_err(|e| store_error(url, "approval reason", e))?
                .ok_or_else(missing)?
                .try_get(0)
                .unwrap_or_default();
            let rows = tx
                .query(
                    &format!(
                        "SELECT payload_json FROM events WHERE run_id = $1 AND step_id = $2 \
                         AND type = 'approval.requested' AND octet_length(payload_json) <= {SHOWN_REQUEST_MAX} \
                         ORDER BY seq LIMIT {REASON_EVENTS}"
                    ),
                    &[&run, &step],
                )
                .map_err(|e| store_error(url, "approval reason", e))?;
            for r in &rows {
                let payload: String = r.try_get(0).unwrap_or_default();
                let Ok(node) = serde_json::from_str::<serde_json::Value>(&payload) else {
                    continue;
                };
                if node.get("approval_id").and_then(|v| v.as_str()) != Some(id) {
                    continue;
                }
                let reason = node.get("reason").and_then(|v| v.as_str()).unwrap_or("");
                return Ok(chars(reason, MAX_PAGE_TEXT));
            }
            Ok(String::new())
        })
    }
}

/// A text column as a page shows it: over [`MAX_PAGE_TEXT`] characters, its head and
/// `…[truncated: N characters]` (SQLite's page cap, the same SQL in PostgreSQL's dialect).
pub(super) fn capped(c: &str) -> String {
    format!(
        "CASE WHEN char_length({c}) > {MAX_PAGE_TEXT} THEN substr({c}, 1, {MAX_PAGE_TEXT}) || '\u{2026}[truncated: ' || char_length({c}) || ' characters]' ELSE {c} END"
    )
}

/// The runs columns a page reads, in `RUN_COLUMNS` order, each text capped; `result_json` over
/// the cap is read as `''` and its head and length come after (columns 19 and 20), for the
/// stand-in SQLite's page gives; `ord` last (21).
pub(super) fn run_page_select() -> String {
    run_page_select_with("")
}

/// [`run_page_select`] with more columns (`extra`, each after a comma) after its own 22.
pub(super) fn run_page_select_with(extra: &str) -> String {
    format!(
        "SELECT {}, {}, {}, {}, {}, CASE WHEN char_length(limits_json) > {MAX_PAGE_TEXT} THEN '' ELSE limits_json END, \
         step_count, {}, {}, {}, CASE WHEN char_length(result_json) > {MAX_PAGE_TEXT} THEN '' ELSE result_json END, \
         model_calls, input_tokens, output_tokens, cached_input_tokens, estimated_cost_micros, active_ms, {}, {}, \
         CASE WHEN char_length(result_json) > {MAX_PAGE_TEXT} THEN substr(result_json, 1, {MAX_PAGE_TEXT}) ELSE '' END, \
         char_length(result_json)::bigint, ord{extra} FROM runs",
        capped("id"),
        capped("goal"),
        capped("status"),
        capped("reason"),
        capped("reason_detail"),
        capped("created_at"),
        capped("started_at"),
        capped("finished_at"),
        capped("lease_owner"),
        capped("lease_expires_at"),
    )
}

/// A run read by [`run_page_select`] and its `ord`: a `result_json` over the cap becomes the
/// stand-in SQLite's page gives.
pub(super) fn run_of_page_row(r: &postgres::Row) -> (i64, Run) {
    let mut v = values(r);
    let ord = match v.get(21) {
        Some(Value::Integer(n)) => *n,
        _ => i64::MIN,
    };
    let length = match v.get(20) {
        Some(Value::Integer(n)) => *n,
        _ => 0,
    };
    if length > MAX_PAGE_TEXT {
        let head = match v.get(19) {
            Some(Value::Text(s)) => s.clone(),
            _ => String::new(),
        };
        let stand_in = serde_json::json!({"truncated": true, "length": length, "head": head});
        v[10] = Value::Text(stand_in.to_string());
    }
    v.truncate(19);
    (ord, run_from_values(&v))
}

impl PgStore {
    /// Runs newest first (by insertion order), of one status or all (`""`): those before
    /// `before` (`None`: from the newest), after skipping `skip`, at most `limit`; each text
    /// capped as SQLite's page caps it. A page reads `limit + 1` rows by the `ord` key.
    pub fn runs_page_by_key(
        &self,
        status: &str,
        before: Option<i64>,
        skip: i64,
        limit: i64,
    ) -> Result<KeyPage<Run>, StoreError> {
        crate::runtime::store::check_page("runs", limit, skip)?;
        let before = before.unwrap_or(i64::MAX);
        let sql = format!(
            "{} WHERE ord < $1 AND ($2 = '' OR status = $2) ORDER BY ord DESC LIMIT $3 OFFSET $4",
            run_page_select()
        );
        let rows = self
            .lock()
            .query(&sql, &[&before, &status, &(limit.saturating_add(1)), &skip])
            .map_err(|e| store_error(&self.url, "list runs", e))?;
        let mut items: Vec<(i64, Run)> = rows.iter().map(run_of_page_row).collect();
        let more = items.len() as i64 > limit;
        items.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        let last_key = items.last().map(|(k, _)| *k);
        Ok(KeyPage {
            items: items.into_iter().map(|(_, r)| r).collect(),
            more,
            last_key,
        })
    }

    /// How many runs there are, of one status or all (`""`).
    pub fn count_runs(&self, status: &str) -> Result<i64, StoreError> {
        self.lock()
            .query_one(
                "SELECT count(*) FROM runs WHERE ($1 = '' OR status = $1)",
                &[&status],
            )
            .map_err(|e| store_error(&self.url, "count runs", e))?
            .try_get(0)
            .map_err(|e| store_error(&self.url, "count runs", e))
    }

    /// For each waiting run of `run_ids`, the ids of its first `max` pending approvals in
    /// insertion order.
    pub fn pending_approval_ids_of(
        &self,
        run_ids: &[&[u8]],
        max: i64,
    ) -> Result<BTreeMap<Key, Vec<Key>>, StoreError> {
        let mut out: BTreeMap<Key, Vec<Key>> = BTreeMap::new();
        let ids: Vec<&str> = run_ids.iter().filter_map(|b| text_id(b)).collect();
        if ids.is_empty() || max <= 0 {
            return Ok(out);
        }
        let rows = self
            .lock()
            .query(
                "SELECT run_id, id FROM (SELECT a.run_id, a.id, a.ord, row_number() OVER \
                 (PARTITION BY a.run_id ORDER BY a.ord) AS n FROM approvals a JOIN runs r ON r.id = a.run_id \
                 WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL' AND a.run_id = ANY($1)) AS p \
                 WHERE n <= $2 ORDER BY run_id, n",
                &[&ids, &max],
            )
            .map_err(|e| store_error(&self.url, "pending approvals", e))?;
        for r in &rows {
            let run: String = r.try_get(0).unwrap_or_default();
            let id: String = r.try_get(1).unwrap_or_default();
            out.entry(Key::new(run.into_bytes()))
                .or_default()
                .push(Key::new(id.into_bytes()));
        }
        Ok(out)
    }
}
