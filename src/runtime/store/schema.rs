//! The six migrations (spec 1.1, 1.2) and the migrator. The DDL text follows agentrt's
//! whitespace convention (first statement at column 0, column lines indented two tabs, later
//! statements and a table's closing `);` one tab, no trailing newline) so migrations 1-4 hash
//! to the pinned SHA-256. Released migrations are never edited.

use rusqlite::{Connection, OptionalExtension, params};

use super::error::{Ctx, SCHEMA_VERSION, StoreError};
use crate::runtime::json::event_hash;
use crate::runtime::types::Timestamp;
use std::path::Path;

/// Migration scripts 1..=6 (index + 1 = version).
pub const MIGRATIONS: [&str; 6] = [
    concat!(
        "CREATE TABLE runs (\n",
        "\t\tid TEXT PRIMARY KEY,\n",
        "\t\tgoal TEXT NOT NULL,\n",
        "\t\tstatus TEXT NOT NULL,\n",
        "\t\treason TEXT NOT NULL DEFAULT '',\n",
        "\t\treason_detail TEXT NOT NULL DEFAULT '',\n",
        "\t\tlimits_json TEXT NOT NULL,\n",
        "\t\tstep_count INTEGER NOT NULL DEFAULT 0,\n",
        "\t\tcreated_at TEXT NOT NULL,\n",
        "\t\tstarted_at TEXT NOT NULL DEFAULT '',\n",
        "\t\tfinished_at TEXT NOT NULL DEFAULT '',\n",
        "\t\tresult_json TEXT NOT NULL DEFAULT ''\n",
        "\t);\n",
        "\tCREATE TABLE steps (\n",
        "\t\tid TEXT PRIMARY KEY,\n",
        "\t\trun_id TEXT NOT NULL REFERENCES runs(id),\n",
        "\t\tidx INTEGER NOT NULL,\n",
        "\t\tstatus TEXT NOT NULL,\n",
        "\t\tdecision_json TEXT NOT NULL DEFAULT '',\n",
        "\t\tpolicy_json TEXT NOT NULL DEFAULT '',\n",
        "\t\tobservation_json TEXT NOT NULL DEFAULT '',\n",
        "\t\tobservation_hash TEXT NOT NULL DEFAULT '',\n",
        "\t\tstarted_at TEXT NOT NULL,\n",
        "\t\tfinished_at TEXT NOT NULL DEFAULT '',\n",
        "\t\tUNIQUE(run_id, idx)\n",
        "\t);\n",
        "\tCREATE TABLE events (\n",
        "\t\tseq INTEGER PRIMARY KEY AUTOINCREMENT,\n",
        "\t\trun_id TEXT NOT NULL REFERENCES runs(id),\n",
        "\t\tstep_id TEXT NOT NULL DEFAULT '',\n",
        "\t\tat TEXT NOT NULL,\n",
        "\t\ttype TEXT NOT NULL,\n",
        "\t\tpayload_json TEXT NOT NULL\n",
        "\t);\n",
        "\tCREATE INDEX events_run ON events(run_id, seq);"
    ),
    concat!(
        "CREATE TABLE approvals (\n",
        "\t\tid TEXT PRIMARY KEY,\n",
        "\t\trun_id TEXT NOT NULL REFERENCES runs(id),\n",
        "\t\tstep_id TEXT NOT NULL,\n",
        "\t\tkind TEXT NOT NULL,\n",
        "\t\tcapability_json TEXT NOT NULL,\n",
        "\t\tpresentation_json TEXT NOT NULL,\n",
        "\t\trequest_json TEXT NOT NULL,\n",
        "\t\thash TEXT NOT NULL,\n",
        "\t\tstatus TEXT NOT NULL,\n",
        "\t\tcreated_at TEXT NOT NULL,\n",
        "\t\tdecided_at TEXT NOT NULL DEFAULT '',\n",
        "\t\tdecided_by TEXT NOT NULL DEFAULT '',\n",
        "\t\tnote TEXT NOT NULL DEFAULT ''\n",
        "\t);\n",
        "\tCREATE INDEX approvals_run ON approvals(run_id, created_at);"
    ),
    concat!(
        "CREATE TABLE model_calls (\n",
        "\t\tid TEXT PRIMARY KEY,\n",
        "\t\trun_id TEXT NOT NULL REFERENCES runs(id),\n",
        "\t\tstep_id TEXT NOT NULL,\n",
        "\t\tattempt INTEGER NOT NULL,\n",
        "\t\tstatus TEXT NOT NULL,\n",
        "\t\tmodel TEXT NOT NULL,\n",
        "\t\tinput_tokens INTEGER NOT NULL DEFAULT 0,\n",
        "\t\toutput_tokens INTEGER NOT NULL DEFAULT 0,\n",
        "\t\tcached_input_tokens INTEGER NOT NULL DEFAULT 0,\n",
        "\t\tcost_micros INTEGER NOT NULL DEFAULT 0,\n",
        "\t\tlatency_ms INTEGER NOT NULL DEFAULT 0,\n",
        "\t\terror TEXT NOT NULL DEFAULT '',\n",
        "\t\tdispatched_at TEXT NOT NULL,\n",
        "\t\tcompleted_at TEXT NOT NULL DEFAULT ''\n",
        "\t);\n",
        "\tCREATE INDEX model_calls_run ON model_calls(run_id, dispatched_at);\n",
        "\tALTER TABLE runs ADD COLUMN model_calls INTEGER NOT NULL DEFAULT 0;\n",
        "\tALTER TABLE runs ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;\n",
        "\tALTER TABLE runs ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;\n",
        "\tALTER TABLE runs ADD COLUMN cached_input_tokens INTEGER NOT NULL DEFAULT 0;\n",
        "\tALTER TABLE runs ADD COLUMN estimated_cost_micros INTEGER NOT NULL DEFAULT 0;"
    ),
    concat!(
        "ALTER TABLE runs ADD COLUMN active_ms INTEGER NOT NULL DEFAULT 0;\n",
        "\tALTER TABLE approvals ADD COLUMN expires_at TEXT NOT NULL DEFAULT '';"
    ),
    concat!(
        "ALTER TABLE runs ADD COLUMN lease_owner TEXT NOT NULL DEFAULT '';\n",
        "\tALTER TABLE runs ADD COLUMN lease_expires_at TEXT NOT NULL DEFAULT '';"
    ),
    concat!(
        "CREATE TABLE tool_specs (\n",
        "\t\thash TEXT PRIMARY KEY,\n",
        "\t\tspec_json TEXT NOT NULL\n",
        "\t);\n",
        "\tALTER TABLE steps ADD COLUMN spec_hash TEXT NOT NULL DEFAULT '';\n",
        "\tALTER TABLE steps ADD COLUMN policy_id TEXT NOT NULL DEFAULT '';\n",
        "\tALTER TABLE events ADD COLUMN hash TEXT NOT NULL DEFAULT '';"
    ),
];

/// The table the migrator keeps (not a numbered migration).
pub const SCHEMA_MIGRATIONS_DDL: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)";

/// The placeholder owner migration 5 gives RUNNING runs of a pre-lease process.
pub const PRE_LEASE_OWNER: &str = "agentrt:pre-lease-version";

/// DefaultLeaseTTL (30 s) in nanoseconds.
pub const DEFAULT_LEASE_TTL_NS: i64 = 30_000_000_000;

/// Applies the missing migrations in one `BEGIN IMMEDIATE` transaction (spec 1.2). `now` is the
/// wall clock: it stamps `applied_at` and the migration-5 placeholder lease.
pub(crate) fn migrate(
    conn: &mut Connection,
    path: &Path,
    now: Timestamp,
) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .ctx("migrate: begin")?;
    tx.execute_batch(SCHEMA_MIGRATIONS_DDL)
        .ctx("migrate: schema_migrations")?;
    let current: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(version),0) FROM schema_migrations",
            [],
            |r| r.get(0),
        )
        .ctx("migrate: read version")?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::SchemaVersion {
            path: path.to_path_buf(),
            found: current,
        });
    }
    for version in (current + 1)..=SCHEMA_VERSION {
        let script = MIGRATIONS[(version - 1) as usize];
        tx.execute_batch(script)
            .map_err(|e| StoreError::Migration {
                path: path.to_path_buf(),
                version,
                detail: sqlite_message(&e),
            })?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
            params![version, now.to_rfc3339()],
        )
        .ctx("migrate: record version")?;
        if version == 5 {
            tx.execute(
                "UPDATE runs SET lease_owner=?, lease_expires_at=? WHERE status='RUNNING'",
                params![
                    PRE_LEASE_OWNER,
                    now.add_nanos(DEFAULT_LEASE_TTL_NS).to_rfc3339()
                ],
            )
            .ctx("migrate: placeholder leases")?;
        }
        if version == 6 {
            backfill_chain(&tx)?;
        }
    }
    tx.commit().ctx("migrate: commit")
}

/// SQLite's own message for a failed script, on one line, without the script's text (which
/// rusqlite appends for input errors).
fn sqlite_message(e: &rusqlite::Error) -> String {
    let m = match e {
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        rusqlite::Error::SqliteFailure(_, Some(msg)) => msg.clone(),
        other => other.to_string(),
    };
    m.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Migration 6's backfill: hash every existing event in seq order from an empty previous hash,
/// 128 events per query.
fn backfill_chain(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let mut prev = String::new();
    let mut after = i64::MIN;
    loop {
        let mut page: Vec<(i64, [String; 5])> = Vec::new();
        {
            let mut stmt = tx
                .prepare(
                    "SELECT seq, CAST(run_id AS BLOB), CAST(step_id AS BLOB), CAST(at AS BLOB), \
                     CAST(type AS BLOB), CAST(payload_json AS BLOB) FROM events WHERE seq > ? ORDER BY seq LIMIT 128",
                )
                .ctx("migrate: read events")?;
            let mut rows = stmt.query([after]).ctx("migrate: read events")?;
            while let Some(r) = rows.next().ctx("migrate: read events")? {
                let text = |i: usize| -> rusqlite::Result<String> {
                    let b: Vec<u8> = r.get::<_, Option<Vec<u8>>>(i)?.unwrap_or_default();
                    Ok(String::from_utf8_lossy(&b).into_owned())
                };
                let ev = (|| -> rusqlite::Result<_> {
                    Ok((
                        r.get(0)?,
                        [text(1)?, text(2)?, text(3)?, text(4)?, text(5)?],
                    ))
                })()
                .ctx("migrate: read events")?;
                page.push(ev);
            }
        }
        if page.is_empty() {
            return Ok(());
        }
        for (seq, [run, step, at, kind, payload]) in &page {
            prev = event_hash(&prev, *seq, run, step, at, kind, payload);
            tx.execute("UPDATE events SET hash=? WHERE seq=?", params![prev, seq])
                .ctx("migrate: chain backfill")?;
            after = *seq;
        }
    }
}

/// The stored schema version (`COALESCE(MAX(version),0)`), or `None` if the query fails.
pub(crate) fn stored_version(conn: &Connection) -> Result<i64, rusqlite::Error> {
    conn.query_row(
        "SELECT COALESCE(MAX(version),0) FROM schema_migrations",
        [],
        |r| r.get(0),
    )
}

/// The first trigger or view in the schema, if any.
pub(crate) fn trigger_or_view(
    conn: &Connection,
) -> Result<Option<(String, String)>, rusqlite::Error> {
    conn.query_row(
        "SELECT type, name FROM sqlite_master WHERE type IN ('trigger','view') LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// Every column of the runtime's tables at version 6, by table (what migrations 1..=6 make).
pub(crate) const TABLE_COLUMNS: [(&str, &[&str]); 6] = [
    (
        "runs",
        &[
            "id",
            "goal",
            "status",
            "reason",
            "reason_detail",
            "limits_json",
            "step_count",
            "created_at",
            "started_at",
            "finished_at",
            "result_json",
            "model_calls",
            "input_tokens",
            "output_tokens",
            "cached_input_tokens",
            "estimated_cost_micros",
            "active_ms",
            "lease_owner",
            "lease_expires_at",
        ],
    ),
    (
        "steps",
        &[
            "id",
            "run_id",
            "idx",
            "status",
            "decision_json",
            "policy_json",
            "observation_json",
            "observation_hash",
            "started_at",
            "finished_at",
            "spec_hash",
            "policy_id",
        ],
    ),
    (
        "events",
        &[
            "seq",
            "run_id",
            "step_id",
            "at",
            "type",
            "payload_json",
            "hash",
        ],
    ),
    (
        "approvals",
        &[
            "id",
            "run_id",
            "step_id",
            "kind",
            "capability_json",
            "presentation_json",
            "request_json",
            "hash",
            "status",
            "created_at",
            "decided_at",
            "decided_by",
            "note",
            "expires_at",
        ],
    ),
    (
        "model_calls",
        &[
            "id",
            "run_id",
            "step_id",
            "attempt",
            "status",
            "model",
            "input_tokens",
            "output_tokens",
            "cached_input_tokens",
            "cost_micros",
            "latency_ms",
            "error",
            "dispatched_at",
            "completed_at",
        ],
    ),
    ("tool_specs", &["hash", "spec_json"]),
];

/// Refuses a runtime table that lacks a column this build reads (one line naming the table
/// and the column, instead of a statement's whole SQL at the first read) or that holds a
/// generated column (computed by SQL in the file: the runtime cannot write it, e.g. deciding
/// fails with "cannot UPDATE generated column", and would show values nobody stored).
pub(crate) fn check_columns(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let mut stmt = conn
        .prepare("SELECT CAST(name AS BLOB), hidden FROM pragma_table_xinfo(?)")
        .ctx("open store: columns")?;
    for (table, wanted) in TABLE_COLUMNS {
        let cols: Vec<(String, i64)> = stmt
            .query_map([table], |r| {
                let name: Option<Vec<u8>> = r.get(0)?;
                Ok((
                    String::from_utf8_lossy(&name.unwrap_or_default()).into_owned(),
                    r.get::<_, Option<i64>>(1)?.unwrap_or(0),
                ))
            })
            .ctx("open store: columns")?
            .collect::<Result<_, _>>()
            .ctx("open store: columns")?;
        if cols.is_empty() {
            return Err(StoreError::MissingColumn {
                path: path.to_path_buf(),
                what: format!("table {table}"),
            });
        }
        if let Some((name, _)) = cols.iter().find(|(_, hidden)| *hidden == 2 || *hidden == 3) {
            return Err(StoreError::GeneratedColumn {
                path: path.to_path_buf(),
                table: table.to_string(),
                column: name.clone(),
            });
        }
        for col in wanted {
            if !cols.iter().any(|(name, _)| name.eq_ignore_ascii_case(col)) {
                return Err(StoreError::MissingColumn {
                    path: path.to_path_buf(),
                    what: format!("column {table}.{col}"),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_columns_are_what_the_migrations_make() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn, Path::new(":memory:"), Timestamp::now()).unwrap();
        for (table, wanted) in TABLE_COLUMNS {
            let mut stmt = conn
                .prepare("SELECT name FROM pragma_table_xinfo(?)")
                .unwrap();
            let got: Vec<String> = stmt
                .query_map([table], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(got, wanted.to_vec(), "{table}");
        }
        check_columns(&conn, Path::new(":memory:")).unwrap();
    }
}
