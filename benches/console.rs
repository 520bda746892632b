//! Console bench: time to the first full frame and per page-down on the runs list, for a
//! database of ~100 runs and one of ~10 000 runs (fixture --big), in the same run. Reports the
//! ratio: with page reads by window the large database should cost about the same.
//!
//! `cargo bench --bench console` (needs python3 and the shared tools).

mod support;
use support::shared;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use countersign::console::testing;
use countersign::console::testing::ConsoleData;
use countersign::console::testing::Keymap;
use countersign::console::testing::SqliteData;

use countersign::console::testing::{App, AppConfig, Effect, Input, update};
use countersign::console::testing::{Depth, Theme};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn fixture(dir: &Path, name: &str, big: u32) -> PathBuf {
    let db = dir.join(format!("{name}.db"));
    let st = Command::new("python3")
        .arg(shared().join("tools/agentrt_fixture.py"))
        .arg(&db)
        .args([
            "--force",
            "--no-check",
            "--seed",
            "7",
            "--base-time",
            "2026-01-01T00:00:00Z",
        ])
        .args(["--big", &big.to_string()])
        .status()
        .expect("python3");
    assert!(st.success());
    db
}

fn settle(app: &mut App, data: &mut SqliteData, mut fx: Vec<Effect>) {
    while !fx.is_empty() {
        let e = fx.remove(0);
        if let Effect::Query(id, q) = e {
            let r = testing::handle(data as &mut dyn ConsoleData, &q);
            fx.extend(update(app, Input::Reply(id, r)));
        }
    }
}

fn draw(term: &mut Terminal<TestBackend>, app: &App) {
    term.draw(|f| testing::draw(f, app)).unwrap();
}

/// (first frame, mean per page-down)
fn measure(db: &Path, pages: u32) -> (Duration, Duration) {
    let t0 = Instant::now();
    let mut data = SqliteData::open(db).unwrap();
    let theme = Theme::load("default", None, Depth::TrueColor).unwrap();
    let cfg = AppConfig {
        by: "bench".into(),
        read_only: true,
        can_resume: false,
    };
    let mut app = App::new(cfg, Keymap::default(), theme, 1_767_240_000, (120, 40));
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let fx = app.start();
    settle(&mut app, &mut data, fx);
    let fx = update(
        &mut app,
        Input::Key(KeyEvent::new(KeyCode::Char('2'), KeyModifiers::NONE)),
    );
    settle(&mut app, &mut data, fx);
    draw(&mut term, &app);
    let first = t0.elapsed();
    let t1 = Instant::now();
    for _ in 0..pages {
        let fx = update(
            &mut app,
            Input::Key(KeyEvent::new(KeyCode::PageDown, KeyModifiers::NONE)),
        );
        settle(&mut app, &mut data, fx);
        draw(&mut term, &app);
    }
    (first, t1.elapsed() / pages)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let small = fixture(dir.path(), "small", 88);
    let large = fixture(dir.path(), "large", 10_000);
    // Warm up the page cache and the code once each.
    measure(&small, 3);
    measure(&large, 3);
    // The same walk on both: two pages down from the top (the small list has ~100 rows).
    let (sf, sp) = measure(&small, 2);
    let (lf, lp) = measure(&large, 2);
    println!(
        "first full frame: 100 runs {sf:?}, 10 000 runs {lf:?}, ratio {:.2}",
        lf.as_secs_f64() / sf.as_secs_f64()
    );
    println!(
        "per page-down:    100 runs {sp:?}, 10 000 runs {lp:?}, ratio {:.2}",
        lp.as_secs_f64() / sp.as_secs_f64()
    );
    // Deep in the large list (OFFSET reads grow with the offset).
    let (_, deep) = measure(&large, 250);
    println!(
        "per page-down over 250 pages of 10 000 runs: {deep:?}, ratio to 100 runs {:.2}",
        deep.as_secs_f64() / sp.as_secs_f64()
    );
}
