//! PostgreSQL (issue 19, first slice) against a real server (`tests/pg_support`): the URL's
//! redaction, the schema's versioning, `copy` between SQLite and PostgreSQL on every fixture
//! scenario, `verify` on PostgreSQL, and the reviewer role.

mod pg_support;
use pg_support::said;
use support::bin::cli;
mod support;

use std::path::Path;
use std::process::Output;

use countersign::pgstore::copy::{CopyError, Endpoint, copy};
use countersign::pgstore::{PgError, PgStore, PgUrl};
use rusqlite::types::Value;

const SCENARIOS: [&str; 11] = [
    "completed",
    "waiting",
    "hostile",
    "queue",
    "approved",
    "rejected",
    "cancelled",
    "failed",
    "interrupted",
    "damaged",
    "running",
];

/// Every row of every agentrt table, with its rowid, and `sqlite_sequence`.
fn rows(db: &Path) -> Vec<(String, Vec<Vec<Value>>)> {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    let mut out = Vec::new();
    for t in [
        "runs",
        "tool_specs",
        "steps",
        "approvals",
        "model_calls",
        "events",
        "sqlite_sequence",
    ] {
        let mut s = c
            .prepare(&format!("SELECT rowid, * FROM {t} ORDER BY rowid"))
            .unwrap();
        let n = s.column_count();
        let all: Vec<Vec<Value>> = s
            .query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        out.push((t.to_string(), all));
    }
    out
}

/// A URL the client would read otherwise than the redaction does is never shown with its
/// password: `tokio-postgres` takes everything before the first '@' as user and password, so a
/// password holding an unencoded '/', '?', '#' or '@' is refused (in one line that does not
/// repeat it) rather than connected with and printed; an option key written percent-encoded
/// (`pass%77ord`, which the client decodes) is read as the password it is; and the value of an
/// option this build does not show (`sslpassword`, or anything unknown) is redacted where the
/// refusal of that option names the URL.
#[test]
fn pg_url_the_client_would_read_otherwise_is_refused_or_redacted() {
    for (raw, secret) in [
        ("postgresql://erin:Er/inSecret@/leakdb?host=/x", "inSecret"),
        ("postgresql://alice:Hunt?er2Sek@localhost:1/x", "er2Sek"),
        ("postgresql://alice:Hunt#er2Sek@localhost:1/x", "er2Sek"),
        ("postgresql://alice:p@ss@db.example/x", "ss@db"),
        ("postgresql://db.example/x?user=a@b", "user=a@b"),
        // An '@' in the password before a '/', '?' or '#': the client would read password
        // `P` on host `ss` (a DNS query for the password's tail), and the tail was shown.
        ("postgresql://owner1:P@ss/w@/c_own3?host=/x", "ss/w"),
        ("postgresql://o:S3cr3t-P@ss/w?rd#1@/c?host=/x", "rd#1"),
        ("postgresql://owner1:P@ss#w@/c_own3?host=/x", "ss#w"),
        (
            "postgresql://owner1:p@secretpart/w@db.example.test/cs",
            "secretpart",
        ),
        ("postgresql://owner1:p@ss?host=x@/c?host=/x", "ss?host"),
        // A fragment (found from outside: the client took it into the database name, and the
        // error printed it).
        (
            "postgresql://u@127.0.0.1:1/db#Hunter2Sekrit",
            "Hunter2Sekrit",
        ),
        (
            "postgresql://u@127.0.0.1:1/db?sslmode=disable#Hunter2Sekrit",
            "Hunter2Sekrit",
        ),
        ("postgresql://u@127.0.0.1:1#Hunter2Sekrit", "Hunter2Sekrit"),
    ] {
        let e = PgUrl::parse(raw)
            .map(|u| u.to_string())
            .unwrap_err()
            .to_string();
        assert!(e.contains("percent-encoded"), "{raw}: {e}");
        assert!(!e.contains(secret), "{raw}: {e}");
        let o = cli(&["--db", raw, "runs"]);
        assert_eq!(o.status.code(), Some(2), "{raw}: {}", said(&o));
        assert!(!said(&o).contains(secret), "{raw}: {}", said(&o));
        // The console (no subcommand) says it as every command does (found from outside:
        // exit 1 and "cannot open the run database the PostgreSQL URL").
        let o = cli(&["--db", raw]);
        assert_eq!(o.status.code(), Some(2), "{raw}: {}", said(&o));
        assert!(said(&o).starts_with("usage:"), "{raw}: {}", said(&o));
        assert!(!said(&o).contains(secret), "{raw}: {}", said(&o));
    }
    for (raw, written, password) in [
        (
            "postgresql://dave@/leakdb?host=/x&pass%77ord=DaveSecret9",
            "DaveSecret9",
            "DaveSecret9",
        ),
        (
            "postgresql://erin:Er%2FinSecret@/leakdb?host=/x",
            "Er%2FinSecret",
            "Er/inSecret",
        ),
        ("postgresql://erin:p%40ss@/leakdb?host=/x", "p%40ss", "p@ss"),
    ] {
        let u = PgUrl::parse(raw).unwrap();
        let shown = format!("{u} {u:?} {}", u.redacted());
        assert!(
            !shown.contains(written) && !shown.contains(password),
            "{shown}"
        );
        let cfg = u.config().unwrap();
        assert_eq!(cfg.get_password(), Some(password.as_bytes()), "{raw}");
    }
    // A shown option whose value names a password is hidden like one (found from outside:
    // `options=-c password=...` was printed in the connection error).
    for (raw, secret) in [
        (
            "postgresql://u@127.0.0.1:1/db?options=-c%20password%3DHunter2Sekrit",
            "Hunter2Sekrit",
        ),
        (
            "postgresql://u@127.0.0.1:1/db?application_name=PASSWORD:Hunter2Sekrit",
            "Hunter2Sekrit",
        ),
    ] {
        let u = PgUrl::parse(raw).unwrap();
        assert!(!format!("{u} {u:?}").contains(secret), "{u}");
        let o = cli(&["--db", raw, "runs"]);
        assert_eq!(o.status.code(), Some(1), "{raw}: {}", said(&o));
        assert!(!said(&o).contains(secret), "{raw}: {}", said(&o));
        assert!(said(&o).contains("cannot connect"), "{raw}: {}", said(&o));
    }
    // An option that names no password is still shown (it helps a person see what was meant).
    let u = PgUrl::parse("postgresql://u:Hunter2Sekrit@h/x?options=-c%20search_path%3Dx").unwrap();
    assert!(
        u.to_string().contains("options=-c%20search_path%3Dx")
            && !u.to_string().contains("Hunter2"),
        "{u}"
    );
    // What the client would refuse is a usage error that says which part.
    for (raw, part) in [
        (
            "postgresql://u@/x?host=/tmp&sslmod=require",
            "unknown option `sslmod`",
        ),
        (
            "postgresql://u@localhost:99999/x",
            "invalid value for option `port`",
        ),
        (
            "postgresql://u@h/x?password=Sec%zzret&hunter2",
            "an option with no `=value`",
        ),
        (
            "postgresql://u@h/x?sslmode",
            "the option `sslmode` with no `=value`",
        ),
    ] {
        let o = cli(&["--db", raw, "runs"]);
        assert_eq!(o.status.code(), Some(2), "{}", said(&o));
        assert!(said(&o).contains(part), "{}", said(&o));
        assert!(
            !said(&o).contains("hunter2") && !said(&o).contains("Sec"),
            "{}",
            said(&o)
        );
    }
    // SQLite to SQLite is a usage error too.
    let lite = dir_lite();
    let o = cli(&[
        "copy",
        "--from",
        lite.1.to_str().unwrap(),
        "--to",
        lite.0.path().join("b.db").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    // `copy` takes a URL of another kind for neither end.
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("x.db");
    let o = cli(&[
        "copy",
        "--from",
        "mysql://u:Hunter2Sekrit@h/x",
        "--to",
        to.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(
        !said(&o).contains("Hunter2Sekrit") && !to.exists(),
        "{}",
        said(&o)
    );
    // An option the client does not know is refused, its value not repeated.
    let e = PgUrl::parse("postgresql://u@h/db?sslpassword=Zed123&application_name=cs")
        .map(|u| u.to_string())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("postgresql://u@h/db?sslpassword=***&application_name=cs: ")
            && e.contains("unknown option `sslpassword`"),
        "{e}"
    );
}

/// A temporary directory with a fixture database in it.
fn dir_lite() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    support::fixture(&db, &["--scenario", "completed"]);
    (dir, db)
}

/// The binary with `args` and `env` set (PGSSLMODE and PGSSLROOTCERT removed otherwise).
fn cs_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"));
    c.args(args)
        .env_remove("COUNTERSIGN_DB")
        .env_remove("PGSSLMODE")
        .env_remove("PGSSLROOTCERT");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("countersign runs")
}

/// libpq's TLS settings from the environment: `PGSSLMODE` applies where the URL gives no
/// `sslmode` (a bad value is a usage error naming the variable; `verify-full` without a CA
/// is refused as in the URL), the URL's `sslmode` wins over it, `sslmode` given twice is
/// refused, and a connection over the Unix socket ignores sslmode as libpq does (so a
/// `PGSSLMODE=require` set for remote servers does not break it).
#[test]
fn pg_sslmode_from_the_environment_and_over_a_socket() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    drop(PgStore::open(&db.pg_url()).unwrap());
    let url = db.url.as_str();
    let o = cs_env(&["--db", url, "runs"], &[("PGSSLMODE", "bogus")]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(
        said(&o).contains("PGSSLMODE: sslmode=bogus"),
        "{}",
        said(&o)
    );
    // verify-full without a CA over TCP (the socket ignores sslmode).
    let tcp = "postgresql://u@127.0.0.1:1/x";
    let o = cs_env(&["--db", tcp, "runs"], &[("PGSSLMODE", "verify-full")]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(said(&o).contains("needs sslrootcert"), "{}", said(&o));
    let sep = if url.contains('?') { '&' } else { '?' };
    let disabled = format!("{url}{sep}sslmode=disable");
    let o = cs_env(
        &["--db", &disabled, "runs"],
        &[("PGSSLMODE", "verify-full")],
    );
    assert!(o.status.success(), "the URL's sslmode wins: {}", said(&o));
    let twice = format!("{url}{sep}sslmode=require&sslmode=disable");
    let o = cs_env(&["--db", &twice, "runs"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(said(&o).contains("sslmode is given twice"), "{}", said(&o));
    if url.contains("host=/") && !url.contains("sslmode") {
        let o = cs_env(&["--db", url, "runs"], &[("PGSSLMODE", "require")]);
        assert!(o.status.success(), "over the socket: {}", said(&o));
        let required = format!("{url}{sep}sslmode=require");
        let o = cs_env(&["--db", &required, "runs"], &[]);
        assert!(o.status.success(), "over the socket: {}", said(&o));
        // verify-full set for remote servers needs no CA for a socket, and reads none.
        let o = cs_env(&["--db", url, "runs"], &[("PGSSLMODE", "verify-full")]);
        assert!(o.status.success(), "over the socket: {}", said(&o));
        let full = format!("{url}{sep}sslmode=verify-full&sslrootcert=/nonexistent/ca.pem");
        let o = cs_env(&["--db", &full, "runs"], &[]);
        assert!(o.status.success(), "over the socket: {}", said(&o));
    }
}

#[test]
fn pg_url_redacts_the_password_in_display_debug_and_errors() {
    for raw in [
        "postgres://alice:s3cret@db.example:5432/runs",
        "postgresql://alice:s3cret@/runs?host=/nonexistent-dir-cs",
        "postgres://alice@db.example/runs?password=s3cret&sslmode=require",
    ] {
        let u = PgUrl::parse(raw).unwrap();
        for shown in [u.to_string(), format!("{u:?}"), u.redacted().to_string()] {
            assert!(!shown.contains("s3cret"), "{shown}");
            assert!(shown.contains("***"), "{shown}");
        }
    }
    // A connection that fails names the database redacted.
    let u = PgUrl::parse("postgresql://alice:s3cret@/runs?host=/nonexistent-dir-cs").unwrap();
    let e = PgStore::open(&u).unwrap_err().to_string();
    assert!(!e.contains("s3cret") && e.contains("alice:***@"), "{e}");
    // Every command line that names it: text, --json, copy's both ends.
    let url = "postgresql://alice:s3cret@/runs?host=/nonexistent-dir-cs";
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    for args in [
        vec!["--db", url, "verify"],
        vec!["--json", "--db", url, "verify"],
        vec!["--db", url, "runs"],
        vec!["--db", url],
        vec!["--db", url, "approve", "r1", "--approval", "a1"],
        vec![
            "--json",
            "--db",
            url,
            "reject",
            "r1",
            "--approval",
            "a1",
            "--note",
            "n",
        ],
        vec!["--db", url, "cancel", "r1", "--note", "n"],
        vec!["copy", "--from", url, "--to", db.to_str().unwrap()],
        vec![
            "--json",
            "copy",
            "--from",
            db.to_str().unwrap(),
            "--to",
            url,
        ],
    ] {
        let o = cli(&args);
        let all = said(&o);
        assert!(!o.status.success(), "{args:?}: {all}");
        assert!(
            !all.contains("s3cret"),
            "{args:?} printed the password: {all}"
        );
    }
}

#[test]
fn pg_url_sslmode_is_parsed_and_verify_ca_refused() {
    assert!(PgUrl::parse("postgres://h/db?sslmode=disable").is_ok());
    assert!(PgUrl::parse("postgres://h/db?sslmode=require").is_ok());
    let e = PgUrl::parse("postgres://h/db?sslmode=verify-ca").unwrap_err();
    assert!(e.to_string().contains("verify-full"), "{e}");
    let e = PgUrl::parse("postgres://h/db?sslmode=verify-full").unwrap_err();
    assert!(e.to_string().contains("sslrootcert"), "{e}");
    assert!(PgUrl::parse("postgres://h/db?sslmode=bogus").is_err());
}

#[test]
fn pg_newer_schema_is_refused_with_one_line() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let url = db.pg_url();
    PgStore::open(&url).unwrap();
    let mut c = db.client();
    c.batch_execute("INSERT INTO countersign_schema VALUES (99, 'later')")
        .unwrap();
    for e in [
        PgStore::open(&url).unwrap_err(),
        PgStore::open_existing(&url).unwrap_err(),
    ] {
        assert!(matches!(e, PgError::SchemaNewer { found: 99, .. }), "{e:?}");
        let s = e.to_string();
        assert!(!s.contains('\n') && s.contains("version 99"), "{s}");
    }
    // A database that is not countersign's is refused by a reader, never migrated.
    let Some(other) = pg_support::fresh_db() else {
        return;
    };
    let e = PgStore::open_existing(&other.pg_url()).unwrap_err();
    assert!(matches!(e, PgError::NotOurs { .. }), "{e:?}");
}

/// SQLite -> PostgreSQL -> SQLite on one scenario; returns the PostgreSQL database.
fn round_trip(scenario: &str, dir: &Path) -> pg_support::TestDb {
    let a = dir.join(format!("{scenario}.a.db"));
    let b = dir.join(format!("{scenario}.b.db"));
    support::fixture(&a, &["--scenario", scenario]);
    let db = pg_support::fresh_db().expect("server");
    let to_pg = copy(&Endpoint::Sqlite(a.clone()), &Endpoint::Pg(db.pg_url()))
        .unwrap_or_else(|e| panic!("{scenario}: to PostgreSQL: {e}"));
    let back = copy(&Endpoint::Pg(db.pg_url()), &Endpoint::Sqlite(b.clone()))
        .unwrap_or_else(|e| panic!("{scenario}: back to SQLite: {e}"));
    assert_eq!(to_pg, back, "{scenario}: both copies saw the same rows");
    support::assert_verifies(&b);
    assert_eq!(
        rows(&a),
        rows(&b),
        "{scenario}: rows differ after the round trip"
    );
    if scenario == "damaged" {
        assert_eq!(back.damaged.len(), 1, "the damaged approval is listed");
    } else {
        assert!(back.damaged.is_empty(), "{scenario}: {:?}", back.damaged);
    }
    db
}

#[test]
fn pg_copy_round_trips_every_fixture_scenario_byte_for_byte() {
    if pg_support::fresh_db().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for s in SCENARIOS {
        let db = round_trip(s, dir.path());
        let mut store = PgStore::open_existing(&db.pg_url()).unwrap();
        assert!(store.verify_events(0, 0).unwrap().ok(), "{s}");
        assert!(
            store.verify_approvals().unwrap().mismatched.is_empty(),
            "{s}"
        );
    }
    // All scenarios at once, with a few hundred older runs, through the command.
    let a = dir.path().join("all.db");
    let b = dir.path().join("all.back.db");
    support::fixture(&a, &["--big", "300"]);
    let db = pg_support::fresh_db().unwrap();
    let o = cli(&["copy", "--from", a.to_str().unwrap(), "--to", &db.url]);
    assert!(o.status.success(), "{}", said(&o));
    assert!(
        said(&o).contains("chain intact on both sides"),
        "{}",
        said(&o)
    );
    let o = cli(&[
        "--json",
        "copy",
        "--from",
        &db.url,
        "--to",
        b.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", said(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["rows"]["runs"], 300 + 15, "{doc}");
    support::assert_verifies(&b);
    assert_eq!(rows(&a), rows(&b));
}

fn count_runs(db: &pg_support::TestDb) -> i64 {
    let mut c = db.client();
    match c.query_one("SELECT count(*) FROM runs", &[]) {
        Ok(r) => r.get(0),
        Err(_) => -1,
    }
}

#[test]
fn pg_copy_into_a_non_empty_target_is_refused_and_changes_nothing() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    support::fixture(&a, &["--scenario", "waiting,queue"]);
    copy(&Endpoint::Sqlite(a.clone()), &Endpoint::Pg(db.pg_url())).unwrap();
    let before = count_runs(&db);
    let e = copy(&Endpoint::Sqlite(a.clone()), &Endpoint::Pg(db.pg_url())).unwrap_err();
    assert!(e.to_string().contains("not empty"), "{e}");
    assert_eq!(count_runs(&db), before);
    // A database holding someone else's tables is not touched either.
    let Some(other) = pg_support::fresh_db() else {
        return;
    };
    other
        .client()
        .batch_execute("CREATE TABLE notes (x int)")
        .unwrap();
    let e = copy(&Endpoint::Sqlite(a.clone()), &Endpoint::Pg(other.pg_url())).unwrap_err();
    assert!(e.to_string().contains("not countersign's"), "{e}");
    assert_eq!(count_runs(&other), -1, "no runs table was created");
    // Back to a SQLite database that has rows: refused, its rows unchanged.
    let e = copy(&Endpoint::Pg(db.pg_url()), &Endpoint::Sqlite(a.clone())).unwrap_err();
    assert!(e.to_string().contains("not empty"), "{e}");
    support::assert_verifies(&a);
}

/// A source's tables that are neither agentrt's nor countersign's (someone's own) are not
/// copied, and the copy names them, in text (escaped) and `--json`, both ways (found from
/// outside: they were left behind without a word).
#[test]
fn pg_copy_names_the_tables_it_leaves_behind() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    support::fixture(&a, &["--scenario", "waiting"]);
    rusqlite::Connection::open(&a)
        .unwrap()
        .execute_batch("CREATE TABLE notes (x); CREATE TABLE \"t\x1b[2J\" (y);")
        .unwrap();
    let from = a.to_str().unwrap();
    let o = cli(&["copy", "--from", from, "--to", &db.url]);
    let s = said(&o);
    assert_eq!(o.status.code(), Some(0), "{s}");
    assert!(
        s.contains("not copied, not agentrt's or countersign's: table notes, table t\\x1b[2J"),
        "{s}"
    );
    assert!(!s.contains('\x1b'), "{s}");
    db.client()
        .batch_execute("CREATE TABLE mine (z int)")
        .unwrap();
    let back = dir.path().join("back.db");
    let o = cli(&[
        "--json",
        "copy",
        "--from",
        &db.url,
        "--to",
        back.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["left_behind"], serde_json::json!(["mine"]));
    support::assert_verifies(&back);
}

#[test]
fn pg_copy_refuses_a_damaged_source_naming_the_row() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str); 2] = [("approval-hash", "approval "), ("chain", "broken at seq")];
    for (tamper, says) in cases {
        let a = dir.path().join(format!("{tamper}.db"));
        let man = support::fixture(&a, &["--tamper", tamper]);
        let e = copy(&Endpoint::Sqlite(a.clone()), &Endpoint::Pg(db.pg_url())).unwrap_err();
        let s = e.to_string();
        assert!(
            matches!(e, CopyError::Refused(_)) && s.contains(says),
            "{tamper}: {s}"
        );
        let named = match tamper {
            "approval-hash" => man["tampered"][tamper]["approval_id"]
                .as_str()
                .unwrap()
                .to_string(),
            _ => format!("seq {}", man["tampered"][tamper]["seq"]),
        };
        assert!(s.contains(&named), "{tamper}: {s} does not name {named}");
        assert_eq!(
            count_runs(&db),
            -1,
            "{tamper}: the target was left as it was"
        );
    }
    // A value of the wrong kind.
    let a = dir.path().join("kind.db");
    support::fixture(&a, &["--scenario", "completed"]);
    let c = rusqlite::Connection::open(&a).unwrap();
    c.execute("UPDATE runs SET step_count = 'many'", [])
        .unwrap();
    drop(c);
    let e = copy(&Endpoint::Sqlite(a), &Endpoint::Pg(db.pg_url())).unwrap_err();
    assert!(e.to_string().contains("step_count holds text"), "{e}");
    assert_eq!(count_runs(&db), -1);
}

/// A chain whose recorded head does not match its last event is refused by `copy` in both
/// directions, as PostgreSQL's `verify` refuses it (found from outside: out of PostgreSQL, a
/// deleted last event or a head moved on went through and the SQLite file verified; into
/// PostgreSQL, a SQLite file whose `sqlite_sequence` is past its last event lost that trace).
/// A head moved back is refused by `verify` too.
#[test]
fn pg_copy_and_verify_refuse_a_chain_that_does_not_reach_its_head() {
    let Some(_) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    support::fixture(&a, &["--scenario", "completed,waiting"]);
    for (n, damage) in [
        "DELETE FROM events WHERE seq = (SELECT max(seq) FROM events)",
        "UPDATE event_chain SET seq = seq + 5",
        "UPDATE event_chain SET seq = seq - 2",
    ]
    .iter()
    .enumerate()
    {
        let db = pg_support::fresh_db().unwrap();
        copy(&Endpoint::Sqlite(a.clone()), &Endpoint::Pg(db.pg_url())).unwrap();
        db.client().batch_execute(damage).unwrap();
        let o = verify_cli(&db);
        assert_eq!(o.status.code(), Some(1), "{damage}: {}", said(&o));
        let out = dir.path().join(format!("out{n}.db"));
        let e = copy(&Endpoint::Pg(db.pg_url()), &Endpoint::Sqlite(out.clone())).unwrap_err();
        assert!(
            matches!(e, CopyError::Refused(_)) && e.to_string().contains("the chain head records"),
            "{damage}: {e}"
        );
        assert!(
            !out.exists() || std::fs::metadata(&out).unwrap().len() == 0,
            "{damage}"
        );
    }
    // Into PostgreSQL: the SQLite file's sqlite_sequence says one more event than it holds.
    let cut = dir.path().join("cut.db");
    std::fs::copy(&a, &cut).unwrap();
    rusqlite::Connection::open(&cut)
        .unwrap()
        .execute(
            "DELETE FROM events WHERE seq = (SELECT max(seq) FROM events)",
            [],
        )
        .unwrap();
    let db = pg_support::fresh_db().unwrap();
    let e = copy(&Endpoint::Sqlite(cut), &Endpoint::Pg(db.pg_url())).unwrap_err();
    assert!(e.to_string().contains("the chain head records"), "{e}");
    assert_eq!(count_runs(&db), -1, "the target was left as it was");
}

fn verify_cli(db: &pg_support::TestDb) -> Output {
    cli(&["--db", &db.url, "verify"])
}

#[test]
fn pg_verify_detects_a_changed_event_and_a_deleted_run() {
    let Some(_) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    let man = support::fixture(&a, &["--scenario", "completed,waiting,rejected"]);
    let copied = |db: &pg_support::TestDb| {
        copy(&Endpoint::Sqlite(a.clone()), &Endpoint::Pg(db.pg_url())).unwrap();
    };
    let db = pg_support::fresh_db().unwrap();
    copied(&db);
    let o = verify_cli(&db);
    assert!(o.status.success(), "{}", said(&o));
    assert!(said(&o).contains("intact:"), "{}", said(&o));
    // A changed event.
    db.client()
        .batch_execute(
            "UPDATE events SET payload_json = replace(payload_json, 'o', 'O') WHERE seq = 5",
        )
        .unwrap();
    let o = verify_cli(&db);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(said(&o).contains("broken at seq 5"), "{}", said(&o));
    // A deleted run, in the middle and at the end of the chain.
    let ids: Vec<String> = ["completed", "rejected"]
        .iter()
        .map(|s| {
            man["scenarios"][s]["runs"][0]["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for id in ids {
        let db = pg_support::fresh_db().unwrap();
        copied(&db);
        let mut c = db.client();
        for t in ["events", "approvals", "model_calls", "steps", "runs"] {
            let col = if t == "runs" { "id" } else { "run_id" };
            c.execute(&format!("DELETE FROM {t} WHERE {col} = $1"), &[&id])
                .unwrap();
        }
        let o = verify_cli(&db);
        assert_eq!(o.status.code(), Some(1), "deleted {id}: {}", said(&o));
        assert!(said(&o).contains("missing"), "deleted {id}: {}", said(&o));
    }
    // Only a run's row deleted, its foreign keys dropped first (the owner can): the chain is
    // whole, and the rows naming the run are what tells.
    let db = pg_support::fresh_db().unwrap();
    copied(&db);
    let mut c = db.client();
    c.batch_execute(
        "DO $$ DECLARE r record; BEGIN \
         FOR r IN SELECT conrelid::regclass AS t, conname FROM pg_constraint \
                  WHERE contype = 'f' AND confrelid = 'runs'::regclass LOOP \
           EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.t, r.conname); \
         END LOOP; END $$",
    )
    .unwrap();
    let id = man["scenarios"]["rejected"]["runs"][0]["id"]
        .as_str()
        .unwrap();
    c.execute("DELETE FROM runs WHERE id = $1", &[&id]).unwrap();
    let o = verify_cli(&db);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(said(&o).contains("rows of no run:"), "{}", said(&o));
    assert!(said(&o).contains("a deleted run"), "{}", said(&o));
    let o = cli(&["--db", &db.url, "--json", "verify"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["orphans"]["events"].as_i64().unwrap_or(0) > 0, "{doc}");
}

#[test]
fn pg_reviewer_role_cannot_update_or_delete_an_event() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    support::fixture(&a, &["--scenario", "waiting"]);
    copy(&Endpoint::Sqlite(a), &Endpoint::Pg(db.pg_url())).unwrap();
    let login = format!("rev_{}", std::process::id());
    let mut c = db.client();
    c.batch_execute(include_str!("../docs/postgres-roles.sql"))
        .unwrap();
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {login}; CREATE ROLE {login} LOGIN IN ROLE countersign_reviewer"
    ))
    .unwrap();
    let url = PgUrl::parse(&db.url_as(&login)).unwrap();
    let mut r = countersign::pgstore::connect(&url).unwrap();
    let denied = |r: &mut countersign::pgstore::postgres::Client, sql: &str| {
        let e = r.batch_execute(sql).expect_err(sql);
        let code = e.code().map(|c| c.code().to_string());
        assert_eq!(code.as_deref(), Some("42501"), "{sql}: {e}");
    };
    denied(
        &mut r,
        "UPDATE events SET payload_json = '{}' WHERE seq = 1",
    );
    denied(&mut r, "UPDATE events SET hash = ''");
    denied(&mut r, "DELETE FROM events WHERE seq = 1");
    denied(&mut r, "UPDATE approvals SET request_json = '{}'");
    denied(&mut r, "UPDATE approvals SET hash = ''");
    denied(&mut r, "DELETE FROM approvals");
    denied(&mut r, "DELETE FROM runs");
    // Nor can it write the chain: not an event, not the head, not the sequencer's inbox work.
    denied(
        &mut r,
        "INSERT INTO events (seq, run_id, at, type, payload_json) \
         SELECT 1000, id, 't', 'k', '{}' FROM runs LIMIT 1",
    );
    denied(&mut r, "UPDATE event_chain SET seq = seq + 1");
    denied(&mut r, "DELETE FROM event_inbox");
    // What a reviewer does is allowed: decide an approval, commit the event that says so to
    // the inbox, where a sequencer (its own role) chains it.
    r.batch_execute("UPDATE approvals SET status = 'approved', decided_by = 'alice'")
        .unwrap();
    let mut store_as_reviewer = PgStore::open_existing(&url).unwrap();
    let run: String = r.query_one("SELECT id FROM runs", &[]).unwrap().get(0);
    store_as_reviewer
        .enqueue_event(&run, "", "2030-01-01T10:00:00Z", "approval.decided", "{}")
        .unwrap();
    assert!(
        store_as_reviewer.sequence(10).is_err(),
        "a reviewer cannot chain"
    );
    let seq_login = format!("seq_{}", std::process::id());
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {seq_login}; CREATE ROLE {seq_login} LOGIN IN ROLE countersign_sequencer"
    ))
    .unwrap();
    let seq_url = PgUrl::parse(&db.url_as(&seq_login)).unwrap();
    let mut sequencer = PgStore::open_existing(&seq_url).unwrap();
    assert_eq!(sequencer.sequence_all().unwrap(), 1);
    assert!(store_as_reviewer.verify_events(0, 0).unwrap().ok());
    let mut s = countersign::pgstore::connect(&seq_url).unwrap();
    denied(&mut s, "UPDATE events SET payload_json = '{}'");
    denied(&mut s, "DELETE FROM events");
    drop((r, s, store_as_reviewer, sequencer));
    for l in [login, seq_login] {
        let _ = c.batch_execute(&format!("DROP OWNED BY {l}; DROP ROLE {l}"));
    }
}

/// The console's counts (runs by status, the pending approvals of waiting runs and the
/// oldest of them) can be read from schema 4's indexes instead of every row (decision 0086):
/// with sequential scans priced out, each count's plan names its index. Without the
/// migration the planner has no index to choose and scans the table.
#[test]
fn pg_the_consoles_counts_have_indexes_to_read() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    drop(PgStore::open(&db.pg_url()).expect("migrate"));
    let mut c = db.client();
    c.batch_execute("SET enable_seqscan = off; SET max_parallel_workers_per_gather = 0")
        .unwrap();
    let plan = |c: &mut countersign::pgstore::postgres::Client, sql: &str| -> String {
        c.query(&format!("EXPLAIN {sql}"), &[])
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let pending = "FROM approvals a JOIN runs r ON r.id = a.run_id \
                   WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL'";
    for (sql, index) in [
        (
            "SELECT status, count(*) FROM runs GROUP BY status",
            "runs_status",
        ),
        (
            &format!("SELECT count(*), COALESCE(max(a.ord), 0) {pending}") as &str,
            "approvals_pending",
        ),
        (
            &format!("SELECT count(*), COALESCE(max(a.ord), 0) {pending}"),
            "runs_waiting",
        ),
    ] {
        let p = plan(&mut c, sql);
        assert!(p.contains(index), "{sql}\nreads no {index}:\n{p}");
        assert!(!p.contains("Seq Scan"), "{sql}\nscans a table:\n{p}");
    }
}

/// A database an older build wrote (schema 2 here) is refused by readers in one line that says
/// how to upgrade it, and `countersign migrate` (the owner's login) brings it to this build's
/// version in one step, saying from which; run again it changes nothing. A SQLite path is a
/// usage error: agentrt's file is migrated by the runtime that opens it.
#[test]
fn pg_an_older_schema_is_migrated_by_the_migrate_command() {
    use countersign::pgstore::PG_SCHEMA_VERSION;
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let mut c = at_schema(&db, 2);
    let o = cli(&["--db", &db.url, "runs"]);
    let s = said(&o);
    assert_eq!(o.status.code(), Some(1), "{s}");
    assert!(
        s.contains("schema version 2") && s.contains("countersign --db URL migrate"),
        "{s}"
    );
    assert_eq!(s.trim_end().lines().count(), 1, "{s}");
    // The owner's URL may carry a password: neither the JSON nor the line shows it.
    let owner = pg_support::with_password(&db.url);
    let o = cli(&["--db", &owner, "--json", "migrate"]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    assert!(!said(&o).contains(pg_support::SECRET), "{}", said(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (doc["from"].as_i64(), doc["to"].as_i64()),
        (Some(2), Some(PG_SCHEMA_VERSION))
    );
    let o = cli(&["--db", &owner, "migrate"]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    assert!(said(&o).contains("nothing changed"), "{}", said(&o));
    assert!(!said(&o).contains(pg_support::SECRET), "{}", said(&o));
    let o = cli(&["--db", &db.url, "runs"]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let versions: Vec<i32> = c
        .query(
            "SELECT version FROM countersign_schema ORDER BY version",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=PG_SCHEMA_VERSION as i32).collect::<Vec<_>>());
    // A login that may not migrate (a reviewer's) is told the same of a current database,
    // not "permission denied".
    c.batch_execute(include_str!("../docs/postgres-roles.sql"))
        .unwrap();
    let login = format!("migrev_{}", std::process::id());
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {login}; CREATE ROLE {login} LOGIN IN ROLE countersign_reviewer"
    ))
    .unwrap();
    let o = cli(&["--db", &db.url_as(&login), "migrate"]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    assert!(said(&o).contains("nothing changed"), "{}", said(&o));
    let _ = c.batch_execute(&format!("DROP OWNED BY {login}; DROP ROLE {login}"));
    let d = tempfile::tempdir().unwrap();
    let o = cli(&[
        "--db",
        d.path().join("runs.db").to_str().unwrap(),
        "migrate",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(said(&o).contains("not a postgres:// URL"), "{}", said(&o));
}

/// A login granted none of countersign's roles is told that it may not read the tables and
/// which roles to grant, not that the database holds no countersign schema.
#[test]
fn pg_a_login_without_a_role_is_told_to_grant_one() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    drop(PgStore::open(&db.pg_url()).unwrap());
    let mut c = db.client();
    let login = format!("nogrant_{}", std::process::id());
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {login}; CREATE ROLE {login} LOGIN"
    ))
    .unwrap();
    let o = cli(&["--db", &db.url_as(&login), "runs"]);
    let s = said(&o);
    assert_eq!(o.status.code(), Some(1), "{s}");
    assert!(
        s.contains("may not read countersign's tables") && s.contains("postgres-roles.sql"),
        "{s}"
    );
    assert!(!s.contains("holds no countersign schema"), "{s}");
    let _ = c.batch_execute(&format!("DROP OWNED BY {login}; DROP ROLE {login}"));
}

/// As libpq, a URL naming no host takes it (and the port) from `PGHOST` and `PGPORT`.
#[test]
fn pg_a_url_without_a_host_takes_pghost_and_pgport() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    drop(PgStore::open(&db.pg_url()).unwrap());
    // Only for the suite's own cluster, whose URL names its socket directory in `host=`.
    let Some(q) = db.url.split_once('?').map(|(_, q)| q.to_string()) else {
        return;
    };
    let param = |k: &str| {
        q.split('&')
            .find_map(|p| p.strip_prefix(&format!("{k}=")))
            .map(str::to_string)
    };
    let Some(host) = param("host") else {
        return;
    };
    let port = param("port").unwrap_or_else(|| "5432".into());
    let name = db
        .url
        .split('?')
        .next()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap();
    let user = db
        .url
        .split("://")
        .nth(1)
        .unwrap()
        .split('@')
        .next()
        .unwrap();
    let bare = format!("postgresql:///{name}?user={user}");
    let o = cs_env(
        &["--db", &bare, "runs"],
        &[("PGHOST", &host), ("PGPORT", &port)],
    );
    assert!(o.status.success(), "{bare}: {}", said(&o));
}

/// A fresh database brought to countersign's schema `version` by its own scripts, as an
/// older build left it.
fn at_schema(db: &pg_support::TestDb, version: usize) -> postgres::Client {
    use countersign::pgstore::PG_MIGRATIONS;
    let mut c = db.client();
    c.batch_execute(
        "CREATE TABLE countersign_schema (version integer PRIMARY KEY, applied_at text NOT NULL)",
    )
    .unwrap();
    for (i, script) in PG_MIGRATIONS[..version].iter().enumerate() {
        c.batch_execute(script).unwrap();
        c.execute(
            "INSERT INTO countersign_schema VALUES ($1, 'then')",
            &[&(i as i32 + 1)],
        )
        .unwrap();
    }
    c
}

/// A database at schema 3 where one of migration 4's indexes was already made by hand
/// migrates to this build's version, with all of its indexes (found from outside: it failed
/// on "relation already exists" and stayed at 3, refused by every reader).
#[test]
fn pg_migration_4_takes_an_index_made_ahead_of_it() {
    use countersign::pgstore::PG_SCHEMA_VERSION;
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let mut c = at_schema(&db, 3);
    c.batch_execute("CREATE INDEX runs_status ON runs (status)")
        .unwrap();
    let o = cli(&["--db", &db.url, "migrate"]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let version: i32 = c
        .query_one("SELECT max(version) FROM countersign_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(i64::from(version), PG_SCHEMA_VERSION);
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE indexname IN \
             ('runs_status', 'runs_waiting', 'approvals_pending')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(n, 3);
}

/// A relation made ahead of migration 4 under one of its index names but not that index (on
/// another column, without its predicate, unique, or a table) is not taken for it: the
/// migration is refused naming it, the database stays at 3 (found from outside: `IF NOT
/// EXISTS` skipped it and the console's counts went without their index).
#[test]
fn pg_migration_4_refuses_an_index_of_its_name_with_another_definition() {
    for (made, name) in [
        ("CREATE INDEX runs_status ON runs (goal)", "runs_status"),
        ("CREATE INDEX runs_waiting ON runs (id)", "runs_waiting"),
        (
            "CREATE UNIQUE INDEX approvals_pending ON approvals (run_id, ord) WHERE status = 'pending'",
            "approvals_pending",
        ),
        ("CREATE TABLE runs_status (x int)", "runs_status"),
    ] {
        let Some(db) = pg_support::fresh_db() else {
            return;
        };
        let mut c = at_schema(&db, 3);
        c.batch_execute(made).unwrap();
        let o = cli(&["--db", &db.url, "migrate"]);
        assert_eq!(o.status.code(), Some(1), "{made}: {}", said(&o));
        assert!(
            said(&o).contains(&format!("DROP INDEX {name}")),
            "{made}: {}",
            said(&o)
        );
        let version: i32 = c
            .query_one("SELECT max(version) FROM countersign_schema", &[])
            .unwrap()
            .get(0);
        assert_eq!(version, 3, "{made}");
    }
}

/// An empty database (no countersign schema at all) is refused in one line that says how its
/// schema is made.
#[test]
fn pg_an_empty_database_is_pointed_at_migrate() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let o = cli(&["--db", &db.url, "runs"]);
    let s = said(&o);
    assert_eq!(o.status.code(), Some(1), "{s}");
    assert!(s.contains("countersign --db URL migrate"), "{s}");
    assert_eq!(s.trim_end().lines().count(), 1, "{s}");
}

/// A trigger, a rule or row-level security on countersign's tables is refused by every open,
/// as SQLite refuses a trigger or a view (found from outside: a trigger turned a reviewer's
/// `reject` into `approved`, `reject` exited 0 and `verify` said intact). Nothing is decided
/// while it is there; once its owner removes it, the same command works.
#[test]
fn pg_a_trigger_rule_or_row_security_on_our_tables_is_refused() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let lite = dir.path().join("q.db");
    support::fixture(&lite, &["--scenario", "queue", "--base-time", "now"]);
    copy(&Endpoint::Sqlite(lite), &Endpoint::Pg(db.pg_url())).unwrap();
    let mut c = db.client();
    let run: String = c
        .query_one(
            "SELECT run_id FROM approvals WHERE status = 'pending' ORDER BY ord LIMIT 1",
            &[],
        )
        .unwrap()
        .get(0);
    let status = |c: &mut postgres::Client| -> String {
        c.query_one(
            "SELECT status FROM approvals WHERE run_id = $1 ORDER BY ord DESC LIMIT 1",
            &[&run],
        )
        .unwrap()
        .get(0)
    };
    c.batch_execute(
        "CREATE SCHEMA attic; \
         CREATE FUNCTION attic.flip() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           IF NEW.status = 'rejected' THEN NEW.status := 'approved'; END IF; RETURN NEW; END $$; \
         CREATE TRIGGER flip BEFORE UPDATE ON approvals FOR EACH ROW EXECUTE FUNCTION attic.flip()",
    )
    .unwrap();
    let reject = ["--db", &db.url, "reject", &run, "--yes", "--note", "no"];
    let o = cli(&reject);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains("countersign's table approvals has a trigger \"flip\"")
            && err.trim_end().lines().count() == 1,
        "{err}"
    );
    assert_eq!(status(&mut c), "pending", "nothing was decided");
    let Err(e) = PgStore::open_existing(&db.pg_url()) else {
        panic!("a database with a trigger on approvals was opened");
    };
    assert!(matches!(e, PgError::Unusable { .. }), "{e:?}");
    for (add, drop, says) in [
        (
            "CREATE RULE also AS ON UPDATE TO runs DO ALSO NOTIFY elsewhere",
            "DROP RULE also ON runs",
            "countersign's table runs has a rule \"also\"",
        ),
        (
            "ALTER TABLE steps ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE steps DISABLE ROW LEVEL SECURITY",
            "countersign's table steps has row-level security turned on",
        ),
    ] {
        c.batch_execute("DROP TRIGGER IF EXISTS flip ON approvals")
            .unwrap();
        c.batch_execute(add).unwrap();
        let o = cli(&["--db", &db.url, "runs"]);
        assert_eq!(o.status.code(), Some(1), "{add}: {}", said(&o));
        assert!(said(&o).contains(says), "{add}: {}", said(&o));
        // A copy from it is refused too (row-level security would hide rows from it).
        let back = dir.path().join(format!("back{}.db", says.len()));
        assert!(copy(&Endpoint::Pg(db.pg_url()), &Endpoint::Sqlite(back)).is_err());
        c.batch_execute(drop).unwrap();
    }
    // The names are resolved as the statements resolve them, through the search path: an
    // empty schema before `public` does not hide a trigger on `public.approvals`, and a
    // look-alike `approvals` in it (which the statements would use) is refused (found from
    // outside: a schema named after the login turned the check off, and a look-alike table of
    // approvals "approved by mallory" had workers pay refunds nobody approved).
    c.batch_execute(
        "CREATE SCHEMA shadow; \
         DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = shadow, public', \
         current_database()); END $$; \
         CREATE TRIGGER flip BEFORE UPDATE ON public.approvals FOR EACH ROW EXECUTE FUNCTION attic.flip()",
    )
    .unwrap();
    let o = cli(&reject);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(
        said(&o).contains("countersign's table approvals has a trigger \"flip\""),
        "{}",
        said(&o)
    );
    c.batch_execute(
        "DROP TRIGGER flip ON public.approvals; \
         CREATE TABLE shadow.approvals AS SELECT * FROM public.approvals; \
         UPDATE shadow.approvals SET status = 'approved', decided_by = 'mallory'",
    )
    .unwrap();
    let o = cli(&["--db", &db.url, "runs"]);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(
        said(&o).contains("finds countersign's table approvals in the schema shadow"),
        "{}",
        said(&o)
    );
    c.batch_execute("DROP TABLE shadow.approvals").unwrap();
    // A CHECK constraint that calls a function runs it inside the runtime's UPDATE; a default
    // or a domain likewise (found from outside: a CHECK on approvals approved another run's
    // refund along with the one the reviewer approved).
    for (add, drop, says) in [
        (
            "CREATE FUNCTION attic.ok(text) RETURNS boolean LANGUAGE sql AS 'SELECT true'; \
             ALTER TABLE approvals ADD CONSTRAINT harmless CHECK (attic.ok(status))",
            "ALTER TABLE approvals DROP CONSTRAINT harmless; DROP FUNCTION attic.ok(text)",
            "calls the function or operator \"ok\" of another schema than pg_catalog",
        ),
        (
            "CREATE FUNCTION attic.yes(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true'; \
             CREATE OPERATOR attic.@~@ (leftarg = text, rightarg = text, function = attic.yes); \
             ALTER TABLE approvals ADD CONSTRAINT innocuous CHECK (status OPERATOR(attic.@~@) 'x')",
            "ALTER TABLE approvals DROP CONSTRAINT innocuous; \
             DROP OPERATOR attic.@~@ (text, text); DROP FUNCTION attic.yes(text, text)",
            "calls the function or operator \"@~@\" of another schema than pg_catalog",
        ),
        (
            "CREATE DOMAIN attic.note_text AS text; \
             ALTER TABLE approvals ALTER COLUMN note TYPE attic.note_text",
            "ALTER TABLE approvals ALTER COLUMN note TYPE text; DROP DOMAIN attic.note_text",
            "a column of the type \"note_text\" of another schema than pg_catalog",
        ),
    ] {
        c.batch_execute(add).unwrap();
        let o = cli(&reject);
        assert_eq!(o.status.code(), Some(1), "{add}: {}", said(&o));
        assert!(said(&o).contains(says), "{add}: {}", said(&o));
        c.batch_execute(drop).unwrap();
    }
    // A schema holding functions placed before pg_catalog in the search path: its functions
    // would stand for the built-in ones in every statement (found from outside: a
    // `char_length` of its own ran 154 times). This one refuses to run.
    c.batch_execute(
        "CREATE FUNCTION shadow.char_length(text) RETURNS integer LANGUAGE plpgsql \
           AS $$ BEGIN RAISE EXCEPTION 'the shadow ran'; END $$; \
         DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = shadow, pg_catalog, public', \
         current_database()); END $$",
    )
    .unwrap();
    let o = cli(&["--db", &db.url, "runs"]);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(
        said(&o).contains(
            "the schema shadow, on the login's search path, holds functions or operators"
        ),
        "{}",
        said(&o)
    );
    // Also after pg_catalog, and in the schema of the tables: PostgreSQL picks the candidate
    // whose types fit best across the whole path (found from outside: an operator
    // `public.=(oid, regclass)` turned the trigger check off, a `public.unnest(bigint[])`
    // chose which approval `show` printed).
    c.batch_execute(
        "DROP FUNCTION shadow.char_length(text); \
         DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = public', \
         current_database()); END $$",
    )
    .unwrap();
    for (add, drop) in [
        (
            "CREATE FUNCTION public.no(oid, regclass) RETURNS boolean LANGUAGE sql AS 'SELECT false'; \
             CREATE OPERATOR public.= (leftarg = oid, rightarg = regclass, function = public.no)",
            "DROP OPERATOR public.= (oid, regclass); DROP FUNCTION public.no(oid, regclass)",
        ),
        (
            "CREATE FUNCTION public.unnest(a bigint[]) RETURNS SETOF bigint LANGUAGE sql \
               AS 'SELECT pg_catalog.unnest(a)'",
            "DROP FUNCTION public.unnest(bigint[])",
        ),
    ] {
        c.batch_execute(add).unwrap();
        let o = cli(&["--db", &db.url, "runs"]);
        assert_eq!(o.status.code(), Some(1), "{add}: {}", said(&o));
        assert!(
            said(&o).contains(
                "the schema public, on the login's search path, holds functions or operators"
            ),
            "{add}: {}",
            said(&o)
        );
        c.batch_execute(drop).unwrap();
    }
    let o = cli(&reject);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    assert_eq!(status(&mut c), "rejected");
}

/// On PostgreSQL too, `verify` names an approval whose stored status is not the decision its
/// events record (found from outside: a pending row set to approved said "intact").
#[test]
fn pg_verify_names_an_approval_whose_status_is_not_the_decision_on_record() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let lite = dir.path().join("all.db");
    support::fixture(&lite, &["--seed", "7"]);
    copy(&Endpoint::Sqlite(lite), &Endpoint::Pg(db.pg_url())).unwrap();
    let o = cli(&["--db", &db.url, "verify"]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let mut c = db.client();
    let pending: String = c
        .query_one(
            "SELECT id FROM approvals WHERE status = 'pending' ORDER BY ord LIMIT 1",
            &[],
        )
        .unwrap()
        .get(0);
    c.execute(
        "UPDATE approvals SET status = 'approved', decided_by = 'mallory' WHERE id = $1",
        &[&pending],
    )
    .unwrap();
    let o = cli(&["--db", &db.url, "verify"]);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(
        said(&o).contains(&format!(
            "approval {pending}: stored as approved, but no approval.decided event records a decision of it"
        )),
        "{}",
        said(&o)
    );
}
