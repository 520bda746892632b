//! Reading what was written: bounded page reads with agentrt's caps and markers, insertion
//! order, pending-approval ids, damaged text and times that never fail a read, live reload.

mod support;

use countersign::runtime::store::{MAX_PAGE_TEXT, Near, Store, StoreError};
use countersign::runtime::types::{RunStatus, Timestamp};
use support::runs;
use support::tempdir;

fn t0() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00.5Z").unwrap()
}

fn raw_exec(db: &std::path::Path, sql: &str) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch(sql).unwrap();
}

#[test]
fn store_lists_in_insertion_order() {
    let dir = tempdir();
    let store = Store::open(dir.path().join("o.db")).unwrap();
    // Later rows get earlier (and non-sorting) times: lists follow rowid, not time.
    let times = [
        "2026-10-01T09:00:00.5Z",
        "2026-10-01T09:00:00Z",
        "2026-10-01T08:59:59.25Z",
    ];
    for (i, t) in times.iter().enumerate() {
        runs::create(&store, &format!("r{i}"), "g", Timestamp::parse(t).unwrap());
    }
    let page = store.list_runs_page(10, 0).unwrap();
    assert_eq!(
        page.items.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["r2", "r1", "r0"]
    );
    let page = store.list_runs_page(1, 1).unwrap();
    assert_eq!((page.items[0].id.as_str(), page.total), ("r1", 3));
    let err = store.list_runs_page(0, 0).unwrap_err();
    assert_eq!(err.to_string(), "agentrt: list runs: limit 0 and offset 0");
    assert!(store.list_events_page("", 5, -1).is_err());
}

#[test]
fn store_pages_are_bounded() {
    let dir = tempdir();
    let db = dir.path().join("big.db");
    let store = Store::open(&db).unwrap();
    runs::waiting_run(&store, "r", t0());
    let huge = "x".repeat(MAX_PAGE_TEXT as usize + 10);
    let huge_json = format!(r#"{{"kind":"tool_call","tool":"refund","args":{{"pad":"{huge}"}}}}"#);
    let huge_req = format!(
        r#"{{"run_id":"r","step_id":"r-s1","spec":{{"name":"refund"}},"args":{{"pad":"{huge}"}}}}"#
    );
    raw_exec(
        &db,
        &format!(
            "UPDATE runs SET goal='{huge}'; UPDATE steps SET decision_json='{huge_json}' WHERE id='r-s1'; \
             UPDATE approvals SET request_json='{huge_req}', capability_json='{huge_json}'; \
             UPDATE events SET payload_json='{huge_json}' WHERE seq=1;"
        ),
    );
    let run = store.get_run_capped("r").unwrap();
    assert_eq!(
        run.goal,
        format!(
            "{}\u{2026}[truncated: {} characters]",
            &huge[..MAX_PAGE_TEXT as usize],
            huge.len()
        )
    );
    assert_eq!(
        store.get_run("r").unwrap().goal,
        huge,
        "the whole read is whole"
    );
    let steps = store.list_steps_page("r", 10, 0).unwrap();
    let s1 = &steps.items[1];
    assert_eq!(s1.decision_json, r#"{"kind":"tool_call","tool":"refund"}"#);
    assert_eq!(
        s1.decode_error,
        format!(
            "decision: {} characters, over MaxPageText, not read whole",
            huge_json.len()
        )
    );
    let a = &store.list_approvals_page("r", "", 10, 0).unwrap().items[0];
    assert_eq!(
        a.request_json,
        format!(
            r#"{{"run_id":"r","step_id":"r-s1","spec":{{"name":"refund"}},"args":{{"truncated":true,"length":{}}}}}"#,
            huge_req.len()
        )
    );
    assert_eq!(
        a.decode_error,
        format!(
            "request: {} characters, over MaxPageText; its arguments were not read",
            huge_req.len()
        )
    );
    assert!(
        a.capability.starts_with(r#"{"truncated":true,"length":"#),
        "{}",
        &a.capability[..40]
    );
    let e = &store.list_events_page("r", 1, 0).unwrap().items[0];
    assert!(e.payload.starts_with(&format!(
        r#"{{"truncated":true,"length":{},"head":"#,
        huge_json.len()
    )));
    assert!(e.payload.len() < MAX_PAGE_TEXT as usize * 2);
    let after = store.list_events_after("", 0, 2).unwrap();
    assert_eq!(after.len(), 2);
    assert!(after[0].payload.starts_with(r#"{"truncated":true"#));
}

#[test]
fn store_list_events_after_follows_seq_across_runs() {
    let dir = tempdir();
    let store = Store::open(dir.path().join("f.db")).unwrap();
    runs::create(&store, "a", "g", t0());
    runs::create(&store, "b", "g", t0());
    runs::create(&store, "a2", "g", t0());
    let all = store.list_events_after("", 1, 100).unwrap();
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [2, 3, 4, 5, 6]
    );
    let b = store.list_events_after("b", 0, 100).unwrap();
    assert_eq!(b.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4]);
    assert!(store.list_events_after("a", 2, 100).unwrap().is_empty());
}

#[test]
fn store_pending_approval_ids_and_reason() {
    let dir = tempdir();
    let db = dir.path().join("p.db");
    let store = Store::open(&db).unwrap();
    let (a1, _) = runs::waiting_run(&store, "w1", t0());
    let (a2, _) = runs::waiting_run(&store, "w2", t0());
    raw_exec(
        &db,
        "INSERT INTO approvals SELECT 'w2-a2', run_id, step_id, kind, capability_json, presentation_json, request_json, hash, status, created_at, decided_at, decided_by, note, expires_at FROM approvals WHERE id='w2-a1'",
    );
    let all = store.pending_approval_ids().unwrap();
    assert_eq!(all["w1"], vec![a1.clone()]);
    assert_eq!(all["w2"], [a2.clone(), "w2-a2".to_string()]);
    let of = store.pending_approval_ids_of(&["w2"], 1).unwrap();
    assert_eq!(of.len(), 1);
    assert_eq!(
        of[b"w2".as_slice()],
        vec![countersign::runtime::types::Key::from(a2.as_str())]
    );
    assert_eq!(
        store.approval_reason("w1", &a1).unwrap(),
        "side effect remote_mutation is require_approval by policy"
    );
    assert_eq!(
        store.approval_reason("w2", "w2-a2").unwrap(),
        "",
        "no approval.requested names it"
    );
    assert!(matches!(
        store.approval_reason("w1", "nope").unwrap_err(),
        StoreError::NotFound { .. }
    ));
    // A run no longer waiting is not listed.
    raw_exec(&db, "UPDATE runs SET status='CANCELLED' WHERE id='w1'");
    assert!(!store.pending_approval_ids().unwrap().contains_key("w1"));
}

#[test]
fn store_undecodable_text_and_times_never_fail_a_read() {
    let dir = tempdir();
    let db = dir.path().join("d.db");
    let store = Store::open(&db).unwrap();
    runs::waiting_run(&store, "r", t0());
    raw_exec(
        &db,
        "UPDATE runs SET goal=CAST(X'41FF42' AS TEXT), finished_at='yesterday', limits_json='{'; \
         UPDATE approvals SET created_at='soon', note=CAST(X'FE' AS TEXT); \
         UPDATE steps SET observation_json='[1' WHERE idx=0; UPDATE events SET at='later' WHERE seq=2;",
    );
    let run = store.get_run("r").unwrap();
    assert_eq!(run.goal, "A\u{fffd}B");
    assert_eq!(run.raw_invalid, vec![("goal", vec![0x41, 0xff, 0x42])]);
    assert!(
        run.decode_error
            .starts_with("goal: not valid UTF-8; finished_at: parsing time \"yesterday\""),
        "{}",
        run.decode_error
    );
    assert!(run.decode_error.contains("; limits: "));
    assert_eq!(run.finished_at, Timestamp::ZERO);
    let a = &store.list_approvals("r").unwrap()[0];
    assert!(
        a.decode_error
            .starts_with("created_at: parsing time \"soon\""),
        "{}",
        a.decode_error
    );
    assert!(
        a.decode_error.ends_with("note: not valid UTF-8"),
        "{}",
        a.decode_error
    );
    assert!(a.request.is_some());
    let s0 = &store.list_steps("r").unwrap()[0];
    assert!(
        s0.decode_error.starts_with("observation: "),
        "{}",
        s0.decode_error
    );
    let e = &store.list_events_page("r", 10, 0).unwrap().items[1];
    assert_eq!((e.at, e.at_text.as_str()), (Timestamp::ZERO, "later"));
    assert!(e.decode_error.starts_with("at: "));
    assert_eq!(
        store.list_runs_page(10, 0).unwrap().items[0].decode_error,
        run.decode_error
    );
}

#[test]
fn store_data_version_moves_when_another_connection_commits() {
    let dir = tempdir();
    let db = dir.path().join("dv.db");
    let writer = Store::open(&db).unwrap();
    let reader = Store::open_existing(&db, true).unwrap();
    let v0 = reader.data_version().unwrap();
    assert_eq!(reader.data_version().unwrap(), v0);
    runs::create(&writer, "r", "g", t0());
    assert_ne!(reader.data_version().unwrap(), v0);
    assert_eq!(reader.get_run("r").unwrap().status, RunStatus::Running);
    let err = reader.write(|_| Ok::<_, StoreError>(())).unwrap_err();
    assert!(err.to_string().contains("opened read-only"), "{err}");
}

#[test]
fn approval_json_omits_zero_times() {
    let dir = tempdir();
    let db = dir.path().join("j.db");
    let store = Store::open(&db).unwrap();
    let (aid, hash) = runs::waiting_run(&store, "r", t0());
    let a = store.get_approval("r", &aid).unwrap();
    let json = String::from_utf8(a.to_go_json().unwrap()).unwrap();
    let cap = r#"{"args":{"amount":800,"order":"o1"},"tool":"refund"}"#;
    assert_eq!(
        json,
        format!(
            r#"{{"id":"{aid}","run_id":"r","step_id":"r-s1","kind":"remote_mutation","capability":{cap},"presentation":{cap},"request":{},"hash":"{hash}","status":"pending","created_at":"2026-10-01T09:00:00.5Z","expires_at":"2026-10-01T10:00:00.5Z"}}"#,
            a.request_json
        )
    );
    raw_exec(&db, "UPDATE approvals SET expires_at='', request_json='{'");
    let a = store.get_approval("r", &aid).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&a.to_go_json().unwrap()).unwrap();
    assert!(v.get("expires_at").is_none() && v.get("decided_at").is_none());
    assert_eq!(v["request"]["args"], serde_json::Value::Null);
    assert!(v["decode_error"].as_str().unwrap().starts_with("request: "));
}

#[test]
fn store_runs_page_by_status_filters_in_one_read() {
    let dir = tempdir();
    let db = dir.path().join("st.db");
    let store = Store::open(&db).unwrap();
    runs::waiting_run(&store, "w1", t0());
    runs::create(&store, "r1", "g", t0());
    runs::waiting_run(&store, "w2", t0());
    raw_exec(
        &db,
        "UPDATE runs SET goal = CAST(X'FF' AS TEXT) WHERE id = 'w1'",
    );
    let page = store
        .list_runs_page_by_status("WAITING_FOR_APPROVAL", 1, 0)
        .unwrap();
    assert_eq!(
        (page.total, page.items.len(), page.items[0].id.as_str()),
        (2, 1, "w2")
    );
    let page = store
        .list_runs_page_by_status("WAITING_FOR_APPROVAL", 5, 1)
        .unwrap();
    assert_eq!(page.items[0].id, "w1");
    assert_eq!(page.items[0].raw_invalid, vec![("goal", vec![0xff])]);
    assert_eq!(store.list_runs_page_by_status("", 10, 0).unwrap().total, 3);
    assert_eq!(
        store
            .list_runs_page_by_status("COMPLETED", 10, 0)
            .unwrap()
            .total,
        0
    );
    assert!(store.list_runs_page_by_status("RUNNING", 0, 0).is_err());
}

/// Every page of a list read by key, with the keys handed on: (rows in order, pages read).
fn all_by_key<T, K: Clone>(
    mut read: impl FnMut(Option<K>, i64) -> countersign::runtime::store::KeyPage<T, K>,
    skip: i64,
) -> (Vec<T>, usize) {
    let (mut out, mut pages, mut after, mut skip) = (Vec::new(), 0, None, skip);
    loop {
        let page = read(after.clone(), skip);
        skip = 0;
        pages += 1;
        let more = page.more;
        after = page.last_key.clone();
        out.extend(page.items);
        if !more {
            return (out, pages);
        }
        assert!(pages < 10_000, "paging does not end");
    }
}

#[test]
fn pages_by_key_read_every_row_once_in_order_and_skip_an_offset() {
    let dir = tempdir();
    let db = dir.path().join("k.db");
    let store = Store::open(&db).unwrap();
    for i in 0..23 {
        runs::create(&store, &format!("r{i:02}"), "g", t0());
    }
    // Every run by offset pages (agentrt's order) and by key pages agree, at any skip.
    let by_offset: Vec<String> = store
        .list_runs_page(1000, 0)
        .unwrap()
        .items
        .into_iter()
        .map(|r| r.id)
        .collect();
    for skip in [0, 1, 5, 22, 23, 40] {
        let (got, _) = all_by_key(
            |before, skip| store.runs_page_by_key("", before, skip, 4).unwrap(),
            skip,
        );
        let got: Vec<String> = got.into_iter().map(|r| r.id).collect();
        let want: Vec<String> = by_offset.iter().skip(skip as usize).cloned().collect();
        assert_eq!(got, want, "skip {skip}");
    }
    let (got, pages) = all_by_key(
        |before, skip| store.runs_page_by_key("", before, skip, 23).unwrap(),
        0,
    );
    assert_eq!(
        (got.len(), pages),
        (23, 1),
        "an exact last page says none follow"
    );
    // A status filter.
    let (got, _) = all_by_key(
        |before, skip| store.runs_page_by_key("RUNNING", before, skip, 3).unwrap(),
        0,
    );
    let want = store.list_runs_page_by_status("RUNNING", 1000, 0).unwrap();
    assert_eq!(got, want.items);
    assert_eq!(store.count_runs("RUNNING").unwrap(), want.total);
    assert_eq!(store.count_runs("").unwrap(), 23);

    // Events of a run by key equal the offset read, at any skip.
    let events: Vec<i64> = store
        .list_events_page("r07", 1000, 0)
        .unwrap()
        .items
        .iter()
        .map(|e| e.seq)
        .collect();
    assert!(!events.is_empty());
    for skip in [0, 1, events.len() as i64 - 1, events.len() as i64] {
        let (got, _) = all_by_key(
            |after, skip| store.events_page_by_key("r07", after, skip, 1).unwrap(),
            skip,
        );
        let got: Vec<i64> = got.iter().map(|e| e.seq).collect();
        assert_eq!(got, events[skip as usize..].to_vec(), "skip {skip}");
    }
    assert_eq!(store.count_events("r07").unwrap(), events.len() as i64);
}

#[test]
fn steps_page_by_key_even_when_an_index_is_damaged() {
    let dir = tempdir();
    let db = dir.path().join("s.db");
    let store = Store::open(&db).unwrap();
    runs::create(&store, "r", "g", t0());
    for i in 0..7 {
        runs::tool_step(&store, "r", &format!("s{i}"), i, t0());
    }
    drop(store);
    // A step whose index is text (a hand edit): a key of (idx, rowid) as stored never
    // repeats or loses a row.
    raw_exec(&db, "UPDATE steps SET idx = 'three' WHERE id = 's3';");
    let store = Store::open_existing(&db, true).unwrap();
    let (got, _) = all_by_key(
        |after, skip| {
            store
                .steps_page_by_key("r", after.as_ref(), skip, 2)
                .unwrap()
        },
        0,
    );
    let ids: Vec<&str> = got.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["s0", "s1", "s2", "s4", "s5", "s6", "s3"]);
    let (got, _) = all_by_key(
        |after, skip| {
            store
                .steps_page_by_key("r", after.as_ref(), skip, 2)
                .unwrap()
        },
        5,
    );
    let ids: Vec<&str> = got.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["s6", "s3"]);
}

/// Issue 14 item 8 in the console: a run's events read around an anchor (an event already
/// read, at a known index) are the offset read's rows at every window and anchor, for a run
/// whose events interleave with another run's.
#[test]
fn events_read_around_an_anchor_are_the_offset_read() {
    let dir = tempdir();
    let store = Store::open(dir.path().join("e.db")).unwrap();
    runs::create(&store, "a", "g", t0());
    runs::create(&store, "b", "g", t0());
    for i in 0..40 {
        store
            .write(|tx| {
                tx.append_event("a", "", &t0(), "note", format!("{{\"i\":{i}}}").as_bytes())?;
                if i % 3 == 0 {
                    tx.append_event("b", "", &t0(), "note", b"{}")?;
                }
                Ok::<_, StoreError>(())
            })
            .unwrap();
    }
    let seqs = |p: countersign::runtime::store::Page<countersign::runtime::store::MarkedEvent>| {
        (
            p.items.iter().map(|m| m.event.seq).collect::<Vec<_>>(),
            p.total,
        )
    };
    let all = seqs(store.list_marked_events("a", 1000, 0).unwrap()).0;
    assert!(all.len() > 40);
    for ai in [0usize, 1, 7, 20, all.len() - 1] {
        for off in [
            0i64,
            1,
            5,
            6,
            7,
            8,
            19,
            20,
            21,
            35,
            all.len() as i64 - 3,
            60,
        ] {
            for limit in [1i64, 4, 10] {
                let near = store
                    .list_marked_events_near("a", around(limit, off, ai as i64, all[ai]))
                    .unwrap();
                let near = (
                    near.items.iter().map(|m| m.event.seq).collect::<Vec<_>>(),
                    near.total,
                );
                let by_offset = seqs(store.list_marked_events("a", limit, off).unwrap());
                assert_eq!(near, by_offset, "anchor {ai}, offset {off}, limit {limit}");
            }
        }
    }
    // A gone anchor falls back to the offset read.
    let p = store
        .list_marked_events_near("a", around(3, 2, 5, i64::MAX))
        .unwrap();
    let p = (
        p.items.iter().map(|m| m.event.seq).collect::<Vec<_>>(),
        p.total,
    );
    assert_eq!(p, seqs(store.list_marked_events("a", 3, 2).unwrap()));
}

/// The anchored read really goes by key: with an event before the anchor deleted (a tampered
/// file), the window at the anchor's index still starts at the anchor, where an offset read
/// shifts by one row.
#[test]
fn events_read_around_an_anchor_start_at_the_anchor_not_at_a_count() {
    let dir = tempdir();
    let db = dir.path().join("e.db");
    let store = Store::open(&db).unwrap();
    runs::create(&store, "a", "g", t0());
    for i in 0..30 {
        store
            .write(|tx| {
                tx.append_event("a", "", &t0(), "note", format!("{{\"i\":{i}}}").as_bytes())
            })
            .unwrap();
    }
    let all: Vec<i64> = store
        .list_marked_events("a", 1000, 0)
        .unwrap()
        .items
        .iter()
        .map(|m| m.event.seq)
        .collect();
    let ai = 20;
    raw_exec(&db, &format!("DELETE FROM events WHERE seq = {}", all[3]));
    let near = store
        .list_marked_events_near("a", around(4, ai as i64, ai as i64, all[ai]))
        .unwrap();
    let got: Vec<i64> = near.items.iter().map(|m| m.event.seq).collect();
    assert_eq!(got, all[ai..ai + 4], "the window starts at its anchor");
    let shifted: Vec<i64> = store
        .list_marked_events("a", 4, ai as i64)
        .unwrap()
        .items
        .iter()
        .map(|m| m.event.seq)
        .collect();
    assert_eq!(shifted, all[ai + 1..ai + 5], "an offset read counts rows");
}

/// Issue 14 item 8 in the console: the approval queue read around an anchor (a row already
/// read, at a known index) is the offset read's window, with the same "more follow", at every
/// window and anchor, with and without a filter; an anchor that left the queue falls back.
#[test]
fn the_queue_read_around_an_anchor_is_the_offset_read() {
    let dir = tempdir();
    let store = Store::open(dir.path().join("q.db")).unwrap();
    for i in 0..25 {
        runs::waiting_run(&store, &format!("w{i:02}"), t0());
    }
    let ids = |(items, more): (Vec<countersign::runtime::store::QueueItem>, bool)| {
        (
            items.into_iter().map(|q| q.approval.id).collect::<Vec<_>>(),
            more,
        )
    };
    let wids = |w: countersign::runtime::store::WindowPage<
        countersign::runtime::store::QueueItem,
    >| { ids((w.items, w.more)) };
    for filter in ["", "w1"] {
        let (all, _) = ids(store.list_queue_rows(filter, 1000, 0).unwrap());
        assert!(all.len() >= 10, "{filter}: {}", all.len());
        for ai in [0usize, 1, 4, all.len() / 2, all.len() - 1] {
            for off in [0i64, 1, 3, 4, 5, 9, all.len() as i64 - 2, 40] {
                for limit in [1i64, 3, 8] {
                    let near = wids(
                        store
                            .list_queue_rows_near(filter, around(limit, off, ai as i64, &all[ai]))
                            .unwrap(),
                    );
                    let by_offset = ids(store.list_queue_rows(filter, limit, off).unwrap());
                    assert_eq!(
                        near, by_offset,
                        "{filter:?} anchor {ai}, offset {off}, limit {limit}"
                    );
                }
            }
        }
    }
    let gone = wids(
        store
            .list_queue_rows_near("", around(3, 2, 5, "no such"))
            .unwrap(),
    );
    assert_eq!(gone, ids(store.list_queue_rows("", 3, 2).unwrap()));
    // It really goes by key: with a row before the anchor gone from the queue, the window at
    // the anchor's index still starts at the anchor; an offset read shifts by one row.
    let (all, _) = ids(store.list_queue_rows("", 1000, 0).unwrap());
    raw_exec(
        &dir.path().join("q.db"),
        &format!(
            "UPDATE approvals SET status = 'approved' WHERE id = '{}'",
            all[2]
        ),
    );
    let near = wids(
        store
            .list_queue_rows_near("", around(3, 10, 10, &all[10]))
            .unwrap(),
    );
    assert_eq!(near.0, all[10..13], "the window starts at its anchor");
    let shifted = ids(store.list_queue_rows("", 3, 10).unwrap());
    assert_eq!(shifted.0, all[11..14], "an offset read counts rows");
}

/// Issue 14 item 8 in the console: a run's steps read around an anchor are the offset read's
/// window at every window and anchor, a text `idx` (a hand edit) included; with a step before
/// the anchor deleted, the window still starts at its anchor where an offset read shifts.
#[test]
fn steps_read_around_an_anchor_are_the_offset_read() {
    let dir = tempdir();
    let db = dir.path().join("s.db");
    let store = Store::open(&db).unwrap();
    runs::create(&store, "r", "g", t0());
    runs::create(&store, "q", "g", t0());
    for i in 0..14 {
        runs::tool_step(&store, "r", &format!("s{i:02}"), i, t0());
        if i < 4 {
            runs::tool_step(&store, "q", &format!("q{i:02}"), i, t0());
        }
    }
    drop(store);
    raw_exec(&db, "UPDATE steps SET idx = 'three' WHERE id = 's03';");
    let store = Store::open_existing(&db, true).unwrap();
    let ids = |p: countersign::runtime::store::Page<countersign::runtime::types::Step>| {
        (
            p.items.into_iter().map(|s| s.id).collect::<Vec<_>>(),
            p.total,
        )
    };
    let all = ids(store.list_steps_page("r", 1000, 0).unwrap()).0;
    assert_eq!(all.len(), 14);
    for ai in [0usize, 1, 5, 12, 13] {
        for off in [0i64, 1, 4, 5, 6, 11, 13, 20] {
            for limit in [1i64, 3, 6] {
                let near = store
                    .list_steps_page_near("r", around(limit, off, ai as i64, &all[ai]))
                    .unwrap();
                let near = (
                    near.items.into_iter().map(|s| s.id).collect::<Vec<_>>(),
                    near.total,
                );
                let by_offset = ids(store.list_steps_page("r", limit, off).unwrap());
                assert_eq!(near, by_offset, "anchor {ai}, offset {off}, limit {limit}");
            }
        }
    }
    drop(store);
    raw_exec(&db, &format!("DELETE FROM steps WHERE id = '{}';", all[1]));
    let store = Store::open_existing(&db, true).unwrap();
    let near = store
        .list_steps_page_near("r", around(3, 8, 8, &all[8]))
        .unwrap();
    let near = (
        near.items.into_iter().map(|s| s.id).collect::<Vec<_>>(),
        near.total,
    );
    assert_eq!(near.0, all[8..11], "the window starts at its anchor");
    let shifted = ids(store.list_steps_page("r", 3, 8).unwrap());
    assert_eq!(shifted.0, all[9..12], "an offset read counts rows");
}

/// `limit` rows from `offset`, near the row at `index` that `row` names.
fn around<A>(limit: i64, offset: i64, index: i64, row: A) -> Near<A> {
    Near {
        anchor: Some((index, row)),
        ..Near::new(limit, offset)
    }
}

/// A window of 30 rows from `offset`, near `anchor` and `end` when known.
fn thirty<A>(offset: i64, anchor: Option<(i64, A)>, end: Option<i64>) -> Near<A> {
    Near {
        limit: 30,
        offset,
        anchor,
        end,
    }
}

/// The windows the console reads, at three places of a list of `n` rows (support::long): from
/// the start, 40 rows past a row already read half way down (by key around it), and the last
/// window read from the end (by key in reverse). Each entry: list and place, the VM steps the
/// read cost, and whether its first row is the one at the window's index.
fn window_costs(dir: &std::path::Path, n: i64) -> Vec<(String, u64, bool)> {
    use support::long::{counted, steps};
    let db = dir.join(format!("long{n}.db"));
    support::long::write(&db, n);
    let (store, ctr) = counted(&db);
    let deep = n / 2;
    let mut out = Vec::new();
    let places = [
        ("start", 0, None, None),
        ("near a row read", deep + 40, Some(deep), None),
        ("end", n - 30, None, Some(n)),
    ];
    for (place, off, anchor, end) in places {
        let mut push = |list: &str, (first, k): (Option<String>, u64), want: String| {
            out.push((format!("{list} from {place}"), k, first == Some(want)));
        };
        push(
            "events",
            steps(ctr, || {
                let w = store
                    .list_marked_events_near("a", thirty(off, anchor.map(|i| (i, i + 1)), end))
                    .unwrap();
                w.items.first().map(|m| m.event.seq.to_string())
            }),
            (off + 1).to_string(),
        );
        let id = |p: &str, i: i64| format!("{p}{i:07}");
        push(
            "steps",
            steps(ctr, || {
                let a = anchor.map(|i| id("s", i));
                let w = store
                    .list_steps_page_near("a", thirty(off, anchor.zip(a.as_deref()), end))
                    .unwrap();
                w.items.first().map(|s| s.id.clone())
            }),
            id("s", off),
        );
        // A run's approvals and model calls are in rowid order, which agentrt's index
        // (run_id, created_at) does not hold: their window costs what the run's own rows
        // cost, never what other runs' do. Run `b` has as many in both databases.
        let b = support::long::B;
        let (boff, banchor, bend) = match place {
            "start" => (0, None, None),
            "end" => (b - 30, None, Some(b)),
            _ => (b / 2 + 40, Some(b / 2), None),
        };
        push(
            "approvals of a run",
            steps(ctr, || {
                let a = banchor.map(|i| id("q", i));
                let (w, _) = store
                    .list_run_approvals_near("b", thirty(boff, banchor.zip(a.as_deref()), bend))
                    .unwrap();
                w.items.first().map(|a| a.id.clone())
            }),
            id("q", boff),
        );
        push(
            "model calls of a run",
            steps(ctr, || {
                let a = banchor.map(|i| id("n", i));
                let w = store
                    .list_model_calls_near("b", thirty(boff, banchor.zip(a.as_deref()), bend))
                    .unwrap();
                w.items.first().map(|m| m.id.clone())
            }),
            id("n", boff),
        );
        push(
            "queue",
            steps(ctr, || {
                let a = anchor.map(|i| id("p", i));
                let w = store
                    .list_queue_rows_near("", thirty(off, anchor.zip(a.as_deref()), end))
                    .unwrap();
                w.items.first().map(|q| q.approval.id.clone())
            }),
            id("p", off),
        );
        // Runs newest first: index i is r(n-1-i) after `b`; run `a`, the oldest, is last.
        push(
            "runs",
            steps(ctr, || {
                let a = anchor.map(|i| id("r", n - 1 - i));
                let w = store
                    .list_runs_overview_near(
                        "",
                        "",
                        thirty(
                            off + 1,
                            anchor.map(|i| i + 1).zip(a.as_deref()),
                            end.map(|e| e + 2),
                        ),
                    )
                    .unwrap();
                w.items.first().map(|o| o.run.id.clone())
            }),
            id("r", n - 1 - off),
        );
    }
    // What an OFFSET read of the deep window costs (the reads the console no longer makes).
    out.push((
        "events by offset (agentrt's page read)".into(),
        steps(ctr, || store.list_events_page("a", 30, deep + 40).unwrap()).1,
        true,
    ));
    out
}

/// Issue 14 item 8: every list the console pages (a run's events, steps, approvals and model
/// calls, the queue, the runs) costs the same SQLite VM steps for a window on a list of 200,000
/// rows as on one of 2,000: from the start, near a row already read half way down, and at the
/// end (read in reverse), each returning the rows at its index; the count stops at the cap.
/// The measure is SQLite's own step counter (progress handler), so it is deterministic; an
/// OFFSET read of the deep window costs about 100x more on the larger list, which shows the
/// measure sees depth.
#[test]
fn every_window_costs_the_same_on_any_size_of_database() {
    let dir = tempdir();
    let small = window_costs(dir.path(), 2_000);
    let big = window_costs(dir.path(), 200_000);
    for ((what, s, s_ok), (_, b, b_ok)) in small.iter().zip(&big) {
        println!("{what}: {s} / {b} VM steps = {:.2}", *b as f64 / *s as f64);
        assert!(*s_ok && *b_ok, "{what}: the window starts at its index");
        if what.contains("by offset") {
            assert!(
                *b > 20 * *s,
                "{what}: an offset read grows with depth ({s} / {b})"
            );
        } else {
            assert!(
                *b <= *s + *s / 5,
                "{what}: {b} VM steps on 200,000 rows against {s} on 2,000"
            );
        }
    }
}

/// A window counts its list only up to the cap: a short list is exact, a long one says it has
/// more than the cap (a lower bound, `exact: false`) and counts exactly only when asked; the
/// last window read from the end is the last rows, with nothing after them.
#[test]
fn a_window_counts_up_to_the_cap_and_reads_its_end_in_reverse() {
    use countersign::runtime::store::COUNT_CAP;
    let dir = tempdir();
    for n in [300, COUNT_CAP + 500] {
        let db = dir.path().join(format!("c{n}.db"));
        support::long::write(&db, n);
        let store = Store::open_existing(&db, true).unwrap();
        let first = store
            .list_marked_events_near("a", Near::new(20, 0))
            .unwrap();
        assert!(first.more);
        if n <= COUNT_CAP {
            assert_eq!((first.total, first.exact), (n, true));
        } else {
            assert_eq!((first.total, first.exact), (COUNT_CAP + 1, false));
        }
        assert_eq!(store.count_events("a").unwrap(), n);
        let last = store
            .list_marked_events_near(
                "a",
                Near {
                    end: Some(n),
                    ..Near::new(20, n - 20)
                },
            )
            .unwrap();
        let seqs: Vec<i64> = last.items.iter().map(|m| m.event.seq).collect();
        assert_eq!(seqs, (n - 19..=n).collect::<Vec<_>>(), "{n}");
        assert_eq!((last.offset, last.more), (n - 20, false));
        assert_eq!(
            (last.total, last.exact),
            (n, true),
            "the end says the length"
        );
        // The runs overview, newest first, ends with the oldest run.
        let runs = store
            .list_runs_overview_near(
                "",
                "",
                Near {
                    end: Some(n + 2),
                    ..Near::new(5, n - 3)
                },
            )
            .unwrap();
        assert_eq!(runs.items.last().map(|o| o.run.id.as_str()), Some("a"));
        assert_eq!(store.count_runs_overview("", "").unwrap(), n + 2);
    }
}
