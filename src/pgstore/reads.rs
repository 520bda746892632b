//! What a reviewer's `approve`, `reject`, `deny` and `cancel` read on PostgreSQL besides the
//! operator's own reads: a run named by a prefix of its id, a request's size before it is read
//! (a request over `SHOWN_REQUEST_MAX` bytes is never read whole), that approval with its
//! request replaced by a stand-in, and the reason the policy gave. Each read is bounded.

use rusqlite::types::Value;

use super::PgStore;
use super::operate::{store_error, values};
use crate::runtime::store::{
    APPROVAL_COLUMNS, MAX_PAGE_TEXT, SHOWN_REQUEST_MAX, StoreError, approval_from_values,
    capped_note,
};
use crate::runtime::types::{Approval, Key};

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
        let Ok(p) = std::str::from_utf8(prefix) else {
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
        let (Ok(run), Ok(id)) = (
            std::str::from_utf8(run_id),
            std::str::from_utf8(approval_id),
        ) else {
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
        let Ok(run) = std::str::from_utf8(run_id) else {
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
        let (Ok(run), Ok(id)) = (
            std::str::from_utf8(run_id),
            std::str::from_utf8(approval_id),
        ) else {
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
        let (Ok(run), Ok(id)) = (
            std::str::from_utf8(run_id),
            std::str::from_utf8(approval_id),
        ) else {
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
