//! The terminal's lifecycle: raw mode, alternate screen, bracketed paste, mouse off; restored on
//! every exit path (a guard's Drop and the panic hook), around ctrl-z suspend, and never
//! written to outside a frame (except OSC 52 copy, which carries escaped text).

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};

use super::log::Log;

static ACTIVE: AtomicBool = AtomicBool::new(false);
static MOUSE: AtomicBool = AtomicBool::new(false);

/// Asks for mouse reports (scroll wheel) on the next `enter`; off by default.
pub fn want_mouse(on: bool) {
    MOUSE.store(on, Ordering::SeqCst);
}

/// Puts the terminal in the console's modes.
pub fn enter() -> io::Result<()> {
    enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    let mut out = io::stdout();
    execute!(
        out,
        EnterAlternateScreen,
        EnableBracketedPaste,
        cursor::Hide
    )?;
    if MOUSE.load(Ordering::SeqCst) {
        execute!(out, EnableMouseCapture)?;
    } else {
        execute!(out, DisableMouseCapture)?;
    }
    Ok(())
}

/// Gives the terminal back as it was; safe to call more than once.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let mut out = io::stdout();
        let _ = execute!(
            out,
            DisableBracketedPaste,
            DisableMouseCapture,
            LeaveAlternateScreen,
            cursor::Show
        );
        let _ = disable_raw_mode();
        let _ = out.flush();
    }
}

/// Restores the terminal when dropped (every return path, and unwinding).
pub struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// On a panic of the thread that installed it (the UI thread): restore the terminal first, log
/// the panic to the log file, and print one line without the panic's text (which could quote
/// data). A panic on any other thread (the database worker, a background resume, a tool whose
/// panic the runtime catches and turns into a refusal) is only logged: the console is still
/// running there, and giving the terminal back under it would leave it drawing on a cooked
/// terminal. The worker's own death is reported to the UI thread by the worker (see
/// `worker::Worker::spawn`), which then exits through its guard.
pub fn install_panic_hook(log: Option<Log>) {
    let ui = std::thread::current().id();
    std::panic::set_hook(Box::new(move |info| {
        let here = std::thread::current();
        let on_ui = here.id() == ui;
        if on_ui {
            restore();
        }
        let loc = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if let Some(l) = &log {
            let payload = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let thread = here.name().unwrap_or("unnamed");
            l.write(&format!("panic on thread {thread} at {loc}: {payload}"));
        }
        if on_ui {
            let _ = writeln!(
                io::stderr(),
                "countersign: internal error at {loc}; the log file has details"
            );
        }
    }));
}

/// Test-only faults, honoured in debug builds only (the tests run the debug binary; a release
/// build ignores the variable): `COUNTERSIGN_TEST_PANIC=ui` panics the UI thread after its
/// first frame, `worker` the database thread on its first query, `caught` a background
/// thread inside `catch_unwind` (as a tool's panic during a resume is).
pub fn test_fault() -> Option<String> {
    if cfg!(debug_assertions) {
        std::env::var("COUNTERSIGN_TEST_PANIC").ok()
    } else {
        None
    }
}

/// Gives the terminal back when the process is told to end (SIGTERM from `kill`, `timeout` or
/// a supervisor; SIGINT sent by `kill`, since raw mode makes ctrl-c a key; SIGHUP; SIGQUIT),
/// then exits with 128 + the signal's number, as a shell reports a process a signal ended.
/// Without it such a signal ended the console at once and left the terminal in raw mode on
/// the alternate screen with the cursor hidden.
pub fn restore_on_termination() -> io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, SIGQUIT])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                restore();
                std::process::exit(128 + sig);
            }
        })?;
    Ok(())
}

/// ctrl-z: restore, stop the process, and re-enter on SIGCONT.
pub fn suspend() -> io::Result<()> {
    restore();
    #[cfg(unix)]
    // SAFETY: raise only signals this process; SIGTSTP's default action stops it.
    unsafe {
        libc::raise(libc::SIGTSTP);
    }
    enter()
}

/// OSC 52 copy of already-escaped text.
pub fn copy(text: &str) -> io::Result<()> {
    use base64::Engine;
    let b = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    let mut out = io::stdout();
    write!(out, "\x1b]52;c;{b}\x07")?;
    out.flush()
}
