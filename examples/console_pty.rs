//! A tiny front for the console, for the pseudo-terminal tests until the binary's
//! `countersign --db PATH` is wired: `console_pty DB [--read-only] [--mouse]`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(db) = args.first() else {
        std::process::exit(2);
    };
    let mut opts = countersign::console::ConsoleOptions::new(db);
    opts.read_only = args.iter().any(|a| a == "--read-only");
    opts.mouse = args.iter().any(|a| a == "--mouse");
    match countersign::console::run(opts) {
        Ok(()) => {}
        Err(e) => {
            // The error names files and settings, never database text.
            eprintln!("countersign: {e}");
            std::process::exit(1);
        }
    }
}
