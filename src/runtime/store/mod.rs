//! The run database (spec 1, 9, 10): opening and hardening, migrations, decoding rows that may
//! be damaged, bounded page reads, write transactions that append hash-chained events, and
//! chain verification.
//!
//! One [`Store`] holds one SQLite connection behind a mutex (agentrt's one-connection pool), so
//! it can be shared between threads; every write is one `BEGIN IMMEDIATE` transaction
//! (`Store::write`).

mod approval_check;
mod backend;
mod bind;
mod column;
mod damaged;
mod detail;
mod error;
mod events;
mod filters;
mod keyset;
mod lease;
mod naming;
mod open;
mod pages;
mod prefix;
mod queue_order;
mod raw;
mod reads;
mod resumable;
mod rows;
mod run_state;
mod schema;
mod sizes;
mod stats;
mod stats_row;
mod tx;
mod vfs;
mod views;
mod watch;
mod window;
mod writes;

/// Test hooks, public only with the `testing` feature.
#[cfg(feature = "testing")]
pub mod hooks {
    /// Runs `f` on this thread's next store opens, with the database's path, after the path
    /// checks and before SQLite opens anything (`None` removes it): a test stands in for
    /// another user who drops a file beside the database in that instant.
    pub fn before_sqlite_opens(f: Option<fn(&std::path::Path)>) {
        super::open::hook::set(f);
    }
}

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

pub use approval_check::{ApprovalCheck, ApprovalRow, Decisions};
pub(crate) use backend::IN_CRATE;
#[cfg(feature = "postgres")]
pub(crate) use backend::sealed;
#[cfg(feature = "postgres")]
pub(crate) use backend::store_reads;
pub(crate) use backend::tx_writes;
pub use backend::{InCrate, RunStore, RunTx};
#[cfg(feature = "postgres")]
pub(crate) use damaged::{
    COLUMNS as DAMAGED_COLUMNS, anchor_key as damaged_anchor, error_of as damaged_error_of,
};
pub use damaged::{DAMAGED_RAW_HEAD, DamagedColumn};
#[cfg(feature = "postgres")]
pub(crate) use detail::UNRECORDED_CALLS;
pub use detail::{ApprovalView, ChainMark, MarkedEvent, ModelCallView, RunApprovals};
#[cfg(feature = "postgres")]
pub(crate) use detail::{mark_of, model_call_values};
pub use error::{SCHEMA_VERSION, StoreError, go_file_mode, is_locked};
pub use events::{ChainBreak, ChainReport};
#[cfg(feature = "postgres")]
pub(crate) use events::{below_one, cut as cut_hash, event_payload, gap as event_gap};
pub use keyset::{KeyPage, StepKey};
pub use lease::LeaseHandle;
pub use naming::{is_pg_url, name_shown, no_postgres_here, not_a_path};
pub use open::ConnectionSettings;
#[cfg(any(feature = "console", feature = "postgres"))]
pub(crate) use pages::capped_note;
#[cfg(feature = "postgres")]
pub(crate) use pages::check_page;
pub use pages::{MAX_PAGE_TEXT, Page, SHOWN_REQUEST_MAX};
#[cfg(feature = "postgres")]
pub(crate) use pages::{capped_approval_values, capped_step_values, event_values};
#[cfg(feature = "postgres")]
pub(crate) use queue_order::key_args as queue_key_args;
pub use queue_order::{QueueOrder, SortValue};
#[cfg(feature = "postgres")]
pub(crate) use queue_order::{
    QueueSql, sorted_from as sorted_queue_from, sorted_items as sorted_queue_items,
};
#[cfg(feature = "postgres")]
pub(crate) use reads::spec_of;
pub use reads::{DecisionEvent, ProxyCall};
pub use resumable::{LeasedRun, ResumableRun};
#[cfg(feature = "postgres")]
pub(crate) use resumable::{leased_sql, resumable_sql};
#[cfg(feature = "postgres")]
pub(crate) use rows::{
    APPROVAL_COLUMNS, RUN_COLUMNS, STEP_COLUMNS, approval_from_values, run_from_values,
    step_from_values,
};
pub use schema::{DEFAULT_LEASE_TTL_NS, MIGRATIONS, PRE_LEASE_OWNER, SCHEMA_MIGRATIONS_DDL};
pub use sizes::capped_request;
#[cfg(feature = "postgres")]
pub(crate) use stats::StatsFromRows;
pub use tx::{Transition, Tx};
#[cfg(feature = "postgres")]
pub(crate) use views::queue_item_of;
pub use views::{QUEUE_ARGS_HEAD, QueueItem, RunOverview, ViewCounts, raw_bytes};
pub use watch::{ArrivedApproval, ChangeWatch, PRESENTATION_MAX, TOOL_MAX};
pub use window::{COUNT_CAP, Near, WindowPage};
#[cfg(feature = "postgres")]
pub(crate) use window::{KeyWalk, Window, int, walk};
#[cfg(feature = "postgres")]
pub(crate) use writes::run_created;
pub use writes::{
    ApprovalDecision, Charge, Failing, NewApproval, NewModelCall, NewRun, StepFailure, StepUpdate,
};

use crate::runtime::types::Timestamp;
use error::Ctx;
use open::Access;

/// An open run database.
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    read_only: bool,
    /// The file the path named when it was opened (device, inode): a path that names another
    /// file later (one moved over it) or none (removed) is refused at the next write and
    /// change check, instead of writing into a file no one can open any more.
    file: Option<(u64, u64)>,
}

/// The device and inode `path` names now (following links, as SQLite does).
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl Store {
    /// agentrt's `OpenStore`: creates the file (exclusively, mode 0600) if missing, applies the
    /// mode rules (tightening what it owns), opens a hardened writer connection, switches to
    /// WAL, refuses triggers and views, and migrates to version 6 in one IMMEDIATE
    /// transaction. Follows symbolic links. A file that is not SQLite is
    /// [`StoreError::NotADatabase`], as for [`Store::open_existing`]. Like agentrt's, it adds
    /// its tables to any SQLite database it is given, another program's too: give the runtime
    /// a file of its own, or use `open_existing`, which never migrates.
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        let path = path.as_ref();
        open::create_exclusive(path)?;
        // SQLite follows a symbolic link and keeps its -wal/-shm beside the target: check
        // those.
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        open::check_modes(&real, true)?;
        let conn = (|| {
            let mut conn = open::connect(path, Access::Writer)?;
            open::enable_wal(&conn, path)?;
            open::refuse_triggers_and_views(&conn, path)?;
            schema::migrate(&mut conn, path, Timestamp::now())?;
            schema::check_columns(&conn, path)?;
            Ok(conn)
        })()
        .map_err(|e| open::not_a_database(path, e))?;
        Ok(Store {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
            read_only: false,
            file: file_id(path),
        })
    }

    /// agentrt's `OpenExisting`: never creates or migrates. In order: lstat (missing,
    /// symlink), regular file, mode rules (a writer tightens), open (read-only via
    /// SQLITE_OPEN_READ_ONLY, retried immutable on SQLITE_READONLY_DIRECTORY), trigger/view
    /// refusal, version check (exactly 6).
    pub fn open_existing(path: impl AsRef<Path>, read_only: bool) -> Result<Store, StoreError> {
        let path = path.as_ref();
        open::check_existing(path, !read_only)?;
        let access = if read_only {
            Access::ReadOnly
        } else {
            Access::Writer
        };
        // A writer's connection sets its pragmas first, where a file that is not SQLite is
        // found: named as the read-only open names it.
        let conn = open::connect(path, access).map_err(|e| open::not_a_database(path, e))?;
        open::refuse_triggers_and_views(&conn, path)?;
        open::check_version(&conn, path)?;
        schema::check_columns(&conn, path)?;
        Ok(Store {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
            read_only,
            file: file_id(path),
        })
    }

    /// The path it was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Refuses when the path no longer names the file this store opened: another file was
    /// moved over it, or it was removed. Its connection would go on in the old file, which
    /// nobody opening the path reads.
    pub(crate) fn check_same_file(&self) -> Result<(), StoreError> {
        match (self.file, file_id(&self.path)) {
            (Some(then), now) if now != Some(then) => Err(StoreError::Invalid(format!(
                "{} {} since it was opened: nothing more is read from or written to the old file; open the database again",
                self.path.display(),
                if now.is_some() {
                    "is another file"
                } else {
                    "was removed"
                }
            ))),
            _ => Ok(()),
        }
    }

    /// True when opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The connection (a panic in another holder does not wedge the store: a poisoned lock is
    /// taken over; SQLite rolled the transaction back when its guard dropped).
    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` inside one read transaction (so a page and its total agree).
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.lock();
        let tx = conn.transaction().ctx("read: begin")?;
        let out = f(&tx)?;
        tx.commit().ctx("read: end")?;
        Ok(out)
    }

    /// SQLite's `PRAGMA data_version`: changes when another connection commits (live reload).
    pub fn data_version(&self) -> Result<i64, StoreError> {
        self.check_same_file()?;
        self.lock()
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .ctx("data_version")
    }

    /// The connection's hardening settings as SQLite reports them.
    pub fn connection_settings(&self) -> Result<ConnectionSettings, StoreError> {
        open::settings(&self.lock())
    }

    /// Opens a second hardened connection for lease renewals (agentrt's heartbeat handle).
    pub fn lease_handle(&self) -> Result<LeaseHandle, StoreError> {
        if self.read_only {
            return Err(StoreError::Invalid(format!(
                "{} was opened read-only: a lease needs a writer",
                self.path.display()
            )));
        }
        Ok(LeaseHandle::new(open::connect(&self.path, Access::Writer)?))
    }
}
