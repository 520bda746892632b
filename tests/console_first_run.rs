//! What a new user meets, in a real terminal (issue 16 part 2): with no name anywhere the
//! console still opens, read-only; the demo says where it is writing before the console opens.

mod pty_support;
mod support;

use std::os::unix::fs::PermissionsExt;

use portable_pty::CommandBuilder;
use pty_support::session::Session;

fn root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A uid with no passwd entry (checked), so no account name can be found for it.
const NAMELESS: u32 = 54_321;

#[test]
fn with_no_name_at_all_the_console_opens_read_only() {
    if !root() {
        eprintln!("not root; skipped (needs setpriv to a uid without a passwd entry)");
        return;
    }
    let known = std::process::Command::new("getent")
        .args(["passwd", &NAMELESS.to_string()])
        .status()
        .expect("getent");
    assert!(!known.success(), "uid {NAMELESS} has a passwd entry here");
    let dir = support::tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = dir.path().join("r.db");
    support::fixture(&db, &["--scenario", "queue", "--base-time", "now"]);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(NAMELESS), Some(NAMELESS)).unwrap();

    let mut cmd = CommandBuilder::new("setpriv");
    cmd.args([
        &format!("--reuid={NAMELESS}"),
        &format!("--regid={NAMELESS}"),
        "--clear-groups",
        "--",
        env!("CARGO_BIN_EXE_countersign"),
        "--db",
    ]);
    cmd.arg(&db);
    cmd.env_clear();
    cmd.env("TERM", "xterm-256color");
    cmd.env("HOME", &home);
    cmd.env("XDG_CONFIG_HOME", &home);
    cmd.env("PATH", "/usr/bin:/bin");
    let mut s = Session::start(cmd, 24, 100);
    s.wait_text("READ-ONLY");
    let screen = s.parser.screen().contents();
    assert!(screen.contains("RO actions off"), "{screen}");
    assert!(!screen.contains("no operator name"), "{screen}");
    // Approving is not offered: `a` on the queue changes nothing.
    s.send(b"a");
    s.send(b"q");
    assert_eq!(s.finish(), 0, "{}", s.parser.screen().contents());
    let o = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\nprint(c.execute(\"select count(*) from approvals where status='pending'\").fetchone()[0])",
        ])
        .arg(&db)
        .output()
        .expect("python3");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "5");
}

#[test]
fn the_demo_says_where_it_writes_before_the_console_opens() {
    let dir = support::tempdir();
    let db = dir.path().join("demo.db");
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
    cmd.arg("demo");
    cmd.arg("--db");
    cmd.arg(&db);
    cmd.env("TERM", "xterm-256color");
    cmd.env("COUNTERSIGN_BY", "ana");
    cmd.env("XDG_CONFIG_HOME", dir.path());
    let mut s = Session::start(cmd, 24, 100);
    s.wait("the console", |_, raw| {
        raw.windows(8).any(|w| w == b"\x1b[?1049h")
    });
    let raw = String::from_utf8_lossy(&s.raw).into_owned();
    let said = raw
        .find(&format!("writing the demo to {}", db.display()))
        .unwrap_or_else(|| panic!("the demo says where it writes: {raw:?}"));
    let opened = raw.find("\x1b[?1049h").expect("alternate screen");
    assert!(said < opened, "said before the console opened: {raw:?}");
    assert!(s.raw_mode(), "the console took the terminal");
    s.send(b"q");
    assert_eq!(s.finish(), 0);
    assert!(!s.raw_mode(), "and gave it back");
}

/// A console told to end by a signal (SIGTERM from `kill`, `timeout` or a supervisor; SIGINT
/// from `kill`; SIGHUP) gives the terminal back first: raw mode off, the alternate screen
/// left, the cursor shown; and exits with 128 + the signal's number.
#[test]
fn a_console_ended_by_a_signal_gives_the_terminal_back() {
    let dir = support::tempdir();
    let db = dir.path().join("runs.db");
    support::fixture(&db, &["--scenario", "queue"]);
    for (sig, name) in [
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
        cmd.arg("--db");
        cmd.arg(&db);
        cmd.env("TERM", "xterm-256color");
        cmd.env("COUNTERSIGN_BY", "ana");
        cmd.env("XDG_CONFIG_HOME", dir.path());
        cmd.env_remove("COUNTERSIGN_DB");
        let mut s = Session::start(cmd, 24, 100);
        s.wait("the console", |_, raw| {
            raw.windows(8).any(|w| w == b"\x1b[?1049h")
        });
        s.wait_text("Pending approvals");
        assert!(s.raw_mode(), "{name}: the console took the terminal");
        let pid = s.pid().expect("a pid") as libc::pid_t;
        // SAFETY: kill only signals the child this test started.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        assert_eq!(s.finish(), 128 + sig as u32, "{name}");
        assert!(!s.raw_mode(), "{name}: raw mode off again");
        let raw = &s.raw;
        let entered = raw.windows(8).rposition(|w| w == b"\x1b[?1049h").unwrap();
        let left = raw.windows(8).rposition(|w| w == b"\x1b[?1049l");
        assert!(
            left.is_some_and(|l| l > entered),
            "{name}: alternate screen left"
        );
        let shown = raw.windows(6).rposition(|w| w == b"\x1b[?25h");
        assert!(shown.is_some_and(|c| c > entered), "{name}: cursor shown");
    }
}
