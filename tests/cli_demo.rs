//! `demo` and `resume` as the real binary: the demo writes a real queue through the runtime and
//! never clobbers a database it did not create; approving then resuming a demo refund changes
//! the order ledger exactly once.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::bin::{cs, on};
use support::{fixture, s, tempdir, verify};

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn py(db: &Path, sql: &str) -> String {
    let o = Command::new("python3")
        .args(["-c", "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\nfor r in c.execute(sys.argv[2]): print('|'.join(str(x) for x in r))\nc.commit()"])
        .arg(db)
        .arg(sql)
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn waiting_runs(db: &Path) -> Vec<String> {
    let o = cs(db, &["--json", "runs", "--status", "WAITING_FOR_APPROVAL"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("runs --json");
    v["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect()
}

#[test]
fn demo_writes_a_queue_and_never_clobbers_a_database_it_did_not_create() {
    let dir = tempdir();
    let db = dir.path().join("demo.db");
    let o = cs(&db, &["demo", "--no-tui"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        dir.path().join("demo.orders.db").exists(),
        "the backend sits beside it"
    );
    assert!(waiting_runs(&db).len() >= 4, "a real queue");
    let (code, report) = verify(&db);
    assert_eq!(code, 0, "{report:#}");
    // A second run recognises its own demo and writes nothing.
    let before = std::fs::read(&db).expect("db");
    let again = cs(&db, &["demo", "--no-tui"]);
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&again.stdout).contains("already exists"));
    assert_eq!(std::fs::read(&db).expect("db"), before);
    // A database it did not create is refused and left as it was.
    let other = dir.path().join("theirs.db");
    fixture(&other, &["--scenario", "completed"]);
    let before = std::fs::read(&other).expect("theirs");
    let o = cs(&other, &["demo", "--no-tui"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("not a demo countersign wrote"),
        "{}",
        err(&o)
    );
    assert_eq!(std::fs::read(&other).expect("theirs"), before);
}

#[test]
fn approving_and_resuming_a_demo_refund_changes_the_ledger_once() {
    let dir = tempdir();
    let db = dir.path().join("demo.db");
    let backend = dir.path().join("demo.orders.db");
    assert_eq!(cs(&db, &["demo", "--no-tui"]).status.code(), Some(0));
    // A refund over the automatic limit: its approval names an issue_refund.
    let run = waiting_runs(&db)
        .into_iter()
        .find(|r| {
            let show = String::from_utf8_lossy(&cs(&db, &["show", r]).stdout).into_owned();
            show.contains("kind    over_auto_limit")
                && show.contains("tool    issue_refund")
                && !show.contains("\\x1b")
        })
        .expect("a refund waits");
    let before = py(
        &backend,
        &format!("select count(*) from effects where session_id='{run}'"),
    );
    let o = cs(&db, &["approve", &run, "--yes", "--by", "alice"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let o = cs(&db, &["resume", &run]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let after = py(
        &backend,
        &format!("select count(*) from effects where session_id='{run}' and tool='issue_refund'"),
    );
    assert_eq!(
        after.trim().parse::<i64>().expect("count"),
        before.trim().parse::<i64>().expect("count") + 1,
        "exactly one refund executed"
    );
    // Resuming again executes nothing.
    let again = cs(&db, &["resume", &run]);
    assert_eq!(again.status.code(), Some(1));
    assert!(err(&again).contains("cannot be resumed"), "{}", err(&again));
    let last = py(
        &backend,
        &format!("select count(*) from effects where session_id='{run}' and tool='issue_refund'"),
    );
    assert_eq!(last, after);
    let (code, report) = verify(&db);
    assert_eq!(code, 0, "{report:#}");
}

#[test]
fn resume_explains_what_this_build_cannot_resume() {
    let dir = tempdir();
    let db = dir.path().join("f.db");
    let m = fixture(&db, &["--scenario", "approved", "--base-time", "now"]);
    let run = s(&m, "/scenarios/approved/runs/0/id");
    let o = cs(&db, &["resume", run]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("its backend") && err(&o).contains("is missing"),
        "{}",
        err(&o)
    );
    // A run that proposed a tool of another consumer.
    py(
        &db,
        &format!(
            "update steps set decision_json=replace(decision_json,'\"issue_refund\"','\"deploy_prod\"') where run_id='{run}'"
        ),
    );
    let o = cs(&db, &["resume", run]);
    assert_eq!(o.status.code(), Some(1));
    let e = err(&o);
    assert!(
        e.contains("does not register (deploy_prod)") && e.contains("Driver::resume"),
        "{e}"
    );
}

/// Two run databases whose names are not UTF-8 (`\xff.db`, `\xfe.db`) have two order backends
/// beside them, named by their bytes, never one lossy `\u{fffd}.orders.db` that both would
/// write their effects into; the demo names the database by its bytes (`\xff`).
#[test]
fn names_that_are_not_utf8_have_backends_of_their_own() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempdir();
    for b in [0xffu8, 0xfe] {
        let db = dir.path().join(OsStr::from_bytes(&[b, b'.', b'd', b'b']));
        let o = cs(&db, &["demo", "--no-tui"]);
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
        let out = String::from_utf8(o.stdout).expect("text");
        assert!(out.contains(&format!("\\x{b:02x}.db")), "{out}");
        assert!(!out.contains('\u{fffd}'), "{out}");
        let backend = dir
            .path()
            .join(OsStr::from_bytes(&[&[b][..], b".orders.db"].concat()));
        assert!(backend.exists(), "{out}");
    }
    let lossy = dir.path().join("\u{fffd}.orders.db");
    assert!(!lossy.exists(), "one backend for both");
}

/// A demo that would open the console refuses before it writes anything when the console
/// could not open: no terminal, or a configuration the console refuses (an unknown theme, a
/// bad config.toml). Before, both databases were written and then left behind.
#[test]
fn a_demo_whose_console_cannot_open_writes_nothing() {
    let dir = tempdir();
    let cfg = dir.path().join("cfg");
    std::fs::create_dir_all(cfg.join("countersign")).unwrap();
    let run = |db: &Path, args: &[&str], config: &str| -> Output {
        std::fs::write(cfg.join("countersign/config.toml"), config).unwrap();
        on(db)
            .args(args)
            .env("XDG_CONFIG_HOME", &cfg)
            .output()
            .unwrap()
    };
    for (args, config, says) in [
        (&["demo"][..], "", "needs a terminal"),
        (&["demo", "--theme", "nosuch"], "", "needs a terminal"),
        (&["demo"], "foo = 1\n", "needs a terminal"),
    ] {
        let db = dir.path().join("d.db");
        let o = run(&db, args, config);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", err(&o));
        assert!(err(&o).contains(says), "{args:?}: {}", err(&o));
        assert!(!db.exists(), "{args:?}: the demo was written");
        assert!(!dir.path().join("d.orders.db").exists());
    }
    // --no-tui opens no console: it writes the demo whatever the configuration says.
    let db = dir.path().join("d.db");
    let o = run(&db, &["demo", "--no-tui"], "foo = 1\n");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(db.exists());
}
