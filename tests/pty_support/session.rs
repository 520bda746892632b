//! A program run in a pseudo-terminal, for tests that read what a person would see: every
//! byte it wrote, the screen a vt100 parser makes of them, and its exit.
#![allow(dead_code)] // each test binary uses part of it

use std::io::{Read, Write};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

/// How long any wait lasts at most: generous, bounded, never a fixed sleep.
const WAIT: Duration = Duration::from_secs(30);

pub struct Session {
    pub parser: vt100::Parser,
    rx: Receiver<Vec<u8>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    /// Every byte the program wrote.
    pub raw: Vec<u8>,
    /// A duplicate of the pty master: its termios is the terminal's (Linux shares one).
    pub tty: std::os::fd::OwnedFd,
}

impl Session {
    /// Starts `cmd` in a `rows` x `cols` terminal.
    pub fn start(cmd: CommandBuilder, rows: u16, cols: u16) -> Session {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("pty");
        let child = pair.slave.spawn_command(cmd).expect("spawn");
        drop(pair.slave);
        let tty = super::dup_master(pair.master.as_ref());
        let mut reader = pair.master.try_clone_reader().expect("reader");
        let writer = pair.master.take_writer().expect("writer");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let _keep = pair.master;
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
        Session {
            parser: vt100::Parser::new(
                std::num::NonZeroU16::new(rows).expect("rows"),
                std::num::NonZeroU16::new(cols).expect("cols"),
                0,
            ),
            rx,
            writer,
            child,
            raw: Vec::new(),
            tty,
        }
    }

    fn take(&mut self, b: Vec<u8>) {
        self.parser.process(&b);
        self.raw.extend_from_slice(&b);
    }

    /// Reads until `pred` holds on (screen, raw bytes).
    pub fn wait(&mut self, what: &str, pred: impl Fn(&vt100::Screen, &[u8]) -> bool) {
        let deadline = Instant::now() + WAIT;
        while !pred(self.parser.screen(), &self.raw) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "waiting for {what}; screen:\n{}\nbytes: {:?}",
                self.parser.screen().contents(),
                String::from_utf8_lossy(&self.raw)
            );
            if let Ok(b) = self.rx.recv_timeout(left.min(Duration::from_millis(200))) {
                self.take(b);
            }
        }
    }

    /// Reads until the screen shows `s`.
    pub fn wait_text(&mut self, s: &str) {
        let s2 = s.to_string();
        self.wait(s, move |sc, _| sc.contents().contains(&s2));
    }

    /// Whether the terminal is in raw mode now.
    pub fn raw_mode(&self) -> bool {
        super::raw_mode(&self.tty)
    }

    /// The program's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.process_id()
    }

    /// Types `b`.
    pub fn send(&mut self, b: &[u8]) {
        self.writer.write_all(b).expect("type");
        self.writer.flush().expect("flush");
    }

    /// Waits for the program to end, reading what it still writes; its exit code.
    pub fn finish(&mut self) -> u32 {
        let deadline = Instant::now() + WAIT;
        let code = loop {
            while let Ok(b) = self.rx.try_recv() {
                self.take(b);
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                break status.exit_code();
            }
            assert!(Instant::now() < deadline, "the program did not exit");
            if let Ok(b) = self.rx.recv_timeout(Duration::from_millis(100)) {
                self.take(b);
            }
        };
        while let Ok(b) = self.rx.recv_timeout(Duration::from_millis(300)) {
            self.take(b);
        }
        code
    }
}
