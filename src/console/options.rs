//! What a binary passes to the console, and why the console could not run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::data::{self, Decider, ResumeHook};
use super::keymap;
use super::theme;
use crate::runtime::types::Said;

/// Makes the decision writer for a database path.
pub type MakeDecider = Box<dyn FnOnce(&Path) -> Result<Box<dyn Decider>, String> + Send>;

/// What `countersign --db PATH` (no command) passes to the console.
pub struct ConsoleOptions {
    pub db: PathBuf,
    /// Who decides (`--by`); else `COUNTERSIGN_BY`, else `USER`, else the OS account's name;
    /// with none of them the console opens read-only.
    pub by: Option<String>,
    pub read_only: bool,
    /// Theme name (`default`, `light`, `high-contrast`, `mono` or a user theme).
    pub theme: Option<String>,
    /// Directory of `config.toml` and `themes/`; default `$XDG_CONFIG_HOME/countersign` or
    /// `~/.config/countersign`.
    pub config_dir: Option<PathBuf>,
    /// Log file; default `<config_dir>/console.log`. Nothing is logged to the terminal.
    pub log_file: Option<PathBuf>,
    /// Mouse reports (the scroll wheel moves the cursor); off unless asked.
    pub mouse: bool,
    /// Resumes runs whose tools this build registers (the binary supplies it).
    pub resume: Option<Arc<dyn ResumeHook>>,
    /// Makes the decision writer for a database (approve/reject shown, cancel); `None` uses
    /// the store's operator calls ([`super::StoreDecider`]).
    pub decider: Option<MakeDecider>,
}

impl ConsoleOptions {
    pub fn new(db: impl Into<PathBuf>) -> Self {
        ConsoleOptions {
            db: db.into(),
            by: None,
            read_only: false,
            theme: None,
            config_dir: None,
            log_file: None,
            mouse: false,
            resume: None,
            decider: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error(transparent)]
    Data(#[from] data::DataError),
    #[error(transparent)]
    Theme(#[from] theme::ThemeError),
    #[error(transparent)]
    Keymap(#[from] keymap::KeymapError),
    #[error("config file {file}: {problem}")]
    Config { file: String, problem: String },
    #[error("cannot open the run database for decisions: {0} (use --read-only to only look)")]
    Writer(Said),
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
    /// Standard input or output is not a terminal (a pipe, a file, a CI job).
    #[error(
        "the console needs a terminal on standard input and output; in a script, use a command instead (runs, show, approve, ...; see --help)"
    )]
    NoTerminal,
    /// The name decisions would record cannot be (`runtime::operator::name_refused`): the
    /// name as given, and why. Its `Display` shows the name escaped.
    #[error(
        "the operator name {} cannot be recorded: {why}",
        crate::safetext::plain_line(name.as_bytes(), 80)
    )]
    Operator { name: String, why: String },
    #[error("the console's database thread stopped on an internal error; the log file has details")]
    WorkerStopped,
}

impl ConsoleError {
    /// The message with the bytes of what it names (a database name that is not UTF-8, an id),
    /// for a sanitiser that shows them as `\xNN`; its `Display` has their lossy form.
    pub fn said(&self) -> Said {
        match self {
            ConsoleError::Data(data::DataError::Open { path, cause }) => {
                Said::from("cannot open the run database ")
                    .and(path)
                    .text(": ")
                    .and(cause)
            }
            ConsoleError::Writer(cause) => {
                Said::from("cannot open the run database for decisions: ")
                    .and(cause)
                    .text(" (use --read-only to only look)")
            }
            ConsoleError::Operator { name, why } => Said::from("the operator name ")
                .id(name.as_str())
                .text(format!(" cannot be recorded: {why}")),
            other => Said::from(other.to_string()),
        }
    }
}
