//! The console's loop: opens the database threads, feeds every input to `update`, performs
//! the effects, and draws at most once per 10 ms inside a synchronized update.

use std::io::Stdout;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant, SystemTime};

use crossterm::event::{self, Event};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

use super::config::{default_config_dir, load_config, load_mouse, load_settings};
use super::data::{ConsoleData, Decider};
use super::decider::StoreDecider;
use super::log::Log;
use super::msg::{Effect, Input, Job};
use super::options::{ConsoleError, ConsoleOptions};
use super::sqlite::SqliteData;
use super::state::{App, AppConfig};
use super::terminal;
use super::theme::Depth;
use super::update::update;
use super::view;
use super::worker::{self, Worker};

type Term = Terminal<CrosstermBackend<Stdout>>;

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The two database threads' inboxes: reads and writes, and the counting lane.
struct Lanes {
    jobs: Sender<Job>,
    counts: Sender<Job>,
    log: Option<Log>,
}

/// Reads and checks the console's configuration (`config.toml`, the theme `theme` or the
/// configured one, the key bindings) as [`run`] will, without opening anything: for a
/// command that writes before it opens the console (`demo`) to refuse a bad configuration
/// before it writes.
pub fn check_config(theme: Option<&str>) -> Result<(), ConsoleError> {
    let config_dir = default_config_dir();
    let depth = Depth::detect(|k| std::env::var(k).ok());
    load_config(config_dir.as_deref(), theme, depth)?;
    load_settings(config_dir.as_deref())?;
    load_mouse(config_dir.as_deref())?;
    Ok(())
}

/// Standard input and output are a terminal, as the console needs ([`ConsoleError::NoTerminal`]
/// otherwise).
pub fn check_terminal() -> Result<(), ConsoleError> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        Ok(())
    } else {
        Err(ConsoleError::NoTerminal)
    }
}

/// Runs the console until the operator quits.
pub fn run(opts: ConsoleOptions) -> Result<(), ConsoleError> {
    let config_dir = opts.config_dir.clone().or_else(default_config_dir);
    let depth = Depth::detect(|k| std::env::var(k).ok());
    let (theme, keymap) = load_config(config_dir.as_deref(), opts.theme.as_deref(), depth)?;
    let settings = load_settings(config_dir.as_deref())?;
    let mouse = opts.mouse || load_mouse(config_dir.as_deref())?;
    // Without any name (no --by, no COUNTERSIGN_BY or USER, an account without a passwd
    // entry), the console still opens, for reading: decisions record who made them.
    let by = match opts.by.clone().filter(|b| !b.trim().is_empty()) {
        Some(b) => Some(b),
        None => crate::runtime::operator::default_operator_checked().map_err(|why| {
            ConsoleError::Operator {
                name: "(from the environment)".into(),
                why,
            }
        })?,
    };
    let mut opts = opts;
    if let Some(b) = &by
        && let Some(why) = crate::runtime::operator::name_refused(b)
    {
        return Err(ConsoleError::Operator {
            name: b.clone(),
            why,
        });
    }
    let by = match by {
        Some(b) => b,
        None => {
            opts.read_only = true;
            String::new()
        }
    };
    let (data, counting_data, decider, stops) = open_database(&mut opts)?;
    // Said before anything is drawn or written (the log file is made only for a console that
    // opens), instead of the terminal library's "No such device or address".
    check_terminal()?;
    let log_path = opts
        .log_file
        .clone()
        .or_else(|| config_dir.as_ref().map(|d| d.join("console.log")));
    let log = log_path.as_deref().map(Log::open);
    let cfg = AppConfig {
        by,
        read_only: opts.read_only,
        can_resume: opts.resume.is_some() && !opts.read_only,
    };

    terminal::install_panic_hook(log.clone());
    terminal::want_mouse(mouse);
    let _guard = terminal::Guard;
    terminal::restore_on_termination()?;
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
    app.settings = settings;

    let (tx, rx) = channel::<Input>();
    let db: PathBuf = opts.db.clone();
    let lanes = Lanes {
        jobs: Worker {
            data,
            decider,
            resume: opts.resume.clone(),
            db: db.clone(),
            poll: Some(Duration::from_secs(1)),
            log: log.clone(),
        }
        .spawn(tx.clone()),
        counts: Worker {
            data: counting_data,
            decider: None,
            resume: None,
            db,
            poll: None,
            log: log.clone(),
        }
        .spawn(tx.clone()),
        log,
    };
    spawn_input(tx)?;
    let fx = app.start();
    let ran = perform(&lanes, fx, &mut term, &mut app)
        .and_then(|_| main_loop(&lanes, &rx, &mut term, &mut app));
    // The shell first; the cancels may take a moment on a distant server.
    terminal::restore();
    stop_lanes(stops);
    ran
}

/// The reading lane's reader, the counting lane's, the decision writer, and what stops the
/// lanes' statements on the server when the console quits.
type Opened = (
    Box<dyn ConsoleData>,
    Box<dyn ConsoleData>,
    Option<Box<dyn Decider>>,
    Vec<Stop>,
);

/// Stops a lane's statement in flight (PostgreSQL's cancel request).
type Stop = Box<dyn FnOnce() + Send>;

/// Runs the stops, each on a thread of its own, and waits for them a little: a console that
/// quits while a lane's read (a count scanning a million rows) is running asks the server to
/// stop it rather than leave it to run until the server notices the closed connection
/// (decision 0086 item 7). SQLite's reads are in this process and end with it.
fn stop_lanes(stops: Vec<Stop>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let n = stops.len();
    for stop in stops {
        let tx = tx.clone();
        std::thread::spawn(move || {
            stop();
            let _ = tx.send(());
        });
    }
    let until = Instant::now() + Duration::from_millis(500);
    for _ in 0..n {
        if rx
            .recv_timeout(until.saturating_duration_since(Instant::now()))
            .is_err()
        {
            return;
        }
    }
}

/// Opens the run database `opts.db` names: a SQLite path, or (with the `postgres` feature) a
/// `postgres://` URL, whose errors name it with its password hidden. The resume hook is
/// kept on either: it resumes through the driver on the same store (decision 0083).
fn open_database(opts: &mut ConsoleOptions) -> Result<Opened, ConsoleError> {
    let make = opts.decider.take();
    #[cfg(feature = "postgres")]
    if let Some(url) = opts.db.to_str().filter(|s| crate::pgstore::is_pg_url(s)) {
        use super::pg::{PgData, pg_decider};
        let url = crate::pgstore::PgUrl::parse(url).map_err(|e| super::data::DataError::Open {
            path: "the PostgreSQL URL".into(),
            cause: e.to_string().into(),
        })?;
        let data = PgData::open_pg(&url)?;
        let counting = PgData::open_pg_counting(&url)?;
        let stops: Vec<Stop> = [data.canceller(), counting.canceller()]
            .into_iter()
            .map(|c| -> Stop {
                Box::new(move || {
                    let _ = c.cancel();
                })
            })
            .collect();
        let decider: Option<Box<dyn Decider>> = match (opts.read_only, make) {
            (true, _) => None,
            (false, Some(make)) => {
                Some(make(&opts.db).map_err(|e| ConsoleError::Writer(e.into()))?)
            }
            (false, None) => Some(Box::new(
                pg_decider(&url).map_err(|e| ConsoleError::Writer(e.into()))?,
            )),
        };
        return Ok((Box::new(data), Box::new(counting), decider, stops));
    }
    let data = SqliteData::open(&opts.db)?;
    let counting_data = SqliteData::open_counting(&opts.db)?;
    let decider: Option<Box<dyn Decider>> = match (opts.read_only, make) {
        (true, _) => None,
        (false, Some(make)) => Some(make(&opts.db).map_err(|e| ConsoleError::Writer(e.into()))?),
        (false, None) => Some(Box::new(
            StoreDecider::open(&opts.db).map_err(ConsoleError::Writer)?,
        )),
    };
    Ok((Box::new(data), Box::new(counting_data), decider, vec![]))
}

/// The terminal's events as inputs, on a thread of its own.
fn spawn_input(tx: Sender<Input>) -> std::io::Result<()> {
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
                    // Moves are dropped here: with any-event tracking they would wake the
                    // loop for nothing.
                    Event::Mouse(m) if m.kind == event::MouseEventKind::Moved => continue,
                    Event::Mouse(m) => Input::Mouse(m),
                    _ => continue,
                };
                if tx.send(input).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}

/// Performs effects; `true` when one of them is to quit.
fn perform(
    lanes: &Lanes,
    fx: Vec<Effect>,
    term: &mut Term,
    app: &mut App,
) -> Result<bool, ConsoleError> {
    for e in fx {
        match e {
            Effect::Query(id, q) if worker::is_count(&q) => {
                let _ = lanes.counts.send(Job::Query(id, q));
            }
            Effect::Query(id, q) => {
                let _ = lanes.jobs.send(Job::Query(id, q));
            }
            Effect::Write(id, c) => {
                if let Some(l) = &lanes.log {
                    l.write(&format!(
                        "command {id} by {}: {:?}",
                        app.cfg.by,
                        std::mem::discriminant(&c)
                    ));
                }
                let _ = lanes.jobs.send(Job::Write(id, c));
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
            Effect::Notify(how, pending) => {
                super::notify::send(&mut std::io::stdout(), how, pending)?;
            }
        }
    }
    Ok(false)
}

fn main_loop(
    lanes: &Lanes,
    rx: &Receiver<Input>,
    term: &mut Term,
    app: &mut App,
) -> Result<(), ConsoleError> {
    let mut last_draw = Instant::now() - Duration::from_secs(1);
    let mut next_tick = Instant::now() + Duration::from_secs(1);
    let mut fault = terminal::test_fault();
    loop {
        if app.dirty && last_draw.elapsed() >= Duration::from_millis(10) {
            draw(term, app)?;
            last_draw = Instant::now();
            inject_fault(fault.take().as_deref());
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
            let fx = update(app, i);
            if perform(lanes, fx, term, app)? || app.quit {
                return Ok(());
            }
        }
    }
    Ok(())
}

fn draw(term: &mut Term, app: &mut App) -> Result<(), ConsoleError> {
    crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::BeginSynchronizedUpdate
    )?;
    term.draw(|f| view::draw(f, app))?;
    crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::EndSynchronizedUpdate
    )?;
    app.dirty = false;
    Ok(())
}

/// `COUNTERSIGN_TEST_PANIC` (debug builds): a panic on the UI thread after its first frame,
/// or one caught on a background thread.
fn inject_fault(fault: Option<&str>) {
    match fault {
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
