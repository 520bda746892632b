//! Decisions from the console through the store's shown-approval calls, on real databases:
//! approve and reject bind the hash that was rendered, a changed row is refused and reloaded,
//! a second console gets "already decided", cancel asks for a reason. Every database still
//! verifies with the independent Python verifier afterwards.

mod console_support;
mod support;

use std::path::Path;

use console_support::*;
use countersign::console::testing::StoreDecider;
use countersign::console::testing::{AppConfig, Choice, Screen, Write};

use countersign::runtime::types::Timestamp;
use crossterm::event::KeyCode;

/// Decisions happen at 03:50, before the queue scenario's approvals expire.
fn decider(db: &Path) -> Box<StoreDecider> {
    let t = Timestamp::parse("2026-01-01T03:50:00Z")
        .unwrap()
        .unix_secs();
    Box::new(
        StoreDecider::open(db)
            .unwrap()
            .with_clock(Timestamp::from_unix(t, 0)),
    )
}

fn harness(db: &Path, by: &str) -> Harness {
    let cfg = AppConfig {
        by: by.into(),
        read_only: false,
        can_resume: false,
    };
    Harness::with(db, 100, 30, cfg, decider(db))
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

fn row(db: &Path, id: &str) -> (String, String, String) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(
        "SELECT status, decided_by, note FROM approvals WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

fn queue_approval(m: &serde_json::Value, i: usize) -> (String, String) {
    let r = &m["scenarios"]["queue"]["runs"][i];
    (
        r["id"].as_str().unwrap().into(),
        r["approvals"][0].as_str().unwrap().into(),
    )
}

#[test]
fn approve_from_the_console_binds_the_shown_hash() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (_, ap) = queue_approval(&m, 0);
    let mut h = harness(&db, "alice");
    h.command(&format!("approval {ap}"));
    h.keys("a");
    h.key(KeyCode::Enter);
    assert_eq!(
        row(&db, &ap),
        ("approved".into(), "alice".into(), String::new())
    );
    assert!(h.screen().contains("approved by alice"), "{}", h.screen());
    verify(&db);
}

#[test]
fn reject_from_the_console_records_the_reason_and_cancels_the_run() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (run, ap) = queue_approval(&m, 1);
    let mut h = harness(&db, "bob");
    h.command(&format!("approval {ap}"));
    h.keys("r");
    h.keys("wrong customer");
    h.key(KeyCode::Enter);
    assert_eq!(
        row(&db, &ap),
        ("rejected".into(), "bob".into(), "wrong customer".into())
    );
    let c = rusqlite::Connection::open(&db).unwrap();
    let st: String = c
        .query_row("SELECT status FROM runs WHERE id = ?1", [&run], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(st, "CANCELLED");
    verify(&db);
}

#[test]
fn a_changed_approval_is_refused_reloaded_and_flagged() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (_, ap) = queue_approval(&m, 2);
    let mut h = harness(&db, "alice");
    h.command(&format!("approval {ap}"));
    h.keys("a");
    // Another writer changes the row after it was rendered.
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute(
        "UPDATE approvals SET hash = ?1 WHERE id = ?2",
        [&"0".repeat(64), &ap],
    )
    .unwrap();
    h.key(KeyCode::Enter);
    assert_eq!(row(&db, &ap).0, "pending", "nothing was decided");
    let s = h.screen();
    assert!(s.contains("approval changed since you read it"), "{s}");
    assert!(s.contains("CHANGED"), "the reloaded view is flagged: {s}");
}

#[test]
fn two_consoles_the_second_gets_already_decided() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (_, ap) = queue_approval(&m, 3);
    let mut a = harness(&db, "alice");
    let mut b = harness(&db, "bob");
    for h in [&mut a, &mut b] {
        h.command(&format!("approval {ap}"));
        h.keys("a");
    }
    a.key(KeyCode::Enter);
    b.key(KeyCode::Enter);
    assert_eq!(
        row(&db, &ap),
        ("approved".into(), "alice".into(), String::new())
    );
    let s = b.screen();
    assert!(s.contains("already approved by alice"), "{s}");
    // The second console now shows the row as it is.
    let shown = match b.app.stack.last() {
        Some(Screen::Approval(s)) => s.row.as_ref().map(|r| r.status.as_str().to_string()),
        _ => None,
    };
    assert_eq!(shown.as_deref(), Some("approved"));
    verify(&db);
}

#[test]
fn cancel_from_run_detail_needs_a_reason_and_cancels() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "r", "running,damaged", &[]);
    for (scenario, by) in [("running", "carol"), ("damaged", "dave")] {
        let run = run_of(&m, scenario);
        let mut h = harness(&db, by);
        h.command(&format!("run {run}"));
        h.keys("x");
        h.key(KeyCode::Enter);
        assert!(h.commands.is_empty(), "no cancel without a reason");
        h.keys("stop it");
        h.key(KeyCode::Enter);
        let c = rusqlite::Connection::open(&db).unwrap();
        let (st, reason, detail): (String, String, String) = c
            .query_row(
                "SELECT status, reason, reason_detail FROM runs WHERE id = ?1",
                [&run],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(
            (st.as_str(), reason.as_str(), detail.as_str()),
            ("CANCELLED", "operator_cancelled", "stop it"),
            "{scenario}"
        );
        assert!(
            h.screen().contains(&format!("run cancelled by {by}")),
            "{}",
            h.screen()
        );
    }
    verify(&db);
}

fn run_status(db: &Path, run: &str) -> String {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("SELECT status FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .unwrap()
}

#[test]
fn deny_from_the_console_needs_a_note_binds_the_hash_and_interrupts_the_run() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (run, ap) = queue_approval(&m, 1);
    let mut h = harness(&db, "erin");
    h.command(&format!("approval {ap}"));
    h.keys("d");
    assert!(h.screen().contains("DENY WITH FEEDBACK"), "{}", h.screen());
    // No note: nothing is written and the dialog stays.
    h.key(KeyCode::Enter);
    assert!(h.commands.is_empty(), "no denial without a note");
    assert!(h.screen().contains("a note for the agent is required"));
    h.keys("refund 30.00, not 65.00");
    h.key(KeyCode::Enter);
    let shown = h.commands.iter().find_map(|c| match c {
        Write::Decide {
            choice: Choice::Deny,
            shown_hash,
            ..
        } => Some(shown_hash.clone()),
        _ => None,
    });
    let c = rusqlite::Connection::open(&db).unwrap();
    let hash: String = c
        .query_row("SELECT hash FROM approvals WHERE id = ?1", [&ap], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(
        shown.as_deref(),
        Some(hash.as_str()),
        "the shown hash is sent"
    );
    assert_eq!(
        row(&db, &ap),
        (
            "rejected".into(),
            "erin".into(),
            "refund 30.00, not 65.00".into()
        )
    );
    assert_eq!(run_status(&db, &run), "INTERRUPTED", "not cancelled");
    let summary: String = c
        .query_row(
            "SELECT json_extract(observation_json, '$.summary') FROM steps
             WHERE id = (SELECT step_id FROM approvals WHERE id = ?1)",
            [&ap],
            |r| r.get(0),
        )
        .unwrap();
    assert!(summary.contains("refund 30.00, not 65.00"), "{summary}");
    assert!(h.screen().contains("denied by erin"), "{}", h.screen());
    verify(&db);
}

/// `d` on a call an MCP proxy holds (its `proxy_calls` row names the run) rejects it with the
/// note, since no agent loop would ever be handed the note, and the notice says the host is
/// told (decision 0040, amendment).
#[test]
fn deny_of_an_mcp_proxy_call_rejects_it_with_the_note() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (run, ap) = queue_approval(&m, 1);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(&format!(
            "CREATE TABLE proxy_calls (id INTEGER PRIMARY KEY, run_id TEXT, session TEXT, tool TEXT);
             INSERT INTO proxy_calls (run_id, session, tool) VALUES ('{run}', 's1', 'fs_write_file');"
        ))
        .unwrap();
    let mut h = harness(&db, "erin");
    h.command(&format!("approval {ap}"));
    h.keys("d");
    h.keys("use /tmp/b");
    h.key(KeyCode::Enter);
    assert_eq!(
        row(&db, &ap),
        ("rejected".into(), "erin".into(), "use /tmp/b".into())
    );
    assert_eq!(
        run_status(&db, &run),
        "CANCELLED",
        "rejected, not left INTERRUPTED"
    );
    assert!(
        h.screen().contains("its host is answered REJECTED"),
        "{}",
        h.screen()
    );
    // agentrt's verifier knows no proxy index (decision 0070, item 8): checked without it.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("DROP TABLE proxy_calls")
        .unwrap();
    verify(&db);
}

#[test]
fn deny_of_a_changed_approval_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (run, ap) = queue_approval(&m, 2);
    let mut h = harness(&db, "erin");
    h.command(&format!("approval {ap}"));
    h.keys("d");
    h.keys("no");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute(
        "UPDATE approvals SET hash = ?1 WHERE id = ?2",
        [&"0".repeat(64), &ap],
    )
    .unwrap();
    h.key(KeyCode::Enter);
    assert_eq!(row(&db, &ap).0, "pending", "nothing was decided");
    assert_eq!(run_status(&db, &run), "WAITING_FOR_APPROVAL");
    assert!(h.screen().contains("approval changed since you read it"));
}

// --- The decision page on the demo (issue 15 items 1-4 and 9) --------------------------------

use countersign::console::testing::{Input, Recheck, ResumeHook, Role};
use countersign::consumer::demo::{backend_beside, build, recheck_demo_run};
use countersign::runtime::driver::{RecheckReport, RecheckScope};

/// The example consumer's policy asked again, read-only, as the binary's hook asks it.
struct DemoPolicy;

impl ResumeHook for DemoPolicy {
    fn can_resume(&self, _: &str) -> bool {
        false
    }
    fn resume(&self, _: &Path, _: &str) -> Result<String, String> {
        Err("not in this test".into())
    }
    fn recheck(&self, db: &Path, run: &str) -> Result<RecheckReport, String> {
        recheck_demo_run(db, &backend_beside(db), run, RecheckScope::Awaiting)
            .map_err(|e| e.to_string())
    }
}

/// The demo's run database (and its backend beside it) in a fresh directory.
fn demo_db() -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("demo.db");
    build(&db, &backend_beside(&db)).unwrap();
    (d, db)
}

/// The pending approval whose presentation holds both `needles`, with its creation time.
fn pending_with(db: &Path, needles: &[&str]) -> (String, i64) {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c
        .prepare("SELECT id, presentation_json, created_at FROM approvals WHERE status = 'pending' ORDER BY rowid")
        .unwrap();
    let rows: Vec<(String, String, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let (id, _, at) = rows
        .into_iter()
        .find(|(_, p, _)| needles.iter().all(|n| p.contains(n)))
        .expect("the demo has such a pending approval");
    (id, Timestamp::parse(&at).unwrap().unix_secs())
}

/// A console on the demo with the consumer's policy, showing approval `id`, its clock a
/// minute after the approval was asked.
fn page(db: &Path, id: &str, at: i64, w: u16, h: u16) -> Harness {
    let cfg = AppConfig {
        by: "tester".into(),
        read_only: false,
        can_resume: false,
    };
    let mut hs = Harness::with(db, w, h, cfg, Box::new(NoWriter));
    hs.resume = Some(std::sync::Arc::new(DemoPolicy));
    hs.input(Input::Tick(at + 60));
    hs.command(&format!("approval {id}"));
    hs
}

/// The screen with the demo's random ids, hashes and times replaced by stable names.
fn redacted(db: &Path, screen: &str) -> String {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut out = screen.to_string();
    let mut names: Vec<(String, String)> = Vec::new();
    for (sql, tag) in [
        ("SELECT id FROM runs ORDER BY rowid", "run"),
        ("SELECT id FROM steps ORDER BY rowid", "step"),
        ("SELECT id FROM approvals ORDER BY rowid", "appr"),
        ("SELECT hash FROM approvals ORDER BY rowid", "hash"),
        ("SELECT created_at FROM approvals ORDER BY rowid", "asked"),
        ("SELECT expires_at FROM approvals ORDER BY rowid", "expires"),
    ] {
        let mut st = c.prepare(sql).unwrap();
        let v: Vec<String> = st
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (i, s) in v.into_iter().enumerate().filter(|(_, s)| !s.is_empty()) {
            // Ids and hashes keep their width, so lines wrap the same; a time's length varies
            // (its trailing zeros are cut), so it becomes its name alone.
            let name = format!("<{tag}{i}>");
            let fixed = tag == "asked" || tag == "expires";
            let pad = if fixed {
                0
            } else {
                s.chars().count().saturating_sub(name.len())
            };
            names.push((s.clone(), format!("{name}{}", "~".repeat(pad))));
            if tag == "hash" || tag == "run" || tag == "appr" {
                let short: String = s.chars().take(12).collect();
                let pad = 12usize.saturating_sub(name.len());
                names.push((short, format!("{name}{}", "~".repeat(pad))));
            }
        }
    }
    for (from, to) in names {
        out = out.replace(&from, &to);
    }
    out
}

/// Where `needle` starts on the screen, if it is there.
fn at(b: &ratatui::buffer::Buffer, needle: &str) -> Option<(u16, u16)> {
    let text = buffer_text(b);
    text.lines().enumerate().find_map(|(y, l)| {
        l.find(needle)
            .map(|i| (l[..i].chars().count() as u16, y as u16))
    })
}

#[test]
fn the_decision_page_shows_the_consumers_facts_and_catches_stale_ones() {
    let (_d, db) = demo_db();
    let (id, asked) = pending_with(&db, &["ord_1004", "\"amount_cents\":6500"]);
    let mut h = page(&db, &id, asked, 80, 24);
    let s = h.screen();
    // Before any raw field and without scrolling at 80x24: title, target, amount.
    let first: Vec<&str> = s.lines().take(8).collect();
    let top = first.join("\n");
    assert!(top.contains("Refund 65.00 USD on ord_1004"), "{s}");
    assert!(top.contains("order (target): ord_1004"), "{s}");
    assert!(top.contains("amount_cents: 6500"), "{s}");
    assert!(top.contains("customer: cu_ana"), "{s}");
    assert!(s.contains("policy now: same as recorded"), "{s}");
    assert!(
        s.find("Refund 65.00").unwrap() < s.find("── the request as stored").unwrap_or(usize::MAX)
    );
    let b = h.buffer();
    let (x, y) = at(&b, "Refund 65.00").unwrap();
    assert_eq!(
        Some(b[(x, y)].fg),
        h.app.theme.style(Role::Title).fg,
        "the title in the title style"
    );

    // A smaller refund on the same order ran: the policy still asks, on a refreshed fact.
    let set_refundable = |cents: i64| {
        let backend = rusqlite::Connection::open(backend_beside(&db)).unwrap();
        backend
            .execute(
                "UPDATE orders SET refunded_cents = total_cents - ?1 WHERE id = 'ord_1004'",
                [cents],
            )
            .unwrap();
    };
    // The reviewer reads a raw field; the page above it grows with today's differences, and
    // the line under the cursor stays where it was.
    h.keys("G");
    let cursor = |h: &Harness| {
        h.screen()
            .lines()
            .enumerate()
            .find(|(_, l)| l.starts_with('▶'))
            .map(|(y, l)| (y, l.to_string()))
    };
    let reading = cursor(&h).expect("a field under the cursor");
    set_refundable(6800);
    h.input(Input::DataChanged);
    assert_eq!(cursor(&h), Some(reading), "{}", h.screen());
    h.keys("g");
    let s = h.screen();
    assert!(s.contains("policy now: DIFFERS"), "{s}");
    assert!(s.contains("refundable_cents: 7000 -> 6800"), "{s}");
    set_refundable(7000);
    h.input(Input::DataChanged);
    assert!(
        h.screen().contains("policy now: same as recorded"),
        "{}",
        h.screen()
    );

    // An earlier refund on the same order ran: only 30.00 is refundable now.
    let backend = rusqlite::Connection::open(backend_beside(&db)).unwrap();
    backend
        .execute(
            "UPDATE orders SET refunded_cents = total_cents - 3000 WHERE id = 'ord_1004'",
            [],
        )
        .unwrap();
    drop(backend);
    let before = std::fs::read(&db).unwrap();
    let backend_before = std::fs::read(backend_beside(&db)).unwrap();
    h.input(Input::DataChanged);
    let s = h.screen();
    assert!(s.contains("policy now: DIFFERS"), "{s}");
    assert_eq!(
        std::fs::read(backend_beside(&db)).unwrap(),
        backend_before,
        "nor to the consumer's backend"
    );
    let Some(Screen::Approval(a)) = h.app.stack.last() else {
        panic!("the approval stays open")
    };
    let Some(Recheck::Differs(d)) = &a.recheck else {
        panic!("today's answer differs: {:?}", a.recheck)
    };
    let all = d.join("\n");
    assert!(all.contains("policy now: deny: invalid_state"), "{all}");
    assert!(all.contains("amount exceeds refundable 3000"), "{all}");
    assert!(s.contains("amount exceeds refundable"), "{s}");
    let b = h.buffer();
    let (x, y) = at(&b, "DIFFERS").unwrap();
    assert_eq!(
        Some(b[(x, y)].fg),
        h.app.theme.style(Role::Danger).fg,
        "a difference is a danger"
    );
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the page's recheck wrote nothing"
    );
    // Item 2: the other pending refunds on ord_1004, with the total at stake.
    let h2 = page(&db, &id, asked, 120, 40);
    let s = h2.screen();
    assert!(
        s.contains("2 other pending approval(s): 0 of this run, 2 on order ord_1004"),
        "{s}"
    );
    assert!(
        s.contains("amount_cents at stake with this one: 16500"),
        "{s}"
    );
    assert!(
        s.contains("Refund 60.00 USD on ord_1004 · amount_cents 6000"),
        "{s}"
    );
    for (w, hh) in SIZES {
        let mut h = page(&db, &id, asked, w, hh);
        h.input(Input::DataChanged);
        if hh >= 40 {
            // The presentation's keys are untrusted: a long one is never cut (issue 14 item 4).
            let s = h.screen();
            assert!(s.contains("session_irreversible_cents"), "{s}");
            assert!(!s.contains("session_i…"), "{s}");
        }
        snap(
            &format!("page__stale_refund@{w}x{hh}"),
            &redacted(&db, &h.screen()),
        );
        // Item 4: the confirmation in the consumer's words, with today's answer as a warning.
        h.keys("a");
        let c = h.screen();
        for l in [
            "what Refund 65.00 USD on ord_1004",
            "amount amount_cents 6500",
            "target order ord_1004",
        ] {
            assert!(c.contains(l), "the confirmation says {l}: {c}");
        }
        assert!(c.contains("today's policy answers differently"), "{c}");
        snap(
            &format!("confirm_approve__stale_refund@{w}x{hh}"),
            &redacted(&db, &c),
        );
    }
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "nor did six more pages"
    );
}

/// The clock of the decision tests (03:50: the queue scenario's approvals are not expired).
fn at_0350() -> i64 {
    Timestamp::parse("2026-01-01T03:50:00Z")
        .unwrap()
        .unix_secs()
}

/// The key-hint bar (the last row).
fn footer(h: &Harness) -> String {
    h.screen().lines().last().unwrap_or_default().to_string()
}

#[test]
fn the_footer_offers_only_what_applies_to_the_approval() {
    for (w, hh) in SIZES {
        let d = tempfile::tempdir().unwrap();
        let (db, m) = fixture(d.path(), "q", "queue", &[]);
        let (_, ap) = queue_approval(&m, 0);
        let cfg = AppConfig {
            by: "alice".into(),
            read_only: false,
            can_resume: false,
        };
        let mut h = Harness::with(&db, w, hh, cfg, decider(&db));
        h.input(Input::Tick(at_0350()));
        h.command(&format!("approval {ap}"));
        assert!(
            footer(&h).starts_with("a approve  r reject"),
            "{}",
            footer(&h)
        );
        h.keys("a");
        h.key(KeyCode::Enter);
        assert_eq!(row(&db, &ap).0, "approved");
        let f = footer(&h);
        assert!(!f.contains("approve") && !f.contains("reject"), "{f}");
        // `a` now says why, and nothing is written.
        h.keys("a");
        assert!(h.screen().contains("approval is approved, not pending"));
        h.input(Input::Tick(at_0350()));
        snap(&format!("approval__decided@{w}x{hh}"), &h.screen());
        let b = h.buffer();
        let (x, y) = at(&b, "space").unwrap();
        assert_eq!(
            Some(b[(x, y)].fg),
            h.app.theme.style(Role::KeyHint).fg,
            "the first hint is now expand, in the key style"
        );
    }
}

#[test]
fn an_expired_approvals_action_says_it_cancels_the_run() {
    let (db, m) = all_db();
    // The hostile fixture's approval expired an hour before the snapshots' clock.
    let mut h = Harness::open(db, 80, 24);
    h.command(&format!("approval {}", approval_of(m, "hostile")));
    let f = footer(&h);
    assert!(f.starts_with("a/r expire: cancels the run"), "{f}");
    assert!(!f.contains("a approve"), "{f}");
    let b = h.buffer();
    let y = b.area.height - 1;
    assert_eq!(Some(b[(0, y)].fg), h.app.theme.style(Role::KeyHint).fg);
    // The goal and the arguments carry hostile text: the title row says so, in the badge style.
    let (x, y) = at(&b, "⚠ HOSTILE goal+args").unwrap();
    assert_eq!(y, 1, "on the title row, visible without scrolling");
    assert_eq!(Some(b[(x, y)].fg), h.app.theme.style(Role::Badge).fg);
}

/// A hook that counts its rechecks.
struct Counting(std::sync::atomic::AtomicUsize);

impl ResumeHook for Counting {
    fn can_resume(&self, _: &str) -> bool {
        false
    }
    fn resume(&self, _: &Path, _: &str) -> Result<String, String> {
        Err("no".into())
    }
    fn recheck(&self, _: &Path, _: &str) -> Result<RecheckReport, String> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Err("counted".into())
    }
}

#[test]
fn the_recheck_is_asked_of_the_worker_never_run_by_update() {
    use countersign::console::testing::{Effect, Query, update};
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (_, ap) = queue_approval(&m, 0);
    let hook = std::sync::Arc::new(Counting(Default::default()));
    let mut h = harness(&db, "alice");
    h.resume = Some(hook.clone());
    h.input(Input::Tick(at_0350()));
    h.holding = true;
    h.command(&format!("approval {ap}"));
    // The approval's row is read; update() answers it with reads, the recheck among them.
    let (id, _, r) = h.held.remove(0);
    let fx = update(&mut h.app, Input::Reply(id, r));
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Query(_, Query::Recheck { .. }))),
        "{fx:?}"
    );
    assert_eq!(
        hook.0.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "update() ran no recheck"
    );
    h.holding = false;
    h.run(fx);
    assert_eq!(
        hook.0.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the worker's answer did"
    );
    assert!(
        h.screen().contains("cannot re-check: counted"),
        "{}",
        h.screen()
    );
}

#[test]
fn a_dialog_whose_approval_another_console_decided_closes_and_says_who() {
    for (w, hh) in SIZES {
        let d = tempfile::tempdir().unwrap();
        let (db, m) = fixture(d.path(), "q", "queue", &[]);
        let (_, ap) = queue_approval(&m, 3);
        let console = |by: &str| {
            let cfg = AppConfig {
                by: by.into(),
                read_only: false,
                can_resume: false,
            };
            let mut h = Harness::with(&db, w, hh, cfg, decider(&db));
            h.input(Input::Tick(at_0350()));
            h.command(&format!("approval {ap}"));
            h
        };
        let mut a = console("alice");
        a.keys("a");
        assert!(a.screen().contains("APPROVE"), "the dialog is open");
        let mut b = console("bob");
        b.keys("a");
        b.key(KeyCode::Enter);
        assert_eq!(
            row(&db, &ap),
            ("approved".into(), "bob".into(), String::new())
        );
        // Alice's console sees the commit (its data_version moved) and reloads.
        a.input(Input::DataChanged);
        assert!(a.app.overlay.is_none(), "the dialog closed");
        let s = a.screen();
        assert!(s.contains("closed: already approved by bob"), "{s}");
        assert!(s.contains("nothing changed"), "{s}");
        snap(&format!("approval__decided_elsewhere@{w}x{hh}"), &s);
        let buf = a.buffer();
        let (x, y) = at(&buf, "closed:").unwrap();
        assert_eq!(Some(buf[(x, y)].fg), a.app.theme.style(Role::Error).fg);
        // Enter now does nothing: no dialog, no write.
        a.key(KeyCode::Enter);
        assert!(a.commands.is_empty(), "alice's console wrote nothing");
        assert_eq!(row(&db, &ap).1, "bob");
    }
}

#[test]
fn a_queue_row_whose_goal_is_hostile_is_marked() {
    let (_d, db) = demo_db();
    let h = Harness::open(&db, 120, 40);
    let s = h.screen();
    // The injected run's pending refund: plain arguments, a hostile goal.
    let marked = |needle: &str| {
        let l = s
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} is queued: {s}"));
        l.contains('⚠')
    };
    assert!(marked("\"amount_cents\":6000"), "{s}");
    assert!(
        !marked("not_as_described"),
        "plain goal, plain arguments: {s}"
    );
    let b = h.buffer();
    let (x, y) = at(&b, "⚠").unwrap();
    assert_eq!(Some(b[(x, y)].fg), h.app.theme.style(Role::Badge).fg);
}

/// Issue 14 item 5 for the console's notices: a refusal the operator returns names a run whose
/// id is not UTF-8 by its bytes (`t-\xff`, as the sanitiser draws it), never by its lossy
/// U+FFFD form, in the status line and in `:messages`; so do the candidates of an ambiguous
/// `:run PREFIX`.
#[test]
fn a_refusal_names_a_run_whose_id_is_not_utf8_by_its_bytes() {
    use countersign::runtime::operator;
    use countersign::runtime::store::Store;
    use support::{hostile, runs};
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("ids.db");
    let store = Store::open(&db).unwrap();
    let now = Timestamp::now();
    for (i, id) in ["p0", "p1"].iter().enumerate() {
        runs::create(&store, id, &format!("goal {i}"), now);
        runs::pause_step(&store, id, &format!("s-{i}"), &format!("a-{i}"), 0, now);
    }
    drop(store);
    hostile::rekey_run(&db, "p0", hostile::NOT_UTF8[0]);
    hostile::rekey_run(&db, "p1", hostile::NOT_UTF8[1]);
    let cfg = AppConfig {
        by: "alice".into(),
        read_only: false,
        can_resume: false,
    };
    let mut h = Harness::with(
        &db,
        160,
        30,
        cfg,
        Box::new(StoreDecider::open(&db).unwrap()),
    );
    h.command("approval a-0");
    h.keys("a");
    // Another operator cancels the run before the approval is confirmed.
    let store = Store::open_existing(&db, false).unwrap();
    operator::cancel(
        &store,
        hostile::NOT_UTF8[0],
        "bob",
        "stop",
        Timestamp::now(),
    )
    .unwrap();
    h.key(KeyCode::Enter);
    let s = h.screen();
    assert!(
        s.contains(r"run t-\xff is CANCELLED, not waiting for approval"),
        "{s}"
    );
    assert!(!s.contains('\u{fffd}'), "{s}");
    let logged = &h.app.messages.last().unwrap().text;
    assert!(
        logged
            .windows(b"run t-\xff is CANCELLED".len())
            .any(|w| w == b"run t-\xff is CANCELLED"),
        "{}",
        logged.escape_ascii()
    );
    // An ambiguous prefix names its candidates by their bytes too.
    h.command("run t-");
    let s = h.screen();
    assert!(s.contains("is the start of 2 run ids"), "{s}");
    assert!(s.contains(r"t-\xff") && s.contains(r"t-\xfe"), "{s}");
    assert!(!s.contains(r"t-\\x") && !s.contains('\u{fffd}'), "{s}");
}

/// A deny dialog (with a note being typed) closes the same way when another console decides
/// the approval first: the reviewer is told, and nothing is sent.
#[test]
fn a_deny_dialog_whose_approval_another_console_decided_closes_too() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (_, ap) = queue_approval(&m, 3);
    let mut a = harness(&db, "alice");
    a.command(&format!("approval {ap}"));
    a.keys("d");
    assert!(a.screen().contains("DENY WITH FEEDBACK"), "{}", a.screen());
    a.keys("too much");
    let mut b = harness(&db, "bob");
    b.command(&format!("approval {ap}"));
    b.keys("a");
    b.key(KeyCode::Enter);
    assert_eq!(row(&db, &ap).0, "approved");
    a.input(Input::DataChanged);
    assert!(a.app.overlay.is_none(), "the deny dialog closed");
    let s = a.screen();
    assert!(s.contains("closed: already approved by bob"), "{s}");
    a.key(KeyCode::Enter);
    assert!(a.commands.is_empty(), "alice's console wrote nothing");
}

/// An approval whose stored fields no longer give its stored hash says so on its screen
/// (`HASH MISMATCH: cancel run`) before anyone presses approve, which refuses it and writes
/// nothing; an intact approval shows no such mark (found from outside: the tampered approval
/// was offered like any other).
#[test]
fn a_tampered_approval_is_marked_before_a_decision_and_refused() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "q", "queue", &[]);
    let (_, intact) = queue_approval(&m, 1);
    let (_, ap) = queue_approval(&m, 0);
    let mut h = harness(&db, "alice");
    h.command(&format!("approval {intact}"));
    assert!(!h.screen().contains("HASH MISMATCH"), "{}", h.screen());
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE approvals SET presentation_json = '{\"amount\":\"1.00 USD\"}' WHERE id = ?1",
            [&ap],
        )
        .unwrap();
    let mut h = harness(&db, "alice");
    h.command(&format!("approval {ap}"));
    assert!(
        h.screen().contains("HASH MISMATCH: cancel run"),
        "{}",
        h.screen()
    );
    h.keys("a");
    h.key(KeyCode::Enter);
    assert_eq!(row(&db, &ap).0, "pending", "{}", h.screen());
}
