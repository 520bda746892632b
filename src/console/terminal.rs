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

/// On panic: restore the terminal first, log the panic to the log file, and print one line
/// without the panic's text (which could quote data).
pub fn install_panic_hook(log: Option<super::Log>) {
    std::panic::set_hook(Box::new(move |info| {
        restore();
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
            l.write(&format!("panic at {loc}: {payload}"));
        }
        let _ = writeln!(
            io::stderr(),
            "countersign: internal error at {loc}; the log file has details"
        );
    }));
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
