//! Damaged rows (issue 9 part 3): a run database whose rows hold invalid JSON, invalid UTF-8,
//! bad times, 50 MB fields or references to rows that do not exist. Reads report what is
//! wrong and keep working on the rest; nothing panics; cancel still works on a run whose rows
//! do not decode (spec 8.1, 9). Damaged pages on disk: `reliability_damaged_pages.rs`.

mod console_support;
#[cfg(feature = "postgres")]
mod pg_support;
mod reliability_support;
mod support;

use countersign::runtime::operator::{self, OperatorError};
use countersign::runtime::store::{Store, StoreError};
use countersign::runtime::types::{RunStatus, StepStatus, Timestamp};
use reliability_support::damage::{approval_of, clean_db, found, read_everything, run_of, step_of};
use reliability_support::{Raw, invariants};

#[test]
fn damaged_json_columns_are_named_and_every_other_row_reads() {
    let db = clean_db();
    let waiting = run_of(&db.m, "waiting");
    let completed = run_of(&db.m, "completed");
    let raw = Raw::open(&db.path);
    let step = step_of(&raw, &waiting, 0);
    let approval = approval_of(&raw, &waiting);
    raw.set(
        "steps",
        "decision_json",
        &format!("id='{step}'"),
        "{not json",
    );
    raw.set("steps", "policy_json", &format!("id='{step}'"), "[");
    raw.set(
        "steps",
        "observation_json",
        &format!("id='{step}'"),
        "\"open",
    );
    raw.set(
        "approvals",
        "request_json",
        &format!("id='{approval}'"),
        "{\"run_id\":",
    );
    raw.set("runs", "limits_json", &format!("id='{completed}'"), "nope");
    drop(raw);
    surfaces_hold(&db.path, &[&waiting, &completed]);

    let got = found(
        &db.path,
        &[
            (&step, "S"),
            (&approval, "A"),
            (&waiting, "W"),
            (&completed, "C"),
        ],
    );
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(
        got[0].starts_with("approval A of run W does not decode: request: "),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with("run C does not decode: limits: "),
        "{got:#?}"
    );
    assert!(
        got[2].starts_with("step S of run W does not decode: decision: "),
        "{got:#?}"
    );
    assert!(
        got[2].contains("; policy: ") && got[2].contains("; observation: "),
        "{got:#?}"
    );

    let store = Store::open_existing(&db.path, true).unwrap();
    assert_eq!(read_everything(&store), Vec::<String>::new());
    let st = store.get_step(&step).unwrap();
    assert!(st.decision.is_none() && st.policy.is_none() && st.observation.is_none());
    assert_eq!(
        st.decision_json, "{not json",
        "the stored text is kept as it is"
    );
    assert!(
        store
            .get_approval(&waiting, &approval)
            .unwrap()
            .request
            .is_none()
    );
    assert_eq!(
        store.get_run(&completed).unwrap().limits,
        Default::default()
    );
    assert!(
        store.verify_events(1, 0).unwrap().ok(),
        "rows are not events: the chain holds"
    );
}

#[test]
fn invalid_utf8_text_is_named_with_its_bytes_kept() {
    let db = clean_db();
    let waiting = run_of(&db.m, "waiting");
    let raw = Raw::open(&db.path);
    let step = step_of(&raw, &waiting, 1);
    let approval = approval_of(&raw, &waiting);
    let bad = b"refund \xff\xfe order \xc3";
    raw.set_text_bytes("runs", "goal", &format!("id='{waiting}'"), bad);
    raw.set_text_bytes(
        "steps",
        "decision_json",
        &format!("id='{step}'"),
        b"{\"kind\":\"\xff\"}",
    );
    raw.set_text_bytes(
        "approvals",
        "note",
        &format!("id='{approval}'"),
        b"\xed\xa0\x80",
    );
    let seq: i64 = raw
        .text(&format!(
            "SELECT CAST(MAX(seq) AS TEXT) FROM events WHERE run_id = '{waiting}'"
        ))
        .parse()
        .unwrap();
    raw.set_text_bytes(
        "events",
        "payload_json",
        &format!("seq={seq}"),
        b"{\"x\":\"\x80\"}",
    );
    drop(raw);
    surfaces_hold(&db.path, &[&waiting]);

    let store = Store::open_existing(&db.path, true).unwrap();
    let run = store.get_run(&waiting).unwrap();
    assert_eq!(run.raw_invalid, vec![("goal", bad.to_vec())]);
    assert_eq!(run.decode_error, "goal: not valid UTF-8");
    assert_eq!(run.goal, String::from_utf8_lossy(bad));
    let st = store.get_step(&step).unwrap();
    assert!(
        st.decode_error.starts_with("decision: not valid UTF-8"),
        "{}",
        st.decode_error
    );
    let a = store.get_approval(&waiting, &approval).unwrap();
    assert_eq!(a.decode_error, "note: not valid UTF-8");
    let events = store.list_events_page(&waiting, 1000, 0).unwrap();
    let ev = events.items.iter().find(|e| e.seq == seq).unwrap();
    assert!(ev.decode_error.contains("payload"), "{}", ev.decode_error);

    let report = store.verify_events(1, 0).unwrap();
    let brk = report
        .chain_break
        .expect("an edited payload breaks the chain");
    assert_eq!(brk.seq, seq);
    assert_eq!(read_everything(&store), Vec::<String>::new());
    assert_eq!(
        store.list_runs_page(1000, 0).unwrap().total,
        db.m["counts"]["runs"].as_i64().unwrap()
    );
}

#[test]
fn bad_times_read_as_zero_and_are_named() {
    let db = clean_db();
    let waiting = run_of(&db.m, "waiting");
    let completed = run_of(&db.m, "completed");
    let raw = Raw::open(&db.path);
    let step = step_of(&raw, &completed, 0);
    let approval = approval_of(&raw, &waiting);
    raw.set(
        "runs",
        "created_at",
        &format!("id='{completed}'"),
        "yesterday",
    );
    raw.set(
        "runs",
        "lease_expires_at",
        &format!("id='{completed}'"),
        "2030-01-01T25:00:00Z",
    );
    raw.set(
        "steps",
        "started_at",
        &format!("id='{step}'"),
        "2030-02-30T00:00:00Z",
    );
    raw.set(
        "steps",
        "finished_at",
        &format!("id='{step}'"),
        "99999-01-01T00:00:00Z",
    );
    raw.set(
        "approvals",
        "expires_at",
        &format!("id='{approval}'"),
        // A fraction with no digit (Go reads more than nine digits, keeping nine).
        "2030-01-01T00:00:00.Z",
    );
    raw.set("approvals", "created_at", &format!("id='{approval}'"), "");
    drop(raw);
    surfaces_hold(&db.path, &[&waiting, &completed]);

    let store = Store::open_existing(&db.path, true).unwrap();
    let run = store.get_run(&completed).unwrap();
    assert!(
        run.decode_error
            .contains("created_at: parsing time \"yesterday\""),
        "{}",
        run.decode_error
    );
    assert!(
        run.decode_error.contains("lease_expires_at: "),
        "{}",
        run.decode_error
    );
    assert_eq!(run.created_at, Timestamp::ZERO);
    let st = store.get_step(&step).unwrap();
    assert!(st.decode_error.contains("started_at: ") && st.decode_error.contains("finished_at: "));
    assert_eq!(
        (st.started_at, st.finished_at),
        (Timestamp::ZERO, Timestamp::ZERO)
    );
    let a = store.get_approval(&waiting, &approval).unwrap();
    assert!(
        a.decode_error.contains("expires_at: "),
        "{}",
        a.decode_error
    );
    assert_eq!(
        a.created_at,
        Timestamp::ZERO,
        "'' is the zero time, not an error"
    );
    assert!(!a.decode_error.contains("created_at"), "{}", a.decode_error);
    let listed = store.list_runs_page(1000, 0).unwrap();
    let capped = listed.items.iter().find(|r| r.id == completed).unwrap();
    assert_eq!(capped.created_at, Timestamp::ZERO);
    assert_eq!(read_everything(&store), Vec::<String>::new());
    assert!(store.verify_events(1, 0).unwrap().ok());
}

const FIFTY_MB: usize = 50 * 1024 * 1024;

#[test]
fn fifty_megabyte_fields_are_capped_in_pages_and_whole_reads_still_work() {
    let db = clean_db();
    let waiting = run_of(&db.m, "waiting");
    let raw = Raw::open(&db.path);
    let step = step_of(&raw, &waiting, 0);
    let approval = approval_of(&raw, &waiting);
    let big = "x".repeat(FIFTY_MB);
    raw.set("runs", "goal", &format!("id='{waiting}'"), big.as_str());
    let obs = format!("{{\"kind\":\"ok\",\"content\":\"{big}\",\"summary\":\"huge\"}}");
    raw.set(
        "steps",
        "observation_json",
        &format!("id='{step}'"),
        obs.as_str(),
    );
    let req = format!(
        "{{\"run_id\":\"{waiting}\",\"step_id\":\"{step}\",\"spec\":{{\"name\":\"issue_refund\"}},\"args\":{{\"note\":\"{big}\"}}}}"
    );
    raw.set(
        "approvals",
        "request_json",
        &format!("id='{approval}'"),
        req.as_str(),
    );
    drop(raw);
    surfaces_hold(&db.path, &[&waiting]);
    let writer = Store::open_existing(&db.path, false).unwrap();
    let payload = format!("{{\"blob\":\"{big}\"}}");
    let (ev, _) = writer
        .write(|tx| {
            tx.append_event(
                &waiting,
                "",
                &Timestamp::now(),
                "test.big",
                payload.as_bytes(),
            )
        })
        .unwrap();
    drop(writer);

    let store = Store::open_existing(&db.path, true).unwrap();
    let report = store.verify_events(1, 0).unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!(
        report.checked, ev.seq,
        "the 50 MB event is verified in chunks"
    );

    let suffix = format!("\u{2026}[truncated: {FIFTY_MB} characters]");
    let capped = store.get_run_capped(&waiting).unwrap();
    assert!(capped.goal.ends_with(&suffix));
    assert_eq!(capped.goal.len(), 65536 + suffix.len());
    let page = store.list_steps_page(&waiting, 100, 0).unwrap();
    let st = page.items.iter().find(|s| s.id == step).unwrap();
    assert!(
        st.decode_error.contains("over MaxPageText, not read whole"),
        "{}",
        st.decode_error
    );
    // Over 1 MiB a column is never loaded by a page read (issue 14 item 6: parsing it to
    // pick out the summary took five times its size), so the summary is not shown either.
    assert_eq!(st.observation.as_ref().unwrap().summary, "");
    assert!(
        st.decode_error
            .contains(" bytes, over MaxPageText, not read whole"),
        "{}",
        st.decode_error
    );
    let ap = store.list_approvals_page(&waiting, "", 100, 0).unwrap();
    let a = ap.items.iter().find(|a| a.id == approval).unwrap();
    assert!(
        a.decode_error.contains("its arguments were not read"),
        "{}",
        a.decode_error
    );
    let evs = store.list_events_page(&waiting, 1000, 0).unwrap();
    let big_ev = evs.items.iter().find(|e| e.seq == ev.seq).unwrap();
    assert!(
        big_ev
            .payload
            .starts_with("{\"truncated\":true,\"length\":"),
        "{}",
        &big_ev.payload[..80]
    );
    assert!(big_ev.payload.len() < 70_000);

    assert_eq!(
        store.get_run(&waiting).unwrap().goal.len(),
        FIFTY_MB,
        "whole reads stay whole"
    );
    assert_eq!(read_everything(&store), Vec::<String>::new());
}

#[test]
fn missing_referenced_rows_are_named_and_the_rest_reads() {
    let db = clean_db();
    let waiting = run_of(&db.m, "waiting");
    let completed = run_of(&db.m, "completed");
    let raw = Raw::open(&db.path);
    let step = step_of(&raw, &completed, 0);
    let approval = approval_of(&raw, &waiting);
    raw.exec(&format!("DELETE FROM runs WHERE id = '{waiting}';"));
    raw.exec(&format!("DELETE FROM steps WHERE id = '{step}';"));
    raw.exec(
        "INSERT INTO steps (id, run_id, idx, status, started_at) \
         VALUES ('ghost_step', 'ghost_run', 0, 'executing', '2030-01-01T00:00:00Z');",
    );
    drop(raw);
    surfaces_hold(&db.path, &[&waiting, &completed, "ghost_run"]);

    let store = Store::open_existing(&db.path, true).unwrap();
    let total = db.m["counts"]["runs"].as_i64().unwrap();
    assert_eq!(store.list_runs_page(1000, 0).unwrap().total, total - 1);
    match store.get_run(&waiting) {
        Err(StoreError::NotFound { what }) => {
            assert_eq!(what.to_string(), format!("run {waiting}"))
        }
        other => panic!("expected not found, got {other:?}"),
    }
    let orphan_steps = store.list_steps(&waiting).unwrap();
    assert!(
        !orphan_steps.is_empty(),
        "steps of a missing run still list"
    );
    assert_eq!(store.list_approvals(&waiting).unwrap().len(), 1);
    assert!(!store.pending_approval_ids().unwrap().contains_key(&waiting));
    assert!(store.list_events_page(&waiting, 100, 0).unwrap().total > 0);
    assert_eq!(
        store.list_steps("ghost_run").unwrap()[0].status,
        StepStatus::Executing
    );
    assert!(store.verify_events(1, 0).unwrap().ok());
    assert_eq!(read_everything(&store), Vec::<String>::new());

    let got = invariants::rows_decode(&db.path);
    assert!(
        got.iter()
            .any(|l| l == "steps row ghost_step refers to a row that does not exist"),
        "{got:#?}"
    );
    assert!(
        got.iter()
            .any(|l| l == &format!("approvals row {approval} refers to a row that does not exist"))
    );
    assert!(got.iter().any(|l| l.starts_with("events row ")));
}

#[test]
fn store_undecodable_rows_do_not_wedge_the_run() {
    let db = clean_db();
    let waiting = run_of(&db.m, "waiting");
    let raw = Raw::open(&db.path);
    let step = step_of(&raw, &waiting, 1);
    raw.set_text_bytes("steps", "decision_json", &format!("id='{step}'"), b"{\xff");
    raw.set("steps", "started_at", &format!("id='{step}'"), "not a time");
    raw.set(
        "approvals",
        "request_json",
        &format!("run_id='{waiting}'"),
        "[[[",
    );
    raw.set("runs", "limits_json", &format!("id='{waiting}'"), "{");
    drop(raw);
    surfaces_hold(&db.path, &[&waiting]);

    let store = Store::open_existing(&db.path, false).unwrap();
    assert!(!store.get_run(&waiting).unwrap().decode_error.is_empty());
    let approval = store.list_approvals(&waiting).unwrap().pop().unwrap();
    match operator::approve(&store, &waiting, &approval.id, "ops", "", Timestamp::now()) {
        Err(OperatorError::HashMismatch { .. }) => {}
        other => panic!("a damaged approval cannot be approved (spec 9): {other:?}"),
    }
    let done = operator::cancel(&store, &waiting, "ops", "damaged rows", Timestamp::now()).unwrap();
    assert_eq!(done.steps_failed, 1);
    let run = store.get_run(&waiting).unwrap();
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Cancelled, "operator_cancelled")
    );
    let st = store.get_step(&step).unwrap();
    assert_eq!(st.status, StepStatus::Failed);
    assert_eq!(
        st.decision_json.as_bytes(),
        b"{\xef\xbf\xbd",
        "cancel left the damaged decision as it was (read lossily)"
    );
    assert!(store.verify_events(1, 0).unwrap().ok());
    match operator::cancel(&store, &waiting, "ops", "again", Timestamp::now()) {
        Err(OperatorError::RunFinished { status, .. }) => assert_eq!(status, RunStatus::Cancelled),
        other => panic!("a second cancel must be refused: {other:?}"),
    }
}

/// What an operator runs on a damaged database works and shows nothing unescaped: the
/// commands (`runs`, `verify`, and `show` and `events` of each run named, in text and JSON)
/// exit 0 or 1, never a panic, and with one line on stderr when they refuse; the console draws
/// its queue, runs and damaged screens and every tab of each run's detail. Neither writes.
fn surfaces_hold(db: &std::path::Path, runs: &[&str]) {
    use crossterm::event::KeyCode;
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n')
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    let mut cmds: Vec<Vec<String>> = vec![vec!["runs".into()], vec!["verify".into()]];
    for r in runs {
        cmds.push(vec!["show".into(), r.to_string()]);
        cmds.push(vec!["events".into(), r.to_string()]);
    }
    for args in &cmds {
        for json in [false, true] {
            let mut c = support::bin::on(db);
            if json {
                c.arg("--json");
            }
            let o = c.args(args).output().expect("run countersign");
            let code = o.status.code();
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            assert!(
                matches!(code, Some(0) | Some(1)),
                "{args:?} (json {json}): exit {code:?}: {err}"
            );
            if code == Some(1) {
                assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
            }
            for (name, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
                let text = std::str::from_utf8(bytes)
                    .unwrap_or_else(|e| panic!("{args:?} {name} is not UTF-8: {e}"));
                // JSON output is the stored values for programs, as agentrt's is: its strings
                // escape every C0 control and DEL (nothing can start a terminal sequence), but
                // keep other characters as they are. Text output escapes all of them.
                let bad = |c: char| {
                    if json && name == "stdout" {
                        (c < ' ' && c != '\n') || c == '\u{7f}'
                    } else {
                        unsafe_char(c)
                    }
                };
                assert!(
                    !text.chars().any(bad),
                    "{args:?} (json {json}) {name} holds a raw control or bidi character"
                );
            }
        }
    }
    let mut h = console_support::Harness::open(db, 120, 40);
    let mut screens = vec![];
    for c in ["queue", "runs", "damaged"] {
        h.command(c);
        screens.push(h.screen());
    }
    for r in runs {
        h.command(&format!("run {r}"));
        for _ in 0..4 {
            screens.push(h.screen());
            h.key(KeyCode::Tab);
        }
    }
    for s in &screens {
        assert!(
            !s.chars().any(unsafe_char),
            "the console drew a raw control or bidi character:\n{s}"
        );
    }
}

#[test]
fn store_unknown_run_status_is_listed_damaged_and_cancellable() {
    // A run whose status the runtime does not know (lower case, or stored as a BLOB, which
    // no compare-and-set on the text matches) is listed as damaged, and Cancel still ends it.
    let db = clean_db();
    let waiting = run_of(&db.m, "waiting");
    let interrupted = run_of(&db.m, "interrupted");
    let approved = run_of(&db.m, "approved");
    let raw = Raw::open(&db.path);
    raw.set(
        "runs",
        "status",
        &format!("id='{waiting}'"),
        "waiting_for_approval",
    );
    raw.exec(&format!(
        "UPDATE runs SET status = CAST('RUNNING' AS BLOB) WHERE id = '{interrupted}'"
    ));
    raw.exec(&format!(
        "UPDATE runs SET status = X'00FF57' WHERE id = '{approved}'"
    ));
    drop(raw);
    surfaces_hold(&db.path, &[&waiting, &interrupted, &approved]);
    let store = Store::open_existing(&db.path, false).unwrap();
    let listed: Vec<(String, &str, &str)> = store
        .list_damaged_page(100, 0)
        .unwrap()
        .items
        .into_iter()
        .map(|d| (d.run_id.as_str().unwrap().to_string(), d.table, d.column))
        .collect();
    let overview = store.list_runs_overview("", "", 100, 0, None).unwrap();
    for id in [&waiting, &interrupted, &approved] {
        assert!(
            listed.contains(&(id.to_string(), "runs", "status")),
            "{id} is listed among the damaged rows: {listed:?}"
        );
        let o = overview.items.iter().find(|o| &o.run.id == id).unwrap();
        assert!(o.damaged, "{id} is marked damaged in the runs overview");
        assert!(
            store.get_run(id).unwrap().decode_error.contains("status: "),
            "{id}: the run read names its status"
        );
        let done = operator::cancel(&store, id, "ops", "damaged status", Timestamp::now())
            .unwrap_or_else(|e| panic!("{id}: cancel must end a damaged run: {e}"));
        assert_eq!(
            (done.run.status, done.run.reason.as_str()),
            (RunStatus::Cancelled, "operator_cancelled")
        );
        assert!(store.get_run(id).unwrap().decode_error.is_empty());
    }
    assert!(store.verify_events(1, 0).unwrap().ok());
    assert!(
        store
            .list_damaged_page(100, 0)
            .unwrap()
            .items
            .iter()
            .all(|d| d.table != "runs"),
        "nothing damaged is left at the run level"
    );
}

/// On PostgreSQL: a waiting run whose step decision, step time, approval request and run limits
/// do not decode (the database is UTF8, so the damage is text that is not JSON or not a time)
/// is listed by `runs` and read with each damage named, is never wedged: approving its damaged
/// approval is refused (its hash no longer matches), cancel ends the run (CANCELLED,
/// `operator_cancelled`, the step failed with its damaged decision kept), a second cancel says
/// it already ended, and the chain still verifies once the inbox is chained.
#[cfg(feature = "postgres")]
#[test]
fn pg_undecodable_rows_do_not_wedge_the_run() {
    use countersign::pgstore::PgStore;
    use countersign::pgstore::copy::{Endpoint, copy};
    use countersign::runtime::store::RunStore;
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = support::tempdir();
    let lite = dir.path().join("waiting.db");
    let m = support::fixture(&lite, &["--scenario", "waiting"]);
    let waiting = m["approvals"][0]["run_id"].as_str().unwrap().to_string();
    copy(&Endpoint::Sqlite(lite), &Endpoint::Pg(db.pg_url())).expect("copy");
    let mut c = db.client();
    let step: String = c
        .query_one(
            "SELECT id FROM steps WHERE run_id = $1 AND status = 'awaiting_approval'",
            &[&waiting],
        )
        .unwrap()
        .get(0);
    c.execute(
        "UPDATE steps SET decision_json = '{not json', started_at = 'not a time' WHERE id = $1",
        &[&step],
    )
    .unwrap();
    c.execute(
        "UPDATE approvals SET request_json = '[[[' WHERE run_id = $1",
        &[&waiting],
    )
    .unwrap();
    c.execute(
        "UPDATE runs SET limits_json = '{' WHERE id = $1",
        &[&waiting],
    )
    .unwrap();
    drop(c);

    let o = support::bin::cs(&db.url, &["runs"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains(&waiting), "the damaged run is listed: {out}");

    let store = PgStore::open_existing(&db.pg_url()).unwrap();
    let run = store.get_run(waiting.as_bytes()).unwrap();
    assert!(run.decode_error.contains("limits"), "{}", run.decode_error);
    let steps = store.list_steps(waiting.as_bytes()).unwrap();
    let st = steps.iter().find(|s| s.id == step).unwrap();
    assert!(!st.decode_error.is_empty(), "the damaged step is named");
    let approval = store
        .list_approvals(waiting.as_bytes())
        .unwrap()
        .pop()
        .unwrap();
    assert!(
        !approval.decode_error.is_empty(),
        "the damaged approval is named"
    );
    match operator::approve(
        &store,
        waiting.as_str(),
        approval.id.as_str(),
        "ops",
        "",
        Timestamp::now(),
    ) {
        Err(OperatorError::HashMismatch { .. }) => {}
        other => panic!("a damaged approval cannot be approved (spec 9): {other:?}"),
    }
    let done = operator::cancel(
        &store,
        waiting.as_str(),
        "ops",
        "damaged rows",
        Timestamp::now(),
    )
    .unwrap();
    assert_eq!(done.steps_failed, 1);
    let run = store.get_run(waiting.as_bytes()).unwrap();
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Cancelled, "operator_cancelled")
    );
    let steps = store.list_steps(waiting.as_bytes()).unwrap();
    let st = steps.iter().find(|s| s.id == step).unwrap();
    assert_eq!(st.status, StepStatus::Failed);
    assert_eq!(
        st.decision_json, "{not json",
        "cancel left the damaged decision as it was"
    );
    match operator::cancel(&store, waiting.as_str(), "ops", "again", Timestamp::now()) {
        Err(OperatorError::RunFinished { .. }) => {}
        other => panic!("a second cancel says the run ended: {other:?}"),
    }
    drop(store);
    let mut s = PgStore::open_existing(&db.pg_url()).unwrap();
    s.sequence_all().unwrap();
    let report = s.verify_events(1, 0).unwrap();
    assert!(report.ok(), "{report:?}");
}
