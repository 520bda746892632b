//! The terminal's own state in pseudo-terminal tests: its termios, read back from the master.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A descriptor of this test's own for the pty master (Linux shares one termios between master
/// and slave, so the program's raw mode shows on it), closed when dropped.
pub fn dup_master(master: &dyn portable_pty::MasterPty) -> OwnedFd {
    let fd = master.as_raw_fd().expect("the pty master's descriptor");
    // SAFETY: `fd` is open for as long as `master` lives; dup gives a new descriptor that the
    // OwnedFd owns alone.
    unsafe {
        let d = libc::dup(fd);
        assert!(d >= 0, "dup the pty master");
        OwnedFd::from_raw_fd(d)
    }
}

/// Whether the terminal is in raw mode: canonical input and echo both off.
pub fn raw_mode(tty: &OwnedFd) -> bool {
    // SAFETY: termios is plain data; tcgetattr fills it from an open descriptor.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::tcgetattr(tty.as_raw_fd(), &mut t) };
    assert_eq!(rc, 0, "tcgetattr on the pty");
    t.c_lflag & (libc::ICANON | libc::ECHO) == 0
}

pub mod session;
