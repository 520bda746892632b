//! Issue 15 in the console: deny with feedback (item 7), the fate of an approved call (item 5),
//! runs its program must resume (item 6), ids a person can type (item 8) and whole messages
//! with a footer that offers only what applies (item 9). Snapshots at 80x24, 120x40 and 60x20
//! with the cells that carry meaning checked for their style.

mod console_support;

use console_support::*;
use countersign::console::testing::Role;
use ratatui::buffer::Buffer;
use ratatui::style::Style;

/// The first cell where `needle` starts on screen, as (x, y).
fn find(b: &Buffer, needle: &str) -> Option<(u16, u16)> {
    let text = buffer_text(b);
    for (y, line) in text.lines().enumerate() {
        if let Some(i) = line.find(needle) {
            // Columns: count the display width of what comes before.
            let x = unicode_width::UnicodeWidthStr::width(&line[..i]);
            return Some((x as u16, y as u16));
        }
    }
    None
}

/// Asserts `needle` is on screen and its first cell has the theme's style for `role`
/// (foreground and background; modifiers as the theme gives them).
fn assert_role(h: &Harness, needle: &str, role: Role) {
    let b = h.buffer();
    let (x, y) = find(&b, needle).unwrap_or_else(|| panic!("{needle:?} on\n{}", h.screen()));
    let want: Style = h.app.theme.style(role);
    let cell = &b[(x, y)];
    assert_eq!(
        (cell.fg, cell.bg),
        (want.fg.unwrap_or(cell.fg), want.bg.unwrap_or(cell.bg)),
        "{needle:?} drawn as {role:?}"
    );
}

fn each_size(name: &str, drive: impl Fn(&mut Harness), check: impl Fn(&Harness)) {
    let (db, _) = all_db();
    for (w, h) in SIZES {
        let mut hs = Harness::open(db, w, h);
        drive(&mut hs);
        check(&hs);
        snap(&format!("{name}@{w}x{h}"), &hs.screen());
    }
}

#[test]
fn deny_asks_for_a_note_for_the_agent() {
    let (_, m) = all_db();
    let id = approval_of(m, "waiting");
    each_size(
        "confirm_deny__waiting",
        |h| {
            h.command(&format!("approval {id}"));
            h.keys("d");
            h.keys("refund 30.00, not 65.00");
        },
        |h| {
            assert_role(h, "DENY WITH FEEDBACK", Role::Danger);
            assert_role(h, "note for the agent", Role::Dim);
        },
    );
}
