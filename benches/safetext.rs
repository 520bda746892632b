//! Escaping and cutting fields of 100 B, 64 KiB and 16 MiB.
//!
//! Reports the per-byte cost of a full escape at each size as a ratio to the 100 B cost
//! (linear growth keeps it near 1), and the cost of cutting each to one 80-column line as a
//! ratio to cutting 100 B (a streaming cut keeps it near 1 whatever the size), with the
//! number of input bytes the cut examined. Plain std::time; ratios from the same run.

use std::hint::black_box;
use std::time::{Duration, Instant};

use countersign::safetext::{Options, escape, escape_cut};

/// Mixed text: ASCII words, a CJK phrase, an escape or two, a combining mark.
fn field(len: usize) -> Vec<u8> {
    let pattern =
        "rm -rf /tmp/cache && echo \"done\" 日本語のテキスト caf\u{e9}\u{301} \x1b[31m \u{202e}x\n";
    let mut out = Vec::with_capacity(len + pattern.len());
    while out.len() < len {
        out.extend_from_slice(pattern.as_bytes());
    }
    // Cut back to `len` on a character boundary is not needed: invalid tails are input too.
    out.truncate(len);
    out
}

/// Runs `f` until at least `budget` has passed (and at least `min` times); time per run.
fn time<F: FnMut()>(min: u32, budget: Duration, mut f: F) -> Duration {
    let start = Instant::now();
    let mut runs = 0u32;
    while runs < min || start.elapsed() < budget {
        f();
        runs += 1;
    }
    start.elapsed() / runs
}

fn main() {
    let sizes = [
        ("100 B", 100usize),
        ("64 KiB", 64 << 10),
        ("16 MiB", 16 << 20),
    ];
    let budget = Duration::from_millis(500);
    let mut full = Vec::new();
    let mut cut = Vec::new();
    for (name, size) in sizes {
        let bytes = field(size);
        let t_full = time(2, budget, || {
            black_box(escape(black_box(&bytes), Options::line()));
        });
        let mut examined = 0;
        let t_cut = time(2, budget, || {
            let t = escape_cut(black_box(&bytes), Options::line(), 80);
            examined = t.examined_bytes();
            black_box(t);
        });
        full.push((name, size, t_full));
        cut.push((name, size, t_cut, examined));
    }
    let per_byte = |d: Duration, size: usize| d.as_nanos() as f64 / size as f64;
    let base_full = per_byte(full[0].2, full[0].1);
    println!("full escape (one-line, readable):");
    for (name, size, t) in &full {
        println!(
            "  {name:>7}: {:>12.3?}  {:>7.2} ns/byte  per-byte ratio to 100 B: {:.2}",
            t,
            per_byte(*t, *size),
            per_byte(*t, *size) / base_full
        );
    }
    let base_cut = cut[0].2.as_nanos() as f64;
    println!("cut to one 80-column line (streaming):");
    for (name, size, t, examined) in &cut {
        println!(
            "  {name:>7}: {:>12.3?}  time ratio to 100 B: {:.2}  examined {examined} of {size} bytes",
            t,
            t.as_nanos() as f64 / base_cut
        );
    }
}
