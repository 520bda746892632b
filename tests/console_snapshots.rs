//! Screen snapshots of every screen and overlay at 80x24, 120x40 and 60x20, rendered from
//! fixture databases written by the independent Python writer, at a fixed "now".

mod console_support;

use console_support::*;
use crossterm::event::KeyCode;

/// Fields the decision page puts before the raw fields of the hostile fixture's approval
/// (title, target, amount, policy said, policy now, related, goal, agent's reason, the
/// presentation's `args` and `tool`, the heading).
const PAGE_FIELDS: usize = 11;

fn each_size(name: &str, drive: impl Fn(&mut Harness)) {
    let (db, _) = all_db();
    for (w, h) in SIZES {
        let mut hs = Harness::open(db, w, h);
        drive(&mut hs);
        snap(&format!("{name}@{w}x{h}"), &hs.screen());
    }
}

#[test]
fn queue_lists_pending_approvals_oldest_first() {
    each_size("queue__all", |_| {});
}

#[test]
fn queue_filter_narrows_as_you_type() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.keys("/");
    h.keys("send_status");
    snap("queue__filter_typing@80x24", &h.screen());
    h.key(KeyCode::Enter);
    snap("queue__filtered@80x24", &h.screen());
}

#[test]
fn approval_detail_shows_hostile_fields_escaped() {
    let (_, m) = all_db();
    let id = approval_of(m, "hostile");
    each_size("approval__hostile", |h| {
        h.command(&format!("approval {id}"))
    });
}

#[test]
fn approval_detail_scrolls_and_expands() {
    let (db, m) = all_db();
    let mut h = Harness::open(db, 120, 40);
    h.command(&format!("approval {}", approval_of(m, "hostile")));
    // Past the decision page's 11 fields to the same raw field as before it.
    for _ in 0..PAGE_FIELDS + 12 {
        h.key(KeyCode::Char('j'));
    }
    h.key(KeyCode::Char('e'));
    snap("approval__hostile_expanded@120x40", &h.screen());
    h.key(KeyCode::Char('s'));
    snap("approval__hostile_strict@120x40", &h.screen());
}

#[test]
fn approval_detail_of_a_damaged_request() {
    let (_, m) = all_db();
    let id = approval_of(m, "damaged");
    each_size("approval__damaged", |h| {
        h.command(&format!("approval {id}"))
    });
}

#[test]
fn runs_list_with_markers() {
    each_size("runs__all", |h| h.keys("2"));
}

#[test]
fn runs_status_filter() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    // `f` opens the picker on "all runs"; WAITING is the next row.
    h.keys("2f");
    h.key(KeyCode::Down);
    h.key(KeyCode::Enter);
    snap("runs__waiting@80x24", &h.screen());
    // The picker opens on the status in force; FAILED is four rows further.
    h.keys("f");
    for _ in 0..4 {
        h.key(KeyCode::Down);
    }
    h.key(KeyCode::Enter);
    snap("runs__failed@80x24", &h.screen());
}

#[test]
fn runs_status_picker() {
    each_size("runs__status_picker", |h| {
        h.keys("2f");
        h.key(KeyCode::Down);
    });
}

#[test]
fn run_detail_steps_of_the_hostile_run() {
    let (_, m) = all_db();
    let id = run_of(m, "hostile");
    each_size("run_detail__hostile_steps", |h| {
        h.command(&format!("run {id}"))
    });
}

#[test]
fn run_detail_events_with_chain_marks() {
    let (_, m) = all_db();
    let id = run_of(m, "hostile");
    each_size("run_detail__hostile_events", |h| {
        h.command(&format!("run {id}"));
        h.key(KeyCode::Tab);
    });
}

#[test]
fn run_detail_approvals_and_model_calls() {
    let (db, m) = all_db();
    let mut h = Harness::open(db, 120, 40);
    h.command(&format!("run {}", run_of(m, "rejected")));
    h.key(KeyCode::Tab);
    h.key(KeyCode::Tab);
    snap("run_detail__rejected_approvals@120x40", &h.screen());
    let mut h = Harness::open(db, 120, 40);
    h.command(&format!("run {}", run_of(m, "running")));
    h.key(KeyCode::BackTab);
    snap("run_detail__running_model_calls@120x40", &h.screen());
}

#[test]
fn run_detail_of_the_damaged_run() {
    let (_, m) = all_db();
    let id = run_of(m, "damaged");
    each_size("run_detail__damaged_steps", |h| {
        h.command(&format!("run {id}"))
    });
}

#[test]
fn damaged_rows_show_error_and_raw_bytes() {
    each_size("damaged__all", |h| h.keys("3"));
}

#[test]
fn help_is_generated_from_the_keymap() {
    each_size("help", |h| h.keys("?"));
}

#[test]
fn confirm_approve_repeats_tool_run_hash_and_warnings() {
    let (_, m) = all_db();
    let id = approval_of(m, "hostile");
    each_size("confirm_approve__hostile", |h| {
        h.command(&format!("approval {id}"));
        h.keys("a");
    });
}

#[test]
fn confirm_reject_asks_for_a_reason() {
    let (db, m) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.command(&format!("approval {}", approval_of(m, "waiting")));
    h.keys("r");
    h.keys("not this order");
    snap("confirm_reject__waiting@80x24", &h.screen());
}

#[test]
fn confirm_cancel_from_run_detail() {
    let (db, m) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.command(&format!("run {}", run_of(m, "running")));
    h.keys("x");
    snap("confirm_cancel__running@80x24", &h.screen());
}

#[test]
fn command_line_overlay() {
    let (db, _) = all_db();
    let mut h = Harness::open(db, 80, 24);
    h.keys(":run ");
    snap("command_line@80x24", &h.screen());
}

#[test]
fn read_only_shows_actions_off() {
    let (db, m) = all_db();
    let cfg = countersign::console::testing::AppConfig {
        by: String::new(),
        read_only: true,
        can_resume: false,
    };
    let mut h = Harness::with(db, 80, 24, cfg, Box::new(NoWriter));
    h.command(&format!("approval {}", approval_of(m, "waiting")));
    h.keys("a");
    snap("approval__read_only@80x24", &h.screen());
}

#[test]
fn empty_database_screens() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "none", "none", &[]);
    let mut h = Harness::open(&db, 80, 24);
    snap("queue__empty@80x24", &h.screen());
    h.keys("2");
    snap("runs__empty@80x24", &h.screen());
}

#[test]
fn confirm_resume_when_this_build_can_resume() {
    let (db, m) = all_db();
    let cfg = countersign::console::testing::AppConfig {
        by: "tester".into(),
        read_only: false,
        can_resume: true,
    };
    let mut h = Harness::with(db, 80, 24, cfg, Box::new(NoWriter));
    h.resume = Some(std::sync::Arc::new(OnlyRun(run_of(m, "approved"))));
    h.command(&format!("run {}", run_of(m, "completed")));
    h.keys("R");
    assert!(
        h.screen().contains("run is COMPLETED") || h.screen().contains("does not register"),
        "{}",
        h.screen()
    );
    h.key(KeyCode::Esc);
    h.command(&format!("run {}", run_of(m, "approved")));
    snap("run_detail__approved_resumable@80x24", &h.screen());
    h.keys("R");
    snap("confirm_resume__approved@80x24", &h.screen());
}

#[test]
fn queue_of_the_hostile_scenario_alone() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = fixture(d.path(), "hostile", "hostile", &[]);
    for (w, h) in SIZES {
        let hs = Harness::open(&db, w, h);
        snap(&format!("queue__hostile@{w}x{h}"), &hs.screen());
    }
    let mut hs = Harness::open(&db, 80, 24);
    hs.keys("2");
    snap("runs__hostile@80x24", &hs.screen());
}

/// A resume hook that knows the tools of one run only.
struct OnlyRun(String);

impl countersign::console::testing::ResumeHook for OnlyRun {
    fn can_resume(&self, run_id: &str) -> bool {
        run_id == self.0
    }
    fn resume(&self, _: &std::path::Path, _: &str) -> Result<String, String> {
        Ok("resumed".into())
    }
}

#[test]
fn code_point_inspector_of_a_hostile_field() {
    let (db, m) = all_db();
    let mut h = Harness::open(db, 120, 40);
    h.command(&format!("approval {}", approval_of(m, "hostile")));
    for _ in 0..PAGE_FIELDS + 11 {
        h.key(KeyCode::Char('j'));
    }
    h.key(KeyCode::Char('i'));
    snap("approval__hostile_inspect@120x40", &h.screen());
    // `]` pages on through every code point; past the last page it stays there; `[` goes back.
    let first = h.screen();
    assert!(
        first.contains("code points 1–40 of 563, page 1/15"),
        "{first}"
    );
    h.key(KeyCode::Char(']'));
    snap("approval__hostile_inspect_page2@120x40", &h.screen());
    for _ in 0..20 {
        h.key(KeyCode::Char(']'));
    }
    let last = h.screen();
    assert!(
        last.contains("code points 561–563 of 563, page 15/15"),
        "{last}"
    );
    for _ in 0..14 {
        h.key(KeyCode::Char('['));
    }
    assert_eq!(h.screen(), first, "back on the first page");
    // Another field starts at its first page.
    h.key(KeyCode::Char(']'));
    h.key(KeyCode::Char('j'));
    assert!(h.screen().contains("page 1/"), "{}", h.screen());
}

#[test]
fn damaged_rows_narrowed_by_the_filter() {
    each_size("damaged__filtered", |h| {
        h.keys("3/eof");
        h.key(KeyCode::Enter);
    });
}

#[test]
fn runs_narrowed_by_the_filter_with_the_match_notice() {
    each_size("runs__filtered_next_match", |h| {
        h.keys("2/cancel");
        h.key(KeyCode::Enter);
        h.keys("n");
    });
}

#[test]
fn command_line_completes_with_tab() {
    each_size("command_line__completed", |h| {
        h.keys(":r");
        h.key(KeyCode::Tab);
    });
}

#[test]
fn help_opened_on_the_approval_lists_its_keys_first() {
    let (_, m) = all_db();
    let id = approval_of(m, "waiting");
    each_size("help__on_approval", |h| {
        h.command(&format!("approval {id}"));
        h.keys("?");
    });
}
