//! The rest of the commands on a `postgres://` URL (issue 19), as the real binary against the
//! real server of `pg_support`: the bulk forms of reject, deny and cancel (the same output and
//! exit codes as on SQLite, compare-and-set per row), `recheck`, resume and recheck from the
//! console, and `demo` written into an empty PostgreSQL database.

mod pg_support;
mod pty_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use countersign::pgstore::PgStore;
use countersign::pgstore::copy::{Endpoint, copy};
use pg_support::{TestDb, demo_on, demo_refund_on, refunds_of, said};
use portable_pty::CommandBuilder;
use pty_support::session::Session;
use support::bin::{cli, cs};

/// The fixture's `queue` scenario (five waiting runs: refund, email, refund, email, refund,
/// requested 50, 42, 33, 23 and 12 minutes ago) as a SQLite file, the same rows copied into
/// `db`, and the run and approval ids.
fn queue_on(db: &TestDb, dir: &Path) -> (PathBuf, Vec<String>, Vec<String>) {
    let lite = dir.join("q.db");
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - (3 * 3600 + 50 * 60);
    let stamp = String::from_utf8(
        Command::new("date")
            .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%SZ"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let m = support::fixture(&lite, &["--scenario", "queue", "--base-time", stamp.trim()]);
    let ids = |what: &str| -> Vec<String> {
        (0..5)
            .map(|i| {
                let p = format!("/scenarios/queue/runs/{i}/{what}");
                m.pointer(&p).and_then(|v| v.as_str()).unwrap().to_string()
            })
            .collect()
    };
    copy(&Endpoint::Sqlite(lite.clone()), &Endpoint::Pg(db.pg_url())).expect("copy");
    (lite, ids("id"), ids("approvals/0"))
}

/// Every approval's (id, status, decided_by, note) in `ord` order, on PostgreSQL.
fn pg_approvals(db: &TestDb) -> Vec<(String, String, String, String)> {
    db.client()
        .query(
            "SELECT id, status, decided_by, note FROM approvals ORDER BY ord",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect()
}

fn pg_run_status(db: &TestDb, run: &str) -> String {
    db.client()
        .query_one("SELECT status FROM runs WHERE id = $1", &[&run])
        .unwrap()
        .get(0)
}

/// Chains what waits in the inbox, then `verify` on the URL, and a copy back to SQLite
/// passes agentrt's independent verifier.
fn verifies(db: &TestDb, dir: &Path) {
    PgStore::open_existing(&db.pg_url())
        .unwrap()
        .sequence_all()
        .unwrap();
    let o = cli(&["--db", &db.url, "verify"]);
    assert!(o.status.success(), "{}", said(&o));
    let back = dir.join("back.db");
    copy(&Endpoint::Pg(db.pg_url()), &Endpoint::Sqlite(back.clone())).expect("copy back");
    support::assert_verifies(&back);
}

/// `verify --from` past the head fails on PostgreSQL as on SQLite (the same words and exit
/// code), and `--from` the head's next seq is intact on both: the copy keeps the seqs.
#[test]
fn pg_verify_from_past_the_head_fails_as_on_sqlite() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (lite, _, _) = queue_on(&db, dir.path());
    let lite = lite.to_str().unwrap().to_string();
    let head: i64 = db
        .client()
        .query_one("SELECT max(seq) FROM events", &[])
        .unwrap()
        .get(0);
    let huge = [u64::MAX.to_string(), (1u64 << 63).to_string()];
    let near = [(head + 1).to_string(), (head + 2).to_string()];
    for (flag, from, code) in [
        ("--from", &near[0], 0),
        ("--from", &near[1], 1),
        ("--from", &huge[0], 1),
        ("--from", &huge[1], 1),
        ("--to", &huge[0], 1),
        ("--to", &huge[1], 1),
    ] {
        let args = ["verify", flag, from];
        let (l, p) = (cs(&lite, &args), cs(&db.url, &args));
        assert_eq!(
            l.status.code(),
            Some(code),
            "SQLite --from {from}: {}",
            said(&l)
        );
        assert_eq!(
            p.status.code(),
            Some(code),
            "PostgreSQL --from {from}: {}",
            said(&p)
        );
        assert_eq!(
            String::from_utf8_lossy(&p.stderr),
            String::from_utf8_lossy(&l.stderr)
        );
    }
}

/// An event below seq 1 (the table's CHECK dropped by someone who owns it) breaks the chain
/// on PostgreSQL as on SQLite, whatever range is checked, with the same message.
#[test]
fn pg_verify_fails_on_an_event_planted_below_seq_one_as_on_sqlite() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (lite, _, _) = queue_on(&db, dir.path());
    let lite = lite.to_str().unwrap().to_string();
    let mut c = db.client();
    let run: String = c
        .query_one("SELECT run_id FROM events ORDER BY seq LIMIT 1", &[])
        .unwrap()
        .get(0);
    let constraint: String = c
        .query_one(
            "SELECT conname::text FROM pg_constraint WHERE conrelid = 'events'::regclass AND contype = 'c'",
            &[],
        )
        .unwrap()
        .get(0);
    c.batch_execute(&format!("ALTER TABLE events DROP CONSTRAINT {constraint}"))
        .unwrap();
    let plant = "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) \
                 VALUES (0, $1, '', '2020-01-01T00:00:00Z', 'approval.decided', '{}', 'zz')";
    c.execute(plant, &[&run]).unwrap();
    rusqlite::Connection::open(&lite)
        .unwrap()
        .execute(&plant.replace("$1", "?1"), [&run])
        .unwrap();
    for args in [&["verify"][..], &["verify", "--from", "3"]] {
        let (l, p) = (cs(&lite, args), cs(&db.url, args));
        assert_eq!(p.status.code(), Some(1), "{args:?}: {}", said(&p));
        assert!(
            said(&p).contains("broken at seq 0"),
            "{args:?}: {}",
            said(&p)
        );
        assert_eq!(
            String::from_utf8_lossy(&p.stderr),
            String::from_utf8_lossy(&l.stderr)
        );
    }
}

/// A model call with no recorded outcome is counted by `show` on PostgreSQL as on SQLite.
#[test]
fn pg_show_counts_unrecorded_model_calls_as_sqlite_does() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (lite, runs, _) = queue_on(&db, dir.path());
    let lite = lite.to_str().unwrap().to_string();
    let mark = "UPDATE model_calls SET status = 'dispatched' WHERE run_id = $1";
    let n = db.client().execute(mark, &[&runs[0]]).unwrap();
    let m = rusqlite::Connection::open(&lite)
        .unwrap()
        .execute(&mark.replace("$1", "?1"), [&runs[0]])
        .unwrap();
    assert_eq!(n as usize, m);
    assert!(n > 0, "the fixture's run has model calls to mark");
    for args in [&["show", &runs[0]][..], &["show", &runs[0], "--json"]] {
        let (l, p) = (cs(&lite, args), cs(&db.url, args));
        // The printed commands name each database as it was given.
        let lines = |o: &Output| -> Vec<String> {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.contains("--db"))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(lines(&p), lines(&l), "{args:?}");
        if args.len() == 2 {
            assert!(
                String::from_utf8_lossy(&p.stdout).contains("no recorded outcome"),
                "{}",
                said(&p)
            );
        }
    }
}

/// The same bulk commands on a SQLite file and on its copy in PostgreSQL print the same text
/// and JSON and exit the same way, and decide the same rows with the same columns.
#[test]
fn pg_bulk_decisions_are_the_sqlite_ones() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (lite, runs, aps) = queue_on(&db, dir.path());
    let lite = lite.to_str().unwrap().to_string();
    let both = |args: &[&str]| -> (Output, Output) { (cs(&lite, args), cs(&db.url, args)) };
    let same = |(l, p): &(Output, Output)| {
        assert_eq!(
            String::from_utf8_lossy(&p.stdout),
            String::from_utf8_lossy(&l.stdout),
            "stdout: PostgreSQL (left) as SQLite (right); stderr {}",
            String::from_utf8_lossy(&p.stderr)
        );
        assert_eq!(p.status.code(), l.status.code(), "{}", said(p));
    };
    // A dry run lists the same rows, in text and JSON, and decides nothing.
    let dry = [
        "reject",
        "--status",
        "waiting",
        "--tool",
        "issue_refund",
        "--older-than",
        "40m",
        "--dry-run",
        "--note",
        "x",
    ];
    let o = both(&dry);
    same(&o);
    let t = String::from_utf8_lossy(&o.1.stdout);
    assert!(t.contains("would reject 1 queue row(s)"), "{t}");
    assert!(t.contains(&format!("reject: approval {}", aps[0])), "{t}");
    let mut json = vec!["--json"];
    json.extend(["cancel", "--older-than", "20m", "--dry-run", "--note", "x"]);
    let o = both(&json);
    same(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.1.stdout).unwrap();
    assert_eq!(v["selected"].as_array().unwrap().len(), 4, "{v}");
    assert!(pg_approvals(&db).iter().all(|a| a.1 == "pending"));
    // Usage: consent is needed, exit 2, nothing decided.
    let o = both(&["reject", "--tool", "issue_refund", "--note", "x"]);
    same(&o);
    assert_eq!(o.1.status.code(), Some(2), "{}", said(&o.1));
    assert!(pg_approvals(&db).iter().all(|a| a.1 == "pending"));
    // Reject every refund: each row by its own hash, the emails left.
    let o = both(&[
        "reject",
        "--tool",
        "issue_refund",
        "--note",
        "bad deploy",
        "--yes",
        "--by",
        "lead",
    ]);
    same(&o);
    let t = String::from_utf8_lossy(&o.1.stdout);
    assert!(t.contains("rejected 3, skipped 0 of 3 selected"), "{t}");
    let rows = pg_approvals(&db);
    assert_eq!(
        rows.iter().map(|a| &a.0).collect::<Vec<_>>(),
        aps.iter().collect::<Vec<_>>()
    );
    for (i, a) in rows.iter().enumerate() {
        if i % 2 == 0 {
            let got = (a.1.as_str(), a.2.as_str(), a.3.as_str());
            assert_eq!(got, ("rejected", "lead", "bad deploy"), "{a:?}");
            assert_eq!(pg_run_status(&db, &runs[i]), "CANCELLED");
        } else {
            assert_eq!(a.1, "pending", "the emails are left: {a:?}");
        }
    }
    // Deny the emails with feedback, in JSON: the same document; their runs are interrupted.
    let o = both(&[
        "--json",
        "deny",
        "--tool",
        "send_status_email",
        "--note",
        "no emails today",
        "--yes",
    ]);
    same(&o);
    for i in [1, 3] {
        assert_eq!(pg_run_status(&db, &runs[i]), "INTERRUPTED");
    }
    // Nothing is left to cancel.
    let o = both(&["cancel", "--status", "waiting", "--note", "stop", "--yes"]);
    same(&o);
    assert!(
        String::from_utf8_lossy(&o.1.stdout).contains("nothing matches"),
        "{}",
        said(&o.1)
    );
    verifies(&db, dir.path());
}

/// The rows are listed and the prompt waits; another reviewer approves one of them meanwhile.
/// Answering `y` rejects the other two and skips that one by name (exit 1): each row is its
/// own compare-and-set on the hash it was listed with, and the other decision stands.
#[test]
fn pg_bulk_skips_a_row_decided_after_the_listing() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_lite, runs, aps) = queue_on(&db, dir.path());
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
    cmd.args([
        "--db",
        &db.url,
        "reject",
        "--tool",
        "issue_refund",
        "--note",
        "bad deploy",
        "--by",
        "lead",
    ]);
    cmd.env_remove("COUNTERSIGN_DB");
    let mut term = Session::start(cmd, 50, 250);
    term.wait("the prompt", |_, raw| {
        String::from_utf8_lossy(raw).contains("? [y/N] ")
    });
    let o = cs(
        &db.url,
        &["approve", &runs[2], "--approval", &aps[2], "--by", "ana"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    term.send(b"y\r");
    let code = term.finish();
    let t = String::from_utf8_lossy(&term.raw).into_owned();
    assert_eq!(code, 1, "{t}");
    assert!(
        t.contains(&format!(
            "skipped: approval {} of run {}: it was decided after it was listed",
            aps[2], runs[2]
        )),
        "{t}"
    );
    assert!(t.contains("rejected 2, skipped 1 of 3 selected"), "{t}");
    let status = |i: usize| {
        pg_approvals(&db)
            .into_iter()
            .find(|a| a.0 == aps[i])
            .unwrap()
    };
    assert_eq!(status(0).1, "rejected");
    assert_eq!(
        (status(2).1, status(2).2),
        ("approved".into(), "ana".into())
    );
    assert_eq!(status(4).1, "rejected");
    verifies(&db, dir.path());
}

/// Every row of the run tables as text, to see that a read-only command wrote nothing.
fn rows_digest(db: &TestDb) -> String {
    let mut out = String::new();
    for t in [
        "runs",
        "steps",
        "approvals",
        "events",
        "event_inbox",
        "model_calls",
    ] {
        let r = db
            .client()
            .query_one(
                &format!("SELECT count(*)::text || ':' || COALESCE(md5(string_agg(x::text, ',' ORDER BY x::text)), '') FROM {t} x"),
                &[],
            )
            .unwrap();
        out.push_str(&format!("{t}={} ", r.get::<_, String>(0)));
    }
    out
}

/// The demo's 65.00 refund on ord_1004, waiting for a person (by the SQLite file).
fn large_refund(lite: &Path) -> String {
    rusqlite::Connection::open(lite)
        .unwrap()
        .query_row(
            "SELECT a.run_id FROM approvals a JOIN runs r ON r.id = a.run_id \
             WHERE r.status = 'WAITING_FOR_APPROVAL' AND a.status = 'pending' \
             AND a.presentation_json LIKE '%ord_1004%' AND a.presentation_json LIKE '%6500%'",
            [],
            |r| r.get(0),
        )
        .expect("the 65.00 refund waits")
}

/// `recheck RUN --backend PATH` on a URL asks the example consumer's policy again through the
/// same driver: the same lines and exit as on SQLite, exit 1 with the difference once the
/// order changed, nothing written to the database; without `--backend` it says to name one.
#[test]
fn pg_recheck_is_the_sqlite_recheck_and_writes_nothing() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (lite, backend) = demo_on(&db, dir.path());
    let run = large_refund(&lite);
    let b = backend.to_str().unwrap();
    let o = cs(&db.url, &["recheck", &run]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(said(&o).contains("--backend"), "{}", said(&o));
    let before = rows_digest(&db);
    let sqlite = cs(lite.to_str().unwrap(), &["recheck", &run]);
    let pg = cs(&db.url, &["recheck", &run, "--backend", b]);
    assert_eq!(pg.status.code(), Some(0), "{}", said(&pg));
    assert_eq!(said(&pg), said(&sqlite));
    assert!(said(&pg).contains("same as recorded"), "{}", said(&pg));
    // On SQLite too, --backend names the backend asked instead of the one beside the file: a
    // copy where the order changed answers differently.
    let other = dir.path().join("other.orders.db");
    std::fs::copy(&backend, &other).unwrap();
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute(
            "UPDATE orders SET refunded_cents = total_cents - 3000 WHERE id = 'ord_1004'",
            [],
        )
        .unwrap();
    let o = cs(
        lite.to_str().unwrap(),
        &["recheck", &run, "--backend", other.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    // An earlier refund on the same order ran: only 30.00 is refundable now.
    rusqlite::Connection::open(&backend)
        .unwrap()
        .execute(
            "UPDATE orders SET refunded_cents = total_cents - 3000 WHERE id = 'ord_1004'",
            [],
        )
        .unwrap();
    let sqlite = cs(
        lite.to_str().unwrap(),
        &["--json", "recheck", &run, "--all"],
    );
    let pg = cs(
        &db.url,
        &["--json", "recheck", &run, "--all", "--backend", b],
    );
    assert_eq!(pg.status.code(), Some(1), "{}", said(&pg));
    assert_eq!(said(&pg), said(&sqlite));
    let pg = cs(&db.url, &["--backend", b, "recheck", &run[..8]]);
    assert_eq!(pg.status.code(), Some(1), "{}", said(&pg));
    assert!(
        said(&pg).contains("policy now: deny: invalid_state"),
        "{}",
        said(&pg)
    );
    assert_eq!(rows_digest(&db), before, "recheck wrote nothing");
}

/// The console on a URL with `--backend`: the approval page asks the policy again (its
/// "policy now" line), and `R` on an approved run resumes it through the same driver: the
/// refund executes once. Without `--backend`, `R` says in one line to name the backend and
/// nothing runs.
#[test]
fn pg_console_rechecks_and_resumes_with_the_backend() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (run, backend) = demo_refund_on(&db, dir.path());
    let b = backend.to_str().unwrap();
    let cfg = tempfile::tempdir().unwrap();
    let console = |extra: &[&str]| {
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
        cmd.args(["--db", &db.url]);
        cmd.args(extra);
        cmd.env("TERM", "xterm-256color");
        cmd.env("COUNTERSIGN_BY", "alice");
        cmd.env("XDG_CONFIG_HOME", cfg.path());
        cmd.env_remove("COUNTERSIGN_DB");
        Session::start(cmd, 40, 160)
    };
    let approval: String = db
        .client()
        .query_one(
            "SELECT id FROM approvals WHERE run_id = $1 AND status = 'pending'",
            &[&run],
        )
        .unwrap()
        .get(0);
    // The decision page asks today's policy through the backend.
    let mut t = console(&["--backend", b]);
    t.wait_text("Pending approvals");
    t.send(format!(":approval {approval}\r").as_bytes());
    t.wait_text("same as recorded");
    t.send(b"\x03");
    assert_eq!(t.finish(), 0);
    let before = refunds_of(&backend, &run);
    let o = cs(&db.url, &["approve", &run, "--yes", "--by", "alice"]);
    assert!(o.status.success(), "{}", said(&o));
    // Without the backend: one line says to name it, and nothing runs.
    let mut t = console(&[]);
    t.wait_text("Pending approvals");
    t.send(format!(":run {run}\r").as_bytes());
    t.wait_text("WAITING_FOR_APPROVAL");
    t.send(b"R");
    t.wait_text("enter confirm");
    t.send(b"\r");
    t.wait_text("--backend PATH");
    t.send(b"\x03");
    assert_eq!(t.finish(), 0);
    assert_eq!(refunds_of(&backend, &run), before, "nothing ran");
    // With it: the run resumes and completes, the refund executed once.
    let mut t = console(&["--backend", b]);
    t.wait_text("Pending approvals");
    t.send(format!(":run {run}\r").as_bytes());
    t.wait_text("WAITING_FOR_APPROVAL");
    t.send(b"R");
    t.wait_text("enter confirm");
    t.send(b"\r");
    t.wait_text("COMPLETED");
    t.send(b"\x03");
    assert_eq!(t.finish(), 0);
    assert_eq!(refunds_of(&backend, &run), before + 1, "exactly one refund");
    assert_eq!(pg_run_status(&db, &run), "COMPLETED");
    verifies(&db, dir.path());
}

/// `demo --db postgres://… --backend PATH --no-tui` writes the demo's runs into an empty
/// database (the commands then read them there and the chain verifies), recognises it on a
/// second run, and refuses a database that holds anything, leaving it and no backend behind.
#[test]
fn pg_demo_writes_into_an_empty_database_only() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let backend = dir.path().join("orders.db");
    let b = backend.to_str().unwrap();
    let o = cs(&db.url, &["demo", "--no-tui"]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(said(&o).contains("--backend"), "{}", said(&o));
    let o = cs(&db.url, &["--backend", b, "demo", "--no-tui"]);
    assert!(o.status.success(), "{}", said(&o));
    let t = said(&o);
    assert!(t.contains("wrote the demo into postgresql://"), "{t}");
    assert!(t.contains("runs wait for a person"), "{t}");
    assert!(backend.exists(), "the order backend is written");
    let waiting: i64 = db
        .client()
        .query_one(
            "SELECT count(*) FROM runs WHERE status = 'WAITING_FOR_APPROVAL'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(waiting >= 3, "{waiting} runs wait");
    let o = cs(&db.url, &["runs", "--status", "WAITING_FOR_APPROVAL"]);
    assert!(o.status.success(), "{}", said(&o));
    verifies(&db, dir.path());
    let o = cs(&db.url, &["--backend", b, "demo", "--no-tui"]);
    assert!(o.status.success(), "{}", said(&o));
    assert!(said(&o).contains("already exists"), "{}", said(&o));
    // A database with rows in it is never written.
    let Some(other) = pg_support::fresh_db() else {
        return;
    };
    let _ = queue_on(&other, dir.path());
    let before = rows_digest(&other);
    let b2 = dir.path().join("other.orders.db");
    let o = cs(
        &other.url,
        &["--backend", b2.to_str().unwrap(), "demo", "--no-tui"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(
        said(&o).contains("the demo was not written into")
            && said(&o).contains("writes into an empty database only"),
        "{}",
        said(&o)
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("other.orders.db"))
        .collect();
    assert!(left.is_empty(), "no backend is left behind: {left:?}");
    assert_eq!(rows_digest(&other), before, "nothing was written");
    // A SQLite demo keeps its backend beside it.
    let lite = dir.path().join("d.db");
    let o = cs(
        lite.to_str().unwrap(),
        &["--backend", b, "demo", "--no-tui"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
}

/// `demo` on a URL opens the console on the demo's runs in PostgreSQL with the example
/// consumer's worker beside it: approving the queue's first row there executes its call once,
/// with no second key (the worker, woken by the sequencer's notification, resumes the run).
#[test]
fn pg_demo_console_and_its_worker_run_an_approved_call_once() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let backend = dir.path().join("orders.db");
    let o = cs(
        &db.url,
        &["--backend", backend.to_str().unwrap(), "demo", "--no-tui"],
    );
    assert!(o.status.success(), "{}", said(&o));
    let run: String = db
        .client()
        .query_one(
            "SELECT a.run_id FROM approvals a JOIN runs r ON r.id = a.run_id \
             WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL' \
             ORDER BY a.ord LIMIT 1",
            &[],
        )
        .unwrap()
        .get(0);
    let effects = || -> i64 {
        rusqlite::Connection::open(&backend)
            .unwrap()
            .query_row(
                "SELECT count(*) FROM effects WHERE session_id = ?1",
                [&run],
                |r| r.get(0),
            )
            .unwrap()
    };
    let before = effects();
    let cfg = tempfile::tempdir().unwrap();
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
    cmd.args([
        "--db",
        &db.url,
        "--backend",
        backend.to_str().unwrap(),
        "demo",
    ]);
    cmd.env("TERM", "xterm-256color");
    cmd.env("COUNTERSIGN_BY", "alice");
    cmd.env("XDG_CONFIG_HOME", cfg.path());
    cmd.env_remove("COUNTERSIGN_DB");
    let mut t = Session::start(cmd, 40, 160);
    t.wait_text("Pending approvals");
    t.wait_text(&run[..4]);
    t.send(b"\r");
    t.wait_text("hash");
    t.send(b"a");
    t.wait_text("enter confirm");
    t.send(b"\r");
    t.wait_text("approved by alice");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while pg_run_status(&db, &run) == "WAITING_FOR_APPROVAL" {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker resumed the run"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    t.send(b"\x03");
    assert_eq!(t.finish(), 0);
    assert_eq!(
        effects(),
        before + 1,
        "exactly one effect for the approved call"
    );
    verifies(&db, dir.path());
}

/// A login in `countersign_reviewer` (docs/postgres-roles.sql, no new grant) can ask
/// `recheck` (its driver runs no sequencer, which that role may not run) and decide queue rows
/// in bulk; the decisions' events wait in the inbox for a sequencer.
#[test]
fn pg_reviewer_role_rechecks_and_decides_in_bulk() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (lite, backend) = demo_on(&db, dir.path());
    let run = large_refund(&lite);
    let mut c = db.client();
    c.batch_execute(include_str!("../docs/postgres-roles.sql"))
        .unwrap();
    let login = format!("revcmds_{}", std::process::id());
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {login}; CREATE ROLE {login} LOGIN IN ROLE countersign_reviewer"
    ))
    .unwrap();
    let url = db.url_as(&login);
    let b = backend.to_str().unwrap();
    let o = cs(&url, &["recheck", &run, "--backend", b]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    assert!(said(&o).contains("same as recorded"), "{}", said(&o));
    let inbox = |c: &mut countersign::pgstore::postgres::Client| -> i64 {
        c.query_one("SELECT count(*) FROM event_inbox", &[])
            .unwrap()
            .get(0)
    };
    assert_eq!(inbox(&mut c), 0);
    let o = cs(
        &url,
        &[
            "cancel",
            "--tool",
            "issue_refund",
            "--note",
            "stop",
            "--yes",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    assert!(said(&o).contains("skipped 0 of"), "{}", said(&o));
    assert_eq!(pg_run_status(&db, &run), "CANCELLED");
    let waiting = inbox(&mut c);
    assert!(waiting > 0, "the cancels' events wait for a sequencer");
    // Asked by the owner, whose login could chain, the recheck still writes nothing: its
    // driver runs no sequencer, so the inbox is left as it was.
    let o = cs(&db.url, &["recheck", &run, "--all", "--backend", b]);
    assert!(o.status.code().is_some(), "{}", said(&o));
    assert_eq!(inbox(&mut c), waiting, "recheck chained nothing");
    verifies(&db, dir.path());
}

/// `worker --once` whose resumes fail exits 1 and promises no retry it will not make (found
/// from outside: a login that may read but not write the runs got "tried again soon" for each
/// decided run and exit 0, so a job running it never learnt the runs were left).
#[test]
fn pg_worker_once_with_failed_resumes_exits_1() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (run, backend) = demo_refund_on(&db, dir.path());
    let o = cs(&db.url, &["approve", &run, "--yes", "--by", "alice"]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let login = format!("ro_{}", std::process::id());
    let mut c = db.client();
    c.batch_execute(include_str!("../docs/postgres-roles.sql"))
        .unwrap();
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {login}; CREATE ROLE {login} LOGIN IN ROLE countersign_reviewer"
    ))
    .unwrap();
    let once = |url: &str| {
        cs(
            url,
            &["worker", "--once", "--backend", backend.to_str().unwrap()],
        )
    };
    let o = once(&db.url_as(&login));
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(
        out.contains(&format!("run {run}: resume failed: ")),
        "{out}"
    );
    assert!(!out.contains("tried again"), "{out}");
    assert!(err.contains("1 resume(s) failed"), "{err}");
    assert_eq!(refunds_of(&backend, &run), 0, "nothing ran");
    // The run's own role resumes it.
    let o = once(&db.url);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    assert_eq!(refunds_of(&backend, &run), 1);
}
