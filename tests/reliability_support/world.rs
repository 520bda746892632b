//! The example consumer wired to the runtime, as one process of a crash or stress trial sees
//! it: the run database (a SQLite file or, with the `postgres` feature, a PostgreSQL URL), the
//! consumer's backend (orders and the effect ledger), its dispatcher, and a driver whose lease
//! is short so that a process that dies is taken over in well under a second. The harnesses
//! reach the run database through [`World`]'s methods, which do the same on either backend
//! (the operator's functions are the same code on both, decision 0082).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use countersign::consumer::adapter::{ConsumerPolicy, ScenarioAgent, registry};
use countersign::consumer::backend::{Backend, SEED};
use countersign::consumer::dispatch::{Dispatcher, DispatcherOptions};
use countersign::consumer::policy::ConsequencePolicy;
use countersign::consumer::scenarios;
use countersign::consumer::session::Session;
use countersign::consumer::tools::Catalog;
use countersign::runtime::driver::{Config, Driver, RunDb, default_limits};
use countersign::runtime::operator::{self, OperatorError};
// Without PostgreSQL, SQLite's `Store` has the same reads as inherent methods.
#[cfg_attr(not(feature = "postgres"), allow(unused_imports))]
use countersign::runtime::store::RunStore;
use countersign::runtime::store::Store;
use countersign::runtime::types::{Approval, Run, Timestamp};

/// The lease of every harness process: short, so recovery after a SIGKILL waits little.
pub const LEASE_TTL: Duration = Duration::from_millis(400);

/// Every scenario the example consumer scripts.
pub fn scenario_names() -> Vec<&'static str> {
    scenarios::all().into_iter().map(|s| s.name).collect()
}

/// A trial's run database: a SQLite file, or a PostgreSQL URL.
#[derive(Clone, Debug)]
pub enum RunDbAt {
    Sqlite(std::path::PathBuf),
    #[cfg(feature = "postgres")]
    Pg(String),
}

/// The opened run database of one process.
#[derive(Clone)]
pub enum Db {
    Lite(Arc<Store>),
    #[cfg(feature = "postgres")]
    Pg(Arc<countersign::pgstore::PgStore>),
}

/// `$body` with `$s` bound to the store as a `&impl RunStore`, on either backend.
macro_rules! on_store {
    ($db:expr, $s:ident => $body:expr) => {
        match $db {
            Db::Lite(x) => {
                let $s = &**x;
                $body
            }
            #[cfg(feature = "postgres")]
            Db::Pg(x) => {
                let $s = &**x;
                off(|| $body)
            }
        }
    };
}

/// Runs `f`, a call of PostgreSQL's synchronous client (which blocks on a runtime of its
/// own), from an async harness too: inside a runtime the thread is handed on first.
#[cfg(feature = "postgres")]
fn off<T>(f: impl FnOnce() -> T) -> T {
    if tokio::runtime::Handle::try_current().is_ok() {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// One process's view of a trial's two databases.
pub struct World {
    pub db: Db,
    pub backend: Arc<Backend>,
    pub driver: Driver,
}

impl World {
    /// Opens (creating or migrating as agentrt's `OpenStore` does) the run database and opens
    /// the backend; the driver's lease owner is `owner`.
    pub fn open(run_db: &Path, backend_db: &Path, owner: &str) -> Result<World, String> {
        World::open_with_ttl(run_db, backend_db, owner, LEASE_TTL)
    }

    /// [`World::open_with_ttl`] on either backend.
    pub fn open_at(
        at: &RunDbAt,
        backend_db: &Path,
        owner: &str,
        lease_ttl: Duration,
    ) -> Result<World, String> {
        let db = match at {
            RunDbAt::Sqlite(p) => Db::Lite(Arc::new(Store::open(p).map_err(|e| e.to_string())?)),
            #[cfg(feature = "postgres")]
            RunDbAt::Pg(url) => {
                let url = countersign::pgstore::PgUrl::parse(url).map_err(|e| e.to_string())?;
                Db::Pg(Arc::new(
                    countersign::pgstore::PgStore::open(&url).map_err(|e| e.to_string())?,
                ))
            }
        };
        World::with_db(db, backend_db, owner, lease_ttl)
    }

    /// [`World::open`] with another lease TTL.
    pub fn open_with_ttl(
        run_db: &Path,
        backend_db: &Path,
        owner: &str,
        lease_ttl: Duration,
    ) -> Result<World, String> {
        World::open_at(
            &RunDbAt::Sqlite(run_db.to_path_buf()),
            backend_db,
            owner,
            lease_ttl,
        )
    }

    fn with_db(
        db: Db,
        backend_db: &Path,
        owner: &str,
        lease_ttl: Duration,
    ) -> Result<World, String> {
        let backend = Arc::new(Backend::open(backend_db).map_err(|e| e.to_string())?);
        let catalog = Arc::new(Catalog::new()?);
        let dispatcher = Arc::new(Dispatcher::new(
            catalog,
            backend.clone(),
            ConsequencePolicy::default(),
            DispatcherOptions::default(),
        ));
        let run_db: RunDb = match &db {
            Db::Lite(s) => s.clone().into(),
            #[cfg(feature = "postgres")]
            Db::Pg(s) => s.clone().into(),
        };
        let mut cfg = Config::new(
            run_db,
            registry(&dispatcher).map_err(|e| e.to_string())?,
            Arc::new(ConsumerPolicy::new(dispatcher.clone())),
        )
        .agent(ScenarioAgent::by_session(backend.clone()));
        cfg.lease_owner = owner.to_string();
        cfg.lease_ttl = lease_ttl;
        let driver = Driver::new(cfg).map_err(|e| e.to_string())?;
        Ok(World {
            db,
            backend,
            driver,
        })
    }

    /// Puts the seeded orders back as they were seeded (nothing refunded, seeded shipping
    /// status), so that a long trial keeps meeting refunds that pause for a person instead of
    /// refunds the order no longer allows. The ledger keeps every effect.
    pub fn reset_orders(&self) -> Result<(), String> {
        let sql: String = SEED
            .iter()
            .map(|(id, _, _, status)| {
                format!(
                    "UPDATE orders SET refunded_cents = 0, status = '{status}' WHERE id = '{id}';"
                )
            })
            .collect();
        self.backend.execute_raw(&sql).map_err(|e| e.to_string())
    }

    /// Records the scenario's session and drives a new run `id` until it ends or pauses.
    pub async fn start(&self, id: &str, scenario: &str) -> Result<Run, String> {
        let s = scenarios::named(scenario).ok_or_else(|| format!("no scenario {scenario}"))?;
        self.backend
            .put_session(&Session::full(id, s.user), s.name)
            .map_err(|e| e.to_string())?;
        self.driver
            .start_with_id(id, &s.goal, default_limits())
            .await
            .map_err(|e| e.to_string())
    }

    /// Waits (bounded) until nobody else holds the run's lease (judged by the store's clock:
    /// the server's on PostgreSQL).
    pub fn wait_lease_lapsed(&self, run_id: &str) {
        for _ in 0..200 {
            let now: Result<Timestamp, countersign::runtime::store::StoreError> = match &self.db {
                Db::Lite(_) => Ok(Timestamp::now()),
                #[cfg(feature = "postgres")]
                Db::Pg(s) => off(|| s.server_clock()),
            };
            match (self.get_run(run_id), now) {
                (Ok(r), _) if r.lease_owner.is_empty() || r.lease_owner == self.driver.owner() => {
                    return;
                }
                (Ok(r), Ok(now)) if r.lease_expires_at < now => return,
                (Err(_), _) | (_, Err(_)) => return,
                (Ok(_), Ok(_)) => std::thread::sleep(Duration::from_millis(25)),
            }
        }
    }

    /// The run's row.
    pub fn get_run(&self, run_id: &str) -> Result<Run, String> {
        on_store!(&self.db, s => s.get_run(run_id.as_bytes()).map_err(|e| e.to_string()))
    }

    /// The run's approvals in insertion order.
    pub fn list_approvals(&self, run_id: &str) -> Result<Vec<Approval>, String> {
        on_store!(&self.db, s => s.list_approvals(run_id.as_bytes()).map_err(|e| e.to_string()))
    }

    /// The newest `limit` runs.
    pub fn runs(&self, limit: i64) -> Result<Vec<Run>, String> {
        on_store!(&self.db, s => s
            .runs_page_by_key("", None, 0, limit)
            .map(|p| p.items)
            .map_err(|e| e.to_string()))
    }

    /// (run, approval) for the pending approvals of the newest 200 waiting runs.
    pub fn pending_pairs(&self) -> Result<Vec<(String, String)>, String> {
        on_store!(&self.db, s => {
            let waiting = s
                .runs_page_by_key("WAITING_FOR_APPROVAL", None, 0, 200)
                .map_err(|e| e.to_string())?
                .items;
            let ids: Vec<&[u8]> = waiting.iter().map(|r| r.id.as_bytes()).collect();
            let pending = s
                .pending_approval_ids_of(&ids, 10)
                .map_err(|e| e.to_string())?;
            Ok(pending
                .into_iter()
                .flat_map(|(run, ids)| {
                    let run = run.lossy().into_owned();
                    ids.into_iter()
                        .map(move |a| (run.clone(), a.lossy().into_owned()))
                })
                .collect())
        })
    }

    /// The operator approves (`approve`) or rejects a pending approval.
    pub fn decide(
        &self,
        run: &str,
        approval: &str,
        approve: bool,
        by: &str,
        note: &str,
    ) -> Result<(), OperatorError> {
        let now = Timestamp::now();
        on_store!(&self.db, s => if approve {
            operator::approve(s, run, approval, by, note, now).map(|_| ())
        } else {
            operator::reject(s, run, approval, by, note, now).map(|_| ())
        })
    }

    /// The operator cancels a run.
    pub fn cancel(&self, run: &str, by: &str, note: &str) -> Result<(), OperatorError> {
        let now = Timestamp::now();
        on_store!(&self.db, s => operator::cancel(s, run, by, note, now).map(|_| ()))
    }

    /// The SQLite store (the SQLite harnesses' console reads), if this is one.
    pub fn sqlite(&self) -> Option<&Arc<Store>> {
        match &self.db {
            Db::Lite(s) => Some(s),
            #[cfg(feature = "postgres")]
            Db::Pg(_) => None,
        }
    }
}

/// A small tokio runtime for one harness process.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime")
}
