//! approve / reject / cancel as the real binary: consent, the hash of what was printed, races
//! between two reviewers in separate processes, and databases that still verify afterwards.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use support::bin::{cs, on};
use support::{assert_verifies, fixture, s, tempdir};

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// (status, decided_by, note) of an approval, read by Python's sqlite3 (independent of ours).
fn approval_row(db: &Path, id: &str) -> (String, String, String) {
    let o = Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\nr=c.execute('select status,decided_by,note from approvals where id=?',(sys.argv[2],)).fetchone()\nprint('\\t'.join(r))",
        ])
        .arg(db)
        .arg(id)
        .output()
        .expect("python3");
    let line = String::from_utf8_lossy(&o.stdout).trim_end().to_string();
    let mut parts = line.split('\t').map(str::to_string);
    (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    )
}

fn run_status(db: &Path, id: &str) -> String {
    let o = Command::new("python3")
        .args(["-c", "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\nprint(c.execute('select status||\" \"||reason from runs where id=?',(sys.argv[2],)).fetchone()[0])"])
        .arg(db)
        .arg(id)
        .output()
        .expect("python3");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn waiting(dir: &Path, name: &str, extra: &[&str]) -> (std::path::PathBuf, String, String) {
    let db = dir.join(name);
    let mut args = vec!["--scenario", "waiting", "--base-time", "now"];
    args.extend_from_slice(extra);
    let m = fixture(&db, &args);
    let run = s(&m, "/scenarios/waiting/runs/0/id").to_string();
    let ap = s(&m, "/scenarios/waiting/runs/0/approvals/0").to_string();
    (db, run, ap)
}

#[test]
fn approve_prints_the_approval_then_records_the_decision() {
    let dir = tempdir();
    let (db, run, ap) = waiting(dir.path(), "a.db", &[]);
    let o = cs(
        &db,
        &[
            "approve",
            &run,
            "--yes",
            "--by",
            "alice",
            "--note",
            "looks right",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = out(&o);
    let closing = format!("----- end of approval {ap} for tool issue_refund -----\n");
    let at = text.find(&closing).expect("the approval was printed");
    assert!(
        text[..at].contains("APPROVAL WAITING  "),
        "printed before deciding"
    );
    assert!(
        text[at..].contains(&format!("approval {ap}: approved by alice")),
        "{text}"
    );
    assert!(
        text.ends_with(&format!(
            "the run stays waiting until it is resumed: countersign --db {} resume {run}\n",
            db.display()
        )),
        "{text}"
    );
    assert_eq!(
        approval_row(&db, &ap),
        ("approved".into(), "alice".into(), "looks right".into())
    );
    assert_eq!(run_status(&db, &run), "WAITING_FOR_APPROVAL");
    assert!(
        err(&o).contains("approval.decided"),
        "events traced to stderr"
    );
    assert_verifies(&db);
    // A second decision is refused and says by whom.
    let again = cs(&db, &["approve", &run, "--approval", &ap, "--by", "bob"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        err(&again).contains(&format!("approval {ap} is already approved by alice at ")),
        "{}",
        err(&again)
    );
}

#[test]
fn reject_fails_the_step_and_cancels_the_run() {
    let dir = tempdir();
    let (db, run, ap) = waiting(dir.path(), "r.db", &[]);
    let o = cs(
        &db,
        &[
            "reject",
            &run,
            "--approval",
            &ap,
            "--by",
            "bob",
            "--note",
            "not the customer's order",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        out(&o).contains(&format!("run {run}: CANCELLED (approval_rejected)")),
        "{}",
        out(&o)
    );
    assert_eq!(approval_row(&db, &ap).0, "rejected");
    assert_eq!(run_status(&db, &run), "CANCELLED approval_rejected");
    assert_verifies(&db);
}

#[test]
fn deciding_in_a_script_needs_consent_and_changes_nothing_without_it() {
    let dir = tempdir();
    let (db, run, ap) = waiting(dir.path(), "c.db", &[]);
    let o = cs(&db, &["approve", &run]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).starts_with("usage: approve: refusing without --approval, --yes"),
        "{}",
        err(&o)
    );
    assert!(o.stdout.is_empty());
    assert_eq!(approval_row(&db, &ap).0, "pending");
}

#[test]
fn a_tampered_approval_is_refused() {
    let dir = tempdir();
    let db = dir.path().join("t.db");
    let m = fixture(
        &db,
        &[
            "--scenario",
            "waiting",
            "--base-time",
            "now",
            "--tamper",
            "approval-hash",
        ],
    );
    let run = s(&m, "/scenarios/waiting/runs/0/id");
    let ap = s(&m, "/scenarios/waiting/runs/0/approvals/0");
    let o = cs(&db, &["approve", run, "--yes", "--by", "alice"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("approval hash does not match its recorded request"),
        "{}",
        err(&o)
    );
    assert_eq!(approval_row(&db, ap).0, "pending");
}

#[test]
fn two_reviewers_racing_in_two_processes_decide_once() {
    let dir = tempdir();
    for round in 0..6 {
        let (db, run, ap) = waiting(dir.path(), &format!("race{round}.db"), &[]);
        let spawn = |verb: &str, who: &str| {
            let mut c = on(&db);
            c.args([verb, &run, "--approval", &ap, "--by", who]);
            if verb == "reject" {
                c.args(["--note", "race"]);
            }
            c.stdout(Stdio::piped()).stderr(Stdio::piped());
            c.spawn().expect("spawn")
        };
        let a = spawn("approve", "alice");
        let b = spawn(if round % 2 == 0 { "approve" } else { "reject" }, "bob");
        let (a, b) = (
            a.wait_with_output().expect("a"),
            b.wait_with_output().expect("b"),
        );
        let wins = [&a, &b]
            .iter()
            .filter(|o| o.status.code() == Some(0))
            .count();
        assert_eq!(
            wins,
            1,
            "round {round}: exactly one decision lands: {} / {}",
            err(&a),
            err(&b)
        );
        let loser = if a.status.code() == Some(0) { &b } else { &a };
        assert_eq!(loser.status.code(), Some(1));
        let e = err(loser);
        // An approve that loses to a reject finds the run cancelled; otherwise the approval decided.
        assert!(
            e.contains("already") || e.contains("is CANCELLED, not waiting for approval"),
            "round {round}: {e}"
        );
        let (status, by, _) = approval_row(&db, &ap);
        assert!(status == "approved" || status == "rejected");
        assert!(by == "alice" || by == "bob");
        assert_verifies(&db);
    }
}

#[test]
fn cancel_ends_the_run_and_refuses_a_finished_one() {
    let dir = tempdir();
    let (db, run, _) = waiting(dir.path(), "k.db", &[]);
    let o = cs(
        &db,
        &[
            "cancel",
            &run,
            "--note",
            "customer withdrew",
            "--by",
            "carol",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(
        out(&o),
        format!("run {run}: CANCELLED (operator_cancelled)\n")
    );
    assert_verifies(&db);
    let again = cs(&db, &["cancel", &run, "--note", "again"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        err(&again).starts_with("error: run is already finished: "),
        "{}",
        err(&again)
    );
}

#[test]
fn decide_json_includes_the_decided_hash() {
    let dir = tempdir();
    let (db, run, ap) = waiting(dir.path(), "j.db", &[]);
    let o = cs(
        &db,
        &[
            "--json",
            "approve",
            &run,
            "--approval",
            &ap,
            "--by",
            "alice",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    assert_eq!(v["approval"]["status"], "approved");
    assert_eq!(v["approval"]["id"], ap.as_str());
    assert_eq!(v["approval"]["hash"].as_str().map(str::len), Some(64));
    assert_eq!(v["run"]["status"], "WAITING_FOR_APPROVAL");
}

/// An approval whose stored status is none agentrt writes (here terminal control sequences)
/// is refused by every decision with that status escaped, never raw to the terminal, and
/// the row is left as it was.
#[test]
fn an_unknown_approval_status_is_refused_escaped() {
    let dir = tempdir();
    let (db, run, ap) = waiting(dir.path(), "hostile.db", &[]);
    let hostile = "weird\u{1b}]0;OWNED-TITLE\u{7}\u{1b}[2J";
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE approvals SET status = ?1 WHERE id = ?2",
            rusqlite::params![hostile, ap],
        )
        .unwrap();
    for verb in ["approve", "reject", "deny"] {
        let o = cs(
            &db,
            &[verb, &run, "--approval", &ap, "--yes", "--note", "n"],
        );
        assert_eq!(o.status.code(), Some(1), "{verb}: {}", err(&o));
        let all = [o.stdout.as_slice(), o.stderr.as_slice()].concat();
        assert!(
            !all.iter().any(|&b| b == 0x1b || b == 0x07),
            "{verb}: raw control bytes: {:?}",
            err(&o)
        );
        assert!(err(&o).contains("weird"), "{verb}: {}", err(&o));
    }
    assert_eq!(approval_row(&db, &ap).0, hostile, "unchanged");
}

/// `--approval` names one run's approval: with the filters of a bulk decision (which decide
/// every row they select) it is a usage error, and nothing is decided.
#[test]
fn approval_with_bulk_filters_is_a_usage_error() {
    let dir = tempdir();
    let (db, run, ap) = waiting(dir.path(), "bulk.db", &[]);
    for verb in ["reject", "deny"] {
        for dry in [false, true] {
            let mut args = vec![
                verb,
                "--tool",
                "issue_refund",
                "--approval",
                ap.as_str(),
                "--note",
                "only this one",
                "--yes",
            ];
            if dry {
                args.push("--dry-run");
            }
            let o = cs(&db, &args);
            assert_eq!(o.status.code(), Some(2), "{verb}: {}", err(&o));
            assert!(err(&o).contains("--approval"), "{}", err(&o));
        }
    }
    assert_eq!(approval_row(&db, &ap).0, "pending");
    assert!(run_status(&db, &run).starts_with("WAITING_FOR_APPROVAL"));
}

/// An approval whose stored time does not parse is refused as a row that could not be read,
/// the stored text shown in the one escape notation (`\x1b`), not escaped twice.
#[test]
fn an_unreadable_approval_time_is_refused_in_one_notation() {
    let dir = tempdir();
    let (db, run, ap) = waiting(dir.path(), "time.db", &[]);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE approvals SET created_at = ?1 WHERE id = ?2",
            rusqlite::params!["\u{1b}[31mgarbage", ap],
        )
        .unwrap();
    let o = cs(&db, &["approve", &run, "--approval", &ap, "--yes"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains(&format!("approval {ap} could not be read")),
        "{e}"
    );
    assert!(
        e.contains(r#"created_at: parsing time "\x1b[31mgarbage""#),
        "{e}"
    );
    assert!(!e.contains(r"\\") && !e.contains('\u{1b}'), "{e}");
}

/// An approval whose status reads as `pending` but is not stored as that text (a blob) is
/// refused as a damaged row, not as "already pending"; nothing changes.
#[test]
fn a_pending_status_not_stored_as_text_is_refused_as_damaged() {
    let dir = tempdir();
    let (db, run, ap) = waiting(dir.path(), "blob.db", &[]);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE approvals SET status = CAST('pending' AS BLOB) WHERE id = ?1",
            [&ap],
        )
        .unwrap();
    let o = cs(&db, &["approve", &run, "--approval", &ap, "--yes"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains("a damaged row"), "{}", err(&o));
    assert!(!err(&o).contains("already pending"), "{}", err(&o));
    assert!(run_status(&db, &run).starts_with("WAITING_FOR_APPROVAL"));
}

/// A cancel of a run whose stored step count does not read as an integer records in
/// `run.finished` the number of the run's step rows, not a 0 it made up.
#[test]
fn a_cancel_never_records_a_made_up_step_count() {
    let dir = tempdir();
    let (db, run, _) = waiting(dir.path(), "nan.db", &[]);
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute("UPDATE runs SET step_count = 'NaN' WHERE id = ?1", [&run])
        .unwrap();
    let rows: i64 = c
        .query_row(
            "SELECT count(*) FROM steps WHERE run_id = ?1",
            [&run],
            |r| r.get(0),
        )
        .unwrap();
    assert!(rows > 0);
    let o = cs(&db, &["cancel", &run, "--note", "stop", "--yes"]);
    assert!(o.status.success(), "{}", err(&o));
    let payload: String = c
        .query_row(
            "SELECT payload_json FROM events WHERE run_id = ?1 AND type = 'run.finished'",
            [&run],
            |r| r.get(0),
        )
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(v["steps"].as_i64(), Some(rows), "{payload}");
}

/// `deny` of a run `countersign agent` made (its tools include the agent's `finish`) points at
/// `agent ... --resume`, not at a `resume` that refuses such a run; another run's deny still
/// prints the `resume` to paste.
#[test]
fn deny_of_an_agent_run_points_at_agent_resume() {
    let dir = tempdir();
    for agent_made in [false, true] {
        let (db, run, _) = waiting(dir.path(), &format!("d{agent_made}.db"), &[]);
        if agent_made {
            // The run proposed `finish`, as only `agent`'s runs do.
            rusqlite::Connection::open(&db)
                .unwrap()
                .execute(
                    "UPDATE steps SET decision_json = \
                     replace(decision_json, '\"issue_refund\"', '\"finish\"') WHERE run_id = ?1",
                    [&run],
                )
                .unwrap();
        }
        let o = cs(&db, &["deny", &run, "--note", "not this one", "--yes"]);
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
        let text = out(&o);
        if agent_made {
            assert!(
                text.contains("a `countersign agent` run") && !text.contains(" resume "),
                "{text}"
            );
        } else {
            assert!(
                text.contains(&format!("resume {run}")) && !text.contains("countersign agent"),
                "{text}"
            );
        }
    }
}

/// The name a decision records stays in the audit trail for good: one holding a control, a
/// bidi or an invisible character, or over 256 bytes, is a usage error (exit 2) from `--by`,
/// `COUNTERSIGN_BY` or `USER`, for approve, reject, deny, cancel, a bulk decision and the
/// console, and the database is not touched; a backslash (`DOMAIN\user`) is a name.
#[test]
fn an_operator_name_with_a_control_or_invisible_character_is_refused_and_nothing_is_written() {
    let dir = tempdir();
    let (db, run, ap) = waiting(dir.path(), "by.db", &[]);
    let before = std::fs::read(&db).unwrap();
    let with = |by: (&str, &str), args: &[&str]| -> Output {
        let mut c = on(&db);
        c.args(args);
        match by.0 {
            "--by" => c.args(["--by", by.1]),
            var => c.env(var, by.1),
        };
        c.output().expect("countersign runs")
    };
    let long = "x".repeat(257);
    for name in [
        "ev\u{1b}[31mil",
        "al\u{202e}ice",
        "\u{2800}",
        "alice\u{a0}",
        "bob\u{200b}",
        "a\tb",
        &long,
    ] {
        for from in ["--by", "COUNTERSIGN_BY", "USER"] {
            for args in [
                &["approve", &run, "--yes"][..],
                &["reject", &run, "--note", "n", "--yes"],
                &["deny", &run, "--note", "n", "--yes"],
                &["cancel", &run, "--note", "n"],
                &["reject", "--tool", "issue_refund", "--note", "n", "--yes"],
                &[],
            ] {
                let o = with((from, name), args);
                assert_eq!(
                    o.status.code(),
                    Some(2),
                    "{from}={name:?} {args:?}: {}",
                    err(&o)
                );
                assert!(err(&o).contains("cannot be recorded"), "{}", err(&o));
                assert!(!err(&o).contains('\u{1b}'), "{}", err(&o));
            }
        }
    }
    assert!(
        std::fs::read(&db).unwrap() == before,
        "the database changed"
    );
    // A variable that is set but holds no usable name is refused, not stepped over to the
    // next source (which would record another person): bytes that are not UTF-8, blanks.
    use std::os::unix::ffi::OsStrExt;
    let bad: [(&str, &std::ffi::OsStr); 4] = [
        ("COUNTERSIGN_BY", std::ffi::OsStr::from_bytes(b"\xffeve")),
        ("COUNTERSIGN_BY", std::ffi::OsStr::new("   ")),
        ("USER", std::ffi::OsStr::from_bytes(b"\xffeve")),
        ("USER", std::ffi::OsStr::new(" \t ")),
    ];
    for (var, value) in bad {
        for args in [
            &["approve", &run, "--yes"][..],
            &["cancel", &run, "--note", "n"],
            &[],
        ] {
            let o = on(&db)
                .args(args)
                .env("USER", "fallback-user")
                .env(var, value)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(2), "{var} {args:?}: {}", err(&o));
            assert!(err(&o).contains(var), "{}", err(&o));
        }
    }
    assert!(std::fs::read(&db).unwrap() == before);
    let o = with(("--by", "CORP\\bob"), &["approve", &run, "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(approval_row(&db, &ap).1, "CORP\\bob");
}
