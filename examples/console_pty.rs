//! A tiny front for the console, for the pseudo-terminal tests until the binary's
//! `countersign --db PATH` is wired: `console_pty DB [--read-only]`.

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(db) = args.next() else {
        std::process::exit(2);
    };
    let mut opts = countersign::console::ConsoleOptions::new(db);
    opts.read_only = args.any(|a| a == "--read-only");
    match countersign::console::run(opts) {
        Ok(()) => {}
        Err(e) => {
            // The error names files and settings, never database text.
            eprintln!("countersign: {e}");
            std::process::exit(1);
        }
    }
}
