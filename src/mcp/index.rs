//! agentrt's `proxy_calls` index (agentrt mcp 2.7): its own migrations table beside the
//! runtime's, the same two migrations in one IMMEDIATE transaction, so a database either proxy
//! migrated opens with the other. The runtime's tables are never written here.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

/// The index versions this build knows.
pub const KNOWN_VERSION: i64 = 2;

const MIGRATIONS: [&str; 2] = [
    "CREATE TABLE proxy_calls (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session TEXT NOT NULL,
  request_key TEXT NOT NULL,
  tool TEXT NOT NULL,
  side_effect TEXT NOT NULL,
  run_id TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  open INTEGER NOT NULL DEFAULT 1,
  closed_at INTEGER NOT NULL DEFAULT 0,
  settled_at INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX proxy_calls_open ON proxy_calls(session, request_key) WHERE open = 1;
CREATE INDEX proxy_calls_key ON proxy_calls(session, request_key, id);
CREATE INDEX proxy_calls_unsettled ON proxy_calls(session, settled_at, id);",
    "ALTER TABLE proxy_calls ADD COLUMN outcome INTEGER NOT NULL DEFAULT 0;
CREATE INDEX proxy_calls_outcome ON proxy_calls(session, request_key, outcome, id);",
];

/// Brings the index of the database at `path` (already created and migrated by the runtime's
/// store) to [`KNOWN_VERSION`]; returns the version it found.
pub fn migrate(path: &Path) -> Result<i64, String> {
    let mut conn = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("proxy: migrate: {e}"))?;
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(|e| format!("proxy: migrate: {e}"))?;
    migrate_conn(&mut conn)
}

/// [`migrate`] on an open connection.
pub fn migrate_conn(conn: &mut Connection) -> Result<i64, String> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| format!("proxy: migrate: {e}"))?;
    let current = migrate_in(&tx)?;
    tx.commit().map_err(|e| format!("proxy: migrate: {e}"))?;
    Ok(current)
}

/// [`migrate`] inside a transaction the caller holds (and commits or rolls back): `copy`
/// creates the index in the SQLite database it writes, in that copy's one transaction.
pub fn migrate_in(tx: &Connection) -> Result<i64, String> {
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS proxy_schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
    )
    .map_err(|e| format!("proxy: migrate: {e}"))?;
    let current: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(version), 0) FROM proxy_schema_migrations",
            [],
            |r| r.get(0),
        )
        .map_err(|e| format!("proxy: migrate: {e}"))?;
    if current > KNOWN_VERSION {
        return Err(format!(
            "proxy: the database's call index is at version {current} and this build knows {KNOWN_VERSION}: a newer proxy migrated it"
        ));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i as i64 + 1;
        if version <= current {
            continue;
        }
        tx.execute_batch(sql)
            .map_err(|e| format!("proxy: migration {version}: {e}"))?;
        let now = crate::runtime::types::Timestamp::now().unix_nanos();
        tx.execute(
            "INSERT INTO proxy_schema_migrations (version, applied_at) VALUES (?1, ?2)",
            rusqlite::params![version, i64::try_from(now).unwrap_or(i64::MAX)],
        )
        .map_err(|e| format!("proxy: migration {version}: {e}"))?;
    }
    Ok(current)
}
