//! Shared support for the console tests: fixture databases from the independent Python writer,
//! a synchronous driver for `update()` (queries answered on the spot by the real read-only
//! SQLite reader), and rendering into ratatui's TestBackend.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use countersign::console::testing;
use countersign::console::testing::Keymap;
use countersign::console::testing::SqliteData;
use countersign::console::testing::draw;
use countersign::console::testing::{App, AppConfig, Effect, Input, Query, Reply, update};
use countersign::console::testing::{ConsoleData, DecideError, Decider, Write as Cmd, WriteResult};
use countersign::console::testing::{Depth, Settings, Theme};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;

pub const SEED: &str = "7";
pub const BASE: &str = "2026-01-01T00:00:00Z";

/// The fixed "now" every snapshot renders at: 04:10 on the fixtures' day.
pub fn now() -> i64 {
    countersign::runtime::types::Timestamp::parse("2026-01-01T04:10:00Z")
        .unwrap()
        .unix_secs()
}

pub fn shared_dir() -> PathBuf {
    let m = Path::new(env!("CARGO_MANIFEST_DIR"));
    let near = m.join("../shared");
    if near.join("tools/agentrt_fixture.py").exists() {
        near
    } else {
        PathBuf::from("/work/shared")
    }
}

/// Writes a fixture database; returns its path and the manifest.
pub fn fixture(
    dir: &Path,
    name: &str,
    scenarios: &str,
    extra: &[&str],
) -> (PathBuf, serde_json::Value) {
    let db = dir.join(format!("{name}.db"));
    let man = dir.join(format!("{name}.json"));
    let out = Command::new("python3")
        .arg(shared_dir().join("tools/agentrt_fixture.py"))
        .arg(&db)
        .args([
            "--force",
            "--no-check",
            "--seed",
            SEED,
            "--base-time",
            BASE,
            "--scenario",
            scenarios,
            "--manifest",
        ])
        .arg(&man)
        .args(extra)
        .output()
        .expect("python3 runs the fixture writer");
    assert!(
        out.status.success(),
        "fixture: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&man).unwrap()).unwrap();
    (db, m)
}

/// One shared database with every scenario (read-only tests only).
pub fn all_db() -> &'static (PathBuf, serde_json::Value) {
    static DB: OnceLock<(tempfile::TempDir, PathBuf, serde_json::Value)> = OnceLock::new();
    let (_, p, m) = DB.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        let (p, m) = fixture(d.path(), "all", "all", &[]);
        (d, p, m)
    });
    // SAFETY-free: the tuple lives as long as the static.
    Box::leak(Box::new((p.clone(), m.clone())))
}

pub fn approval_of(m: &serde_json::Value, scenario: &str) -> String {
    m["scenarios"][scenario]["runs"][0]["approvals"][0]
        .as_str()
        .unwrap()
        .to_string()
}

pub fn run_of(m: &serde_json::Value, scenario: &str) -> String {
    m["scenarios"][scenario]["runs"][0]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A decider that refuses everything (the read-side tests never decide).
pub struct NoWriter;
impl Decider for NoWriter {
    fn run(&mut self, _: &Cmd) -> WriteResult {
        Err(DecideError::Unavailable("no writer in this test".into()))
    }
}

pub struct Harness {
    pub app: App,
    /// The database the reads are answered from (the recheck hook is handed its path).
    pub db: PathBuf,
    pub data: SqliteData,
    pub decider: Box<dyn Decider>,
    pub commands: Vec<Cmd>,
    pub copies: Vec<String>,
    pub resume: Option<std::sync::Arc<dyn countersign::console::testing::ResumeHook>>,
    /// While set, reads are answered at once but their replies are held back (a slow worker):
    /// [`Harness::deliver`] hands them to `update` later, in any order.
    pub holding: bool,
    /// Replies held back, in the order their reads were asked.
    pub held: Vec<(u64, Query, Reply)>,
    /// Notifications the console asked the terminal for (issue 21), in order.
    pub notified: Vec<(countersign::console::testing::Notify, u64)>,
}

impl Harness {
    pub fn open(db: &Path, w: u16, h: u16) -> Harness {
        Self::with(
            db,
            w,
            h,
            AppConfig {
                by: "tester".into(),
                read_only: false,
                can_resume: false,
            },
            Box::new(NoWriter),
        )
    }

    pub fn with(db: &Path, w: u16, h: u16, cfg: AppConfig, decider: Box<dyn Decider>) -> Harness {
        Self::with_settings(db, w, h, cfg, decider, Default::default())
    }

    /// As [`Harness::open`], with `config.toml`'s `[queue]` settings in force from the start.
    pub fn open_with(db: &Path, w: u16, h: u16, settings: Settings) -> Harness {
        let cfg = AppConfig {
            by: "tester".into(),
            read_only: false,
            can_resume: false,
        };
        Self::with_settings(db, w, h, cfg, Box::new(NoWriter), settings)
    }

    pub fn with_settings(
        db: &Path,
        w: u16,
        h: u16,
        cfg: AppConfig,
        decider: Box<dyn Decider>,
        settings: Settings,
    ) -> Harness {
        let theme = Theme::load("default", None, Depth::TrueColor).unwrap();
        let mut app = App::new(cfg, Keymap::default(), theme, now(), (w, h));
        app.settings = settings;
        let data = SqliteData::open(db).unwrap();
        let mut h = Harness {
            app,
            db: db.to_path_buf(),
            data,
            decider,
            commands: vec![],
            copies: vec![],
            resume: None,
            holding: false,
            held: vec![],
            notified: vec![],
        };
        let fx = h.app.start();
        h.run(fx);
        h
    }

    /// Performs effects synchronously until none are left.
    pub fn run(&mut self, mut fx: Vec<Effect>) {
        while let Some(e) = (!fx.is_empty()).then(|| fx.remove(0)) {
            let more = match e {
                Effect::Query(id, q) => {
                    // As the worker answers it: the recheck through the hook, on this thread.
                    let r = testing::answer(
                        &mut self.data as &mut dyn ConsoleData,
                        self.resume.as_deref(),
                        &self.db,
                        &q,
                    );
                    if self.holding {
                        self.held.push((id, q, r));
                        vec![]
                    } else {
                        update(&mut self.app, Input::Reply(id, r))
                    }
                }
                Effect::Write(id, c) => {
                    self.commands.push(c.clone());
                    let r = self.decider.run(&c);
                    update(&mut self.app, Input::Done(id, r))
                }
                Effect::Copy(s) => {
                    self.copies.push(s);
                    vec![]
                }
                Effect::Notify(how, n) => {
                    self.notified.push((how, n));
                    vec![]
                }
                Effect::Suspend | Effect::Quit => vec![],
            };
            fx.extend(more);
        }
    }

    /// Hands the held replies to `update` in the order `order` gives (indices into `held`
    /// as it is now), replacing a reply where `replace` says so; what they ask for is
    /// answered at once (holding stops).
    pub fn deliver(&mut self, order: &[usize], replace: impl Fn(&Query, Reply) -> Reply) {
        self.holding = false;
        let held = std::mem::take(&mut self.held);
        for &i in order {
            let (id, q, r) = held[i].clone();
            let r = replace(&q, r);
            self.input(Input::Reply(id, r));
        }
    }

    pub fn input(&mut self, i: Input) {
        let fx = update(&mut self.app, i);
        self.run(fx);
    }

    pub fn key(&mut self, code: KeyCode) {
        self.input(Input::Key(KeyEvent::new(code, KeyModifiers::NONE)));
    }

    pub fn ctrl(&mut self, c: char) {
        self.input(Input::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::CONTROL,
        )));
    }

    /// Types characters one key at a time.
    pub fn keys(&mut self, s: &str) {
        for c in s.chars() {
            self.key(KeyCode::Char(c));
        }
    }

    pub fn command(&mut self, cmd: &str) {
        self.keys(":");
        self.keys(cmd);
        self.key(KeyCode::Enter);
    }

    pub fn buffer(&self) -> Buffer {
        let (w, h) = self.app.size;
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, &self.app)).unwrap();
        t.backend().buffer().clone()
    }

    pub fn screen(&self) -> String {
        buffer_text(&self.buffer())
    }
}

/// The buffer as text, one line per row, trailing spaces trimmed.
pub fn buffer_text(b: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..b.area.height {
        let mut line = String::new();
        let mut skip = 0;
        for x in 0..b.area.width {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let s = b[(x, y)].symbol();
            line.push_str(s);
            skip = unicode_width::UnicodeWidthStr::width(s).saturating_sub(1);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Asserts a snapshot in the top-level snapshots/ folder under `name`.
pub fn snap(name: &str, text: &str) {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s.bind(|| insta::assert_snapshot!(name.to_string(), text));
}

pub const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (60, 20)];
