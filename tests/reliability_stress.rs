//! Concurrency stress (issue 9 part 2): several processes work one run database at once:
//! drivers start the example consumer's scenarios, reviewers approve, reject and resume
//! pending approvals (racing each other), operators cancel runs, consoles read. Afterwards:
//! every approval and every cancel had a single winner and the database agrees with it; no
//! console ever saw a run state without its events; integrity, the chain, every row decodes,
//! and no effect ran twice.
//!
//! `cargo test --test reliability_stress` runs a short version (4 processes, 3 s);
//! `COUNTERSIGN_STRESS_SECS=60 COUNTERSIGN_STRESS_PROCS=8 cargo test --test reliability_stress
//! -- --nocapture` runs the long one (the processes stop by themselves at the deadline).

#[cfg(feature = "postgres")]
mod pg_support;
mod reliability_support;
mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

use countersign::runtime::operator::OperatorError;
use countersign::runtime::store::Store;
use countersign::runtime::types::{ApprovalStatus, RunStatus, Timestamp};
use reliability_support::invariants;
use reliability_support::world::{self, World};

const CHILD_ENV: &str = "COUNTERSIGN_STRESS_CHILD";
const ROLES: [&str; 4] = ["driver", "reviewer", "operator", "console"];
/// On PostgreSQL: two reviewers racing in every five processes, and a console's check (the
/// console itself does not read PostgreSQL yet).
const PG_ROLES: [&str; 5] = ["driver", "reviewer", "reviewer", "operator", "console"];

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the parent reads back from the processes' logs.
#[derive(Debug, Default)]
struct Outcome {
    /// approval id → (process, "approved"/"rejected") for every decision that succeeded.
    decided: BTreeMap<String, Vec<(String, String)>>,
    /// run id → processes whose cancel succeeded.
    cancelled: BTreeMap<String, Vec<String>>,
    /// Lines a process flagged as violations.
    violations: Vec<String>,
    /// Counts of operations and of expected losing races, by kind.
    counts: BTreeMap<String, u64>,
}

fn read_logs(dir: &Path) -> Outcome {
    let mut o = Outcome::default();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("log") {
            continue;
        }
        let who = path.file_stem().unwrap().to_string_lossy().into_owned();
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let parts: Vec<&str> = line.splitn(3, ' ').collect();
            match parts.as_slice() {
                ["decided", id, how] => o
                    .decided
                    .entry(id.to_string())
                    .or_default()
                    .push((who.clone(), how.to_string())),
                ["cancelled", run, _] | ["cancelled", run] => o
                    .cancelled
                    .entry(run.to_string())
                    .or_default()
                    .push(who.clone()),
                ["violation", ..] => o.violations.push(format!("{who}: {line}")),
                ["count", kind, n] => {
                    *o.counts.entry(kind.to_string()).or_default() += n.parse::<u64>().unwrap_or(0)
                }
                _ => o
                    .violations
                    .push(format!("{who}: unreadable log line {line:?}")),
            }
        }
    }
    o
}

/// Checks the single-winner outcomes against the database.
fn check_winners(db: &Path, o: &Outcome) -> Vec<String> {
    let store = Store::open_existing(db, true).unwrap();
    let mut v = Vec::new();
    for (approval, winners) in &o.decided {
        if winners.len() != 1 {
            v.push(format!("approval {approval} was decided by {winners:?}"));
            continue;
        }
        let (_, how) = &winners[0];
        let status: String = store_text(
            db,
            &format!("SELECT status FROM approvals WHERE id = '{approval}'"),
        );
        if &status != how {
            v.push(format!(
                "approval {approval}: {how} won but the row says {status}"
            ));
        }
    }
    for (run, winners) in &o.cancelled {
        if winners.len() != 1 {
            v.push(format!("run {run} was cancelled by {winners:?}"));
        }
        match store.get_run(run) {
            Ok(r) if r.status == RunStatus::Cancelled && r.reason == "operator_cancelled" => {}
            Ok(r) => v.push(format!(
                "run {run} was cancelled but is {} {}",
                r.status, r.reason
            )),
            Err(e) => v.push(format!("run {run}: {e}")),
        }
    }
    v
}

fn store_text(db: &Path, sql: &str) -> String {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap_or_default()
}

/// Runs the processes on the SQLite file `run.db` in a fresh directory, or (`pg_url`) on that
/// PostgreSQL database; then checks the outcome. On PostgreSQL the processes form two groups
/// whose lease owners name two hosts (`host-a.…`, `host-b.…`), there is no console (it does
/// not read PostgreSQL yet), and the checks run on the URL (`countersign verify`, once the
/// inbox is drained) and on a copy back to SQLite (the same checks as the SQLite trial, the
/// Python verifier included).
fn stress(procs: u64, secs: u64, seed: u64, pg_url: Option<&str>) -> (Outcome, Vec<String>) {
    let dir = support::tempdir();
    if std::env::var_os("COUNTERSIGN_STRESS_KEEP").is_some() {
        eprintln!("stress: keeping {}", dir.path().display());
    }
    #[cfg_attr(not(feature = "postgres"), allow(unused_mut))]
    let mut run_db = dir.path().join("run.db");
    let backend_db = dir.path().join("backend.db");
    drop(countersign::consumer::backend::Backend::create_new(&backend_db).unwrap());
    let roles: &[&str] = match pg_url {
        None => {
            drop(Store::open(&run_db).unwrap());
            &ROLES
        }
        Some(_) => &PG_ROLES,
    };
    #[cfg(feature = "postgres")]
    if let Some(url) = pg_url {
        let url = countersign::pgstore::PgUrl::parse(url).unwrap();
        drop(countersign::pgstore::PgStore::open(&url).unwrap());
    }
    let deadline_ms = Timestamp::now().unix_nanos() / 1_000_000 + (secs * 1000) as i128;
    let mut children = Vec::new();
    for i in 0..procs {
        let role = roles[(i % roles.len() as u64) as usize];
        let name = match pg_url {
            None => format!("{role}-{i}"),
            // Hosts a and b in turn: the two reviewers of every five are on different hosts,
            // and from six processes on each host has a driver.
            Some(_) => format!("host-{}.{role}-{i}", ['a', 'b'][(i % 2) as usize]),
        };
        let mut c = Command::new(std::env::current_exe().unwrap());
        if let Some(url) = pg_url {
            c.env("COUNTERSIGN_STRESS_PG_URL", url);
        }
        let c = c
            .args([
                "--exact",
                "stress_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, role)
            .env("COUNTERSIGN_STRESS_NAME", &name)
            .env("COUNTERSIGN_STRESS_DIR", dir.path())
            .env("COUNTERSIGN_STRESS_DEADLINE_MS", deadline_ms.to_string())
            .env("COUNTERSIGN_STRESS_CHILD_SEED", (seed + i).to_string())
            .env(
                "COUNTERSIGN_STRESS_LEASE_MS",
                env_u64("COUNTERSIGN_STRESS_LEASE_MS", 30_000).to_string(),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        children.push((name, c));
    }
    let mut violations = Vec::new();
    for (name, c) in children {
        let out = c.wait_with_output().unwrap();
        if !out.status.success() {
            violations.push(format!(
                "process {name} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let o = read_logs(dir.path());
    violations.extend(o.violations.iter().cloned());
    #[cfg(feature = "postgres")]
    if let Some(url) = pg_url {
        match invariants::pg_checked_copy(url, dir.path()) {
            Ok(back) => run_db = back,
            Err(v) => {
                violations.extend(v);
                return (o, violations);
            }
        }
    }
    violations.extend(check_winners(&run_db, &o));
    violations.extend(invariants::store_holds(&run_db));
    violations.extend(invariants::ledger_once(&backend_db, &run_db));
    violations.extend(invariants::python_verifier(&run_db));
    if std::env::var_os("COUNTERSIGN_STRESS_KEEP").is_some() {
        let _ = dir.keep();
    }
    (o, violations)
}

#[test]
fn stress_holds_single_winners_and_readers_see_events_with_states() {
    let procs = env_u64("COUNTERSIGN_STRESS_PROCS", 4);
    let secs = env_u64("COUNTERSIGN_STRESS_SECS", 3);
    let seed = env_u64("COUNTERSIGN_STRESS_SEED", 20261130);
    let (o, violations) = stress(procs, secs, seed, None);
    eprintln!(
        "stress: {procs} processes, {secs} s, seed {seed}: {} approvals decided, {} runs cancelled, counts {:?}, {} violations",
        o.decided.len(),
        o.cancelled.len(),
        o.counts,
        violations.len()
    );
    assert_eq!(violations, Vec::<String>::new());
    assert!(
        o.counts.get("started").copied().unwrap_or(0) > 0,
        "the drivers started runs"
    );
    assert!(
        o.counts.get("reads").copied().unwrap_or(0) > 0,
        "the consoles read"
    );
}

/// The same processes on one PostgreSQL database, in two groups whose lease owners stand for
/// two hosts: single winners, no effect twice, the chain verifies on the URL and, copied back,
/// by the store's checks and agentrt's Python verifier.
#[cfg(feature = "postgres")]
#[test]
fn stress_on_postgres_holds_single_winners_across_two_hosts() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    // Six: a driver on each host, two reviewers, an operator, a console.
    let procs = env_u64("COUNTERSIGN_STRESS_PROCS", 6);
    let secs = env_u64("COUNTERSIGN_STRESS_SECS", 3);
    let seed = env_u64("COUNTERSIGN_STRESS_SEED", 20261130);
    let (o, violations) = stress(procs, secs, seed, Some(&db.url));
    eprintln!(
        "stress on PostgreSQL: {procs} processes, {secs} s, seed {seed}: {} approvals decided, {} runs cancelled, counts {:?}, {} violations",
        o.decided.len(),
        o.cancelled.len(),
        o.counts,
        violations.len()
    );
    assert_eq!(violations, Vec::<String>::new());
    // Not "resumed": on a loaded machine the operator may cancel every approved run first.
    for kind in ["started", "approved", "reads"] {
        assert!(
            o.counts.get(kind).copied().unwrap_or(0) > 0,
            "nothing {kind}: {:?}",
            o.counts
        );
    }
}

// ---- the child processes ----

struct Log {
    file: std::fs::File,
    counts: BTreeMap<String, u64>,
}

impl Log {
    fn line(&mut self, s: &str) {
        writeln!(self.file, "{s}").unwrap();
    }
    fn count(&mut self, kind: &str) {
        *self.counts.entry(kind.to_string()).or_default() += 1;
    }
    fn violation(&mut self, s: &str) {
        self.line(&format!("violation {s}"));
    }
    fn finish(mut self) {
        for (k, n) in std::mem::take(&mut self.counts) {
            self.line(&format!("count {k} {n}"));
        }
    }
}

/// Entry point of the harness's child processes (ignored; does nothing unless started by the
/// harness with `COUNTERSIGN_STRESS_CHILD` set).
#[test]
#[ignore = "entry point of the stress harness's child processes"]
fn stress_child() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    let name = std::env::var("COUNTERSIGN_STRESS_NAME").unwrap();
    let dir = PathBuf::from(std::env::var("COUNTERSIGN_STRESS_DIR").unwrap());
    let deadline_ms: i128 = std::env::var("COUNTERSIGN_STRESS_DEADLINE_MS")
        .unwrap()
        .parse()
        .unwrap();
    let seed = env_u64("COUNTERSIGN_STRESS_CHILD_SEED", 0);
    let mut log = Log {
        file: std::fs::File::create(dir.join(format!("{name}.log"))).unwrap(),
        counts: BTreeMap::new(),
    };
    // agentrt's default lease (30 s) unless COUNTERSIGN_STRESS_LEASE_MS says otherwise: nobody
    // here takes runs over, so a lease is lost only if the runtime loses it.
    let at = match std::env::var("COUNTERSIGN_STRESS_PG_URL") {
        #[cfg(feature = "postgres")]
        Ok(url) => world::RunDbAt::Pg(url),
        _ => world::RunDbAt::Sqlite(dir.join("run.db")),
    };
    let w = World::open_at(
        &at,
        &dir.join("backend.db"),
        &name,
        Duration::from_millis(env_u64("COUNTERSIGN_STRESS_LEASE_MS", 30_000)),
    )
    .unwrap_or_else(|e| panic!("{name}: open: {e}"));
    // A console on PostgreSQL reads the events through a connection of its own.
    #[cfg(feature = "postgres")]
    let mut pg_reader = match &at {
        world::RunDbAt::Pg(url) if role == "console" => Some(
            countersign::pgstore::PgStore::open_existing(
                &countersign::pgstore::PgUrl::parse(url).unwrap(),
            )
            .unwrap(),
        ),
        _ => None,
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let rt = world::runtime();
    let live = || Timestamp::now().unix_nanos() / 1_000_000 < deadline_ms;
    let names = world::scenario_names();
    let mut n = 0;
    while live() {
        n += 1;
        match role.as_str() {
            "driver" => {
                let scenario = names.choose(&mut rng).unwrap();
                let id = format!("{name}-{n}");
                match w.reset_orders() {
                    Ok(()) => {}
                    Err(e) if e.contains("locked") => log.count("locked"),
                    Err(e) => log.violation(&format!("reset orders: {e}")),
                }
                match rt.block_on(w.start(&id, scenario)) {
                    Ok(_) => log.count("started"),
                    Err(e) if e.contains("locked") => log.count("locked"),
                    Err(e) => {
                        let now = w.get_run(&id).map(|r| {
                            format!(
                                "{} {} {:?} lease {:?}",
                                r.status, r.reason, r.reason_detail, r.lease_owner
                            )
                        });
                        log.violation(&format!("start {id}: {e} (run now: {now:?})"))
                    }
                }
            }
            "reviewer" => review(&w, &rt, &mut rng, &mut log),
            "operator" => cancel_one(&w, &mut rng, &mut log),
            "console" => match w.sqlite() {
                Some(store) => read_all(store, &mut log),
                #[cfg(feature = "postgres")]
                None => {
                    read_all_pg(&w, pg_reader.as_mut().unwrap(), &mut log);
                    // Two cores: a console reading without pause starves the writers.
                    std::thread::sleep(Duration::from_millis(20));
                }
                #[cfg(not(feature = "postgres"))]
                None => unreachable!("a PostgreSQL world without the postgres feature"),
            },
            other => panic!("unknown role {other}"),
        }
    }
    log.finish();
}

fn review(w: &World, rt: &tokio::runtime::Runtime, rng: &mut StdRng, log: &mut Log) {
    let pairs = match w.pending_pairs() {
        Ok(p) => p,
        Err(e) => return log.violation(&format!("pending approvals: {e}")),
    };
    let Some((run, approval)) = pairs.choose(rng).cloned() else {
        std::thread::sleep(Duration::from_millis(5));
        return;
    };
    let approve = rng.random_bool(0.75);
    let note = if approve { "ok" } else { "no" };
    let r = w.decide(&run, &approval, approve, "stress-reviewer", note);
    match r {
        Ok(_) => {
            let how = if approve { "approved" } else { "rejected" };
            log.line(&format!("decided {approval} {how}"));
            log.count(how);
            if approve {
                w.wait_lease_lapsed(&run);
                match rt.block_on(w.driver.resume(&run)) {
                    Ok(_) => log.count("resumed"),
                    Err(e) if e.is_run_state() || e.is_lease_lost() => log.count("resume_lost"),
                    Err(e) if e.to_string().contains("locked") => log.count("locked"),
                    Err(e) => log.violation(&format!("resume {run}: {e}")),
                }
            }
        }
        Err(
            OperatorError::NotPending { .. }
            | OperatorError::RunNotWaiting { .. }
            | OperatorError::RunFinished { .. },
        ) => log.count("decide_lost"),
        Err(OperatorError::Locked { .. }) => log.count("locked"),
        Err(e) => log.violation(&format!("decide {approval} of {run}: {e}")),
    }
}

fn cancel_one(w: &World, rng: &mut StdRng, log: &mut Log) {
    let runs = match w.runs(200) {
        Ok(r) => r,
        Err(e) => return log.violation(&format!("list runs: {e}")),
    };
    let open: Vec<_> = runs.iter().filter(|r| !r.status.is_terminal()).collect();
    let Some(run) = open.choose(rng) else {
        std::thread::sleep(Duration::from_millis(5));
        return;
    };
    // Cancel now and then, not everything: reviewers and drivers need runs to work on.
    if !rng.random_bool(0.2) {
        std::thread::sleep(Duration::from_millis(10));
        return;
    }
    match w.cancel(&run.id, "stress-operator", "stress") {
        Ok(_) => {
            log.line(&format!("cancelled {}", run.id));
            log.count("cancelled");
        }
        Err(OperatorError::RunFinished { .. }) => log.count("cancel_lost"),
        Err(OperatorError::Locked { .. }) => log.count("locked"),
        Err(e) if e.to_string().contains("not in the required state") => log.count("cancel_lost"),
        Err(e) => log.violation(&format!("cancel {}: {e}", run.id)),
    }
}

/// Reads a page of runs, then each run's events: a state read first must have its events by
/// the time they are read (a later snapshot holds everything an earlier one did).
fn read_all(store: &Store, log: &mut Log) {
    let runs = match store.list_runs_page(50, 0) {
        Ok(p) => p.items,
        Err(e) => return log.violation(&format!("list runs: {e}")),
    };
    for run in runs {
        let approvals = match store.list_approvals_page(&run.id, "", 100, 0) {
            Ok(p) => p.items,
            Err(e) => return log.violation(&format!("approvals of {}: {e}", run.id)),
        };
        let events = match store.list_events_page(&run.id, 10_000, 0) {
            Ok(p) => p.items,
            Err(e) => return log.violation(&format!("events of {}: {e}", run.id)),
        };
        let events: Vec<(String, String)> =
            events.into_iter().map(|e| (e.kind, e.payload)).collect();
        states_have_events(&run, &approvals, &events, log);
    }
}

/// What a reader saw first (the run, its approvals) must have its events in what it read
/// after: `step_count` step.started events, run.finished for a terminal run,
/// approval.requested for a waiting run and for every approval, approval.decided for every
/// decided approval. `events` are `(type, payload)`.
fn states_have_events(
    run: &countersign::runtime::types::Run,
    approvals: &[countersign::runtime::types::Approval],
    events: &[(String, String)],
    log: &mut Log,
) {
    log.count("reads");
    let has = |kind: &str| events.iter().any(|(k, _)| k == kind);
    let started = events.iter().filter(|(k, _)| k == "step.started").count() as i64;
    if started < run.step_count {
        log.violation(&format!(
            "run {} has step_count {} but {started} step.started events",
            run.id, run.step_count
        ));
    }
    if run.status.is_terminal() && !has("run.finished") {
        log.violation(&format!(
            "run {} is {} without run.finished",
            run.id, run.status
        ));
    }
    if run.status == RunStatus::WaitingForApproval && !has("approval.requested") {
        log.violation(&format!(
            "run {} is waiting without approval.requested",
            run.id
        ));
    }
    for a in approvals {
        let requested = events
            .iter()
            .any(|(k, p)| k == "approval.requested" && p.contains(&a.id));
        let decided = events
            .iter()
            .any(|(k, p)| k == "approval.decided" && p.contains(&a.id));
        if !requested {
            log.violation(&format!("approval {} without approval.requested", a.id));
        }
        if a.status != ApprovalStatus::Pending && !decided {
            log.violation(&format!(
                "approval {} is {} without approval.decided",
                a.id, a.status
            ));
        }
    }
}

/// The console's check on PostgreSQL (the console itself does not read PostgreSQL yet): the
/// runs page and each run's approvals through the store, then the run's events as committed,
/// chained (`events`) or waiting to be (`event_inbox`), in one statement, so one snapshot: an
/// event the sequencer moves between the two tables is seen once in either.
#[cfg(feature = "postgres")]
fn read_all_pg(w: &World, raw: &mut countersign::pgstore::PgStore, log: &mut Log) {
    let runs = match w.runs(50) {
        Ok(r) => r,
        Err(e) => return log.violation(&format!("list runs: {e}")),
    };
    for run in runs {
        let approvals = match w.list_approvals(&run.id) {
            Ok(a) => a,
            Err(e) => return log.violation(&format!("approvals of {}: {e}", run.id)),
        };
        let rows = raw.client().query(
            "SELECT type, payload_json FROM events WHERE run_id = $1 \
             UNION ALL SELECT type, payload_json FROM event_inbox WHERE run_id = $1",
            &[&run.id],
        );
        let events: Vec<(String, String)> = match rows {
            Ok(rows) => rows.iter().map(|r| (r.get(0), r.get(1))).collect(),
            Err(e) => return log.violation(&format!("events of {}: {e}", run.id)),
        };
        states_have_events(&run, &approvals, &events, log);
    }
}
