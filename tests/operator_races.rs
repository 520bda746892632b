//! Real races (spec 4.4): several threads with their own connections, and several OS
//! processes (this test binary re-run as children), decide one approval at once: exactly one
//! decision lands and every other decider learns who decided, how and when. On PostgreSQL (a
//! real server, `tests/pg_support`), processes decide and cancel one waiting run at once.

#[cfg(feature = "postgres")]
mod pg_support;
#[cfg(feature = "postgres")]
mod reliability_support;
mod support;

use countersign::runtime::operator::{OperatorError, approve, reject};
use countersign::runtime::store::Store;
use countersign::runtime::types::{ApprovalStatus, Timestamp};
use support::runs;
use support::{assert_verifies, tempdir};

const CHILD: &str = "COUNTERSIGN_DECIDE_CHILD";

fn t0() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00Z").unwrap()
}

fn later(secs: i64) -> Timestamp {
    t0().add_nanos(secs * 1_000_000_000)
}

/// The body of a child process deciding an approval (does nothing in a normal run).
#[test]
fn child_entry() {
    let Ok(who) = std::env::var(CHILD) else {
        return;
    };
    let db = std::env::var("COUNTERSIGN_DECIDE_DB").unwrap();
    let store = Store::open_existing(&db, false).unwrap();
    // Wait for the start signal so the children race.
    let go = format!("{db}.go");
    while !std::path::Path::new(&go).exists() {
        std::thread::yield_now();
    }
    let res = if who.ends_with("-reject") {
        reject(&store, "r", "r-a1", &who, "no", Timestamp::now())
    } else {
        approve(&store, "r", "r-a1", &who, "yes", Timestamp::now())
    };
    match res {
        Ok(_) => println!("\nRESULT landed"),
        Err(OperatorError::NotPending {
            decided_by, status, ..
        }) => println!("RESULT not-pending {decided_by} {status}"),
        Err(OperatorError::RunNotWaiting { status, .. }) => println!("RESULT not-waiting {status}"),
        Err(e) => println!("RESULT other {e}"),
    }
}

#[test]
fn approval_concurrent_decisions_in_processes_land_once() {
    let dir = tempdir();
    let db = dir.path().join("race.db");
    {
        let store = Store::open(&db).unwrap();
        runs::waiting_run(&store, "r", Timestamp::now());
    }
    let names = ["p0", "p1", "p2", "p3-reject", "p4"];
    let kids: Vec<_> = names
        .iter()
        .map(|n| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
                .env(CHILD, n)
                .env("COUNTERSIGN_DECIDE_DB", &db)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::fs::write(format!("{}.go", db.display()), b"").unwrap();
    let outs: Vec<String> = kids
        .into_iter()
        .map(|k| {
            let o = k.wait_with_output().unwrap();
            assert!(o.status.success());
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            // The harness prints "test child_entry ... " on the same line.
            out.lines()
                .find_map(|l| l.find("RESULT ").map(|i| l[i..].to_string()))
                .unwrap_or_else(|| "RESULT none".into())
        })
        .collect();
    eprintln!("outcomes: {outs:?}");
    let store = Store::open_existing(&db, true).unwrap();
    let a = store.get_approval("r", "r-a1").unwrap();
    let landed: Vec<_> = outs
        .iter()
        .enumerate()
        .filter(|(_, o)| *o == "RESULT landed")
        .collect();
    assert_eq!(landed.len(), 1, "{outs:?}");
    let winner = names[landed[0].0];
    assert_eq!(a.decided_by, winner);
    for (i, o) in outs.iter().enumerate() {
        if i == landed[0].0 {
            continue;
        }
        // Losers learn who decided and how (or, after a reject, that the run ended).
        let ok = *o == format!("RESULT not-pending {winner} {}", a.status)
            || *o == "RESULT not-waiting CANCELLED";
        assert!(ok, "{o} (winner {winner}, {})", a.status);
    }
    let decided = store
        .list_events_after("r", 0, 100)
        .unwrap()
        .iter()
        .filter(|e| e.kind == "approval.decided")
        .count();
    assert_eq!(decided, 1);
    drop(store);
    assert_verifies(&db);
}

#[test]
fn approval_concurrent_decisions_in_threads_land_once() {
    let dir = tempdir();
    let db = dir.path().join("threads.db");
    let now = later(1);
    {
        let store = Store::open(&db).unwrap();
        runs::waiting_run(&store, "r", t0());
    }
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let db = db.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let store = Store::open_existing(&db, false).unwrap();
                barrier.wait();
                approve(&store, "r", "r-a1", &format!("t{i}"), "", now)
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1);
    let by = winners[0].approval.decided_by.clone();
    for r in &results {
        if let Err(e) = r {
            assert!(
                matches!(e, OperatorError::NotPending { decided_by, decided_at, status: ApprovalStatus::Approved, .. }
                    if *decided_by == by && *decided_at == now),
                "{e}"
            );
        }
    }
}

/// The body of a child process deciding or cancelling a run on PostgreSQL (does nothing in a
/// normal run): `COUNTERSIGN_PG_RACE_CHILD` is its name, ending `-reject`, `-cancel` or
/// neither (approve).
#[cfg(feature = "postgres")]
#[test]
fn pg_child_entry() {
    use countersign::pgstore::{PgStore, PgUrl};
    use countersign::runtime::operator::cancel;
    let Ok(who) = std::env::var("COUNTERSIGN_PG_RACE_CHILD") else {
        return;
    };
    let var = |k: &str| std::env::var(k).unwrap();
    let url = PgUrl::parse(&var("COUNTERSIGN_PG_RACE_URL")).unwrap();
    let (run, approval, go) = (
        var("COUNTERSIGN_PG_RACE_RUN"),
        var("COUNTERSIGN_PG_RACE_APPROVAL"),
        var("COUNTERSIGN_PG_RACE_GO"),
    );
    let store = PgStore::open_existing(&url).unwrap();
    while !std::path::Path::new(&go).exists() {
        std::thread::yield_now();
    }
    let now = Timestamp::now();
    let res = if who.ends_with("-cancel") {
        cancel(&store, run.as_str(), &who, "withdrawn", now).map(|_| ())
    } else if who.ends_with("-reject") {
        reject(&store, run.as_str(), approval.as_str(), &who, "no", now).map(|_| ())
    } else {
        approve(&store, run.as_str(), approval.as_str(), &who, "yes", now).map(|_| ())
    };
    match res {
        Ok(()) => println!("\nRESULT landed"),
        Err(OperatorError::NotPending {
            decided_by, status, ..
        }) => println!("\nRESULT not-pending {decided_by} {status}"),
        Err(OperatorError::RunNotWaiting { status, .. }) => {
            println!("\nRESULT not-waiting {status}")
        }
        Err(OperatorError::RunFinished { status, .. }) => println!("\nRESULT finished {status}"),
        Err(e) => println!("\nRESULT other {e}"),
    }
}

/// Four reviewers (one rejecting) and an operator cancelling, each its own OS process with its
/// own connection, act on one waiting run on PostgreSQL at once: at most one decision lands
/// (none when the cancel came first), every loser is told the state it lost to (who decided
/// and how, or that the run was cancelled), the rows agree with the winners, one event per
/// landed action is recorded, and the chain verifies on the URL and, copied back, by the
/// store's checks and agentrt's verifier. Repeated over a few rounds so that both orders
/// (a decision first, the cancel first) are met.
#[cfg(feature = "postgres")]
#[test]
fn pg_decisions_and_a_cancel_in_processes_have_single_winners() {
    use countersign::pgstore::PgStore;
    use countersign::pgstore::copy::{Endpoint, copy};
    use countersign::runtime::store::RunStore;
    use countersign::runtime::types::RunStatus;
    use reliability_support::invariants;
    let rounds = std::env::var("COUNTERSIGN_PG_RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4u32);
    let mut seen = std::collections::BTreeSet::new();
    for round in 0..rounds {
        let Some(db) = pg_support::fresh_db() else {
            return;
        };
        let dir = tempdir();
        let lite = dir.path().join("waiting.db");
        let man = support::fixture(&lite, &["--scenario", "waiting"]);
        let a = &man["approvals"][0];
        let (run, approval) = (
            a["run_id"].as_str().unwrap().to_string(),
            a["id"].as_str().unwrap().to_string(),
        );
        copy(&Endpoint::Sqlite(lite), &Endpoint::Pg(db.pg_url())).expect("copy");
        let go = dir.path().join("go");
        let names = ["p0", "p1-reject", "p2", "p3-cancel", "p4"];
        let kids: Vec<_> = names
            .iter()
            .map(|n| {
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args([
                        "--exact",
                        "pg_child_entry",
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env("COUNTERSIGN_PG_RACE_CHILD", n)
                    .env("COUNTERSIGN_PG_RACE_URL", &db.url)
                    .env("COUNTERSIGN_PG_RACE_RUN", &run)
                    .env("COUNTERSIGN_PG_RACE_APPROVAL", &approval)
                    .env("COUNTERSIGN_PG_RACE_GO", &go)
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        // Let the children connect, then start them together.
        std::thread::sleep(std::time::Duration::from_millis(300));
        std::fs::write(&go, b"").unwrap();
        let outs: Vec<String> = kids
            .into_iter()
            .map(|k| {
                let o = k.wait_with_output().unwrap();
                assert!(o.status.success());
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .find_map(|l| l.find("RESULT ").map(|i| l[i..].to_string()))
                    .unwrap_or_else(|| "RESULT none".into())
            })
            .collect();
        eprintln!("round {round}: {outs:?}");
        let store = PgStore::open_existing(&db.pg_url()).unwrap();
        let a = store
            .get_approval(run.as_bytes(), approval.as_bytes())
            .unwrap();
        let r = store.get_run(run.as_bytes()).unwrap();
        let landed: Vec<&str> = names
            .iter()
            .zip(&outs)
            .filter(|(_, o)| *o == "RESULT landed")
            .map(|(n, _)| *n)
            .collect();
        let decided: Vec<&str> = landed
            .iter()
            .copied()
            .filter(|n| !n.ends_with("-cancel"))
            .collect();
        let cancelled = landed.contains(&"p3-cancel");
        assert!(decided.len() <= 1, "two decisions landed: {outs:?}");
        assert!(!decided.is_empty() || cancelled, "nothing landed: {outs:?}");
        match decided.first() {
            Some(w) => {
                assert_eq!(a.decided_by, *w, "{outs:?}");
                let want = if w.ends_with("-reject") {
                    ApprovalStatus::Rejected
                } else {
                    ApprovalStatus::Approved
                };
                assert_eq!(a.status, want, "{outs:?}");
            }
            None => assert_eq!(a.status, ApprovalStatus::Pending, "{outs:?}"),
        }
        assert_eq!(r.status, RunStatus::Cancelled, "{outs:?}");
        let reason = if cancelled {
            "operator_cancelled"
        } else {
            "approval_rejected"
        };
        assert_eq!(r.reason, reason, "{outs:?}");
        for (n, o) in names.iter().zip(&outs) {
            if landed.contains(n) {
                continue;
            }
            let ok = match decided.first() {
                Some(w) => *o == format!("RESULT not-pending {w} {}", a.status),
                None => false,
            } || *o == "RESULT not-waiting CANCELLED"
                || *o == "RESULT finished CANCELLED";
            assert!(ok, "{n}: {o} (landed {landed:?}, approval {})", a.status);
        }
        drop(store);
        // The operator's functions leave chaining to a sequencer: this test is it.
        PgStore::open_existing(&db.pg_url())
            .unwrap()
            .sequence_all()
            .unwrap();
        let back = match invariants::pg_checked_copy(&db.url, dir.path()) {
            Ok(b) => b,
            Err(v) => panic!("{v:?}"),
        };
        let c = rusqlite::Connection::open(&back).unwrap();
        let count = |kind: &str| -> i64 {
            c.query_row(
                "SELECT count(*) FROM events WHERE run_id = ?1 AND type = ?2",
                [run.as_str(), kind],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(count("approval.decided"), decided.len() as i64, "{outs:?}");
        assert_eq!(count("run.finished"), 1, "{outs:?}");
        let mut v = invariants::store_holds(&back);
        v.extend(invariants::python_verifier(&back));
        assert_eq!(v, Vec::<String>::new());
        seen.insert(if cancelled && decided.is_empty() {
            "the cancel first"
        } else {
            "a decision first"
        });
    }
    eprintln!("orders met: {seen:?}");
}
