//! agentrt's `proxy_calls` index in the run database (agentrt mcp 2.7): the same tables and
//! migrations, so a database either proxy migrated opens with the other.

use countersign::mcp::index;

fn schema(conn: &rusqlite::Connection) -> Vec<(String, String)> {
    let mut st = conn
        .prepare("SELECT name, sql FROM sqlite_master WHERE name LIKE 'proxy%' ORDER BY name")
        .unwrap();
    st.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get::<_, Option<String>>(1)?.unwrap_or_default(),
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

#[test]
fn index_migrations_are_agentrts() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    drop(countersign::runtime::store::Store::open(&db).unwrap());
    assert_eq!(index::migrate(&db).unwrap(), 0);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let got = schema(&conn);
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "proxy_calls",
            "proxy_calls_key",
            "proxy_calls_open",
            "proxy_calls_outcome",
            "proxy_calls_unsettled",
            "proxy_schema_migrations"
        ]
    );
    assert_eq!(
        got[2].1,
        "CREATE UNIQUE INDEX proxy_calls_open ON proxy_calls(session, request_key) WHERE open = 1"
    );
    let versions: Vec<i64> = conn
        .prepare("SELECT version FROM proxy_schema_migrations ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(versions, [1, 2]);
    // The columns agentrt writes, with their defaults.
    conn.execute(
        "INSERT INTO proxy_calls (session, request_key, tool, side_effect, run_id, created_at) VALUES ('s','k','fs_w','remote_mutation','s.0011223344556677',1)",
        [],
    )
    .unwrap();
    let row: (i64, i64, i64, i64) = conn
        .query_row(
            "SELECT open, closed_at, settled_at, outcome FROM proxy_calls",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(row, (1, 0, 0, 0));
    // At most one open row per key.
    assert!(conn
        .execute(
            "INSERT INTO proxy_calls (session, request_key, tool, side_effect, run_id, created_at) VALUES ('s','k','fs_w','remote_mutation','s.other',2)",
            [],
        )
        .is_err());
    drop(conn);
    // Migrating again changes nothing.
    assert_eq!(index::migrate(&db).unwrap(), 2);
}

#[test]
fn index_from_a_newer_proxy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    drop(countersign::runtime::store::Store::open(&db).unwrap());
    index::migrate(&db).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("INSERT INTO proxy_schema_migrations VALUES (3, 1)", [])
        .unwrap();
    drop(conn);
    assert_eq!(
        index::migrate(&db).unwrap_err(),
        "proxy: the database's call index is at version 3 and this build knows 2: a newer proxy migrated it"
    );
}
