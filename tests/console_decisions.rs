//! Decisions from the console through the store's shown-approval calls, on real databases:
//! approve and reject bind the hash that was rendered, a changed row is refused and reloaded,
//! a second console gets "already decided", cancel asks for a reason. Every database still
//! verifies with the independent Python verifier afterwards.

mod console_support;

use std::path::Path;

use console_support::*;
use countersign::console::testing::StoreDecider;
use countersign::console::testing::{AppConfig, Screen};

use countersign::runtime::types::Timestamp;
use crossterm::event::KeyCode;

/// Decisions happen at 03:50, before the queue scenario's approvals expire.
fn decider(db: &Path) -> Box<StoreDecider> {
    let t = Timestamp::parse("2026-01-01T03:50:00Z")
        .unwrap()
        .unix_secs();
    Box::new(
        StoreDecider::open(db)
            .unwrap()
            .with_clock(Timestamp::from_unix(t, 0)),
    )
}

fn harness(db: &Path, by: &str) -> Harness {
    let cfg = AppConfig {
        by: by.into(),
        read_only: false,
        can_resume: false,
    };
    Harness::with(db, 100, 30, cfg, decider(db))
}

fn verify(db: &Path) {
    let out = std::process::Command::new("python3")
        .arg(shared_dir().join("tools/agentrt_verify.py"))
        .arg(db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "agentrt_verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn row(db: &Path, id: &str) -> (String, String, String) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(
        "SELECT status, decided_by, note FROM approvals WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

fn queue_approval(m: &serde_json::Value, i: usize) -> (String, String) {
    let r = &m["scenarios"]["queue"]["runs"][i];
    (
        r["id"].as_str().unwrap().into(),
        r["approvals"][0].as_str().unwrap().into(),
    )
}

#[test]
fn approve_from_the_console_binds_the_shown_hash() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (_, ap) = queue_approval(&m, 0);
    let mut h = harness(&db, "alice");
    h.command(&format!("approval {ap}"));
    h.keys("a");
    h.key(KeyCode::Enter);
    assert_eq!(
        row(&db, &ap),
        ("approved".into(), "alice".into(), String::new())
    );
    assert!(h.screen().contains("approved by alice"), "{}", h.screen());
    verify(&db);
}

#[test]
fn reject_from_the_console_records_the_reason_and_cancels_the_run() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (run, ap) = queue_approval(&m, 1);
    let mut h = harness(&db, "bob");
    h.command(&format!("approval {ap}"));
    h.keys("r");
    h.keys("wrong customer");
    h.key(KeyCode::Enter);
    assert_eq!(
        row(&db, &ap),
        ("rejected".into(), "bob".into(), "wrong customer".into())
    );
    let c = rusqlite::Connection::open(&db).unwrap();
    let st: String = c
        .query_row("SELECT status FROM runs WHERE id = ?1", [&run], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(st, "CANCELLED");
    verify(&db);
}

#[test]
fn a_changed_approval_is_refused_reloaded_and_flagged() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (_, ap) = queue_approval(&m, 2);
    let mut h = harness(&db, "alice");
    h.command(&format!("approval {ap}"));
    h.keys("a");
    // Another writer changes the row after it was rendered.
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute(
        "UPDATE approvals SET hash = ?1 WHERE id = ?2",
        [&"0".repeat(64), &ap],
    )
    .unwrap();
    h.key(KeyCode::Enter);
    assert_eq!(row(&db, &ap).0, "pending", "nothing was decided");
    let s = h.screen();
    assert!(s.contains("approval changed since you read it"), "{s}");
    assert!(s.contains("CHANGED"), "the reloaded view is flagged: {s}");
}

#[test]
fn two_consoles_the_second_gets_already_decided() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (_, ap) = queue_approval(&m, 3);
    let mut a = harness(&db, "alice");
    let mut b = harness(&db, "bob");
    for h in [&mut a, &mut b] {
        h.command(&format!("approval {ap}"));
        h.keys("a");
    }
    a.key(KeyCode::Enter);
    b.key(KeyCode::Enter);
    assert_eq!(
        row(&db, &ap),
        ("approved".into(), "alice".into(), String::new())
    );
    let s = b.screen();
    assert!(s.contains("already approved by alice"), "{s}");
    // The second console now shows the row as it is.
    let shown = match b.app.stack.last() {
        Some(Screen::Approval(s)) => s.row.as_ref().map(|r| r.status.as_str().to_string()),
        _ => None,
    };
    assert_eq!(shown.as_deref(), Some("approved"));
    verify(&db);
}

#[test]
fn cancel_from_run_detail_needs_a_reason_and_cancels() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "r", "running,damaged", &[]);
    for (scenario, by) in [("running", "carol"), ("damaged", "dave")] {
        let run = run_of(&m, scenario);
        let mut h = harness(&db, by);
        h.command(&format!("run {run}"));
        h.keys("x");
        h.key(KeyCode::Enter);
        assert!(h.commands.is_empty(), "no cancel without a reason");
        h.keys("stop it");
        h.key(KeyCode::Enter);
        let c = rusqlite::Connection::open(&db).unwrap();
        let (st, reason, detail): (String, String, String) = c
            .query_row(
                "SELECT status, reason, reason_detail FROM runs WHERE id = ?1",
                [&run],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(
            (st.as_str(), reason.as_str(), detail.as_str()),
            ("CANCELLED", "operator_cancelled", "stop it"),
            "{scenario}"
        );
        assert!(
            h.screen().contains(&format!("run cancelled by {by}")),
            "{}",
            h.screen()
        );
    }
    verify(&db);
}

fn run_status(db: &Path, run: &str) -> String {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("SELECT status FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .unwrap()
}

#[test]
fn deny_from_the_console_needs_a_note_binds_the_hash_and_interrupts_the_run() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (run, ap) = queue_approval(&m, 1);
    let mut h = harness(&db, "erin");
    h.command(&format!("approval {ap}"));
    h.keys("d");
    assert!(h.screen().contains("DENY WITH FEEDBACK"), "{}", h.screen());
    // No note: nothing is written and the dialog stays.
    h.key(KeyCode::Enter);
    assert!(h.commands.is_empty(), "no denial without a note");
    assert!(h.screen().contains("a note for the agent is required"));
    h.keys("refund 30.00, not 65.00");
    h.key(KeyCode::Enter);
    let shown = h.commands.iter().find_map(|c| match c {
        countersign::console::testing::Write::Deny { shown_hash, .. } => Some(shown_hash.clone()),
        _ => None,
    });
    let c = rusqlite::Connection::open(&db).unwrap();
    let hash: String = c
        .query_row("SELECT hash FROM approvals WHERE id = ?1", [&ap], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(
        shown.as_deref(),
        Some(hash.as_str()),
        "the shown hash is sent"
    );
    assert_eq!(
        row(&db, &ap),
        (
            "rejected".into(),
            "erin".into(),
            "refund 30.00, not 65.00".into()
        )
    );
    assert_eq!(run_status(&db, &run), "INTERRUPTED", "not cancelled");
    let summary: String = c
        .query_row(
            "SELECT json_extract(observation_json, '$.summary') FROM steps
             WHERE id = (SELECT step_id FROM approvals WHERE id = ?1)",
            [&ap],
            |r| r.get(0),
        )
        .unwrap();
    assert!(summary.contains("refund 30.00, not 65.00"), "{summary}");
    assert!(h.screen().contains("denied by erin"), "{}", h.screen());
    verify(&db);
}

#[test]
fn deny_of_a_changed_approval_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (run, ap) = queue_approval(&m, 2);
    let mut h = harness(&db, "erin");
    h.command(&format!("approval {ap}"));
    h.keys("d");
    h.keys("no");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute(
        "UPDATE approvals SET hash = ?1 WHERE id = ?2",
        [&"0".repeat(64), &ap],
    )
    .unwrap();
    h.key(KeyCode::Enter);
    assert_eq!(row(&db, &ap).0, "pending", "nothing was decided");
    assert_eq!(run_status(&db, &run), "WAITING_FOR_APPROVAL");
    assert!(h.screen().contains("approval changed since you read it"));
}
