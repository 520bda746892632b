//! Issue 21: the console's stats screen shows what `countersign stats` computes, read on the
//! counting lane (a scan never holds up paging or keys), once when opened and on refresh.

mod console_support;

use console_support::*;
use countersign::console::testing::{Effect, Input, Query, Screen, is_count, update};
use countersign::runtime::store::Store;
use countersign::runtime::types::Timestamp;

#[test]
fn snapshots_of_the_stats_screen() {
    let (db, _) = all_db();
    for (w, h) in [(80, 24), (120, 40)] {
        let mut hs = Harness::open(db, w, h);
        hs.keys("4");
        snap(&format!("stats@{w}x{h}"), &hs.screen());
    }
    let mut hs = Harness::open(db, 120, 40);
    hs.keys("4");
    hs.keys("jjjjjjjjjj");
    snap("stats__scrolled@120x40", &hs.screen());
}

#[test]
fn the_screen_shows_the_numbers_the_command_computes() {
    let (db, _) = all_db();
    let store = Store::open_existing(db, true).unwrap();
    let st = store.stats(None, Timestamp::from_unix(now(), 0)).unwrap();
    let mut h = Harness::open(db, 120, 40);
    h.command("stats");
    let screen = h.screen();
    assert!(screen.contains("The queue's numbers"), "{screen}");
    for t in &st.tools {
        let Some(name) = t.tool.as_deref().and_then(|b| std::str::from_utf8(b).ok()) else {
            continue;
        };
        if name.len() > 20 || !name.is_ascii() {
            continue;
        }
        let line = screen
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("a row for {name}: {screen}"));
        let nums: Vec<&str> = line.split_whitespace().skip(1).take(7).collect();
        let want = [
            t.calls,
            t.allowed,
            t.denied_total(),
            t.invalid,
            t.needs_approval,
            t.approved,
            t.rejected,
        ]
        .map(|n| n.to_string());
        assert_eq!(nums, want, "{name}: {line}");
    }
    for r in &st.reviewers {
        let by = String::from_utf8_lossy(&r.by);
        if by.is_empty() || !by.is_ascii() {
            continue;
        }
        assert!(
            screen.lines().any(|l| l.trim_start().starts_with(&*by)
                && l.split_whitespace().rev().take(2).collect::<Vec<_>>()
                    == [r.rejected.to_string(), r.approved.to_string()]),
            "reviewer {by}: {screen}"
        );
    }
    assert!(screen.contains("L* = c / (q·p)") && screen.contains("a model, not a measurement"));
}

#[test]
fn the_read_goes_to_the_counting_lane_and_keys_work_while_it_runs() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.holding = true;
    h.keys("4");
    let (_, q, _) = h.held.last().cloned().expect("a stats read asked");
    assert!(matches!(q, Query::Stats { .. }), "{q:?}");
    assert!(
        is_count(&q),
        "stats scan on the counting lane, never the paging one"
    );
    assert!(h.screen().contains("reading…"));
    // Keys are handled while it is out: back to the queue, and the late reply is dropped.
    h.keys("1");
    assert!(matches!(h.app.top(), Screen::Queue(_)));
    let n = h.held.len();
    h.deliver(&(0..n).collect::<Vec<_>>(), |_, r| r);
    assert!(matches!(h.app.top(), Screen::Queue(_)));
}

#[test]
fn a_change_in_the_database_does_not_read_the_stats_again_but_refresh_does() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.keys("4");
    let fx = update(&mut h.app, Input::DataChanged);
    assert!(
        !fx.iter()
            .any(|e| matches!(e, Effect::Query(_, Query::Stats { .. }))),
        "{fx:?}"
    );
    h.run(fx);
    // The refresh key asks again.
    let fx = update(
        &mut h.app,
        Input::Key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char('r'),
            crossterm::event::KeyModifiers::CONTROL,
        )),
    );
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Query(_, Query::Stats { .. }))),
        "{fx:?}"
    );
}
