//! Marks and bulk decisions in the console (issue 21), on real databases through the store's
//! shown-hash calls: marks kept by id across reloads and unmarked by name when their row left
//! the queue, one confirmation for a reject, deny or cancel of the marked rows, its dry run,
//! the result that names each row skipped, and the approve table. Every database still
//! verifies with the independent Python verifier afterwards.

mod console_support;

use std::path::Path;

use console_support::*;
use countersign::console::testing::{AppConfig, Choice, Input, Overlay, StoreDecider, Write};
use countersign::runtime::operator;
use countersign::runtime::types::Timestamp;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// 03:50 on the fixtures' day: the queue scenario's approvals have not expired yet.
fn at_0350() -> Timestamp {
    Timestamp::parse("2026-01-01T03:50:00Z").unwrap()
}

fn harness(db: &Path, w: u16, h: u16, read_only: bool) -> Harness {
    let cfg = AppConfig {
        by: "lead".into(),
        read_only,
        can_resume: false,
    };
    let decider = Box::new(StoreDecider::open(db).unwrap().with_clock(at_0350()));
    let mut h = Harness::with(db, w, h, cfg, decider);
    h.input(Input::Tick(at_0350().unix_secs()));
    h
}

fn queue_ids(m: &serde_json::Value) -> Vec<(String, String)> {
    (0..5)
        .map(|i| {
            let r = &m["scenarios"]["queue"]["runs"][i];
            (
                r["id"].as_str().unwrap().to_string(),
                r["approvals"][0].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn approval(db: &Path, id: &str) -> (String, String, String) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(
        "SELECT status, decided_by, note FROM approvals WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

fn run_status(db: &Path, run: &str) -> String {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("SELECT status FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .unwrap()
}

fn hash_of(db: &Path, id: &str) -> String {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("SELECT hash FROM approvals WHERE id = ?1", [id], |r| {
        r.get(0)
    })
    .unwrap()
}

fn verify(db: &Path) {
    let out = std::process::Command::new("python3")
        .arg(shared_dir().join("tools/agentrt_verify.py"))
        .arg(db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "agentrt_verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Another reviewer approves `ap` of `run` in its own connection.
fn approve_elsewhere(db: &Path, run: &str, ap: &str) {
    let store = countersign::runtime::store::Store::open_existing(db, false).unwrap();
    let hash = hash_of(db, ap);
    operator::approve_shown(&store, run, ap, &hash, "ana", "", at_0350()).unwrap();
}

fn dry_run_key(h: &mut Harness) {
    h.input(Input::Key(KeyEvent::new(
        KeyCode::Char('t'),
        KeyModifiers::CONTROL,
    )));
}

/// Marks the first `n` rows of the queue (space, then down).
/// The runs marked on the runs list, by id.
fn marked_runs(h: &Harness) -> Vec<String> {
    h.app
        .marks
        .runs
        .iter()
        .map(|m| m.run.as_str().unwrap().to_string())
        .collect()
}

fn mark_first(h: &mut Harness, n: usize) {
    for _ in 0..n {
        h.key(KeyCode::Char(' '));
        h.key(KeyCode::Char('j'));
    }
    h.key(KeyCode::Char('g'));
}

#[test]
fn space_marks_and_unmarks_rows_and_the_header_counts_them() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "q", "queue", &[]);
    let mut h = harness(&db, 80, 24, false);
    mark_first(&mut h, 2);
    let s = h.screen();
    assert!(s.contains("marked 2"), "{s}");
    assert_eq!(h.app.marks.rows.len(), 2);
    let starred = s.lines().filter(|l| l.starts_with('*')).count();
    assert_eq!(starred, 2, "each marked row starts with *: {s}");
    assert!(
        s.contains("r reject marked"),
        "the footer says what the keys do now: {s}"
    );
    snap("queue__marked@80x24", &s);
    // space again unmarks the selected row; u clears the rest.
    h.key(KeyCode::Char(' '));
    assert_eq!(h.app.marks.rows.len(), 1);
    h.key(KeyCode::Char('u'));
    assert!(h.app.marks.rows.is_empty());
    assert!(!h.screen().contains("marked "), "{}", h.screen());
}

#[test]
fn marks_survive_a_reload_and_a_row_that_left_the_queue_is_unmarked_by_name() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let ids = queue_ids(&m);
    let mut h = harness(&db, 80, 24, false);
    mark_first(&mut h, 3);
    approve_elsewhere(&db, &ids[1].0, &ids[1].1);
    // The worker's data_version poll says the database changed: the rows are read again.
    h.input(Input::DataChanged);
    let kept: Vec<String> = h
        .app
        .marks
        .rows
        .iter()
        .map(|m| m.approval.as_str().unwrap().to_string())
        .collect();
    assert_eq!(kept, vec![ids[0].1.clone(), ids[2].1.clone()]);
    let notice = String::from_utf8(h.app.notice.clone().unwrap().1).unwrap();
    assert!(
        notice.contains(&format!(
            "1 marked row(s) left the queue and were unmarked: {} (approved by ana)",
            ids[1].1
        )),
        "{notice}"
    );
    assert!(h.screen().contains("marked 2"), "{}", h.screen());
}

#[test]
fn mark_all_marks_every_row_of_the_filter() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let ids = queue_ids(&m);
    let mut h = harness(&db, 80, 24, false);
    h.keys("/issue_refund");
    h.key(KeyCode::Enter);
    h.keys("*");
    let mut marked: Vec<String> = h
        .app
        .marks
        .rows
        .iter()
        .map(|m| m.approval.as_str().unwrap().to_string())
        .collect();
    marked.sort();
    let mut want = vec![ids[0].1.clone(), ids[2].1.clone(), ids[4].1.clone()];
    want.sort();
    assert_eq!(marked, want, "the refunds, and only them");
    assert!(h.screen().contains("marked 3"), "{}", h.screen());
}

#[test]
fn bulk_reject_binds_each_marked_hash_and_names_the_row_decided_meanwhile() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let ids = queue_ids(&m);
    let mut h = harness(&db, 80, 24, false);
    mark_first(&mut h, 3);
    h.keys("r");
    let s = h.screen();
    assert!(s.contains("REJECT 3 MARKED"), "{s}");
    assert!(s.contains(&ids[0].1), "ids are listed whole: {s}");
    snap("bulk__reject_confirm@80x24", &s);
    // Another reviewer decides one after the confirmation listed it.
    approve_elsewhere(&db, &ids[1].0, &ids[1].1);
    h.key(KeyCode::Enter);
    assert!(h.commands.is_empty(), "no decision without a reason");
    h.keys("bad deploy");
    h.key(KeyCode::Enter);
    // Each write carried the hash its row was marked with.
    let sent: Vec<(String, String)> = h
        .commands
        .iter()
        .filter_map(|c| match c {
            Write::Decide {
                choice: Choice::Reject,
                approval,
                shown_hash,
                ..
            } => Some((approval.as_str().unwrap().to_string(), shown_hash.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 3, "{sent:?}");
    for (ap, hash) in &sent {
        assert_eq!(*hash, hash_of(&db, ap), "{ap}");
    }
    let s = h.screen();
    assert!(s.contains("rejected 2, skipped 1"), "{s}");
    assert!(s.contains(&ids[1].1), "the skipped row is named: {s}");
    assert!(s.contains("already approved by ana"), "{s}");
    snap("bulk__reject_result@80x24", &s);
    assert_eq!(
        approval(&db, &ids[0].1),
        ("rejected".into(), "lead".into(), "bad deploy".into())
    );
    assert_eq!(
        approval(&db, &ids[1].1).0,
        "approved",
        "ana's decision stands"
    );
    assert_eq!(approval(&db, &ids[2].1).0, "rejected");
    assert_eq!(
        approval(&db, &ids[3].1).0,
        "pending",
        "unmarked rows are left"
    );
    assert!(
        h.app.marks.rows.is_empty(),
        "decided and skipped rows are unmarked"
    );
    h.key(KeyCode::Esc);
    assert!(h.app.overlay.is_none());
    verify(&db);
}

#[test]
fn the_dry_run_says_what_would_happen_and_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let ids = queue_ids(&m);
    let mut h = harness(&db, 80, 24, false);
    mark_first(&mut h, 2);
    h.keys("r");
    approve_elsewhere(&db, &ids[0].0, &ids[0].1);
    let before = std::fs::read(&db).unwrap();
    dry_run_key(&mut h);
    let s = h.screen();
    assert!(s.contains("would reject 1, would skip 1"), "{s}");
    assert!(s.contains("already approved by ana"), "{s}");
    snap("bulk__dry_run@80x24", &s);
    assert!(h.commands.is_empty(), "a dry run sends no write");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the file is byte for byte the same"
    );
    assert_eq!(approval(&db, &ids[1].1).0, "pending");
    // Closing the dry run goes back to the confirmation.
    h.key(KeyCode::Esc);
    assert!(matches!(h.app.overlay, Some(Overlay::Bulk(_))));
    h.key(KeyCode::Esc);
    assert!(h.app.overlay.is_none());
    assert!(h.commands.is_empty());
}

#[test]
fn bulk_deny_interrupts_each_run_and_bulk_cancel_ends_each_run() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let ids = queue_ids(&m);
    let mut h = harness(&db, 100, 30, false);
    mark_first(&mut h, 2);
    h.keys("d");
    assert!(h.screen().contains("DENY 2 MARKED"), "{}", h.screen());
    h.keys("refund half");
    h.key(KeyCode::Enter);
    assert!(h.screen().contains("denied 2, skipped 0"), "{}", h.screen());
    for (run, ap) in &ids[..2] {
        assert_eq!(run_status(&db, run), "INTERRUPTED");
        assert_eq!(approval(&db, ap).2, "refund half");
    }
    h.key(KeyCode::Esc);
    h.key(KeyCode::Char('g'));
    mark_first(&mut h, 2);
    h.keys("x");
    assert!(h.screen().contains("CANCEL 2 MARKED"), "{}", h.screen());
    h.keys("customer withdrew");
    h.key(KeyCode::Enter);
    assert!(
        h.screen().contains("cancelled 2, skipped 0"),
        "{}",
        h.screen()
    );
    for (run, _) in &ids[2..4] {
        assert_eq!(run_status(&db, run), "CANCELLED");
    }
    assert_eq!(run_status(&db, &ids[4].0), "WAITING_FOR_APPROVAL");
    verify(&db);
}

#[test]
fn a_row_changed_after_it_was_marked_is_skipped_and_said() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let ids = queue_ids(&m);
    let mut h = harness(&db, 100, 30, false);
    mark_first(&mut h, 2);
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute(
        "UPDATE approvals SET hash = ?1 WHERE id = ?2",
        [&"0".repeat(64), &ids[0].1],
    )
    .unwrap();
    h.keys("r");
    assert!(
        h.screen().contains("changed since you marked it"),
        "{}",
        h.screen()
    );
    h.keys("stale");
    h.key(KeyCode::Enter);
    assert_eq!(
        approval(&db, &ids[0].1).0,
        "pending",
        "the changed row is not decided"
    );
    assert_eq!(approval(&db, &ids[1].1).0, "rejected");
    assert!(
        h.screen().contains("rejected 1, skipped 1"),
        "{}",
        h.screen()
    );
}

#[test]
fn the_approve_table_shows_what_each_runs_and_approves_each_with_its_own_hash() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let ids = queue_ids(&m);
    let mut h = harness(&db, 80, 24, false);
    mark_first(&mut h, 3);
    h.keys("a");
    let s = h.screen();
    assert!(s.contains("APPROVE 3 MARKED"), "{s}");
    assert!(s.contains("args.order_id"), "the arguments are shown: {s}");
    assert!(
        s.contains(&hash_of(&db, &ids[0].1)[..12]),
        "the hash prefix: {s}"
    );
    snap("bulk__approve_table@80x24", &s);
    // Not read to the end: enter approves nothing.
    h.key(KeyCode::Enter);
    assert!(h.commands.is_empty());
    assert!(
        h.screen().contains("read the whole table first"),
        "{}",
        h.screen()
    );
    // Leaving the table approves nothing.
    h.key(KeyCode::Esc);
    assert!(h.app.overlay.is_none() && h.commands.is_empty());
    assert_eq!(approval(&db, &ids[0].1).0, "pending");
    // Read to the end, then enter: each approved with its own hash.
    h.keys("a");
    h.keys("G");
    h.key(KeyCode::Enter);
    let sent: Vec<(String, String)> = h
        .commands
        .iter()
        .filter_map(|c| match c {
            Write::Decide {
                choice: Choice::Approve,
                approval,
                shown_hash,
                ..
            } => Some((approval.as_str().unwrap().to_string(), shown_hash.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 3);
    for (ap, hash) in &sent {
        assert_eq!(*hash, hash_of(&db, ap));
        assert_eq!(
            approval(&db, ap),
            ("approved".into(), "lead".into(), String::new())
        );
    }
    assert!(
        h.screen().contains("approved 3, skipped 0"),
        "{}",
        h.screen()
    );
    verify(&db);
}

#[test]
fn read_only_marks_but_decides_nothing() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "q", "queue", &[]);
    let mut h = harness(&db, 80, 24, true);
    mark_first(&mut h, 2);
    for k in ["r", "d", "x", "a"] {
        h.keys(k);
        assert!(h.app.overlay.is_none(), "{k}");
        assert!(h.screen().contains("read-only"), "{}", h.screen());
    }
    assert!(h.commands.is_empty());
}

#[test]
fn marked_runs_are_cancelled_with_one_reason_and_a_run_ended_meanwhile_is_named() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let ids = queue_ids(&m);
    let mut h = harness(&db, 80, 24, false);
    h.keys("2");
    mark_first(&mut h, 3);
    let s = h.screen();
    assert!(s.contains("runs marked 3"), "{s}");
    let marked: Vec<String> = marked_runs(&h);
    h.keys("x");
    assert!(h.screen().contains("CANCEL 3 MARKED"), "{}", h.screen());
    snap("bulk__cancel_runs_confirm@80x24", &h.screen());
    // Another operator cancels one of them after the confirmation listed it.
    let store = countersign::runtime::store::Store::open_existing(&db, false).unwrap();
    operator::cancel(&store, marked[1].as_str(), "ana", "dup", at_0350()).unwrap();
    dry_run_key(&mut h);
    assert!(
        h.screen().contains("would cancel 2, would skip 1"),
        "{}",
        h.screen()
    );
    h.key(KeyCode::Esc);
    h.keys("customer withdrew");
    h.key(KeyCode::Enter);
    let s = h.screen();
    assert!(s.contains("cancelled 2, skipped 1"), "{s}");
    assert!(
        s.contains(&marked[1]),
        "the run ended meanwhile is named: {s}"
    );
    for run in [&marked[0], &marked[2]] {
        assert_eq!(run_status(&db, run), "CANCELLED");
        let c = rusqlite::Connection::open(&db).unwrap();
        let detail: String = c
            .query_row("SELECT reason_detail FROM runs WHERE id = ?1", [run], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(detail, "customer withdrew");
    }
    let untouched = ids
        .iter()
        .filter(|(r, _)| !marked.contains(r))
        .map(|(r, _)| run_status(&db, r))
        .collect::<Vec<_>>();
    assert_eq!(untouched, vec!["WAITING_FOR_APPROVAL"; 2]);
    assert!(h.app.marks.runs.is_empty());
    verify(&db);
}

/// A marked run that another operator ends is unmarked when the database changes, and named
/// with the status it ended in; the runs still running stay marked.
#[test]
fn a_marked_run_that_ended_elsewhere_is_unmarked_by_name() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "q", "queue", &[]);
    let mut h = harness(&db, 80, 24, false);
    h.keys("2");
    mark_first(&mut h, 3);
    let marked: Vec<String> = marked_runs(&h);
    assert_eq!(marked.len(), 3);
    let store = countersign::runtime::store::Store::open_existing(&db, false).unwrap();
    operator::cancel(&store, marked[1].as_str(), "ana", "dup", at_0350()).unwrap();
    h.input(Input::DataChanged);
    let kept: Vec<String> = marked_runs(&h);
    assert_eq!(kept, vec![marked[0].clone(), marked[2].clone()]);
    let notice = String::from_utf8(h.app.notice.clone().unwrap().1).unwrap();
    assert!(
        notice.contains(&format!(
            "1 marked run(s) ended and were unmarked: {} (CANCELLED)",
            marked[1]
        )),
        "{notice}"
    );
    assert!(h.screen().contains("runs marked 2"), "{}", h.screen());
}

/// Whether a drawn cell holds a character that would act on a terminal or reorder text.
fn raw_hostile(s: &str) -> bool {
    s.chars().any(|c| {
        c.is_control()
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
            || ('\u{200b}'..='\u{200f}').contains(&c)
    })
}

#[test]
fn the_bulk_overlays_draw_hostile_rows_escaped() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 120, 40);
    h.keys("*");
    assert!(!h.app.marks.rows.is_empty());
    for (key, title, down) in [
        ("r", "REJECT", KeyCode::Down),
        ("a", "APPROVE", KeyCode::Char('j')),
    ] {
        h.keys(key);
        let (mut escapes, mut warned) = (false, false);
        // Every line of the overlay, scrolled through.
        for _ in 0..150 {
            let b = h.buffer();
            let s = buffer_text(&b);
            assert!(s.contains(title), "{s}");
            for y in 0..b.area.height {
                for x in 0..b.area.width {
                    let sym = b[(x, y)].symbol();
                    assert!(!raw_hostile(sym), "raw {sym:?} at {x},{y}:\n{s}");
                }
            }
            escapes |= s.contains("\\u{");
            warned |= s.contains("⚠ its arguments hold");
            h.key(down);
        }
        // The hostile row's text is in its arguments, which the approve table shows whole.
        assert!(
            escapes || title == "REJECT",
            "escapes are drawn visibly ({title})"
        );
        assert!(
            warned || title == "REJECT",
            "the table badges the hostile row"
        );
        h.key(KeyCode::Esc);
    }
}

#[test]
fn a_row_the_table_cannot_show_whole_is_cut_visibly_and_not_approved_from_it() {
    let (db, m) = all_db();
    let hostile = approval_of(m, "hostile");
    let mut h = Harness::open(db, 80, 24);
    // Before any approval of the fixture expires: only the cut can keep a row out.
    h.input(Input::Tick(
        Timestamp::parse("2026-01-01T00:30:00Z")
            .unwrap()
            .unix_secs(),
    ));
    h.keys("*");
    h.keys("a");
    let t = match &h.app.overlay {
        Some(Overlay::ApproveTable(t)) => t.clone(),
        _ => panic!("the table is open: {}", h.screen()),
    };
    let cut: Vec<String> = t
        .rows
        .iter()
        .filter(|r| r.cut)
        .map(|r| r.item.marked.approval.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        cut,
        vec![hostile.clone()],
        "the hostile row's long note is cut"
    );
    h.keys("G");
    let s = h.screen();
    assert!(
        t.lines.iter().any(|l| l
            .to_string()
            .contains("more line(s) of arguments not shown here")),
        "the cut is visible: {s}"
    );
    h.key(KeyCode::Enter);
    let approved: Vec<String> = h
        .commands
        .iter()
        .filter_map(|c| match c {
            Write::Decide {
                choice: Choice::Approve,
                approval,
                ..
            } => Some(approval.as_str().unwrap().to_string()),
            _ => None,
        })
        .collect();
    assert!(!approved.is_empty());
    assert!(!approved.contains(&hostile), "{approved:?}");
    // The result names it skipped, with why.
    let Some(Overlay::BulkResult(r)) = &h.app.overlay else {
        panic!("the result is shown: {}", h.screen());
    };
    let why = r
        .skipped
        .iter()
        .find(|(i, _)| i.marked.approval.as_str() == Some(hostile.as_str()))
        .map(|(_, why)| String::from_utf8_lossy(why).into_owned());
    assert!(
        why.as_deref()
            .is_some_and(|w| w.contains("open it to read it whole and approve it")),
        "{why:?}"
    );
}

#[test]
fn a_second_bulk_decision_waits_for_the_first_ones_result() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "q", "queue", &[]);
    let mut h = harness(&db, 80, 24, false);
    mark_first(&mut h, 2);
    h.keys("r");
    h.keys("first");
    // Enter, with the writes not yet done (the worker is busy with them).
    let enter = KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE);
    let writes = countersign::console::testing::update(&mut h.app, Input::Key(enter));
    assert_eq!(writes.len(), 2);
    let again = KeyEvent::new(KeyCode::Char('r'), KeyModifiers::NONE);
    let fx = countersign::console::testing::update(&mut h.app, Input::Key(again));
    assert!(fx.is_empty() && h.app.overlay.is_none());
    assert!(
        h.app
            .notice
            .as_ref()
            .is_some_and(|(_, n)| String::from_utf8_lossy(n).contains("still running")),
        "{:?}",
        h.app.notice
    );
    h.run(writes);
    assert!(
        h.screen().contains("rejected 2, skipped 0"),
        "{}",
        h.screen()
    );
}
