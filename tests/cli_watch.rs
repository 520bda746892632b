//! `countersign watch` (issue 21): one line per new pending approval as another process
//! commits it, escaped in text and exact in `--json`, approvals decided before they were seen
//! left out, and no CPU used while nothing is committed.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;
use support::bin::on;

/// A liveness bound, not a timing assertion: how long a line may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(120);

struct Watch {
    child: Child,
    lines: Receiver<String>,
}

impl Watch {
    fn start(db: &Path, args: &[&str]) -> Watch {
        let mut child = on(db)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watch { child, lines: rx }
    }

    fn next(&self) -> String {
        self.lines.recv_timeout(PATIENCE).expect("a line")
    }

    /// utime + stime of the child, in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = after.split(' ').collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fixture() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = support::tempdir();
    let db = dir.path().join("runs.db");
    support::fixture(&db, &["--seed", "3", "--base-time", "2026-10-01T09:00:00Z"]);
    (dir, db)
}

/// Another process's commit of a new approval row, a copy of a pending one with a new id,
/// run id and status; the run is a waiting one's copy (made once), as a pending approval's
/// run is.
fn add_approval(db: &Path, id: &str, run: &str, status: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS one_run AS SELECT * FROM runs WHERE 0; \
         DELETE FROM one_run; \
         INSERT INTO one_run SELECT * FROM runs WHERE status = 'WAITING_FOR_APPROVAL' LIMIT 1;",
    )
    .unwrap();
    conn.execute("UPDATE one_run SET id = ?1", [run]).unwrap();
    conn.execute_batch("INSERT OR IGNORE INTO runs SELECT * FROM one_run")
        .unwrap();
    let n = conn
        .execute(
            "INSERT INTO approvals (id, run_id, step_id, kind, capability_json,
               presentation_json, request_json, hash, status, created_at, decided_at,
               decided_by, note, expires_at)
             SELECT ?1, ?2, step_id, kind, capability_json, presentation_json, request_json,
               hash, ?3, created_at, '', '', '', expires_at FROM approvals
             WHERE status = 'pending' ORDER BY rowid LIMIT 1",
            rusqlite::params![id, run, status],
        )
        .unwrap();
    assert_eq!(n, 1);
}

/// The command run to its end on `db` with `args`.
use support::bin::cs as run;

/// Pending approvals of waiting runs: what a person can decide.
fn pending(db: &Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT COUNT(*) FROM approvals a JOIN runs r ON r.id = a.run_id \
         WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn each_new_pending_approval_is_one_json_line_and_decided_ones_are_left_out() {
    let (_d, db) = fixture();
    let w = Watch::start(&db, &["--json", "watch"]);
    // Give it a moment to read where the approvals end; a commit before that would be
    // announced too (it starts after the last rowid it read), so the order below holds
    // either way.
    std::thread::sleep(Duration::from_millis(500));
    add_approval(&db, "ap-decided", "run-x", "approved");
    add_approval(&db, "ap-new", "run-x", "pending");
    let line = w.next();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["id"], "ap-new", "{line}");
    assert_eq!(v["run_id"], "run-x");
    assert!(v["tool"].is_string() || v["tool"].is_null(), "{line}");
    assert!(
        v.get("request").is_none(),
        "a request is never printed: {line}"
    );
    add_approval(&db, "ap-next", "run-y", "pending");
    let v: serde_json::Value = serde_json::from_str(&w.next()).unwrap();
    assert_eq!(v["id"], "ap-next");
}

/// With `--existing`, a pending approval whose run is no longer waiting (a cancel leaves the
/// approval pending) is not announced: nobody can decide it (found from outside).
#[test]
fn existing_and_count_announce_what_is_pending_and_stop() {
    let (_d, db) = fixture();
    // The first pending approval's run is cancelled: its approval stays pending.
    let first: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT run_id FROM approvals WHERE status = 'pending' ORDER BY rowid LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let o = run(&db, &["--by", "ops", "cancel", &first, "--note", "stop"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let n = pending(&db);
    assert!(n >= 3, "the fixture has pending approvals");
    let out = run(&db, &["watch", "--existing", "--count", &n.to_string()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count() as i64, n, "{text}");
    assert!(text.lines().all(|l| l.starts_with("pending  ")), "{text}");
    let out = run(
        &db,
        &["--json", "watch", "--existing", "--count", &n.to_string()],
    );
    let runs: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["run_id"].to_string())
        .collect();
    assert!(
        !runs.contains(&format!("{first:?}")),
        "the cancelled run's approval is announced: {runs:?}"
    );
}

/// `watch` and `stats` read a decision that names `tool` twice as the runtime reads it, the
/// last (SQLite's `json_extract` takes the first: `watch` announced `get_order` for an
/// `issue_refund` call, found from outside), and a tool name past 256 bytes is said to be cut.
#[test]
fn a_repeated_tool_is_read_as_the_runtime_reads_it_and_a_long_name_is_marked_cut() {
    let (_d, db) = fixture();
    let c = rusqlite::Connection::open(&db).unwrap();
    let held: Vec<(String, String)> = c
        .prepare(
            "SELECT a.id, a.step_id FROM approvals a JOIN runs r ON r.id = a.run_id \
             WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL' ORDER BY a.rowid LIMIT 2",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(held.len(), 2);
    let twice = r#"{"kind":"tool_call","tool":"get_order","tool":"zz_last_tool","args":{}}"#;
    let long = "t".repeat(311);
    let long_decision = format!(r#"{{"kind":"tool_call","tool":"{long}","args":{{}}}}"#);
    for (decision, step) in [(twice, &held[0].1), (long_decision.as_str(), &held[1].1)] {
        c.execute(
            "UPDATE steps SET decision_json = ?1 WHERE id = ?2",
            [decision, step.as_str()],
        )
        .unwrap();
    }
    drop(c);
    let n = pending(&db);
    let out = run(
        &db,
        &["--json", "watch", "--existing", "--count", &n.to_string()],
    );
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let line = |id: &str| {
        lines
            .iter()
            .find(|v| v["id"] == id)
            .expect("announced")
            .clone()
    };
    assert_eq!(line(&held[0].0)["tool"], "zz_last_tool");
    let cut = line(&held[1].0);
    assert_eq!(cut["tool"], "t".repeat(256));
    assert_eq!(cut["tool_bytes"], 311, "{cut}");
    let out = run(&db, &["--json", "stats"]);
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools = stats["tools"].as_array().unwrap();
    let last = tools.iter().find(|t| t["tool"] == "zz_last_tool");
    assert!(
        last.is_some_and(|t| t["pending"] == 1),
        "the held call is counted under the tool the runtime reads: {tools:?}"
    );
}

#[test]
fn a_hostile_run_id_is_escaped_in_the_text_line() {
    let (_d, db) = fixture();
    let w = Watch::start(&db, &["watch"]);
    std::thread::sleep(Duration::from_millis(500));
    add_approval(&db, "ap-evil", "run-\u{1b}[2J\u{202e}x", "pending");
    let line = w.next();
    assert!(
        !line.contains('\u{1b}') && !line.contains('\u{202e}'),
        "{line:?}"
    );
    assert!(line.contains("approval ap-evil"), "{line}");
    assert!(line.contains("run run-\\x1b[2J\\u{202e}x"), "{line}");
}

#[test]
fn an_idle_watch_uses_no_cpu_between_commits() {
    let (_d, db) = fixture();
    let w = Watch::start(&db, &["--json", "watch"]);
    std::thread::sleep(Duration::from_millis(500));
    add_approval(&db, "ap-1", "run-1", "pending");
    let _ = w.next();
    // Now it waits. Over three seconds of no commits it is not scheduled at all with
    // inotify; a poll of `data_version` every few ms would cost ticks (one tick is 10 ms).
    let before = w.cpu_ticks();
    std::thread::sleep(Duration::from_secs(3));
    let used = w.cpu_ticks() - before;
    assert!(used <= 1, "{used} ticks while idle");
    // And it still wakes for the next commit.
    add_approval(&db, "ap-2", "run-2", "pending");
    let v: serde_json::Value = serde_json::from_str(&w.next()).unwrap();
    assert_eq!(v["id"], "ap-2");
}
