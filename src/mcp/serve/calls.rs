//! Reads and writes of agentrt's `proxy_calls` index (agentrt mcp 2.7) on the proxy's own
//! connection, SQLite's here and PostgreSQL's in `calls_pg.rs`. Every write is one
//! transaction (IMMEDIATE on SQLite); a claim compare-and-sets on the open row it read. The
//! runtime's tables are only read, never written, here.

use std::path::Path;
use std::time::Duration;

use crate::mcp::config::Database;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::call_row::{Arg, CallReads, NewCall};
pub use super::call_row::{Claim, OUTCOME_KNOWN, OUTCOME_NONE, OUTCOME_UNKNOWN, Row};

/// The index of one session, on the run database's backend: SQLite (the proxy's own
/// connection to the file) or PostgreSQL (a connection of its own, decision 0085). The reads
/// are written once for both (`CallReads`), the writes once per backend; the `match` below
/// picks the backend. Both keep the same contract: every write is one transaction, a claim
/// compare-and-sets on the open row it read.
pub struct Calls {
    back: Back,
    session: String,
}

enum Back {
    Sqlite(Connection),
    #[cfg(feature = "postgres")]
    Postgres(super::calls_pg::PgCalls),
}

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

/// The start of the window `window` before `now`.
pub(crate) fn since(now: i64, window: i64) -> i64 {
    now.saturating_sub(window)
}

/// How long `recent` looks back (an hour).
pub(crate) const RECENT_NS: i64 = 3_600_000_000_000;

impl Calls {
    /// Opens the index of `session` in the run database `db` (already migrated).
    pub fn open(db: &Database, session: &str) -> Result<Calls, String> {
        let back = match db {
            Database::File(path) => Back::Sqlite(open_sqlite(path)?),
            #[cfg(feature = "postgres")]
            Database::Postgres(url) => Back::Postgres(super::calls_pg::PgCalls::open(url)?),
        };
        Ok(Calls {
            back,
            session: session.to_string(),
        })
    }

    /// The key's open row and its rows closed within `window` of `now`, newest first.
    pub fn for_key(&mut self, key: &str, now: i64, window: i64) -> Result<Vec<Row>, String> {
        let s = &self.session;
        match &mut self.back {
            Back::Sqlite(c) => c.for_key(s, key, since(now, window)),
            #[cfg(feature = "postgres")]
            Back::Postgres(p) => p.for_key(s, key, since(now, window)),
        }
    }

    /// For each other request of `tool` (not `except`), its newest row with an attempt (rows
    /// settled "no attempt", such as an expired re-ask that ran nothing, are passed over), when
    /// that row's outcome is unseen or unknown; oldest first (agentrt's `unknownBlock`
    /// candidates).
    pub fn unresolved_of_tool(&mut self, tool: &str, except: &str) -> Result<Vec<Row>, String> {
        let s = &self.session;
        match &mut self.back {
            Back::Sqlite(c) => c.unresolved_of_tool(s, tool, except),
            #[cfg(feature = "postgres")]
            Back::Postgres(p) => p.unresolved_of_tool(s, tool, except),
        }
    }

    /// Rows not yet settled, oldest first.
    pub fn unsettled(&mut self) -> Result<Vec<Row>, String> {
        let s = &self.session;
        match &mut self.back {
            Back::Sqlite(c) => c.unsettled(s),
            #[cfg(feature = "postgres")]
            Back::Postgres(p) => p.unsettled(s),
        }
    }

    /// The session's rows unsettled or settled within the last hour, newest first (≤ 200).
    pub fn recent(&mut self, now: i64) -> Result<Vec<Row>, String> {
        let s = &self.session;
        match &mut self.back {
            Back::Sqlite(c) => c.recent(s, since(now, RECENT_NS)),
            #[cfg(feature = "postgres")]
            Back::Postgres(p) => p.recent(s, since(now, RECENT_NS)),
        }
    }

    /// Claims the key for a new run in one transaction: the open row must still be
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
        let new = NewCall {
            session: &self.session,
            key,
            tool,
            side_effect,
            run_id,
            now,
        };
        match &mut self.back {
            Back::Sqlite(c) => c.claim(&new, expected),
            #[cfg(feature = "postgres")]
            Back::Postgres(p) => p.claim(&new, expected),
        }
    }

    /// Caches a terminal run's outcome on its row (only once).
    pub fn settle(&mut self, run_id: &str, outcome: i64, now: i64) -> Result<(), String> {
        let s = &self.session;
        match &mut self.back {
            Back::Sqlite(c) => c.settle(s, run_id, outcome, now),
            #[cfg(feature = "postgres")]
            Back::Postgres(p) => p.settle(s, run_id, outcome, now),
        }
    }

    /// A row whose run was never begun is settled as "nothing started".
    pub fn settle_empty(&mut self, id: i64, now: i64) -> Result<(), String> {
        match &mut self.back {
            Back::Sqlite(c) => c.settle_empty(id, now),
            #[cfg(feature = "postgres")]
            Back::Postgres(p) => p.settle_empty(id, now),
        }
    }

    /// After a successful begin of a row found settled (a reused row): unsettled again.
    pub fn unsettle(&mut self, run_id: &str) -> Result<(), String> {
        let s = &self.session;
        match &mut self.back {
            Back::Sqlite(c) => c.unsettle(s, run_id),
            #[cfg(feature = "postgres")]
            Back::Postgres(p) => p.unsettle(s, run_id),
        }
    }
}

/// The index on SQLite: the proxy's own connection to the file.
fn open_sqlite(path: &Path) -> Result<Connection, String> {
    let conn = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(err)?;
    conn.busy_timeout(Duration::from_secs(5)).map_err(err)?;
    Ok(conn)
}

/// The SQLite operations, on the proxy's connection; every write one IMMEDIATE transaction.
trait SqliteOps {
    fn conn(&mut self) -> &mut Connection;

    /// Runs one statement in an IMMEDIATE transaction of its own.
    fn write_one(&mut self, sql: &str, p: impl rusqlite::Params) -> Result<(), String> {
        let tx = self
            .conn()
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        tx.execute(sql, p).map_err(err)?;
        tx.commit().map_err(err)
    }

    fn claim(&mut self, new: &NewCall<'_>, expected: Option<i64>) -> Result<Claim, String> {
        let tx = self
            .conn()
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let open: Option<i64> = tx
            .query_row(
                "SELECT id FROM proxy_calls WHERE session=?1 AND request_key=?2 AND open=1",
                params![new.session, new.key],
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
                params![new.now, id],
            )
            .map_err(err)?;
        }
        tx.execute(
            "INSERT INTO proxy_calls (session, request_key, tool, side_effect, run_id, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![new.session, new.key, new.tool, new.side_effect, new.run_id, new.now],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(Claim::Claimed)
    }

    fn settle(
        &mut self,
        session: &str,
        run_id: &str,
        outcome: i64,
        now: i64,
    ) -> Result<(), String> {
        self.write_one(
            "UPDATE proxy_calls SET settled_at = CASE WHEN settled_at=0 THEN ?1 ELSE settled_at END, outcome=?2 WHERE run_id=?3 AND session=?4 AND outcome=0",
            params![now, outcome, run_id, session],
        )
    }

    fn settle_empty(&mut self, id: i64, now: i64) -> Result<(), String> {
        self.write_one(
            "UPDATE proxy_calls SET settled_at=?1, outcome=1 WHERE id=?2 AND settled_at=0 AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = proxy_calls.run_id)",
            params![now, id],
        )
    }

    fn unsettle(&mut self, session: &str, run_id: &str) -> Result<(), String> {
        self.conn()
            .execute(
                "UPDATE proxy_calls SET settled_at=0, outcome=0 WHERE run_id=?1 AND session=?2 AND settled_at != 0",
                params![run_id, session],
            )
            .map(|_| ())
            .map_err(err)
    }
}

impl SqliteOps for Connection {
    fn conn(&mut self) -> &mut Connection {
        self
    }
}

impl rusqlite::ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            Arg::Text(s) => s.to_sql(),
            Arg::Int(i) => i.to_sql(),
        }
    }
}

impl CallReads for Connection {
    const MARK: char = '?';

    fn rows(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, String> {
        let mut st = self.prepare_cached(sql).map_err(err)?;
        let rows = st
            .query_map(rusqlite::params_from_iter(args), row)
            .map_err(err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(err)
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
        let file = Database::File(db);
        let a = Calls::open(&file, "s").unwrap();
        let b = Calls::open(&file, "s").unwrap();
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
