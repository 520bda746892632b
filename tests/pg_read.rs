//! `show` and `events` on PostgreSQL (issue 19) against a real server (`tests/pg_support`):
//! for the same database, copied from SQLite, they print what they print on SQLite (text and
//! `--json`, the database named by its URL with the password hidden) and exit the same way; a
//! password in the URL never appears.

mod console_support;
mod pg_support;
mod support;

use std::process::Output;

use countersign::pgstore::copy::{Endpoint, copy};
use pg_support::{SECRET, with_password};
use support::bin::cs;

fn text(o: &Output) -> (String, String, Option<i32>) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        o.status.code(),
    )
}

#[test]
fn pg_show_and_events_print_what_they_print_on_sqlite() {
    let d = tempfile::tempdir().unwrap();
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let (sqlite, m) = console_support::fixture(d.path(), "f", "all", &[]);
    copy(
        &Endpoint::Sqlite(sqlite.clone()),
        &Endpoint::Pg(db.pg_url()),
    )
    .expect("copy");
    let url = with_password(&db.url);
    // Named in lines by the redacted URL, in printed commands by the URL without password.
    let parsed = countersign::pgstore::PgUrl::parse(&url).unwrap();
    let (shown, named) = (
        parsed.redacted().to_string(),
        parsed.for_commands().to_string(),
    );
    let path = sqlite.to_str().unwrap();
    let mut runs: Vec<String> = Vec::new();
    for (_, s) in m["scenarios"].as_object().unwrap() {
        for r in s["runs"].as_array().unwrap() {
            runs.push(r["id"].as_str().unwrap().to_string());
        }
    }
    // A prefix, a missing run, and pages.
    let first = runs[0].clone();
    let cases: Vec<Vec<String>> = runs
        .iter()
        .flat_map(|r| {
            [
                vec!["show".into(), r.clone()],
                vec!["--json".into(), "show".into(), r.clone()],
                vec!["events".into(), r.clone()],
                vec!["--json".into(), "events".into(), r.clone()],
            ]
        })
        .chain([
            vec!["show".into(), first[..8].to_string()],
            vec!["events".into(), first.clone(), "--limit".into(), "2".into()],
            vec![
                "--json".into(),
                "events".into(),
                first.clone(),
                "--limit".into(),
                "1".into(),
                "--offset".into(),
                "1".into(),
            ],
            vec!["show".into(), first.clone(), "--limit".into(), "1".into()],
            vec!["show".into(), "ffffffffffffffffffffffffffffffff".into()],
            vec![
                "--json".into(),
                "events".into(),
                "ffffffffffffffffffffffffffffffff".into(),
            ],
        ])
        .collect();
    let mut differ = Vec::new();
    for args in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (so, se, sc) = text(&cs(path, &args));
        let (po, pe, pc) = text(&cs(&url, &args));
        for t in [&po, &pe] {
            assert!(!t.contains(SECRET), "{args:?} printed the password: {t}");
        }
        // The database is named by its path, or by its URL (password hidden, shell-quoted).
        let norm = |t: &str| {
            t.replace(path, "DB")
                .replace(&format!("'{shown}'"), "DB")
                .replace(&shown, "DB")
                .replace(&format!("'{named}'"), "DB")
                .replace(&named, "DB")
        };
        if (norm(&so), norm(&se), sc) != (norm(&po), norm(&pe), pc) {
            differ.push(format!(
                "{args:?}\n--- SQLite ({sc:?}):\n{so}{se}\n--- PostgreSQL ({pc:?}):\n{po}{pe}"
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    // Not trivially equal: the output shows the runs.
    let (out, _, code) = text(&cs(&url, &["show", &first]));
    assert_eq!(code, Some(0));
    assert!(out.contains(&first), "{out}");
}

#[test]
fn pg_watch_existing_prints_what_it_prints_on_sqlite() {
    let d = tempfile::tempdir().unwrap();
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let (sqlite, _) = console_support::fixture(d.path(), "f", "all", &[]);
    copy(
        &Endpoint::Sqlite(sqlite.clone()),
        &Endpoint::Pg(db.pg_url()),
    )
    .expect("copy");
    // What a person can decide: pending approvals of waiting runs.
    let pending: i64 = rusqlite::Connection::open(&sqlite)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM approvals a JOIN runs r ON r.id = a.run_id \
             WHERE a.status = 'pending' AND r.status = 'WAITING_FOR_APPROVAL'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(pending > 3);
    let n = pending.to_string();
    let url = with_password(&db.url);
    for json in [false, true] {
        let mut args = vec!["watch", "--existing", "--count", &n];
        if json {
            args.insert(0, "--json");
        }
        let s = text(&cs(sqlite.to_str().unwrap(), &args));
        let p = text(&cs(&url, &args));
        assert_eq!(s, p, "watch {args:?}");
        assert_eq!(p.0.lines().count() as i64, pending, "{}", p.0);
        assert!(!p.0.contains(SECRET) && !p.1.contains(SECRET));
    }
}

#[test]
fn pg_watch_announces_an_approval_once_its_request_is_chained() {
    let d = tempfile::tempdir().unwrap();
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let (sqlite, m) = console_support::fixture(d.path(), "f", "waiting", &[]);
    copy(&Endpoint::Sqlite(sqlite), &Endpoint::Pg(db.pg_url())).expect("copy");
    let mut child = support::bin::on(&db.url)
        .args(["watch", "--count", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    // A new approval of the waiting run, committed with its request event in the inbox.
    let old = console_support::approval_of(&m, "waiting");
    let mut c = db.client();
    c.execute(
        "INSERT INTO approvals (ord, id, run_id, step_id, kind, capability_json, presentation_json, \
         request_json, hash, status, created_at, expires_at) \
         SELECT (SELECT max(ord) + 1 FROM approvals), 'newapproval000000000000000000001', run_id, \
         step_id, kind, capability_json, presentation_json, request_json, hash, 'pending', \
         created_at, expires_at FROM approvals WHERE id = $1",
        &[&old],
    )
    .unwrap();
    let (run, step): (String, String) = {
        let r = c
            .query_one(
                "SELECT run_id, step_id FROM approvals WHERE id = $1",
                &[&old],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    let mut store = countersign::pgstore::PgStore::open_existing(&db.pg_url()).unwrap();
    store
        .enqueue_event(
            &run,
            &step,
            "2026-01-01T00:30:00Z",
            "approval.requested",
            r#"{"approval_id":"newapproval000000000000000000001","reason":"again"}"#,
        )
        .unwrap();
    // Committed but not chained: not announced yet.
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert!(
        child.try_wait().unwrap().is_none(),
        "announced before it was chained"
    );
    store.sequence_all().unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
        panic!("the watch did not announce the chained approval");
    }
    let o = child.wait_with_output().unwrap();
    let (out, err, code) = text(&o);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("newapproval000000000000000000001"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
}

/// A `watch` already running on a database announces the pending approvals a `copy` brings
/// into it at the copy's commit, as it announces those the runtime writes (found from outside:
/// a copy sent no notification, so a watch learnt of them only at its 30 s read, and a paging
/// tool's 12 s `watch` announced none).
#[test]
fn pg_watch_announces_the_pending_approvals_a_copy_brings() {
    let d = tempfile::tempdir().unwrap();
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    countersign::pgstore::PgStore::open(&db.pg_url()).expect("migrate");
    let (sqlite, _) = console_support::fixture(d.path(), "q", "queue", &[]);
    let pending: i64 = rusqlite::Connection::open(&sqlite)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM approvals WHERE status = 'pending'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(pending >= 2, "the queue scenario has pending approvals");
    let mut child = support::bin::on(&db.url)
        .args(["watch", "--json", "--count", &pending.to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The watch has read where the chain stood and waits: after its listening connection ran
    // LISTEN, its reading connection committed a read (of the approvals after that point) and
    // is idle.
    let mut c = db.client();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let waiting: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity r, pg_stat_activity l \
                 WHERE r.datname = current_database() AND l.datname = current_database() \
                 AND l.state = 'idle' AND l.query = 'LISTEN countersign_events' \
                 AND r.state = 'idle' AND r.query = 'COMMIT' AND r.query_start > l.query_start",
                &[],
            )
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        if std::time::Instant::now() >= until {
            let rows = c
                .query(
                    "SELECT state, left(query, 120) FROM pg_stat_activity WHERE datname = current_database()",
                    &[],
                )
                .unwrap();
            let seen: Vec<(Option<String>, Option<String>)> =
                rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            // Not left running after the test (it would wait for its approvals for good).
            let _ = child.kill();
            panic!("the watch never started: {seen:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    copy(&Endpoint::Sqlite(sqlite), &Endpoint::Pg(db.pg_url())).expect("copy");
    // Without a notification the watch reads again only every 30 s; the copy's notification
    // wakes it at once. 10 s tells the two apart with room for a loaded machine.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
        panic!("the watch did not announce the approvals the copy brought");
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let lines = String::from_utf8(o.stdout).unwrap();
    assert_eq!(lines.lines().count() as i64, pending, "{lines}");
}
