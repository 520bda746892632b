//! What a new user meets first (issue 16 part 2, the commands): no `USER` in a container,
//! flags given after the subcommand, the short status names, a bare `countersign` with no
//! database, and where `demo` writes.

mod support;

use std::path::Path;
use std::process::{Command, Output};

fn cs(db: Option<&Path>, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_countersign"));
    c.env_remove("COUNTERSIGN_DB")
        .env_remove("AGENTRT_DB")
        .env_remove("COUNTERSIGN_BY")
        .env_remove("USER");
    if let Some(db) = db {
        c.arg("--db").arg(db);
    }
    c.args(args).envs(env.iter().copied());
    c.output().expect("countersign runs")
}

fn waiting_run(db: &Path) -> String {
    let m = support::fixture(db, &["--scenario", "waiting", "--base-time", "now"]);
    support::s(&m, "/scenarios/waiting/runs/0/id").to_string()
}

fn decided_by(db: &Path) -> String {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(
        "SELECT decided_by FROM approvals WHERE status = 'approved'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn with_no_user_set_a_decision_records_the_accounts_name() {
    let dir = support::tempdir();
    let db = dir.path().join("runs.db");
    let run = waiting_run(&db);
    let o = cs(Some(&db), &["approve", &run, "--yes"], &[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let me = Command::new("id").arg("-un").output().unwrap();
    assert_eq!(decided_by(&db), String::from_utf8_lossy(&me.stdout).trim());
}

#[test]
fn global_flags_work_after_the_subcommand() {
    let dir = support::tempdir();
    let db = dir.path().join("runs.db");
    let run = waiting_run(&db);
    let o = cs(
        None,
        &[
            "approve",
            &run,
            "--yes",
            "--by",
            "ana",
            "--db",
            db.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(decided_by(&db), "ana");
    // `demo --by ana` was refused as an unknown flag.
    let demo = dir.path().join("demo.db");
    let o = cs(
        Some(&demo),
        &["demo", "--no-tui", "--by", "ana", "--theme", "mono"],
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn runs_takes_the_short_lower_case_status_names() {
    let dir = support::tempdir();
    let db = dir.path().join("runs.db");
    support::fixture(&db, &["--scenario", "waiting,completed"]);
    let long = cs(
        Some(&db),
        &["--json", "runs", "--status", "WAITING_FOR_APPROVAL"],
        &[],
    );
    for short in ["waiting", "Waiting", "waiting-for-approval", "pending"] {
        let o = cs(Some(&db), &["--json", "runs", "--status", short], &[]);
        assert_eq!(o.status.code(), Some(0), "{short}");
        assert_eq!(o.stdout, long.stdout, "{short}");
    }
    let o = cs(Some(&db), &["runs", "--status", "canceled"], &[]);
    assert_eq!(o.status.code(), Some(0));
    let o = cs(Some(&db), &["runs", "--status", "done"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("waiting"));
}

#[test]
fn a_bare_countersign_with_no_database_suggests_the_demo() {
    let o = cs(None, &[], &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("countersign demo"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn demo_help_says_where_the_demo_is_written() {
    let o = cs(None, &["demo", "--help"], &[]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("$XDG_DATA_HOME/countersign/demo.db"),
        "{help}"
    );
    assert!(help.contains("never to $COUNTERSIGN_DB"), "{help}");
}
