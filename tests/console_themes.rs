//! Issue 16: every theme keeps contrast where it matters. In the queue and runs lists of each
//! embedded theme, no cell of the selected row is drawn in the colour it sits on, and escapes
//! and danger marks (expired approvals) never are, selected or not.

mod console_support;

use console_support::*;
use countersign::console::testing::{Depth, Role, Theme};
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

/// The band of an age as the fixture's queue shows it (defaults: 15m warning, 1h stale).
fn band(age: &str) -> usize {
    if age.ends_with('s') {
        0
    } else if age.contains('h') || age.contains('d') {
        2
    } else {
        let m: i64 = age.trim_end_matches('m').parse().unwrap();
        usize::from(m >= 15)
    }
}

/// WCAG's relative luminance of a colour (the 16 ANSI ones as xterm draws them by default).
fn luminance(c: Color) -> Option<f64> {
    let (r, g, b) = match c {
        Color::Rgb(r, g, b) => (r, g, b),
        Color::Black => (0, 0, 0),
        Color::Red => (205, 0, 0),
        Color::Green => (0, 205, 0),
        Color::Yellow => (205, 205, 0),
        Color::Blue => (0, 0, 238),
        Color::Magenta => (205, 0, 205),
        Color::Cyan => (0, 205, 205),
        Color::Gray => (229, 229, 229),
        Color::DarkGray => (127, 127, 127),
        Color::LightRed => (255, 0, 0),
        Color::LightGreen => (0, 255, 0),
        Color::LightYellow => (255, 255, 0),
        Color::LightBlue => (92, 92, 255),
        Color::LightMagenta => (255, 0, 255),
        Color::LightCyan => (0, 255, 255),
        Color::White => (255, 255, 255),
        _ => return None,
    };
    let lin = |v: u8| {
        let v = f64::from(v) / 255.0;
        if v <= 0.03928 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    Some(0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b))
}

/// Issue 21: the AGE column's three bands (fresh, warning, stale) are drawn in three distinct
/// styles in every theme, selected or not; on the selected row no band's text is drawn in its
/// background colour, and where both colours are known exactly they keep a 3:1 contrast.
#[test]
fn every_theme_draws_the_three_age_bands_distinctly_and_readably_when_selected() {
    // The fixture's last requests are dated after the snapshots' clock (they have no age);
    // a copy dates them 30 s before it, so every band has rows.
    let dir = tempfile::tempdir().unwrap();
    let db = &dir.path().join("bands.db");
    std::fs::copy(&all_db().0, db).unwrap();
    rusqlite::Connection::open(db)
        .unwrap()
        .execute(
            "UPDATE approvals SET created_at = '2026-01-01T04:09:30Z' \
             WHERE created_at > '2026-01-01T04:10:00Z'",
            [],
        )
        .unwrap();
    for name in THEMES {
        let theme = Theme::load(name, None, Depth::TrueColor).unwrap();
        let mut h = Harness::open(db, 120, 40);
        h.app.theme = theme.clone();
        // [band] -> (style unselected, style selected)
        let mut seen: [Vec<(String, bool)>; 3] = Default::default();
        for row in 0..9u16 {
            let b = h.buffer();
            for y in 3..12u16 {
                let age: String = (0..6).map(|x| b[(x, y)].symbol()).collect();
                let age = age.trim().to_string();
                let c = &b[(0, y)];
                let is_sel = y - 3 == row;
                if is_sel && c.fg != Color::Reset {
                    assert_ne!(c.fg, c.bg, "theme {name}: age {age} selected is invisible");
                    if let (Some(f), Some(g)) = (luminance(c.fg), luminance(c.bg)) {
                        let ratio = (f.max(g) + 0.05) / (f.min(g) + 0.05);
                        assert!(ratio >= 3.0, "theme {name}: age {age} selected: {ratio:.2}");
                    }
                }
                let st = format!("{:?}/{:?}/{:?}", c.fg, c.bg, c.modifier);
                seen[band(&age)].push((st, is_sel));
            }
            h.keys("j");
        }
        for sel in [false, true] {
            let styles: Vec<std::collections::BTreeSet<&String>> = seen
                .iter()
                .map(|v| {
                    v.iter()
                        .filter(|(_, s)| *s == sel)
                        .map(|(st, _)| st)
                        .collect()
                })
                .collect();
            for (i, s) in styles.iter().enumerate() {
                assert_eq!(s.len(), 1, "theme {name}: band {i} (selected {sel}): {s:?}");
            }
            assert!(
                styles[0] != styles[1] && styles[1] != styles[2] && styles[0] != styles[2],
                "theme {name} (selected {sel}): bands look alike: {styles:?}"
            );
        }
    }
}

/// A request dated after the console's clock has no age: its AGE cell (`in 4h`) is drawn as
/// text, in none of the three bands (the shared fixture's last requests are such).
#[test]
fn a_time_after_the_clock_is_drawn_in_no_age_band() {
    let (db, _) = all_db();
    let theme = Theme::load("default", None, Depth::TrueColor).unwrap();
    let h = Harness::open(db, 120, 40);
    let b = h.buffer();
    let bands = [Role::AgeFresh, Role::AgeWarning, Role::AgeStale].map(|r| theme.style(r).fg);
    let mut seen = 0;
    // Row 3 is the selected one; the others are drawn as they are.
    for y in 4..12u16 {
        let age: String = (0..6).map(|x| b[(x, y)].symbol()).collect();
        if !age.trim().starts_with("in ") {
            continue;
        }
        seen += 1;
        let fg = Some(b[(0, y)].fg);
        assert!(!bands.contains(&fg), "{age} drawn in an age band");
    }
    assert!(seen > 0, "the fixture holds requests after the clock");
}
