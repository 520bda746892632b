//! The real binary's console on PostgreSQL in a pseudo-terminal (issue 19): `--db
//! postgres://…` opens it, and a decision another reviewer makes in another process appears
//! once a sequencer chains its events (the sequencer's NOTIFY), with no key pressed; the
//! password in the URL never reaches the screen.

mod console_support;
mod pg_support;
mod pty_support;

use std::process::{Command, Stdio};

use countersign::pgstore::copy::{Endpoint, copy};
use portable_pty::CommandBuilder;
use pty_support::session::Session;

#[test]
fn pg_console_in_a_terminal_reloads_when_a_sequencer_notifies() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let (sqlite, m) = console_support::fixture(d.path(), "q", "queue", &["--base-time", "now"]);
    copy(&Endpoint::Sqlite(sqlite), &Endpoint::Pg(db.pg_url())).expect("copy");
    let url = db.url.replacen("@", ":s3cret-pw@", 1);
    let cfg = tempfile::tempdir().unwrap();
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
    cmd.arg("--db");
    cmd.arg(&url);
    cmd.env("TERM", "xterm-256color");
    cmd.env("COUNTERSIGN_BY", "lead");
    cmd.env("XDG_CONFIG_HOME", cfg.path());
    cmd.env_remove("COUNTERSIGN_DB");
    let mut t = Session::start(cmd, 24, 100);
    t.wait_text("Pending approvals 1/5");
    // Another reviewer approves one, in another process: its events wait in the inbox.
    let r = &m["scenarios"]["queue"]["runs"][2];
    let (run, ap) = (
        r["id"].as_str().unwrap(),
        r["approvals"][0].as_str().unwrap(),
    );
    let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args([
            "--db",
            &db.url,
            "approve",
            run,
            "--approval",
            ap,
            "--by",
            "ana",
        ])
        .env_remove("COUNTERSIGN_DB")
        .env_remove("COUNTERSIGN_BY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A sequencer chains them and notifies: the console reloads by itself.
    let mut store = countersign::pgstore::PgStore::open_existing(&db.pg_url()).unwrap();
    assert!(store.sequence_all().unwrap() > 0);
    t.wait_text("Pending approvals 1/4");
    assert!(!String::from_utf8_lossy(&t.raw).contains("s3cret-pw"));
    t.send(b"q");
    assert_eq!(t.finish(), 0);
}
