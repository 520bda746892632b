//! Crash injection (issue 9 part 1). Each trial starts a child process (this test binary,
//! entering `crash_child`) that drives the example consumer's scenarios through the runtime
//! and acts as the operator (approves, rejects, cancels, resumes), and kills it with SIGKILL
//! after a seeded random delay: during a decision, a tool call, a commit or a lease renewal,
//! wherever it happens to be. A fresh child then recovers: it resumes every run the dead one
//! left RUNNING or INTERRUPTED, and every approved run it never resumed. After every trial the
//! invariants of `reliability_support::invariants` must hold: integrity_check, the event
//! chain, every row decodes, no effect twice in the ledger unless an operator approved its
//! re-run, every run finished or waiting for a person with a reason.
//!
//! `cargo test --test reliability_crash` runs a short version (a few trials);
//! `COUNTERSIGN_CRASH_TRIALS=500 COUNTERSIGN_CRASH_SEED=1 cargo test --test reliability_crash
//! -- --nocapture` runs the long one. Every failure prints its trial and seed; rerun one trial
//! with `COUNTERSIGN_CRASH_SEED=<seed> COUNTERSIGN_CRASH_TRIALS=1`.

#[cfg(feature = "postgres")]
mod pg_support;
mod reliability_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use countersign::runtime::types::{ApprovalStatus, RunStatus};
use reliability_support::invariants;
use reliability_support::world::{self, RunDbAt, World};

const CHILD_ENV: &str = "COUNTERSIGN_CRASH_CHILD";

/// How long the work child runs at most when nobody kills it (it stops by itself after its
/// scenarios); the kill lands uniformly in [0, this).
const KILL_WINDOW_MS: u64 = 1800;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Starts this test binary as a child in `mode` (`work` or `recover`) on `run_db`, or on the
/// PostgreSQL database `pg_url` when given.
fn child(
    mode: &str,
    run_db: &Path,
    pg_url: Option<&str>,
    backend_db: &Path,
    seed: u64,
) -> std::process::Child {
    let mut c = Command::new(std::env::current_exe().expect("test binary"));
    if let Some(url) = pg_url {
        c.env("COUNTERSIGN_CRASH_PG_URL", url);
    }
    c.args([
        "--exact",
        "crash_child",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, mode)
    .env("COUNTERSIGN_CRASH_RUN_DB", run_db)
    .env("COUNTERSIGN_CRASH_BACKEND_DB", backend_db)
    .env("COUNTERSIGN_CRASH_CHILD_SEED", seed.to_string())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn child")
}

/// What one trial did and found.
#[derive(Debug, Default)]
pub struct Trial {
    pub seed: u64,
    pub killed_after_ms: u64,
    /// The work child ended before the kill.
    pub finished_first: bool,
    pub violations: Vec<String>,
    /// Runs the recovery took over from the dead process (`lease.taken_over` events).
    pub takeovers: u64,
    /// Interrupted side effects that waited for an operator.
    pub interrupted: u64,
}

/// One trial in `dir` (on the SQLite file `run.db` there, or on the PostgreSQL database
/// `pg_url`): work, SIGKILL at a seeded moment, recover, check. On PostgreSQL the checks run
/// on the URL (`countersign verify` once the inbox is drained) and on a copy back to SQLite,
/// where the SQLite trial's checks run.
fn trial(dir: &Path, pg_url: Option<&str>, seed: u64, python: bool) -> Trial {
    #[cfg_attr(not(feature = "postgres"), allow(unused_mut))]
    let mut run_db = dir.join("run.db");
    let backend_db = dir.join("backend.db");
    countersign::consumer::backend::Backend::create_new(&backend_db).expect("backend");
    let mut rng = StdRng::seed_from_u64(seed);
    let delay = rng.random_range(0..KILL_WINDOW_MS);
    let mut t = Trial {
        seed,
        killed_after_ms: delay,
        ..Trial::default()
    };
    #[cfg(feature = "postgres")]
    if let Some(url) = pg_url {
        let url = countersign::pgstore::PgUrl::parse(url).expect("test URL");
        drop(countersign::pgstore::PgStore::open(&url).expect("create the schema"));
    }
    let mut work = child("work", &run_db, pg_url, &backend_db, seed);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(delay) {
        if let Ok(Some(_)) = work.try_wait() {
            t.finished_first = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = work.kill(); // SIGKILL on Unix
    let status = work.wait().expect("reap work child");
    if t.finished_first && !status.success() {
        t.violations.push(format!(
            "the work child failed before the kill: {}",
            child_stderr(work)
        ));
    }
    if pg_url.is_none() && !run_db.exists() {
        return t; // killed before it created anything: nothing to recover or check
    }
    let out = child("recover", &run_db, pg_url, &backend_db, seed)
        .wait_with_output()
        .expect("recover child");
    if !out.status.success() {
        t.violations.push(format!(
            "recovery failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    #[cfg(feature = "postgres")]
    if let Some(url) = pg_url {
        match invariants::pg_checked_copy(url, dir) {
            Ok(back) => run_db = back,
            Err(v) => {
                t.violations.extend(v);
                return t;
            }
        }
    }
    t.violations
        .extend(invariants::after_trial(&run_db, Some(&backend_db), python));
    t.takeovers = count(
        &run_db,
        "SELECT COUNT(*) FROM events WHERE type = 'lease.taken_over'",
    );
    t.interrupted = count(
        &run_db,
        "SELECT COUNT(*) FROM approvals WHERE kind = 'interrupted_side_effect'",
    );
    t
}

fn count(db: &Path, sql: &str) -> u64 {
    rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|c| c.query_row(sql, [], |r| r.get::<_, i64>(0)))
        .unwrap_or(0) as u64
}

fn child_stderr(c: std::process::Child) -> String {
    use std::io::Read;
    let mut s = String::new();
    if let Some(mut e) = c.stderr {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// Totals over a campaign.
#[derive(Debug, Default)]
struct Totals {
    finished_first: u64,
    takeovers: u64,
    interrupted: u64,
}

/// Runs `trials` trials from `seed` (trial i uses seed + i); returns the failed ones. With
/// `pg`, each trial runs on a fresh PostgreSQL database (`None`: no server, see pg_support).
fn campaign(trials: u64, seed: u64, pg: bool) -> Option<(Vec<Trial>, Totals)> {
    let mut failed = Vec::new();
    let mut totals = Totals::default();
    for i in 0..trials {
        let dir = support::tempdir();
        #[cfg(feature = "postgres")]
        let db = if pg {
            Some(pg_support::fresh_db()?)
        } else {
            None
        };
        #[cfg(feature = "postgres")]
        let url = db.as_ref().map(|d| d.url.as_str());
        #[cfg(not(feature = "postgres"))]
        let url = {
            assert!(!pg, "built without the postgres feature");
            None
        };
        let t = trial(dir.path(), url, seed + i, i % 10 == 0);
        totals.finished_first += t.finished_first as u64;
        totals.takeovers += t.takeovers;
        totals.interrupted += t.interrupted;
        if !t.violations.is_empty() {
            eprintln!(
                "crash trial {i} seed {} (killed after {} ms): {:#?}",
                t.seed, t.killed_after_ms, t.violations
            );
            failed.push(t);
        }
    }
    Some((failed, totals))
}

#[test]
fn crash_injection_keeps_every_invariant() {
    let trials = env_u64("COUNTERSIGN_CRASH_TRIALS", 4);
    let seed = env_u64("COUNTERSIGN_CRASH_SEED", 20261130);
    let started = Instant::now();
    let (failed, totals) = campaign(trials, seed, false).expect("SQLite needs no server");
    report(trials, seed, started, &failed, &totals);
}

/// The same trials on PostgreSQL: a child driving runs on one PostgreSQL database is SIGKILLed
/// at a seeded moment, a fresh one resumes what it left, and the invariants hold on the URL
/// and on a copy back to SQLite. `COUNTERSIGN_CRASH_PG_TRIALS` sets how many (default 3).
#[cfg(feature = "postgres")]
#[test]
fn crash_injection_on_postgres_keeps_every_invariant() {
    let trials = env_u64("COUNTERSIGN_CRASH_PG_TRIALS", 3);
    let seed = env_u64("COUNTERSIGN_CRASH_SEED", 20261130);
    let started = Instant::now();
    let Some((failed, totals)) = campaign(trials, seed, true) else {
        return;
    };
    report(trials, seed, started, &failed, &totals);
}

fn report(trials: u64, seed: u64, started: Instant, failed: &[Trial], totals: &Totals) {
    eprintln!(
        "crash injection: {trials} trials from seed {seed}, {} killed mid-work, {} runs taken over, {} interrupted side effects, {} failed, {:?}",
        trials - totals.finished_first,
        totals.takeovers,
        totals.interrupted,
        failed.len(),
        started.elapsed()
    );
    assert!(
        failed.is_empty(),
        "{} of {trials} trials broke an invariant (seeds {:?})",
        failed.len(),
        failed.iter().map(|t| t.seed).collect::<Vec<_>>()
    );
}

// ---- the child processes ----

/// Entry point of the harness's child processes (not a test on its own: it is ignored, and
/// does nothing unless the harness started it with `COUNTERSIGN_CRASH_CHILD` set).
#[test]
#[ignore = "entry point of the crash harness's child processes"]
fn crash_child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let run_db = match std::env::var("COUNTERSIGN_CRASH_PG_URL") {
        #[cfg(feature = "postgres")]
        Ok(url) => RunDbAt::Pg(url),
        _ => RunDbAt::Sqlite(PathBuf::from(
            std::env::var("COUNTERSIGN_CRASH_RUN_DB").unwrap(),
        )),
    };
    let backend_db = PathBuf::from(std::env::var("COUNTERSIGN_CRASH_BACKEND_DB").unwrap());
    let seed = env_u64("COUNTERSIGN_CRASH_CHILD_SEED", 0);
    let rt = world::runtime();
    // Opened and dropped outside the runtime: PostgreSQL's synchronous client connects and
    // closes by blocking on a runtime of its own.
    let result = match mode.as_str() {
        "work" => World::open_at(
            &run_db,
            &backend_db,
            &format!("crash-work-{seed}"),
            world::LEASE_TTL,
        )
        .and_then(|w| rt.block_on(work(&w, seed))),
        // Nobody competes with the recovery: agentrt's default 30 s lease, so a slow machine
        // cannot make it lose its own lease.
        "recover" => World::open_at(
            &run_db,
            &backend_db,
            &format!("crash-recover-{seed}"),
            Duration::from_secs(30),
        )
        .and_then(|w| rt.block_on(recover(&w, seed))),
        other => Err(format!("unknown child mode {other}")),
    };
    if let Err(e) = result {
        panic!("{mode} child: {e}");
    }
}

/// Drives a seeded shuffle of every scenario, deciding each pause at random the way an
/// operator would, until killed.
async fn work(w: &World, seed: u64) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    // Every scenario twice, shuffled: about as long as the kill window when nobody kills it.
    let mut names = world::scenario_names();
    names.extend(world::scenario_names());
    names.shuffle(&mut rng);
    for (i, name) in names.iter().enumerate() {
        let id = format!("run-{seed}-{i:02}-{name}");
        w.reset_orders()?;
        let run = match w.start(&id, name).await {
            Ok(run) => run,
            // A 400 ms lease can lapse on a starved machine; the loop then stops, as it must,
            // and the recovery takes the run over like any other.
            Err(e) if e.contains("run lease lost") => continue,
            Err(e) => return Err(e),
        };
        if run.status == RunStatus::WaitingForApproval {
            decide(w, &id, &mut rng).await?;
        }
    }
    Ok(())
}

/// Approves (and resumes), rejects or cancels a waiting run, or leaves it waiting.
async fn decide(w: &World, id: &str, rng: &mut StdRng) -> Result<(), String> {
    let pending = w
        .list_approvals(id)?
        .into_iter()
        .rfind(|a| a.status == ApprovalStatus::Pending);
    let Some(a) = pending else { return Ok(()) };
    match rng.random_range(0..10) {
        0..=5 => {
            w.decide(id, &a.id, true, "crash-op", "ok")
                .map_err(|e| e.to_string())?;
            match w.driver.resume(id).await {
                Ok(_) => {}
                Err(e) if e.is_lease_lost() => {} // as in `work`: recovery takes it over
                Err(e) => return Err(e.to_string()),
            }
        }
        6 => {
            w.decide(id, &a.id, false, "crash-op", "no")
                .map_err(|e| e.to_string())?;
        }
        7 => {
            w.cancel(id, "crash-op", "withdrawn")
                .map_err(|e| e.to_string())?;
        }
        _ => {}
    }
    Ok(())
}

/// A fresh process after the crash: resumes what the dead one left behind (runs RUNNING or
/// INTERRUPTED once its lease lapsed, approved runs it never resumed), and, seeded, approves
/// some interrupted side effects for a re-run (which the ledger then allows once).
async fn recover(w: &World, seed: u64) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xdead);
    for _pass in 0..4 {
        let mut changed = false;
        let runs = w.runs(1000)?;
        for run in runs {
            let resume = match run.status {
                RunStatus::Running | RunStatus::Interrupted => true,
                RunStatus::WaitingForApproval => {
                    let latest = w.list_approvals(&run.id)?.pop();
                    match latest {
                        Some(a) if a.status == ApprovalStatus::Approved => true,
                        Some(a)
                            if a.status == ApprovalStatus::Pending
                                && a.kind == "interrupted_side_effect"
                                && rng.random_bool(0.5) =>
                        {
                            w.decide(&run.id, &a.id, true, "crash-recover-op", "re-run it")
                                .map_err(|e| e.to_string())?;
                            true
                        }
                        _ => false,
                    }
                }
                _ => false,
            };
            if resume {
                w.wait_lease_lapsed(&run.id);
                w.driver
                    .resume(&run.id)
                    .await
                    .map_err(|e| format!("resume {}: {e}", run.id))?;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    Ok(())
}

// ---- the checkers on fixture databases (they must be able to fail) ----

#[test]
fn crash_checkers_accept_a_settled_fixture_and_name_a_run_left_running() {
    let dir = support::tempdir();
    let db = dir.path().join("f.db");
    let m = support::fixture(
        &db,
        &[
            "--scenario",
            "completed,waiting,rejected,cancelled,failed,interrupted,running",
        ],
    );
    assert_eq!(invariants::store_holds(&db), Vec::<String>::new());
    let running = support::s(&m, "/scenarios/running/runs/0/id");
    assert_eq!(
        invariants::runs_settled(&db),
        vec![format!(
            "run {running} is RUNNING: neither finished nor waiting for a person"
        )]
    );
    assert_eq!(invariants::python_verifier(&db), Vec::<String>::new());
}

#[test]
fn crash_checkers_name_an_approved_run_never_resumed() {
    let dir = support::tempdir();
    let db = dir.path().join("f.db");
    let m = support::fixture(&db, &["--scenario", "approved"]);
    let id = support::s(&m, "/scenarios/approved/runs/0/id");
    assert_eq!(
        invariants::runs_settled(&db),
        vec![format!(
            "run {id} is WAITING_FOR_APPROVAL with no pending approval (approved but never resumed?)"
        )]
    );
}

#[test]
fn crash_checkers_catch_a_broken_chain_and_a_damaged_row() {
    let dir = support::tempdir();
    let db = dir.path().join("f.db");
    support::fixture(
        &db,
        &["--scenario", "completed,damaged", "--tamper", "chain"],
    );
    let v = invariants::store_holds(&db);
    assert!(
        v.iter()
            .any(|l| l.starts_with("event chain breaks at seq ")),
        "{v:#?}"
    );
    assert!(
        v.iter().any(|l| l.contains("does not decode: decision: ")),
        "{v:#?}"
    );
    assert!(!invariants::python_verifier(&db).is_empty());
}

#[test]
fn crash_checkers_catch_an_effect_run_twice_unless_a_rerun_was_approved() {
    let dir = support::tempdir();
    let run_db = dir.path().join("run.db");
    let backend_db = dir.path().join("backend.db");
    let m = support::fixture(&run_db, &["--scenario", "interrupted"]);
    let run = support::s(&m, "/scenarios/interrupted/runs/0/id").to_string();
    let backend = countersign::consumer::backend::Backend::create_new(&backend_db).unwrap();
    drop(backend);
    let raw = reliability_support::Raw::open(&run_db);
    let step = raw.text(&format!(
        "SELECT step_id FROM approvals WHERE run_id = '{run}' AND kind = 'interrupted_side_effect'"
    ));
    drop(raw);
    let ledger = reliability_support::Raw::open(&backend_db);
    for k in ["k1", "k2"] {
        ledger.exec(&format!(
            "INSERT INTO call_keys VALUES ('{k}', 's', '{step}', 'issue_refund', 'h', '{{}}'); \
             INSERT INTO effects (session_id, call_key, tool, effect_class, order_id, amount_cents, detail) \
             VALUES ('s', '{k}', 'issue_refund', 'irreversible', 'ord_1004', 100, 'refund');"
        ));
    }
    drop(ledger);
    assert_eq!(
        invariants::ledger_once(&backend_db, &run_db),
        vec![format!(
            "issue_refund ran 2 times for step {step} (session s) with 0 approved re-run(s)"
        )]
    );
    let raw = reliability_support::Raw::open(&run_db);
    raw.exec(&format!(
        "UPDATE approvals SET status = 'approved' WHERE run_id = '{run}' AND kind = 'interrupted_side_effect'"
    ));
    drop(raw);
    assert_eq!(
        invariants::ledger_once(&backend_db, &run_db),
        Vec::<String>::new()
    );
}
