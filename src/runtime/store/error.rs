//! The store's typed errors. Messages keep agentrt's sentinel text first (spec 2.1, 1.2, 1.3)
//! and name the path and the fix where there is one.

use std::path::PathBuf;

use thiserror::Error;

use crate::runtime::json::JsonError;
use crate::runtime::types::{Key, Said, Timestamp};

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 6;

/// Everything the store can fail with.
#[derive(Debug, Error)]
pub enum StoreError {
    /// Unknown run, approval, event or spec: `agentrt: not found: <what>`.
    #[error("{}", self.said())]
    NotFound {
        /// What was looked for, e.g. `run <id>` or `approval <id>` (ids as stored).
        what: Said,
    },

    /// A compare-and-set found another state: `agentrt: run is not in the required state:
    /// <detail>`, `detail` being e.g. `run <id> is <S>, not <A> or <B>`.
    #[error("{}", self.said())]
    RunState {
        /// Which run, what it is and what the write expected (ids as stored).
        detail: Said,
    },

    /// A new run was asked for under an id a run already has (`Driver::start_with_id`,
    /// `Gate::begin`, an id generator that repeated itself): nothing was written.
    #[error("{}", self.said())]
    RunExists {
        /// The id asked for, as given.
        run_id: Key,
    },

    /// A driver write to a RUNNING run whose lease another owner holds (a kind of RunState):
    /// `agentrt: run <id> is leased by <owner> until <time>`.
    #[error("{}", self.said())]
    RunLeased {
        /// The run, as stored.
        run_id: Key,
        /// Who holds its lease (`runs.lease_owner`).
        owner: String,
        /// When that lease lapses unless renewed.
        expires_at: Timestamp,
    },

    /// The writer's lease is gone: `agentrt: run lease lost: <detail>`.
    #[error("{}", self.said())]
    LeaseLost {
        /// Which run (`run <id>`), and what was found instead when known (ids as stored).
        detail: Said,
    },

    /// The database is at another schema version than this build's.
    #[error("agentrt: database schema version does not match this build: {} is at version {found}, this build writes {SCHEMA_VERSION}; {}", path.display(), if *found > SCHEMA_VERSION { "the database is newer: open it with a newer build" } else { "the database is older: let the consumer that owns it migrate it" })]
    SchemaVersion {
        /// The database file named.
        path: PathBuf,
        /// The version it records (highest `schema_migrations.version`).
        found: i64,
    },

    /// The file holds no `schema_migrations` table (or is not SQLite at all).
    #[error("agentrt: open store: {} is not an agent-runtime database: {detail}; name a run database", path.display())]
    NotADatabase {
        /// The database file named.
        path: PathBuf,
        /// What SQLite or the check found.
        detail: String,
    },

    /// A trigger or view is in the schema.
    #[error("agentrt: database holds a trigger or view: {} has {kind} \"{name}\"; a trigger or a view could run SQL you did not write inside the runtime's statements, so it is refused: drop it or use a copy without it", path.display())]
    UnsafeSchema {
        /// The database file named.
        path: PathBuf,
        /// `trigger` or `view`.
        kind: String,
        /// Its name in `sqlite_master`.
        name: String,
    },

    /// A file mode (or sidecar owner/type) the runtime refuses.
    #[error("agentrt: {} is {}, {reason}; the runtime keeps its database readable and writable by its owner only: {} and chown it to the user that runs the runtime", path.display(), go_file_mode(*mode), chmod_hint(path))]
    InsecureMode {
        /// The file refused (the database or one of its sidecars).
        path: PathBuf,
        /// Its `st_mode` (type and permission bits), printed as Go's `FileMode`.
        mode: u32,
        /// What is wrong with it, e.g. `writable by group or others`.
        reason: String,
    },

    /// A file SQLite would read into the database on open (a `-journal` it would replay, or
    /// the super-journal one names) that is not a regular file of the database's owner or
    /// that others can write: refused before SQLite opens anything.
    #[error("agentrt: {} is {}, {reason}; SQLite would replay it into {} and rewrite the database, so nothing was opened: if you did not leave it there yourself, move it away ({}) and open the database again", path.display(), go_file_mode(*mode), db.display(), mv_hint(path))]
    ForeignJournal {
        /// The journal file refused.
        path: PathBuf,
        /// The database it would be replayed into.
        db: PathBuf,
        /// The journal's `st_mode`.
        mode: u32,
        /// What is wrong with it (owner, type or who can write it).
        reason: String,
    },

    /// The database lies in a directory other users can write in and whose sticky bit is
    /// clear: they could rename its journal or `-wal` between any check and SQLite's read.
    #[error("agentrt: {} is {}: other users can write in it and its sticky bit is not set, so they could swap the database's journal or -wal before SQLite reads it, and nothing was opened; keep run databases in a directory only their owner can write (or set its sticky bit: {})", dir.display(), go_file_mode(*mode), sticky_hint(dir))]
    SharedDirectory {
        /// The directory holding the database.
        dir: PathBuf,
        /// Its `st_mode`.
        mode: u32,
    },

    /// A read-only open found a hot `-journal` (a write that did not finish) it cannot roll
    /// back.
    #[error("agentrt: open store: {} has a hot journal ({}-journal) left by a write that did not finish, and a read-only open cannot roll it back; open it once with a writing command (approve, reject, cancel or the consumer) as the database's owner, then read again", path.display(), path.display())]
    HotJournal {
        /// The database file named.
        path: PathBuf,
    },

    /// A `-wal` holding writes not yet in the database, no `-shm`, and a reader that cannot
    /// create one without leaving a file behind (or at all).
    #[error("agentrt: open store: {}-wal holds writes that are not yet in {} and there is no {}-shm to read it with, and {why}; open it once with a writing command (approve, reject, cancel or the consumer) as the database's owner to fold them in, then read again", path.display(), path.display(), path.display())]
    LeftoverWal {
        /// The database file named.
        path: PathBuf,
        /// Why this open cannot create the `-shm` (read-only directory, not the owner, ...).
        why: String,
    },

    /// A runtime table or column is missing (a database edited by hand or restored from parts).
    #[error("agentrt: open store: {} has no {what}, which every version-6 run database has; it was changed by hand or restored from parts: restore it from a backup", path.display())]
    MissingColumn {
        /// The database file named.
        path: PathBuf,
        /// `table <name>` or `column <table>.<name>`.
        what: String,
    },

    /// A runtime table holds a generated column.
    #[error("agentrt: open store: {}: {table}.{column} is a generated column, computed by SQL stored in the file rather than written by the runtime, so it is refused (the runtime cannot write it and would show values nobody stored): rebuild the table without it or use a copy without it", path.display())]
    GeneratedColumn {
        /// The database file named.
        path: PathBuf,
        /// The runtime table holding it.
        table: String,
        /// The generated column.
        column: String,
    },

    /// `open_existing` on a symbolic link.
    #[error("agentrt: database path is a symbolic link: {}; name the database file itself", path.display())]
    Symlink {
        /// The path named, which is a link.
        path: PathBuf,
    },

    /// `open_existing` on a directory, device, fifo ...
    #[error("agentrt: open store: {} is not a regular file; name the database file itself", path.display())]
    NotRegular {
        /// The path named.
        path: PathBuf,
    },

    /// `open_existing` on a path that does not exist (nothing is created).
    #[error("agentrt: open store: lstat {}: no such file or directory; check the path (reading never creates a database)", path.display())]
    Missing {
        /// The path named.
        path: PathBuf,
    },

    /// SQLITE_BUSY / SQLITE_LOCKED after the busy timeout.
    #[error(
        "agentrt: database is locked by another consumer: {detail}; try again when its write finishes"
    )]
    Locked {
        /// What was being done, and SQLite's message.
        detail: String,
    },

    /// A migration's script failed: the tables do not match the recorded version (a database
    /// edited by hand, or restored from parts). The transaction rolled back.
    #[error("agentrt: migrate {} to version {version}: {detail}; its tables do not match the version it records ({}), so nothing was changed: restore it from a backup or open it with the build that wrote it", path.display(), version - 1)]
    Migration {
        /// The database file named.
        path: PathBuf,
        /// The version the failed migration would have reached.
        version: i64,
        /// SQLite's error from the migration's script.
        detail: String,
    },

    /// A hardening setting did not take or the journal mode is not WAL.
    #[error("agentrt: open store: {}: {detail}", path.display())]
    Hardening {
        /// The database file named.
        path: PathBuf,
        /// Which setting, and what SQLite reported instead.
        detail: String,
    },

    /// A file system call failed.
    #[error("agentrt: open store: {}: {err}", path.display())]
    Io {
        /// The file or directory the call was about.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        err: std::io::Error,
    },

    /// Invalid page arguments: a limit that is not positive or a negative offset.
    #[error("agentrt: list {what}: limit {limit} and offset {offset}")]
    InvalidPage {
        /// What was being listed.
        what: &'static str,
        /// The limit asked for.
        limit: i64,
        /// The offset asked for.
        offset: i64,
    },

    /// A stored tool spec that no longer hashes to its key.
    #[error("agentrt: tool spec {hash} does not hash to its key: the stored spec was changed")]
    SpecHash {
        /// The key (`tool_specs.hash`) asked for.
        hash: String,
    },

    /// A value could not be encoded as the runtime stores it.
    #[error("agentrt: {context}: {err}")]
    Json {
        /// What was being encoded.
        context: String,
        /// Why it was refused.
        #[source]
        err: JsonError,
    },

    /// A value the runtime writes as TEXT was not UTF-8, or a caller value was refused.
    #[error("agentrt: {0}")]
    Invalid(String),

    /// A failure of another backend than SQLite (PostgreSQL): its message, which names the
    /// database by its redacted URL only and says what was being done.
    #[error("{0}")]
    Backend(String),

    /// Any other SQLite error, with what was being done.
    #[error("agentrt: {context}: {err}")]
    Sqlite {
        /// What the store was doing.
        context: String,
        /// SQLite's error (its message only, not the statement's SQL).
        #[source]
        err: rusqlite::Error,
    },
}

impl StoreError {
    /// The message with every id it names as stored ([`Said::bytes`]); its `Display` is this
    /// message with ids that are not UTF-8 written lossily, as agentrt writes them. Agentrt's
    /// sentinel text comes first either way (spec 2.1).
    pub fn said(&self) -> Said {
        match self {
            StoreError::NotFound { what } => Said::from("agentrt: not found: ").and(what),
            StoreError::RunState { detail } => {
                Said::from("agentrt: run is not in the required state: ").and(detail)
            }
            StoreError::RunLeased {
                run_id,
                owner,
                expires_at,
            } => Said::from("agentrt: run ").id(run_id).text(format!(
                " is leased by {owner} until {}",
                expires_at.format_always()
            )),
            StoreError::RunExists { run_id } => Said::from("agentrt: insert run: run ")
                .id(run_id)
                .text(" exists already, so nothing was written; choose another id, or resume it"),
            StoreError::LeaseLost { detail } => Said::from("agentrt: run lease lost: ").and(detail),
            other => {
                let (message, paths) = (other.to_string(), other.paths());
                // A hint to paste is kept as a command: shown as printed, never escaped.
                let hint = match other {
                    StoreError::InsecureMode { path, .. } => Some(chmod_hint(path)),
                    StoreError::ForeignJournal { path, .. } => Some(mv_hint(path)),
                    StoreError::SharedDirectory { dir, .. } => Some(sticky_hint(dir)),
                    _ => None,
                };
                match hint
                    .as_deref()
                    .and_then(|h| message.split_once(h).map(|s| (h, s)))
                {
                    Some((h, (before, after))) => Said::with_paths(before, &paths)
                        .command(h)
                        .and(&Said::with_paths(after, &paths)),
                    None => Said::with_paths(&message, &paths),
                }
            }
        }
    }

    /// The files and directories the message names.
    fn paths(&self) -> Vec<&std::path::Path> {
        use StoreError::*;
        match self {
            ForeignJournal { path, db, .. } => vec![path, db],
            SharedDirectory { dir, .. } => vec![dir],
            SchemaVersion { path, .. }
            | NotADatabase { path, .. }
            | UnsafeSchema { path, .. }
            | InsecureMode { path, .. }
            | HotJournal { path, .. }
            | LeftoverWal { path, .. }
            | MissingColumn { path, .. }
            | GeneratedColumn { path, .. }
            | Symlink { path, .. }
            | NotRegular { path, .. }
            | Missing { path, .. }
            | Migration { path, .. }
            | Hardening { path, .. }
            | Io { path, .. } => vec![path],
            _ => vec![],
        }
    }

    /// True for [`StoreError::RunState`] and [`StoreError::RunLeased`] (agentrt's
    /// `errors.Is(err, ErrRunState)`).
    pub fn is_run_state(&self) -> bool {
        matches!(
            self,
            StoreError::RunState { .. } | StoreError::RunLeased { .. }
        )
    }

    /// True when SQLite found the file damaged (SQLITE_CORRUPT: "database disk image is
    /// malformed").
    pub fn is_corrupt(&self) -> bool {
        matches!(
            self,
            StoreError::Sqlite {
                err: rusqlite::Error::SqliteFailure(e, _),
                ..
            } if e.code == rusqlite::ErrorCode::DatabaseCorrupt
        )
    }

    /// Wraps a SQLite error; busy/locked become [`StoreError::Locked`].
    pub fn sqlite(context: impl Into<String>, err: rusqlite::Error) -> StoreError {
        let context = context.into();
        // rusqlite appends a failed statement's whole SQL to its message: keep SQLite's own
        // message only, so an error is one line a person can read.
        let err = match err {
            rusqlite::Error::SqlInputError { error, msg, .. } => {
                rusqlite::Error::SqliteFailure(error, Some(msg))
            }
            other => other,
        };
        if let rusqlite::Error::SqliteFailure(f, _) = &err
            && f.extended_code & 0xff == rusqlite::ffi::SQLITE_CANTOPEN
            && let Some(r) = super::vfs::take_refusal()
        {
            if r.shm {
                return StoreError::InsecureMode {
                    path: r.path,
                    mode: r.mode,
                    reason: r.reason.into(),
                };
            }
            return StoreError::ForeignJournal {
                path: r.path,
                db: r.db,
                mode: r.mode,
                reason: r.reason.into(),
            };
        }
        if is_locked(&err) {
            return StoreError::Locked {
                detail: format!("{context}: {err}"),
            };
        }
        StoreError::Sqlite { context, err }
    }
}

/// SQLITE_BUSY or SQLITE_LOCKED (any extended code).
pub fn is_locked(err: &rusqlite::Error) -> bool {
    match err {
        rusqlite::Error::SqliteFailure(e, _) => matches!(
            e.code,
            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
        ),
        _ => false,
    }
}

/// Extension to turn rusqlite results into store results with a context.
pub(crate) trait Ctx<T> {
    fn ctx(self, context: &str) -> Result<T, StoreError>;
}

impl<T> Ctx<T> for Result<T, rusqlite::Error> {
    fn ctx(self, context: &str) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::sqlite(context, e))
    }
}

#[allow(clippy::unnecessary_cast)] // mode_t is u16 on some platforms
/// Go's `os.FileMode.String()` for a `st_mode` (type letter then `rwx` triplets).
pub fn go_file_mode(mode: u32) -> String {
    let fmt = mode & libc::S_IFMT as u32;
    let is = |t: libc::mode_t| fmt == t as u32;
    let bit = |b: libc::mode_t| mode & b as u32 != 0;
    // Go's order of type and special letters: d L D p S u g c t.
    let letters = [
        (is(libc::S_IFDIR), 'd'),
        (is(libc::S_IFLNK), 'L'),
        (is(libc::S_IFBLK) || is(libc::S_IFCHR), 'D'),
        (is(libc::S_IFIFO), 'p'),
        (is(libc::S_IFSOCK), 'S'),
        (bit(libc::S_ISUID), 'u'),
        (bit(libc::S_ISGID), 'g'),
        (is(libc::S_IFCHR), 'c'),
        (bit(libc::S_ISVTX), 't'),
    ];
    let mut s: String = letters
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, c)| *c)
        .collect();
    if s.is_empty() {
        s.push('-');
    }
    let rwx = b"rwxrwxrwx";
    for (i, c) in rwx.iter().enumerate() {
        if mode & (1 << (8 - i)) != 0 {
            s.push(*c as char);
        } else {
            s.push('-');
        }
    }
    s
}

/// `chmod 600 PATH` with the path as one shell word that reads back its bytes (a name holding
/// `$(…)`, `;` or a space pastes as that name, never as code), or a sentence when no word can
/// be typed for it.
fn chmod_hint(path: &std::path::Path) -> String {
    command("chmod 600", &[path], "chmod 600 it")
}

/// `chmod +t DIR`, as shell words.
fn sticky_hint(dir: &std::path::Path) -> String {
    command("chmod +t", &[dir], "chmod +t on it")
}

/// `mv PATH PATH.suspect`, as shell words.
fn mv_hint(path: &std::path::Path) -> String {
    let mut away = path.as_os_str().to_owned();
    away.push(".suspect");
    command(
        "mv",
        &[path, std::path::Path::new(&away)],
        "mv it to another name",
    )
}

/// `head` followed by each of `paths` as one shell word that reads back its bytes (after `--`
/// when one starts with `-`, which would be read as an option), so a pasted hint acts on these
/// files and runs nothing else; `fallback` when a name cannot be typed (it holds a NUL or ends
/// in a line feed).
fn command(head: &str, paths: &[&std::path::Path], fallback: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = head.to_string();
    if paths
        .iter()
        .any(|p| p.as_os_str().as_bytes().starts_with(b"-"))
    {
        out.push_str(" --");
    }
    for p in paths {
        match crate::safetext::shell::word(p.as_os_str().as_bytes()) {
            Ok(w) => {
                out.push(' ');
                out.push_str(&w);
            }
            Err(_) => return fallback.to_string(),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unnecessary_cast)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_is_not_utf8_is_said_with_its_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(b"/tmp/a\xffb.db"));
        let e = StoreError::Missing { path: path.clone() };
        let said = e.said().bytes();
        assert!(
            said.windows(11).any(|w| w == b"/tmp/a\xffb.db"),
            "{}",
            String::from_utf8_lossy(&said)
        );
        let e = StoreError::ForeignJournal {
            path: PathBuf::from(std::ffi::OsStr::from_bytes(b"/d/\xfe.db-journal")),
            mode: 0o644,
            db: PathBuf::from(std::ffi::OsStr::from_bytes(b"/d/\xfe.db")),
            reason: "owned by another user".into(),
        };
        let said = e.said().bytes();
        let fffd = "\u{fffd}".as_bytes();
        assert!(!said.windows(3).any(|w| w == fffd), "{said:?}");
        assert!(said.windows(8).any(|w| w == b"/d/\xfe.db-"));
    }

    /// The hints a person pastes (`mv … …suspect`, `chmod +t …`) act on the named files and run
    /// nothing else, whatever the names hold.
    #[test]
    fn pasted_hints_move_the_named_file_and_run_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let name = "-a b;$(touch pwned)`touch pwned2`'\u{1b}.db";
        // Relative, as named on a command line: the one starting with `-` must not be an option.
        let journal = dir.path().join(format!("{name}-journal"));
        std::fs::write(&journal, b"j").unwrap();
        let e = StoreError::ForeignJournal {
            path: PathBuf::from(format!("{name}-journal")),
            db: PathBuf::from(name),
            mode: 0o100666,
            reason: "others can write it".into(),
        };
        let msg = e.to_string();
        let mv = msg
            .split("move it away (")
            .nth(1)
            .and_then(|r| r.strip_suffix(") and open the database again"))
            .unwrap_or_else(|| panic!("{msg}"));
        let e = StoreError::SharedDirectory {
            dir: PathBuf::from(name),
            mode: 0o40777,
        };
        std::fs::create_dir(dir.path().join(name)).unwrap();
        let msg = e.to_string();
        let chmod = msg
            .split("set its sticky bit: ")
            .nth(1)
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{msg}"));
        for line in [mv, chmod] {
            let st = std::process::Command::new("sh")
                .arg("-c")
                .arg(line)
                .current_dir(dir.path())
                .status()
                .unwrap();
            assert!(st.success(), "{line}");
        }
        assert!(!journal.exists(), "{mv}");
        let mut away = journal.into_os_string();
        away.push(".suspect");
        assert!(std::path::Path::new(&away).exists(), "{mv}");
        assert!(!dir.path().join("pwned").exists() && !dir.path().join("pwned2").exists());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_ne!(mode & 0o1000, 0, "{chmod}");
    }

    #[test]
    fn messages_keep_agentrt_text_and_the_ids_bytes() {
        let e = StoreError::NotFound {
            what: Said::from("run ").id(b"t-\xff".as_slice()),
        };
        assert_eq!(e.to_string(), "agentrt: not found: run t-\u{fffd}");
        assert_eq!(e.said().bytes(), b"agentrt: not found: run t-\xff");
        let e = StoreError::RunLeased {
            run_id: Key::new(b"r\xfe".to_vec()),
            owner: "w1".into(),
            expires_at: Timestamp::ZERO,
        };
        assert!(
            e.to_string()
                .starts_with("agentrt: run r\u{fffd} is leased by w1 until ")
        );
        assert!(
            e.said()
                .bytes()
                .starts_with(b"agentrt: run r\xfe is leased by w1 until ")
        );
        // A message without ids is its text.
        let e = StoreError::Invalid("x".into());
        assert_eq!(e.said().bytes(), b"agentrt: x");
    }

    #[test]
    fn file_modes_print_as_go_does() {
        assert_eq!(go_file_mode(libc::S_IFREG as u32 | 0o666), "-rw-rw-rw-");
        assert_eq!(go_file_mode(libc::S_IFREG as u32 | 0o600), "-rw-------");
        assert_eq!(go_file_mode(libc::S_IFDIR as u32 | 0o755), "drwxr-xr-x");
    }
}
