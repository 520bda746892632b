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
