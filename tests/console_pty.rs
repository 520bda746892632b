//! The real binary's console in a pseudo-terminal: every byte it writes goes through a terminal parser
//! (vt100), which records anything that would change the terminal's state outside the frame.

mod console_support;
mod pty_support;
mod support;

use std::io::{Read, Write};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use console_support::*;
use portable_pty::{CommandBuilder, PtySize, native_pty_system};

#[derive(Default)]
struct Recorder {
    titles: usize,
    clipboard: Vec<Vec<u8>>,
    clipboard_reads: usize,
    bells: usize,
    other_osc: usize,
}

impl vt100::Callbacks for Recorder {
    fn set_window_title(&mut self, _: &mut vt100::Screen, _: &[u8]) {
        self.titles += 1;
    }
    fn set_window_icon_name(&mut self, _: &mut vt100::Screen, _: &[u8]) {
        self.titles += 1;
    }
    fn copy_to_clipboard(&mut self, _: &mut vt100::Screen, _: &[u8], data: &[u8]) {
        self.clipboard.push(data.to_vec());
    }
    fn paste_from_clipboard(&mut self, _: &mut vt100::Screen, _: &[u8]) {
        self.clipboard_reads += 1;
    }
    fn audible_bell(&mut self, _: &mut vt100::Screen) {
        self.bells += 1;
    }
    fn unhandled_osc(&mut self, _: &mut vt100::Screen, _: &[&[u8]]) {
        self.other_osc += 1;
    }
}

struct Pty {
    parser: vt100::Parser<Recorder>,
    rx: Receiver<Vec<u8>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    /// Every byte the program wrote.
    raw: Vec<u8>,
    /// A duplicate of the pty master, to read the line discipline's flags (Linux shares one
    /// termios between master and slave): raw mode is ICANON and ECHO off.
    tty: std::os::fd::OwnedFd,
    _dir: tempfile::TempDir,
}

impl Pty {
    fn start(db: &std::path::Path, extra: &[&str]) -> Pty {
        Self::start_as(db, extra, "pty-tester")
    }

    fn start_as(db: &std::path::Path, extra: &[&str], by: &str) -> Pty {
        Self::start_env(db, extra, by, &[])
    }

    fn start_env(db: &std::path::Path, extra: &[&str], by: &str, envs: &[(&str, &str)]) -> Pty {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 80,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
        cmd.arg("--db");
        cmd.arg(db);
        for a in extra {
            cmd.arg(a);
        }
        cmd.env("TERM", "xterm-256color");
        cmd.env("COUNTERSIGN_BY", by);
        cmd.env("XDG_CONFIG_HOME", dir.path());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let tty = pty_support::dup_master(pair.master.as_ref());
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let _keep = pair.master;
            let mut buf = [0u8; 8192];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Pty {
            parser: vt100::Parser::new_with_callbacks(
                std::num::NonZeroU16::new(24).unwrap(),
                std::num::NonZeroU16::new(80).unwrap(),
                0,
                Recorder::default(),
            ),
            rx,
            writer,
            child,
            raw: Vec::new(),
            tty,
            _dir: dir,
        }
    }

    /// Feeds output to the parser until `pred` holds on the screen (bounded, generous wait).
    fn wait(&mut self, what: &str, pred: impl Fn(&vt100::Screen) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !pred(self.parser.screen()) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "waiting for {what}; screen:\n{}",
                self.parser.screen().contents()
            );
            if let Ok(b) = self.rx.recv_timeout(left.min(Duration::from_millis(200))) {
                self.parser.process(&b);
                self.raw.extend_from_slice(&b);
            }
        }
    }

    /// Whether the terminal is in raw mode now (canonical input and echo both off).
    fn raw_mode(&self) -> bool {
        pty_support::raw_mode(&self.tty)
    }

    /// The terminal is as the console found it: main screen, cursor shown, cooked mode,
    /// bracketed paste and mouse off.
    fn assert_restored(&self) {
        let sc = self.parser.screen();
        assert!(!sc.alternate_screen(), "left the alternate screen");
        assert!(!sc.hide_cursor(), "cursor shown again");
        assert!(!sc.bracketed_paste(), "bracketed paste off again");
        assert_eq!(
            sc.mouse_protocol_mode(),
            vt100::MouseProtocolMode::None,
            "mouse off"
        );
        assert!(!self.raw_mode(), "raw mode off again");
    }

    fn wait_text(&mut self, s: &str) {
        let s2 = s.to_string();
        self.wait(s, move |sc| sc.contents().contains(&s2));
    }

    fn send(&mut self, b: &[u8]) {
        self.writer.write_all(b).unwrap();
        self.writer.flush().unwrap();
    }

    /// Waits for the process to end, reading what it still writes.
    fn finish(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            while let Ok(b) = self.rx.try_recv() {
                self.parser.process(&b);
                self.raw.extend_from_slice(&b);
            }
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            assert!(Instant::now() < deadline, "the console did not exit");
            if let Ok(b) = self.rx.recv_timeout(Duration::from_millis(100)) {
                self.parser.process(&b);
                self.raw.extend_from_slice(&b);
            }
        }
        while let Ok(b) = self.rx.recv_timeout(Duration::from_millis(300)) {
            self.parser.process(&b);
            self.raw.extend_from_slice(&b);
        }
    }
}

/// Past the decision page to the raw fields: once the page's context is drawn, one screen
/// down (ctrl-f).
fn to_raw_fields(p: &mut Pty) {
    p.wait_text("agent's reason");
    p.send(b"\x06");
}

#[test]
fn console_in_a_pty_shows_hostile_text_inert_and_restores_the_terminal() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "pty", "hostile,queue,damaged", &[]);
    let mut p = Pty::start(&db, &[]);
    p.wait_text("Pending approvals");
    assert!(
        p.parser.screen().alternate_screen(),
        "the console draws on the alternate screen"
    );
    assert!(p.raw_mode(), "the console runs in raw mode");
    assert!(
        p.parser.screen().bracketed_paste(),
        "bracketed paste is on while it runs"
    );
    assert_eq!(
        p.parser.screen().mouse_protocol_mode(),
        vt100::MouseProtocolMode::None,
        "mouse is off"
    );

    p.send(format!(":approval {}\r", approval_of(&m, "hostile")).as_bytes());
    to_raw_fields(&mut p);
    p.wait_text("args.reason");
    // The frame may arrive in pieces: wait for the value lines too.
    p.wait_text("\\u{202e}evil");
    let screen = p.parser.screen().contents();
    assert!(
        screen.contains("\\x1b[2J"),
        "the ESC of the hostile value is shown escaped:\n{screen}"
    );
    assert!(
        screen.contains("\\u{202e}evil"),
        "the bidi override is shown escaped:\n{screen}"
    );
    assert!(!screen.contains("APPROVED ✓"), "{screen}");

    // Approve opens a confirmation; esc leaves everything as it was.
    p.send(b"a");
    p.wait_text("enter confirms");
    p.send(b"\x1b");
    p.wait_text("nothing was changed");

    // Copy the hostile field: the clipboard gets the escaped form, never the raw bytes. From
    // the top, past the decision page's 11 fields to the argument.
    p.send(b"g");
    for _ in 0..11 + 11 {
        p.send(b"j");
    }
    p.send(b"y");
    p.wait_text("copied (escaped form)");

    // ctrl-c quits from anywhere; the terminal is given back.
    p.send(b"\x03");
    p.finish();
    p.assert_restored();
    let cb = p.parser.callbacks();
    assert_eq!(cb.titles, 0, "no title was set");
    assert_eq!(cb.clipboard.len(), 1, "one copy, the one asked for");
    use base64::Engine;
    let copied = base64::engine::general_purpose::STANDARD
        .decode(&cb.clipboard[0])
        .unwrap();
    let copied = String::from_utf8(copied).unwrap();
    // The bare value, never its label (issue 15 item 8).
    assert!(copied.starts_with("damaged\\r"), "{copied}");
    assert!(!copied.contains("args.reason"), "{copied}");
    assert!(copied.contains("\\x1b[2J"), "{copied}");
    assert!(
        !copied.chars().any(|c| c.is_control()),
        "no control character on the clipboard: {copied:?}"
    );
    assert_eq!(cb.clipboard_reads, 0, "nothing asked for the clipboard");
    assert_eq!(cb.bells, 0, "no bell rang");
    assert_eq!(
        cb.other_osc, 0,
        "no other OSC sequence reached the terminal"
    );
}

#[test]
fn console_in_a_pty_read_only_says_actions_are_off() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "ro", "waiting", &[]);
    let mut p = Pty::start(&db, &["--read-only", "--mouse"]);
    p.wait_text("READ-ONLY");
    assert_ne!(
        p.parser.screen().mouse_protocol_mode(),
        vt100::MouseProtocolMode::None,
        "mouse on when asked"
    );
    p.send(format!(":approval {}\r", approval_of(&m, "waiting")).as_bytes());
    to_raw_fields(&mut p);
    p.wait_text("args.order_id");
    p.send(b"a");
    p.wait_text("read-only: actions are off");
    // ctrl-z: the console gives the terminal back and stops (a pty child's orphaned process
    // group ignores the stop), then takes it again and redraws: it keeps working.
    let mark = p.raw.len();
    p.send(b"\x1a");
    p.send(b"?");
    p.wait_text("Keys");
    let after = &p.raw[mark..];
    let leave = after
        .windows(8)
        .position(|w| w == b"\x1b[?1049l")
        .expect("left the alternate screen on ctrl-z");
    assert!(
        after[leave..].windows(8).any(|w| w == b"\x1b[?1049h"),
        "and entered it again"
    );
    assert!(
        p.parser.screen().alternate_screen(),
        "back on the alternate screen after suspend"
    );
    p.send(b"\x03");
    p.finish();
    p.assert_restored();
}

#[test]
fn two_consoles_on_one_database_see_each_others_decisions() {
    let d = tempfile::tempdir().unwrap();
    // Fresh approvals (base time now) so the wall clock finds them unexpired.
    let (db, m) = fixture(d.path(), "two", "queue", &["--base-time", "now"]);
    let ap = approval_of(&m, "queue");
    let mut a = Pty::start_as(&db, &[], "alice");
    let mut b = Pty::start_as(&db, &[], "bob");
    for p in [&mut a, &mut b] {
        p.wait_text("Pending approvals 1/5");
        p.send(format!(":approval {ap}\r").as_bytes());
        p.wait_text("presentation");
    }
    b.send(b"a");
    b.wait_text("enter confirms");
    a.send(b"a");
    a.wait_text("enter confirms");
    a.send(b"\r");
    a.wait_text("approved by alice");
    // The second console follows the database (data_version poll, about once a second): its
    // header count drops while its confirmation is still open.
    b.wait_text("pending 4");
    b.send(b"\r");
    b.wait_text("already approved by alice");
    a.send(b"\x03");
    b.send(b"\x03");
    a.finish();
    b.finish();
    a.assert_restored();
    b.assert_restored();
    let log = std::fs::read_to_string(a._dir.path().join("countersign/console.log")).unwrap();
    assert!(
        log.contains("command") && log.contains("by alice"),
        "decisions are logged to the file: {log}"
    );
    let c = rusqlite::Connection::open(&db).unwrap();
    let (st, by): (String, String) = c
        .query_row(
            "SELECT status, decided_by FROM approvals WHERE id = ?1",
            [&ap],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((st.as_str(), by.as_str()), ("approved", "alice"));
}

/// Waits for the child to end and returns its exit code.
fn exit_code(p: &mut Pty) -> u32 {
    p.finish();
    p.child.wait().expect("exit status").exit_code()
}

#[test]
fn a_panic_on_the_ui_thread_restores_the_terminal_and_says_one_line() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "panic", "waiting", &[]);
    let mut p = Pty::start_env(&db, &[], "pty-tester", &[("COUNTERSIGN_TEST_PANIC", "ui")]);
    let code = exit_code(&mut p);
    assert_ne!(code, 0, "a panic is a failure");
    p.assert_restored();
    let out = String::from_utf8_lossy(&p.raw).into_owned();
    assert!(out.contains("countersign: internal error at "), "{out}");
    assert!(
        !out.contains("fault injected"),
        "the panic's text (which could quote data) stays in the log: {out}"
    );
}

#[test]
fn a_panic_on_the_database_thread_ends_the_console_cleanly() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "wpanic", "waiting", &[]);
    let mut p = Pty::start_env(
        &db,
        &[],
        "pty-tester",
        &[("COUNTERSIGN_TEST_PANIC", "worker")],
    );
    let code = exit_code(&mut p);
    assert_eq!(code, 1, "refused or failed");
    p.assert_restored();
    let out = String::from_utf8_lossy(&p.raw).into_owned();
    assert!(out.contains("database thread stopped"), "{out}");
}

#[test]
fn a_caught_panic_on_another_thread_leaves_the_console_running() {
    // As a tool's panic during a background resume is: the runtime catches it and refuses the
    // step; the console must not give the terminal back under itself.
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "cpanic", "waiting", &[]);
    let mut p = Pty::start_env(
        &db,
        &[],
        "pty-tester",
        &[("COUNTERSIGN_TEST_PANIC", "caught")],
    );
    p.wait_text("Pending approvals");
    p.send(b"?");
    p.wait_text("Keys");
    assert!(
        p.parser.screen().alternate_screen(),
        "still on the alternate screen"
    );
    assert!(p.raw_mode(), "still in raw mode");
    p.send(b"\x03");
    assert_eq!(exit_code(&mut p), 0);
    p.assert_restored();
}

/// Issue 14, item 3: characters a widget or a terminal would drop or draw as nothing (Hangul
/// conjoining vowels and finals with no syllable to join, code points newer than the width
/// tables of terminals in use such as U+1FAE9) reach the terminal as `\u{...}` escapes, with a
/// badge, in the queue and in the approval detail: checked on the bytes the pty got.
#[test]
fn console_in_a_pty_escapes_what_a_terminal_would_draw_as_nothing() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "blank", "waiting", &[]);
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "UPDATE approvals SET request_json = replace(replace(request_json, '\"issue_refund\"', \
         '\"\u{1fae9}\u{1fae9}\u{1fae9}\u{1fae9}\u{1fae9}\u{1fae9}\"'), 'ord_1004', 'ord_10\u{1161}\u{11a8}04');
         UPDATE runs SET goal = replace(goal, 'ord_1004', 'ord_10\u{1161}\u{11a8}04');",
    )
    .unwrap();
    drop(c);
    let mut p = Pty::start(&db, &[]);
    p.wait_text("Pending approvals");
    // The queue's tool column is too narrow for six escapes: it shows a cut marker, not blank.
    p.wait_text("…[+24]…");
    p.send(format!(":approval {}\r", approval_of(&m, "waiting")).as_bytes());
    // The page's title line names the tool (the presentation gives no title), escaped.
    p.wait_text("agent's reason");
    let detail = p.parser.screen().contents();
    assert!(
        detail.contains("\\u{1fae9}\\u{1fae9}\\u{1fae9}\\u{1fae9}\\u{1fae9}\\u{1fae9}"),
        "the tool name is six escapes, not blank:\n{detail}"
    );
    assert!(
        detail.contains("[INVISIBLE]"),
        "the escaped field is badged:\n{detail}"
    );
    to_raw_fields(&mut p);
    p.wait_text("args.order_id");
    p.wait_text("ord_10\\u{1161}\\u{11a8}04");
    p.send(b"\x03");
    p.finish();
    p.assert_restored();
    let raw = String::from_utf8_lossy(&p.raw);
    for c in ['\u{1161}', '\u{11a8}', '\u{1fae9}'] {
        assert!(
            !raw.contains(c),
            "U+{:04X} itself was written to the terminal",
            c as u32
        );
    }
}

/// The console's peak resident set so far (`VmHWM`, KiB) while it still runs.
fn peak_kib(p: &Pty) -> i64 {
    let pid = p.child.process_id().expect("pid");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// Issue 14 item 6: a request of 120 MB (written by Python, so this process never holds it)
/// is read by the console only to what it shows: the queue, the approval detail, the run
/// detail and a refused reject keep the console under 64 MiB, and the detail says the
/// arguments were not shown.
#[test]
fn a_huge_request_is_never_read_whole_by_the_console() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "huge", "waiting", &[]);
    let run = run_of(&m, "waiting");
    let script = "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\n\
        c.execute(\"UPDATE approvals SET request_json = json_set(request_json, '$.args.blob', \
        replace(hex(zeroblob(60000000)), '0', 'x')) WHERE run_id = ?\", (sys.argv[2],))\n\
        c.commit()\nprint(c.execute('SELECT length(request_json) FROM approvals WHERE run_id = ?', (sys.argv[2],)).fetchone()[0])";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&db)
        .arg(&run)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let len: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(len > 120_000_000, "the request really is huge: {len}");
    let mut p = Pty::start(&db, &[]);
    p.wait_text("Pending approvals");
    p.wait_text("issue_refund");
    p.send(format!(":approval {}\r", approval_of(&m, "waiting")).as_bytes());
    to_raw_fields(&mut p);
    p.wait_text("NOT SHOWN");
    p.wait_text("none of its arguments");
    let detail = p.parser.screen().contents();
    assert!(
        detail.contains(&format!("the request is {len} bytes")),
        "the detail names the request's size:\n{detail}"
    );
    assert!(
        !detail.contains("truncated") && !detail.contains("args.length"),
        "the store's stand-in is never shown as arguments:\n{detail}"
    );
    assert!(
        !detail.contains("DAMAGED"),
        "a large request is not called damaged:\n{detail}"
    );
    // Nothing is decided on arguments that were not shown: both keys say so, nothing asks.
    p.send(b"a");
    p.wait_text("not decidable here");
    p.send(b"r");
    p.wait_text("not decidable here");
    let peak = peak_kib(&p);
    assert!(peak < 64 * 1024, "the console peaked at {peak} KiB");
    p.send(format!(":run {run}\r").as_bytes());
    p.wait_text("awaiting_approval");
    let peak = peak_kib(&p);
    assert!(
        peak < 64 * 1024,
        "the console peaked at {peak} KiB in the run"
    );
    // The way out it names: cancel the run, within the same bound (a cancel leaves the
    // approval row, and so its request, as it is).
    p.send(b"x");
    p.send(b"too large to review");
    p.send(b"\r");
    p.wait_text("run cancelled by");
    let peak = peak_kib(&p);
    assert!(
        peak < 64 * 1024,
        "the console peaked at {peak} KiB cancelling"
    );
    p.send(b"\x03");
    p.finish();
    p.assert_restored();
}

/// Issue 14 item 5 for ids: two waiting runs whose ids differ only in a byte that is not UTF-8
/// (`t-\xff`, `t-\xfe`). On the bytes the terminal got, the queue, the approval detail, its
/// confirmation, the runs list, the run header and the cancel confirmation show `\xNN`, never
/// U+FFFD; approving the second row approves that run's approval only, and cancelling from its
/// run header cancels that run only.
#[test]
fn ids_that_are_not_utf8_are_shown_as_bytes_and_decided_exactly() {
    use countersign::runtime::store::Store;
    use support::{hostile, runs};
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("ids.db");
    let store = Store::open(&db).unwrap();
    let now = countersign::runtime::types::Timestamp::now();
    for (i, id) in ["p0", "p1"].iter().enumerate() {
        runs::create(&store, id, &format!("goal {i}"), now);
        runs::pause_step(&store, id, &format!("s-{i}"), &format!("a-{i}"), 0, now);
    }
    drop(store);
    hostile::rekey_run(&db, "p0", hostile::NOT_UTF8[0]);
    hostile::rekey_run(&db, "p1", hostile::NOT_UTF8[1]);
    let status = |approval: &str| -> (String, String) {
        rusqlite::Connection::open(&db)
            .unwrap()
            .query_row(
                "SELECT a.status, r.status FROM approvals a JOIN runs r ON r.id = a.run_id WHERE a.id = ?1",
                [approval],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
    };
    let mut p = Pty::start_as(&db, &[], "alice");
    p.wait_text("Pending approvals 1/2");
    p.wait_text(r"t-\xff");
    p.wait_text(r"t-\xfe");
    // The second row (oldest first) is t-\xfe's approval.
    p.send(b"j\r");
    p.wait_text("presentation");
    p.wait_text(r"t-\xfe");
    assert!(!p.parser.screen().contents().contains(r"t-\xff"));
    p.send(b"a");
    p.wait_text("enter confirms");
    assert!(p.parser.screen().contents().contains(r"t-\xfe"));
    p.send(b"\r");
    p.wait_text("approved by alice");
    assert_eq!(status("a-1").0, "approved");
    assert_eq!(status("a-0").0, "pending");
    // The runs list, newest first: t-\xfe, then t-\xff; open t-\xff's header and cancel it.
    p.send(b"2");
    p.wait_text("goal 0");
    p.send(b"j\r");
    p.wait(r"the run header of t-\xff", |s| {
        s.contents().contains("goal 0") && !s.contents().contains("goal 1")
    });
    p.send(b"x");
    p.wait_text("cancel run");
    assert!(p.parser.screen().contents().contains(r"t-\xff"));
    p.send(b"wrong run id\r");
    p.wait_text("run cancelled by alice");
    assert_eq!(status("a-0").1, "CANCELLED");
    assert_eq!(status("a-1").1, "WAITING_FOR_APPROVAL");
    p.send(b"\x03");
    p.finish();
    p.assert_restored();
    assert!(
        !p.raw.windows(3).any(|w| w == "\u{fffd}".as_bytes()),
        "U+FFFD was written to the terminal"
    );
    assert_eq!(hostile::verify_bytes(&db), Vec::<String>::new());
}
