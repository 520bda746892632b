//! The real console binary in a pseudo-terminal, on a small database (about 100 runs) and a
//! large one (100 000 runs, 1 000 000 steps, 10 000 waiting approvals), in the same run: time
//! to the first full frame of the queue, time per page-down on the runs list, idle CPU over ten
//! seconds, and peak memory (VmHWM). Reports large/small ratios.
//!
//! `cargo bench --bench console_startup`. Writing the large database takes minutes; set
//! `COUNTERSIGN_BENCH_BIG_DB=/path/big.db` to reuse one (the bench writes it there if missing).
//!
//! Then the same figures on PostgreSQL (issue 19): the small database copied into one database,
//! and a large one of 1 000 000 runs, 100 000 of them waiting on a pending approval, on a
//! throwaway cluster (`tests/pg_support`; or the server `COUNTERSIGN_TEST_PG` names).
//! `COUNTERSIGN_BENCH_PG=0` leaves PostgreSQL out.

mod support;
use support::{binary, shared};

#[cfg(feature = "postgres")]
#[path = "../tests/pg_support/mod.rs"]
mod pg_support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

fn fixture(db: &Path, big: &[&str]) {
    let ok = Command::new("python3")
        .arg(shared().join("tools/agentrt_fixture.py"))
        .arg(db)
        .args(["--seed", "7", "--no-check"])
        .args(big)
        .status()
        .expect("fixture");
    assert!(ok.success());
}

/// Turns `n` completed runs into waiting runs with one pending approval each.
fn add_waiting(db: &Path, n: usize) {
    let script = r#"
import sqlite3, sys, uuid
c = sqlite3.connect(sys.argv[1]); n = int(sys.argv[2])
tpl = c.execute("select step_id, kind, capability_json, presentation_json, request_json, hash, created_at from approvals where status='pending' limit 1").fetchone()
for (rid,) in c.execute("select id from runs where status='COMPLETED' order by rowid limit ?", (n,)).fetchall():
    c.execute("update runs set status='WAITING_FOR_APPROVAL', reason='', finished_at='' where id=?", (rid,))
    c.execute("insert into approvals (id, run_id, step_id, kind, capability_json, presentation_json, request_json, hash, status, created_at) values (?,?,?,?,?,?,?,?,'pending',?)", (uuid.uuid4().hex, rid) + tpl)
c.commit()
"#;
    let ok = Command::new("python3")
        .args(["-c", script])
        .arg(db)
        .arg(n.to_string())
        .status()
        .expect("python3");
    assert!(ok.success());
}

struct Console {
    parser: vt100::Parser,
    rx: Receiver<Vec<u8>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
}

impl Console {
    fn start(bin: &Path, db: &Path) -> Console {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 40,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("pty");
        let mut cmd = CommandBuilder::new(bin);
        cmd.arg("--db");
        cmd.arg(db);
        cmd.arg("--read-only");
        cmd.env("TERM", "xterm-256color");
        cmd.env("COUNTERSIGN_BY", "bench");
        let child = pair.slave.spawn_command(cmd).expect("spawn");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("reader");
        let writer = pair.master.take_writer().expect("writer");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let _keep = pair.master;
            let mut buf = [0u8; 16384];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
        let rows = std::num::NonZeroU16::new(40).expect("rows");
        let cols = std::num::NonZeroU16::new(120).expect("cols");
        Console {
            parser: vt100::Parser::new(rows, cols, 0),
            rx,
            writer,
            child,
        }
    }

    fn wait(&mut self, pred: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !pred(&self.parser.screen().contents()) {
            assert!(
                Instant::now() < deadline,
                "screen:\n{}",
                self.parser.screen().contents()
            );
            if let Ok(b) = self.rx.recv_timeout(Duration::from_millis(50)) {
                self.parser.process(&b);
            }
        }
    }

    fn send(&mut self, b: &[u8]) {
        self.writer.write_all(b).expect("send");
        self.writer.flush().expect("flush");
    }

    fn pid(&self) -> u32 {
        self.child.process_id().expect("pid")
    }

    fn quit(mut self) {
        self.send(b"\x03");
        let _ = self.child.wait();
    }
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn peak_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Figures {
    first_frame_ms: f64,
    page_down_ms: f64,
    idle_pct: f64,
    peak_mib: f64,
}

fn measure(bin: &Path, db: &Path) -> Figures {
    let reps = 5;
    let mut firsts = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let mut c = Console::start(bin, db);
        c.wait(|s| s.contains("Pending approvals") && s.contains("issue_refund"));
        firsts.push(t.elapsed().as_secs_f64() * 1e3);
        c.quit();
    }
    firsts.sort_by(|a, b| a.total_cmp(b));
    let mut c = Console::start(bin, db);
    c.wait(|s| s.contains("Pending approvals") && s.contains("issue_refund"));
    c.send(b"2");
    // The rows, not only the screen's frame: a page-down before the rows arrive would time
    // the first read instead.
    c.wait(|s| {
        s.contains("newest first")
            && s.contains("STATUS")
            && ["COMPLETED", "RUNNING", "FAILED"]
                .iter()
                .any(|st| s.matches(st).count() > 1)
    });
    // Two screens: the small database has only about three.
    let pages = 2;
    let t = Instant::now();
    for i in 0..pages {
        let before = c.parser.screen().contents();
        c.send(b"\x1b[6~"); // PageDown
        c.wait(|s| s != before);
        let _ = i;
    }
    let page_down_ms = t.elapsed().as_secs_f64() * 1e3 / pages as f64;
    c.send(b"1");
    c.wait(|s| s.contains("Pending approvals"));
    std::thread::sleep(Duration::from_secs(2));
    let pid = c.pid();
    let a = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(10));
    let b = cpu_ticks(pid);
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let idle_pct = (b - a) as f64 / hz / 10.0 * 100.0;
    let peak_mib = peak_kib(pid) as f64 / 1024.0;
    c.quit();
    Figures {
        first_frame_ms: firsts[reps / 2],
        page_down_ms,
        idle_pct,
        peak_mib,
    }
}

/// Prints one line per database and the large/small ratios.
fn report(small_name: &str, s: &Figures, large_name: &str, l: &Figures) {
    for (name, f) in [(small_name, s), (large_name, l)] {
        println!(
            "{name:42} first frame {:8.1} ms  page-down {:6.1} ms  idle CPU {:5.2} %  peak {:6.1} MiB",
            f.first_frame_ms, f.page_down_ms, f.idle_pct, f.peak_mib
        );
    }
    println!(
        "ratio large/small: first frame {:.2}, page-down {:.2}, peak memory {:.2}",
        l.first_frame_ms / s.first_frame_ms,
        l.page_down_ms / s.page_down_ms,
        l.peak_mib / s.peak_mib
    );
}

/// Issue 19's console figure on PostgreSQL: the small database copied in, against 1 000 000
/// runs with 100 000 waiting (the small one's rows plus generated copies of one of its completed
/// runs and one of its pending approvals; the console's first frame reads runs and approvals,
/// so the copies have no steps or events). The goal: the first frame within 1.5x.
#[cfg(feature = "postgres")]
fn on_postgres(bin: &Path, small_db: &Path) {
    if std::env::var_os("COUNTERSIGN_BENCH_PG").is_some_and(|v| v == "0") {
        return;
    }
    let (Some(small), Some(big)) = (pg_support::fresh_db(), pg_support::fresh_db()) else {
        return;
    };
    for url in [&small.url, &big.url] {
        let ok = Command::new(bin)
            .args(["copy", "--from"])
            .arg(small_db)
            .args(["--to", url])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("countersign copy");
        assert!(ok.success(), "copy into PostgreSQL");
    }
    let (runs, waiting) = (1_000_000i64, 100_000i64);
    eprintln!("writing {runs} runs, {waiting} waiting, into PostgreSQL");
    let mut c = big.client();
    c.execute(
        "INSERT INTO runs (id, goal, status, reason, reason_detail, limits_json, step_count, \
         created_at, started_at, finished_at, result_json, active_ms) \
         SELECT 'bench-' || lpad(g::text, 7, '0'), t.goal, \
         CASE WHEN g <= $2::bigint THEN 'WAITING_FOR_APPROVAL' ELSE t.status END, \
         CASE WHEN g <= $2::bigint THEN '' ELSE t.reason END, t.reason_detail, t.limits_json, \
         t.step_count, t.created_at, t.started_at, \
         CASE WHEN g <= $2::bigint THEN '' ELSE t.finished_at END, t.result_json, t.active_ms \
         FROM generate_series(1, $1::bigint) g, \
         (SELECT * FROM runs WHERE status = 'COMPLETED' ORDER BY ord LIMIT 1) t",
        &[&runs, &waiting],
    )
    .expect("generate runs");
    c.execute(
        "INSERT INTO approvals (id, run_id, step_id, kind, capability_json, \
         presentation_json, request_json, hash, status, created_at) \
         SELECT 'bench-ap-' || lpad(g::text, 7, '0'), 'bench-' || lpad(g::text, 7, '0'), \
         a.step_id, a.kind, a.capability_json, a.presentation_json, a.request_json, a.hash, \
         'pending', a.created_at \
         FROM generate_series(1, $1::bigint) g, \
         (SELECT * FROM approvals WHERE status = 'pending' ORDER BY ord LIMIT 1) a",
        &[&waiting],
    )
    .expect("generate approvals");
    // Settled, as a database in service is: vacuumed (its visibility map set, no hint bits
    // left to write) and analyzed. Otherwise autovacuum wakes for the million new rows and
    // scans them on one of the machine's cores while the console is timed.
    c.batch_execute("VACUUM ANALYZE").expect("vacuum");
    drop(c);
    let s = measure(bin, Path::new(&small.url));
    let l = measure(bin, Path::new(&big.url));
    println!("PostgreSQL:");
    report("small (~100 runs)", &s, "large (1M runs, 100k waiting)", &l);
}

fn main() {
    let bin = binary();
    let dir = tempfile::tempdir().expect("tempdir");
    let small = dir.path().join("small.db");
    fixture(&small, &["--big", "85"]);
    // `COUNTERSIGN_BENCH_SQLITE=0`: PostgreSQL only.
    if std::env::var_os("COUNTERSIGN_BENCH_SQLITE").is_none_or(|v| v != "0") {
        let big = std::env::var_os("COUNTERSIGN_BENCH_BIG_DB")
            .map(PathBuf::from)
            .unwrap_or_else(|| dir.path().join("big.db"));
        if !big.exists() {
            eprintln!("writing the large database (100 000 runs, 1 000 000 steps): minutes");
            fixture(&big, &["--big", "100000", "--steps-per-run", "10"]);
            add_waiting(&big, 10_000);
        }
        let s = measure(&bin, &small);
        let l = measure(&bin, &big);
        println!("SQLite:");
        report(
            "small (~100 runs)",
            &s,
            "large (100k runs, 1M steps, 10k waiting)",
            &l,
        );
    }
    #[cfg(feature = "postgres")]
    on_postgres(&bin, &small);
}
