//! A bulk reject in the real console in a pseudo-terminal (issue 21): three queue rows marked,
//! the confirmation opened, one of them approved by another reviewer in another process, then
//! the reject confirmed. The terminal shows the two rejected and the third skipped by name
//! with why; the database keeps the other reviewer's decision and verifies.

mod console_support;
mod pty_support;

use std::path::Path;
use std::process::{Command, Stdio};

use console_support::*;
use portable_pty::CommandBuilder;
use pty_support::session::Session;

fn approval(db: &Path, id: &str) -> (String, String, String) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(
        "SELECT status, decided_by, note FROM approvals WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

#[test]
fn a_bulk_reject_in_a_terminal_skips_the_row_another_reviewer_decided_and_names_it() {
    let d = tempfile::tempdir().unwrap();
    // Fresh approvals (base time now) so the wall clock finds them unexpired.
    let (db, m) = fixture(d.path(), "bulk", "queue", &["--base-time", "now"]);
    let ids: Vec<(String, String)> = (0..5)
        .map(|i| {
            let r = &m["scenarios"]["queue"]["runs"][i];
            (
                r["id"].as_str().unwrap().to_string(),
                r["approvals"][0].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let cfg = tempfile::tempdir().unwrap();
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
    cmd.arg("--db");
    cmd.arg(&db);
    cmd.env("TERM", "xterm-256color");
    cmd.env("COUNTERSIGN_BY", "lead");
    cmd.env("XDG_CONFIG_HOME", cfg.path());
    let mut t = Session::start(cmd, 24, 80);
    t.wait_text("Pending approvals 1/5");
    t.send(b" j j ");
    t.wait_text("marked 3");
    t.send(b"r");
    t.wait_text("REJECT 3 MARKED");
    // Another reviewer approves the second marked row, in another process.
    let (run, ap) = &ids[1];
    let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["--db"])
        .arg(&db)
        .args(["approve", run, "--approval", ap, "--by", "ana"])
        .env_remove("COUNTERSIGN_BY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    t.send(b"bad deploy\r");
    // The whole result, waited for as one screen (a frame may arrive in several reads).
    let want = [
        "rejected 2, skipped 1".to_string(),
        format!("approval {ap}"),
        "decided meanwhile: already approved by ana".to_string(),
        ids[0].1.clone(),
        ids[2].1.clone(),
    ];
    t.wait("the result naming the skipped row and why", move |sc, _| {
        let screen = sc.contents();
        want.iter().all(|w| screen.contains(w.as_str()))
    });
    t.send(b"\x1b");
    t.wait("the result closed", |sc, _| {
        !sc.contents().contains("BULK RESULT")
    });
    t.send(b"q");
    assert_eq!(t.finish(), 0);
    assert!(
        !t.parser.screen().alternate_screen(),
        "left the alternate screen"
    );
    assert!(!t.raw_mode(), "raw mode off again");
    assert_eq!(
        approval(&db, &ids[0].1),
        ("rejected".into(), "lead".into(), "bad deploy".into())
    );
    assert_eq!(approval(&db, ap).0, "approved", "ana's decision stands");
    assert_eq!(approval(&db, &ids[2].1).0, "rejected");
    assert_eq!(
        approval(&db, &ids[3].1).0,
        "pending",
        "unmarked rows are left"
    );
    let out = Command::new("python3")
        .arg(shared_dir().join("tools/agentrt_verify.py"))
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
