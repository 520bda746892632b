//! The console's reader opens the run database the way the store does (one hardened open):
//! whatever `Store::open_existing(path, true)` refuses, the console refuses with the store's
//! message, and a sound database opens and reads.

mod support;

use std::path::Path;

use countersign::console::testing::SqliteData;
use countersign::console::testing::{ConsoleData, DataError, Query, Reply};
use countersign::runtime::store::Store;
use support::{fixture, tempdir};

/// The console's open error for `db`, which must carry the store's own refusal.
fn assert_refused_like_the_store(db: &Path, want: &str) {
    let store_err = Store::open_existing(db, true)
        .expect_err("the store refuses it")
        .to_string();
    assert!(store_err.contains(want), "store said: {store_err}");
    let err = match SqliteData::open(db) {
        Ok(_) => panic!("the console opened {}", db.display()),
        Err(e) => e,
    };
    assert!(matches!(err, DataError::Open { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&store_err),
        "console said {msg:?}, store said {store_err:?}"
    );
}

#[test]
fn console_refuses_triggers_and_views_like_the_store() {
    let dir = tempdir();
    for (tamper, want) in [("trigger", "trigger"), ("view", "view")] {
        let db = dir.path().join(format!("{tamper}.db"));
        fixture(&db, &["--scenario", "waiting", "--tamper", tamper]);
        assert_refused_like_the_store(&db, want);
    }
}

#[test]
fn console_refuses_a_group_writable_database_like_the_store() {
    let dir = tempdir();
    let db = dir.path().join("mode.db");
    fixture(&db, &["--scenario", "waiting", "--tamper", "mode"]);
    assert_refused_like_the_store(&db, "chmod 600");
}

#[test]
fn console_refuses_a_symbolic_link_like_the_store() {
    let dir = tempdir();
    let db = dir.path().join("real.db");
    fixture(&db, &["--scenario", "waiting"]);
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    assert_refused_like_the_store(&link, "symbolic link");
}

#[test]
fn console_refuses_schema_version_7_like_the_store() {
    let dir = tempdir();
    let db = dir.path().join("v7.db");
    fixture(&db, &["--scenario", "waiting", "--tamper", "version7"]);
    assert_refused_like_the_store(&db, "version");
}

#[test]
fn console_refuses_a_missing_file_and_never_creates_it() {
    let dir = tempdir();
    let db = dir.path().join("missing.db");
    assert_refused_like_the_store(&db, "no such file");
    assert!(!db.exists(), "reading never creates a database");
}

#[test]
fn console_reads_a_sound_database_through_the_store() {
    let dir = tempdir();
    let db = dir.path().join("ok.db");
    fixture(&db, &["--scenario", "waiting,completed"]);
    let mut data = SqliteData::open(&db).unwrap();
    let Reply::Counts(c) = data.query(&Query::Counts).unwrap() else {
        panic!("counts")
    };
    assert_eq!((c.runs, c.waiting, c.pending), (2, 1, 1));
    // Another connection's commit shows as a new data version (the console's live reload).
    let before = data.data_version().unwrap();
    let w = rusqlite::Connection::open(&db).unwrap();
    w.execute("UPDATE runs SET goal = goal || '!'", []).unwrap();
    assert_ne!(data.data_version().unwrap(), before);
}

/// A database name that is not UTF-8 is said with its bytes (`\xff`), by the console and by a
/// command, never as U+FFFD (a character no file is called), and its control bytes escaped.
#[test]
fn a_name_that_is_not_utf8_is_said_with_its_bytes() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempdir();
    let db = dir
        .path()
        .join(std::ffi::OsStr::from_bytes(b"a\xffb\x1b[31m.db"));
    for args in [&[][..], &["runs"][..]] {
        let out = support::bin::cs(&db, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8(out.stderr).expect("one line of text");
        assert!(err.contains("a\\xffb\\x1b[31m.db"), "{args:?}: {err}");
        assert!(!err.contains('\u{fffd}') && !err.contains('\x1b'), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

/// A program embedding the console gets the same refusal of an operator name decisions could
/// not record (a control, bidi or invisible character, over 256 bytes) as the binary, before
/// the database or the terminal is touched; its message shows the name escaped.
#[test]
fn the_console_refuses_an_operator_name_it_could_not_record() {
    use countersign::console::{ConsoleError, ConsoleOptions};
    let dir = tempdir();
    let db = dir.path().join("by.db");
    fixture(&db, &["--scenario", "waiting"]);
    let before = std::fs::read(&db).unwrap();
    for name in ["ev\u{1b}[2Jil", "al\u{202e}ice", &"y".repeat(300)] {
        let mut opts = ConsoleOptions::new(&db);
        opts.by = Some(name.to_string());
        opts.config_dir = Some(dir.path().join("no-config"));
        match countersign::console::run(opts) {
            Err(e @ ConsoleError::Operator { .. }) => {
                assert!(!e.to_string().contains('\u{1b}'), "{e}");
                assert!(e.to_string().contains("cannot be recorded"), "{e}");
            }
            other => panic!("{name:?}: {other:?}"),
        }
    }
    assert!(std::fs::read(&db).unwrap() == before);
}
