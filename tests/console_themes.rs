//! Issue 16: every theme keeps contrast where it matters. In the queue and runs lists of each
//! embedded theme, no cell of the selected row is drawn in the colour it sits on, and escapes
//! and danger marks (expired approvals) never are, selected or not.

mod console_support;

use console_support::*;
use countersign::console::testing::{Depth, Theme};
use ratatui::buffer::Buffer;
use ratatui::style::Color;

const THEMES: [&str; 4] = ["default", "light", "high-contrast", "mono"];

/// Cells drawn in their own background colour: (x, y, symbol, colour).
fn invisible(b: &Buffer, rows: std::ops::Range<u16>) -> Vec<(u16, u16, String, Color)> {
    let mut out = Vec::new();
    for y in rows {
        for x in 0..b.area.width {
            let c = &b[(x, y)];
            if c.symbol().trim().is_empty() {
                continue;
            }
            if let (fg, bg) = (c.fg, c.bg)
                && fg == bg
                && fg != Color::Reset
            {
                out.push((x, y, c.symbol().to_string(), fg));
            }
        }
    }
    out
}

#[test]
fn every_theme_keeps_the_selection_escapes_and_danger_marks_readable() {
    let (db, _) = all_db();
    for name in THEMES {
        let theme = Theme::load(name, None, Depth::TrueColor).unwrap();
        for screen in ["queue", "runs"] {
            let mut h = Harness::open(db, 120, 40);
            h.app.theme = theme.clone();
            if screen == "runs" {
                h.keys("2");
            }
            // Every row in turn is the selected one: the whole list, selected and not.
            for _ in 0..12 {
                let b = h.buffer();
                let bad = invisible(&b, 0..b.area.height);
                assert!(
                    bad.is_empty(),
                    "theme {name}, {screen}: cells drawn in their own background: {bad:?}"
                );
                h.keys("j");
            }
        }
    }
}
