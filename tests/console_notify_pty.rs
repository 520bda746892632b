//! Issue 21: with `[queue] notify` set, the terminal the console runs in is sent one
//! notification when an approval arrives while it is open, and none for the queue it opened
//! on. Read from the bytes the real binary writes to a pseudo-terminal.

mod pty_support;
mod support;

use portable_pty::CommandBuilder;
use pty_support::session::Session;

/// Adds a pending approval: a copy of the first one under a new id, by another process.
fn add_approval(db: &std::path::Path) {
    let o = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\n\
             c.execute(\"create temp table t as select * from approvals where status='pending' limit 1\")\n\
             c.execute(\"update t set id='appr_new_'||id\")\n\
             c.execute('insert into approvals select * from t')\nc.commit()",
        ])
        .arg(db)
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn count(raw: &[u8], needle: &[u8]) -> usize {
    raw.windows(needle.len()).filter(|w| *w == needle).count()
}

#[test]
fn an_arrival_sends_one_osc_9_and_the_queue_it_opened_on_none() {
    let dir = support::tempdir();
    let db = dir.path().join("n.db");
    support::fixture(&db, &["--scenario", "queue", "--base-time", "now"]);
    let conf = dir.path().join("countersign");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(conf.join("config.toml"), "[queue]\nnotify = \"osc9\"\n").unwrap();
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
    cmd.args(["--read-only", "--db"]);
    cmd.arg(&db);
    cmd.env("TERM", "xterm-256color");
    cmd.env("XDG_CONFIG_HOME", dir.path());
    let mut s = Session::start(cmd, 24, 100);
    s.wait_text("pending 5");
    assert_eq!(count(&s.raw, b"\x1b]9;"), 0, "nothing for the initial load");
    add_approval(&db);
    s.wait("the header's new count", |sc, _| {
        sc.contents().contains("pending 6")
    });
    let want = b"\x1b]9;countersign: a new approval is waiting (6 pending)\x07";
    s.wait("the notification", |_, raw| count(raw, want) == 1);
    assert_eq!(
        count(&s.raw, b"\x1b]9;"),
        1,
        "one notification, and only that one"
    );
    assert_eq!(count(&s.raw, b"\x07"), 1, "no other bell or OSC end");
    s.send(b"q");
    assert_eq!(s.finish(), 0);
}
