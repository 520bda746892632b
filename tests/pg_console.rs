//! The review console on PostgreSQL (issue 19) against a real server (`tests/pg_support`): the
//! same fixture database, copied from SQLite into PostgreSQL, renders the same screens through
//! both readers; an approve from the console lands through the operator's compare-and-set and
//! a stale one is refused; the reader's data version moves when a sequencer pass chains a
//! batch (LISTEN/NOTIFY), and not for a commit with nothing chained.
#![cfg(feature = "postgres")]

mod console_support;
mod pg_support;

use std::path::Path;

use console_support::{buffer_text, fixture, now};
use countersign::console::testing::{self, PgData, SqliteData, StoreDecider};
use countersign::console::testing::{App, AppConfig, ConsoleData, Decider, Effect, Input};
use countersign::console::testing::{Depth, Keymap, Theme, draw, update};
use countersign::pgstore::PgStore;
use countersign::pgstore::copy::{Endpoint, copy};
use countersign::runtime::types::Timestamp;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// A console driven synchronously, its reads answered by `data` on the spot.
struct Console {
    app: App,
    data: Box<dyn ConsoleData>,
    decider: Option<Box<dyn Decider>>,
}

impl Console {
    fn new(data: Box<dyn ConsoleData>, decider: Option<Box<dyn Decider>>, by: &str) -> Console {
        let cfg = AppConfig {
            by: by.into(),
            read_only: false,
            can_resume: false,
        };
        let theme = Theme::load("default", None, Depth::TrueColor).unwrap();
        let app = App::new(cfg, Keymap::default(), theme, now(), (120, 36));
        let mut c = Console { app, data, decider };
        let fx = c.app.start();
        c.run(fx);
        c
    }

    fn run(&mut self, mut fx: Vec<Effect>) {
        while !fx.is_empty() {
            let e = fx.remove(0);
            let more = match e {
                Effect::Query(id, q) => {
                    let r = testing::answer(self.data.as_mut(), None, Path::new(""), &q);
                    update(&mut self.app, Input::Reply(id, r))
                }
                Effect::Write(id, w) => {
                    let r = match &mut self.decider {
                        Some(d) => d.run(&w),
                        None => panic!("no writer in this test"),
                    };
                    update(&mut self.app, Input::Done(id, r))
                }
                _ => vec![],
            };
            fx.extend(more);
        }
    }

    fn input(&mut self, i: Input) {
        let fx = update(&mut self.app, i);
        self.run(fx);
    }

    fn key(&mut self, code: KeyCode) {
        self.input(Input::Key(KeyEvent::new(code, KeyModifiers::NONE)));
    }

    fn keys(&mut self, s: &str) {
        for c in s.chars() {
            self.key(KeyCode::Char(c));
        }
    }

    fn command(&mut self, cmd: &str) {
        self.keys(":");
        self.keys(cmd);
        self.key(KeyCode::Enter);
    }

    fn screen(&self) -> String {
        let (w, h) = self.app.size;
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, &self.app)).unwrap();
        buffer_text(t.backend().buffer())
    }
}

/// A fixture of `scenarios` written to SQLite and copied into a fresh PostgreSQL database.
fn both(
    dir: &Path,
    scenarios: &str,
) -> Option<(std::path::PathBuf, serde_json::Value, pg_support::TestDb)> {
    let db = pg_support::fresh_db()?;
    let (sqlite, m) = fixture(dir, "f", scenarios, &[]);
    copy(
        &Endpoint::Sqlite(sqlite.clone()),
        &Endpoint::Pg(db.pg_url()),
    )
    .expect("copy");
    Some((sqlite, m, db))
}

fn pg_reader(db: &pg_support::TestDb) -> Box<dyn ConsoleData> {
    Box::new(PgData::open_pg(&db.pg_url()).expect("the console's PostgreSQL reader opens"))
}

/// Every run id and approval id of the manifest, in its order.
fn ids(m: &serde_json::Value) -> (Vec<String>, Vec<String>) {
    let (mut runs, mut approvals) = (Vec::new(), Vec::new());
    for (_, s) in m["scenarios"].as_object().unwrap() {
        for r in s["runs"].as_array().unwrap() {
            runs.push(r["id"].as_str().unwrap().to_string());
            for a in r["approvals"].as_array().into_iter().flatten() {
                approvals.push(a.as_str().unwrap().to_string());
            }
        }
    }
    (runs, approvals)
}

/// The screens a reviewer walks through, each as drawn: the queue, the runs list, the
/// damaged rows, every run's detail on each of its tabs, every approval.
fn walk(c: &mut Console, m: &serde_json::Value) -> Vec<(String, String)> {
    let mut shots = vec![("queue".to_string(), c.screen())];
    c.keys("2");
    shots.push(("runs".into(), c.screen()));
    c.keys("3");
    shots.push(("damaged".into(), c.screen()));
    c.keys("1");
    let (runs, approvals) = ids(m);
    for r in &runs {
        c.command(&format!("run {r}"));
        for tab in 0..4 {
            shots.push((format!("run {r} tab {tab}"), c.screen()));
            c.key(KeyCode::Tab);
        }
        c.key(KeyCode::Esc);
    }
    for a in &approvals {
        c.command(&format!("approval {a}"));
        shots.push((format!("approval {a}"), c.screen()));
        c.key(KeyCode::Esc);
    }
    shots
}

#[test]
fn pg_console_screens_are_the_sqlite_screens() {
    let d = tempfile::tempdir().unwrap();
    let Some((sqlite, m, db)) = both(d.path(), "all") else {
        return;
    };
    let mut on_sqlite = Console::new(Box::new(SqliteData::open(&sqlite).unwrap()), None, "tester");
    let mut on_pg = Console::new(pg_reader(&db), None, "tester");
    let a = walk(&mut on_sqlite, &m);
    let b = walk(&mut on_pg, &m);
    assert_eq!(a.len(), b.len());
    let mut differ = Vec::new();
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        if x != y {
            differ.push(format!(
                "--- {name} on SQLite:\n{x}\n--- on PostgreSQL:\n{y}"
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} screens differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    // Not trivially equal: the screens show the fixture's rows.
    let (runs, _) = ids(&m);
    assert!(a[1].1.contains(&runs[0][..8]), "{}", a[1].1);
    if std::env::var_os("SHOW").is_some() {
        for (n, s) in &b {
            eprintln!("=== {n}\n{s}");
        }
    }
}
