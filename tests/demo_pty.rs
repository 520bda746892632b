//! Issue 7's promise, end to end in a real terminal: `countersign demo` opens the console on a
//! queue with waiting approvals; approving one there changes the order ledger exactly once,
//! with no second key (the worker beside the console resumes the run, issue 15 item 6);
//! rejecting the next with a reason records it; quitting gives the terminal back (main screen,
//! cursor shown, raw mode off).

mod pty_support;
mod support;

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

struct Term {
    parser: vt100::Parser,
    rx: Receiver<Vec<u8>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    /// A duplicate of the pty master: its termios is the terminal's (Linux shares one).
    tty: std::os::fd::OwnedFd,
}

impl Term {
    fn start(args: &[&str], home: &Path) -> Term {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 40,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("pty");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        cmd.env("COUNTERSIGN_BY", "alice");
        cmd.env("XDG_CONFIG_HOME", home);
        let child = pair.slave.spawn_command(cmd).expect("spawn");
        drop(pair.slave);
        let tty = pty_support::dup_master(pair.master.as_ref());
        let mut reader = pair.master.try_clone_reader().expect("reader");
        let writer = pair.master.take_writer().expect("writer");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let _keep = pair.master;
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
        Term {
            parser: vt100::Parser::new(
                std::num::NonZeroU16::new(40).expect("rows"),
                std::num::NonZeroU16::new(120).expect("cols"),
                0,
            ),
            rx,
            writer,
            child,
            tty,
        }
    }

    /// Raw mode: canonical input and echo both off.
    fn raw_mode(&self) -> bool {
        pty_support::raw_mode(&self.tty)
    }

    /// Reads output until the screen shows `text` (bounded, generous wait; no fixed sleeps).
    fn wait_text(&mut self, text: &str) {
        self.wait_screen(&[text], &[]);
    }

    /// Waits until every text of `all` is on the screen at once and none of `none` is, so that
    /// a text still left from the previous screen, or a row the console has not yet taken out
    /// of a list it is reloading, cannot stand for the screen awaited.
    fn wait_screen(&mut self, all: &[&str], none: &[&str]) {
        let text = format!("{all:?} and none of {none:?}");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let c = self.parser.screen().contents();
            if all.iter().all(|t| c.contains(t)) && !none.iter().any(|t| c.contains(t)) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "waiting for {text:?}; screen:\n{}",
                self.parser.screen().contents()
            );
            if let Ok(b) = self.rx.recv_timeout(left.min(Duration::from_millis(200))) {
                self.parser.process(&b);
            }
        }
    }

    fn send(&mut self, b: &[u8]) {
        self.writer.write_all(b).expect("type");
        self.writer.flush().expect("flush");
    }

    fn exit_code(&mut self) -> u32 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            while let Ok(b) = self.rx.try_recv() {
                self.parser.process(&b);
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                while let Ok(b) = self.rx.recv_timeout(Duration::from_millis(300)) {
                    self.parser.process(&b);
                }
                return st.exit_code();
            }
            assert!(Instant::now() < deadline, "the console did not exit");
            if let Ok(b) = self.rx.recv_timeout(Duration::from_millis(100)) {
                self.parser.process(&b);
            }
        }
    }
}

fn py(db: &Path, sql: &str) -> String {
    let o = Command::new("python3")
        .args(["-c", "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\nfor r in c.execute(sys.argv[2]): print('|'.join(str(x) for x in r))"])
        .arg(db)
        .arg(sql)
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn demo_opens_the_console_and_an_approved_resumed_refund_runs_once() {
    let dir = support::tempdir();
    let db = dir.path().join("demo.db");
    let backend = dir.path().join("demo.orders.db");
    let db_s = db.to_str().expect("utf8");
    // `demo` writes the queue and opens the console on it.
    let mut t = Term::start(&["--db", db_s, "demo"], dir.path());
    t.wait_text("Pending approvals");
    t.wait_text("issue_refund");
    t.send(b"q");
    assert_eq!(t.exit_code(), 0);
    // The oldest pending approval of a waiting run is the queue's first row.
    let run = py(
        &db,
        "select a.run_id from approvals a join runs r on r.id=a.run_id where a.status='pending' and r.status='WAITING_FOR_APPROVAL' order by a.rowid limit 1",
    );
    let count = |run: &str| {
        py(
            &backend,
            &format!("select count(*) from effects where session_id='{run}'"),
        )
    };
    let before = count(&run);
    // A second `demo` opens the same demo: approve the first row, then resume its run.
    let mut t = Term::start(&["--db", db_s, "demo"], dir.path());
    t.wait_text("Pending approvals");
    t.wait_text(&run[..4]);
    t.send(b"\r");
    t.wait_text("hash");
    t.send(b"a");
    t.wait_text("enter confirm");
    t.send(b"\r");
    t.wait_text("approved by alice");
    // No second key: the worker `demo` runs beside the console resumes the approved run.
    t.send(format!(":run {run}\r").as_bytes());
    t.wait_text(&format!("run {run}"));
    t.wait_screen(&["COMPLETED"], &["WAITING_FOR_APPROVAL"]);
    // Reject the next approval in the queue, with a reason.
    let next = py(
        &db,
        "select a.id || '|' || a.run_id from approvals a join runs r on r.id=a.run_id where a.status='pending' and r.status='WAITING_FOR_APPROVAL' order by a.rowid limit 1",
    );
    let (next, next_run) = next.split_once('|').expect("id|run");
    t.send(b":queue\r");
    // The approved run leaves the queue once the console has reloaded it; until then its row
    // may still be the first one.
    // (The queue shows a run as its first four and last three characters.)
    let short = |r: &str| format!("{}\u{2026}{}", &r[..4], &r[r.len() - 3..]);
    t.wait_screen(&["Pending approvals 1/", &short(next_run)], &[&short(&run)]);
    t.send(b"\r");
    t.wait_text("hash");
    assert!(t.raw_mode(), "the console runs in raw mode");
    t.send(b"r");
    t.wait_text("reason");
    t.send(b"wrong order");
    t.wait_text("wrong order");
    t.send(b"\r");
    t.wait_text("rejected by alice");
    t.send(b"\x03");
    assert_eq!(t.exit_code(), 0);
    let sc = t.parser.screen();
    assert!(!sc.alternate_screen(), "left the alternate screen");
    assert!(!sc.hide_cursor(), "cursor shown again");
    assert!(!t.raw_mode(), "raw mode off again");
    assert_eq!(
        py(
            &db,
            &format!(
                "select status || '|' || decided_by || '|' || note from approvals where id='{next}'"
            ),
        ),
        "rejected|alice|wrong order"
    );
    let after = count(&run);
    assert_eq!(
        after.parse::<i64>().expect("n"),
        before.parse::<i64>().expect("n") + 1,
        "exactly one effect for the approved request"
    );
    let (code, report) = support::verify(&db);
    assert_eq!(code, 0, "{report:#}");
}

/// Issue 15 in a real terminal: approve a refund and see it executed in its run's header
/// (opened by a prefix of its id), then deny the next with feedback and see the agent's next
/// step: the worker beside the console resumes the interrupted run and the agent, told the
/// note, ends without the call.
#[test]
fn demo_approve_see_it_executed_then_deny_with_feedback_and_see_the_agent_go_on() {
    let dir = support::tempdir();
    let db = dir.path().join("demo.db");
    let db_s = db.to_str().expect("utf8");
    let mut t = Term::start(&["--db", db_s, "demo"], dir.path());
    t.wait_text("Pending approvals");
    t.wait_text("issue_refund");
    let first = py(
        &db,
        "select a.run_id from approvals a join runs r on r.id=a.run_id where a.status='pending' and r.status='WAITING_FOR_APPROVAL' order by a.rowid limit 1",
    );
    t.send(b"\r");
    t.wait_text("hash");
    t.send(b"a");
    t.wait_text("enter confirm");
    t.send(b"\r");
    t.wait_text("approved by alice");
    // A prefix of the id is enough; the header says what became of the call.
    t.send(format!(":run {}\r", &first[..8]).as_bytes());
    t.wait_text(&format!("run {first}"));
    t.wait_screen(&["COMPLETED", "call executed: "], &["WAITING_FOR_APPROVAL"]);
    // Deny the next with feedback.
    let next = py(
        &db,
        "select a.id || '|' || a.run_id from approvals a join runs r on r.id=a.run_id where a.status='pending' and r.status='WAITING_FOR_APPROVAL' order by a.rowid limit 1",
    );
    let (next, next_run) = next.split_once('|').expect("id|run");
    t.send(format!(":approval {next}\r").as_bytes());
    t.wait_text("hash");
    t.send(b"d");
    t.wait_text("DENY WITH FEEDBACK");
    t.send(b"refund 30.00, not the full amount");
    t.wait_text("not the full amount");
    t.send(b"\r");
    t.wait_text("denied by alice");
    t.send(format!(":run {next_run}\r").as_bytes());
    t.wait_text(&format!("run {next_run}"));
    // The worker resumed it: the agent was told the note and ended without the call.
    t.wait_screen(
        &[
            "COMPLETED",
            "call denied with feedback: refund 30.00, not the full amount",
            "complete",
        ],
        &["INTERRUPTED"],
    );
    t.send(b"\x03");
    assert_eq!(t.exit_code(), 0);
    assert_eq!(
        py(
            &db,
            &format!("select status || '|' || note from approvals where id='{next}'"),
        ),
        "rejected|refund 30.00, not the full amount"
    );
    let answer = py(
        &db,
        &format!(
            "select decision_json from steps where run_id='{next_run}' order by idx desc limit 1"
        ),
    );
    assert!(
        answer.contains("Not done: a reviewer declined")
            && answer.contains("refund 30.00, not the full amount"),
        "{answer}"
    );
    let (code, report) = support::verify(&db);
    assert_eq!(code, 0, "{report:#}");
}
