//! The `proxy_calls` index on PostgreSQL (decision 0085): the same rows and the same
//! operations as on SQLite (`calls.rs`), on a connection of the proxy's own. Every write is one
//! transaction at the server's default isolation (read committed). A claim locks the key's
//! open row it read (`FOR UPDATE`) and compare-and-sets on it: a claimer that waited on the
//! lock reads the row again after the other's commit, finds it closed and reports a race. Two
//! claimers that both found no open row cannot both insert one: the unique open-call index
//! refuses the second insert, which is a race too.
//!
//! The client is synchronous: every call here is made from the proxy's own threads (never a
//! task of its async runtime), as the proxy's SQLite index is.

use postgres::Client;
use postgres::error::SqlState;
use postgres::types::ToSql;

use super::call_row::{Arg, CallReads, Claim, NewCall, Row};
use crate::pgstore::PgUrl;

/// The index's connection.
pub(crate) struct PgCalls {
    client: Client,
}

fn err(e: postgres::Error) -> String {
    // The server's message and detail only: a URL (and its password) never appears here.
    format!("proxy: call index: {}", crate::pgstore::pg_detail(&e))
}

fn row(r: &postgres::Row) -> Result<Row, String> {
    let get = |i: usize| r.try_get::<_, i64>(i).map_err(err);
    let text = |i: usize| r.try_get::<_, String>(i).map_err(err);
    Ok(Row {
        id: get(0)?,
        request_key: text(1)?,
        tool: text(2)?,
        side_effect: text(3)?,
        run_id: text(4)?,
        created_at: get(5)?,
        open: get(6)? == 1,
        closed_at: get(7)?,
        settled_at: get(8)?,
        outcome: get(9)?,
    })
}

impl PgCalls {
    /// Connects to `url` (the schema already migrated by the store's open).
    pub(crate) fn open(url: &PgUrl) -> Result<PgCalls, String> {
        let client = crate::pgstore::connect(url).map_err(|e| format!("proxy: call index: {e}"))?;
        Ok(PgCalls { client })
    }

    pub(crate) fn claim(
        &mut self,
        new: &NewCall<'_>,
        expected: Option<i64>,
    ) -> Result<Claim, String> {
        let mut tx = self.client.transaction().map_err(err)?;
        let open: Option<i64> = tx
            .query_opt(
                "SELECT id FROM proxy_calls WHERE session=$1 AND request_key=$2 AND open=1 FOR UPDATE",
                &[&new.session, &new.key],
            )
            .map_err(err)?
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(err)?;
        if open != expected {
            // Dropped without a commit: rolled back, the lock released.
            return Ok(Claim::Race);
        }
        if let Some(id) = open {
            tx.execute(
                "UPDATE proxy_calls SET open=0, closed_at=$1 WHERE id=$2 AND open=1",
                &[&new.now, &id],
            )
            .map_err(err)?;
        }
        let inserted = tx.execute(
            "INSERT INTO proxy_calls (session, request_key, tool, side_effect, run_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&new.session, &new.key, &new.tool, &new.side_effect, &new.run_id, &new.now],
        );
        match inserted {
            Ok(_) => {}
            // Another claimer inserted the key's open row after this one read none.
            Err(e) if is_open_conflict(&e) => return Ok(Claim::Race),
            Err(e) => return Err(err(e)),
        }
        tx.commit().map_err(err)?;
        Ok(Claim::Claimed)
    }

    /// Runs one statement (one statement: one transaction).
    fn execute(&mut self, sql: &str, p: &[&(dyn ToSql + Sync)]) -> Result<(), String> {
        self.client.execute(sql, p).map(|_| ()).map_err(err)
    }

    pub(crate) fn settle(
        &mut self,
        session: &str,
        run_id: &str,
        outcome: i64,
        now: i64,
    ) -> Result<(), String> {
        self.execute(
            "UPDATE proxy_calls SET settled_at = CASE WHEN settled_at=0 THEN $1 ELSE settled_at END, outcome=$2 WHERE run_id=$3 AND session=$4 AND outcome=0",
            &[&now, &outcome, &run_id, &session],
        )
    }

    pub(crate) fn settle_empty(&mut self, id: i64, now: i64) -> Result<(), String> {
        self.execute(
            "UPDATE proxy_calls SET settled_at=$1, outcome=1 WHERE id=$2 AND settled_at=0 AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = proxy_calls.run_id)",
            &[&now, &id],
        )
    }

    pub(crate) fn unsettle(&mut self, session: &str, run_id: &str) -> Result<(), String> {
        self.execute(
            "UPDATE proxy_calls SET settled_at=0, outcome=0 WHERE run_id=$1 AND session=$2 AND settled_at != 0",
            &[&run_id, &session],
        )
    }
}

impl CallReads for PgCalls {
    const MARK: char = '$';

    fn rows(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, String> {
        let p: Vec<&(dyn ToSql + Sync)> = args
            .iter()
            .map(|a| match a {
                Arg::Text(s) => s as &(dyn ToSql + Sync),
                Arg::Int(i) => i as &(dyn ToSql + Sync),
            })
            .collect();
        let rows = self.client.query(sql, &p).map_err(err)?;
        rows.iter().map(row).collect()
    }
}

/// A unique violation on the open-call index (`proxy_calls_open`).
fn is_open_conflict(e: &postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
        && e.as_db_error().and_then(|d| d.constraint()) == Some("proxy_calls_open")
}
