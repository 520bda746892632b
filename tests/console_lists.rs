//! The lists' conventions (issue 16 part 2): `/` filters as you type on what the list shows,
//! `n`/`N`, the status picker, `:` completion and history, `?` with this screen's keys first,
//! and the mouse (clicks and the wheel as crossterm decodes them).

mod console_support;

use console_support::*;
use countersign::console::testing::{
    Action, Keymap, Overlay, Query, RunStatus, Screen, load_mouse,
};
use crossterm::event::{KeyCode, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};

fn queue(h: &Harness) -> (&str, u64) {
    match &h.app.stack[0] {
        Screen::Queue(s) => (s.filter.as_str(), s.list.page.total),
        _ => panic!("the queue is the first screen"),
    }
}

fn runs(h: &Harness) -> (&str, Option<RunStatus>, u64, Vec<RunStatus>) {
    match h.app.top() {
        Screen::Runs(s) => (
            s.filter.as_str(),
            s.status.clone(),
            s.list.page.total,
            s.list.page.rows.iter().map(|r| r.status.clone()).collect(),
        ),
        _ => panic!("not on the runs"),
    }
}

#[test]
fn the_filter_narrows_with_every_key_esc_puts_back_and_enter_keeps() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    assert_eq!(queue(&h), ("", 9));
    h.keys("/");
    let mut totals = vec![];
    for c in "send_status".chars() {
        h.keys(&c.to_string());
        // Narrowed at once, before any enter.
        totals.push(queue(&h).1);
    }
    assert_eq!(queue(&h).0, "send_status");
    assert!(totals.windows(2).all(|w| w[1] <= w[0]), "{totals:?}");
    assert_eq!(*totals.last().unwrap(), 2, "{totals:?}");
    assert!(
        totals[1] < totals[0],
        "each key narrows at once: {totals:?}"
    );
    // esc: the filter there was (none) is back, with every row.
    h.key(KeyCode::Esc);
    assert!(h.app.overlay.is_none());
    assert_eq!(queue(&h), ("", 9));
    // enter keeps what was typed.
    h.keys("/send_status");
    h.key(KeyCode::Enter);
    assert!(h.app.overlay.is_none());
    assert_eq!(queue(&h), ("send_status", 2));
    assert!(h.screen().contains("filter /send_status"), "{}", h.screen());
    // esc after more typing puts back the kept filter, not none.
    h.keys("/zzz");
    assert_eq!(queue(&h), ("send_statuszzz", 0));
    assert!(
        h.screen().contains("no pending approval matches"),
        "{}",
        h.screen()
    );
    h.key(KeyCode::Esc);
    assert_eq!(queue(&h), ("send_status", 2));
    // backspace widens again as it goes.
    h.keys("/");
    for _ in 0.."send_status".len() {
        h.key(KeyCode::Backspace);
    }
    assert_eq!(queue(&h), ("", 9));
}

#[test]
fn keys_typed_while_a_filter_read_is_in_flight_are_read_together_when_it_returns() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.holding = true;
    h.keys("/s");
    h.keys("end");
    // One read was sent (for "s"); the three keys after it waited for it.
    let filters: Vec<String> = h
        .held
        .iter()
        .map(|(_, q, _)| match q {
            Query::Filtered { filter, .. } => filter.clone(),
            other => panic!("a filter read, not {other:?}"),
        })
        .collect();
    assert_eq!(filters, ["s"]);
    h.deliver(&[0], |_, r| r);
    // Its reply asked for the text as it is now, which was read (holding stopped).
    assert_eq!(queue(&h), ("send", 2));
    match &h.app.overlay {
        Some(Overlay::Filter(e)) => assert!(e.inflight.is_none() && !e.stale, "{e:?}"),
        other => panic!("still typing: {other:?}"),
    }
}

#[test]
fn n_and_shift_n_move_through_the_matches_and_wrap() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.keys("n");
    assert!(
        h.screen().contains("no filter: / narrows the list"),
        "{}",
        h.screen()
    );
    h.keys("/issue_refund");
    h.key(KeyCode::Enter);
    let total = queue(&h).1;
    assert!(total >= 3, "{total}");
    let cursor = |h: &Harness| match &h.app.stack[0] {
        Screen::Queue(s) => s.list.cursor,
        _ => unreachable!(),
    };
    h.keys("n");
    assert_eq!(cursor(&h), 1);
    assert!(h.screen().contains(&format!("match 2 of {total}")));
    h.keys("N");
    h.keys("N");
    assert_eq!(cursor(&h), total - 1, "N wraps from the first to the last");
    h.keys("n");
    assert_eq!(cursor(&h), 0, "n wraps from the last to the first");
    // While typing, the arrows move through the narrowed rows.
    h.keys("/");
    h.key(KeyCode::Down);
    assert_eq!(cursor(&h), 1);
    assert!(matches!(h.app.overlay, Some(Overlay::Filter(_))));
}

/// A copy of the shared fixture whose rows are edited so that what the list shows and what
/// the stored bytes hold differ as a hostile row would make them.
fn hostile_copy() -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "hostile_filter", "all", &[]);
    let c = rusqlite::Connection::open(&db).unwrap();
    let run = |s: &str| run_of(&m, s);
    // A goal in capitals beyond ASCII: SQLite's lower() folds ASCII only.
    c.execute(
        "UPDATE runs SET goal = 'Remboursement: ÉCHEC DE LIVRAISON' WHERE id = ?1",
        [run("completed")],
    )
    .unwrap();
    // A right-to-left override, drawn as \u{202e}.
    c.execute(
        "UPDATE runs SET goal = 'Refund order ' || char(8238) || '9001_dro' WHERE id = ?1",
        [run("failed")],
    )
    .unwrap();
    // A goal whose words come after 4096 characters (the old SQL filter read no further;
    // the run's screen shows them).
    c.execute(
        "UPDATE runs SET goal = printf('%.*c', 5000, 'x') || ' wire it to acct 99' WHERE id = ?1",
        [run("waiting")],
    )
    .unwrap();
    // A repeated key in the request: the row does not decode, so the queue shows no tool for
    // it, while SQLite's json_extract reads the first name.
    let approval = approval_of(&m, "waiting");
    let n = c
        .execute(
            "UPDATE approvals SET request_json = \
             replace(request_json, '\"spec\":{', '\"spec\":{\"name\":\"lookup_order\",') \
             WHERE id = ?1",
            [&approval],
        )
        .unwrap();
    assert_eq!(n, 1);
    drop(c);
    (d, db)
}

#[test]
fn the_filter_matches_what_the_reviewer_sees_not_the_stored_bytes() {
    let (_d, db) = hostile_copy();
    let mut h = Harness::open(&db, 120, 40);
    // No reviewer sees the repeated key's first name: the filter does not find the row by it.
    h.keys("/lookup_order");
    h.key(KeyCode::Enter);
    assert_eq!(queue(&h).1, 0, "{}", h.screen());
    h.keys("2/acct 99");
    h.key(KeyCode::Enter);
    assert_eq!(runs(&h).2, 1, "words past 4096 characters\n{}", h.screen());
    h.keys("/");
    h.ctrl('u');
    h.key(KeyCode::Enter);
    h.keys("/échec");
    h.key(KeyCode::Enter);
    let (_, _, total, _) = runs(&h);
    assert_eq!(total, 1, "Unicode case folds as it reads\n{}", h.screen());
    assert!(h.screen().contains("Rembours"), "{}", h.screen());
    h.keys("/");
    h.ctrl('u');
    h.keys("\\u{202e}");
    h.key(KeyCode::Enter);
    // The edited run and the fixture's hostile one both hold the character.
    let (_, _, total, _) = runs(&h);
    assert_eq!(total, 2, "an escape is found as drawn\n{}", h.screen());
    assert!(h.screen().contains("\\u{202e}9001_dro"), "{}", h.screen());
    // The stored character itself is not what the reviewer reads, so it finds nothing.
    h.keys("/");
    h.ctrl('u');
    h.input(countersign::console::testing::Input::Paste(
        "\u{202e}".into(),
    ));
    assert_eq!(runs(&h).2, 0, "{}", h.screen());
}

#[test]
fn the_narrowed_queue_holds_exactly_the_rows_that_show_the_text() {
    let (_d, db) = hostile_copy();
    let mut h = Harness::open(&db, 120, 40);
    let before = h.screen();
    assert!(before.contains("(damaged)"), "the repeated key: {before}");
    for text in ["issue_refund", "send_status", "damaged", "ord_101"] {
        h.keys("/");
        h.ctrl('u');
        h.keys(text);
        h.key(KeyCode::Enter);
        // Every row the whole queue draws with the text (not cut at 120 columns) is in the
        // narrowed one, and no other.
        let drawn = before
            .lines()
            .skip(3)
            .filter(|l| l.to_lowercase().contains(text))
            .count() as u64;
        assert_eq!(queue(&h).1, drawn, "{text}\n{before}\n{}", h.screen());
    }
}

#[test]
fn the_status_filter_is_a_picker_with_counts_and_esc_keeps_the_filter() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.keys("2f");
    assert!(matches!(h.app.overlay, Some(Overlay::Picker(ref p)) if p.cursor == 0));
    let s = h.screen();
    assert!(s.contains("all runs") && s.contains("CANCELLED"), "{s}");
    assert!(s.contains("15 │"), "the count of all runs, known: {s}");
    for _ in 0..5 {
        h.keys("j");
    }
    h.key(KeyCode::Enter);
    let (_, status, total, rows) = runs(&h);
    assert_eq!(status, Some(RunStatus::Failed));
    assert!(total >= 1 && rows.iter().all(|r| *r == RunStatus::Failed));
    // It opens on the status in force; esc changes nothing.
    h.keys("f");
    assert!(matches!(h.app.overlay, Some(Overlay::Picker(ref p)) if p.cursor == 5));
    h.key(KeyCode::Up);
    h.key(KeyCode::Esc);
    assert_eq!(runs(&h).1, Some(RunStatus::Failed));
    // "all runs" clears it.
    h.keys("f");
    h.key(KeyCode::Home);
    h.key(KeyCode::Enter);
    assert_eq!(runs(&h).1, None);
    assert_eq!(runs(&h).2, 15);
    // The action is rebindable like any other.
    let t: toml::Table = "status_filter = \"S\"".parse().unwrap();
    h.app.keymap = Keymap::with_overrides("c.toml", &t).unwrap();
    h.keys("f");
    assert!(h.app.overlay.is_none());
    h.keys("S");
    assert!(matches!(h.app.overlay, Some(Overlay::Picker(_))));
}

#[test]
fn the_command_line_completes_with_tab_and_walks_its_history() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    let line = |h: &Harness| match &h.app.overlay {
        Some(Overlay::CommandLine(t)) => t.text.clone(),
        other => panic!("no command line: {other:?}"),
    };
    h.keys(":ru");
    h.key(KeyCode::Tab);
    assert_eq!(line(&h), "run");
    assert!(h.screen().contains(":run  :runs"), "{}", h.screen());
    h.keys("s");
    h.key(KeyCode::Tab);
    assert_eq!(line(&h), "runs");
    h.key(KeyCode::Enter);
    assert!(matches!(h.app.top(), Screen::Runs(_)));
    h.keys(":mes");
    h.key(KeyCode::Tab);
    h.key(KeyCode::Enter);
    assert!(matches!(h.app.top(), Screen::Messages { .. }));
    h.keys(":dam");
    h.key(KeyCode::Up);
    assert_eq!(line(&h), "messages");
    h.key(KeyCode::Up);
    assert_eq!(line(&h), "runs");
    h.key(KeyCode::Up);
    assert_eq!(line(&h), "runs", "stops at the oldest");
    h.key(KeyCode::Down);
    h.key(KeyCode::Down);
    assert_eq!(line(&h), "dam", "what was being typed comes back");
    h.key(KeyCode::Tab);
    assert_eq!(line(&h), "damaged");
    h.key(KeyCode::Enter);
    assert!(matches!(h.app.top(), Screen::Damaged(_)));
    assert_eq!(h.app.history.entries, ["runs", "messages", "damaged"]);
}

#[test]
fn help_lists_the_keys_of_the_screen_it_was_opened_on_first() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 120, 60);
    let at = |s: &str, what: &str| {
        s.find(what)
            .unwrap_or_else(|| panic!("{what} not in help:\n{s}"))
    };
    h.keys("2?");
    let s = h.screen();
    assert!(at(&s, "Keys on this screen (runs)") < at(&s, "[status_filter]"));
    assert!(at(&s, "[status_filter]") < at(&s, "Keys everywhere"));
    assert!(at(&s, "Keys everywhere") < at(&s, "[approve]"));
    h.key(KeyCode::Esc);
    h.key(KeyCode::Esc);
    h.keys("?");
    let s = h.screen();
    assert!(at(&s, "Keys on this screen (queue)") < at(&s, "[filter]"));
    assert!(
        at(&s, "Keys on other screens") < at(&s, "[status_filter]"),
        "{s}"
    );
    // Every action is still listed once.
    for a in Action::ALL {
        let name = format!("[{}]", a.name());
        assert_eq!(s.matches(&name).count(), 1, "{name}\n{s}");
    }
}

fn mouse(kind: MouseEventKind, row: u16) -> countersign::console::testing::Input {
    countersign::console::testing::Input::Mouse(MouseEvent {
        kind,
        column: 20,
        row,
        modifiers: KeyModifiers::NONE,
    })
}

#[test]
fn a_click_selects_a_row_a_second_click_opens_it_and_the_wheel_scrolls() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    let cursor = |h: &Harness| match h.app.top() {
        Screen::Queue(s) => s.list.cursor,
        _ => u64::MAX,
    };
    let click = mouse(MouseEventKind::Down(MouseButton::Left), 5);
    // The frame's header, the title and the table header are rows 0-2: row 5 is the third.
    h.input(click.clone());
    assert_eq!(cursor(&h), 2);
    assert!(matches!(h.app.top(), Screen::Queue(_)));
    h.input(click.clone());
    assert!(matches!(h.app.top(), Screen::Approval(_)), "opened");
    h.key(KeyCode::Esc);
    // The wheel moves as the arrows do.
    h.input(mouse(MouseEventKind::ScrollDown, 10));
    h.input(mouse(MouseEventKind::ScrollDown, 10));
    assert_eq!(cursor(&h), 4);
    h.input(mouse(MouseEventKind::ScrollUp, 10));
    assert_eq!(cursor(&h), 3);
    // A click on the table header or past the last row does nothing.
    h.input(mouse(MouseEventKind::Down(MouseButton::Left), 2));
    h.input(mouse(MouseEventKind::Down(MouseButton::Left), 20));
    assert_eq!(cursor(&h), 3);
    // With an overlay open the mouse chooses nothing.
    h.keys("/");
    h.input(mouse(MouseEventKind::Down(MouseButton::Left), 3));
    assert_eq!(cursor(&h), 3);
    h.key(KeyCode::Esc);
    // On the runs, the same.
    h.keys("2");
    h.input(mouse(MouseEventKind::Down(MouseButton::Left), 4));
    h.input(mouse(MouseEventKind::Down(MouseButton::Left), 4));
    assert!(matches!(h.app.top(), Screen::RunDetail(_)));
}

#[test]
fn the_mouse_is_off_unless_the_configuration_turns_it_on() {
    let d = tempfile::tempdir().unwrap();
    assert!(!load_mouse(Some(d.path())).unwrap(), "no file");
    let file = d.path().join("config.toml");
    std::fs::write(&file, "theme = \"light\"\n").unwrap();
    assert!(!load_mouse(Some(d.path())).unwrap(), "not set");
    std::fs::write(&file, "mouse = true\n").unwrap();
    assert!(load_mouse(Some(d.path())).unwrap());
    std::fs::write(&file, "mouse = \"yes\"\n").unwrap();
    let e = load_mouse(Some(d.path())).unwrap_err().to_string();
    assert!(e.contains("config.toml") && e.contains("`mouse`"), "{e}");
}

mod pty_support;

/// The real binary in a terminal: a filter typed key by key narrows the queue, `esc` puts it
/// back; with `--mouse`, clicks as the terminal encodes them (SGR) select and open a row.
#[test]
fn typing_a_filter_and_clicking_in_a_real_terminal() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "pty_lists", "all", &[]);
    let mut cmd = portable_pty::CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
    cmd.arg("--db");
    cmd.arg(&db);
    cmd.arg("--mouse");
    cmd.env("TERM", "xterm-256color");
    cmd.env("COUNTERSIGN_BY", "pty-tester");
    cmd.env("XDG_CONFIG_HOME", d.path());
    let mut s = pty_support::session::Session::start(cmd, 24, 80);
    s.wait_text("Pending approvals 1/9");
    for c in "/send_status".bytes() {
        s.send(&[c]);
    }
    s.wait_text("/send_status▏  2 rows");
    s.wait_text("Pending approvals 1/2");
    s.send(b"\x1b");
    s.wait_text("Pending approvals 1/9");
    // A press and release on the third row (SGR: 1-based column;row), twice.
    s.send(b"\x1b[<0;20;6M\x1b[<0;20;6m");
    s.wait_text("Pending approvals 3/9");
    s.send(b"\x1b[<0;20;6M\x1b[<0;20;6m");
    s.wait_text("queue \u{203a} approval");
    s.send(b"\x1b");
    s.wait_text("Pending approvals 3/9");
    // The wheel, one notch down.
    s.send(b"\x1b[<65;20;6M");
    s.wait_text("Pending approvals 4/9");
    s.send(b"q");
    assert_eq!(s.finish(), 0);
    assert!(!s.raw_mode(), "the terminal is given back");
}

/// `mouse = true` in config.toml asks the terminal for mouse reports as `--mouse` does; with
/// neither, the console never asks for them.
#[test]
fn the_configuration_turns_the_mouse_on_in_a_real_terminal() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "pty_mouse", "all", &[]);
    let start = |config: Option<&str>| {
        let home = tempfile::tempdir().unwrap();
        if let Some(c) = config {
            std::fs::create_dir_all(home.path().join("countersign")).unwrap();
            std::fs::write(home.path().join("countersign/config.toml"), c).unwrap();
        }
        let mut cmd = portable_pty::CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
        cmd.arg("--db");
        cmd.arg(&db);
        cmd.env("TERM", "xterm-256color");
        cmd.env("COUNTERSIGN_BY", "pty-tester");
        cmd.env("XDG_CONFIG_HOME", home.path());
        let mut s = pty_support::session::Session::start(cmd, 24, 80);
        s.wait_text("Pending approvals 1/9");
        (s, home)
    };
    let asks = |raw: &[u8]| raw.windows(8).any(|w| w == b"\x1b[?1000h");
    let (mut s, _home) = start(None);
    s.send(b"q");
    assert_eq!(s.finish(), 0);
    assert!(!asks(&s.raw), "off by default");
    let (mut s, _home) = start(Some("mouse = true\n"));
    assert!(asks(&s.raw), "on from the configuration");
    s.send(b"\x1b[<0;20;6M\x1b[<0;20;6m");
    s.wait_text("Pending approvals 3/9");
    s.send(b"q");
    assert_eq!(s.finish(), 0);
}
