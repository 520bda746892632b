//! The operator commands, run as the real binary against databases written by the independent
//! Python implementation of agentrt's format.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::bin::cs;
use support::{fixture, s, tempdir};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const FIXED: [&str; 4] = ["--seed", "7", "--base-time", "2026-10-01T09:00:00Z"];

fn all_runs(m: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (scenario, v) in m["scenarios"].as_object().expect("scenarios") {
        for r in v["runs"].as_array().expect("runs") {
            out.push((scenario.clone(), r["id"].as_str().expect("id").to_string()));
        }
    }
    out
}

#[test]
fn every_scenario_lists_shows_and_reports_events() {
    let dir = tempdir();
    let db = dir.path().join("all.db");
    let m = fixture(&db, &FIXED);
    let runs = cs(&db, &["runs"]);
    assert_eq!(runs.status.code(), Some(0), "{}", stderr(&runs));
    let listing = stdout(&runs);
    assert!(listing.starts_with("RUN  "), "{listing}");
    for (scenario, id) in all_runs(&m) {
        assert!(listing.contains(&id), "runs lists {scenario} run {id}");
        let show = cs(&db, &["show", &id]);
        assert_eq!(
            show.status.code(),
            Some(0),
            "show {scenario}: {}",
            stderr(&show)
        );
        assert!(stdout(&show).starts_with(&format!("run     {id}\n")));
        let ev = cs(&db, &["events", &id]);
        assert_eq!(
            ev.status.code(),
            Some(0),
            "events {scenario}: {}",
            stderr(&ev)
        );
        assert!(stdout(&ev).contains("run.created"), "{scenario}");
        let evj = cs(&db, &["--json", "events", &id]);
        assert_eq!(evj.status.code(), Some(0), "events --json {scenario}");
        let mut last = 0;
        for line in stdout(&evj).lines() {
            let v: serde_json::Value =
                serde_json::from_str(line).expect("one JSON object per line");
            let seq = v["seq"].as_i64().expect("seq");
            assert!(seq > last, "seq order");
            last = seq;
            assert_eq!(v["run_id"], id.as_str());
            assert!(v["at"].is_string() && v["type"].is_string() && v.get("payload").is_some());
        }
        assert!(last > 0, "{scenario} has events");
    }
    let json = cs(&db, &["--json", "runs"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("runs --json");
    assert_eq!(v["total"].as_u64(), Some(all_runs(&m).len() as u64));
}

#[test]
fn runs_filters_by_status_and_pages() {
    let dir = tempdir();
    let db = dir.path().join("q.db");
    let m = fixture(&db, &FIXED);
    let waiting = cs(&db, &["runs", "--status", "waiting_for_approval"]);
    assert_eq!(waiting.status.code(), Some(0), "{}", stderr(&waiting));
    let text = stdout(&waiting);
    assert!(
        text.lines()
            .skip(1)
            .all(|l| l.contains("WAITING_FOR_APPROVAL")),
        "{text}"
    );
    let completed = s(&m, "/scenarios/completed/runs/0/id");
    assert!(!text.contains(completed));
    let page = cs(&db, &["runs", "--limit", "2", "--offset", "1"]);
    let text = stdout(&page);
    assert_eq!(
        text.lines().count(),
        4,
        "header, two rows, the more line: {text}"
    );
    let total = all_runs(&m).len();
    assert!(
        text.ends_with("... more runs follow; rerun with --offset 3 to see them (showing 2)\n"),
        "{text}"
    );
    let everything = cs(&db, &["runs", "--limit", "0"]);
    assert_eq!(stdout(&everything).lines().count(), total + 1);
}

/// Code points that change how a terminal draws or behaves, or hide text.
fn forbidden(c: char) -> bool {
    let u = c as u32;
    (u < 0x20 && c != '\n')
        || (0x7f..=0x9f).contains(&u)
        || matches!(u, 0x200b..=0x200f | 0x202a..=0x202e | 0x2060..=0x2069 | 0x061c | 0xfeff | 0x00ad | 0x180e | 0x2028 | 0x2029)
        || (0xe0000..=0xe007f).contains(&u)
}

#[test]
fn hostile_text_reaches_the_terminal_escaped_and_whole() {
    let dir = tempdir();
    let db = dir.path().join("h.db");
    let m = fixture(
        &db,
        &[
            "--scenario",
            "hostile",
            "--seed",
            "7",
            "--base-time",
            "2026-10-01T09:00:00Z",
        ],
    );
    let id = s(&m, "/scenarios/hostile/runs/0/id");
    for args in [vec!["show", id], vec!["events", id], vec!["runs"]] {
        let o = cs(&db, &args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        let text =
            std::str::from_utf8(&o.stdout).expect("output is UTF-8: invalid bytes are escaped");
        assert!(!o.stdout.contains(&0x1b), "{args:?} wrote an ESC byte");
        if let Some(c) = text.chars().find(|&c| forbidden(c)) {
            panic!("{args:?} wrote U+{:04X}", c as u32);
        }
    }
    let show = stdout(&cs(&db, &["show", id]));
    // Every field is still there, in escaped form.
    for needle in [
        "amount_cents",
        "order_id",
        "reason",
        r"\x1b[2J",
        r"\u{202e}",
        r"\x07",
    ] {
        assert!(show.contains(needle), "show keeps {needle}");
    }
    let last_lines: Vec<&str> = show
        .lines()
        .filter(|l| l.starts_with("----- end of approval"))
        .collect();
    assert_eq!(
        last_lines.len(),
        1,
        "only our own closing line starts a line"
    );
}

#[test]
fn events_json_keeps_the_stored_payload_bytes() {
    let dir = tempdir();
    let db = dir.path().join("w.db");
    let m = fixture(
        &db,
        &[
            "--scenario",
            "waiting",
            "--seed",
            "7",
            "--base-time",
            "2026-10-01T09:00:00Z",
        ],
    );
    let id = s(&m, "/scenarios/waiting/runs/0/id");
    let o = cs(&db, &["--json", "events", id]);
    let stored = Command::new("python3")
        .args(["-c", "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\nfor (p,) in c.execute('select payload_json from events where run_id=? order by seq',(sys.argv[2],)): print(p)"])
        .arg(&db)
        .arg(id)
        .output()
        .expect("python3");
    let stored = String::from_utf8(stored.stdout).expect("utf8");
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    for (line, payload) in lines.iter().zip(stored.lines()) {
        assert!(
            line.ends_with(&format!(",\"payload\":{payload}}}")),
            "{line} keeps {payload}"
        );
    }
    assert_eq!(lines.len(), stored.lines().count());
}

/// A fixture database named `name` in a new directory, a connection to it, and its first
/// event's run and seq (the tests below plant a damaged value there).
fn first_event(
    name: &str,
) -> (
    tempfile::TempDir,
    PathBuf,
    rusqlite::Connection,
    String,
    i64,
) {
    let dir = tempdir();
    let db = dir.path().join(name);
    fixture(&db, &FIXED);
    let c = rusqlite::Connection::open(&db).unwrap();
    let (run, seq) = c
        .query_row(
            "SELECT run_id, seq FROM events ORDER BY seq LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    (dir, db, c, run, seq)
}

/// A stored payload holding an escaped lone surrogate (which Go reads as U+FFFD) is not JSON a
/// strict parser reads: `events --json` emits it as a string marked `invalid_payload`, so every
/// line still parses (found from outside: `events --json | jq` stopped at that line).
#[test]
fn events_json_lines_stay_strict_json_with_a_lone_surrogate_payload() {
    let (_dir, db, c, run, seq) = first_event("s.db");
    let planted = r#"{"note":"\ud800 then \ud83d\ude00"}"#;
    c.execute(
        "UPDATE events SET payload_json = ?1 WHERE seq = ?2",
        rusqlite::params![planted, seq],
    )
    .unwrap();
    drop(c);
    let o = cs(&db, &["--json", "events", &run]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let mut seen = false;
    for line in out.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if v["seq"] == seq {
            assert_eq!(v["payload"], serde_json::json!(planted), "{line}");
            assert_eq!(v["invalid_payload"], true, "{line}");
            seen = true;
        } else {
            assert!(v["payload"].is_object(), "{line}");
        }
    }
    assert!(seen, "{out}");
}

/// A payload that is not UTF-8 is read lossily for `payload`, so `events --json` also gives its
/// stored bytes (`payload_hex`) and the row's `decode_error`: it no longer looks like a stored
/// U+FFFD (found from outside).
#[test]
fn events_json_gives_the_stored_bytes_of_a_payload_that_is_not_utf8() {
    let (_dir, db, c, run, seq) = first_event("u.db");
    c.execute(
        "UPDATE events SET payload_json = CAST(x'7b2267223a2261ff62227d' AS TEXT) WHERE seq = ?1",
        [seq],
    )
    .unwrap();
    c.execute(
        "UPDATE events SET payload_json = '{\"g\":\"a\u{fffd}b\"}' WHERE seq = ?1 + 1",
        [seq],
    )
    .unwrap();
    drop(c);
    let o = cs(&db, &["--json", "events", &run]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let bad = lines
        .iter()
        .find(|v| v["seq"] == seq)
        .expect("the damaged event");
    assert_eq!(bad["payload_hex"], "7b2267223a2261ff62227d", "{bad}");
    assert!(
        bad["decode_error"].as_str().is_some_and(|e| !e.is_empty()),
        "{bad}"
    );
    let real = lines
        .iter()
        .find(|v| v["seq"] == seq + 1)
        .expect("the U+FFFD event");
    assert!(
        real.get("payload_hex").is_none() && real.get("decode_error").is_none(),
        "{real}"
    );
}

/// `events` shows an `at` that does not parse as stored (escaped), not as the `-` of an empty
/// one (found from outside).
#[test]
fn events_text_shows_an_unreadable_at_as_stored() {
    let (_dir, db, c, run, seq) = first_event("a.db");
    c.execute(
        "UPDATE events SET at = '2030' || char(13) || 'X' WHERE seq = ?1",
        [seq],
    )
    .unwrap();
    drop(c);
    let o = cs(&db, &["events", &run]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("(unread at: 2030\\rX)"), "{out}");
    assert!(!out.contains('\r'), "{out:?}");
}

/// A negative counter, which no runtime writes, is shown with that said in `show` and `runs`,
/// not as a real value (found from outside: `steps -5` and `estimated -$0.0000`).
#[test]
fn a_negative_counter_is_said_to_be_impossible() {
    let dir = tempdir();
    let db = dir.path().join("n.db");
    fixture(&db, &FIXED);
    let c = rusqlite::Connection::open(&db).unwrap();
    let run: String = c
        .query_row(
            "SELECT id FROM runs WHERE model_calls > 0 ORDER BY rowid LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!stdout(&cs(&db, &["show", &run])).contains("negative"));
    c.execute(
        "UPDATE runs SET step_count = -5, model_calls = -3, estimated_cost_micros = -1 \
         WHERE id = ?1",
        [&run],
    )
    .unwrap();
    drop(c);
    let out = stdout(&cs(&db, &["show", &run]));
    assert!(
        out.contains("steps   -5 (negative: a damaged row?)"),
        "{out}"
    );
    assert!(
        out.contains("model   -3 (negative: a damaged row?) call(s)"),
        "{out}"
    );
    assert!(
        out.contains("estimated -$0.0000 (negative: a damaged row?)"),
        "{out}"
    );
    let list = stdout(&cs(&db, &["runs"]));
    assert!(list.contains("-5 (negative: a damaged row?)"), "{list}");
}

/// `show` prints `?` for a counter that is not an integer, as `runs` does, not the 0 it was
/// read as (found from outside: `steps 0` and `estimated $0.0000` read as real values).
#[test]
fn show_text_prints_an_unreadable_counter_as_a_question_mark() {
    let dir = tempdir();
    let db = dir.path().join("c.db");
    fixture(&db, &FIXED);
    let c = rusqlite::Connection::open(&db).unwrap();
    let run: String = c
        .query_row("SELECT id FROM runs ORDER BY rowid LIMIT 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    let before = cs(&db, &["show", &run]);
    assert!(
        !stdout(&before).contains("steps   ?"),
        "{}",
        stdout(&before)
    );
    c.execute(
        "UPDATE runs SET step_count = 'abc', estimated_cost_micros = 1e308 WHERE id = ?1",
        [&run],
    )
    .unwrap();
    drop(c);
    let o = cs(&db, &["show", &run]);
    let out = stdout(&o);
    assert!(out.contains("steps   ?"), "{out}");
    assert!(out.contains("estimated ?"), "{out}");
    assert!(out.contains("unread  "), "{out}");
}

/// `verify` compares every approval's stored status and approver with the decision its
/// events record: every scenario agentrt writes passes; a pending row set to approved (no
/// decision event), a rejected one set to approved, and an approver renamed are each named,
/// exit 1, in text and `--json` (found from outside: such rows said "intact", and workers then
/// paid refunds nobody approved).
#[test]
fn verify_names_an_approval_whose_status_is_not_the_decision_on_record() {
    let dir = tempdir();
    let db = dir.path().join("d.db");
    fixture(&db, &FIXED);
    let o = cs(&db, &["verify"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let c = rusqlite::Connection::open(&db).unwrap();
    let one = |status: &str| -> String {
        c.query_row(
            "SELECT id FROM approvals WHERE status = ?1 ORDER BY rowid LIMIT 1",
            [status],
            |r| r.get(0),
        )
        .unwrap()
    };
    let (pending, rejected, approved) = (one("pending"), one("rejected"), one("approved"));
    let (by, note): (String, String) = c
        .query_row(
            "SELECT decided_by, note FROM approvals WHERE id = ?1",
            [&approved],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    c.execute_batch(&format!(
        "UPDATE approvals SET status = 'approved', decided_by = 'mallory' WHERE id = '{pending}'; \
         UPDATE approvals SET status = 'approved' WHERE id = '{rejected}'; \
         UPDATE approvals SET decided_by = 'mallory' WHERE id = '{approved}';"
    ))
    .unwrap();
    drop(c);
    let o = cs(&db, &["verify"]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    for line in [
        format!(
            "approval {pending}: stored as approved, but no approval.decided event records a decision of it"
        ),
        format!(
            "approval {rejected}: stored as approved, but its last approval.decided event says rejected"
        ),
        format!(
            "approval {approved}: its approver is not the one its approval.decided event names"
        ),
    ] {
        assert!(text.contains(&line), "{line}\n{text}");
    }
    let doc: serde_json::Value =
        serde_json::from_str(&stdout(&cs(&db, &["verify", "--json"]))).expect("one JSON document");
    let named: Vec<&str> = doc["approvals"]["unrecorded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap())
        .collect();
    assert_eq!(named.len(), 3, "{doc}");
    for id in [&pending, &rejected, &approved] {
        assert!(named.contains(&id.as_str()), "{id}: {doc}");
    }
    // The note a decision recorded (what a denial tells the agent, a rejection's reason) too.
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute(
        "UPDATE approvals SET decided_by = ?1, note = 'changed note' WHERE id = ?2",
        [&by, &approved],
    )
    .unwrap();
    drop(c);
    let text = stdout(&cs(&db, &["verify"]));
    assert!(
        text.contains(&format!(
            "approval {approved}: its note is not the one its approval.decided event records"
        )),
        "{text}"
    );
    // And the decision time, which a grant's time to live runs from.
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute(
        "UPDATE approvals SET note = ?1, decided_at = '2099-01-01T00:00:00Z' WHERE id = ?2",
        [&note, &approved],
    )
    .unwrap();
    drop(c);
    let text = stdout(&cs(&db, &["verify"]));
    assert!(
        text.contains(&format!(
            "approval {approved}: its decision time is not the one its approval.decided event records"
        )),
        "{text}"
    );
}

#[test]
fn verify_intact_chain_exits_zero_and_broken_chain_exits_one() {
    let dir = tempdir();
    let db = dir.path().join("v.db");
    let m = fixture(&db, &FIXED);
    let head_seq = m["chain_head"]["seq"]
        .as_i64()
        .or_else(|| m["chain"]["seq"].as_i64());
    let o = cs(&db, &["verify"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let first = text.lines().next().expect("head line");
    let seq: i64 = first
        .split(' ')
        .nth(2)
        .expect("seq")
        .parse()
        .expect("number");
    if let Some(h) = head_seq {
        assert_eq!(seq, h);
    }
    let hash = first.split(' ').nth(3).expect("hash");
    assert_eq!(
        text,
        format!(
            "head: seq {seq} {hash}\nintact: {seq} event(s), seq 1 to {seq}\nlast checked: seq {seq} {hash}\n"
        )
    );
    let kept = cs(&db, &["verify", "--head", &format!("{seq}:{hash}")]);
    assert_eq!(kept.status.code(), Some(0));
    assert!(stdout(&kept).ends_with(&format!("kept head: seq {seq} matches\n")));
    let wrong = cs(
        &db,
        &["verify", "--head", &format!("{seq}:{}", "0".repeat(64))],
    );
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        stderr(&wrong).contains("does not match the head kept"),
        "{}",
        stderr(&wrong)
    );
    let beyond = cs(&db, &["verify", "--to", &(seq + 5).to_string()]);
    assert_eq!(beyond.status.code(), Some(1));
    assert!(stderr(&beyond).contains("shorter than asked"));
    // `--from` the head's next seq is "nothing new since"; past it, events the caller counts
    // on are not there, and nothing is said intact.
    let next = cs(&db, &["verify", "--from", &(seq + 1).to_string()]);
    assert_eq!(next.status.code(), Some(0), "{}", stderr(&next));
    assert!(stdout(&next).contains("intact: no events in the range"));
    let past = cs(&db, &["verify", "--from", &(seq + 2).to_string()]);
    assert_eq!(past.status.code(), Some(1), "{}", stdout(&past));
    assert_eq!(
        stderr(&past),
        format!(
            "error: the event chain is shorter than asked: --from {} is past its end; the head is seq {seq}\n",
            seq + 2
        )
    );
    assert_eq!(
        stdout(&past),
        format!(
            "head: seq {seq} {hash}\nnot checked: --from {} is past the head's next seq\n",
            seq + 2
        )
    );
    // Seqs past i64::MAX (which no log reaches) are past the head too, never wrapped to
    // negative numbers: --from fails, --to is not reached, a kept head is not reached.
    let huge = u64::MAX.to_string();
    for args in [
        vec!["verify", "--from", &huge],
        vec!["verify", "--from", "9223372036854775808"],
        vec!["verify", "--to", &huge],
        vec!["verify", "--to", "9223372036854775808"],
    ] {
        let o = cs(&db, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stdout(&o));
        assert!(stderr(&o).contains("shorter than asked"), "{}", stderr(&o));
        assert!(!stdout(&o).contains("seq -"), "{args:?}: {}", stdout(&o));
    }
    let o = cs(&db, &["verify", "--head", &format!("{huge}:{hash}")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("the kept head, seq {huge}, was not reached")),
        "{}",
        stderr(&o)
    );
    let past = cs(&db, &["--json", "verify", "--from", &(seq + 2).to_string()]);
    assert_eq!(past.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&past)).expect("one JSON value");
    assert_eq!(
        doc["requested"],
        serde_json::json!({"from": seq + 2, "reached": false})
    );

    let bad = dir.path().join("broken.db");
    fixture(
        &bad,
        &[
            "--tamper",
            "chain",
            "--seed",
            "7",
            "--base-time",
            "2026-10-01T09:00:00Z",
        ],
    );
    let o = cs(&bad, &["verify"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("broken at seq "), "{}", stdout(&o));
    assert!(stderr(&o).starts_with("error: the event chain is broken at seq "));
}

/// An event below seq 1 (planted outside the chain: `events` lists it first) breaks the chain
/// whatever range is checked, a full check or an incremental one (found from outside: verify
/// started at seq 1 and said intact, while `events` showed a planted `approval.decided` first).
#[test]
fn verify_fails_on_an_event_planted_below_seq_one() {
    let dir = tempdir();
    for planted in [0_i64, -5, i64::MIN] {
        let db = dir.path().join(format!("p{}.db", planted.unsigned_abs()));
        fixture(&db, &FIXED);
        let c = rusqlite::Connection::open(&db).unwrap();
        let run: String = c
            .query_row("SELECT run_id FROM events ORDER BY seq LIMIT 1", [], |r| {
                r.get(0)
            })
            .unwrap();
        c.execute(
            "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) \
             VALUES (?1, ?2, '', '2020-01-01T00:00:00Z', 'approval.decided', \
             '{\"status\":\"approved\",\"by\":\"ceo\"}', 'zz')",
            rusqlite::params![planted, run],
        )
        .unwrap();
        drop(c);
        for args in [
            &["verify"][..],
            &["verify", "--from", "3"],
            &["verify", "--json"],
        ] {
            let o = cs(&db, args);
            assert_eq!(
                o.status.code(),
                Some(1),
                "{planted} {args:?}: {}",
                stdout(&o)
            );
            assert!(
                stderr(&o).contains(&format!("broken at seq {planted}")),
                "{planted} {args:?}: {}",
                stderr(&o)
            );
        }
    }
}

/// An approval whose stored fields no longer give its stored hash fails `verify` (exit 1, one
/// line naming it; `--json` lists it under `approvals.mismatched`), and `show` says approve and
/// reject refuse it and offers the run's cancel instead of a decision (found from outside: the
/// tampered approval passed `verify` and `show` printed `decide with: ... approve`).
#[test]
fn a_tampered_approval_fails_verify_and_is_not_offered_for_a_decision() {
    let dir = tempdir();
    let db = dir.path().join("t.db");
    fixture(&db, &FIXED);
    let clean_run = cs(&db, &["verify", "--json"]);
    assert_eq!(clean_run.status.code(), Some(0), "{}", stderr(&clean_run));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&clean_run)).unwrap();
    assert_eq!(doc["approvals"]["mismatched"], serde_json::json!([]));
    assert!(doc["approvals"]["verified"].as_i64().unwrap() > 0, "{doc}");
    let c = rusqlite::Connection::open(&db).unwrap();
    let (id, run): (String, String) = c
        .query_row(
            "SELECT id, run_id FROM approvals WHERE status = 'pending' \
             AND json_valid(request_json) ORDER BY rowid LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let shown = cs(&db, &["show", &run]);
    assert!(
        stdout(&shown).contains("decide with: "),
        "{}",
        stdout(&shown)
    );
    c.execute(
        "UPDATE approvals SET presentation_json = '{\"amount\":\"1.00 USD\"}' WHERE id = ?1",
        [&id],
    )
    .unwrap();
    drop(c);
    let o = cs(&db, &["verify"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains(&format!("approval {id} does not hash to its stored hash")),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        stderr(&o),
        format!("error: approval {id} does not hash to its stored hash\n")
    );
    let o = cs(&db, &["verify", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["approvals"]["mismatched"], serde_json::json!([id]));
    assert_eq!(
        doc["intact"],
        serde_json::json!(true),
        "the chain itself holds"
    );
    let shown = cs(&db, &["show", &run]);
    let text = stdout(&shown);
    assert!(!text.contains("decide with: "), "{text}");
    assert!(text.contains("REFUSED by approve and reject: "), "{text}");
    assert!(text.contains(&format!(" cancel {run}")), "{text}");
}

/// A waiting run whose approval's status is damaged (not `pending`, not any status agentrt
/// writes) is not shown as if nothing were the matter: `show` says no approval is pending and
/// how to cancel the run, `--json` says `no_pending_approval` (found from outside: the
/// approval vanished, the run still waiting, nothing said).
#[test]
fn a_waiting_run_without_a_pending_approval_says_so() {
    let dir = tempdir();
    let db = dir.path().join("w.db");
    fixture(&db, &FIXED);
    let c = rusqlite::Connection::open(&db).unwrap();
    let run: String = c
        .query_row(
            "SELECT a.run_id FROM approvals a JOIN runs r ON r.id = a.run_id \
             WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL' \
             GROUP BY a.run_id HAVING count(*) = 1 LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let before = stdout(&cs(&db, &["show", &run]));
    assert!(!before.contains("NO PENDING APPROVAL"), "{before}");
    c.execute(
        "UPDATE approvals SET status = 'maybe\u{1b}[31m' WHERE run_id = ?1",
        [&run],
    )
    .unwrap();
    drop(c);
    let text = stdout(&cs(&db, &["show", &run]));
    assert!(
        text.contains("NO PENDING APPROVAL: the run waits for approval"),
        "{text}"
    );
    assert!(text.contains(&format!(" cancel {run}")), "{text}");
    assert!(text.contains("is stored as maybe\\x1b[31m"), "{text}");
    for args in [
        &["show", &run, "--json"][..],
        &["show", &run, "--json", "--limit", "0"],
    ] {
        let doc: serde_json::Value = serde_json::from_str(&stdout(&cs(&db, args))).unwrap();
        assert_eq!(
            doc["no_pending_approval"],
            serde_json::json!(true),
            "{args:?}"
        );
        assert_eq!(doc["approvals_total"], serde_json::json!(0), "{args:?}");
    }
}

/// A waiting run whose latest approval was approved is a granted call waiting for its resume
/// (agentrt leaves the run waiting from the decision to the resume), not a damaged row:
/// `show` says who approved it and that the call runs when the run is resumed, and offers no
/// cancel; `--json` says `awaiting_resume` with that approval (found from outside: the
/// reviewer was told the row might be damaged and to cancel the run).
#[test]
fn an_approved_run_not_resumed_yet_is_not_called_damaged() {
    let dir = tempdir();
    let db = dir.path().join("a.db");
    let m = fixture(&db, &["--scenario", "approved"]);
    let run = s(&m, "/scenarios/approved/runs/0/id");
    let approval = s(&m, "/scenarios/approved/runs/0/approvals/0");
    let text = stdout(&cs(&db, &["show", run]));
    assert!(
        text.contains(&format!(
            "APPROVED, NOT RESUMED YET: approval {approval} was approved by alice at "
        )),
        "{text}"
    );
    assert!(!text.contains("NO PENDING APPROVAL"), "{text}");
    assert!(!text.contains(" cancel "), "{text}");
    for args in [
        &["show", run, "--json"][..],
        &["show", run, "--json", "--limit", "0"],
    ] {
        let doc: serde_json::Value = serde_json::from_str(&stdout(&cs(&db, args))).unwrap();
        assert_eq!(doc["awaiting_resume"], serde_json::json!(true), "{args:?}");
        assert_eq!(doc["latest_approval"]["id"], approval, "{args:?}");
        assert_eq!(doc["latest_approval"]["status"], "approved", "{args:?}");
        assert!(doc.get("no_pending_approval").is_none(), "{args:?}");
    }
}

/// A RUNNING run whose lease has run out (its holder stopped renewing it: the process died?)
/// says so in `show` (the lease line), `runs` (its status) and `--json` (`lease_expired`);
/// one whose lease still runs does not (found from outside: a run left by a killed worker
/// showed its dead lease as any other, a minute after it ran out).
#[test]
fn a_running_run_whose_lease_ran_out_says_so() {
    let dir = tempdir();
    for (base, expired) in [
        ("2020-01-01T00:00:00Z", true),
        ("2099-01-01T00:00:00Z", false),
    ] {
        let db = dir.path().join(format!("r{expired}.db"));
        let m = fixture(&db, &["--scenario", "running", "--base-time", base]);
        let run = s(&m, "/scenarios/running/runs/0/id");
        let text = stdout(&cs(&db, &["show", run]));
        assert!(
            text.contains("lease   worker/abc123def456 until "),
            "{text}"
        );
        assert_eq!(
            text.contains(" (EXPIRED: its holder stopped renewing it"),
            expired,
            "{text}"
        );
        let list = stdout(&cs(&db, &["runs"]));
        assert_eq!(list.contains("RUNNING (lease expired)"), expired, "{list}");
        let doc: serde_json::Value =
            serde_json::from_str(&stdout(&cs(&db, &["show", run, "--json"]))).unwrap();
        assert_eq!(doc["run"].get("lease_expired").is_some(), expired, "{doc}");
    }
}

/// A model call dispatched with no recorded outcome (its process killed mid-call) is in none of
/// the run's totals: `show` says how many there are, `--json` as `model_calls_unrecorded`
/// (found from outside: `model 1 call(s)` after two requests).
#[test]
fn show_counts_model_calls_with_no_recorded_outcome() {
    let dir = tempdir();
    let db = dir.path().join("m.db");
    fixture(&db, &FIXED);
    let c = rusqlite::Connection::open(&db).unwrap();
    let run: String = c
        .query_row(
            "SELECT run_id FROM model_calls ORDER BY rowid LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let before = stdout(&cs(&db, &["show", &run]));
    assert!(!before.contains("no recorded outcome"), "{before}");
    c.execute(
        "UPDATE model_calls SET status = 'dispatched' WHERE rowid = \
         (SELECT min(rowid) FROM model_calls WHERE run_id = ?1)",
        [&run],
    )
    .unwrap();
    drop(c);
    let text = stdout(&cs(&db, &["show", &run]));
    assert!(
        text.contains("model   1 more call(s) dispatched with no recorded outcome"),
        "{text}"
    );
    for args in [
        &["show", &run, "--json"][..],
        &["show", &run, "--json", "--limit", "0"],
    ] {
        let doc: serde_json::Value = serde_json::from_str(&stdout(&cs(&db, args))).unwrap();
        assert_eq!(
            doc["model_calls_unrecorded"],
            serde_json::json!(1),
            "{args:?}"
        );
    }
}

/// `--limit 0 --json` ("0 prints all") is one JSON value however many pages it takes: the very
/// bytes of one page large enough for everything (but for `limit`), for `runs` over 1,200 runs
/// and for `show` of a run of 1,200 steps (also from an offset), and for an empty list.
#[test]
fn limit_zero_json_is_one_document_of_every_row() {
    let dir = tempdir();
    let same = |db: &Path, args: &[&str], big: &str| {
        let mut all = args.to_vec();
        all.extend(["--limit", "0", "--json"]);
        let got = stdout(&cs(db, &all));
        let mut one = args.to_vec();
        one.extend(["--limit", big, "--json"]);
        let want = stdout(&cs(db, &one)).replace(&format!("\"limit\": {big}"), "\"limit\": 0");
        assert!(
            got == want,
            "{args:?}: {} bytes, one page {} bytes",
            got.len(),
            want.len()
        );
        serde_json::from_str::<serde_json::Value>(&got).expect("one JSON value")
    };
    let runs = dir.path().join("runs.db");
    fixture(&runs, &["--big", "1200", "--scenario", "none"]);
    let doc = same(&runs, &["runs"], "5000");
    assert_eq!(doc["runs"].as_array().unwrap().len(), 1200);
    let steps = dir.path().join("steps.db");
    fixture(
        &steps,
        &[
            "--big",
            "1",
            "--steps-per-run",
            "1200",
            "--scenario",
            "none",
        ],
    );
    let listed: serde_json::Value =
        serde_json::from_str(&stdout(&cs(&steps, &["runs", "--json"]))).unwrap();
    let run = listed["runs"][0]["id"].as_str().unwrap().to_string();
    let doc = same(&steps, &["show", &run], "5000");
    assert_eq!(doc["steps"].as_array().unwrap().len(), 1200);
    let doc = same(&steps, &["show", &run, "--offset", "1190"], "5000");
    assert_eq!(doc["steps"].as_array().unwrap().len(), 10);
    let empty = dir.path().join("empty.db");
    fixture(&empty, &["--scenario", "none", "--no-check"]);
    let doc = same(&empty, &["runs"], "5000");
    assert_eq!(doc["runs"], serde_json::json!([]));
}

/// A run whose stored step count is not an integer (text, a real, a blob) is listed with `?`
/// for it, not a number it does not hold; `--json` says why in `decode_error`.
#[test]
fn an_unreadable_step_count_is_listed_as_unread() {
    let dir = tempdir();
    let db = dir.path().join("nan.db");
    fixture(&db, &["--scenario", "completed"]);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE runs SET step_count = 'NaN'", [])
        .unwrap();
    let o = cs(&db, &["runs"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let row = stdout(&o).lines().nth(1).unwrap_or_default().to_string();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells.get(3), Some(&"?"), "{row}");
    let j: serde_json::Value =
        serde_json::from_str(&stdout(&cs(&db, &["runs", "--json"]))).unwrap();
    assert!(
        j["runs"][0]["decode_error"]
            .as_str()
            .unwrap_or_default()
            .contains("step_count"),
        "{j}"
    );
}

/// `--json` writes DEL as `\u007f`, as it writes every C0 control (JSON's own escapes) and C1
/// control: never the raw byte, in a run's fields of `runs` and `show`.
#[test]
fn json_escapes_del_as_every_control() {
    let dir = tempdir();
    let db = dir.path().join("del.db");
    fixture(&db, &["--scenario", "running"]);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE runs SET goal = 'g' || char(127), lease_owner = 'o' || char(127) || char(27)",
            [],
        )
        .unwrap();
    let listed = cs(&db, &["runs", "--json"]);
    let run: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let id = run["runs"][0]["id"].as_str().unwrap().to_string();
    for args in [
        vec!["runs", "--json"],
        vec!["show", id.as_str(), "--json", "--limit", "0"],
    ] {
        let o = cs(&db, &args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(!o.stdout.contains(&0x7f), "{args:?}: a raw DEL");
        assert!(stdout(&o).contains(r"g\u007f"), "{args:?}: {}", stdout(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
        assert!(v.to_string().contains('\u{7f}'), "the value is kept");
    }
}
