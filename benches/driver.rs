//! Driver step cost against the floor of the same run database on the same filesystem.
//!
//! A run of n steps = n−1 allowed tool calls with distinct arguments, then `complete`; the
//! tool returns either its arguments ("small") or ~8 KiB of JSON. A step is four write
//! transactions, so the floor is four BEGIN IMMEDIATE commits with synchronous FULL (empty,
//! and with one small insert each), measured in the same process and directory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::driver::{Config, default_limits};
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::store::Store;
use countersign::runtime::tools::{FnTool, Registry, SideEffect, ToolDef, ToolOutput};

fn registry(big: bool) -> Registry {
    let blob: Vec<u8> = {
        let filler = "x".repeat(8 * 1024 - 40);
        format!(r#"{{"data":"{filler}","n":1}}"#).into_bytes()
    };
    let def = ToolDef {
        name: "work".into(),
        description: "bench tool".into(),
        input_schema: br#"{"type":"object","properties":{"i":{"type":"integer"}}}"#.to_vec(),
        side_effect: SideEffect::ReadOnly,
        timeout: Duration::from_secs(30),
        terminal: false,
    };
    let t = FnTool::new(def, move |c| {
        let content = if big { blob.clone() } else { c.args.clone() };
        Box::pin(async move {
            Ok(ToolOutput {
                content,
                summary: "ok".into(),
            })
        })
    });
    let mut r = Registry::new();
    r.register(t).unwrap();
    r
}

fn run_once(
    dir: &std::path::Path,
    rt: &tokio::runtime::Runtime,
    n: usize,
    big: bool,
    k: usize,
) -> Duration {
    let path = dir.join(format!("bench-{n}-{big}-{k}.db"));
    let store = Arc::new(Store::open(&path).unwrap());
    let mut script: Vec<_> = (0..n - 1)
        .map(|i| agent::tool_call("work", &format!(r#"{{"i":{i}}}"#)))
        .collect();
    script.push(agent::complete(""));
    let d = Config::new(store, registry(big), Arc::new(DefaultPolicy))
        .agent(ScriptedAgent::new(script))
        .build()
        .unwrap();
    let mut l = default_limits();
    l.max_steps = n as i64 + 1;
    // The run is a task on the runtime's workers, as a server runs it: its store work then
    // hands the worker's other tasks on (`block_in_place`) rather than running on the thread
    // that called block_on.
    let t = Instant::now();
    let run = rt
        .block_on(rt.spawn(async move { d.start_with_id("bench", "bench", l).await }))
        .unwrap()
        .unwrap();
    let el = t.elapsed();
    assert_eq!(run.step_count as usize, n, "{}", run.reason_detail);
    el
}

fn floor(dir: &std::path::Path, write: bool, reps: usize) -> Duration {
    let c = rusqlite::Connection::open(dir.join(format!("floor-{write}.db"))).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE IF NOT EXISTS t (v TEXT);",
    )
    .unwrap();
    let t = Instant::now();
    for _ in 0..reps {
        for _ in 0..4 {
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            if write {
                c.execute("INSERT INTO t (v) VALUES ('x')", []).unwrap();
            }
            c.execute_batch("COMMIT").unwrap();
        }
    }
    t.elapsed() / reps as u32
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Counts the heap allocations of the whole process (every thread) while [`COUNTING`] is set:
/// the profile mode's measure of work, which the machine's load does not change.
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

    pub static COUNTING: AtomicBool = AtomicBool::new(false);
    pub static ALLOCS: AtomicU64 = AtomicU64::new(0);
    pub static BYTES: AtomicU64 = AtomicU64::new(0);

    pub struct Counter;

    fn note(size: usize) {
        if COUNTING.load(Relaxed) {
            ALLOCS.fetch_add(1, Relaxed);
            BYTES.fetch_add(size as u64, Relaxed);
        }
    }

    // SAFETY: every call is passed to the system allocator unchanged; counting touches only
    // atomics and never allocates.
    unsafe impl GlobalAlloc for Counter {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            note(l.size());
            unsafe { System.alloc(l) }
        }
        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            note(l.size());
            unsafe { System.alloc_zeroed(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            unsafe { System.dealloc(p, l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
            note(n);
            unsafe { System.realloc(p, l, n) }
        }
    }

    /// (allocations, bytes) made while `f` runs.
    pub fn count<T>(f: impl FnOnce() -> T) -> (T, u64, u64) {
        let (a, b) = (ALLOCS.load(Relaxed), BYTES.load(Relaxed));
        COUNTING.store(true, Relaxed);
        let v = f();
        COUNTING.store(false, Relaxed);
        (v, ALLOCS.load(Relaxed) - a, BYTES.load(Relaxed) - b)
    }
}

#[global_allocator]
static ALLOC: counting::Counter = counting::Counter;

/// The whole process's resource usage so far (every thread).
fn usage() -> libc::rusage {
    // SAFETY: getrusage writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u
}

/// User CPU time of the whole process (every thread), in µs: the system time, mostly the
/// kernel writing and syncing the WAL, moves with the disk and the machine's load.
fn cpu_us() -> f64 {
    let t = usage().ru_utime;
    t.tv_sec as f64 * 1e6 + t.tv_usec as f64
}

/// Voluntary context switches of the whole process so far: a thread that waits (on a lock, a
/// condition, an fsync, a wake-up from another thread) switches once each time.
fn switches() -> f64 {
    usage().ru_nvcsw as f64
}

/// `BENCH_PROFILE=1`: the driver's runs and the replays of their statements only (no floors),
/// for `perf record`, and the work a marginal step does counted rather than timed, so that a
/// loaded machine changes it little: statements (SQLite's trace), heap allocations, and the
/// user CPU time of the process (all threads), each as (400-step run − 10-step run) / 390, for the
/// driver and for the replay of its statements.
fn profile(dir: &std::path::Path, rt: &tokio::runtime::Runtime, reps: usize) {
    let marginal = |long: f64, short: f64| (long - short) / 390.0;
    let driver_only = std::env::var("BENCH_PROFILE").is_ok_and(|v| v == "driver");
    for big in [false, true] {
        let long = replay::capture(dir, rt, 400, big);
        let short = replay::capture(dir, rt, 10, big);
        let mut per = Vec::new();
        for k in 0..reps {
            let (c, w) = (cpu_us(), switches());
            let (d400, a400, b400) = counting::count(|| run_once(dir, rt, 400, big, 200 + k));
            let (c400, w400) = (cpu_us() - c, switches() - w);
            let (c, w) = (cpu_us(), switches());
            let (d10, a10, b10) = counting::count(|| run_once(dir, rt, 10, big, 200 + k));
            let (c10, w10) = (cpu_us() - c, switches() - w);
            // What `count` (a process-wide counter) moves by while the long and the short
            // run's statements are replayed, less while they are only prepared.
            // `BENCH_PROFILE=driver`: no replay, so that a profile holds only the driver.
            let replayed = |count: fn() -> f64, tag: &str| {
                if driver_only {
                    return (f64::NAN, f64::NAN);
                }
                let one = |n: usize, stmts: &[String]| {
                    let tag = format!("{tag}{n}-{big}-{k}");
                    let (r, p) = replay::timed(dir, stmts, &tag, count, |c| count() - c);
                    r - p
                };
                (one(400, &long), one(10, &short))
            };
            let (r400, r10) = replayed(cpu_us, "p");
            let (s400, s10) = replayed(switches, "s");
            per.push((
                marginal(d400.as_secs_f64(), d10.as_secs_f64()) * 1e6,
                marginal(c400, c10),
                marginal(r400, r10),
                marginal(a400 as f64, a10 as f64),
                marginal(b400 as f64, b10 as f64),
                marginal(w400, w10),
                marginal(s400, s10),
            ));
        }
        per.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (us, cpu, rcpu, allocs, bytes, sw, rsw) = per[per.len() / 2];
        println!(
            "{} observations, marginal step: {us:.1} µs; user CPU {cpu:.1} µs (its statements replayed, less preparing them: {rcpu:.1} µs); {sw:.1} voluntary context switches (replayed: {rsw:.1}); {:.1} statements, {allocs:.0} allocations, {bytes:.0} bytes allocated",
            if big { "8 KiB" } else { "small" },
            (long.len() - short.len()) as f64 / 390.0,
        );
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let reps = std::env::var("BENCH_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5usize);
    if std::env::var_os("BENCH_PROFILE").is_some() {
        profile(dir.path(), &rt, reps);
        return;
    }
    let floor_empty = median((0..reps).map(|_| floor(dir.path(), false, 200)).collect());
    let floor_write = median((0..reps).map(|_| floor(dir.path(), true, 200)).collect());
    println!(
        "floor: 4 empty BEGIN IMMEDIATE commits = {floor_empty:?}; 4 one-row commits = {floor_write:?}"
    );
    println!(
        "{:<8} {:<6} {:>14} {:>12} {:>12}",
        "steps", "obs", "time/step", "/empty", "/write"
    );
    let mut per = std::collections::BTreeMap::new();
    for big in [false, true] {
        for n in [10usize, 100, 400] {
            let k = if n == 400 { reps.min(3) } else { reps };
            let t = median(
                (0..k)
                    .map(|i| run_once(dir.path(), &rt, n, big, i))
                    .collect(),
            );
            let step = t / n as u32;
            per.insert((big, n), step);
            println!(
                "{:<8} {:<6} {:>14?} {:>12.2} {:>12.2}",
                n,
                if big { "8KiB" } else { "small" },
                step,
                step.as_secs_f64() / floor_empty.as_secs_f64(),
                step.as_secs_f64() / floor_write.as_secs_f64()
            );
        }
    }
    for big in [false, true] {
        let r = per[&(big, 400)].as_secs_f64() / per[&(big, 10)].as_secs_f64();
        // A step's own cost, without the run's creation and ending that a short run spreads
        // over few steps: the difference between the 400-step and 10-step runs, per step.
        let marginal =
            (per[&(big, 400)].as_secs_f64() * 400.0 - per[&(big, 10)].as_secs_f64() * 10.0) / 390.0;
        println!(
            "{} observations: time/step at 400 steps / at 10 steps = {r:.2}; marginal step = {:.1} µs = {:.2} x the one-row floor",
            if big { "8 KiB" } else { "small" },
            marginal * 1e6,
            marginal / floor_write.as_secs_f64()
        );
    }
    against_replay(dir.path(), &rt, reps);
}

/// The floor of a step measured on the step's own statements (issue 13 item 7): every
/// statement the driver ran on its store's connection during a run, captured with SQLite's
/// statement trace (`sqlite3_expanded_sql`, parameters written in), is replayed in order on a
/// fresh database of the same schema on one thread, with the same pragmas: the same
/// transactions, the same rows and bytes, the same fsyncs, and none of the runtime's own work
/// (JSON, hashes, the blocking-pool hops, tokio). A replayed statement is prepared afresh
/// where the driver's are cached, so the time to prepare them all (a separate pass) is taken
/// off the replay.
mod replay {
    use std::ffi::{CStr, c_int, c_uint, c_void};
    use std::path::Path;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use countersign::runtime::agent::{self, ScriptedAgent};
    use countersign::runtime::driver::{Config, default_limits};
    use countersign::runtime::policy::DefaultPolicy;
    use countersign::runtime::store::{Store, StoreError};
    use rusqlite::ffi;

    static CAPTURED: Mutex<Vec<String>> = Mutex::new(Vec::new());

    unsafe extern "C" fn on_stmt(
        _mask: c_uint,
        _ctx: *mut c_void,
        p: *mut c_void,
        x: *mut c_void,
    ) -> c_int {
        // SAFETY: for SQLITE_TRACE_STMT, `p` is the statement and `x` its SQL text (a comment
        // starting with "--" for a trigger's own statements, which are not run separately).
        unsafe {
            if !x.is_null() && CStr::from_ptr(x as *const _).to_bytes().starts_with(b"--") {
                return 0;
            }
            let sql = ffi::sqlite3_expanded_sql(p as *mut ffi::sqlite3_stmt);
            if !sql.is_null() {
                let s = CStr::from_ptr(sql).to_string_lossy().into_owned();
                ffi::sqlite3_free(sql as *mut c_void);
                CAPTURED.lock().unwrap().push(s);
            }
        }
        0
    }

    /// The statements a driver runs for an `n`-step run (as `run_once`).
    pub fn capture(dir: &Path, rt: &tokio::runtime::Runtime, n: usize, big: bool) -> Vec<String> {
        let path = dir.join(format!("capture-{n}-{big}.db"));
        let store = Arc::new(Store::open(&path).unwrap());
        store
            .write(|tx| {
                // SAFETY: the handle is the store's open connection; the callback is a plain
                // function with the signature SQLite calls.
                let rc = unsafe {
                    ffi::sqlite3_trace_v2(
                        tx.conn().handle(),
                        ffi::SQLITE_TRACE_STMT as c_uint,
                        Some(on_stmt),
                        std::ptr::null_mut(),
                    )
                };
                assert_eq!(rc, ffi::SQLITE_OK);
                Ok::<_, StoreError>(())
            })
            .unwrap();
        CAPTURED.lock().unwrap().clear();
        let mut script: Vec<_> = (0..n - 1)
            .map(|i| agent::tool_call("work", &format!(r#"{{"i":{i}}}"#)))
            .collect();
        script.push(agent::complete(""));
        let d = Config::new(store, super::registry(big), Arc::new(DefaultPolicy))
            .agent(ScriptedAgent::new(script))
            .build()
            .unwrap();
        let mut l = default_limits();
        l.max_steps = n as i64 + 1;
        let run = rt.block_on(d.start_with_id("bench", "bench", l)).unwrap();
        assert_eq!(run.step_count as usize, n);
        std::mem::take(&mut *CAPTURED.lock().unwrap())
    }

    fn fresh(path: &Path) -> rusqlite::Connection {
        drop(Store::open(path).unwrap());
        let c = rusqlite::Connection::open(path).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA busy_timeout=5000;",
        )
        .unwrap();
        c
    }

    /// The replay's time less the time to prepare its statements.
    pub fn floor(dir: &Path, stmts: &[String], tag: &str) -> Duration {
        let (replay, prepare) = timed(dir, stmts, tag, Instant::now, |t| t.elapsed());
        replay.saturating_sub(prepare)
    }

    /// Replays `stmts` on a fresh database, then only prepares them on another; returns what
    /// `end(start())` measured around each.
    pub fn timed<S, T>(
        dir: &Path,
        stmts: &[String],
        tag: &str,
        start: impl Fn() -> S,
        end: impl Fn(S) -> T,
    ) -> (T, T) {
        let c = fresh(&dir.join(format!("replay-{tag}.db")));
        let t = start();
        for s in stmts {
            let mut st = c.prepare(s).unwrap();
            let mut rows = st.raw_query();
            while rows.next().unwrap().is_some() {}
        }
        let replay = end(t);
        let p = fresh(&dir.join(format!("prepare-{tag}.db")));
        let t = start();
        for s in stmts {
            drop(p.prepare(s).unwrap());
        }
        (replay, end(t))
    }
}

/// Issue 13 item 7's figure: the marginal step against the same statements replayed, driver
/// and replay measured alternately in the same run so that the machine's noise falls on both.
fn against_replay(dir: &std::path::Path, rt: &tokio::runtime::Runtime, reps: usize) {
    for big in [false, true] {
        let long = replay::capture(dir, rt, 400, big);
        let short = replay::capture(dir, rt, 10, big);
        let (mut drv, mut rep) = (Vec::new(), Vec::new());
        for k in 0..reps {
            let d400 = run_once(dir, rt, 400, big, 100 + k);
            let d10 = run_once(dir, rt, 10, big, 100 + k);
            let r400 = replay::floor(dir, &long, &format!("400-{big}-{k}"));
            let r10 = replay::floor(dir, &short, &format!("10-{big}-{k}"));
            drv.push(Duration::from_secs_f64(
                ((d400.as_secs_f64() - d10.as_secs_f64()) / 390.0).max(0.0),
            ));
            rep.push(Duration::from_secs_f64(
                ((r400.as_secs_f64() - r10.as_secs_f64()) / 390.0).max(0.0),
            ));
        }
        let (d, r) = (median(drv), median(rep));
        println!(
            "{} observations: marginal step {:.1} µs, its own statements replayed {:.1} µs ({} statements per step); step / replay floor = {:.2}",
            if big { "8 KiB" } else { "small" },
            d.as_secs_f64() * 1e6,
            r.as_secs_f64() * 1e6,
            (long.len() - short.len()) / 390,
            d.as_secs_f64() / r.as_secs_f64()
        );
    }
}
