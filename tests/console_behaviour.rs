//! Behaviour of the console beyond pictures: cell styles that carry meaning (escapes,
//! selection, danger), late replies dropped, live reload keeping the cursor on its row, and
//! no single key changing state.

mod console_support;
#[path = "support/long.rs"]
mod long;

use console_support::*;
use countersign::console::testing::Role;
use countersign::console::testing::{Choice, DataError, Page, Query, Reply, Write};
use countersign::console::testing::{Effect, Input, Screen, update};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;

fn find(b: &Buffer, needle: &str) -> Option<(u16, u16)> {
    let text = buffer_text(b);
    for (y, line) in text.lines().enumerate() {
        if let Some(i) = line.find(needle) {
            let x = unicode_width::UnicodeWidthStr::width(&line[..i]);
            return Some((x as u16, y as u16));
        }
    }
    None
}

#[test]
fn escapes_are_drawn_in_the_escape_style() {
    let (db, m) = all_db();
    let mut h = Harness::open(db, 120, 40);
    h.command(&format!("approval {}", approval_of(m, "hostile")));
    let b = h.buffer();
    let esc = h.app.theme.style(Role::Escaped);
    let (x, y) = find(&b, "\\x1b[2J").expect("escaped ESC on screen");
    for dx in 0..4 {
        assert_eq!(
            b[(x + dx, y)].fg,
            esc.fg.unwrap(),
            "cell {dx} of \\x1b has the escape colour"
        );
        assert!(
            b[(x + dx, y)]
                .modifier
                .contains(ratatui::style::Modifier::REVERSED)
        );
    }
    // The letters after it are plain text, not escape-styled.
    let (x2, y2) = find(&b, "APPROVED by").unwrap();
    assert_ne!(b[(x2, y2)].fg, esc.fg.unwrap());
}

#[test]
fn selection_and_expired_cells_are_styled() {
    let (db, _) = all_db();
    let h = Harness::open(db, 80, 24);
    let b = h.buffer();
    let sel = h.app.theme.style(Role::Selection);
    // Row 3 is the first data row (header, title, column titles).
    assert_eq!(
        b[(0, 3)].bg,
        sel.bg.unwrap(),
        "the cursor row is highlighted"
    );
    assert_ne!(b[(0, 4)].bg, sel.bg.unwrap(), "other rows are not");
    let danger = h.app.theme.style(Role::Danger);
    let (x, y) = find(&b, "1m ago").expect("an expired approval");
    assert_eq!(
        b[(x, y)].bg,
        danger.bg.unwrap(),
        "an expired countdown is drawn as danger at {x},{y}: {:?}",
        b[(x, y)]
    );
}

#[test]
fn no_single_key_changes_state() {
    let (db, m) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.command(&format!("approval {}", approval_of(m, "waiting")));
    for c in "arxRy".chars() {
        h.key(KeyCode::Char(c));
        if h.app.overlay.is_some() {
            h.key(KeyCode::Esc);
        }
    }
    assert!(
        h.commands.is_empty(),
        "a single key never sends a decision: {:?}",
        h.commands
    );
    // Approve then enter does send exactly one approve, with the hash that was shown.
    h.keys("a");
    h.key(KeyCode::Enter);
    assert_eq!(h.commands.len(), 1);
    match &h.commands[0] {
        Write::Decide {
            choice: Choice::Approve,
            shown_hash,
            by,
            ..
        } => {
            assert_eq!(by, "tester");
            assert_eq!(shown_hash.len(), 64);
        }
        c => panic!("expected approve, got {c:?}"),
    }
}

#[test]
fn reject_without_a_reason_is_refused() {
    let (db, m) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.command(&format!("approval {}", approval_of(m, "waiting")));
    h.keys("r");
    h.key(KeyCode::Enter);
    assert!(h.commands.is_empty());
    assert!(h.screen().contains("a reason is required"));
}

#[test]
fn a_late_reply_is_dropped() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    let before = h.screen();
    // A reply whose id nobody waits for (e.g. for a screen already left).
    let fx = update(
        &mut h.app,
        Input::Reply(
            999_999,
            Reply::Queue(Page {
                offset: 0,
                total: 0,
                rows: vec![],
                exact: true,
            }),
        ),
    );
    assert!(fx.is_empty());
    assert_eq!(h.screen(), before, "the queue still shows its rows");
}

#[test]
fn the_queue_draws_its_rows_before_its_count_and_the_header_waits_for_its_counts() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    // What the counting lane answers later is not there yet: the header says so, no zeros.
    h.app.counts = None;
    let s = h.screen();
    assert!(s.contains("pending …"), "{s}");
    assert!(!s.contains("pending 0"), "{s}");
    // A reload: answer its queue read with an inexact page (rows, and "more follow").
    let fx = update(&mut h.app, Input::DataChanged);
    let (qid, filter) = fx
        .iter()
        .find_map(|e| match e {
            Effect::Query(id, Query::Queue { filter, .. }) => Some((*id, filter.clone())),
            _ => None,
        })
        .expect("the queue is read again");
    let rows = match &h.app.stack[0] {
        Screen::Queue(s) => s.list.page.rows.clone(),
        _ => panic!("the queue is the root"),
    };
    assert!(rows.len() >= 2);
    let n = rows.len() as u64;
    let fx = update(
        &mut h.app,
        Input::Reply(
            qid,
            Reply::Queue(Page {
                offset: 0,
                total: n + 1,
                rows,
                exact: false,
            }),
        ),
    );
    // The rows are shown now, the position says the count is a lower bound, and the count is
    // asked for (on the counting lane) for the same filter.
    let cid = match fx.as_slice() {
        [Effect::Query(id, Query::QueueTotal { filter: f })] if *f == filter => *id,
        other => panic!("one count request follows the page: {other:?}"),
    };
    assert!(countersign::console::testing::is_count(
        &Query::QueueTotal {
            filter: filter.clone()
        }
    ));
    let s = h.screen();
    assert!(s.contains(&format!("1/{}+", n + 1)), "{s}");
    // A count for another read is not this list's.
    update(&mut h.app, Input::Reply(cid + 1000, Reply::Total(7)));
    assert!(h.screen().contains(&format!("1/{}+", n + 1)));
    update(&mut h.app, Input::Reply(cid, Reply::Total(4242)));
    let s = h.screen();
    assert!(s.contains("1/4242") && !s.contains("1/4242+"), "{s}");
}

#[test]
fn ctrl_c_quits_from_an_overlay_and_q_only_at_the_root() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.keys("2");
    let fx = update(
        &mut h.app,
        Input::Key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE)),
    );
    assert!(
        !fx.contains(&Effect::Quit),
        "q goes back from a pushed screen"
    );
    h.keys("/");
    let fx = update(
        &mut h.app,
        Input::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
    );
    assert!(fx.contains(&Effect::Quit));
}

#[test]
fn paste_goes_only_into_inputs() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.input(Input::Paste("2f\n".into()));
    assert!(
        h.screen().contains("Pending approvals"),
        "a paste outside an input does nothing"
    );
    h.keys("/");
    h.input(Input::Paste("refund\nx".into()));
    assert!(h.screen().contains("/refund x"), "{}", h.screen());
}

#[test]
fn live_reload_keeps_the_cursor_on_the_same_row() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "live", "queue", &[]);
    let mut h = Harness::open(&db, 80, 24);
    h.keys("jj");
    let sel = h.app.stack.last().and_then(|s| match s {
        countersign::console::testing::Screen::Queue(q) => {
            q.list.selected().map(|r| r.approval_id.clone())
        }
        _ => None,
    });
    // Another connection removes the first pending approval from the queue.
    let w = rusqlite::Connection::open(&db).unwrap();
    w.execute("UPDATE approvals SET status = 'expired' WHERE rowid = (SELECT MIN(rowid) FROM approvals WHERE status = 'pending')", []).unwrap();
    h.input(Input::DataChanged);
    let now = h.app.stack.last().and_then(|s| match s {
        countersign::console::testing::Screen::Queue(q) => Some((
            q.list.cursor,
            q.list.selected().map(|r| r.approval_id.clone()),
        )),
        _ => None,
    });
    assert_eq!(
        now,
        Some((1, sel)),
        "same approval selected, one row higher"
    );
}

struct FakeResume(String);

impl countersign::console::testing::ResumeHook for FakeResume {
    fn can_resume(&self, run_id: &str) -> bool {
        run_id == self.0
    }
    fn resume(&self, _db: &std::path::Path, run_id: &str) -> Result<String, String> {
        Ok(format!("resumed {run_id}"))
    }
}

fn worker_for(
    hook: FakeResume,
) -> (
    std::sync::mpsc::Sender<countersign::console::testing::Job>,
    std::sync::mpsc::Receiver<Input>,
) {
    let (db, _) = all_db();
    let data = countersign::console::testing::SqliteData::open(db).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let w = countersign::console::testing::Worker {
        data: Box::new(data),
        decider: None,
        resume: Some(std::sync::Arc::new(hook)),
        db: db.clone(),
        poll: None,
        log: None,
    };
    (w.spawn(tx), rx)
}

#[test]
fn resume_runs_in_the_background_with_progress_and_result() {
    use countersign::console::testing::Job;
    use countersign::console::testing::Write;
    let (_, m) = all_db();
    let run = run_of(m, "approved");
    let (jobs, rx) = worker_for(FakeResume(run.clone()));
    jobs.send(Job::Write(
        7,
        Write::Resume {
            run: run.clone().into(),
        },
    ))
    .unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        got.push(rx.recv().unwrap());
    }
    assert!(
        matches!(&got[0], Input::Progress(7, m) if m.contains("resuming")),
        "{got:?}"
    );
    assert!(
        matches!(&got[1], Input::Done(7, Ok(m)) if *m == format!("resumed {run}")),
        "{got:?}"
    );
    // A run whose tools this build does not register is refused, not attempted.
    jobs.send(Job::Write(
        8,
        Write::Resume {
            run: "other".into(),
        },
    ))
    .unwrap();
    match rx.recv().unwrap() {
        Input::Done(8, Err(e)) => {
            assert!(e.to_string().contains("does not register the tools"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_worker_answers_queries_tagged_with_their_id() {
    use countersign::console::testing::Job;
    use countersign::console::testing::Query;
    let (jobs, rx) = worker_for(FakeResume(String::new()));
    jobs.send(Job::Query(41, Query::Counts)).unwrap();
    match rx.recv().unwrap() {
        Input::Reply(41, Reply::Counts(c)) => assert!(c.runs >= 12 && c.pending >= 1, "{c:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn verify_command_reports_the_whole_chain() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 100, 24);
    h.command("verify");
    let s = h.screen();
    assert!(s.contains("event chain verified:"), "{s}");
    let d = tempfile::tempdir().unwrap();
    let (bad, _) = fixture(
        d.path(),
        "chain",
        "completed,waiting",
        &["--tamper", "chain"],
    );
    let mut h = Harness::open(&bad, 100, 24);
    h.command("verify");
    let s = h.screen();
    assert!(s.contains("event chain broken at seq"), "{s}");
}

#[test]
fn mono_theme_marks_selection_by_reversal() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.app.theme = countersign::console::testing::Theme::load(
        "default",
        None,
        countersign::console::testing::Depth::Mono,
    )
    .unwrap();
    let b = h.buffer();
    assert!(
        b[(0, 3)]
            .modifier
            .contains(ratatui::style::Modifier::REVERSED),
        "selected row reversed"
    );
    assert_eq!(b[(0, 3)].bg, ratatui::style::Color::Reset, "and no colour");
}

/// The queue's scenarios and 300 completed runs of one step each: a runs list of several
/// screens.
fn three_hundred_runs(dir: &std::path::Path) -> std::path::PathBuf {
    let (db, _) = fixture(
        dir,
        "big",
        "queue,completed",
        &["--big", "300", "--steps-per-run", "1"],
    );
    db
}

#[test]
fn runs_read_by_key_around_an_anchor_equal_runs_read_by_offset() {
    use countersign::console::testing::{ConsoleData, Query};
    let d = tempfile::tempdir().unwrap();
    let db = three_hundred_runs(d.path());
    let mut data = countersign::console::testing::SqliteData::open(&db).unwrap();
    let ids = |r: Reply| match r {
        Reply::Runs(p) => (
            p.total,
            p.rows
                .into_iter()
                .map(|r| r.id.as_str().unwrap().to_string())
                .collect::<Vec<_>>(),
        ),
        other => panic!("{other:?}"),
    };
    let read = |data: &mut countersign::console::testing::SqliteData,
                offset: u64,
                anchor: Option<(u64, String)>| {
        ids(data
            .query(&Query::Runs {
                status: None,
                filter: String::new(),
                offset,
                limit: 40,
                anchor,
                end: None,
            })
            .unwrap())
    };
    let (total, all) = {
        let r = data
            .query(&Query::Runs {
                status: None,
                filter: String::new(),
                offset: 0,
                limit: 1000,
                anchor: None,
                end: None,
            })
            .unwrap();
        ids(r)
    };
    assert_eq!(total as usize, all.len());
    for ai in [0u64, 1, 39, 100, 250, all.len() as u64 - 1] {
        let anchor = Some((ai, all[ai as usize].clone()));
        for off in [
            ai.saturating_sub(60),
            ai.saturating_sub(13),
            ai,
            ai + 1,
            ai + 17,
            ai + 40,
            ai + 79,
        ] {
            let by_key = read(&mut data, off, anchor.clone());
            let by_offset = read(&mut data, off, None);
            assert_eq!(by_key, by_offset, "anchor {ai}, offset {off}");
        }
    }
    // With a text filter too.
    let f = |offset, anchor| Query::Runs {
        status: Some(countersign::runtime::types::RunStatus::Completed),
        filter: "order".into(),
        offset,
        limit: 25,
        anchor,
        end: None,
    };
    let (_, filtered) = ids(data.query(&f(0, None)).unwrap());
    assert!(filtered.len() > 10, "{}", filtered.len());
    let anchor = Some((5u64, filtered[5].clone()));
    assert_eq!(
        ids(data.query(&f(3, anchor.clone())).unwrap()),
        ids(data.query(&f(3, None)).unwrap())
    );
    assert_eq!(
        ids(data.query(&f(9, anchor)).unwrap()),
        ids(data.query(&f(9, None)).unwrap())
    );
}

#[test]
fn the_first_screen_is_read_before_the_header_counts() {
    use countersign::console::testing::Keymap;
    use countersign::console::testing::{App, AppConfig};
    use countersign::console::testing::{Depth, Theme};
    let theme = Theme::load("default", None, Depth::TrueColor).unwrap();
    let cfg = AppConfig {
        by: "t".into(),
        read_only: true,
        can_resume: false,
    };
    let mut app = App::new(cfg, Keymap::default(), theme, 0, (80, 24));
    let is_counts = |e: &Effect| matches!(e, Effect::Query(_, Query::Counts));
    let fx = app.start();
    assert!(
        !fx.iter().any(is_counts),
        "no count before the rows: {fx:?}"
    );
    let qid = fx
        .iter()
        .find_map(|e| match e {
            Effect::Query(id, Query::Queue { .. }) => Some(*id),
            _ => None,
        })
        .expect("the queue is read first");
    let fx = update(
        &mut app,
        Input::Reply(
            qid,
            Reply::Queue(Page {
                offset: 0,
                total: 0,
                rows: vec![],
                exact: true,
            }),
        ),
    );
    assert_eq!(fx.iter().filter(|e| is_counts(e)).count(), 1, "{fx:?}");
    let cid = fx
        .iter()
        .find_map(|e| match e {
            Effect::Query(id, Query::Counts) => Some(*id),
            _ => None,
        })
        .unwrap();
    // Once asked, not asked again by the next reply.
    let fx = update(&mut app, Input::Reply(qid + 1000, Reply::Total(3)));
    assert!(!fx.iter().any(is_counts), "{fx:?}");
    // A count that fails says so, and is asked again with the next reply.
    update(
        &mut app,
        Input::Reply(
            cid,
            Reply::Failed(DataError::Read("database disk image is malformed".into())),
        ),
    );
    assert_eq!(
        app.notice.as_ref().map(|n| n.1.as_slice()),
        Some(b"header counts: database read failed: database disk image is malformed".as_slice())
    );
    assert!(app.counts.is_none());
    let fx = update(&mut app, Input::Reply(qid + 1001, Reply::Total(3)));
    assert_eq!(fx.iter().filter(|e| is_counts(e)).count(), 1, "{fx:?}");
}

/// Issue 14 item 8: scrolling a run's events asks for the next window by key around the first
/// event already read, and what it shows is the offset read's window.
#[test]
fn scrolling_events_reads_the_next_window_by_key() {
    use countersign::console::testing::ConsoleData;
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(
        d.path(),
        "log",
        "none",
        &["--big", "1", "--steps-per-run", "120"],
    );
    let run: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT id FROM runs LIMIT 1", [], |r| r.get(0))
        .unwrap();
    let mut h = Harness::open(&db, 100, 30);
    h.command(&format!("run {run}"));
    h.key(KeyCode::Tab);
    assert!(h.screen().contains("run.created"), "{}", h.screen());
    // Page down until the console asks for a second window further down the log (the first
    // is read from the log's start, as near as any anchor).
    let mut found = None;
    for _ in 0..60 {
        let fx = update(
            &mut h.app,
            Input::Key(KeyEvent::new(KeyCode::PageDown, KeyModifiers::NONE)),
        );
        found = fx.iter().find_map(|e| match e {
            Effect::Query(_, q @ Query::Events { anchor, .. }) if anchor.is_some() => {
                Some(q.clone())
            }
            _ => None,
        });
        h.run(fx);
        if found.is_some() {
            break;
        }
    }
    let q = found.expect("a window further down is read by key");
    let Query::Events {
        offset,
        limit,
        anchor,
        ..
    } = &q
    else {
        unreachable!()
    };
    let (ai, _) = anchor.expect("the window is read by key around an event already read");
    assert!(*offset > 0 && ai > 0, "{q:?}");
    let mut data = countersign::console::testing::SqliteData::open(&db).unwrap();
    let seqs = |r: Reply| match r {
        Reply::Events(p) => p.rows.into_iter().map(|e| e.seq).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    let by_key = seqs(data.query(&q).unwrap());
    let by_offset = seqs(
        data.query(&Query::Events {
            run: run.clone().into(),
            offset: *offset,
            limit: *limit,
            anchor: None,
            end: None,
        })
        .unwrap(),
    );
    assert!(!by_key.is_empty());
    assert_eq!(by_key, by_offset);
}

/// Issue 14 item 6: a request over a page's cap but under 1 MiB is still read whole by the
/// approval detail (shown and decidable as before); only a larger one is named by its size.
#[test]
fn a_request_under_a_mebibyte_is_still_read_whole_by_the_detail() {
    use countersign::console::testing::ConsoleData;
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "mid", "waiting", &[]);
    let id = approval_of(&m, "waiting");
    let pad = "y".repeat(300_000);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE approvals SET request_json = json_set(request_json, '$.args.pad', ?1) WHERE id = ?2",
            rusqlite::params![pad, id],
        )
        .unwrap();
    let mut data = countersign::console::testing::SqliteData::open(&db).unwrap();
    let row = match data
        .query(&Query::Approval {
            id: id.clone().into(),
        })
        .unwrap()
    {
        Reply::Approval(Some(r)) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(row.request_not_shown, None);
    assert_eq!(row.decode_error, None);
    assert!(row.request.len() > 300_000, "{}", row.request.len());
}

/// Issue 14 item 8: `G`/End from the top of a run's events reads the last window by key in
/// reverse. On a log longer than a window counts (1 500 events, the count stops at 1 000 and
/// the position says `1/1001+`) its length is asked first, on the counting lane, and then the
/// window at the end is read from the end (`end` = that length); on a short log the window is
/// read from the end at once. The cursor is on the last event, the position is exact, and the
/// rows are the ones an offset read gives.
#[test]
fn jumping_to_the_end_reads_the_last_window_from_the_end() {
    use countersign::console::testing;
    use countersign::console::testing::ConsoleData;
    let d = tempfile::tempdir().unwrap();
    let end_key = || Input::Key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE));
    let events_of = |h: &Harness| match h.app.stack.last() {
        Some(Screen::RunDetail(s)) => s.events.clone(),
        _ => panic!("the run detail is on top"),
    };
    for n in [1_500u64, 300] {
        let db = d.path().join(format!("long{n}.db"));
        long::write(&db, n as i64);
        let mut h = Harness::open(&db, 100, 30);
        h.command("run a");
        h.key(KeyCode::Tab);
        let s = h.screen();
        let mut fx = update(&mut h.app, end_key());
        if n > 1_000 {
            assert!(s.contains("1/1001+"), "{s}");
            // The length first, on the counting lane.
            let (lid, lq) = match fx.as_slice() {
                [Effect::Query(id, q @ Query::Length(inner))]
                    if matches!(**inner, Query::Events { .. }) =>
                {
                    (*id, q.clone())
                }
                other => panic!("a jump past the count asks for the length: {other:?}"),
            };
            assert!(testing::is_count(&lq));
            let r = testing::handle(&mut h.data, &lq);
            assert_eq!(r, Reply::Total(n));
            fx = update(&mut h.app, Input::Reply(lid, r));
        } else {
            assert!(s.contains(&format!("1/{n}")), "{s}");
        }
        let q = fx
            .iter()
            .find_map(|e| match e {
                Effect::Query(_, q @ Query::Events { .. }) => Some(q.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("the window at the end is read: {fx:?}"));
        let Query::Events {
            run,
            offset,
            limit,
            end,
            ..
        } = &q
        else {
            unreachable!()
        };
        assert_eq!(*end, Some(n), "read from the end: {q:?}");
        assert!(*offset + *limit >= n, "{q:?}");
        let by_offset = h
            .data
            .query(&Query::Events {
                run: run.clone(),
                offset: *offset,
                limit: *limit,
                anchor: None,
                end: None,
            })
            .unwrap();
        let seqs = |r: Reply| match r {
            Reply::Events(p) => (p.offset, p.rows.iter().map(|e| e.seq).collect::<Vec<_>>()),
            other => panic!("{other:?}"),
        };
        assert_eq!(seqs(h.data.query(&q).unwrap()), seqs(by_offset));
        h.run(fx);
        let ev = events_of(&h);
        assert_eq!(ev.cursor, n - 1);
        assert_eq!(
            ev.selected().map(|e| e.seq),
            Some(n as i64),
            "the last event"
        );
        let s = h.screen();
        assert!(
            s.contains(&format!("{n}/{n}")) && !s.contains(&format!("{n}/{n}+")),
            "{s}"
        );
    }
}

/// A hook whose recheck says which thread asked it.
struct WhichThread;

impl countersign::console::testing::ResumeHook for WhichThread {
    fn can_resume(&self, _: &str) -> bool {
        false
    }
    fn resume(&self, _: &std::path::Path, _: &str) -> Result<String, String> {
        Err("no".into())
    }
    fn recheck(
        &self,
        _: &std::path::Path,
        _: &str,
    ) -> Result<countersign::runtime::driver::RecheckReport, String> {
        Err(format!(
            "asked on {}",
            std::thread::current().name().unwrap_or("?")
        ))
    }
}

#[test]
fn the_decision_pages_recheck_runs_on_the_database_thread() {
    use countersign::console::testing::{Job, Query, Recheck, Worker};
    let (db, m) = all_db();
    let q = |run: &str| Query::Recheck {
        run: run.into(),
        step: "s".into(),
    };
    let spawn = |hook: Option<std::sync::Arc<dyn countersign::console::testing::ResumeHook>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        let w = Worker {
            data: Box::new(countersign::console::testing::SqliteData::open(db).unwrap()),
            decider: None,
            resume: hook,
            db: db.clone(),
            poll: None,
            log: None,
        };
        (w.spawn(tx), rx)
    };
    let run = run_of(m, "waiting");
    let (jobs, rx) = spawn(Some(std::sync::Arc::new(WhichThread)));
    jobs.send(Job::Query(5, q(&run))).unwrap();
    match rx.recv().unwrap() {
        Input::Reply(5, Reply::Recheck(Recheck::Unavailable(m))) => {
            assert_eq!(m, "asked on countersign-db")
        }
        other => panic!("{other:?}"),
    }
    // A hook that does not override recheck, and no hook at all: the page says it cannot.
    let (jobs, rx) = worker_for(FakeResume(String::new()));
    jobs.send(Job::Query(6, q(&run))).unwrap();
    match rx.recv().unwrap() {
        Input::Reply(6, Reply::Recheck(Recheck::Unavailable(m))) => {
            assert!(m.contains("does not hold this run's policy"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    let (jobs, rx) = spawn(None);
    jobs.send(Job::Query(7, q(&run))).unwrap();
    assert!(matches!(
        rx.recv().unwrap(),
        Input::Reply(7, Reply::Recheck(Recheck::Unavailable(_)))
    ));
}

/// Issue 19's first frame: a list's first read asks for one screen, and once those rows are
/// shown the whole window around the cursor follows (so the first frame does not wait for the
/// screens below it); a first read that held the whole list is not read again.
#[test]
fn a_lists_first_read_is_one_screen_and_the_whole_window_follows() {
    let d = tempfile::tempdir().unwrap();
    let db = three_hundred_runs(d.path());
    let mut h = Harness::open(&db, 80, 24);
    let screen = u64::from(h.app.list_rows());
    let limit_of = |q: &Query| match q {
        Query::Runs { limit, .. } => Some(*limit),
        _ => None,
    };
    h.holding = true;
    h.keys("2");
    let firsts: Vec<u64> = h.held.iter().filter_map(|(_, q, _)| limit_of(q)).collect();
    assert_eq!(firsts, vec![screen], "one read of one screen");
    let (id, _, r) = h.held.remove(0);
    let fx = update(&mut h.app, Input::Reply(id, r));
    let rows_now = |h: &Harness| match h.app.top() {
        Screen::Runs(s) => s.list.page.rows.len() as u64,
        _ => panic!("not on the runs"),
    };
    // The first screen is shown before the rest is read...
    assert_eq!(rows_now(&h), screen);
    assert!(h.screen().contains("COMPLETED"), "{}", h.screen());
    // ...and the whole window follows.
    let wides: Vec<u64> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Query(_, q) => limit_of(q),
            _ => None,
        })
        .collect();
    assert_eq!(wides.len(), 1, "{fx:?}");
    assert!(wides[0] >= 3 * screen, "{wides:?} against {screen}");
    h.holding = false;
    h.run(fx);
    assert_eq!(rows_now(&h), wides[0]);
    // The cursor moves within what was read, no read of one screen again.
    h.holding = true;
    h.key(KeyCode::Down);
    assert!(h.held.is_empty(), "{} reads", h.held.len());

    // A list whose first read held all of it: no second read.
    let (all, _) = all_db();
    let mut h = Harness::open(all, 80, 60);
    h.holding = true;
    h.keys("2");
    let (id, _, r) = h.held.remove(0);
    let fx = update(&mut h.app, Input::Reply(id, r));
    match h.app.top() {
        Screen::Runs(s) => {
            assert!(
                s.list.page.exact,
                "the small database's runs fit one screen"
            );
            assert!((s.list.page.rows.len() as u64) < u64::from(h.app.list_rows()));
        }
        _ => panic!("not on the runs"),
    }
    assert!(
        !fx.iter()
            .any(|e| matches!(e, Effect::Query(_, q) if limit_of(q).is_some())),
        "{fx:?}"
    );
}

/// When the database stops answering the change checks (a server gone away), the header's
/// counts say STALE and a notice says why; the next read of the counts clears it (found from
/// outside: the header kept its old counts with nothing marking them).
#[test]
fn counts_read_before_the_database_stopped_answering_are_marked_stale() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 120, 30);
    let header = |h: &Harness| h.screen().lines().next().unwrap_or_default().to_string();
    assert!(!header(&h).contains("STALE"), "{}", header(&h));
    h.input(Input::DataUnreachable("connection closed".into()));
    assert!(
        header(&h).contains("pending") && header(&h).contains("STALE"),
        "{}",
        header(&h)
    );
    assert!(h.screen().contains("does not answer"), "{}", h.screen());
    // It answers again: the worker says the data changed, and the counts are read anew.
    h.input(Input::DataChanged);
    assert!(!header(&h).contains("STALE"), "{}", header(&h));
}
