//! The interactive confirmation of approve/reject, typed at a real pseudo-terminal.

mod support;

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::Duration;

use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use support::{fixture, s, tempdir};

/// Runs countersign in a pty, answers the prompt with `answer`, returns (exit code, output).
fn answer_prompt(db: &std::path::Path, run: &str, answer: &str) -> (u32, String) {
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 50,
            cols: 200,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("pty");
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_countersign"));
    cmd.args([
        "--db",
        db.to_str().expect("utf8"),
        "approve",
        run,
        "--by",
        "alice",
    ]);
    let mut child = pty.slave.spawn_command(cmd).expect("spawn");
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().expect("reader");
    let mut writer = pty.master.take_writer().expect("writer");
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut answered = false;
    // Generous, bounded waits on what the screen shows; never a fixed sleep.
    while let Ok(chunk) = rx.recv_timeout(Duration::from_secs(30)) {
        seen.extend_from_slice(&chunk);
        if !answered && String::from_utf8_lossy(&seen).contains("? [y/N] ") {
            writer.write_all(answer.as_bytes()).expect("type");
            writer.flush().expect("flush");
            answered = true;
        }
        if answered
            && String::from_utf8_lossy(&seen).contains("approval")
            && child.try_wait().ok().flatten().is_some()
        {
            break;
        }
    }
    assert!(
        answered,
        "the prompt appeared: {}",
        String::from_utf8_lossy(&seen)
    );
    let status = child.wait().expect("wait");
    while let Ok(chunk) = rx.recv_timeout(Duration::from_millis(200)) {
        seen.extend_from_slice(&chunk);
    }
    (
        status.exit_code(),
        String::from_utf8_lossy(&seen).into_owned(),
    )
}

#[test]
fn decide_interactive_confirmation() {
    let dir = tempdir();
    let db = dir.path().join("p.db");
    let m = fixture(&db, &["--scenario", "queue", "--base-time", "now"]);
    let yes_run = s(&m, "/scenarios/queue/runs/0/id");
    let no_run = s(&m, "/scenarios/queue/runs/1/id");
    let (code, text) = answer_prompt(&db, no_run, "n\r");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("declined at the prompt"), "{text}");
    let (code, text) = answer_prompt(&db, yes_run, "y\r");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(": approved by alice"), "{text}");
    let out = support::bin::cs(&db, &["--json", "show", no_run]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        v["approvals"][0]["status"], "pending",
        "declined changes nothing"
    );
}
