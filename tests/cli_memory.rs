//! `show --limit 5` reads only the page it prints: on a run of 3000 steps of 40 kB each (123 MB)
//! its peak memory stays within 4 MiB of the same command on a run of 5 small steps, measured
//! in the same test (wait4's rusage of the real process, started by a small parent so that
//! this test process's size does not count: `support::huge::run_measured`).

mod support;

use std::ffi::OsStr;

use support::huge;

#[test]
fn show_of_a_huge_run_reads_only_the_page_it_prints() {
    let dir = support::tempdir();
    let db = dir.path().join("huge.db");
    huge::write(&db, 3000, 40_000);
    let size = std::fs::metadata(&db).expect("db").len();
    assert!(size > 100_000_000, "the database really is large: {size}");
    let peak = |run: &str| {
        let args: Vec<&OsStr> = vec![
            OsStr::new("--db"),
            db.as_os_str(),
            OsStr::new("show"),
            OsStr::new(run),
            OsStr::new("--limit"),
            OsStr::new("5"),
        ];
        let (code, peak_kib, printed) = huge::run_measured(&args);
        assert_eq!(code, 0, "{run}");
        assert!(printed > 0);
        peak_kib
    };
    // The binary's own footprint, with the same page of a small run.
    let base = peak(huge::SMALL);
    let big = peak(huge::HUGE);
    assert!(
        big < base + 4 * 1024,
        "show --limit 5 of the 123 MB run peaked at {big} KiB, the small run's at {base} KiB"
    );
}

/// The fixture's waiting run with its approval's request, and the step's decision that made
/// it, grown to about `mb` MB each (one string argument): (run, approval). Written by Python so that this process never holds the value
/// (a child's peak resident set starts from its parent's at fork). The stored hash is left as
/// it was: the size alone decides what is read, before any hash is checked.
fn huge_request(db: &std::path::Path, mb: usize) -> (String, String) {
    let m = support::fixture(db, &["--scenario", "waiting"]);
    let run = support::s(&m, "/scenarios/waiting/runs/0/id").to_string();
    let script = "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\n\
        c.execute(\"UPDATE approvals SET request_json = replace(request_json, '\\\"damaged\\\"', \
        '\\\"' || replace(hex(zeroblob(?)), '0', 'x') || '\\\"') WHERE run_id = ?\", (int(sys.argv[2]), sys.argv[3]))\n\
        c.execute(\"UPDATE steps SET decision_json = replace(decision_json, '\\\"damaged\\\"', \
        '\\\"' || replace(hex(zeroblob(?)), '0', 'x') || '\\\"') WHERE run_id = ?\", (int(sys.argv[2]), sys.argv[3]))\n\
        c.commit()\nprint(c.execute('SELECT id, length(request_json) FROM approvals WHERE run_id = ?', (sys.argv[3],)).fetchone()[0])";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(db)
        .arg((mb * 500_000).to_string())
        .arg(&run)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (run, id)
}

#[test]
fn a_request_of_a_hundred_megabytes_is_never_read_whole_to_be_shown_or_decided() {
    let dir = support::tempdir();
    let db = dir.path().join("big.db");
    let (run, id) = huge_request(&db, 100);
    let dbs = db.as_os_str();
    let arg = OsStr::new;
    for args in [
        vec![arg("--db"), dbs, arg("show"), arg(&run)],
        vec![
            arg("--db"),
            dbs,
            arg("approve"),
            arg(&run),
            arg("--approval"),
            arg(&id),
        ],
        vec![arg("--db"), dbs, arg("approve"), arg(&run), arg("--yes")],
        vec![
            arg("--db"),
            dbs,
            arg("reject"),
            arg(&run),
            arg("--yes"),
            arg("--note"),
            arg("n"),
        ],
    ]
    .into_iter()
    .map(|mut v| {
        if v[2] != "show" {
            v.extend([arg("--by"), arg("tester")]);
        }
        v
    }) {
        let (_, peak_kib, printed) = huge::run_measured(&args);
        assert!(printed > 0, "{args:?}");
        assert!(peak_kib < 64 * 1024, "{args:?} peaked at {peak_kib} KiB");
    }
    // What show prints: the request's own fields, never the stand-in as arguments.
    let out = support::bin::cs(dbs, &[arg("show"), arg(&run)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("  NOT SHOWN: the request is "), "{text}");
    assert!(
        !text.contains("truncated") && !text.contains("  length"),
        "{text}"
    );
    // approve says what was and was not shown, and decides nothing.
    let out = support::bin::cs(dbs, &[arg("approve"), arg(&run), arg("--yes")]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("NOT SHOWN") && text.contains("tool    issue_refund"),
        "{text}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("approve: approval {id} has a request of "))
            && err.contains("none of its arguments; nothing was decided"),
        "{err}"
    );
    let store = countersign::runtime::store::Store::open_existing(&db, true).unwrap();
    assert_eq!(
        store.pending_request_bytes(&run, 5).unwrap().len(),
        1,
        "still pending"
    );
    drop(store);
    // The way out the message names: cancel.
    let (code, peak_kib, _) = huge::run_measured(&[
        arg("--db"),
        dbs,
        arg("cancel"),
        arg(&run),
        arg("--by"),
        arg("tester"),
        arg("--note"),
        arg("too large to review"),
    ]);
    assert_eq!(code, 0);
    // Not bounded yet: the operator's cancel reads the run's steps whole (a 100 MB decision
    // makes it peak near 200 MB). docs/status.md lists it as not met.
    eprintln!("cancel peaked at {peak_kib} KiB");
}
