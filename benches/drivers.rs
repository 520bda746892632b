//! Aggregate driver steps per second of 1, 4 and 16 concurrent drivers (issue 19's bench), on
//! three stores measured in one run so that the ratios compare like with like:
//!
//! - **sqlite**: one run database file shared by every driver (SQLite serialises its writers);
//! - **naive**: PostgreSQL, every driver transaction appending its events after the chain head
//!   it locks until its commit (`PgStore::set_naive_chain`, no sequencer anywhere);
//! - **sequenced**: PostgreSQL as the driver runs today (decision 0081 and 0083): transactions
//!   commit their events to the inbox and each driver's process runs a sequencer.
//!
//! Each driver is a process of its own (this binary run again with `DRIVERS_CHILD` set): its
//! own connections, its own tokio runtime and threads, its own sequencer on PostgreSQL. That
//! is what many hosts are, short of the network: nothing is shared but the database, so no
//! lock, allocator or thread pool of one process stands between the drivers and the store.
//! Each drives one run to completion with a scripted agent (`STEPS − 1` calls of a tool that
//! returns its arguments, then `complete`; no model, no network). The children connect and
//! build their driver first, then wait; the clock runs from the word "go" to the last child's
//! "done", which it says after its driver is dropped (on PostgreSQL, after its sequencer has
//! chained what it committed). Bounded by step counts, never by time. After each PostgreSQL
//! configuration the chain is verified, the inbox is empty and every run is COMPLETED.
//!
//! The server is `tests/pg_support`'s (a throwaway cluster with fsync on, or
//! `COUNTERSIGN_TEST_PG`).
//!
//! `cargo bench --bench drivers` (`DRIVERS_STEPS=N` steps per driver's run, default 100;
//! `DRIVERS_COUNTS=1,4,16` the driver counts, the first being the base of the ratios;
//! `DRIVERS_STORES=sqlite,naive,sequenced` the stores measured).

#[path = "../tests/pg_support/mod.rs"]
mod pg_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign::pgstore::{PgStore, PgUrl};
use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::driver::{Config, default_limits};
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::store::Store;
use countersign::runtime::tools::{FnTool, Registry, SideEffect, ToolDef, ToolOutput};

/// Set in a child: the store it drives (`sqlite`, `naive` or `sequenced`).
const CHILD: &str = "DRIVERS_CHILD";
/// The lines a child says start with this (anything else on its stdout is ignored).
const SAYS: &str = "drivers-child:";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn registry() -> Registry {
    let def = ToolDef {
        name: "work".into(),
        description: "bench tool".into(),
        input_schema: br#"{"type":"object","properties":{"i":{"type":"integer"}}}"#.to_vec(),
        side_effect: SideEffect::ReadOnly,
        timeout: Duration::from_secs(30),
        terminal: false,
    };
    let t = FnTool::new(def, |c| {
        let content = c.args.clone();
        Box::pin(async move {
            Ok(ToolOutput {
                content,
                summary: "ok".into(),
            })
        })
    });
    let mut r = Registry::new();
    r.register(t).expect("register the tool");
    r
}

/// A child: one driver, one run of `DRIVERS_STEPS` steps on `DRIVERS_DB`, started on "go".
fn child(mode: &str) {
    let db = std::env::var("DRIVERS_DB").expect("DRIVERS_DB");
    let run_id = std::env::var("DRIVERS_RUN").expect("DRIVERS_RUN");
    let steps: usize = env_or("DRIVERS_STEPS", 100).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let policy = Arc::new(DefaultPolicy);
    let cfg = match mode {
        "sqlite" => Config::new(
            Arc::new(Store::open(std::path::Path::new(&db)).expect("open")),
            registry(),
            policy,
        ),
        "naive" | "sequenced" => {
            let url = PgUrl::parse(&db).expect("url");
            let mut s = PgStore::open_existing(&url).expect("connect");
            s.set_naive_chain(mode == "naive");
            // The naive chain has no sequencer: its writers chain their own events.
            Config::new(Arc::new(s), registry(), policy).chain_events(mode == "sequenced")
        }
        other => panic!("unknown store {other}"),
    };
    let mut script: Vec<_> = (0..steps - 1)
        .map(|i| agent::tool_call("work", &format!(r#"{{"i":{i}}}"#)))
        .collect();
    script.push(agent::complete(""));
    let d = cfg
        .lease_owner(run_id.clone())
        .agent(ScriptedAgent::new(script))
        .build()
        .expect("driver");
    let mut l = default_limits();
    l.max_steps = steps as i64 + 1;
    let mut out = std::io::stdout();
    writeln!(out, "{SAYS} ready")
        .and_then(|()| out.flush())
        .expect("say ready");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).expect("wait for go");
    // The run is a task on the runtime's workers, as a server runs it (as benches/driver.rs).
    let run = rt
        .block_on(rt.spawn(async move {
            let run = d.start_with_id(&run_id, "bench", l).await;
            (run, d)
        }))
        .expect("the run's task");
    let (run, d) = run;
    // Dropped, a driver on PostgreSQL stops its sequencer after it chains what is committed.
    drop(d);
    let (status, count) = match run {
        Ok(r) => (r.status.as_str().to_string(), r.step_count),
        Err(e) => (format!("error:{e}").replace(char::is_whitespace, "_"), -1),
    };
    writeln!(out, "{SAYS} done {status} {count}")
        .and_then(|()| out.flush())
        .expect("say done");
}

struct Running {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Running {
    /// The next line the child says (after [`SAYS`]).
    fn said(&mut self) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).expect("read a child");
            assert!(n > 0, "a child ended without saying done");
            if let Some(rest) = line.trim_end().strip_prefix(SAYS) {
                return rest.trim().to_string();
            }
        }
    }
}

/// `drivers` processes each drive a run of `steps` steps at once on `db`; returns aggregate
/// steps per second from "go" to the last "done", and how busy the machine's CPUs were
/// meanwhile (percent, every process's work: the drivers, the server, anything else running).
fn measure(mode: &str, db: &str, drivers: usize, steps: usize, tag: &str) -> (f64, f64) {
    let exe = std::env::current_exe().expect("this bench's path");
    let mut kids: Vec<Running> = (0..drivers)
        .map(|i| {
            let mut child = Command::new(&exe)
                .env(CHILD, mode)
                .env("DRIVERS_DB", db)
                .env("DRIVERS_RUN", format!("{tag}-{i}"))
                .env("DRIVERS_STEPS", steps.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start a child");
            let stdin = child.stdin.take().expect("stdin");
            let stdout = BufReader::new(child.stdout.take().expect("stdout"));
            Running {
                child,
                stdin,
                stdout,
            }
        })
        .collect();
    for k in &mut kids {
        assert_eq!(k.said(), "ready");
    }
    let start = Instant::now();
    let cpu = cpu_ticks();
    for k in &mut kids {
        k.stdin.write_all(b"go\n").expect("say go");
        k.stdin.flush().expect("say go");
    }
    for k in &mut kids {
        let done = k.said();
        assert_eq!(
            done,
            format!("done COMPLETED {steps}"),
            "{mode}, {drivers} drivers"
        );
    }
    let elapsed = start.elapsed();
    let (busy, all) = cpu_ticks();
    let busy = (busy - cpu.0) as f64 * 100.0 / (all - cpu.1).max(1) as f64;
    for mut k in kids {
        assert!(k.child.wait().expect("a child ends").success());
    }
    ((drivers * steps) as f64 / elapsed.as_secs_f64(), busy)
}

/// `DRIVERS_WAITS=1`: while a PostgreSQL configuration runs, `pg_stat_activity` is sampled
/// every 5 ms and each sample of a backend of that database counted by (the role its query
/// says it plays, its state, what it waits on): where the drivers and sequencers wait.
struct Waits {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<std::collections::BTreeMap<String, u64>>,
}

impl Waits {
    fn start(db: &pg_support::TestDb) -> Waits {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let mut c = db.client();
        let name: String = c
            .query_one("SELECT current_database()", &[])
            .expect("database")
            .get(0);
        let thread = std::thread::spawn(move || {
            let mut seen = std::collections::BTreeMap::new();
            let sql = "SELECT CASE \
                 WHEN query LIKE '%FROM event_chain FOR UPDATE%' THEN 'head' \
                 WHEN query LIKE '%event_chain%' OR query LIKE 'DELETE FROM event_inbox%' \
                   OR query LIKE 'INSERT INTO events%' THEN 'chaining' \
                 WHEN query LIKE '%lease_expires_at = $%' AND query LIKE 'UPDATE runs%' THEN 'lease' \
                 ELSE 'driver' END, state, \
                 coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, '-'), \
                 left(regexp_replace(query, '\\s+', ' ', 'g'), 40) \
                 FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()";
            while !flag.load(std::sync::atomic::Ordering::Acquire) {
                if let Ok(rows) = c.query(sql, &[&name]) {
                    for r in rows {
                        let (who, state, wait, q): (
                            String,
                            Option<String>,
                            String,
                            Option<String>,
                        ) = (r.get(0), r.get(1), r.get(2), r.get(3));
                        let state = state.unwrap_or_default();
                        let key = if state == "active" {
                            format!("{who:<9} {wait:<28} {}", q.unwrap_or_default())
                        } else {
                            format!("{who:<9} {state}")
                        };
                        *seen.entry(key).or_insert(0) += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            seen
        });
        Waits { stop, thread }
    }

    fn report(self, what: &str) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        let seen = self.thread.join().expect("sampler");
        let total: u64 = seen.values().sum();
        let mut v: Vec<_> = seen.into_iter().collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.1));
        println!("  where {what} waits ({total} backend samples):");
        for (k, n) in v.iter().take(14) {
            println!("    {:>5.1}%  {k}", *n as f64 * 100.0 / total.max(1) as f64);
        }
    }
}

/// After a PostgreSQL configuration: nothing waits in the inbox, the chain verifies, and every
/// run so far is COMPLETED (`runs` of them in all).
fn check_pg(db: &pg_support::TestDb, runs: i64) -> i64 {
    let mut s = PgStore::open_existing(&db.pg_url()).expect("connect");
    assert_eq!(s.unchained().expect("inbox"), 0, "every event chained");
    let report = s.verify_events(0, 0).expect("verify");
    assert!(report.ok(), "the chain holds: {report:?}");
    assert_eq!(s.count_runs("COMPLETED").expect("count"), runs);
    assert_eq!(s.count_runs("").expect("count"), runs);
    report.checked
}

/// The machine's CPU time so far (every core), busy and in all, in clock ticks (`/proc/stat`).
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let all: u64 = v.iter().sum();
    // idle and iowait are the 4th and 5th.
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (all - idle, all)
}

/// CPU seconds (user and system) of this process's ended children, the drivers.
fn children_cpu() -> f64 {
    // SAFETY: getrusage writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}

/// CPU seconds of the server's ended backends and its own: the postmaster's (of the cluster
/// whose socket directory `db`'s URL names) cumulative children's time and its own, from
/// `/proc`. 0 where it cannot be read (a server of `COUNTERSIGN_TEST_PG`, elsewhere).
fn server_cpu(db: &pg_support::TestDb) -> f64 {
    let read = || -> Option<f64> {
        let dir = db.url.split("host=").nth(1)?.split('&').next()?;
        let pid = std::fs::read_to_string(format!("{dir}/data/postmaster.pid")).ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.lines().next()?)).ok()?;
        let after = stat.rsplit_once(')')?.1;
        let f: Vec<f64> = after
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        // utime, stime, cutime, cstime are fields 14-17; `after` starts at field 3 (state),
        // which does not parse, so they are f[10..14].
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Some(f.get(10..14)?.iter().sum::<f64>() / hz)
    };
    read().unwrap_or(0.0)
}

/// Transactions committed or rolled back in `db` so far (`pg_stat_database`).
fn xacts(db: &pg_support::TestDb) -> i64 {
    let mut c = db.client();
    // The statistics of backends that just ended are flushed as they exit.
    std::thread::sleep(Duration::from_millis(300));
    c.query_one(
        "SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database \
         WHERE datname = current_database()",
        &[],
    )
    .map(|r| r.get(0))
    .unwrap_or(0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    if let Ok(mode) = std::env::var(CHILD) {
        child(&mode);
        return;
    }
    let steps: usize = env_or("DRIVERS_STEPS", 100).max(1);
    let counts: Vec<usize> = std::env::var("DRIVERS_COUNTS")
        .unwrap_or_else(|_| "1,4,16".into())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .filter(|&c| c > 0)
        .collect();
    let stores: Vec<String> = std::env::var("DRIVERS_STORES")
        .unwrap_or_else(|_| "sqlite,naive,sequenced".into())
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let wants = |s: &str| stores.iter().any(|x| x == s);
    // SAFETY: set before any thread starts.
    unsafe { std::env::set_var("COUNTERSIGN_TEST_PG_DURABLE", "1") };
    let dir = tempfile::tempdir().expect("tempdir");
    // One database per PostgreSQL store, so that each one's chain is checked on its own.
    let pg = if wants("naive") || wants("sequenced") {
        let Some(naive) = pg_support::fresh_db() else {
            return;
        };
        let Some(seq) = pg_support::fresh_db() else {
            return;
        };
        for db in [&naive, &seq] {
            drop(PgStore::open(&db.pg_url()).expect("migrate"));
        }
        Some((naive, seq))
    } else {
        None
    };
    println!(
        "drivers: {steps} steps per driver's run, one process per driver, fsync on; load {}",
        loadavg()
    );
    let mut base: [Option<f64>; 3] = [None; 3];
    let mut runs = [0i64; 2];
    for &n in &counts {
        let (mut cells, mut extra) = (Vec::new(), Vec::new());
        for (i, store) in ["sqlite", "naive", "sequenced"].into_iter().enumerate() {
            if !wants(store) {
                continue;
            }
            let rate = match (store, &pg) {
                ("sqlite", _) => {
                    let path = dir.path().join(format!("runs-{n}.db"));
                    drop(Store::open(&path).expect("create the run database"));
                    let cpu = children_cpu();
                    let r = measure(store, &path.display().to_string(), n, steps, "s");
                    extra.push(format!(
                        "sqlite: {:.2} ms CPU a step",
                        (children_cpu() - cpu) * 1e3 / (n * steps) as f64
                    ));
                    let s = Store::open(&path).expect("reopen");
                    assert_eq!(s.count_runs("COMPLETED").expect("count"), n as i64);
                    r
                }
                (_, Some((naive, seq))) => {
                    let (db, k) = if store == "naive" {
                        (naive, 0)
                    } else {
                        (seq, 1)
                    };
                    let waits =
                        (std::env::var_os("DRIVERS_WAITS").is_some()).then(|| Waits::start(db));
                    let (cpu, tx) = ((children_cpu(), server_cpu(db)), xacts(db));
                    let r = measure(store, &db.url, n, steps, &format!("p{n}"));
                    if let Some(w) = waits {
                        w.report(&format!("{store} with {n} drivers"));
                    }
                    let tx = xacts(db) - tx;
                    let cpu = (children_cpu() - cpu.0, server_cpu(db) - cpu.1);
                    let all = (n * steps) as f64;
                    extra.push(format!(
                        "{store}: {:.2} ms CPU (drivers {:.2}, server {:.2}), {:.1} transactions a step",
                        (cpu.0 + cpu.1) * 1e3 / all,
                        cpu.0 * 1e3 / all,
                        cpu.1 * 1e3 / all,
                        tx as f64 / all
                    ));
                    runs[k] += n as i64;
                    check_pg(db, runs[k]);
                    r
                }
                _ => continue,
            };
            let (rate, busy) = rate;
            let b = *base[i].get_or_insert(rate);
            cells.push(format!(
                "{store} {rate:>6.0} steps/s ({:.2}x, CPU {busy:.0}%)",
                rate / b
            ));
        }
        println!("drivers {n:>2}: {}", cells.join("   "));
        println!("            {}", extra.join("; "));
    }
    if let Some((naive, seq)) = &pg {
        let (a, b) = (check_pg(naive, runs[0]), check_pg(seq, runs[1]));
        println!(
            "chains verified: naive {a} events, sequenced {b} events; every run COMPLETED; load {}",
            loadavg()
        );
    }
}
