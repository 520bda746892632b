//! `countersign mcp-proxy` on PostgreSQL (issue 19, decision 0085): the proxy's call index in
//! the PostgreSQL schema, compare-and-set as on SQLite, and the proxy serving a host over
//! stdio on a `postgres://` database end to end, against the real server of tests/pg_support
//! and the suite's MCP server.

#[path = "mcp_support/host.rs"]
mod host;
mod mcp_support;
mod pg_support;
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use countersign::mcp::config::Database;
use countersign::mcp::serve::calls::{Calls, Claim};
use countersign::mcp::serve::runs::Runs;
use countersign::pgstore::copy::{Endpoint, copy};
use countersign::pgstore::{PgStore, postgres};
use countersign::runtime::types::Timestamp;
use host::{Host, approval_in, server_calls, verify};
use mcp_support::*;
use pg_support::{SECRET, TestDb, said, with_password};
use support::bin::cli;

const W: &str = r#"{"path": "/tmp/a", "text": "hi"}"#;

/// The test configuration (reads allowed, writes need approval, holds answer at once) on
/// the database `url`, pinned.
fn setup(dir: &Path, url: &str) -> PathBuf {
    let cfg = config(dir, "normal", RULES, r#""hold": "0s""#);
    let text = std::fs::read_to_string(&cfg).unwrap();
    let text = text.replace("\"runs.db\"", &serde_json::to_string(url).unwrap());
    write_file(&cfg, &text, 0o600);
    host::pin(&cfg);
    cfg
}

fn db_of(url: &str) -> Database {
    Database::Postgres(countersign::pgstore::PgUrl::parse(url).unwrap())
}

/// The schema as the owner opens it (migrated).
fn migrated(db: &TestDb) {
    drop(PgStore::open(&db.pg_url()).unwrap());
}

/// Waits (at most 10 s) until the inbox is empty: every committed event is chained.
fn wait_chained(c: &mut postgres::Client) {
    for _ in 0..1000 {
        let n: i64 = c
            .query_one("SELECT count(*) FROM event_inbox", &[])
            .unwrap()
            .get(0);
        if n == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the inbox was not chained");
}

/// The proxy's "leased elsewhere" check (a request whose run another process works is in
/// progress) judges a lease as the Gate does: on PostgreSQL by the server's clock, whatever
/// this host's clock says (decision 0083), on SQLite by this host's. The same run, copied:
/// a lease that lapsed in 2020 is live to a host whose clock says 2019 on SQLite only, and
/// one that lapses in 2999 is live on PostgreSQL even to a host whose clock says 3000.
#[test]
fn pg_the_proxys_lease_check_reads_the_servers_clock() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let lite = dir.path().join("runs.db");
    let manifest = support::fixture(
        &lite,
        &[
            "--scenario",
            "running",
            "--base-time",
            "2020-01-01T00:00:00Z",
        ],
    );
    let run = manifest["scenarios"]["running"]["runs"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    copy(&Endpoint::Sqlite(lite.clone()), &Endpoint::Pg(db.pg_url())).unwrap();
    let behind = Timestamp::parse("2019-06-01T00:00:00Z").unwrap();
    let ahead = Timestamp::parse("3000-01-01T00:00:00Z").unwrap();

    let sqlite = Runs::open(&Database::File(lite)).unwrap();
    let pg = Runs::open(&db_of(&db.url)).unwrap();
    assert!(
        sqlite.lease_live(&run, behind).unwrap(),
        "SQLite judges by the host's clock"
    );
    assert!(!sqlite.lease_live(&run, Timestamp::now()).unwrap());
    assert!(
        !pg.lease_live(&run, behind).unwrap(),
        "a lease that lapsed by the server's clock is not live on PostgreSQL"
    );

    db.client()
        .execute(
            "UPDATE runs SET lease_expires_at = '2999-01-01T00:00:00Z' WHERE id = $1",
            &[&run],
        )
        .unwrap();
    assert!(
        pg.lease_live(&run, ahead).unwrap(),
        "a lease live by the server's clock is live on PostgreSQL"
    );
    db.client()
        .execute("UPDATE runs SET lease_owner = '' WHERE id = $1", &[&run])
        .unwrap();
    assert!(!pg.lease_live(&run, behind).unwrap(), "no holder, no lease");
}

/// The proxy's index on PostgreSQL compare-and-sets as on SQLite (calls.rs's unit test, on
/// two connections): a claim made over a row another claimer closed, or over "no open row"
/// when one was opened since, is a race and writes nothing; one open row per key.
#[test]
fn pg_index_claim_compare_and_sets_on_the_open_row_it_read() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    migrated(&db);
    let url = db_of(&db.url);
    let mut a = Calls::open(&url, "s").unwrap();
    let mut b = Calls::open(&url, "s").unwrap();
    assert!(matches!(
        a.claim("k", None, "t", "read_only", "s.1", 1).unwrap(),
        Claim::Claimed
    ));
    assert!(matches!(
        b.claim("k", None, "t", "read_only", "s.2", 2).unwrap(),
        Claim::Race
    ));
    let rows = b.for_key("k", 3, 0).unwrap();
    assert_eq!(rows.len(), 1);
    let open = rows[0].id;
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
    let open_ids: Vec<&str> = rows
        .iter()
        .filter(|r| r.open)
        .map(|r| r.run_id.as_str())
        .collect();
    assert_eq!(open_ids, ["s.2"], "one open row per key");
    assert_eq!(
        rows.iter().find(|r| r.run_id == "s.1").unwrap().closed_at,
        3
    );
    // Settling caches an outcome once; a row whose run was never begun settles as "none".
    a.settle("s.2", 2, 6).unwrap();
    a.settle("s.2", 3, 7).unwrap();
    let s2 = a.for_key("k", 8, 10).unwrap();
    let s2 = s2.iter().find(|r| r.run_id == "s.2").unwrap();
    assert_eq!((s2.outcome, s2.settled_at), (2, 6));
    let s1 = rows.iter().find(|r| r.run_id == "s.1").unwrap().id;
    a.settle_empty(s1, 9).unwrap();
    assert!(a.unsettled().unwrap().is_empty());
    // Another session's rows are not this one's.
    let mut other = Calls::open(&url, "other").unwrap();
    assert!(other.for_key("k", 10, 100).unwrap().is_empty());
}

/// Two claimers that both read "no open row": the one whose insert comes second (it waits on
/// the first's uncommitted row in the unique open-call index) gets a race, not an error, and
/// the key keeps one open row.
#[test]
fn pg_index_concurrent_first_claims_race() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    migrated(&db);
    let mut raw = db.client();
    let mut tx = raw.transaction().unwrap();
    tx.execute(
        "INSERT INTO proxy_calls (session, request_key, tool, side_effect, run_id, created_at) VALUES ('s', 'k', 't', 'read_only', 's.1', 1)",
        &[],
    )
    .unwrap();
    let url = db_of(&db.url);
    let claimer = std::thread::spawn(move || {
        let mut b = Calls::open(&url, "s").unwrap();
        b.claim("k", None, "t", "read_only", "s.2", 2)
    });
    std::thread::sleep(Duration::from_millis(300));
    tx.commit().unwrap();
    let got = claimer.join().unwrap();
    assert!(matches!(got, Ok(Claim::Race)), "{got:?}");
    let open: i64 = raw
        .query_one(
            "SELECT count(*) FROM proxy_calls WHERE session='s' AND request_key='k' AND open=1",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(open, 1);
}

/// The proxy serves a host on a `postgres://` database: `check` opens it (creating the
/// schema), a write that needs approval is held and recorded in the index, the decide line
/// names the database by its URL, `approve` on the same URL decides it, the retried call runs
/// the tool once and a repeat is a duplicate; `recheck` reads the session from the index;
/// `verify` passes on the database, and its copy to SQLite passes agentrt's checker.
#[test]
fn pg_proxy_holds_a_write_until_approved_then_runs_it_once() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The configuration's URL carries a password (the test server trusts its socket and
    // ignores it) unless the server given already needs one: it is never printed.
    let proxy_url = with_password(&db.url);
    // Named without the password at all, in lines and in the printed command, so that the
    // command a person pastes takes theirs from PGPASSWORD or the password file (a password
    // in the URL, even `***`, would override both).
    let shown = countersign::pgstore::PgUrl::parse(&proxy_url)
        .unwrap()
        .for_commands()
        .to_string();
    assert!(!shown.contains("***") && !shown.contains(SECRET), "{shown}");
    let cfg = setup(dir.path(), &proxy_url);
    let cfg_s = cfg.to_str().unwrap();

    let o = cli(&["mcp-proxy", "check", "--config", cfg_s]);
    assert!(o.status.success(), "{}", said(&o));
    assert!(
        said(&o).contains(&format!("database: {shown}")),
        "{}",
        said(&o)
    );
    assert!(!said(&o).contains(SECRET), "{}", said(&o));

    let mut h = Host::start(&cfg);
    let (text, is_err) = h.call("fs_write_file", W);
    assert!(!is_err && text.starts_with("PENDING_APPROVAL: "), "{text}");
    let id = approval_in(&text);
    let err = h.stderr_with("decide with");
    let line = err
        .lines()
        .find(|l| l.contains("decide with"))
        .unwrap_or_else(|| panic!("a decide line: {err}"));
    assert!(
        !line.contains("***"),
        "no password, not even redacted: {line}"
    );
    // The URL as one shell word (quoted when it holds a `?`).
    let word = if shown.contains(['?', '*']) {
        format!("'{shown}'")
    } else {
        shown.clone()
    };
    assert!(
        line.contains(&format!(": countersign --db {word} approve s1.")),
        "{line}"
    );
    assert!(server_calls(dir.path()).is_empty(), "nothing ran");

    let mut c = db.client();
    let run: String = c
        .query_one("SELECT run_id FROM approvals WHERE id = $1", &[&id])
        .unwrap()
        .get(0);
    let (session, open): (String, i64) = {
        let r = c
            .query_one(
                "SELECT session, open FROM proxy_calls WHERE run_id = $1",
                &[&run],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!((session.as_str(), open), ("s1", 1), "the index row is open");

    // Asked again before the decision: the same approval, nothing new.
    let (again, _) = h.call("fs_write_file", W);
    assert_eq!(approval_in(&again), id, "{again}");

    let o = cli(&["--db", &db.url, "approve", &run, "--approval", &id, "--yes"]);
    assert!(o.status.success(), "{}", said(&o));

    let (done, is_err) = h.call("fs_write_file", W);
    assert!(!is_err, "{done}");
    assert!(done.contains("\"write_file\""), "{done}");
    let (dup, is_err) = h.call("fs_write_file", W);
    assert!(is_err && dup.starts_with("DUPLICATE: "), "{dup}");
    assert_eq!(server_calls(dir.path()).len(), 1, "the tool ran once");
    let (code, err) = h.close();
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "countersign mcp-proxy: serving session s1 on database {shown}"
        )),
        "{err}"
    );
    assert!(!err.contains(SECRET), "{err}");
    // The proxy chained what it committed before it exited (no sequencer runs now).
    let waiting: i64 = c
        .query_one("SELECT count(*) FROM event_inbox", &[])
        .unwrap()
        .get(0);
    assert_eq!(waiting, 0, "events left unchained by the proxy's exit");
    let status: String = c
        .query_one("SELECT status FROM runs WHERE id = $1", &[&run])
        .unwrap()
        .get(0);
    assert_eq!(status, "COMPLETED");
    let settled: i64 = c
        .query_one("SELECT outcome FROM proxy_calls WHERE run_id = $1", &[&run])
        .unwrap()
        .get(0);
    assert_eq!(settled, 2, "the run's known outcome is cached on its row");

    // The console names the proxy session whose call the run answers, as on SQLite.
    {
        use countersign::console::testing::{ConsoleData, PgData, Query, Reply};
        let mut data = PgData::open_pg(&db.pg_url()).unwrap();
        let reply = data
            .query(&Query::Run {
                id: run.as_str().into(),
            })
            .unwrap();
        let Reply::Run(Some(h)) = reply else {
            panic!("the run's header: {reply:?}")
        };
        assert_eq!(h.proxy_session.as_deref(), Some(&b"s1"[..]));
    }

    // recheck reads the session's runs from the index on PostgreSQL.
    let o = cli(&["mcp-proxy", "recheck", "--config", cfg_s]);
    assert!(o.status.success(), "{}", said(&o));
    let out = said(&o);
    assert!(
        out.contains("1 run(s) re-checked under agentrt-proxy/sha256:")
            && out.contains("; 0 run(s) differ"),
        "{out}"
    );

    wait_chained(&mut c);
    let o = cli(&["--db", &db.url, "verify"]);
    assert!(o.status.success(), "{}", said(&o));
    // A copy to SQLite carries the call index with the run tables (decision 0087), row for
    // row, and agentrt's checker accepts the run tables.
    let back = dir.path().join("back.db");
    let want = pg_proxy_rows(&mut c);
    assert!(!want.is_empty());
    let o = cli(&["copy", "--from", &db.url, "--to", back.to_str().unwrap()]);
    assert!(o.status.success(), "{}", said(&o));
    assert!(
        said(&o).contains(&format!(", {} proxy_calls\n", want.len())),
        "{}",
        said(&o)
    );
    assert_eq!(sqlite_proxy_rows(&back), want);
    verify(&back);
    let report = copy(
        &Endpoint::Pg(db.pg_url()),
        &Endpoint::Sqlite(dir.path().join("back2.db")),
    )
    .unwrap();
    assert_eq!(
        report.rows.last(),
        Some(&("proxy_calls", want.len() as u64))
    );
}

/// One call index row: id, session, request key, tool, side effect, run, created, open,
/// closed, settled, outcome.
type ProxyRow = (
    i64,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
    i64,
    i64,
    i64,
);

const PROXY_COLS: &str = "id, session, request_key, tool, side_effect, run_id, created_at, open, closed_at, settled_at, outcome";

fn pg_proxy_rows(c: &mut postgres::Client) -> Vec<ProxyRow> {
    c.query(
        &format!("SELECT {PROXY_COLS} FROM proxy_calls ORDER BY id"),
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| {
        (
            r.get(0),
            r.get(1),
            r.get(2),
            r.get(3),
            r.get(4),
            r.get(5),
            r.get(6),
            r.get(7),
            r.get(8),
            r.get(9),
            r.get(10),
        )
    })
    .collect()
}

fn sqlite_proxy_rows(db: &Path) -> Vec<ProxyRow> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c
        .prepare(&format!("SELECT {PROXY_COLS} FROM proxy_calls ORDER BY id"))
        .unwrap();
    st.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
            r.get(9)?,
            r.get(10)?,
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// The least-privilege roles (docs/postgres-roles.sql) cover the proxy: a login holding only
/// `countersign_runtime` and `countersign_sequencer` serves on a database the owner created
/// (it cannot migrate, and need not), a `countersign_reviewer` login approves, and the retried
/// call runs the tool once, every event chained.
#[test]
fn pg_proxy_runs_as_the_runtime_role_and_a_reviewer_approves() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    migrated(&db);
    let mut c = db.client();
    c.batch_execute(include_str!("../docs/postgres-roles.sql"))
        .unwrap();
    let (agent, reviewer) = (
        format!("proxy_{}", std::process::id()),
        format!("rev_{}", std::process::id()),
    );
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {agent}; DROP ROLE IF EXISTS {reviewer}; \
         CREATE ROLE {agent} LOGIN IN ROLE countersign_runtime, countersign_sequencer; \
         CREATE ROLE {reviewer} LOGIN IN ROLE countersign_reviewer"
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = setup(dir.path(), &db.url_as(&agent));
    let mut h = Host::start(&cfg);
    let (text, is_err) = h.call("fs_write_file", W);
    assert!(!is_err && text.starts_with("PENDING_APPROVAL: "), "{text}");
    let id = approval_in(&text);
    let run: String = c
        .query_one("SELECT run_id FROM approvals WHERE id = $1", &[&id])
        .unwrap()
        .get(0);
    let o = cli(&[
        "--db",
        &db.url_as(&reviewer),
        "approve",
        &run,
        "--approval",
        &id,
        "--yes",
    ]);
    assert!(o.status.success(), "{}", said(&o));
    let (done, is_err) = h.call("fs_write_file", W);
    assert!(!is_err, "{done}");
    let (dup, is_err) = h.call("fs_write_file", W);
    assert!(is_err && dup.starts_with("DUPLICATE: "), "{dup}");
    assert_eq!(server_calls(dir.path()).len(), 1, "the tool ran once");
    let (code, err) = h.close();
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("error:"), "{err}");
    wait_chained(&mut c);
    let o = cli(&["--db", &db.url, "verify"]);
    assert!(o.status.success(), "{}", said(&o));
    let _ = c.batch_execute(&format!(
        "DROP OWNED BY {agent}; DROP ROLE {agent}; DROP OWNED BY {reviewer}; DROP ROLE {reviewer}"
    ));
}

/// `copy` carries the MCP proxy's call index both ways when the source holds any of its rows
/// (decision 0087): every row as it was (ids, open, settled, outcome), the next id after the
/// highest copied, so a proxy on the target finds a held call's row and never reuses an id. An
/// index at agentrt's version 1 (no `outcome`) arrives as its migration 2 would leave it
/// (outcome 0). A database without index rows gets no index tables on SQLite (agentrt's file as
/// before), and a target whose index holds rows is refused, unchanged.
#[test]
fn pg_copy_carries_the_call_index_both_ways() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let lite = dir.path().join("proxy.db");
    drop(countersign::runtime::store::Store::open(&lite).unwrap());
    countersign::mcp::index::migrate(&lite).unwrap();
    let mut calls = Calls::open(&Database::File(lite.clone()), "s").unwrap();
    for (key, run) in [("k1", "s.1"), ("k2", "s.2"), ("k3", "s.3")] {
        assert!(matches!(
            calls.claim(key, None, "t", "read_only", run, 1).unwrap(),
            Claim::Claimed
        ));
    }
    calls.settle("s.2", 2, 7).unwrap();
    drop(calls);
    // A gap in the ids (a row agentrt never deletes, taken out here) must survive.
    rusqlite::Connection::open(&lite)
        .unwrap()
        .execute("DELETE FROM proxy_calls WHERE run_id = 's.1'", [])
        .unwrap();
    let want = sqlite_proxy_rows(&lite);
    let report = copy(&Endpoint::Sqlite(lite.clone()), &Endpoint::Pg(db.pg_url())).unwrap();
    assert_eq!(report.rows.last(), Some(&("proxy_calls", 2)));
    let mut c = db.client();
    assert_eq!(pg_proxy_rows(&mut c), want);
    // A proxy on the target continues after the copied ids and finds the open call.
    let mut pg_calls = Calls::open(&db_of(&db.url), "s").unwrap();
    assert!(matches!(
        pg_calls
            .claim("k4", None, "t", "read_only", "s.4", 9)
            .unwrap(),
        Claim::Claimed
    ));
    let next: i64 = c
        .query_one("SELECT id FROM proxy_calls WHERE run_id = 's.4'", &[])
        .unwrap()
        .get(0);
    assert!(next > want.last().unwrap().0, "{next}");
    let want = pg_proxy_rows(&mut c);
    drop(pg_calls);

    // And back to SQLite: the same rows.
    let back = dir.path().join("back.db");
    let report = copy(&Endpoint::Pg(db.pg_url()), &Endpoint::Sqlite(back.clone())).unwrap();
    assert_eq!(report.rows.last(), Some(&("proxy_calls", 3)));
    assert_eq!(sqlite_proxy_rows(&back), want);
    verify(&back);

    // A version-1 index (agentrt mcp before `outcome`): its rows arrive with outcome 0.
    let old = dir.path().join("v1.db");
    drop(countersign::runtime::store::Store::open(&old).unwrap());
    rusqlite::Connection::open(&old)
        .unwrap()
        .execute_batch(
            "CREATE TABLE proxy_schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);
             INSERT INTO proxy_schema_migrations VALUES (1, 1);
             CREATE TABLE proxy_calls (id INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL,
               request_key TEXT NOT NULL, tool TEXT NOT NULL, side_effect TEXT NOT NULL,
               run_id TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL,
               open INTEGER NOT NULL DEFAULT 1, closed_at INTEGER NOT NULL DEFAULT 0,
               settled_at INTEGER NOT NULL DEFAULT 0);
             INSERT INTO proxy_calls (session, request_key, tool, side_effect, run_id, created_at)
               VALUES ('v', 'k', 't', 'read_only', 'v.1', 5);",
        )
        .unwrap();
    let Some(db_old) = pg_support::fresh_db() else {
        return;
    };
    copy(&Endpoint::Sqlite(old), &Endpoint::Pg(db_old.pg_url())).unwrap();
    assert_eq!(
        pg_proxy_rows(&mut db_old.client()),
        vec![(
            1,
            "v".into(),
            "k".into(),
            "t".into(),
            "read_only".into(),
            "v.1".into(),
            5,
            1,
            0,
            0,
            0
        )]
    );

    // A database without index rows: nothing of the index on the SQLite side.
    let plain = dir.path().join("plain.db");
    drop(countersign::runtime::store::Store::open(&plain).unwrap());
    let Some(db2) = pg_support::fresh_db() else {
        return;
    };
    let report = copy(&Endpoint::Sqlite(plain), &Endpoint::Pg(db2.pg_url())).unwrap();
    assert!(report.rows.iter().all(|(t, _)| *t != "proxy_calls"));
    let plain_back = dir.path().join("plain_back.db");
    copy(
        &Endpoint::Pg(db2.pg_url()),
        &Endpoint::Sqlite(plain_back.clone()),
    )
    .unwrap();
    let tables: i64 = rusqlite::Connection::open(&plain_back)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name LIKE 'proxy%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 0);

    // A target whose index holds a row is refused and left as it was.
    db2.client()
        .execute(
            "INSERT INTO proxy_calls (session, request_key, tool, side_effect, run_id, created_at) VALUES ('x', 'k', 't', 'read_only', 'x.1', 1)",
            &[],
        )
        .unwrap();
    let e = copy(&Endpoint::Sqlite(lite), &Endpoint::Pg(db2.pg_url())).unwrap_err();
    assert!(e.to_string().contains("proxy_calls table has rows"), "{e}");
    assert_eq!(pg_proxy_rows(&mut db2.client()).len(), 1);
}
