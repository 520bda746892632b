//! Opening the run database for a command: never creates or migrates; read-only for reading
//! commands. Store errors are already one sentence naming the path and the fix.

use std::path::{Path, PathBuf};

use super::CommandError;
use crate::runtime::store::{Store, StoreError};

/// Opens an existing database (read-only unless `write`).
pub fn open(path: &Path, write: bool) -> Result<Store, CommandError> {
    Store::open_existing(path, !write).map_err(fail)
}

/// A store error as a command failure (exit 1): ids it names shown by their stored bytes.
pub fn fail(e: StoreError) -> CommandError {
    CommandError::Failed(crate::commands::text::said(&e.said(), 4000))
}

/// What a read command is handed: its database, already opened, where it is, whether the
/// output is JSON, and the output.
pub struct Reading<'a> {
    /// The database, opened as [`open`] opens it for reading.
    pub store: Store,
    /// Its path (`watch` watches the file).
    pub db: PathBuf,
    /// `--json`.
    pub json_out: bool,
    /// Where the command writes.
    pub out: &'a mut super::out::Out,
}

impl<'a> Reading<'a> {
    /// Path, store, `--json` and output, in that order.
    pub fn parts(self) -> (PathBuf, Store, bool, &'a mut super::out::Out) {
        (self.db, self.store, self.json_out, self.out)
    }
}

/// Opens the database at `db` for a read command (the error is the one [`open`] gives).
pub fn reading(
    db: PathBuf,
    json_out: bool,
    out: &mut super::out::Out,
) -> Result<Reading<'_>, CommandError> {
    Ok(Reading {
        store: open(&db, false)?,
        db,
        json_out,
        out,
    })
}

/// Connects to `url` again after the server dropped this process's connections (a restart,
/// a failover): tries at once, then after 1 s, doubling to 30 s, saying each failure through
/// `say`, until it connects or `stop` is set (then `None`).
#[cfg(feature = "postgres")]
pub fn pg_store_again(
    url: &crate::pgstore::PgUrl,
    stop: &std::sync::atomic::AtomicBool,
    say: &dyn Fn(&str),
) -> Option<crate::pgstore::PgStore> {
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    let mut wait = Duration::from_secs(1);
    loop {
        match crate::pgstore::PgStore::open_existing(url) {
            Ok(s) => return Some(s),
            Err(e) => say(&format!(
                "cannot connect yet ({}); trying again in {} s",
                super::text::clean(&e.to_string(), 400),
                wait.as_secs()
            )),
        }
        // Slept in short steps, so that a stop is seen at once.
        let mut left = wait;
        while !left.is_zero() {
            if stop.load(Ordering::SeqCst) {
                return None;
            }
            let step = left.min(Duration::from_millis(50));
            std::thread::sleep(step);
            left -= step;
        }
        if stop.load(Ordering::SeqCst) {
            return None;
        }
        wait = (wait * 2).min(Duration::from_secs(30));
    }
}

/// The PostgreSQL database `db` names (a `postgres://` URL), opened without migrating;
/// `None` for a SQLite path.
#[cfg(feature = "postgres")]
pub fn pg_store(db: &Path) -> Result<Option<crate::pgstore::PgStore>, CommandError> {
    let Some(url) = db.to_str().filter(|s| crate::pgstore::is_pg_url(s)) else {
        return Ok(None);
    };
    let url = crate::pgstore::PgUrl::parse(url)
        .map_err(|e| CommandError::Usage(super::text::clean(&e.to_string(), 600)))?;
    crate::pgstore::PgStore::open_existing(&url)
        .map(Some)
        .map_err(|e| CommandError::Failed(super::text::clean(&e.to_string(), 4000)))
}
