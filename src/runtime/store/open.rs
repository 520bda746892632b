//! Opening a run database (spec 1.3): file-mode rules, exclusive creation, the hardened
//! connection (settings read back), WAL, the trigger/view refusal and the version check.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use super::error::{Ctx, StoreError};
use super::schema;
use super::vfs;

/// The extended result code of SQLITE_READONLY_DIRECTORY.
const SQLITE_READONLY_DIRECTORY: i32 = 1544;
/// SQLITE_READONLY_ROLLBACK: a read-only connection found a hot journal.
const SQLITE_READONLY_ROLLBACK: i32 = 776;
/// SQLITE_CANTOPEN (primary code; its extended codes are checked by the primary byte).
const SQLITE_CANTOPEN: i32 = 14;

/// The mode rules of spec 1.3 for the database and its `-wal`/`-shm` sidecars, and the same
/// rules for every other file SQLite may read beside it before it reads the database: a
/// `-journal` (SQLite replays a hot journal into the database before it looks at WAL) and the
/// super-journal a journal names. A writer then tightens the files it owns that group or
/// others can read, clearing those bits and keeping the owner's (decision 0104).
pub(crate) fn check_modes(path: &Path, writer: bool) -> Result<(), StoreError> {
    let io = |err| StoreError::Io {
        path: path.to_path_buf(),
        err,
    };
    let db = fs::metadata(path).map_err(io)?;
    check_directory(path)?;
    check_journals(path, &db)?;
    let mut files = vec![(path.to_path_buf(), db.mode(), db.uid())];
    for suffix in ["-wal", "-shm"] {
        let side = sidecar(path, suffix);
        let meta = match fs::symlink_metadata(&side) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(err) => return Err(StoreError::Io { path: side, err }),
        };
        if !meta.file_type().is_file() {
            return Err(StoreError::InsecureMode {
                path: side,
                mode: meta.mode(),
                reason: "which is not a regular file".into(),
            });
        }
        if meta.uid() != db.uid() {
            return Err(StoreError::InsecureMode {
                path: side,
                mode: meta.mode(),
                reason: "owned by another user than the database".into(),
            });
        }
        files.push((side, meta.mode(), meta.uid()));
    }
    for (p, mode, _) in &files {
        if mode & 0o022 != 0 {
            return Err(StoreError::InsecureMode {
                path: p.clone(),
                mode: *mode,
                reason: "writable by group or others".into(),
            });
        }
    }
    if writer {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        for (p, mode, uid) in &files {
            if *uid == me && mode & 0o077 != 0 {
                // Group and other bits cleared, the owner's kept: agentrt's `chmod 0600` would
                // also give write back to an owner who took it away (a 0444 database made
                // writable and then written; decision 0104).
                let owner_only = mode & 0o700;
                fs::set_permissions(p, fs::Permissions::from_mode(owner_only)).map_err(|err| {
                    StoreError::Io {
                        path: p.clone(),
                        err,
                    }
                })?;
            }
        }
    }
    Ok(())
}

/// The directory must keep other users from renaming the owner's files in it: not writable
/// by others, or sticky (as `/tmp`). The VFS's check at SQLite's open rests on that
/// (`vfs.rs`).
fn check_directory(path: &Path) -> Result<(), StoreError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let meta = fs::metadata(&dir).map_err(|err| StoreError::Io {
        path: dir.clone(),
        err,
    })?;
    if meta.mode() & 0o002 != 0 && meta.mode() & 0o1000 == 0 {
        return Err(StoreError::SharedDirectory {
            dir,
            mode: meta.mode(),
        });
    }
    Ok(())
}

/// The rollback journal's magic (its first 8 bytes, and the last 8 of one naming a
/// super-journal).
const JOURNAL_MAGIC: [u8; 8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7];

/// Longest super-journal name read from a journal (SQLite's own bound is the VFS's
/// mxPathname, 512 for unix).
const SUPER_JOURNAL_NAME_MAX: u32 = 4096;

/// `<db>-journal` and the super-journal it names, if present, are checked as the database is:
/// a regular file (lstat), owned by the database's owner, not writable by group or others.
fn check_journals(path: &Path, db: &fs::Metadata) -> Result<(), StoreError> {
    let journal = sidecar(path, "-journal");
    let Some(meta) = foreign_file(&journal, path, db)? else {
        return Ok(());
    };
    if let Some(name) = super_journal_name(&journal, meta.len())? {
        let sup =
            PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(name));
        foreign_file(&sup, path, db)?;
    }
    Ok(())
}

/// lstat `file`; `None` if absent; refused unless it is a regular file of the database's owner
/// that group and others cannot write.
fn foreign_file(
    file: &Path,
    db_path: &Path,
    db: &fs::Metadata,
) -> Result<Option<fs::Metadata>, StoreError> {
    let meta = match fs::symlink_metadata(file) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(err) => {
            return Err(StoreError::Io {
                path: file.to_path_buf(),
                err,
            });
        }
    };
    let reason = if !meta.file_type().is_file() {
        Some("which is not a regular file")
    } else if meta.uid() != db.uid() {
        Some("owned by another user than the database")
    } else if meta.mode() & 0o022 != 0 {
        Some("writable by group or others")
    } else {
        None
    };
    match reason {
        None => Ok(Some(meta)),
        Some(reason) => Err(StoreError::ForeignJournal {
            path: file.to_path_buf(),
            db: db_path.to_path_buf(),
            mode: meta.mode(),
            reason: reason.into(),
        }),
    }
}

/// The super-journal name a rollback journal ends with, read as SQLite's `readSuperJournal`
/// reads it (length, checksum and magic in the last 16 bytes); `None` when it names none or
/// the checksum does not hold (SQLite then ignores the name too).
fn super_journal_name(journal: &Path, size: u64) -> Result<Option<Vec<u8>>, StoreError> {
    use std::io::{Read, Seek, SeekFrom};
    if size < 16 {
        return Ok(None);
    }
    let io = |err| StoreError::Io {
        path: journal.to_path_buf(),
        err,
    };
    // Another connection's transaction may end (and remove or truncate its journal) between
    // the lstat and here: a journal that is gone or shorter names nothing to check now, and
    // whatever journal SQLite does open is checked again by the VFS at that moment (vfs.rs).
    let gone =
        |e: &std::io::Error| matches!(e.kind(), ErrorKind::NotFound | ErrorKind::UnexpectedEof);
    let mut f = match fs::File::open(journal) {
        Ok(f) => f,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mut tail = [0u8; 16];
    f.seek(SeekFrom::Start(size - 16)).map_err(io)?;
    match f.read_exact(&mut tail) {
        Ok(()) => {}
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(io(e)),
    }
    let len = u32::from_be_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let cksum = u32::from_be_bytes([tail[4], tail[5], tail[6], tail[7]]);
    if tail[8..] != JOURNAL_MAGIC || len == 0 || len > SUPER_JOURNAL_NAME_MAX {
        return Ok(None);
    }
    if u64::from(len) > size - 16 {
        return Ok(None);
    }
    let mut name = vec![0u8; len as usize];
    f.seek(SeekFrom::Start(size - 16 - u64::from(len)))
        .map_err(io)?;
    match f.read_exact(&mut name) {
        Ok(()) => {}
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(io(e)),
    }
    // SQLite sums the name's bytes as C `char`s, signed on some targets and unsigned on
    // others: a name either sum accepts is checked.
    let signed = name
        .iter()
        .fold(0u32, |acc, &b| acc.wrapping_add(b as i8 as i32 as u32));
    let unsigned = name
        .iter()
        .fold(0u32, |acc, &b| acc.wrapping_add(u32::from(b)));
    if signed != cksum && unsigned != cksum {
        return Ok(None);
    }
    // A C string: the name ends at its first NUL.
    if let Some(nul) = name.iter().position(|&b| b == 0) {
        name.truncate(nul);
    }
    Ok((!name.is_empty()).then_some(name))
}

/// `<path><suffix>` (SQLite's sidecar names).
pub(crate) fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Creates the database file `O_RDWR|O_CREAT|O_EXCL` mode 0600 (then fchmod 0600 whatever the
/// umask) if it is missing; a concurrent creator wins and the file is then used as it is.
pub(crate) fn create_exclusive(path: &Path) -> Result<(), StoreError> {
    if fs::metadata(path).is_ok() {
        return Ok(());
    }
    match fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(f) => f
            .set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(|err| StoreError::Io {
                path: path.to_path_buf(),
                err,
            }),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(StoreError::Io {
            path: path.to_path_buf(),
            err,
        }),
    }
}

/// The checks `open_existing` makes before touching SQLite: lstat (missing, symlink), regular
/// file, then the mode rules.
pub(crate) fn check_existing(path: &Path, writer: bool) -> Result<(), StoreError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(StoreError::Missing {
                path: path.to_path_buf(),
            });
        }
        Err(err) => {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                err,
            });
        }
    };
    if meta.file_type().is_symlink() {
        return Err(StoreError::Symlink {
            path: path.to_path_buf(),
        });
    }
    if !meta.file_type().is_file() {
        return Err(StoreError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    check_modes(path, writer)
}

/// How a connection is opened.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Access {
    /// Read-write, synchronous FULL.
    Writer,
    /// SQLITE_OPEN_READ_ONLY (retried immutable on SQLITE_READONLY_DIRECTORY).
    ReadOnly,
}

/// How many prepared statements a writer's connection keeps.
const WRITER_STATEMENTS: usize = 64;

/// Opens and hardens one connection to an existing file, by path (no URI parsing, so `?`,
/// `#`, `%` and spaces are plain characters).
pub(crate) fn connect(path: &Path, access: Access) -> Result<Connection, StoreError> {
    #[cfg(feature = "testing")]
    hook::run(path);
    match access {
        Access::Writer => {
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let conn = open_conn(path, path.as_os_str(), flags)?;
            harden(&conn, path, access)?;
            // The writer's statements are cached (`prepare_cached`); a driver step alone uses
            // thirteen and rusqlite keeps sixteen by default, so a model's or an operator's
            // statements on the same connection would evict them and have them parsed again.
            conn.set_prepared_statement_cache_capacity(WRITER_STATEMENTS);
            Ok(conn)
        }
        Access::ReadOnly => connect_reader(path),
    }
}

/// What lies beside the database when a reader opens it.
struct Beside {
    /// `-wal` size, if there is one.
    wal: Option<u64>,
    shm: bool,
    /// A `-journal` with bytes in it.
    journal: bool,
    /// The reader may make files SQLite gives to the database's owner: it is the owner, or
    /// root (SQLite chowns what root creates beside a database to the database's owner).
    owner: bool,
}

fn beside(path: &Path) -> Beside {
    let len = |suffix: &str| {
        fs::symlink_metadata(sidecar(path, suffix))
            .ok()
            .map(|m| m.len())
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let owner = fs::metadata(path)
        .map(|m| me == 0 || m.uid() == me)
        .unwrap_or(false);
    Beside {
        wal: len("-wal"),
        shm: len("-shm").is_some(),
        journal: len("-journal").is_some_and(|n| n > 0),
        owner,
    }
}

/// A reader's connection. A read-only open changes nothing and never leaves a file owned by
/// the reader (issue 14 item 7): SQLite's plain read-only connection to a WAL database creates
/// `-wal` and `-shm` (owned by whoever reads) and, read-only, can never remove them.
///
/// * A reader that may make the owner's files (it is the owner, or root): a read-write file
///   handle under `PRAGMA query_only`, so SQLite's last connection removes the `-wal`/`-shm`
///   it made when it closes, as a writer's does; in a directory it cannot write in,
///   `immutable=1` (spec 1.3's retry). (Not `readonly_shm`: SQLite shares one `-shm` mapping
///   between a process's connections, so a read-only mapping would make the same process's
///   writer, the console's decider, fail.)
/// * A reader that is not the owner, when a `-wal` and `-shm` exist (a writer is live, or
///   stopped): SQLITE_OPEN_READ_ONLY with `readonly_shm=1`, so it uses them and writes
///   neither; when there is no `-wal`, the main file `immutable=1`: there is no WAL to miss,
///   and nothing is created (it then does not see later writes).
/// * Refused with a sentence: a `-wal` holding writes with no `-shm` that the reader cannot
///   create, and a hot `-journal` a reader that is not the owner cannot roll back.
fn connect_reader(path: &Path) -> Result<Connection, StoreError> {
    let b = beside(path);
    let wal_writes = b.wal.is_some_and(|n| n > 0);
    if b.journal && !b.owner {
        return Err(StoreError::HotJournal {
            path: path.to_path_buf(),
        });
    }
    if !b.owner {
        if b.wal.is_some() && b.shm {
            let conn = open_uri(path, "mode=ro&readonly_shm=1")?;
            return probed(conn, path, wal_writes, false);
        }
        if wal_writes {
            return Err(StoreError::LeftoverWal {
                path: path.to_path_buf(),
                why: "a reader that is not its owner would create it".into(),
            });
        }
        return open_immutable(path);
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = match open_conn(path, path.as_os_str(), flags) {
        Ok(c) => c,
        Err(e @ StoreError::ForeignJournal { .. }) => return Err(e),
        // The file cannot be opened for writing (a read-only mount): read it as it is.
        Err(_) if !wal_writes => return open_immutable(path),
        Err(e) => return Err(e),
    };
    conn.execute_batch("PRAGMA query_only=ON;")
        .ctx("open store: query_only")?;
    let on: i64 = conn
        .query_row("PRAGMA query_only", [], |r| r.get(0))
        .ctx("open store: read back query_only")?;
    if on != 1 {
        return Err(StoreError::Hardening {
            path: path.to_path_buf(),
            detail: "SQLite did not keep query_only on a reader; the connection is refused".into(),
        });
    }
    probed(conn, path, wal_writes, true)
}

/// Hardens a reader's connection and makes its first read. A WAL database without `-shm` in a
/// directory the reader cannot write in refuses a read at its first read
/// (SQLITE_READONLY_DIRECTORY, or CANTOPEN for the `-shm`): read it `immutable=1` when the
/// `-wal` holds nothing, else say why it cannot be read.
fn probed(
    conn: Connection,
    path: &Path,
    wal_writes: bool,
    retry: bool,
) -> Result<Connection, StoreError> {
    harden(&conn, path, Access::ReadOnly)?;
    let probe = conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    });
    match probe {
        Ok(_) => Ok(conn),
        // The VFS refused a journal or `-wal` (never retried `immutable`: say so).
        Err(e) if extended_code(&e) == Some(SQLITE_CANTOPEN) && vfs::has_refusal() => {
            Err(StoreError::sqlite("open store: first read", e))
        }
        Err(e) if extended_code(&e) == Some(SQLITE_READONLY_ROLLBACK) => {
            Err(StoreError::HotJournal {
                path: path.to_path_buf(),
            })
        }
        Err(e)
            if retry
                && matches!(
                    extended_code(&e),
                    Some(SQLITE_READONLY_DIRECTORY) | Some(SQLITE_CANTOPEN)
                ) =>
        {
            drop(conn);
            if wal_writes {
                return Err(StoreError::LeftoverWal {
                    path: path.to_path_buf(),
                    why: "the directory is read-only to this reader".into(),
                });
            }
            open_immutable(path)
        }
        // Other failures are the callers' to name (not a database, locked ...).
        Err(_) => Ok(conn),
    }
}

fn open_uri(path: &Path, query: &str) -> Result<Connection, StoreError> {
    let uri = format!("file:{}?{query}", uri_escape(path));
    open_conn(
        path,
        std::ffi::OsStr::new(&uri),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )
}

/// Every connection goes through countersign's VFS, which checks each journal and `-wal` at
/// the moment SQLite opens it (`vfs.rs`). `name` is the path or the `file:` URI.
fn open_conn(
    path: &Path,
    name: &std::ffi::OsStr,
    flags: OpenFlags,
) -> Result<Connection, StoreError> {
    let vfs = vfs::name().map_err(|rc| StoreError::Hardening {
        path: path.to_path_buf(),
        detail: format!("SQLite did not register countersign's checking VFS (result code {rc})"),
    })?;
    vfs::clear_refusal();
    Connection::open_with_flags_and_vfs(name, flags, vfs).map_err(|e| open_err(path, e))
}

fn open_immutable(path: &Path) -> Result<Connection, StoreError> {
    let conn = open_uri(path, "mode=ro&immutable=1")?;
    harden(&conn, path, Access::ReadOnly)?;
    Ok(conn)
}

fn open_err(path: &Path, err: rusqlite::Error) -> StoreError {
    StoreError::sqlite(format!("open store: {}", path.display()), err)
}

fn extended_code(e: &rusqlite::Error) -> Option<i32> {
    match e {
        rusqlite::Error::SqliteFailure(f, _) if f.extended_code & 0xff == SQLITE_CANTOPEN => {
            Some(SQLITE_CANTOPEN)
        }
        rusqlite::Error::SqliteFailure(f, _) => Some(f.extended_code),
        _ => None,
    }
}

/// Percent-escapes a path for a `file:` URI (every byte but unreserved characters and `/`).
fn uri_escape(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// busy_timeout 5000, foreign_keys on, trusted_schema off, DEFENSIVE on (and synchronous FULL
/// for writers), each read back: a setting that did not take is an error.
fn harden(conn: &Connection, path: &Path, access: Access) -> Result<(), StoreError> {
    let bad = |detail: String| StoreError::Hardening {
        path: path.to_path_buf(),
        detail,
    };
    conn.busy_timeout(Duration::from_millis(5000))
        .ctx("open store: busy_timeout")?;
    conn.execute_batch("PRAGMA foreign_keys=ON; PRAGMA trusted_schema=OFF;")
        .ctx("open store: pragmas")?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)
        .ctx("open store: defensive")?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)
        .ctx("open store: trusted_schema")?;
    let pragma = |name: &str| -> Result<i64, StoreError> {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .ctx(&format!("open store: read back {name}"))
    };
    if pragma("busy_timeout")? != 5000 {
        return Err(bad(
            "SQLite did not keep busy_timeout 5000; the connection is refused".into(),
        ));
    }
    if pragma("foreign_keys")? != 1 {
        return Err(bad(
            "SQLite did not enable foreign_keys; the connection is refused".into(),
        ));
    }
    if pragma("trusted_schema")? != 0
        || conn
            .db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA)
            .ctx("open store: read back trusted_schema")?
    {
        return Err(bad(
            "SQLite did not turn trusted_schema off; the connection is refused".into(),
        ));
    }
    if !conn
        .db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE)
        .ctx("open store: read back defensive")?
    {
        return Err(bad(
            "SQLite did not enable DEFENSIVE mode; the connection is refused".into(),
        ));
    }
    if access == Access::Writer {
        conn.execute_batch("PRAGMA synchronous=FULL;")
            .ctx("open store: synchronous")?;
        if pragma("synchronous")? != 2 {
            return Err(bad(
                "SQLite did not keep synchronous FULL; the connection is refused".into(),
            ));
        }
    }
    Ok(())
}

/// `PRAGMA journal_mode=WAL`, retrying SQLITE_BUSY every 5 ms for up to 5 s.
pub(crate) fn enable_wal(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let start = Instant::now();
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(StoreError::Hardening {
                    path: path.to_path_buf(),
                    detail: format!("journal mode is {mode}, not wal; the database needs WAL"),
                });
            }
            Err(e) if super::error::is_locked(&e) && start.elapsed() < Duration::from_secs(5) => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(StoreError::sqlite("open store: journal mode", e)),
        }
    }
}

/// SQLite's "file is not a database", met at any step of opening, as the typed
/// [`StoreError::NotADatabase`] that `open_existing` gives for the same file.
pub(crate) fn not_a_database(path: &Path, e: StoreError) -> StoreError {
    match e {
        StoreError::Sqlite {
            err: rusqlite::Error::SqliteFailure(f, msg),
            ..
        } if f.code == rusqlite::ErrorCode::NotADatabase => StoreError::NotADatabase {
            path: path.to_path_buf(),
            detail: msg.unwrap_or_else(|| f.to_string()),
        },
        other => other,
    }
}

/// Refuses a schema holding a trigger or view.
pub(crate) fn refuse_triggers_and_views(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    match schema::trigger_or_view(conn) {
        Ok(None) => Ok(()),
        Ok(Some((kind, name))) => Err(StoreError::UnsafeSchema {
            path: path.to_path_buf(),
            kind,
            name,
        }),
        Err(e) if super::error::is_locked(&e) => Err(StoreError::sqlite("open store", e)),
        Err(e) => Err(StoreError::NotADatabase {
            path: path.to_path_buf(),
            detail: e.to_string(),
        }),
    }
}

/// `open_existing`'s version check: exactly this build's version.
pub(crate) fn check_version(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    match schema::stored_version(conn) {
        Err(e) if super::error::is_locked(&e) => Err(StoreError::sqlite("open store", e)),
        Err(e) => Err(StoreError::NotADatabase {
            path: path.to_path_buf(),
            detail: e.to_string(),
        }),
        Ok(v) if v != super::error::SCHEMA_VERSION => Err(StoreError::SchemaVersion {
            path: path.to_path_buf(),
            found: v,
        }),
        Ok(_) => Ok(()),
    }
}

/// The hardening settings as the connection reports them (for tests and diagnostics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// `PRAGMA busy_timeout`: how long a write waits for another writer's lock.
    pub busy_timeout_ms: i64,
    /// `PRAGMA foreign_keys`.
    pub foreign_keys: bool,
    /// `PRAGMA trusted_schema` (the runtime turns it off).
    pub trusted_schema: bool,
    /// Whether SQLite's defensive mode is on (statements that could corrupt the file, such
    /// as writing the schema directly, are refused).
    pub defensive: bool,
    /// 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA.
    pub synchronous: i64,
    /// `PRAGMA journal_mode` as SQLite reports it (`wal` on a store the runtime opened).
    pub journal_mode: String,
}

pub(crate) fn settings(conn: &Connection) -> Result<ConnectionSettings, StoreError> {
    let int = |name: &str| -> Result<i64, StoreError> {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .ctx("settings")
    };
    Ok(ConnectionSettings {
        busy_timeout_ms: int("busy_timeout")?,
        foreign_keys: int("foreign_keys")? == 1,
        trusted_schema: int("trusted_schema")? == 1,
        defensive: conn
            .db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE)
            .ctx("settings")?,
        synchronous: int("synchronous")?,
        journal_mode: conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .ctx("settings")?,
    })
}

/// The instant between the path checks and SQLite's open, for tests (the `testing` feature).
#[cfg(feature = "testing")]
pub(crate) mod hook {
    use std::cell::Cell;
    use std::path::Path;

    thread_local! {
        static BEFORE: Cell<Option<fn(&Path)>> = const { Cell::new(None) };
    }

    pub(crate) fn set(f: Option<fn(&Path)>) {
        BEFORE.with(|b| b.set(f));
    }

    pub(crate) fn run(path: &Path) {
        if let Some(f) = BEFORE.with(|b| b.get()) {
            f(path);
        }
    }
}
