//! Issue 14 in the console: one escape notation (a stored reason or kind that is not UTF-8 shows
//! as `\xNN`, never U+FFFD, in the runs list and the approval detail).

mod console_support;

use console_support::*;

#[test]
fn invalid_utf8_reason_and_kind_show_as_bytes() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "bad", "waiting", &[]);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "UPDATE runs SET reason = CAST(X'726561736f6eff' AS TEXT);
             UPDATE approvals SET kind = CAST(X'6b696e64ff' AS TEXT);",
        )
        .unwrap();
    let mut h = Harness::open(&db, 120, 40);
    h.keys("2");
    let runs = h.screen();
    assert!(runs.contains(r"reason\xff"), "{runs}");
    assert!(!runs.contains('\u{fffd}'), "{runs}");
    h.command(&format!("approval {}", approval_of(&m, "waiting")));
    let detail = h.screen();
    assert!(detail.contains(r"kind\xff"), "{detail}");
    assert!(!detail.contains('\u{fffd}'), "{detail}");
}

/// Issue 14, item 4, in the approval detail: key paths quote keys that need it, strings keep
/// their quotes, labels are never cut (they wrap), duplicate keys are flagged.
#[test]
fn different_requests_never_render_alike_in_the_detail() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "alike", "waiting", &[]);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            r#"UPDATE approvals SET request_json = replace(request_json, '"args":{', '"args":{"refund":{"amount_cents":100},"refund.amount_cents":900000,"amount ":"8000","n":"null","o":"{}","customer_REFUND_amount_in_cents_total_for_this_order_line":1,"customer_CHARGE_amount_in_cents_total_for_this_order_line":2,"amount_cents":1,');"#,
        )
        .unwrap();
    let mut h = Harness::open(&db, 60, 120);
    h.command(&format!("approval {}", approval_of(&m, "waiting")));
    let s = h.screen();
    let has_line = |l: &str| s.lines().any(|x| x.trim_end() == l);
    for line in [
        " args.refund.amount_cents",
        " args.\"refund.amount_cents\"",
        " args.\"amount \"",
        "   \"8000\"",
        " args.n",
        "   \"null\"",
        "   \"{}\"",
        "   100",
        "   900000",
    ] {
        assert!(has_line(line), "no line {line:?}:\n{s}");
    }
    // Labels wider than a third of the screen are wrapped whole, not cut.
    let flat: String = s.lines().map(str::trim).collect();
    for label in [
        "args.customer_REFUND_amount_in_cents_total_for_this_order_line",
        "args.customer_CHARGE_amount_in_cents_total_for_this_order_line",
    ] {
        assert!(flat.contains(label), "{label} is shown whole:\n{s}");
    }
    assert!(s.contains("DUPLICATE KEY"), "{s}");
    // And the title says so before any field is read (found from outside: no mark there).
    let mut wide = Harness::open(&db, 120, 40);
    wide.command(&format!("approval {}", approval_of(&m, "waiting")));
    let screen = wide.screen();
    let title = screen
        .lines()
        .find(|l| l.contains(" Approval "))
        .unwrap_or_default();
    assert!(
        title.contains("HOSTILE") && title.contains("duplicate-key"),
        "{screen}"
    );
}

/// Issue 16: a stored status is database text like any other. A run and an approval whose
/// status holds an escape sequence and a bidi override show them escaped in the runs list,
/// the run header and the approval detail, never raw.
#[test]
fn statuses_are_drawn_through_the_sanitiser() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "status", "waiting", &[]);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "UPDATE runs SET status = 'ODD' || char(27) || '[2J' || char(8238) || 'X';
             UPDATE approvals SET status = 'odd' || char(27) || ']0;t' || char(7);",
        )
        .unwrap();
    let mut h = Harness::open(&db, 120, 40);
    let raw = |s: &str| s.contains('\u{1b}') || s.contains('\u{202e}') || s.contains('\u{7}');
    h.keys("2");
    let runs = h.screen();
    assert!(runs.contains("ODD"), "{runs}");
    assert!(!raw(&runs), "{runs:?}");
    h.command(&format!("run {}", run_of(&m, "waiting")));
    let header = h.screen();
    assert!(header.contains(r"ODD\x1b[2J\u{202e}X"), "{header}");
    assert!(!raw(&header), "{header:?}");
    h.command(&format!("approval {}", approval_of(&m, "waiting")));
    let detail = h.screen();
    assert!(detail.contains(r"odd\x1b]0;t\x07"), "{detail}");
    assert!(!raw(&detail), "{detail:?}");
}

/// Issue 15 item 1: the decision page's facts come from the consumer's presentation, which may
/// carry model-chosen text: they are escaped with their badges like every raw field, and a
/// title named twice is read as the runtime reads it (the last) and said to be named twice.
#[test]
fn the_decision_pages_facts_are_escaped_and_a_title_named_twice_is_flagged() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "p", "waiting", &[]);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            r#"UPDATE approvals SET presentation_json =
               '{"title":"Refund 1.00 USD","title":"Refund 9999.00 USD \u001b[2J","order":"ord_1\u202e4001","amount_cents":100}';
               UPDATE runs SET goal = 'pay me' || char(8238) || 'now';"#,
        )
        .unwrap();
    // At 80x24: the title, target, amount and hostile mark without scrolling.
    let mut h = Harness::open(&db, 80, 24);
    let queue = h.screen();
    assert!(
        queue.contains('⚠'),
        "a hostile goal marks the queue row: {queue}"
    );
    h.command(&format!("approval {}", approval_of(&m, "waiting")));
    let s = h.screen();
    let top: String = s.lines().take(6).collect::<Vec<_>>().join("\n");
    assert!(top.contains(r"Refund 9999.00 USD \x1b[2J"), "{s}");
    assert!(
        top.contains("[title named twice: the last is shown]"),
        "{s}"
    );
    assert!(
        top.contains(r"order (target): ord_1\u{202e}4001 [BIDI]"),
        "{s}"
    );
    assert!(top.contains("amount_cents: 100"), "{s}");
    assert!(s.lines().nth(1).unwrap().contains("⚠ HOSTILE goal"), "{s}");
    h.keys("a");
    let c = h.screen();
    assert!(c.contains(r"what Refund 9999.00 USD \x1b[2J"), "{c}");
    for (name, raw) in [("detail", &s), ("confirmation", &c)] {
        assert!(
            !raw.contains('\u{1b}') && !raw.contains('\u{202e}'),
            "no raw control or bidi character reaches the {name}"
        );
    }
}

/// The approval page's title draws the stored hash through the sanitiser (an escape in it is
/// `\x1b`, never dropped with its `[2J` left behind), and a stored expiry that does not read
/// as a time is `?` in the queue and on the page, never "never" (found from outside).
#[test]
fn a_hostile_hash_and_an_unreadable_expiry_are_shown_for_what_they_are() {
    let d = tempfile::tempdir().unwrap();
    let (db, m) = fixture(d.path(), "hx", "waiting", &[]);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "UPDATE approvals SET hash = 'deadbeef' || char(27) || '[2Jcafe', \
             expires_at = 'yesterday';",
        )
        .unwrap();
    let mut h = Harness::open(&db, 140, 40);
    let queue = h.screen();
    let row = queue
        .lines()
        .find(|l| l.contains("issue_refund"))
        .unwrap_or_else(|| panic!("no row: {queue}"));
    assert_eq!(
        row.split_whitespace().nth(1),
        Some("?"),
        "the EXPIRES cell: {queue}"
    );
    assert!(!queue.contains("never"), "{queue}");
    h.command(&format!("approval {}", approval_of(&m, "waiting")));
    let page = h.screen();
    let title = page.lines().nth(1).unwrap_or_default();
    assert!(title.contains(r"deadbeef\x1b[2"), "{title}");
    assert!(title.contains("expires ?"), "{title}");
    assert!(!page.contains("expires never"), "{page}");
    // The fields, whole, say it too: never "expires: never" (found from outside).
    assert!(!page.contains("never"), "{page}");
    assert!(page.contains("? (does not read as a time"), "{page}");
}

/// A queue row whose arguments repeat a key carries the list's warning mark, as one with
/// hidden characters does (found from outside: `{"amount_cents":1,…,"amount_cents":9999999}`
/// read as an ordinary row); the same row without the repeat has none.
#[test]
fn a_queue_row_whose_arguments_repeat_a_key_is_marked() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "dup", "waiting", &[]);
    let row = |db: &std::path::Path| {
        let mut h = Harness::open(db, 120, 30);
        h.keys("1");
        h.screen()
            .lines()
            .find(|l| l.contains("issue_refund") || l.contains('{'))
            .unwrap_or_default()
            .to_string()
    };
    let before = row(&db);
    assert!(!before.contains('⚠'), "{before}");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            r#"UPDATE approvals SET request_json = replace(request_json, '"args":{', '"args":{"amount_cents":1,');"#,
        )
        .unwrap();
    let after = row(&db);
    assert!(after.contains('⚠'), "{after}");
}
