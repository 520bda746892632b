//! The example consumer wired to the runtime, as one process of a crash or stress trial sees
//! it: the run database, the consumer's backend (orders and the effect ledger), its
//! dispatcher, and a driver whose lease is short so that a process that dies is taken over in
//! well under a second.

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
use countersign::runtime::driver::{Config, Driver, default_limits};
use countersign::runtime::store::Store;
use countersign::runtime::types::{Run, Timestamp};

/// The lease of every harness process: short, so recovery after a SIGKILL waits little.
pub const LEASE_TTL: Duration = Duration::from_millis(400);

/// Every scenario the example consumer scripts.
pub fn scenario_names() -> Vec<&'static str> {
    scenarios::all().into_iter().map(|s| s.name).collect()
}

/// One process's view of a trial's two databases.
pub struct World {
    pub store: Arc<Store>,
    pub backend: Arc<Backend>,
    pub driver: Driver,
}

impl World {
    /// Opens (creating or migrating as agentrt's `OpenStore` does) the run database and opens
    /// the backend; the driver's lease owner is `owner`.
    pub fn open(run_db: &Path, backend_db: &Path, owner: &str) -> Result<World, String> {
        World::open_with_ttl(run_db, backend_db, owner, LEASE_TTL)
    }

    /// [`World::open`] with another lease TTL.
    pub fn open_with_ttl(
        run_db: &Path,
        backend_db: &Path,
        owner: &str,
        lease_ttl: Duration,
    ) -> Result<World, String> {
        let store = Arc::new(Store::open(run_db).map_err(|e| e.to_string())?);
        let backend = Arc::new(Backend::open(backend_db).map_err(|e| e.to_string())?);
        let catalog = Arc::new(Catalog::new()?);
        let dispatcher = Arc::new(Dispatcher::new(
            catalog,
            backend.clone(),
            ConsequencePolicy::default(),
            DispatcherOptions::default(),
        ));
        let mut cfg = Config::new(
            store.clone(),
            registry(&dispatcher).map_err(|e| e.to_string())?,
            Arc::new(ConsumerPolicy::new(dispatcher.clone())),
        )
        .agent(ScenarioAgent::by_session(backend.clone()));
        cfg.lease_owner = owner.to_string();
        cfg.lease_ttl = lease_ttl;
        let driver = Driver::new(cfg).map_err(|e| e.to_string())?;
        Ok(World {
            store,
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

    /// Waits (bounded) until nobody else holds the run's lease.
    pub fn wait_lease_lapsed(&self, run_id: &str) {
        for _ in 0..200 {
            match self.store.lease(run_id) {
                Ok(l) if l.owner.is_empty() || l.owner == self.driver.owner() => return,
                Ok(l) if l.expires_at < Timestamp::now() => return,
                Err(_) => return,
                Ok(_) => std::thread::sleep(Duration::from_millis(25)),
            }
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
