//! Issue 15 in the console: deny with feedback (item 7), the fate of an approved call (item 5),
//! runs its program must resume (item 6), ids a person can type (item 8) and whole messages
//! with a footer that offers only what applies (item 9). Snapshots at 80x24, 120x40 and 60x20
//! with the cells that carry meaning checked for their style.

mod console_support;

use console_support::*;
use countersign::console::testing::{Role, Screen};
use ratatui::buffer::Buffer;
use ratatui::style::Style;

/// The first cell where `needle` starts on screen, as (x, y).
fn find(b: &Buffer, needle: &str) -> Option<(u16, u16)> {
    let text = buffer_text(b);
    for (y, line) in text.lines().enumerate() {
        if let Some(i) = line.find(needle) {
            // Columns: count the display width of what comes before.
            let x = unicode_width::UnicodeWidthStr::width(&line[..i]);
            return Some((x as u16, y as u16));
        }
    }
    None
}

/// Asserts `needle` is on screen and its first cell has the theme's style for `role`
/// (foreground and background; modifiers as the theme gives them).
fn assert_role(h: &Harness, needle: &str, role: Role) {
    let b = h.buffer();
    let (x, y) = find(&b, needle).unwrap_or_else(|| panic!("{needle:?} on\n{}", h.screen()));
    let want: Style = h.app.theme.style(role);
    let cell = &b[(x, y)];
    assert_eq!(
        (cell.fg, cell.bg),
        (want.fg.unwrap_or(cell.fg), want.bg.unwrap_or(cell.bg)),
        "{needle:?} drawn as {role:?}"
    );
}

fn each_size(name: &str, drive: impl Fn(&mut Harness), check: impl Fn(&Harness)) {
    let (db, _) = all_db();
    for (w, h) in SIZES {
        let mut hs = Harness::open(db, w, h);
        drive(&mut hs);
        check(&hs);
        snap(&format!("{name}@{w}x{h}"), &hs.screen());
    }
}

#[test]
fn deny_asks_for_a_note_for_the_agent() {
    let (_, m) = all_db();
    let id = approval_of(m, "waiting");
    each_size(
        "confirm_deny__waiting",
        |h| {
            h.command(&format!("approval {id}"));
            h.keys("d");
            h.keys("refund 30.00, not 65.00");
        },
        |h| {
            assert_role(h, "DENY WITH FEEDBACK", Role::Danger);
            assert_role(h, "note for the agent", Role::Dim);
        },
    );
}

/// A notice longer than the line: a resume hook's error as agentrt words one.
const LONG: &str = "agentrt: approval hash does not match its recorded request: stored 11fc90e4178aa620d8130d881ad9129fc2817d0b795b041db7814b90d02d9707, computed 0b1e5d9c; nothing ran";

fn long_notice(h: &mut Harness) {
    use countersign::console::testing::{DecideError, Input};
    h.app.running.push((999, "resuming".into()));
    h.input(Input::Done(999, Err(DecideError::Other(LONG.into()))));
}

#[test]
fn a_cut_notice_says_where_it_is_whole_and_the_log_keeps_it() {
    each_size("notice__cut", long_notice, |h| {
        assert_role(h, ":messages", Role::KeyHint);
        // The head and the tail are there; the middle is cut visibly.
        let s = h.screen();
        assert!(s.contains("agentrt: approval"), "{s}");
    });
    each_size(
        "messages__long",
        |h| {
            long_notice(h);
            h.command("messages");
        },
        |h| {
            // Whole: every word of it is on the screen, across wrapped lines.
            let joined: String = h.screen().split_whitespace().collect();
            let want: String = LONG.split_whitespace().collect();
            assert!(joined.contains(&want), "{}", h.screen());
            assert_role(h, "error", Role::Error);
            assert_role(h, "Messages", Role::Title);
        },
    );
}

#[test]
fn every_notice_reaches_the_log_in_order_and_the_log_is_bounded() {
    use countersign::console::testing::MESSAGES_KEPT;
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.command("nonsense");
    long_notice(&mut h);
    let texts: Vec<&str> = h
        .app
        .messages
        .iter()
        .map(|m| std::str::from_utf8(&m.text).unwrap())
        .collect();
    assert!(texts[0].starts_with("unknown command"), "{texts:?}");
    assert_eq!(texts[1], LONG, "kept whole");
    for i in 0..MESSAGES_KEPT + 5 {
        h.command(&format!("nonsense{i}"));
    }
    assert_eq!(h.app.messages.len(), MESSAGES_KEPT);
    assert_eq!(h.app.messages_dropped, 7);
    h.command("messages");
    assert!(h.screen().contains("Messages 500"), "{}", h.screen());
}

#[test]
fn the_damaged_screen_offers_no_cancel_on_a_finished_run() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "dmg", "damaged", &[]);
    let run = run_of(&m, "damaged");
    for (w, ht) in SIZES {
        let mut h = Harness::open(&db, w, ht);
        h.keys("3");
        assert!(h.screen().contains("x cancel run"), "waiting: offered");
        snap(&format!("damaged__waiting_run@{w}x{ht}"), &h.screen());
    }
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute(
        "UPDATE runs SET status = 'COMPLETED', finished_at = started_at WHERE id = ?1",
        [&run],
    )
    .unwrap();
    for (w, ht) in SIZES {
        let mut h = Harness::open(&db, w, ht);
        h.keys("3");
        let s = h.screen();
        assert!(!s.contains("cancel run"), "COMPLETED: not offered\n{s}");
        assert_role(&h, "copy bytes", Role::Dim);
        snap(&format!("damaged__completed_run@{w}x{ht}"), &s);
        h.keys("x");
        assert!(h.commands.is_empty());
        assert!(h.app.overlay.is_none(), "no confirmation opens");
        assert!(
            h.screen().contains("run is already finished (COMPLETED)"),
            "{}",
            h.screen()
        );
    }
}

#[test]
fn a_finished_runs_footer_offers_no_cancel() {
    let (_, m) = all_db();
    let run = run_of(m, "completed");
    each_size(
        "run_detail__completed",
        |h| h.command(&format!("run {run}")),
        |h| {
            let s = h.screen();
            assert!(!s.contains("cancel run"), "{s}");
            assert_role(h, "COMPLETED", Role::StatusCompleted);
        },
    );
}

/// The screen's title line of the top screen (its first line after the header).
fn top_title(h: &Harness) -> String {
    h.screen().lines().nth(1).unwrap_or("").to_string()
}

#[test]
fn run_takes_a_unique_prefix_and_an_ambiguous_one_lists_the_candidates() {
    use countersign::console::testing::Screen;
    let (db, m) = all_db();
    let ids: Vec<String> = m["scenarios"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|s| s["runs"].as_array().unwrap().iter())
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    // The shortest prefix of the first id that no other id starts, and one that several do.
    let target = &ids[0];
    let unique = (1..=target.len())
        .map(|n| &target[..n])
        .find(|p| ids.iter().filter(|i| i.starts_with(p)).count() == 1)
        .unwrap();
    let shared = (1..=4)
        .flat_map(|n| ids.iter().map(move |i| &i[..n]))
        .find(|p| ids.iter().filter(|i| i.starts_with(p)).count() >= 2)
        .unwrap()
        .to_string();
    let many: Vec<&String> = ids.iter().filter(|i| i.starts_with(&shared)).collect();

    let mut h = Harness::open(db, 120, 40);
    h.command(&format!("run {unique}"));
    match h.app.stack.last() {
        Some(Screen::RunDetail(s)) => assert_eq!(s.id.as_bytes(), target.as_bytes()),
        _ => panic!("the run opens: {}", h.screen()),
    }
    assert!(top_title(&h).contains(target.as_str()), "{}", h.screen());

    let mut h = Harness::open(db, 120, 40);
    h.command(&format!("run {shared}"));
    assert!(
        matches!(h.app.stack.last(), Some(Screen::Queue(_))),
        "nothing opens on an ambiguous prefix"
    );
    let log = String::from_utf8(h.app.messages.last().unwrap().text.clone()).unwrap();
    assert!(
        log.contains(&format!("is the start of {} run ids", many.len())),
        "{log}"
    );
    for id in &many {
        assert!(log.contains(id.as_str()), "{id} named in {log}");
    }
    snap("notice__ambiguous_prefix@120x40", &h.screen());
    for (w, ht) in [(80, 24), (60, 20)] {
        let mut h = Harness::open(db, w, ht);
        h.command(&format!("run {shared}"));
        snap(&format!("notice__ambiguous_prefix@{w}x{ht}"), &h.screen());
    }

    // A prefix of no run opens the run as typed, which says it is not found.
    let mut h = Harness::open(db, 80, 24);
    h.command("run zzzz");
    assert!(matches!(h.app.stack.last(), Some(Screen::RunDetail(s)) if s.id.as_bytes() == b"zzzz"));
}

#[test]
fn the_runs_list_has_an_id_column_to_type_from() {
    let (_, m) = all_db();
    let run = run_of(m, "completed");
    each_size(
        "runs__ids",
        |h| h.keys("2"),
        |h| {
            assert_role(h, "ID", Role::Header);
            let s = h.screen();
            assert!(s.contains(&format!("{}…", &run[..8])), "{s}");
        },
    );
}

#[test]
fn copy_puts_the_bare_value_never_its_label() {
    let (db, m) = all_db();
    let mut h = Harness::open(db, 120, 40);
    h.command(&format!("approval {}", approval_of(m, "waiting")));
    // Down to the stored request's `tool` field (the decision page comes first).
    for _ in 0..60 {
        let on_tool = matches!(h.app.stack.last(), Some(Screen::Approval(s))
            if s.fields.get(s.cursor).is_some_and(|f| f.label == b"tool"));
        if on_tool {
            break;
        }
        h.keys("j");
    }
    h.keys("y");
    let copied = h.copies.last().unwrap();
    assert_eq!(
        copied, "issue_refund",
        "the tool field, bare, never `tool: `"
    );
    let mut h = Harness::open(db, 120, 40);
    h.keys("2");
    h.keys("y");
    let copied = h.copies.last().unwrap();
    assert!(!copied.contains(':') && copied.len() == 32, "{copied}");
}

#[test]
fn resume_on_an_approval_says_why_it_cannot() {
    let (db, m) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.command(&format!("approval {}", approval_of(m, "waiting")));
    h.keys("R");
    assert!(h.app.overlay.is_none());
    assert!(
        String::from_utf8_lossy(&h.app.messages.last().unwrap().text).contains("not approved yet"),
        "{}",
        h.screen()
    );
    let approved = approval_of(m, "approved");
    each_size(
        "approval__resume_refused",
        |h| {
            h.command(&format!("approval {approved}"));
            h.keys("R");
        },
        |h| {
            assert!(h.app.overlay.is_none());
            let t = String::from_utf8_lossy(&h.app.messages.last().unwrap().text);
            assert!(t.contains("its own program must resume this run"), "{t}");
            assert_role(h, "its own", Role::Error);
        },
    );
}

/// The `approved` scenario (a refund approved, its run not resumed), changed by `after` into
/// what a resume would have left (the runtime's own flows are in tests/demo_pty.rs; here the
/// console's reading and drawing of each fate is what is checked).
fn approved_then(dir: &std::path::Path, after: &str) -> (std::path::PathBuf, String) {
    let (db, m) = fixture(dir, "fate", "approved", &[]);
    let run = run_of(&m, "approved");
    let c = rusqlite::Connection::open(&db).unwrap();
    let step: String = c
        .query_row(
            "SELECT step_id FROM approvals WHERE run_id = ?1",
            [&run],
            |r| r.get(0),
        )
        .unwrap();
    c.execute_batch(&after.replace("STEP", &step).replace("RUN", &run))
        .unwrap();
    (db, run)
}

const EXECUTED: &str = r#"
    UPDATE steps SET status = 'done', observation_json =
      '{"kind":"tool_result","content":{"refund_id":"re_1"},"summary":"refunded 45.00 to ord_1005 (re_1)","content_hash":""}'
      WHERE id = 'STEP';
    UPDATE runs SET status = 'COMPLETED', reason = 'goal_completed' WHERE id = 'RUN';"#;

const DENIED_ON_RESUME: &str = r#"
    UPDATE steps SET status = 'failed',
      policy_json = '{"outcome":"deny","reason":"refunds are paused after 17:00"}',
      observation_json = '{"kind":"policy_denied","content":{},"summary":"denied","content_hash":""}'
      WHERE id = 'STEP';
    UPDATE runs SET status = 'COMPLETED', reason = 'goal_completed' WHERE id = 'RUN';"#;

#[test]
fn the_runs_list_and_header_say_what_became_of_an_approved_call() {
    let d = tempfile::tempdir().unwrap();
    // Approved, not resumed: with its age.
    let (_, m) = all_db();
    let run = run_of(m, "approved");
    each_size(
        "run_detail__fate_awaiting",
        |h| h.command(&format!("run {run}")),
        |h| {
            assert_role(h, "approved", Role::StatusWaiting);
            assert!(h.screen().contains("not yet resumed"), "{}", h.screen());
        },
    );
    // Executed: the observation's summary, in the runs list and the header.
    let (db, run) = approved_then(d.path(), EXECUTED);
    for (w, ht) in SIZES {
        let mut h = Harness::open(&db, w, ht);
        h.keys("2");
        if w >= 76 {
            assert_role(&h, "ran: ", Role::Ok);
        }
        snap(&format!("runs__fate_executed@{w}x{ht}"), &h.screen());
        h.command(&format!("run {run}"));
        assert_role(&h, "executed: ", Role::Ok);
        assert!(h.screen().contains("refunded"), "{}", h.screen());
        snap(&format!("run_detail__fate_executed@{w}x{ht}"), &h.screen());
    }
}

#[test]
fn a_completed_run_whose_approved_call_was_denied_says_so() {
    let d = tempfile::tempdir().unwrap();
    let (db, run) = approved_then(d.path(), DENIED_ON_RESUME);
    for (w, ht) in SIZES {
        let mut h = Harness::open(&db, w, ht);
        h.keys("2");
        if w >= 76 {
            assert_role(&h, "denied on resume", Role::Danger);
        }
        snap(
            &format!("runs__fate_denied_on_resume@{w}x{ht}"),
            &h.screen(),
        );
        h.command(&format!("run {run}"));
        let s = h.screen();
        assert!(s.contains("COMPLETED"), "{s}");
        assert_role(
            &h,
            "the run ended COMPLETED after this denial",
            Role::Danger,
        );
        assert!(
            s.contains("refunds are paused after 17:00"),
            "the policy's reason: {s}"
        );
        snap(&format!("run_detail__fate_denied_on_resume@{w}x{ht}"), &s);
    }
}

#[test]
fn a_denial_with_feedback_shows_as_the_calls_fate_with_its_note() {
    use countersign::console::testing::{AppConfig, StoreDecider};
    use countersign::runtime::types::Timestamp;
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "waiting", &[]);
    let ap = approval_of(&m, "waiting");
    let run = run_of(&m, "waiting");
    let at = Timestamp::parse("2026-01-01T00:30:00Z").unwrap();
    let decider = Box::new(StoreDecider::open(&db).unwrap().with_clock(at));
    let cfg = AppConfig {
        by: "erin".into(),
        read_only: false,
        can_resume: false,
    };
    let mut h = Harness::with(&db, 120, 40, cfg, decider);
    h.command(&format!("approval {ap}"));
    h.keys("d");
    h.keys("refund 30.00, not 65.00");
    h.key(crossterm::event::KeyCode::Enter);
    assert!(h.screen().contains("denied by erin"), "{}", h.screen());
    h.keys("2");
    assert_role(&h, "denied: ", Role::Error);
    h.command(&format!("run {run}"));
    let s = h.screen();
    assert!(s.contains("INTERRUPTED"), "{s}");
    assert!(
        s.contains("denied with feedback: refund 30.00, not 65.00"),
        "{s}"
    );
    assert!(s.contains("resume by its own program"), "{s}");
    snap("run_detail__fate_denied_with_feedback@120x40", &s);
    for (w, ht) in [(80, 24), (60, 20)] {
        let mut h = Harness::open(&db, w, ht);
        h.command(&format!("run {run}"));
        let s = h.screen();
        assert!(s.contains("INTERRUPTED"), "{s}");
        snap(
            &format!("run_detail__fate_denied_with_feedback@{w}x{ht}"),
            &s,
        );
    }
}

/// A resume that paused again: the approved row kept, a new pending approval of the same step
/// (same request, so the same hash) asked after it, as the runtime writes when the policy,
/// asked again on resume, wants a new approval.
const PAUSED_AGAIN: &str = r#"
    INSERT INTO approvals (id, run_id, step_id, kind, capability_json, presentation_json,
                           request_json, hash, status, created_at, expires_at)
      SELECT 'again0000000000000000000000000001', run_id, step_id, kind, capability_json,
             presentation_json, request_json, hash, 'pending', created_at, expires_at
      FROM approvals WHERE step_id = 'STEP';"#;

#[test]
fn a_call_asked_again_after_its_grant_says_so_in_the_queue_and_the_header() {
    let d = tempfile::tempdir().unwrap();
    let (db, run) = approved_then(d.path(), PAUSED_AGAIN);
    for (w, ht) in SIZES {
        let mut h = Harness::open(&db, w, ht);
        assert_role(&h, "again: ", Role::StatusWaiting);
        snap(&format!("queue__paused_again@{w}x{ht}"), &h.screen());
        h.command(&format!("run {run}"));
        assert_role(&h, "paused again, new approval ", Role::StatusWaiting);
        assert!(h.screen().contains("again000"), "{}", h.screen());
        snap(
            &format!("run_detail__fate_paused_again@{w}x{ht}"),
            &h.screen(),
        );
    }
}

#[test]
fn the_message_log_draws_notices_through_the_sanitiser() {
    use countersign::console::testing::{DecideError, Input};
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.app.running.push((999, "approving".into()));
    let hostile = "already approved by \u{1b}[2Jmallory\u{202e}evil";
    h.input(Input::Done(999, Err(DecideError::Other(hostile.into()))));
    h.command("messages");
    let s = h.screen();
    assert!(s.contains("\\x1b[2Jmallory\\u{202e}evil"), "{s}");
    assert!(!s.contains('\u{1b}') && !s.contains('\u{202e}'), "{s:?}");
    assert_role(&h, "\\x1b", Role::Escaped);
}

/// Issue 18: a run an MCP proxy began (agentrt's `proxy_calls` names it) is collected by the
/// host's next identical call; the run screen says so, and `R` says there is nothing to resume.
#[test]
fn a_proxy_run_says_the_hosts_next_identical_call_collects_it() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "waiting", &[]);
    let run = run_of(&m, "waiting");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "CREATE TABLE proxy_calls (id INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL,
           request_key TEXT NOT NULL, tool TEXT NOT NULL, side_effect TEXT NOT NULL,
           run_id TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL)",
    )
    .unwrap();
    c.execute(
        "INSERT INTO proxy_calls (session, request_key, tool, side_effect, run_id, created_at)
         VALUES ('s1\u{1b}[2J', 'k', 'fs_write_file', 'remote_mutation', ?1, 0)",
        [&run],
    )
    .unwrap();
    drop(c);
    let mut h = Harness::open(&db, 120, 40);
    h.command(&format!("run {run}"));
    let s = h.screen();
    assert!(
        s.contains("collect by the MCP host's next identical call (proxy session s1\\x1b[2J); nothing to resume here"),
        "the session escaped: {s}"
    );
    assert!(!s.contains("resume by its own program"), "{s}");
    h.keys("R");
    let s = h.screen();
    assert!(
        s.contains("an MCP proxy's run: the host's next identical call collects"),
        "{s}"
    );
    // The approval page's R says the same.
    let ap = approval_of(&m, "waiting");
    h.command(&format!("approval {ap}"));
    h.keys("R");
    let s = h.screen();
    assert!(
        s.contains("an MCP proxy's run: the host's next identical call collects"),
        "{s}"
    );
}
