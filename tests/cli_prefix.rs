//! Run ids a person can type (issue 15 item 8): every command taking a run accepts a unique
//! prefix of its id; an ambiguous one lists the candidates, escaped, and exits 2; an exact id
//! always wins; a prefix of none is "not found" as before. Also `deny` from the command line.

mod support;

use std::path::Path;
use std::process::Output;

use countersign::runtime::store::Store;
use countersign::runtime::types::{RunStatus, Timestamp};
use support::bin::cs;
use support::{runs, tempdir, verify};

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn db_with_runs(dir: &Path) -> std::path::PathBuf {
    let db = dir.join("p.db");
    let store = Store::open(&db).unwrap();
    let t = Timestamp::now();
    for id in ["abc", "abc1", "abd2", "ab\u{1b}[2Jq", "xyz9"] {
        runs::waiting_run(&store, id, t);
    }
    db
}

#[test]
fn a_unique_prefix_names_its_run_and_an_ambiguous_one_lists_the_candidates() {
    let dir = tempdir();
    let db = db_with_runs(dir.path());
    let o = cs(&db, &["show", "xy"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(out(&o).contains("xyz9"), "{}", out(&o));
    for cmd in [
        &["events", "abd"][..],
        &["resume", "xy"],
        &["recheck", "xy"],
    ] {
        // Resolved before the command runs: whatever it then says, it is about that run.
        let o = cs(&db, cmd);
        assert_ne!(o.status.code(), Some(2), "{cmd:?}: {}", err(&o));
    }
    // An exact id wins over the longer ids it starts.
    let o = cs(&db, &["show", "abc"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    // Ambiguous: a usage error naming every candidate, escaped.
    let o = cs(&db, &["show", "ab"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let e = err(&o);
    assert!(e.contains("is the start of 4 run ids"), "{e}");
    for id in ["abc", "abc1", "abd2"] {
        assert!(e.contains(id), "{e}");
    }
    assert!(!e.contains('\u{1b}'), "the candidates are escaped: {e:?}");
    let o = cs(&db, &["approve", "ab", "--yes"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    // A prefix of nothing is not found, as an unknown id always was.
    let o = cs(&db, &["show", "zz"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
}

#[test]
fn deny_from_the_command_line_hands_the_run_back_with_the_note() {
    let dir = tempdir();
    let db = db_with_runs(dir.path());
    let o = cs(&db, &["deny", "xyz9", "--yes"]);
    assert_eq!(o.status.code(), Some(2), "a note is required: {}", err(&o));
    assert!(err(&o).contains("--note is required"), "{}", err(&o));
    let o = cs(
        &db,
        &["deny", "xyz", "--yes", "--note", "refund 30.00, not 65.00"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = out(&o);
    assert!(text.contains("rejected by ci-user"), "{text}");
    assert!(text.contains("INTERRUPTED"), "{text}");
    assert!(text.contains("the call did not run"), "{text}");
    let store = Store::open_existing(&db, true).unwrap();
    assert_eq!(
        store.get_run("xyz9").unwrap().status,
        RunStatus::Interrupted
    );
    drop(store);
    let (code, report) = verify(&db);
    assert_eq!(code, 0, "{report}");
}
