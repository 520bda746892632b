//! The run database the proxy serves on, SQLite's or PostgreSQL's (decision 0085): opened as
//! serving and `check` open it (created or migrated as needed, the call index with it) or
//! read-only for `recheck`, and read through the operations both backends offer
//! ([`RunStore`]). Every write of a run goes through the Gate, which takes this store as its
//! [`RunDb`].

use std::sync::Arc;

use crate::mcp::config::Database;
use crate::mcp::owned;
use crate::runtime::driver::RunDb;
use crate::runtime::store::{RunStore, Store, StoreError};
use crate::runtime::types::{Approval, Run, Step, Timestamp};

#[cfg(feature = "postgres")]
use crate::pgstore::{PgError, PgStore};
#[cfg(feature = "postgres")]
use crate::runtime::types::Lease;

/// An open run database.
#[derive(Clone)]
pub enum Runs {
    Sqlite(Arc<Store>),
    #[cfg(feature = "postgres")]
    Postgres(Arc<PgStore>),
}

impl Runs {
    /// Opens the database for serving: a SQLite file is created or migrated, checked again
    /// (agentrt mcp 2.2) and its call index migrated; a PostgreSQL database already at this
    /// build's schema is opened as it is (a runtime login cannot migrate), else migrated
    /// (which needs the owner role), the call index being part of that schema.
    pub fn open(db: &Database) -> Result<Runs, String> {
        match db {
            Database::File(path) => {
                let store = Store::open(path).map_err(|e| format!("database: {e}"))?;
                owned::check_database(path)?;
                crate::mcp::index::migrate(path)?;
                Ok(Runs::Sqlite(Arc::new(store)))
            }
            #[cfg(feature = "postgres")]
            Database::Postgres(url) => {
                let store = match PgStore::open_existing(url) {
                    Err(PgError::NotOurs { .. } | PgError::SchemaOlder { .. }) => {
                        PgStore::open(url)
                    }
                    opened => opened,
                }
                .map_err(|e| format!("database: {e}"))?;
                Ok(Runs::Postgres(Arc::new(store)))
            }
        }
    }

    /// Opens an existing database without writing to it (a SQLite file read-only; a
    /// PostgreSQL database at this build's schema, never migrated).
    pub fn open_read_only(db: &Database) -> Result<Runs, String> {
        match db {
            Database::File(path) => Store::open_existing(path, true)
                .map(|s| Runs::Sqlite(Arc::new(s)))
                .map_err(|e| format!("database: {e}")),
            #[cfg(feature = "postgres")]
            Database::Postgres(url) => PgStore::open_existing(url)
                .map(|s| Runs::Postgres(Arc::new(s)))
                .map_err(|e| format!("database: {e}")),
        }
    }

    /// The store as the Gate takes it.
    pub fn run_db(&self) -> RunDb {
        match self {
            Runs::Sqlite(s) => s.clone().into(),
            #[cfg(feature = "postgres")]
            Runs::Postgres(p) => p.clone().into(),
        }
    }

    /// On PostgreSQL, chains every event committed to the inbox so far, on a connection of
    /// its own (what the Gate's sequencer does when it is dropped); nothing on SQLite.
    pub fn chain_committed(&self) -> Result<(), String> {
        match self {
            Runs::Sqlite(_) => Ok(()),
            #[cfg(feature = "postgres")]
            Runs::Postgres(p) => PgStore::open_existing(p.url())
                .and_then(|mut s| s.sequence_all())
                .map(|_| ())
                .map_err(|e| e.to_string()),
        }
    }

    /// The run row.
    pub fn get_run(&self, run_id: &str) -> Result<Run, StoreError> {
        match self {
            Runs::Sqlite(s) => RunStore::get_run(&**s, run_id.as_bytes()),
            #[cfg(feature = "postgres")]
            Runs::Postgres(p) => RunStore::get_run(&**p, run_id.as_bytes()),
        }
    }

    /// One approval of a run.
    pub fn get_approval(&self, run_id: &str, id: &str) -> Result<Approval, StoreError> {
        match self {
            Runs::Sqlite(s) => RunStore::get_approval(&**s, run_id.as_bytes(), id.as_bytes()),
            #[cfg(feature = "postgres")]
            Runs::Postgres(p) => RunStore::get_approval(&**p, run_id.as_bytes(), id.as_bytes()),
        }
    }

    /// The run's steps in insertion order.
    pub fn list_steps(&self, run_id: &str) -> Result<Vec<Step>, StoreError> {
        match self {
            Runs::Sqlite(s) => RunStore::list_steps(&**s, run_id.as_bytes()),
            #[cfg(feature = "postgres")]
            Runs::Postgres(p) => RunStore::list_steps(&**p, run_id.as_bytes()),
        }
    }

    /// The run's approvals in insertion order.
    pub fn list_approvals(&self, run_id: &str) -> Result<Vec<Approval>, StoreError> {
        match self {
            Runs::Sqlite(s) => RunStore::list_approvals(&**s, run_id.as_bytes()),
            #[cfg(feature = "postgres")]
            Runs::Postgres(p) => RunStore::list_approvals(&**p, run_id.as_bytes()),
        }
    }

    /// Whether a lease on the run is live, so that another process is working it: a holder is named and its expiry is after the clock that
    /// judges leases on this backend. SQLite judges by `here`, this host's clock (agentrt);
    /// PostgreSQL by its server's clock (decision 0083), so a host whose clock is off neither
    /// waits on a lease the Gate would take over nor sees one lapse early; `here` is not used.
    pub fn lease_live(&self, run_id: &str, here: Timestamp) -> Result<bool, StoreError> {
        let (lease, now) = match self {
            Runs::Sqlite(s) => (s.lease(run_id)?, here),
            #[cfg(feature = "postgres")]
            Runs::Postgres(p) => {
                let r = RunStore::get_run(&**p, run_id.as_bytes())?;
                let lease = Lease {
                    owner: r.lease_owner,
                    expires_at: r.lease_expires_at,
                };
                (lease, p.server_clock()?)
            }
        };
        Ok(!lease.owner.is_empty() && lease.expires_at > now)
    }
}
