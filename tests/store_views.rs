//! The store's read models for a review front end (queue, runs overview, counts, damaged
//! columns, marked events, model calls, one approval whole) on databases written by the
//! independent Python fixture: each checked against what plain SQL on the same file says.

mod support;

use std::path::Path;

use countersign::runtime::operator::cancel;
use countersign::runtime::store::{ChainMark, QUEUE_ARGS_HEAD, Store};
use countersign::runtime::types::{ApprovalStatus, RunStatus, Timestamp};
use support::{fixture, s, tempdir};

fn sql_i64(db: &Path, sql: &str) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

fn sql_strings(db: &Path, sql: &str) -> Vec<String> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c.prepare(sql).unwrap();
    st.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn run_of<'a>(m: &'a serde_json::Value, scenario: &str) -> &'a str {
    s(m, &format!("/scenarios/{scenario}/runs/0/id"))
}

#[test]
fn queue_lists_pending_approvals_of_waiting_runs_oldest_first() {
    let dir = tempdir();
    let db = dir.path().join("q.db");
    let m = fixture(&db, &[]);
    let store = Store::open_existing(&db, true).unwrap();
    let want = sql_strings(
        &db,
        "SELECT a.id FROM approvals a JOIN runs r ON r.id = a.run_id WHERE a.status = 'pending' \
         AND r.status = 'WAITING_FOR_APPROVAL' ORDER BY a.rowid",
    );
    assert!(want.len() >= 5, "the fixture has a queue");
    let page = store.list_queue_page("", 100, 0).unwrap();
    assert_eq!(page.total, want.len() as i64);
    let got: Vec<&str> = page.items.iter().map(|q| q.approval.id.as_str()).collect();
    assert_eq!(got, want);
    for q in &page.items {
        assert_eq!(q.approval.status, ApprovalStatus::Pending);
        assert!(q.step_index.is_some(), "{}: step index", q.approval.id);
        if q.approval.decode_error.is_empty() {
            assert!(!q.tool.as_deref().unwrap_or("").is_empty());
            let args = q.args_head.as_deref().unwrap();
            assert!(String::from_utf8_lossy(args).chars().count() <= QUEUE_ARGS_HEAD);
        } else {
            assert_eq!((q.tool.as_ref(), q.args_head.as_ref()), (None, None));
        }
    }
    // The hostile arguments are longer than the head: cut on a character boundary.
    let hostile = s(&m, "/scenarios/hostile/runs/0/approvals/0");
    let h = page
        .items
        .iter()
        .find(|q| q.approval.id == hostile)
        .unwrap();
    let args = std::str::from_utf8(h.args_head.as_deref().unwrap()).expect("cut on a boundary");
    assert_eq!(args.chars().count(), QUEUE_ARGS_HEAD);

    // A page is the same slice of the list; the filter runs in SQL with its own total.
    let p = store.list_queue_page("", 2, 1).unwrap();
    assert_eq!(
        p.items
            .iter()
            .map(|q| q.approval.id.as_str())
            .collect::<Vec<_>>(),
        want[1..3]
    );
    let emails = store.list_queue_page("SEND_STATUS_EMAIL", 100, 0).unwrap();
    assert!(emails.total >= 1 && emails.total < page.total);
    assert!(
        emails
            .items
            .iter()
            .all(|q| q.tool.as_deref() == Some("send_status_email"))
    );
    assert!(store.list_queue_page("", 0, 0).is_err());

    // A window without its count says whether rows follow it; the count is the page's total.
    let n = want.len() as i64;
    let (items, more) = store.list_queue_rows("", 2, 0).unwrap();
    assert_eq!((items.len(), more), (2, true));
    let (items, more) = store.list_queue_rows("", n, 0).unwrap();
    assert_eq!((items.len() as i64, more), (n, false), "the last window");
    let (items, more) = store.list_queue_rows("", 2, n - 1).unwrap();
    assert_eq!((items.len(), more), (1, false));
    assert_eq!(
        items[0].approval.id,
        want[want.len() - 1],
        "the same order as the page"
    );
    assert_eq!(store.count_queue("").unwrap(), n);
    assert_eq!(
        store.count_queue("SEND_STATUS_EMAIL").unwrap(),
        emails.total
    );
    assert!(store.list_queue_rows("", 0, 0).is_err());
}

#[test]
fn cancelled_run_with_a_pending_approval_is_not_waiting() {
    let dir = tempdir();
    let db = dir.path().join("c.db");
    let m = fixture(&db, &["--scenario", "waiting,completed"]);
    let run = run_of(&m, "waiting").to_string();
    let aid = s(&m, "/scenarios/waiting/runs/0/approvals/0").to_string();
    {
        let w = Store::open_existing(&db, false).unwrap();
        let before = w.list_runs_overview("", "", 10, 0, None).unwrap();
        let r = before.items.iter().find(|o| o.run.id == run).unwrap();
        assert_eq!(r.pending, 1, "waiting: its pending approval counts");
        cancel(&w, &run, "ops", "changed", Timestamp::now()).unwrap();
        assert_eq!(
            w.get_approval(&run, &aid).unwrap().status,
            ApprovalStatus::Pending,
            "cancel leaves the approval pending (spec 8.1)"
        );
    }
    let store = Store::open_existing(&db, true).unwrap();
    let ov = store.list_runs_overview("", "", 10, 0, None).unwrap();
    let r = ov.items.iter().find(|o| o.run.id == run).unwrap();
    assert_eq!((r.run.status.clone(), r.pending), (RunStatus::Cancelled, 0));
    assert_eq!(store.list_queue_page("", 10, 0).unwrap().total, 0);
    let c = store.view_counts().unwrap();
    assert_eq!((c.runs, c.waiting, c.pending), (2, 0, 0));
}

#[test]
fn runs_overview_newest_first_with_status_filter_damage_and_anchor() {
    let dir = tempdir();
    let db = dir.path().join("r.db");
    let m = fixture(&db, &["--big", "40", "--steps-per-run", "1"]);
    let store = Store::open_existing(&db, true).unwrap();
    let want = sql_strings(&db, "SELECT id FROM runs ORDER BY rowid DESC");
    let all = store.list_runs_overview("", "", 1000, 0, None).unwrap();
    assert_eq!(all.total, want.len() as i64);
    assert_eq!(
        all.items
            .iter()
            .map(|o| o.run.id.as_str())
            .collect::<Vec<_>>(),
        want
    );
    let damaged = run_of(&m, "damaged");
    for o in &all.items {
        assert_eq!(
            o.damaged,
            o.run.id == damaged,
            "{}: damaged marker",
            o.run.id
        );
        let pending = sql_i64(
            &db,
            &format!(
                "SELECT COUNT(*) FROM approvals WHERE run_id = '{}' AND status = 'pending'",
                o.run.id
            ),
        );
        let waiting = o.run.status == RunStatus::WaitingForApproval;
        assert_eq!(o.pending, if waiting { pending } else { 0 }, "{}", o.run.id);
    }
    // Status filter and text filter run in SQL, each with its total.
    let w = store
        .list_runs_overview("WAITING_FOR_APPROVAL", "", 1000, 0, None)
        .unwrap();
    assert_eq!(
        w.total,
        sql_i64(
            &db,
            "SELECT COUNT(*) FROM runs WHERE status = 'WAITING_FOR_APPROVAL'"
        )
    );
    assert!(
        w.items
            .iter()
            .all(|o| o.run.status == RunStatus::WaitingForApproval)
    );
    let one = store
        .list_runs_overview("", &damaged[..12].to_uppercase(), 10, 0, None)
        .unwrap();
    assert_eq!((one.total, one.items[0].run.id.as_str()), (1, damaged));
    // Read by key around an anchor gives what OFFSET gives, above and below it.
    for (anchor, offset) in [(20usize, 5i64), (20, 18), (20, 30), (3, 0), (40, 44)] {
        let by_offset = store.list_runs_overview("", "", 7, offset, None).unwrap();
        let by_key = store
            .list_runs_overview("", "", 7, offset, Some((anchor as i64, &want[anchor])))
            .unwrap();
        assert_eq!(by_key, by_offset, "anchor {anchor}, offset {offset}");
    }
    // A vanished anchor falls back to OFFSET.
    let gone = store
        .list_runs_overview("", "", 7, 10, Some((3, "no-such-run")))
        .unwrap();
    assert_eq!(gone, store.list_runs_overview("", "", 7, 10, None).unwrap());
}

#[test]
fn view_counts_match_the_database() {
    let dir = tempdir();
    let db = dir.path().join("n.db");
    fixture(&db, &[]);
    let c = Store::open_existing(&db, true)
        .unwrap()
        .view_counts()
        .unwrap();
    let n = |w: &str| sql_i64(&db, &format!("SELECT COUNT(*) FROM runs WHERE {w}"));
    assert_eq!(c.runs, n("1"));
    assert_eq!(c.waiting, n("status = 'WAITING_FOR_APPROVAL'"));
    assert_eq!(c.running, n("status IN ('RUNNING', 'INTERRUPTED')"));
    assert_eq!(c.failed, n("status = 'FAILED'"));
    assert_eq!(
        c.pending,
        sql_i64(
            &db,
            "SELECT COUNT(*) FROM approvals a JOIN runs r ON r.id = a.run_id WHERE \
             a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL'"
        )
    );
}

#[test]
fn damaged_rows_name_the_column_with_the_decoders_error_and_keep_the_bytes() {
    let dir = tempdir();
    let db = dir.path().join("d.db");
    let m = fixture(&db, &["--scenario", "damaged,hostile,completed"]);
    let run = run_of(&m, "damaged");
    // A time that is not UTF-8 on a completed step.
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute(
        "UPDATE steps SET finished_at = CAST(X'FF3C' AS TEXT) WHERE run_id = ?1 AND idx = 0",
        [run_of(&m, "completed")],
    )
    .unwrap();
    drop(c);
    let store = Store::open_existing(&db, true).unwrap();
    let page = store.list_damaged_page(10, 0).unwrap();
    assert_eq!(page.total, 3, "{page:#?}");
    let cols: Vec<(&str, &str)> = page.items.iter().map(|d| (d.table, d.column)).collect();
    assert_eq!(
        cols,
        [
            ("steps", "finished_at"),
            ("steps", "decision"),
            ("approvals", "request")
        ]
    );
    let step = store.list_steps_page(run, 10, 0).unwrap();
    let bad = step
        .items
        .iter()
        .find(|s| !s.decode_error.is_empty())
        .unwrap();
    assert_eq!(
        format!("decision: {}", page.items[1].error),
        bad.decode_error,
        "the reason is the store decoder's"
    );
    for d in &page.items[1..] {
        assert_eq!(d.run_id, run);
        assert!(d.raw.starts_with(b"{\"") && d.raw_len as usize == d.raw.len());
    }
    assert_eq!(page.items[0].raw, [0xFF, b'<'], "raw bytes kept as stored");
    assert!(
        page.items[0].error.contains("UTF-8"),
        "{}",
        page.items[0].error
    );
    // Pages are slices of the same list.
    let p = store.list_damaged_page(1, 2).unwrap();
    assert_eq!((p.total, &p.items[..]), (3, &page.items[2..]));
}

#[test]
fn marked_events_hold_until_the_chain_is_tampered() {
    let dir = tempdir();
    let db = dir.path().join("e.db");
    let m = fixture(&db, &["--scenario", "waiting,completed"]);
    let store = Store::open_existing(&db, true).unwrap();
    let run = run_of(&m, "waiting");
    let page = store.list_marked_events(run, 3, 1).unwrap();
    assert_eq!(
        page.total,
        sql_i64(
            &db,
            &format!("SELECT COUNT(*) FROM events WHERE run_id = '{run}'")
        )
    );
    assert_eq!(page.items.len(), 3);
    assert!(page.items.iter().all(|e| e.mark == ChainMark::Holds));
    drop(store);

    let bad = dir.path().join("t.db");
    let m = fixture(
        &bad,
        &["--scenario", "waiting,completed", "--tamper", "chain"],
    );
    let store = Store::open_existing(&bad, true).unwrap();
    let report = store.verify_events(0, 0).unwrap();
    let broken = report.chain_break.expect("the tampered chain breaks").seq;
    let mut marks = Vec::new();
    for sc in ["waiting", "completed"] {
        let p = store.list_marked_events(run_of(&m, sc), 100, 0).unwrap();
        marks.extend(p.items.into_iter().map(|e| (e.event.seq, e.mark)));
    }
    let at = marks.iter().find(|(s, _)| *s == broken).unwrap();
    assert_ne!(at.1, ChainMark::Holds, "the break is marked");
    assert!(
        marks
            .iter()
            .filter(|(s, _)| *s < broken)
            .all(|(_, m)| *m == ChainMark::Holds)
    );
}

#[test]
fn approval_view_reads_whole_with_run_status_and_reason() {
    let dir = tempdir();
    let db = dir.path().join("a.db");
    let m = fixture(&db, &["--scenario", "waiting,rejected"]);
    let store = Store::open_existing(&db, true).unwrap();
    let aid = s(&m, "/scenarios/waiting/runs/0/approvals/0");
    let v = store.approval_view(aid).unwrap().unwrap();
    assert_eq!(v.approval.id, aid);
    assert_eq!(v.run_status, Some(RunStatus::WaitingForApproval));
    assert!(!v.reason.is_empty(), "the approval.requested reason");
    assert_eq!(
        v.approval,
        store.get_approval(run_of(&m, "waiting"), aid).unwrap()
    );
    let rid = s(&m, "/scenarios/rejected/runs/0/approvals/0");
    let v = store.approval_view(rid).unwrap().unwrap();
    assert_eq!(
        (v.approval.status, v.run_status),
        (ApprovalStatus::Rejected, Some(RunStatus::Cancelled))
    );
    assert!(store.approval_view("nope").unwrap().is_none());
    let ra = store
        .list_run_approvals(run_of(&m, "waiting"), 5, 0)
        .unwrap();
    assert_eq!(
        (ra.page.total, ra.run_status),
        (1, Some(RunStatus::WaitingForApproval))
    );
    assert_eq!(
        store.list_run_approvals("nope", 5, 0).unwrap().run_status,
        None
    );
}

#[test]
fn model_calls_page_reads_a_runs_calls_with_the_total() {
    let dir = tempdir();
    let db = dir.path().join("m.db");
    let m = fixture(&db, &["--scenario", "running,completed"]);
    let store = Store::open_existing(&db, true).unwrap();
    let run = run_of(&m, "running");
    let want = sql_strings(
        &db,
        &format!("SELECT id FROM model_calls WHERE run_id = '{run}' ORDER BY rowid"),
    );
    assert!(!want.is_empty());
    let page = store.list_model_calls_page(run, 100, 0).unwrap();
    assert_eq!(page.total, want.len() as i64);
    assert_eq!(
        page.items.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        want
    );
    assert!(
        page.items
            .iter()
            .all(|c| c.run_id == run && c.decode_error.is_empty() && !c.model.is_empty())
    );
}
