//! `stats` on PostgreSQL (issue 21's numbers, issue 19): the steps, then the approvals, streamed
//! in one repeatable-read snapshot through a portal a few rows at a time, and counted by
//! SQLite's own tallies (`runtime::store::StatsFromRows`), so the report is the one SQLite
//! gives for the same rows. Needs the session's `pg_temp` functions
//! ([`PgStore::prepare_console_reads`]).

use super::PgStore;
use super::operate::store_error;
use crate::runtime::stats::{NAME_MAX, Stats};
use crate::runtime::store::{StatsFromRows, StoreError};
use crate::runtime::types::Timestamp;

/// Rows fetched from the portal at a time (a decision or policy may be large).
const FETCH: i32 = 64;

const STEPS: &str = "SELECT ord, decision_json, policy_json, \
    CASE WHEN policy_json = '' AND status = 'failed' AND pg_temp.countersign_json_ok(observation_json) \
         THEN COALESCE((observation_json::json ->> 'kind') = 'invalid_decision', false) ELSE false END \
    FROM steps WHERE $1::text IS NULL OR substr(started_at, 1, 19) >= $1::text ORDER BY ord";

const APPROVALS: &str = "SELECT a.ord, s.ord, s.decision_json, s.policy_json, a.status, a.created_at, \
    a.decided_at, substring(convert_to(a.decided_by, 'UTF8') FROM 1 FOR $2::int), \
    octet_length(a.decided_by) > $2::int, a.step_id \
    FROM approvals a LEFT JOIN steps s ON s.id = a.step_id \
    WHERE $1::text IS NULL OR substr(a.created_at, 1, 19) >= $1::text ORDER BY a.ord";

impl PgStore {
    /// The queue's numbers since `since` (every step and approval when `None`).
    pub fn stats(&self, since: Option<Timestamp>, now: Timestamp) -> Result<Stats, StoreError> {
        let mut b = StatsFromRows::new(since, now)?;
        let cutoff = b.cutoff();
        self.snapshot(|tx, url| {
            let err = |e| store_error(url, "stats", e);
            let steps = tx.bind(STEPS, &[&cutoff]).map_err(err)?;
            loop {
                let rows = tx.query_portal(&steps, FETCH).map_err(err)?;
                if rows.is_empty() {
                    break;
                }
                for r in &rows {
                    let d: Option<String> = r.try_get(1).unwrap_or(None);
                    let p: Option<String> = r.try_get(2).unwrap_or(None);
                    b.step(
                        r.try_get(0).unwrap_or(0),
                        d.as_deref(),
                        p.as_deref(),
                        r.try_get(3).unwrap_or(false),
                    )?;
                }
            }
            let max = NAME_MAX as i32;
            let approvals = tx.bind(APPROVALS, &[&cutoff, &max]).map_err(err)?;
            loop {
                let rows = tx.query_portal(&approvals, FETCH).map_err(err)?;
                if rows.is_empty() {
                    break;
                }
                for r in &rows {
                    let text = |i: usize| -> String { r.try_get(i).unwrap_or_default() };
                    let step_ord: Option<i64> = r.try_get(1).unwrap_or(None);
                    let d: Option<String> = r.try_get(2).unwrap_or(None);
                    let p: Option<String> = r.try_get(3).unwrap_or(None);
                    let by: Option<Vec<u8>> = r.try_get(7).unwrap_or(None);
                    b.approval(
                        r.try_get(0).unwrap_or(0),
                        step_ord.map(|s| (s, d.as_deref(), p.as_deref())),
                        &text(9),
                        &text(4),
                        &text(5),
                        &text(6),
                        by.unwrap_or_default(),
                        r.try_get::<_, Option<bool>>(8)
                            .unwrap_or(None)
                            .unwrap_or(false),
                    )?;
                }
            }
            Ok(())
        })?;
        Ok(b.finish())
    }
}
