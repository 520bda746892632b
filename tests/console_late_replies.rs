//! Replies that come late and out of order (a slow worker): the harness holds every reply
//! back and hands them to `update` afterwards in the order a test chooses. Each reply must land
//! on the read that asked for it, whatever came in between.

mod console_support;

use console_support::*;
use countersign::console::testing::{DataError, Input, Query, Reply, Screen};
use crossterm::event::KeyCode;

fn malformed() -> Reply {
    Reply::Failed(DataError::Read("database disk image is malformed".into()))
}

/// Issue 16: the run's header was asked for, the tab switched before it came back, and the
/// header said "reading…" until the database next changed.
#[test]
fn a_header_reply_after_a_tab_switch_is_still_shown() {
    let (db, m) = all_db();
    let mut h = Harness::open(db, 120, 40);
    h.holding = true;
    // The run screen opened directly: `:run` first reads which run its text names (a prefix),
    // and that read would be held too.
    let fx = h.app.push_run(run_of(m, "hostile").as_str().into());
    h.run(fx);
    h.key(KeyCode::Tab);
    h.key(KeyCode::Tab);
    assert!(
        h.held
            .iter()
            .any(|(_, q, _)| matches!(q, Query::Run { .. })),
        "the header was asked for: {:?}",
        h.held.iter().map(|(_, q, _)| q).collect::<Vec<_>>()
    );
    // Newest first: the tab pages, then the header, then the first tab's stale page.
    let order: Vec<usize> = (0..h.held.len()).rev().collect();
    h.deliver(&order, |_, r| r);
    let Screen::RunDetail(s) = h.app.top() else {
        panic!("the run is on top")
    };
    assert!(s.header.is_some(), "header not shown:\n{}", h.screen());
    assert_eq!(s.header_pending, None);
    assert!(!h.screen().contains("reading…"), "{}", h.screen());
}

/// Issue 16: a failed read of the approval on top was taken by the run screen below it (the
/// run screen took any `Failed` reply whatever its id), so the approval never cleared its
/// pending read.
#[test]
fn a_failed_read_belongs_to_the_screen_that_asked() {
    let (db, m) = all_db();
    let mut h = Harness::open(db, 120, 40);
    h.command(&format!("run {}", run_of(m, "hostile")));
    h.holding = true;
    h.command(&format!("approval {}", approval_of(m, "hostile")));
    let order: Vec<usize> = (0..h.held.len()).collect();
    h.deliver(&order, |q, r| {
        if matches!(q, Query::Approval { .. }) {
            malformed()
        } else {
            r
        }
    });
    let Screen::Approval(s) = h.app.top() else {
        panic!("the approval is on top")
    };
    assert_eq!(s.pending, None, "the approval still waits for its read");
    assert!(h.screen().contains("malformed"), "{}", h.screen());

    // A failure nobody asked for (a read long since replaced) changes nothing.
    h.app.notice = None;
    h.input(Input::Reply(9_999, malformed()));
    assert_eq!(h.app.notice, None, "a stray failure was taken");

    // The run screen's own failed read is still its own: back on it, its header fails.
    h.key(KeyCode::Esc);
    h.holding = true;
    h.ctrl('r');
    let order: Vec<usize> = (0..h.held.len()).collect();
    h.deliver(&order, |q, r| {
        if matches!(q, Query::Run { .. }) {
            malformed()
        } else {
            r
        }
    });
    let Screen::RunDetail(s) = h.app.top() else {
        panic!("the run is on top")
    };
    assert_eq!(s.header_pending, None, "the run still waits for its header");
    assert!(h.screen().contains("malformed"), "{}", h.screen());
}
