//! Issue 14 items 5 and 1 for ids that are not UTF-8: a run id (or approval id) holding bytes
//! that are not UTF-8 is shown as `\xNN` by every command, never as U+FFFD; `--json` keeps the
//! stored bytes apart (`id_hex`, decision 0012); the commands take the id as bytes from argv
//! and act on exactly that run, never on another whose lossy form is the same.

mod support;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Output;

use countersign::runtime::store::Store;
use countersign::runtime::types::Timestamp;
use support::bin::cs;
use support::{hostile, runs, tempdir};

fn os(b: &[u8]) -> &OsStr {
    OsStr::from_bytes(b)
}

fn text(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("the commands print UTF-8")
}

/// Three waiting runs: `t-\xff`, `t-\xfe` (differing only in their invalid byte) and the UTF-8
/// run `t-\u{fffd}`, their lossy form. Each run's approval is `a-<n>`.
fn three_runs(dir: &Path) -> std::path::PathBuf {
    let db = dir.join("ids.db");
    let store = Store::open(&db).unwrap();
    let now = Timestamp::now();
    for (i, id) in ["p0", "p1", hostile::LOSSY_TWIN].iter().enumerate() {
        runs::create(&store, id, &format!("goal {i}"), now);
        runs::pause_step(&store, id, &format!("s-{i}"), &format!("a-{i}"), 0, now);
    }
    drop(store);
    hostile::rekey_run(&db, "p0", hostile::NOT_UTF8[0]);
    hostile::rekey_run(&db, "p1", hostile::NOT_UTF8[1]);
    assert_eq!(hostile::verify_bytes(&db), Vec::<String>::new());
    db
}

fn status_of(db: &Path, approval: &str) -> (String, String) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(
        "SELECT a.status, r.status FROM approvals a JOIN runs r ON r.id = a.run_id WHERE a.id = ?1",
        [approval],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap()
}

#[test]
fn ids_that_are_not_utf8_show_as_bytes_in_runs_show_and_json() {
    let d = tempdir();
    let db = three_runs(d.path());
    let runs = cs(&db, &[OsStr::new("runs")]);
    assert_eq!(runs.status.code(), Some(0));
    let t = text(&runs);
    assert!(t.contains(r"t-\xff"), "{t}");
    assert!(t.contains(r"t-\xfe"), "{t}");
    assert!(
        !t.lines()
            .any(|l| l.contains(r"\x") && l.contains('\u{fffd}')),
        "no lossy form beside the bytes:\n{t}"
    );
    let show = cs(&db, &[OsStr::new("show"), os(hostile::NOT_UTF8[1])]);
    assert_eq!(
        show.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&show.stderr)
    );
    let t = text(&show);
    assert!(t.contains(r"t-\xfe"), "{t}");
    assert!(!t.contains('\u{fffd}'), "{t}");
    assert!(t.contains("goal 1"), "show names the run by its bytes: {t}");
    assert!(
        t.contains("side effect remote_mutation is require_approval by policy"),
        "the approval's reason is found under the run's bytes: {t}"
    );
    // --json: the lossy string agentrt's -json writes, and the stored bytes in hex beside it.
    let j = cs(
        &db,
        &[
            OsStr::new("--json"),
            OsStr::new("show"),
            os(hostile::NOT_UTF8[0]),
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(v["run"]["id"], "t-\u{fffd}");
    assert_eq!(v["run"]["id_hex"], "742dff");
    assert_eq!(v["run"]["goal"], "goal 0");
    assert_eq!(v["approvals"][0]["run_id_hex"], "742dff");
    assert_eq!(v["run"]["pending_approval_id"], "a-0");
    assert!(v["run"].get("pending_approval_id_hex").is_none());
    let j = cs(&db, &[OsStr::new("--json"), OsStr::new("runs")]);
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    let hexes: Vec<&str> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id_hex"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(hexes, ["-", "742dfe", "742dff"], "{v:#}");
    let ev = cs(
        &db,
        &[
            OsStr::new("--json"),
            OsStr::new("events"),
            os(hostile::NOT_UTF8[1]),
        ],
    );
    let first: serde_json::Value =
        serde_json::from_slice(ev.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["run_id_hex"], "742dfe");
    // The UTF-8 twin is a run of its own, with no hex.
    let twin = cs(
        &db,
        &[
            OsStr::new("--json"),
            OsStr::new("show"),
            OsStr::new(hostile::LOSSY_TWIN),
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&twin.stdout).unwrap();
    assert_eq!(v["run"]["goal"], "goal 2");
    assert!(v["run"].get("id_hex").is_none());
}

#[test]
fn the_commands_decide_and_cancel_exactly_the_run_named_by_its_bytes() {
    let d = tempdir();
    let db = three_runs(d.path());
    // Approve t-\xfe: its approval only.
    let ap = cs(
        &db,
        &[
            OsStr::new("approve"),
            os(hostile::NOT_UTF8[1]),
            OsStr::new("--approval"),
            OsStr::new("a-1"),
        ],
    );
    assert_eq!(
        ap.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ap.stderr)
    );
    let t = text(&ap);
    assert!(
        t.contains(r"run t-\xfe [invalid utf-8]: WAITING_FOR_APPROVAL"),
        "{t}"
    );
    assert!(!t.contains('\u{fffd}'), "{t}");
    assert_eq!(status_of(&db, "a-1").0, "approved");
    assert_eq!(status_of(&db, "a-0").0, "pending");
    assert_eq!(status_of(&db, "a-2").0, "pending");
    // The approval of another run is not found under this run's bytes.
    let wrong = cs(
        &db,
        &[
            OsStr::new("approve"),
            os(hostile::NOT_UTF8[0]),
            OsStr::new("--approval"),
            OsStr::new("a-1"),
        ],
    );
    assert_eq!(wrong.status.code(), Some(1));
    assert_eq!(status_of(&db, "a-0").0, "pending");
    // Reject t-\xff without naming the approval (--yes): only its run is cancelled.
    let rj = cs(
        &db,
        &[
            OsStr::new("reject"),
            os(hostile::NOT_UTF8[0]),
            OsStr::new("--yes"),
            OsStr::new("--note"),
            OsStr::new("no"),
        ],
    );
    assert_eq!(
        rj.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&rj.stderr)
    );
    assert!(
        text(&rj).contains(r"run t-\xff [invalid utf-8]: CANCELLED"),
        "{}",
        text(&rj)
    );
    assert_eq!(
        status_of(&db, "a-0"),
        ("rejected".into(), "CANCELLED".into())
    );
    assert_eq!(
        status_of(&db, "a-2"),
        ("pending".into(), "WAITING_FOR_APPROVAL".into())
    );
    // Cancel t-\xfe: not its lossy twin.
    let cn = cs(
        &db,
        &[
            OsStr::new("cancel"),
            os(hostile::NOT_UTF8[1]),
            OsStr::new("--note"),
            OsStr::new("done"),
        ],
    );
    assert_eq!(
        cn.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&cn.stderr)
    );
    assert!(
        text(&cn).contains(r"run t-\xfe [invalid utf-8]: CANCELLED"),
        "{}",
        text(&cn)
    );
    assert_eq!(status_of(&db, "a-1").1, "CANCELLED");
    assert_eq!(status_of(&db, "a-2").1, "WAITING_FOR_APPROVAL");
    // Resume names the run by its bytes and refuses it with a sentence; nothing changes.
    let rs = cs(&db, &[OsStr::new("resume"), os(hostile::NOT_UTF8[1])]);
    assert_eq!(rs.status.code(), Some(1));
    let err = String::from_utf8_lossy(&rs.stderr).into_owned();
    assert!(err.contains(r"t-\xfe"), "{err}");
    // The events written carry the stored bytes and the chain holds over them.
    let v = cs(&db, &[OsStr::new("verify")]);
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}{}",
        text(&v),
        String::from_utf8_lossy(&v.stderr)
    );
    assert_eq!(hostile::verify_bytes(&db), Vec::<String>::new());
    let c = rusqlite::Connection::open(&db).unwrap();
    let decided: Vec<Vec<u8>> = c
        .prepare("SELECT CAST(run_id AS BLOB) FROM events WHERE type IN ('approval.decided', 'run.finished') ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        decided,
        [
            hostile::NOT_UTF8[1].to_vec(),
            hostile::NOT_UTF8[0].to_vec(),
            hostile::NOT_UTF8[0].to_vec(),
            hostile::NOT_UTF8[1].to_vec(),
        ]
    );
}

/// What a failed command printed on stderr, checked to be UTF-8 (the sanitiser's output).
fn failure(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let e = String::from_utf8(o.stderr.clone()).expect("stderr is sanitised UTF-8");
    assert!(!e.contains('\u{fffd}'), "an id named lossily: {e}");
    e
}

/// Error messages built inside the runtime (the store's not-found and run-state errors, the
/// operator's refusals, the candidates of an ambiguous approval) name an id that is not UTF-8
/// by its stored bytes, `\xNN`, never by its lossy U+FFFD form; a backslash in an id shows as
/// the sanitiser shows it (`\\`), so `t-\xff` as bytes and `t-\xff` typed as text differ.
#[test]
fn error_messages_name_an_id_that_is_not_utf8_by_its_bytes() {
    let d = tempdir();
    let db = three_runs(d.path());
    // A second run whose id holds an invalid byte and a literal backslash, with two pending
    // approvals, one of them `a-\xfe`.
    let backslashed: &[u8] = b"t-\xff\\x";
    hostile::rekey_run(&db, hostile::LOSSY_TWIN, backslashed);
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute(
            "INSERT INTO approvals SELECT ?1, run_id, step_id, kind, capability_json, presentation_json, request_json, hash, status, created_at, decided_at, decided_by, note, expires_at FROM approvals WHERE id = 'a-2'",
            [hostile::Text(b"a-\xfe")],
        )
        .unwrap();
    }
    let missing = os(b"t-\xfd");

    // show / cancel / approve of a run that does not exist.
    let e = failure(&cs(&db, &[OsStr::new("show"), missing]));
    assert!(e.contains(r"agentrt: not found: run t-\xfd"), "{e}");
    let e = failure(&cs(
        &db,
        &[
            OsStr::new("cancel"),
            missing,
            OsStr::new("--note"),
            OsStr::new("n"),
        ],
    ));
    assert!(e.contains(r"agentrt: not found: run t-\xfd"), "{e}");
    let e = failure(&cs(
        &db,
        &[
            OsStr::new("approve"),
            missing,
            OsStr::new("--approval"),
            os(b"a-\xfe"),
        ],
    ));
    assert!(
        e.contains(r"agentrt: not found: approval a-\xfe of run t-\xfd"),
        "{e}"
    );
    // The same for the run whose id holds a backslash: the backslash is escaped, the invalid
    // byte shown as `\xff`.
    let e = failure(&cs(
        &db,
        &[
            OsStr::new("approve"),
            os(backslashed),
            OsStr::new("--approval"),
            OsStr::new("a-9"),
        ],
    ));
    assert!(
        e.contains(r"agentrt: not found: approval a-9 of run t-\xff\\x"),
        "{e}"
    );

    // cancel of a run that is already CANCELLED.
    let first = cs(
        &db,
        &[
            OsStr::new("cancel"),
            os(hostile::NOT_UTF8[0]),
            OsStr::new("--note"),
            OsStr::new("done"),
        ],
    );
    assert_eq!(first.status.code(), Some(0));
    let e = failure(&cs(
        &db,
        &[
            OsStr::new("cancel"),
            os(hostile::NOT_UTF8[0]),
            OsStr::new("--note"),
            OsStr::new("again"),
        ],
    ));
    assert!(
        e.contains(r"agentrt: run is not in the required state: run t-\xff is already CANCELLED"),
        "{e}"
    );
    // approve of it: the run is not waiting.
    let e = failure(&cs(
        &db,
        &[
            OsStr::new("approve"),
            os(hostile::NOT_UTF8[0]),
            OsStr::new("--approval"),
            OsStr::new("a-0"),
        ],
    ));
    assert!(e.contains(r"run t-\xff is CANCELLED"), "{e}");

    // An ambiguous approval: the candidates are named by their bytes.
    let e = failure(&cs(
        &db,
        &[OsStr::new("approve"), os(backslashed), OsStr::new("--yes")],
    ));
    assert!(
        e.contains(
            r"run t-\xff\\x has 2 pending approvals, name one of a-2, a-\xfe: more than one pending approval"
        ),
        "{e}"
    );
    assert_eq!(status_of(&db, "a-2").0, "pending");
}
