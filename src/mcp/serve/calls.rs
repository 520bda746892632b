//! Reads and writes of agentrt's `proxy_calls` index (agentrt mcp 2.7) on the proxy's own
//! connection. Every write is one IMMEDIATE transaction; a claim compare-and-sets on the open
//! row it read. The runtime's tables are only read, never written, here.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// `outcome` codes (0 unseen, 1 none, 2 known, 3 unknown).
pub const OUTCOME_NONE: i64 = 1;
pub const OUTCOME_KNOWN: i64 = 2;
pub const OUTCOME_UNKNOWN: i64 = 3;

/// One row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: i64,
    pub request_key: String,
    pub tool: String,
    pub side_effect: String,
    pub run_id: String,
    pub created_at: i64,
    pub open: bool,
    pub closed_at: i64,
    pub settled_at: i64,
    pub outcome: i64,
}

/// What a claim found.
#[derive(Debug)]
pub enum Claim {
    Claimed,
    /// Another caller claimed or closed the key's open row in between: decide again.
    Race,
}

/// The index of one session.
pub struct Calls {
    conn: Connection,
    session: String,
}

const COLS: &str =
    "id, request_key, tool, side_effect, run_id, created_at, open, closed_at, settled_at, outcome";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        request_key: r.get(1)?,
        tool: r.get(2)?,
        side_effect: r.get(3)?,
        run_id: r.get(4)?,
        created_at: r.get(5)?,
        open: r.get::<_, i64>(6)? == 1,
        closed_at: r.get(7)?,
        settled_at: r.get(8)?,
        outcome: r.get(9)?,
    })
}

fn err(e: rusqlite::Error) -> String {
    format!("proxy: call index: {e}")
}

/// Nanoseconds as i64 (saturating).
pub fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

impl Calls {
    /// Opens the index of `session` in the database at `path` (already migrated).
    pub fn open(path: &Path, session: &str) -> Result<Calls, String> {
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(err)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(err)?;
        Ok(Calls {
            conn,
            session: session.to_string(),
        })
    }

    fn query(&self, sql: &str, p: &[&dyn rusqlite::ToSql]) -> Result<Vec<Row>, String> {
        let mut st = self.conn.prepare_cached(sql).map_err(err)?;
        let rows = st.query_map(p, row).map_err(err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(err)
    }

    /// The key's open row and its rows closed within `window` of `now`, newest first.
    pub fn for_key(&self, key: &str, now: i64, window: i64) -> Result<Vec<Row>, String> {
        let since = now.saturating_sub(window);
        self.query(
            &format!("SELECT {COLS} FROM proxy_calls WHERE session=?1 AND request_key=?2 AND (open=1 OR closed_at >= ?3) ORDER BY id DESC"),
            &[&self.session, &key, &since],
        )
    }

    /// For each other request of `tool` (not `except`), its newest row with an attempt (rows
    /// settled "no attempt", such as an expired re-ask that ran nothing, are passed over), when
    /// that row's outcome is unseen or unknown; oldest first (agentrt's `unknownBlock`
    /// candidates).
    pub fn unresolved_of_tool(&self, tool: &str, except: &str) -> Result<Vec<Row>, String> {
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLS} FROM proxy_calls p WHERE session=?1 AND tool=?2 AND request_key<>?3 AND outcome IN (0, ?4) AND id = (SELECT MAX(id) FROM proxy_calls q WHERE q.session=p.session AND q.request_key=p.request_key AND q.outcome<>?5) ORDER BY id"
            ))
            .map_err(err)?;
        let rows = st
            .query_map(
                params![self.session, tool, except, OUTCOME_UNKNOWN, OUTCOME_NONE],
                row,
            )
            .map_err(err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(err)
    }

    /// Rows not yet settled, oldest first.
    pub fn unsettled(&self) -> Result<Vec<Row>, String> {
        self.query(
            &format!(
                "SELECT {COLS} FROM proxy_calls WHERE session=?1 AND settled_at=0 ORDER BY id"
            ),
            &[&self.session],
        )
    }

    /// The session's rows unsettled or settled within the last hour, newest first (≤ 200).
    pub fn recent(&self, now: i64) -> Result<Vec<Row>, String> {
        let since = now.saturating_sub(3_600_000_000_000);
        self.query(
            &format!("SELECT {COLS} FROM proxy_calls WHERE session=?1 AND (settled_at=0 OR settled_at >= ?2) ORDER BY id DESC LIMIT 200"),
            &[&self.session, &since],
        )
    }

    /// Claims the key for a new run in one IMMEDIATE transaction: the open row must still be
    /// `expected` (or absent), which is then closed; the new row is inserted open.
    #[allow(clippy::too_many_arguments)]
    pub fn claim(
        &mut self,
        key: &str,
        expected: Option<i64>,
        tool: &str,
        side_effect: &str,
        run_id: &str,
        now: i64,
    ) -> Result<Claim, String> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let open: Option<i64> = tx
            .query_row(
                "SELECT id FROM proxy_calls WHERE session=?1 AND request_key=?2 AND open=1",
                params![self.session, key],
                |r| r.get(0),
            )
            .optional()
            .map_err(err)?;
        if open != expected {
            return Ok(Claim::Race);
        }
        if let Some(id) = open {
            tx.execute(
                "UPDATE proxy_calls SET open=0, closed_at=?1 WHERE id=?2 AND open=1",
                params![now, id],
            )
            .map_err(err)?;
        }
        tx.execute(
            "INSERT INTO proxy_calls (session, request_key, tool, side_effect, run_id, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![self.session, key, tool, side_effect, run_id, now],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(Claim::Claimed)
    }

    /// Caches a terminal run's outcome on its row (only once).
    pub fn settle(&mut self, run_id: &str, outcome: i64, now: i64) -> Result<(), String> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        tx.execute(
            "UPDATE proxy_calls SET settled_at = CASE WHEN settled_at=0 THEN ?1 ELSE settled_at END, outcome=?2 WHERE run_id=?3 AND session=?4 AND outcome=0",
            params![now, outcome, run_id, self.session],
        )
        .map_err(err)?;
        tx.commit().map_err(err)
    }

    /// A row whose run was never begun is settled as "nothing started".
    pub fn settle_empty(&mut self, id: i64, now: i64) -> Result<(), String> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        tx.execute(
            "UPDATE proxy_calls SET settled_at=?1, outcome=1 WHERE id=?2 AND settled_at=0 AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = proxy_calls.run_id)",
            params![now, id],
        )
        .map_err(err)?;
        tx.commit().map_err(err)
    }

    /// After a successful begin of a row found settled (a reused row): unsettled again.
    pub fn unsettle(&mut self, run_id: &str) -> Result<(), String> {
        self.conn
            .execute(
                "UPDATE proxy_calls SET settled_at=0, outcome=0 WHERE run_id=?1 AND session=?2 AND settled_at != 0",
                params![run_id, self.session],
            )
            .map(|_| ())
            .map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls() -> (tempfile::TempDir, Calls, Calls) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        drop(crate::runtime::store::Store::open(&db).unwrap());
        crate::mcp::index::migrate(&db).unwrap();
        let a = Calls::open(&db, "s").unwrap();
        let b = Calls::open(&db, "s").unwrap();
        (dir, a, b)
    }

    #[test]
    fn a_claim_compare_and_sets_on_the_open_row_it_read() {
        let (_d, mut a, mut b) = calls();
        assert!(matches!(
            a.claim("k", None, "t", "read_only", "s.1", 1).unwrap(),
            Claim::Claimed
        ));
        // b read "no open row" before a claimed: its claim is a race, and writes nothing.
        assert!(matches!(
            b.claim("k", None, "t", "read_only", "s.2", 2).unwrap(),
            Claim::Race
        ));
        let rows = b.for_key("k", 3, 0).unwrap();
        assert_eq!(rows.len(), 1);
        let open = rows[0].id;
        // Claiming over the row it read closes it and opens the next.
        assert!(matches!(
            b.claim("k", Some(open), "t", "read_only", "s.2", 3)
                .unwrap(),
            Claim::Claimed
        ));
        assert!(matches!(
            a.claim("k", Some(open), "t", "read_only", "s.3", 4)
                .unwrap(),
            Claim::Race
        ));
        let rows = a.for_key("k", 5, 10).unwrap();
        let open: Vec<&str> = rows
            .iter()
            .filter(|r| r.open)
            .map(|r| r.run_id.as_str())
            .collect();
        assert_eq!(open, ["s.2"], "one open row per key");
        assert_eq!(
            rows.iter().find(|r| r.run_id == "s.1").unwrap().closed_at,
            3
        );
    }
}
