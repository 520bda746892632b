//! `show --limit 5` reads only the page it prints: on a run of 3000 steps of 40 kB each its
//! peak memory stays under 16 MB (measured with wait4's rusage of the real process).

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
    for run in [huge::HUGE, huge::SMALL] {
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
        assert!(
            peak_kib < 16 * 1024,
            "show --limit 5 of {run} peaked at {peak_kib} KiB"
        );
    }
}
