//! The interactive review console.
//!
//! State and view apart: [`app::App`] changes only through [`app::update`] (pure); rendering
//! ([`render`]) reads it; database work runs on a worker thread ([`worker`]) with its own
//! read-only connection and comes back as messages tagged with request ids. Every string from
//! the database is drawn through [`text`].

pub mod app;
pub mod data;
pub mod decider;
pub mod fields;
pub mod keymap;
mod keys;
pub mod nav;
pub mod overlays;
pub mod render;
mod replies;
pub mod screens;
pub mod sqlite;
pub mod terminal;
pub mod text;
pub mod theme;
pub mod time;
pub mod worker;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crossterm::event::{self, Event};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

use app::{App, AppConfig, Effect, Input, update};
use data::{Decider, ResumeHook};
use keymap::Keymap;
use theme::{Depth, Theme};

/// Makes the decision writer for a database path.
pub type MakeDecider = Box<dyn FnOnce(&Path) -> Result<Box<dyn Decider>, String> + Send>;

/// What `countersign --db PATH` (no command) passes to the console.
pub struct ConsoleOptions {
    pub db: PathBuf,
    /// Who decides (`--by`); else `COUNTERSIGN_BY`, else `USER`.
    pub by: Option<String>,
    pub read_only: bool,
    /// Theme name (`default`, `light`, `high-contrast`, `mono` or a user theme).
    pub theme: Option<String>,
    /// Directory of `config.toml` and `themes/`; default `$XDG_CONFIG_HOME/countersign` or
    /// `~/.config/countersign`.
    pub config_dir: Option<PathBuf>,
    /// Log file; default `<config_dir>/console.log`. Nothing is logged to the terminal.
    pub log_file: Option<PathBuf>,
    /// Mouse reports (the scroll wheel moves the cursor); off unless asked.
    pub mouse: bool,
    /// Resumes runs whose tools this build registers (the binary supplies it).
    pub resume: Option<Arc<dyn ResumeHook>>,
    /// Makes the decision writer for a database (approve/reject shown, cancel); `None` uses
    /// the store's operator calls ([`decider::StoreDecider`]).
    pub decider: Option<MakeDecider>,
}

impl ConsoleOptions {
    pub fn new(db: impl Into<PathBuf>) -> Self {
        ConsoleOptions {
            db: db.into(),
            by: None,
            read_only: false,
            theme: None,
            config_dir: None,
            log_file: None,
            mouse: false,
            resume: None,
            decider: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error(transparent)]
    Data(#[from] data::DataError),
    #[error(transparent)]
    Theme(#[from] theme::ThemeError),
    #[error(transparent)]
    Keymap(#[from] keymap::KeymapError),
    #[error("config file {file}: {problem}")]
    Config { file: String, problem: String },
    #[error(
        "no operator name: pass --by NAME or set COUNTERSIGN_BY (decisions record who made them)"
    )]
    NoIdentity,
    #[error("cannot open the run database for decisions: {0} (use --read-only to only look)")]
    Writer(String),
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
    #[error("the console's database thread stopped on an internal error; the log file has details")]
    WorkerStopped,
}

/// A log file (append only); never the terminal.
#[derive(Clone)]
pub struct Log(Arc<Mutex<Option<std::fs::File>>>);

impl Log {
    pub fn open(path: &Path) -> Log {
        if let Some(d) = path.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok();
        Log(Arc::new(Mutex::new(f)))
    }
    pub fn write(&self, msg: &str) {
        if let Ok(mut g) = self.0.lock()
            && let Some(f) = g.as_mut()
        {
            let t = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let _ = writeln!(f, "{t} {}", text::escaped(msg.as_bytes()));
        }
    }
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

fn default_config_dir() -> Option<PathBuf> {
    env("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".config")))
        .map(|d| d.join("countersign"))
}

/// Reads `config.toml` (theme, `[keys]`); absent file = defaults.
pub fn load_config(
    dir: Option<&Path>,
    theme_override: Option<&str>,
    depth: Depth,
) -> Result<(Theme, Keymap), ConsoleError> {
    let mut theme_name = theme_override.map(str::to_owned);
    let mut keymap = Keymap::default();
    if let Some(dir) = dir {
        let p = dir.join("config.toml");
        if p.exists() {
            let file = p.display().to_string();
            let src = std::fs::read_to_string(&p).map_err(|e| ConsoleError::Config {
                file: file.clone(),
                problem: e.to_string(),
            })?;
            let t: toml::Table =
                src.parse()
                    .map_err(|e: toml::de::Error| ConsoleError::Config {
                        file: file.clone(),
                        problem: e.message().to_string(),
                    })?;
            for k in t.keys() {
                if k != "theme" && k != "keys" {
                    return Err(ConsoleError::Config {
                        file,
                        problem: format!("key `{k}`: unknown setting; expected theme or [keys]"),
                    });
                }
            }
            if theme_name.is_none()
                && let Some(v) = t.get("theme")
            {
                theme_name = Some(
                    v.as_str()
                        .ok_or_else(|| ConsoleError::Config {
                            file: file.clone(),
                            problem: "key `theme`: must be a string".into(),
                        })?
                        .to_string(),
                );
            }
            if let Some(k) = t.get("keys") {
                let k = k.as_table().ok_or_else(|| ConsoleError::Config {
                    file: file.clone(),
                    problem: "key `keys`: must be a table".into(),
                })?;
                keymap = Keymap::with_overrides(&file, k)?;
            }
        }
    }
    let theme = Theme::load(theme_name.as_deref().unwrap_or("default"), dir, depth)?;
    Ok((theme, keymap))
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Runs the console until the operator quits.
pub fn run(opts: ConsoleOptions) -> Result<(), ConsoleError> {
    let config_dir = opts.config_dir.clone().or_else(default_config_dir);
    let depth = Depth::detect(|k| std::env::var(k).ok());
    let (theme, keymap) = load_config(config_dir.as_deref(), opts.theme.as_deref(), depth)?;
    let by = opts
        .by
        .clone()
        .or_else(|| env("COUNTERSIGN_BY"))
        .or_else(|| env("USER"));
    let by = match by {
        Some(b) => b,
        None if opts.read_only => String::new(),
        None => return Err(ConsoleError::NoIdentity),
    };
    let log_path = opts
        .log_file
        .clone()
        .or_else(|| config_dir.as_ref().map(|d| d.join("console.log")));
    let log = log_path.as_deref().map(Log::open);
    let data = sqlite::SqliteData::open(&opts.db)?;
    let counting_data = sqlite::SqliteData::open_counting(&opts.db)?;
    let decider: Option<Box<dyn Decider>> = match (opts.read_only, opts.decider) {
        (true, _) => None,
        (false, Some(make)) => Some(make(&opts.db).map_err(ConsoleError::Writer)?),
        (false, None) => Some(Box::new(
            decider::StoreDecider::open(&opts.db).map_err(ConsoleError::Writer)?,
        )),
    };
    let can_resume = opts.resume.is_some() && !opts.read_only;
    let cfg = AppConfig {
        by,
        read_only: opts.read_only,
        can_resume,
    };

    terminal::install_panic_hook(log.clone());
    terminal::want_mouse(opts.mouse);
    let _guard = terminal::Guard;
    terminal::enter()?;
    // No `Terminal::clear`: it asks the terminal for the cursor position, which a terminal
    // (or a test's parser) may never answer; the alternate screen starts blank.
    crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::Clear(crossterm::terminal::ClearType::All)
    )?;
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    let size = term.size()?;
    let mut app = App::new(cfg, keymap, theme, now_secs(), (size.width, size.height));

    let (tx, rx) = channel::<Input>();
    let jobs = worker::Worker {
        data: Box::new(data),
        decider,
        resume: opts.resume.clone(),
        db: opts.db.clone(),
        poll: Some(Duration::from_secs(1)),
        log: log.clone(),
    }
    .spawn(tx.clone());
    let counts = worker::Worker {
        data: Box::new(counting_data),
        decider: None,
        resume: None,
        db: opts.db.clone(),
        poll: None,
        log: log.clone(),
    }
    .spawn(tx.clone());
    let itx = tx.clone();
    std::thread::Builder::new()
        .name("countersign-input".into())
        .spawn(move || {
            loop {
                let ev = match event::read() {
                    Ok(e) => e,
                    Err(_) => return,
                };
                let input = match ev {
                    Event::Key(k) => Input::Key(k),
                    Event::Paste(s) => Input::Paste(s),
                    Event::Resize(w, h) => Input::Resize(w, h),
                    Event::Mouse(m) => {
                        let code = match m.kind {
                            event::MouseEventKind::ScrollDown => event::KeyCode::Down,
                            event::MouseEventKind::ScrollUp => event::KeyCode::Up,
                            _ => continue,
                        };
                        Input::Key(event::KeyEvent::new(code, event::KeyModifiers::NONE))
                    }
                    _ => continue,
                };
                if itx.send(input).is_err() {
                    return;
                }
            }
        })?;

    let perform = |fx: Vec<Effect>,
                   term: &mut Terminal<CrosstermBackend<std::io::Stdout>>,
                   app: &mut App|
     -> Result<bool, ConsoleError> {
        for e in fx {
            match e {
                Effect::Query(id, q) if worker::is_count(&q) => {
                    let _ = counts.send(worker::Job::Query(id, q));
                }
                Effect::Query(id, q) => {
                    let _ = jobs.send(worker::Job::Query(id, q));
                }
                Effect::Command(id, c) => {
                    if let Some(l) = &log {
                        l.write(&format!(
                            "command {id} by {}: {:?}",
                            app.cfg.by,
                            std::mem::discriminant(&c)
                        ));
                    }
                    let _ = jobs.send(worker::Job::Command(id, c));
                }
                Effect::Copy(s) => terminal::copy(&s)?,
                Effect::Suspend => {
                    terminal::suspend()?;
                    crossterm::execute!(
                        std::io::stdout(),
                        crossterm::terminal::Clear(crossterm::terminal::ClearType::All)
                    )?;
                    *term = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
                    app.dirty = true;
                }
                Effect::Quit => return Ok(true),
            }
        }
        Ok(false)
    };

    let fx = app.start();
    perform(fx, &mut term, &mut app)?;
    let mut last_draw = Instant::now() - Duration::from_secs(1);
    let mut next_tick = Instant::now() + Duration::from_secs(1);
    let mut fault = terminal::test_fault();
    loop {
        if app.dirty && last_draw.elapsed() >= Duration::from_millis(10) {
            crossterm::execute!(
                std::io::stdout(),
                crossterm::terminal::BeginSynchronizedUpdate
            )?;
            term.draw(|f| render::draw(f, &app))?;
            crossterm::execute!(
                std::io::stdout(),
                crossterm::terminal::EndSynchronizedUpdate
            )?;
            app.dirty = false;
            last_draw = Instant::now();
            match fault.take().as_deref() {
                Some("ui") => panic!("fault injected by COUNTERSIGN_TEST_PANIC=ui"),
                Some("caught") => {
                    let _ = std::thread::spawn(|| {
                        std::panic::catch_unwind(|| {
                            panic!("fault injected by COUNTERSIGN_TEST_PANIC=caught")
                        })
                    })
                    .join();
                }
                _ => {}
            }
        }
        let wait = if app.dirty {
            Duration::from_millis(10)
        } else {
            next_tick.saturating_duration_since(Instant::now())
        };
        let first = match rx.recv_timeout(wait) {
            Ok(i) => Some(i),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut inputs: Vec<Input> = first.into_iter().collect();
        while let Ok(i) = rx.try_recv() {
            inputs.push(i);
        }
        if Instant::now() >= next_tick {
            next_tick = Instant::now() + Duration::from_secs(1);
            if app.shows_clock() {
                inputs.push(Input::Tick(now_secs()));
            }
        }
        for i in inputs {
            if let Input::Resize(..) = i {
                term.autoresize()?;
            }
            if let Input::WorkerStopped = i {
                return Err(ConsoleError::WorkerStopped);
            }
            let fx = update(&mut app, i);
            if perform(fx, &mut term, &mut app)? || app.quit {
                return Ok(());
            }
        }
    }
    Ok(())
}
