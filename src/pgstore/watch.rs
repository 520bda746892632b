//! `watch` on PostgreSQL (issue 19): the approvals announced as they arrive, by following the
//! chain. SQLite's watch reads approvals by rowid, which is commit order there (one writer at
//! a time). PostgreSQL's `ord` is given at insert, not at commit, so a watcher that moved past
//! `ord` 11 could miss a row with `ord` 10 that committed later. The chain is in commit order
//! and gap-free (decision 0081), so here an approval is announced by its `approval.requested`
//! event once that is chained, and the watcher waits for the sequencer's NOTIFY
//! (decision 0084) between reads.

use super::PgStore;
use super::operate::store_error;
use super::stmts::Cached;
use crate::runtime::store::{ArrivedApproval, PRESENTATION_MAX, StoreError};

impl PgStore {
    /// The chain head's seq: where a watch that announces only new approvals starts.
    pub fn watch_start(&self) -> Result<i64, StoreError> {
        self.lock()
            .query_one("SELECT seq FROM event_chain", &[])
            .and_then(|r| r.try_get::<_, i64>(0))
            .map_err(|e| store_error(&self.url, "watch: chain head", e))
    }

    /// The approvals whose `approval.requested` events were chained with a seq above
    /// `after`, in seq order, at most `limit` events looked at; only those still pending are
    /// returned, with the largest seq looked at (the head, when fewer than `limit` were).
    pub fn approvals_requested_after(
        &self,
        after: i64,
        limit: u32,
    ) -> Result<(Vec<ArrivedApproval>, i64), StoreError> {
        let limit = i64::from(limit.max(1));
        self.snapshot(|tx, url| {
            let err = |e| store_error(url, "watch: approvals", e);
            let head: i64 = tx
                .query_one("SELECT seq FROM event_chain", &[])
                .and_then(|r| r.try_get(0))
                .map_err(err)?;
            let rows = tx
                .query(
                    "SELECT e.seq, a.ord, a.id, a.run_id, a.step_id, a.kind, \
                     CASE WHEN r.status = 'WAITING_FOR_APPROVAL' THEN a.status END, a.created_at, \
                     a.expires_at, \
                     CASE WHEN pg_temp.countersign_json_ok(s.decision_json) \
                          THEN substring(convert_to(s.decision_json::json ->> 'tool', 'UTF8') FROM 1 FOR 256) END, \
                     CASE WHEN pg_temp.countersign_json_ok(s.decision_json) \
                          THEN octet_length(convert_to(s.decision_json::json ->> 'tool', 'UTF8'))::bigint END, \
                     substring(convert_to(a.presentation_json, 'UTF8') FROM 1 FOR $3::int), \
                     octet_length(a.presentation_json)::bigint \
                     FROM events e \
                     LEFT JOIN approvals a ON a.run_id = e.run_id AND a.id = \
                       (CASE WHEN pg_temp.countersign_json_ok(e.payload_json) \
                             THEN e.payload_json::json ->> 'approval_id' END) \
                     LEFT JOIN steps s ON s.id = a.step_id \
                     LEFT JOIN runs r ON r.id = a.run_id \
                     WHERE e.seq > $1 AND e.seq <= $4 AND e.type = 'approval.requested' \
                     ORDER BY e.seq LIMIT $2",
                    &[&after, &limit, &(PRESENTATION_MAX as i32), &head],
                )
                .map_err(err)?;
            let mut out = Vec::new();
            let mut last = after;
            for r in &rows {
                let seq: i64 = r.try_get(0).unwrap_or(after);
                last = last.max(seq);
                let text = |i: usize| {
                    r.try_get::<_, Option<String>>(i)
                        .ok()
                        .flatten()
                        .unwrap_or_default()
                        .into_bytes()
                };
                // A length in bytes; none (a row that is not there) is 0.
                let length = |i: usize| {
                    r.try_get::<_, Option<i64>>(i)
                        .ok()
                        .flatten()
                        .unwrap_or(0)
                        .max(0) as u64
                };
                let status = text(6);
                if status != b"pending" {
                    continue;
                }
                out.push(ArrivedApproval {
                    rowid: r.try_get::<_, Option<i64>>(1).ok().flatten().unwrap_or(0),
                    id: text(2),
                    run_id: text(3),
                    step_id: text(4),
                    kind: text(5),
                    status,
                    created_at: text(7),
                    expires_at: text(8),
                    tool: r.try_get::<_, Option<Vec<u8>>>(9).ok().flatten(),
                    tool_len: length(10),
                    presentation: r
                        .try_get::<_, Option<Vec<u8>>>(11)
                        .ok()
                        .flatten()
                        .unwrap_or_default(),
                    presentation_len: length(12),
                });
            }
            if (rows.len() as i64) < limit {
                last = last.max(head);
            }
            Ok((out, last))
        })
    }
}
