//! Real races (spec 4.4): several threads with their own connections, and several OS
//! processes (this test binary re-run as children), decide one approval at once: exactly one
//! decision lands and every other decider learns who decided, how and when.

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
