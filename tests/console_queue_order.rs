//! Issue 21: the queue sorted and grouped by age, tool, target and amount (the consumer's
//! facts, decision 0050), a row without the key last and saying so; the selection follows its
//! row across re-sorts and reloads; the oldest pending age in the header; notifications of a
//! new approval, never for the initial load.

mod console_support;

use std::path::{Path, PathBuf};

use console_support::*;
use countersign::console::testing::{Input, Notify, Screen, Settings, Sort};

/// The `all` fixture with presentations that name targets and amounts, by approval rowid.
/// Returns the database and the pending approvals' ids by rowid.
fn facts_db(dir: &Path) -> (PathBuf, Vec<(i64, String)>) {
    let (db, _) = fixture(dir, "facts", "all", &[]);
    let c = rusqlite::Connection::open(&db).unwrap();
    let set = [
        (1, r#"{"amount_cents":8000,"target":"ord_1004"}"#),
        // Named twice: Go takes the last, SQLite's json_extract the first; neither is guessed.
        (
            2,
            r#"{"amount_cents":8000,"amount_cents":100,"target":"ord_1337"}"#,
        ),
        // The second listed key: `order` names the target when `target` is absent.
        (3, r#"{"amount_cents":2599,"order":"ord_1011"}"#),
        (4, "{\"target\":\"b\\u202eevil\"}"),
        (5, r#"{"amount_cents":125000,"target":"ord_1013"}"#),
        // Not an integer: no amount.
        (6, r#"{"amount_cents":"65"}"#),
        (7, r#"{"amount_cents":1,"target":"ord_1015","order":"zzz"}"#),
        (11, r#"{"amount_cents":3150,"target":"ord_1010"}"#),
    ];
    for (rowid, p) in set {
        c.execute(
            "UPDATE approvals SET presentation_json = ?1 WHERE rowid = ?2",
            rusqlite::params![p, rowid],
        )
        .unwrap();
    }
    let ids = pending(&c);
    (db, ids)
}

/// Pending approvals of waiting runs: (rowid, id), in rowid order.
fn pending(c: &rusqlite::Connection) -> Vec<(i64, String)> {
    let mut st = c
        .prepare(
            "SELECT a.rowid, a.id FROM approvals a JOIN runs r ON r.id = a.run_id \
             WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL' ORDER BY a.rowid",
        )
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn id_of(ids: &[(i64, String)], rowid: i64) -> String {
    ids.iter().find(|(r, _)| *r == rowid).unwrap().1.clone()
}

/// The queue's rows as shown, as approval rowids.
fn shown(h: &Harness, ids: &[(i64, String)]) -> Vec<i64> {
    let Screen::Queue(s) = h.app.top() else {
        panic!("not on the queue")
    };
    s.list
        .page
        .rows
        .iter()
        .map(|r| {
            let id = r.approval_id.as_str().unwrap();
            ids.iter().find(|(_, i)| i == id).unwrap().0
        })
        .collect()
}

fn sort_of(h: &Harness) -> Sort {
    match h.app.top() {
        Screen::Queue(s) => s.sort,
        _ => panic!("not on the queue"),
    }
}

fn selected(h: &Harness) -> String {
    match h.app.top() {
        Screen::Queue(s) => s
            .list
            .selected()
            .unwrap()
            .approval_id
            .as_str()
            .unwrap()
            .to_string(),
        _ => panic!("not on the queue"),
    }
}

/// Presses the sort key until the queue is in `want`.
fn sort_by(h: &mut Harness, want: Sort) {
    for _ in 0..4 {
        if sort_of(h) == want {
            return;
        }
        h.keys("o");
    }
    panic!("the sort key never reached {want:?}");
}

#[test]
fn by_amount_the_largest_comes_first_and_rows_without_one_come_last_and_say_so() {
    let d = tempfile::tempdir().unwrap();
    let (db, ids) = facts_db(d.path());
    let mut h = Harness::open(&db, 120, 40);
    sort_by(&mut h, Sort::Amount);
    // 125000, 8000, 3150, 2599, 1; then no amount (4: none, 6: a string, 10: none) in the
    // queue's order; then the one that names its amount twice.
    assert_eq!(shown(&h, &ids), [5, 1, 11, 3, 7, 4, 6, 10, 2]);
    let screen = h.screen();
    assert!(screen.contains("by amount, largest first"), "{screen}");
    assert!(screen.contains("AMOUNT"), "{screen}");
    assert!(screen.contains("125000"), "{screen}");
    assert!(screen.contains("(none)"), "{screen}");
    assert!(screen.contains("(twice)"), "{screen}");
}

#[test]
fn by_target_the_first_listed_key_names_it_and_its_text_is_escaped() {
    let d = tempfile::tempdir().unwrap();
    let (db, ids) = facts_db(d.path());
    let mut h = Harness::open(&db, 120, 40);
    sort_by(&mut h, Sort::Target);
    // Bytes order: "b\u{202e}evil" < "ord_1004" < "ord_1010" < "ord_1011" (`order`, 3) <
    // "ord_1013" < "ord_1015" (`target` wins over `order`, 7) < "ord_1337"; none: 6, 10.
    assert_eq!(shown(&h, &ids), [4, 1, 11, 3, 5, 7, 2, 6, 10]);
    let screen = h.screen();
    assert!(screen.contains("by target, A-Z"), "{screen}");
    assert!(
        screen.contains("b\\u{202e}evil"),
        "escaped, not drawn: {screen}"
    );
    assert!(!screen.contains('\u{202e}'));
}

#[test]
fn by_tool_ties_keep_the_queue_order_and_an_undecodable_request_comes_last() {
    let d = tempfile::tempdir().unwrap();
    let (db, ids) = facts_db(d.path());
    let mut h = Harness::open(&db, 120, 40);
    let age_order = shown(&h, &ids);
    sort_by(&mut h, Sort::Tool);
    let by_tool = shown(&h, &ids);
    let Screen::Queue(s) = h.app.top() else {
        unreachable!()
    };
    let tools: Vec<Option<Vec<u8>>> = s.list.page.rows.iter().map(|r| r.tool.clone()).collect();
    // Grouped by tool (A-Z), the request that does not decode last.
    let named: Vec<&Vec<u8>> = tools.iter().flatten().collect();
    let mut sorted = named.clone();
    sorted.sort();
    assert_eq!(named, sorted, "tools in order");
    assert_eq!(tools.last(), Some(&None), "the undecodable one last");
    // Stable: within a tool, the queue's own (age) order.
    for t in &sorted {
        let group: Vec<i64> = by_tool
            .iter()
            .zip(&tools)
            .filter(|(_, x)| x.as_ref() == Some(*t))
            .map(|(r, _)| *r)
            .collect();
        let in_age: Vec<i64> = age_order
            .iter()
            .copied()
            .filter(|r| group.contains(r))
            .collect();
        assert_eq!(group, in_age, "ties in queue order");
    }
}

#[test]
fn the_selection_follows_its_row_across_re_sorts_and_reloads() {
    let d = tempfile::tempdir().unwrap();
    let (db, ids) = facts_db(d.path());
    let mut h = Harness::open(&db, 80, 24);
    h.keys("jjj");
    let chosen = selected(&h);
    assert_eq!(chosen, id_of(&ids, 4));
    for _ in 0..5 {
        h.keys("o");
        assert_eq!(selected(&h), chosen, "after sorting {:?}", sort_of(&h));
        h.input(Input::DataChanged);
        assert_eq!(selected(&h), chosen, "after a reload in {:?}", sort_of(&h));
    }
    // And it is the row drawn selected.
    let screen = h.screen();
    assert!(screen.contains("by tool"), "{screen}");
}

#[test]
fn snapshots_of_the_sorted_queue() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = facts_db(d.path());
    for (sort, name) in [
        (Sort::Tool, "queue__by_tool"),
        (Sort::Target, "queue__by_target"),
        (Sort::Amount, "queue__by_amount"),
    ] {
        let mut h = Harness::open(&db, 80, 24);
        sort_by(&mut h, sort);
        snap(&format!("{name}@80x24"), &h.screen());
    }
}

#[test]
fn the_header_shows_the_oldest_pending_age() {
    let (db, _) = all_db();
    let h = Harness::open(db, 120, 40);
    let screen = h.screen();
    let head = screen.lines().next().unwrap();
    assert!(head.contains("pending 9 · oldest 3h09m"), "{head}");
    let h = Harness::open(db, 80, 24);
    let head = h.screen().lines().next().unwrap().to_string();
    assert!(head.contains("oldest 3h09m"), "narrow too: {head}");
}

/// Adds a pending approval to the queue, as a copy of approval `rowid` under a new id.
fn add_approval(db: &Path, rowid: i64) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch(&format!(
        "CREATE TEMP TABLE t AS SELECT * FROM approvals WHERE rowid = {rowid};
         UPDATE t SET id = 'appr_new_' || id;
         INSERT INTO approvals SELECT * FROM t;"
    ))
    .unwrap();
}

#[test]
fn a_new_approval_notifies_once_and_the_initial_load_never_does() {
    for how in [Notify::Bell, Notify::Osc9, Notify::Osc777] {
        let d = tempfile::tempdir().unwrap();
        let (db, _) = fixture(d.path(), "n", "all", &[]);
        let settings = Settings {
            notify: how,
            ..Default::default()
        };
        let mut h = Harness::open_with(&db, 80, 24, settings);
        // The initial load (rows, then counts) and a reload with nothing new: silent.
        h.input(Input::DataChanged);
        assert!(h.notified.is_empty(), "{how:?}: {:?}", h.notified);
        add_approval(&db, 1);
        h.input(Input::DataChanged);
        assert_eq!(h.notified, [(how, 10)], "{how:?}");
        h.input(Input::DataChanged);
        assert_eq!(h.notified.len(), 1, "{how:?}: once per arrival");
    }
}

#[test]
fn notifications_are_off_by_default() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "n", "all", &[]);
    let mut h = Harness::open(&db, 80, 24);
    assert_eq!(h.app.settings.notify, Notify::Off);
    add_approval(&db, 1);
    h.input(Input::DataChanged);
    assert!(h.notified.is_empty());
}

/// Presentations an attacker or a damaged write may leave: not JSON, not an object, a value
/// that is not UTF-8, a key spelt with an escape. Every row stays listed, nothing fails, and
/// what a row was sorted by is drawn escaped.
#[test]
fn hostile_presentations_sort_without_failing_and_are_drawn_escaped() {
    let d = tempfile::tempdir().unwrap();
    let (db, ids) = facts_db(d.path());
    let c = rusqlite::Connection::open(&db).unwrap();
    let set: [(i64, &[u8]); 6] = [
        (1, b"not json"),
        (2, b"[\"target\", 1]"),
        // A control character, escaped in the JSON: the decoded value holds ESC.
        (3, b"{\"target\":\"\\u001b[2J\"}"),
        (6, b"{\"target\":\"\xff\xfe\"}"),
        (4, b"{\"t\\u0061rget\":\"escaped key\"}"),
        (5, b"{\"target\":{\"nested\":true}}"),
    ];
    for (rowid, p) in set {
        // As TEXT whose bytes are not UTF-8 (SQLite keeps them as given).
        c.execute(
            "UPDATE approvals SET presentation_json = CAST(?1 AS TEXT) WHERE rowid = ?2",
            rusqlite::params![p, rowid],
        )
        .unwrap();
    }
    for sort in [Sort::Tool, Sort::Target, Sort::Amount] {
        let mut h = Harness::open(&db, 120, 40);
        sort_by(&mut h, sort);
        let mut rows = shown(&h, &ids);
        assert_eq!(rows.len(), 9, "{sort:?}: every row listed");
        rows.sort();
        assert_eq!(rows, [1, 2, 3, 4, 5, 6, 7, 10, 11], "{sort:?}");
        let screen = h.screen();
        assert!(
            !screen.contains("read failed"),
            "{sort:?}: the read answers: {screen}"
        );
        assert!(screen.contains(sort.label()), "{sort:?}: {screen}");
        assert!(
            !screen.contains('\u{1b}'),
            "{sort:?}: no raw escape: {screen}"
        );
        if sort == Sort::Target {
            assert!(screen.contains("\\x1b[2J"), "{screen}");
            // SQLite's json_each reads an escaped key as Go does: `t\u0061rget` is `target`.
            assert!(screen.contains("escaped key"), "{screen}");
        }
    }
}
