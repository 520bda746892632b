//! `reject`, `deny` and `cancel` over queue rows chosen by filters (issue 21), as the real
//! binary: the dry run decides nothing, each row is decided by the hash it was listed with,
//! a row decided by someone else between the listing and the answer is skipped and named, and
//! the database still verifies with the independent Python verifier.

mod pty_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use portable_pty::CommandBuilder;
use pty_support::session::Session;
use support::bin::cs;
use support::{assert_verifies, fixture, s, tempdir};

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The five runs of the fixture's `queue` scenario, written so that their approvals were
/// requested 50, 42, 33, 23 and 12 minutes ago (refund, email, refund, email, refund), each
/// expiring an hour after it was requested. Returns the database, run ids and approval ids.
fn queue(dir: &Path) -> (PathBuf, Vec<String>, Vec<String>) {
    let db = dir.join("q.db");
    // The scenario starts 3 h after the base time.
    let base = std::time::SystemTime::now() - Duration::from_secs(3 * 3600 + 50 * 60);
    let secs = base
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let stamp = rfc3339(secs);
    let m = fixture(&db, &["--scenario", "queue", "--base-time", &stamp]);
    let runs = (0..5)
        .map(|i| s(&m, &format!("/scenarios/queue/runs/{i}/id")).to_string())
        .collect();
    let aps = (0..5)
        .map(|i| s(&m, &format!("/scenarios/queue/runs/{i}/approvals/0")).to_string())
        .collect();
    (db, runs, aps)
}

fn rfc3339(secs: u64) -> String {
    let o = Command::new("python3")
        .args([
            "-c",
            "import datetime,sys\nprint(datetime.datetime.fromtimestamp(int(sys.argv[1]), datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'))",
        ])
        .arg(secs.to_string())
        .output()
        .expect("python3");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Every approval's (id, status, decided_by, note), by Python's sqlite3.
fn approvals(db: &Path) -> Vec<(String, String, String, String)> {
    let o = Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\nfor r in c.execute('select id,status,decided_by,note from approvals order by rowid'): print('\\t'.join(r))",
        ])
        .arg(db)
        .output()
        .expect("python3");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let mut p = l.split('\t').map(str::to_string);
            (
                p.next().unwrap_or_default(),
                p.next().unwrap_or_default(),
                p.next().unwrap_or_default(),
                p.next().unwrap_or_default(),
            )
        })
        .collect()
}

fn status_of(db: &Path, ap: &str) -> String {
    approvals(db)
        .into_iter()
        .find(|a| a.0 == ap)
        .map(|a| a.1)
        .unwrap_or_default()
}

#[test]
fn a_dry_run_lists_exactly_the_matching_rows_and_decides_nothing() {
    let dir = tempdir();
    let (db, _runs, aps) = queue(dir.path());
    let before = std::fs::read(&db).expect("db");
    let o = cs(
        &db,
        &[
            "reject",
            "--status",
            "waiting",
            "--tool",
            "issue_refund",
            "--older-than",
            "40m",
            "--dry-run",
            "--note",
            "bad deploy",
        ],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("would reject 1 queue row(s)"), "{t}");
    assert!(t.contains(&format!("reject: approval {}", aps[0])), "{t}");
    for other in &aps[1..] {
        assert!(!t.contains(other.as_str()), "{other} is not selected: {t}");
    }
    assert!(t.contains("nothing was decided (--dry-run)"), "{t}");
    assert!(approvals(&db).iter().all(|a| a.1 == "pending"));
    assert_eq!(
        std::fs::read(&db).expect("db"),
        before,
        "a dry run writes nothing"
    );

    // Older than 40 minutes, any tool: the refund and the email.
    let o = cs(
        &db,
        &["cancel", "--older-than", "40m", "--dry-run", "--note", "x"],
    );
    let t = text(&o);
    assert!(t.contains("would cancel 2 queue row(s)"), "{t}");
    assert!(
        t.contains(aps[0].as_str()) && t.contains(aps[1].as_str()),
        "{t}"
    );
}

#[test]
fn bulk_reject_decides_each_matching_row_with_its_own_hash_and_leaves_the_rest() {
    let dir = tempdir();
    let (db, runs, aps) = queue(dir.path());
    let o = cs(
        &db,
        &[
            "reject",
            "--tool",
            "issue_refund",
            "--note",
            "bad deploy",
            "--yes",
            "--by",
            "lead",
        ],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("rejected 3, skipped 0 of 3 selected"), "{t}");
    let rows = approvals(&db);
    for (i, a) in rows.iter().enumerate() {
        if i % 2 == 0 {
            assert_eq!(
                (a.1.as_str(), a.2.as_str(), a.3.as_str()),
                ("rejected", "lead", "bad deploy"),
                "{a:?}"
            );
        } else {
            assert_eq!(a.1, "pending", "the emails are left: {a:?}");
        }
    }
    assert_eq!(rows[0].0, aps[0]);
    let show = cs(&db, &["--json", "show", &runs[0]]);
    let v: serde_json::Value = serde_json::from_slice(&show.stdout).expect("json");
    assert_eq!(v["run"]["status"], "CANCELLED", "{v}");
    assert_verifies(&db);
}

#[test]
fn bulk_deny_tells_each_agent_and_cancel_ends_each_run() {
    let dir = tempdir();
    let (db, runs, aps) = queue(dir.path());
    let o = cs(
        &db,
        &[
            "deny",
            "--tool",
            "send_status_email",
            "--note",
            "no emails today",
            "--yes",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The denied runs' next step is said once, after the summary.
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("2 denied run(s) wait INTERRUPTED until resumed: `countersign worker`"),
        "{}",
        text(&o)
    );
    for i in [1, 3] {
        assert_eq!(status_of(&db, &aps[i]), "rejected");
        let show = cs(&db, &["--json", "show", &runs[i]]);
        let v: serde_json::Value = serde_json::from_slice(&show.stdout).expect("json");
        assert_eq!(v["run"]["status"], "INTERRUPTED", "{v}");
    }
    let o = cs(
        &db,
        &[
            "cancel", "--status", "waiting", "--note", "all stop", "--yes",
        ],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("cancelled 3, skipped 0 of 3 selected"), "{t}");
    for i in [0, 2, 4] {
        let show = cs(&db, &["--json", "show", &runs[i]]);
        let v: serde_json::Value = serde_json::from_slice(&show.stdout).expect("json");
        assert_eq!(v["run"]["status"], "CANCELLED", "{v}");
        assert_eq!(v["run"]["reason"], "operator_cancelled", "{v}");
    }
    assert_verifies(&db);
}

#[test]
fn usage_errors_are_exit_2_and_bulk_needs_consent() {
    let dir = tempdir();
    let (db, _runs, _aps) = queue(dir.path());
    for args in [
        vec!["approve", "--tool", "issue_refund"],
        vec!["reject", "--status", "running", "--note", "x"],
        vec!["reject", "somerun", "--tool", "issue_refund", "--note", "x"],
        vec!["cancel", "--older-than", "2 hours", "--note", "x"],
        vec!["reject", "--tool", "issue_refund"],
    ] {
        let o = cs(&db, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
    }
    // Without --yes and with no terminal to ask at, nothing is decided.
    let o = cs(&db, &["reject", "--tool", "issue_refund", "--note", "x"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--dry-run"), "{}", text(&o));
    assert!(approvals(&db).iter().all(|a| a.1 == "pending"));
}

#[test]
fn a_row_decided_by_another_reviewer_after_the_listing_is_skipped_and_named() {
    // The rows are listed, the prompt waits; meanwhile another reviewer approves one of them
    // in another process. Answering `y` rejects the other two and skips that one by name,
    // exit 1, and the other reviewer's decision stands.
    let dir = tempdir();
    let (db, runs, aps) = queue(dir.path());
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
    cmd.args([
        "--db",
        db.to_str().expect("utf8"),
        "reject",
        "--tool",
        "issue_refund",
        "--note",
        "bad deploy",
        "--by",
        "lead",
    ]);
    let mut term = Session::start(cmd, 50, 250);
    term.wait("the prompt", |_, raw| {
        String::from_utf8_lossy(raw).contains("? [y/N] ")
    });
    let o = cs(
        &db,
        &["approve", &runs[2], "--approval", &aps[2], "--by", "ana"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
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
    assert_eq!(status_of(&db, &aps[0]), "rejected");
    assert_eq!(status_of(&db, &aps[2]), "approved", "ana's decision stands");
    assert_eq!(status_of(&db, &aps[4]), "rejected");
    assert_verifies(&db);
}

#[test]
fn with_json_a_terminal_is_not_consent_so_nothing_is_asked_on_stdout() {
    // The prompt would land in the JSON a script reads: with --json only --yes consents.
    let dir = tempdir();
    let (db, _runs, _aps) = queue(dir.path());
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
    cmd.args([
        "--db",
        db.to_str().expect("utf8"),
        "--json",
        "reject",
        "--tool",
        "issue_refund",
        "--note",
        "x",
    ]);
    let mut term = Session::start(cmd, 24, 200);
    let code = term.finish();
    let t = String::from_utf8_lossy(&term.raw).into_owned();
    assert_eq!(code, 2, "{t}");
    assert!(!t.contains("[y/N]"), "{t}");
    assert!(approvals(&db).iter().all(|a| a.1 == "pending"));
}
