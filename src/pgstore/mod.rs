//! PostgreSQL as a second store, beside SQLite (issue 19, first slice; docs/postgres.md and
//! docs/decisions/0080): the URL and its redacted form, TLS, a versioned schema of its own
//! holding agentrt schema 6's rows byte for byte, the event chain's verification, and the
//! whole-database copy between SQLite and PostgreSQL; the operator's decisions (decision
//! 0082); the console's reads, `show`, `events`, `watch` and `stats`, and LISTEN/NOTIFY
//! (decision 0084); the runtime's own transitions through [`PgStore`]'s driver (decision
//! 0083), the MCP proxy's call index (decision 0085) and the console's count indexes
//! (decision 0086).

mod chain;
mod console;
pub mod copy;
mod drive;
mod error;
mod notify;
pub(crate) mod observe;
mod operate;
mod passfile;
mod proxy;
mod queue_order;
mod reads;
mod schema;
mod sequencer;
mod stats;
mod stmts;
mod tables;
mod tls;
mod url;
mod watch;

pub use chain::{ApprovalCheck, BATCH_BYTES, ChainCheck, Chained, EventRow};
pub use drive::PgLeaseHandle;
pub use error::PgError;
#[cfg(feature = "mcp")]
pub(crate) use error::detail as pg_detail;
pub use notify::{CHANNEL, Listener};
pub use operate::PgTx;
pub use schema::{PG_MIGRATIONS, PG_SCHEMA_VERSION};
pub use sequencer::{BATCH, Nudge, Sequencer};
pub use url::{PgUrl, REDACTED, SslMode, is_pg_url};

/// The client crate, for the crate's own tests and benches.
#[cfg(feature = "testing")]
pub use postgres;

use std::sync::{Mutex, MutexGuard};

use crate::runtime::store::ChainReport;
use error::PgCtx;
use stmts::Cached;

/// An open PostgreSQL run database: one synchronous connection, behind a mutex (as SQLite's
/// [`Store`](crate::runtime::store::Store) holds its one), so the operator's functions take it
/// shared through [`RunStore`](crate::runtime::store::RunStore).
pub struct PgStore {
    client: Mutex<stmts::Conn>,
    url: PgUrl,
    /// The connection [`PgStore::change_mark`] LISTENs on, opened at its first call.
    listener: Mutex<Option<Listener>>,
    /// The bench's baseline (`benches/drivers.rs`): a write transaction appends its events
    /// after the chain head it locks (the naive chain) instead of enqueuing them. Only
    /// [`PgStore::set_naive_chain`] (feature `testing`) sets it.
    naive_chain: bool,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgStore({})", self.url)
    }
}

/// Connects to `url` (its `sslmode`, its password or `PGPASSWORD` or the password file).
pub fn connect(url: &PgUrl) -> Result<postgres::Client, PgError> {
    let cfg = url.config()?;
    let tls = tls::connector(url)?;
    let mut client = cfg.connect(tls).map_err(|e| {
        let mut detail = error::detail(&e);
        // libpq warns of a password file it ignores; say it where it matters.
        if cfg.get_password().is_none()
            && let Some((file, mode)) = passfile::ignored()
        {
            detail.push_str(&format!(
                "; the password file {} was not read: group or others may read it (mode {mode:04o}; chmod 600 it)",
                crate::safetext::plain_line(file.to_string_lossy().as_bytes(), 200)
            ));
        }
        PgError::Connect {
            db: url.to_string(),
            detail,
        }
    })?;
    schema::check_encoding(&mut client, url)?;
    schema::check_search_path(&mut client, url)?;
    Ok(client)
}

/// Cancels the statement a [`PgStore`]'s connection is running ([`PgStore::canceller`]): a
/// console that quits stops its reads on the server at once instead of leaving them to run
/// until the server notices the closed connection. Clones share one target, which
/// [`Canceller::follow`] moves to the connection of a store opened anew.
#[derive(Clone)]
pub struct Canceller {
    token: std::sync::Arc<Mutex<postgres::CancelToken>>,
    url: PgUrl,
}

impl Canceller {
    /// Sends the cancel request (a connection of its own, with the URL's TLS settings). A
    /// connection running nothing is unaffected; one running a statement sees it fail with
    /// SQLSTATE 57014.
    pub fn cancel(&self) -> Result<(), PgError> {
        let token = self.token.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let tls = tls::connector(&self.url)?;
        token.cancel_query(tls).map_err(|e| PgError::Connect {
            db: self.url.to_string(),
            detail: error::detail(&e),
        })
    }

    /// Points this handle and all its clones at `store`'s connection: a reader that
    /// connected again after the server dropped it keeps the handle it gave out, which
    /// would otherwise cancel on a connection that is gone.
    pub fn follow(&self, store: &PgStore) {
        let token = store.lock().cancel_token();
        *self.token.lock().unwrap_or_else(|p| p.into_inner()) = token;
    }
}

impl PgStore {
    /// Connects and migrates to [`PG_SCHEMA_VERSION`] (one transaction; a newer schema is
    /// refused and nothing changes). Needs the owner role.
    pub fn open(url: &PgUrl) -> Result<PgStore, PgError> {
        PgStore::connect_then(url, schema::migrate)
    }

    /// Connects, migrates to [`PG_SCHEMA_VERSION`] as [`PgStore::open`] does, and says which
    /// version the database was at before (0: it had no schema). For `countersign migrate`,
    /// the owner's upgrade of a database an older build wrote.
    pub fn upgrade(url: &PgUrl) -> Result<i64, PgError> {
        schema::upgrade(&mut connect(url)?, url)
    }

    /// Connects to a database already at this build's version; never creates or migrates.
    pub fn open_existing(url: &PgUrl) -> Result<PgStore, PgError> {
        PgStore::connect_then(url, schema::check_version)
    }

    /// Connects, then lets `prepare` ready (or check) the schema before the store is handed out.
    fn connect_then(
        url: &PgUrl,
        prepare: impl FnOnce(&mut postgres::Client, &PgUrl) -> Result<(), PgError>,
    ) -> Result<PgStore, PgError> {
        let mut client = connect(url)?;
        prepare(&mut client, url)?;
        schema::check_no_foreign_code(&mut client, url)?;
        Ok(PgStore {
            client: Mutex::new(stmts::Conn::new(client)),
            url: url.clone(),
            listener: Mutex::new(None),
            naive_chain: false,
        })
    }

    /// The connection, held alone (a panic in another holder does not wedge the store: the
    /// client rolls back a transaction dropped without its commit).
    pub(crate) fn lock(&self) -> MutexGuard<'_, stmts::Conn> {
        self.client.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection, through the exclusive borrow.
    fn client_mut(&mut self) -> &mut stmts::Conn {
        self.client.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    /// A handle that asks the server to cancel whatever statement this store's connection
    /// is running, from any thread, without the connection's lock (which the running
    /// statement holds). Take it before handing the store to the thread that reads.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            token: std::sync::Arc::new(Mutex::new(self.lock().cancel_token())),
            url: self.url.clone(),
        }
    }

    /// Whether its connection is gone (the server closed it, or it broke); a store whose
    /// connection is closed answers every call with an error.
    pub fn is_closed(&self) -> bool {
        self.lock().is_closed()
    }

    /// The URL it was opened with (its `Display` is redacted).
    pub fn url(&self) -> &PgUrl {
        &self.url
    }

    /// The connection, for the crate's own tests and benches.
    #[cfg(feature = "testing")]
    pub fn client(&mut self) -> &mut postgres::Client {
        self.client_mut()
    }

    /// For the crate's tests: runs `sql` (no parameters) on this store's connection through
    /// its statement cache, and says how many statements the cache keeps after.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn run_cached(&self, sql: &str) -> Result<usize, PgError> {
        let mut conn = self.lock();
        conn.execute(sql, &[])
            .ctx(&self.url, "a test's statement")?;
        Ok(conn.kept())
    }

    /// For the crate's tests: runs `sql` as [`PgStore::run_cached`] does, inside a write
    /// transaction of this store's connection, and commits.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn run_cached_in_tx(&self, sql: &str) -> Result<usize, PgError> {
        let mut conn = self.lock();
        let mut tx = conn.begin(false).ctx(&self.url, "a test's begin")?;
        tx.execute(sql, &[]).ctx(&self.url, "a test's statement")?;
        tx.commit().ctx(&self.url, "a test's commit")?;
        Ok(conn.kept())
    }

    /// For the crate's tests: the statements prepared on this store's connection, as the
    /// server counts them (`pg_prepared_statements` of its session).
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn prepared_on_server(&self) -> Result<i64, PgError> {
        // The simple protocol: a statement of the extended one would count itself.
        let said = self
            .lock()
            .simple_query("SELECT count(*) FROM pg_prepared_statements")
            .ctx(&self.url, "count prepared statements")?;
        Ok(said
            .iter()
            .find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => r.get(0)?.parse().ok(),
                _ => None,
            })
            .unwrap_or(-1))
    }

    /// For the bench's baseline only: `on` makes every write transaction of this store (the
    /// driver's transitions, the operator's decisions) append its events after the chain head,
    /// locked until the transaction commits, as [`PgStore::append_event`] does, instead of
    /// enqueuing them for a sequencer (decision 0081). The chain stays valid (the head is
    /// locked either way); what it costs is every writer's commit waiting for the one before.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn set_naive_chain(&mut self, on: bool) {
        self.naive_chain = on;
    }

    /// The chain head as stored: the highest seq given and its hash (`(0, "")` when empty).
    pub fn chain_head(&mut self) -> Result<(i64, String), PgError> {
        let row = self
            .client_mut()
            .query_one("SELECT seq, hash FROM event_chain", &[])
            .ctx(&self.url, "chain head")?;
        Ok((row.get(0), row.get(1)))
    }

    /// Verifies the chain over `from..=to` (from < 1 = 1, to < 1 = the head) in one
    /// repeatable-read snapshot, and that the events reach the head `event_chain` records.
    pub fn verify_events(&mut self, from: i64, to: i64) -> Result<ChainReport, PgError> {
        let steps = ("verify: begin", "verify: end");
        self.in_tx(true, steps, |tx, url| chain::verify(tx, url, from, to))
    }

    /// Recomputes every approval's hash from its stored fields.
    pub fn verify_approvals(&mut self) -> Result<ApprovalCheck, PgError> {
        let steps = ("verify approvals: begin", "verify approvals: end");
        self.in_tx(true, steps, |tx, url| chain::verify_approvals(tx, url))
    }

    /// Rows that name a run `runs` does not hold, by table (only tables with any): a run's row
    /// deleted with the foreign keys dropped (the owner can), its events left intact on the
    /// chain, which the chain check alone cannot see.
    pub fn orphans(&mut self) -> Result<Vec<(&'static str, i64)>, PgError> {
        let mut found = Vec::new();
        for table in ["steps", "approvals", "model_calls", "events", "event_inbox"] {
            let n: i64 = self
                .client_mut()
                .query_one(
                    &format!(
                        "SELECT count(*) FROM {table} x \
                         WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = x.run_id)"
                    ),
                    &[],
                )
                .ctx(&self.url, "rows of no run")?
                .get(0);
            if n > 0 {
                found.push((table, n));
            }
        }
        Ok(found)
    }

    /// The stored hash of event `seq`, if it exists.
    pub fn event_hash(&mut self, seq: i64) -> Result<Option<String>, PgError> {
        Ok(self
            .client_mut()
            .query_opt("SELECT hash FROM events WHERE seq = $1", &[&seq])
            .ctx(&self.url, "event hash")?
            .map(|r| r.get(0)))
    }

    /// Appends one event after the chain head: the naive chain, the head row locked until
    /// this transaction commits (what `benches/pg_chain.rs` measures).
    pub fn append_event(
        &mut self,
        run_id: &str,
        step_id: &str,
        at: &str,
        kind: &str,
        payload: &str,
    ) -> Result<(i64, String), PgError> {
        let e = chain::NewEvent::new(run_id, step_id, at, kind, payload);
        let steps = ("append: begin", "append: commit");
        self.in_tx(false, steps, |tx, url| chain::append(tx, url, e))
    }

    /// Runs `work` in one transaction, committed when it returns `Ok`: a read-only
    /// repeatable-read snapshot, or (`snapshot` false) a read-write one at the server's
    /// default isolation. `steps` name its begin and commit in an error.
    fn in_tx<T>(
        &mut self,
        snapshot: bool,
        steps: (&'static str, &'static str),
        work: impl FnOnce(&mut stmts::Tx<'_>, &PgUrl) -> Result<T, PgError>,
    ) -> Result<T, PgError> {
        let url = self.url.clone();
        let mut tx = self.client_mut().begin(snapshot).ctx(&url, steps.0)?;
        let out = work(&mut tx, &url)?;
        tx.commit().ctx(&url, steps.1)?;
        Ok(out)
    }
}
