//! The driver: runs the step loop of spec 3.5 against the run database, pauses for approvals
//! (4.3), resumes (8.2, 8.3) and holds leases (7).
//!
//! Files: `ctx` (one run being driven: cache, writes, endings), `step` (start, record,
//! validate, end), `dispatch` (policy and pause), `execute` (tools), `run_loop` (the loop in
//! two halves), `gate` (the same halves for an external loop), `attach` (what a resume does
//! first, routing to) `resume` (8.2) or `recover` (8.3), `recheck` (the policy asked again, read-only), `worker` (resumes decided runs as
//! they are decided), `lease`, `limits`, `record` (payloads), `observe` (on PostgreSQL, events
//! handed to the observer once chained).

mod attach;
mod ctx;
mod db;
mod dispatch;
mod execute;
mod gate;
pub mod lease;
pub mod limits;
#[cfg(feature = "postgres")]
mod observe;
mod open;
mod recheck;
pub mod record;
mod recover;
mod resume;
mod run_loop;
mod step;
mod worker;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngCore;
use thiserror::Error;

use super::agent::Agent;
use super::clock::{self, Clock};
use super::json::JsonError;
use super::model::ModelSetup;
use super::policy::Policy;
use super::store::StoreError;
use super::tools::{Registry, RegistryError};
use super::types::{Event, Limits, Run};

pub(crate) use db::DbTx;
pub use db::RunDb;
pub use gate::{Gate, NextStep, Session, Verdict};
pub use lease::DEFAULT_LEASE_TTL;
#[cfg(feature = "postgres")]
pub use observe::CHAINED_WAIT;
pub use recheck::{NotRechecked, RecheckReport, RecheckScope, RecheckSpecs, Rechecked};
pub use recover::{INTERRUPTED_NOTICE, Reconcile, ReconcileError, Reconciliation};
pub use resume::verify_hash;
pub use worker::{SCAN_LIMIT, WorkEvent, WorkObserver, WorkOptions, WorkReport};

/// Receives every event the driver writes, once it is chained: after its transaction
/// committed on SQLite; on PostgreSQL once a sequencer has chained it, with its seq and hash
/// as stored in `events` (a write waits for that at most two seconds, `CHAINED_WAIT`; see
/// decision 0083 item 4). On PostgreSQL one driver's calls are made one at a time, with its
/// delivery lock held; an observer that writes through the same driver or Gate there gets that
/// write's events once its call has returned (the write does not wait for them). A panic in
/// the observer is caught: that event is not handed to it again, and the run goes on.
pub type Observer = Arc<dyn Fn(&Event) + Send + Sync>;

/// Generates ids (32 lowercase hex by default).
pub type IdGen = Arc<dyn Fn() -> String + Send + Sync>;

/// What the driver can fail with.
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// The database refused or failed: a read or write error, or a compare-and-set that found
    /// the run not as expected (see [`RuntimeError::is_run_state`] and the other tests below).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A tool was refused at registration. The driver never returns it; the conversion is
    /// there so that an embedder building a [`Registry`] can use `?` into this type.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The driver or a session was used in a way it does not allow, or lost track of its own
    /// work: e.g. a policy id that is too long or holds a control character, invalid limits,
    /// a Gate call out of order (no step open, a grant
    /// deferred twice), store work or a tool's task lost. Holds the reason.
    #[error("agentrt: {0}")]
    Config(String),
    /// A resume found an approved request for a tool this driver has not registered; nothing
    /// ran. Holds the tool's name.
    #[error("agentrt: approved tool {} is not registered", crate::runtime::json::go_quote(.0))]
    ApprovedToolNotRegistered(String),
    /// A resume found the granted approval's stored hash does not match its stored request
    /// (agentrt's `ErrApprovalHash`); nothing ran. Holds why.
    #[error("agentrt: approval hash does not match its recorded request: {0}")]
    ApprovalHash(String),
    /// A resume found a granted approval that no `approval.decided` event records as granted
    /// by the name its row holds (a row changed by hand, by a trigger, or read from another
    /// table than the runtime's); nothing ran. Holds why. Not agentrt's: the record a
    /// decision leaves in its own transaction is the event, the row only its state.
    #[error("agentrt: approval is not granted on record: {0}")]
    GrantNotRecorded(String),
    /// A value the driver had to record would not encode as Go does. Inside a run the driver
    /// ends the run `internal_error` on it, so nothing more executes and the run is not left
    /// RUNNING.
    #[error("agentrt: {context}: {err}")]
    Json {
        /// What was being encoded (e.g. `observation`).
        context: String,
        /// Why the encoder refused it.
        err: JsonError,
    },
    /// agentrt's `ErrSessionClosed`: a Gate session was used after it was closed.
    #[error("agentrt: session is closed")]
    SessionClosed,
    /// An operator action taken through the driver ([`Driver::cancel`]) was refused.
    #[error(transparent)]
    Operator(#[from] super::operator::OperatorError),
}

impl RuntimeError {
    /// The message with every id it names as stored (see [`crate::runtime::types::Said`]);
    /// `Display` is the same message with an id that is not UTF-8 written lossily.
    pub fn said(&self) -> crate::runtime::types::Said {
        match self {
            RuntimeError::Store(e) => e.said(),
            RuntimeError::Operator(e) => e.said(),
            other => other.to_string().into(),
        }
    }
    /// True when this is agentrt's `ErrRunState` (or `ErrRunLeased`, which matches it).
    pub fn is_run_state(&self) -> bool {
        matches!(self, RuntimeError::Store(e) if e.is_run_state())
    }
    /// True for `ErrRunLeased`.
    pub fn is_run_leased(&self) -> bool {
        matches!(self, RuntimeError::Store(StoreError::RunLeased { .. }))
    }
    /// True for `ErrLeaseLost`.
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, RuntimeError::Store(StoreError::LeaseLost { .. }))
    }
    /// True for `ErrNotFound`: an unknown run, approval, event or spec.
    pub fn is_not_found(&self) -> bool {
        matches!(self, RuntimeError::Store(StoreError::NotFound { .. }))
    }
}

/// The marker of a [`Config`] without an agent: it builds a [`Gate`] (the caller's loop
/// decides), not a [`Driver`]. [`Config::agent`] turns it into a `Config<Arc<dyn Agent>>`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoAgent;

/// The driver's configuration, and its builder. `A` says whether it has an agent: only a
/// `Config<Arc<dyn Agent>>` builds a [`Driver`], so a driver without an agent does not compile
/// (agentrt's `Config.Agent` is checked at run time instead; docs/architecture.md).
///
/// ```
/// # use std::sync::Arc;
/// # use countersign::runtime::agent::{self, ScriptedAgent};
/// # use countersign::runtime::driver::Config;
/// # use countersign::runtime::policy::DefaultPolicy;
/// # use countersign::runtime::store::Store;
/// # use countersign::runtime::tools::Registry;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// # let store = Arc::new(Store::open(dir.path().join("runs.db"))?);
/// let driver = Config::new(store.clone(), Registry::new(), Arc::new(DefaultPolicy))
///     .lease_owner("billing")
///     .agent(ScriptedAgent::new([agent::complete("{}")]))
///     .build()?;
/// let gate = Config::new(store, Registry::new(), Arc::new(DefaultPolicy)).gate()?;
/// # let _ = (driver, gate);
/// # Ok(()) }
/// ```
///
/// Without an agent there is no `build`:
///
/// ```compile_fail,E0599
/// # use std::sync::Arc;
/// # use countersign::runtime::driver::Config;
/// # use countersign::runtime::policy::DefaultPolicy;
/// # use countersign::runtime::store::Store;
/// # use countersign::runtime::tools::Registry;
/// # let store = Arc::new(Store::open("/nonexistent/runs.db").unwrap());
/// let driver = Config::new(store, Registry::new(), Arc::new(DefaultPolicy)).build();
/// ```
pub struct Config<A = NoAgent> {
    /// The run database: SQLite's `Store`, or (feature `postgres`) a `PgStore`.
    pub store: RunDb,
    /// The tools the agent may call; fixed for the driver's life.
    pub tools: Registry,
    /// What judges every tool call before it runs.
    pub policy: Arc<dyn Policy>,
    /// The agent: [`NoAgent`] until [`Config::agent`] sets one (a Gate needs none).
    pub agent: A,
    /// The model the agent's handle calls (optional).
    pub model: Option<ModelSetup>,
    /// Lease owner name; the owner is `name/` + 12 hex of a random id (empty: 32 hex).
    pub lease_owner: String,
    /// Lease TTL (zero: 30 s).
    pub lease_ttl: Duration,
    /// The clock for everything recorded (not leases). `None`: the wall clock.
    pub now: Option<Clock>,
    /// This process's clock for leases. SQLite judges leases by it; PostgreSQL judges them
    /// by its server's clock and this only times the process's own renewals. `None`: the
    /// wall clock.
    pub lease_clock: Option<Clock>,
    /// On PostgreSQL, whether the driver runs a sequencer that chains the events committed to
    /// the inbox (decision 0083; default true). Ignored on SQLite, which chains at once.
    pub chain_events: bool,
    /// Receives the events the driver writes once they are chained (see [`Observer`]).
    pub observer: Option<Observer>,
    /// Id generator (tests); `None`: random 32 hex.
    pub ids: Option<IdGen>,
    /// Crash-recovery hook for a resumed RUNNING/INTERRUPTED run (spec 8.3).
    pub reconcile: Option<Arc<dyn Reconcile>>,
}

impl Config<NoAgent> {
    /// A configuration with no agent and the optional parts left empty.
    pub fn new(
        store: impl Into<RunDb>,
        tools: Registry,
        policy: Arc<dyn Policy>,
    ) -> Config<NoAgent> {
        Config {
            store: store.into(),
            tools,
            policy,
            agent: NoAgent,
            model: None,
            lease_owner: String::new(),
            lease_ttl: Duration::ZERO,
            now: None,
            lease_clock: None,
            chain_events: true,
            observer: None,
            ids: None,
            reconcile: None,
        }
    }

    /// Builds a [`Gate`] (as [`Gate::new`]).
    pub fn gate(self) -> Result<Gate, RuntimeError> {
        Gate::new(self)
    }
}

impl Config<Arc<dyn Agent>> {
    /// Builds a [`Driver`] (as [`Driver::new`]).
    pub fn build(self) -> Result<Driver, RuntimeError> {
        Driver::new(self)
    }
}

/// A builder's setters, one a line: `name(arg: Type) => field = value;`, each taking the
/// configuration and giving it back with `field` set.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty) => $field:ident = $value:expr;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.$field = $value;
                self
            }
        )*
    };
}

impl<A> Config<A> {
    /// Sets the agent: the configuration now builds a [`Driver`].
    pub fn agent(self, agent: Arc<dyn Agent>) -> Config<Arc<dyn Agent>> {
        self.swap_agent(agent).0
    }

    setters! {
        /// Sets the model the agent's handle calls.
        model(model: ModelSetup) => model = Some(model);
        /// Sets the lease owner's name (the owner is `name/` + 12 hex of a random id).
        lease_owner(name: impl Into<String>) => lease_owner = name.into();
        /// Sets the lease TTL (zero: 30 s).
        lease_ttl(ttl: Duration) => lease_ttl = ttl;
        /// Sets the clock for everything recorded (not leases).
        clock(now: Clock) => now = Some(now);
        /// Sets this process's clock for leases (tests: a host whose clock is off). SQLite
        /// judges leases by it; PostgreSQL by its server's clock.
        lease_clock(clock: Clock) => lease_clock = Some(clock);
        /// On PostgreSQL, whether this driver chains the events it and others commit (a
        /// sequencer thread on a connection of its own; default true). Off, another process's
        /// sequencer must run, or events stay in the inbox unchained.
        chain_events(on: bool) => chain_events = on;
        /// Sets what receives the driver's events once they are chained (see [`Observer`]).
        observer(observer: Observer) => observer = Some(observer);
        /// Sets the id generator.
        ids(ids: IdGen) => ids = Some(ids);
        /// Sets the crash-recovery hook (spec 8.3).
        reconcile(hook: Arc<dyn Reconcile>) => reconcile = Some(hook);
    }

    /// The configuration without its agent, and the agent.
    fn split(self) -> (Config<NoAgent>, A) {
        self.swap_agent(NoAgent)
    }

    /// The same configuration with `agent` in place of its own, and its own.
    fn swap_agent<B>(self, agent: B) -> (Config<B>, A) {
        let Config {
            store,
            tools,
            policy,
            agent: own,
            model,
            lease_owner,
            lease_ttl,
            now,
            lease_clock,
            chain_events,
            observer,
            ids,
            reconcile,
        } = self;
        let cfg = Config {
            store,
            tools,
            policy,
            agent,
            model,
            lease_owner,
            lease_ttl,
            now,
            lease_clock,
            chain_events,
            observer,
            ids,
            reconcile,
        };
        (cfg, own)
    }
}

pub(crate) struct Inner {
    pub store: RunDb,
    pub tools: Registry,
    pub policy: Arc<dyn Policy>,
    pub policy_id: String,
    pub model: Option<ModelSetup>,
    pub owner: String,
    pub lease_ttl: Duration,
    pub now: Clock,
    pub lease_clock: Clock,
    pub observer: Option<Observer>,
    pub ids: IdGen,
    pub reconcile: Option<Arc<dyn Reconcile>>,
    /// Runs this driver is executing (one loop per run per driver).
    pub claims: Mutex<HashSet<String>>,
    /// On PostgreSQL, the sequencer this driver runs (stopped when the driver is dropped).
    pub _chain: Option<Chainer>,
    /// On PostgreSQL with an observer, the events written and not yet handed on because they
    /// are not chained yet.
    #[cfg(feature = "postgres")]
    pub owed: Option<observe::Owed>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // What is still owed to the observer is handed on once the driver's own sequencer has
        // drained the inbox (its drop chains what is committed).
        #[cfg(feature = "postgres")]
        if let (Some(owed), Some(o), Some(pg)) = (&self.owed, &self.observer, self.store.postgres())
        {
            drop(self._chain.take());
            db::pg(|| owed.flush(pg, o));
        }
    }
}

/// A sequencer the driver runs on PostgreSQL; dropped, it chains what is committed and stops.
pub(crate) struct Chainer {
    #[cfg(feature = "postgres")]
    seq: Option<crate::pgstore::Sequencer>,
}

impl Chainer {
    /// What wakes the sequencer out of its idle back-off.
    #[cfg(feature = "postgres")]
    fn nudger(&self) -> Option<crate::pgstore::Nudge> {
        self.seq.as_ref().map(crate::pgstore::Sequencer::nudger)
    }
}

impl Drop for Chainer {
    fn drop(&mut self) {
        #[cfg(feature = "postgres")]
        if let Some(s) = self.seq.take() {
            let _ = db::pg(|| s.stop());
        }
    }
}

/// Starts the sequencer of a driver on PostgreSQL that chains events (none on SQLite).
fn chainer(db: &RunDb, on: bool) -> Result<Option<Chainer>, RuntimeError> {
    #[cfg(feature = "postgres")]
    if let Some(p) = db.postgres().filter(|_| on) {
        let seq = db::pg(|| crate::pgstore::Sequencer::spawn_retrying(p.url()))
            .map_err(|e| RuntimeError::Store(StoreError::Backend(e.to_string())))?;
        return Ok(Some(Chainer { seq: Some(seq) }));
    }
    let _ = (db, on);
    Ok(None)
}

impl Inner {
    /// Checks the configuration (the policy id) and makes the state the driver and the Gate
    /// share.
    fn new(cfg: Config<NoAgent>) -> Result<Inner, RuntimeError> {
        let policy_id = cfg.policy.id().unwrap_or_default();
        super::policy::check_policy_id(&policy_id).map_err(RuntimeError::Config)?;
        let ids = cfg.ids.unwrap_or_else(|| Arc::new(random_id));
        let own = random_id();
        let owner = if cfg.lease_owner.is_empty() {
            own
        } else {
            format!("{}/{}", cfg.lease_owner, &own[..12])
        };
        let chain = chainer(&cfg.store, cfg.chain_events)?;
        // On PostgreSQL an observer gets events once chained: the writes record where their
        // events will sit in their run's chain, to read them back from there.
        #[cfg(feature = "postgres")]
        let owed = (cfg.observer.is_some() && cfg.store.postgres().is_some())
            .then(|| observe::Owed::new(chain.as_ref().and_then(Chainer::nudger)));
        #[cfg(feature = "postgres")]
        let store = match &owed {
            Some(o) => cfg.store.owing(o.pushed()),
            None => cfg.store,
        };
        #[cfg(not(feature = "postgres"))]
        let store = cfg.store;
        Ok(Inner {
            store,
            tools: cfg.tools,
            policy: cfg.policy,
            policy_id,
            model: cfg.model,
            owner,
            lease_ttl: if cfg.lease_ttl.is_zero() {
                DEFAULT_LEASE_TTL
            } else {
                cfg.lease_ttl
            },
            now: cfg.now.unwrap_or_else(clock::wall),
            lease_clock: cfg.lease_clock.unwrap_or_else(clock::wall),
            observer: cfg.observer,
            ids,
            reconcile: cfg.reconcile,
            claims: Mutex::new(HashSet::new()),
            _chain: chain,
            #[cfg(feature = "postgres")]
            owed,
        })
    }

    pub fn now(&self) -> super::types::Timestamp {
        (self.now)()
    }
    pub fn id(&self) -> String {
        (self.ids)()
    }
    /// This process's lease clock now.
    pub fn lease_now(&self) -> super::types::Timestamp {
        (self.lease_clock)()
    }
    /// The expiry this process would stamp now, by its own lease clock.
    pub fn lease_expiry(&self) -> super::types::Timestamp {
        self.lease_now().add_nanos(lease::ttl_ns(self.lease_ttl))
    }
    /// Hands a write's events to the observer: at once when they are chained (SQLite), else
    /// once chained (PostgreSQL, `observe`).
    pub(crate) fn deliver(&self, w: db::Written) {
        let Some(o) = &self.observer else {
            return;
        };
        #[cfg(feature = "postgres")]
        if let (true, Some(owed), Some(pg)) = (w.owed, &self.owed, self.store.postgres()) {
            return db::pg(|| owed.deliver(pg, o));
        }
        for e in &w.events {
            hand_on(o, e);
        }
    }
}

/// Hands one event to the observer. A panic in it is caught (the panic hook has reported it):
/// that event is not handed on again, and the write it observed, committed already, stands
/// and the run goes on.
pub(crate) fn hand_on(o: &Observer, e: &Event) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| o(e)));
}

/// Runs store work (each commit fsyncs; a lock wait can last the busy timeout) off the
/// runtime's async workers, so a run waiting on SQLite never stalls the runtime's other tasks
/// (docs/decisions/0005):
/// - on a multi-thread runtime, in place (`block_in_place`): this worker hands its other tasks
///   to another worker and runs `f` itself, with no round trip to another thread; the cost is
///   that futures polled inside this same task (a `join!`) wait for `f`, as they would for any
///   synchronous call; spawn them as tasks to run them side by side;
/// - on a current-thread runtime (whose one thread cannot hand its tasks on) or another
///   flavour, on tokio's blocking pool;
/// - outside a runtime, on this thread.
///
/// A panic in `f` is resumed here.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RuntimeError> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => return Ok(tokio::task::block_in_place(f)),
        Ok(_) => {}
        Err(_) => return Ok(f()),
    }
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => Ok(v),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(RuntimeError::Config(format!(
            "store work was cancelled: {e}"
        ))),
    }
}

/// Runs `f` (store work) from a synchronous call such as a Gate session's `step`: on a
/// multi-thread tokio runtime's worker the runtime is first told this thread will block
/// (`block_in_place`), so its other tasks move to another worker; elsewhere `f` just runs.
pub(crate) fn off_worker<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Random 32 lowercase hex (128 bits).
pub fn random_id() -> String {
    let mut b = [0u8; 16];
    rand::rng().fill_bytes(&mut b);
    hex::encode(b)
}

/// The step loop for runs on one database.
#[derive(Clone)]
pub struct Driver {
    pub(crate) inner: Arc<Inner>,
    agent: Arc<dyn Agent>,
}

impl Driver {
    /// Builds a driver. The registry has already refused bad tools; the policy id, if any,
    /// must be at most 256 bytes without control characters. The configuration must have an
    /// agent ([`Config::agent`]): without one this does not compile.
    pub fn new(cfg: Config<Arc<dyn Agent>>) -> Result<Driver, RuntimeError> {
        let (cfg, agent) = cfg.split();
        Ok(Driver {
            inner: Arc::new(Inner::new(cfg)?),
            agent,
        })
    }

    /// This driver's lease owner.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// The database this driver writes to.
    pub fn store(&self) -> &RunDb {
        &self.inner.store
    }

    /// Creates a run with a fresh id and drives it until it ends or pauses.
    ///
    /// A run whose policy asks for a person comes back paused, and nothing has run:
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::sync::atomic::{AtomicUsize, Ordering};
    /// # use std::time::Duration;
    /// # use countersign::runtime::agent::{self, Agent, DecideFuture, StepInput};
    /// # use countersign::runtime::driver::{Config, Driver, default_limits};
    /// # use countersign::runtime::operator;
    /// # use countersign::runtime::policy::{
    /// #     self, FnPolicy, PolicyDecision, PolicyError, PolicyRequest, RunView,
    /// # };
    /// # use countersign::runtime::store::Store;
    /// # use countersign::runtime::tools::{FnTool, Registry, SideEffect, ToolDef, ToolOutput};
    /// # use countersign::runtime::types::{RunStatus, Timestamp};
    /// # struct Refunder;
    /// # impl Agent for Refunder {
    /// #     fn decide(&self, input: StepInput) -> DecideFuture {
    /// #         let d = match input.steps.len() {
    /// #             0 => agent::tool_call("refund", r#"{"order":"A-1","cents":500}"#),
    /// #             _ => agent::complete("{}"),
    /// #         };
    /// #         Box::pin(async move { Ok(d) })
    /// #     }
    /// # }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// # let store = Arc::new(Store::open(dir.path().join("runs.db"))?);
    /// # let ran = Arc::new(AtomicUsize::new(0));
    /// # let counter = ran.clone();
    /// # let mut tools = Registry::new();
    /// # tools.register(FnTool::new(
    /// #     ToolDef {
    /// #         name: "refund".into(),
    /// #         description: "refund an order".into(),
    /// #         input_schema: br#"{"type":"object"}"#.to_vec(),
    /// #         side_effect: SideEffect::RemoteMutation,
    /// #         timeout: Duration::from_secs(5),
    /// #         terminal: false,
    /// #     },
    /// #     move |_| {
    /// #         counter.fetch_add(1, Ordering::SeqCst);
    /// #         Box::pin(async { Ok(ToolOutput::default()) })
    /// #     },
    /// # ))?;
    /// // Every refund waits for a person; the approval binds the request shown to them.
    /// fn review(req: &PolicyRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
    ///     policy::need_approval("refund", "refunds need a person", &req.args, &req.args)
    /// }
    /// let driver = Config::new(store.clone(), tools, Arc::new(FnPolicy(review)))
    ///     .agent(Arc::new(Refunder))
    ///     .build()?;
    /// let rt = tokio::runtime::Runtime::new()?;
    /// let run = rt.block_on(driver.start("refund order A-1", default_limits()))?;
    /// assert_eq!(run.status, RunStatus::WaitingForApproval);
    /// assert_eq!(ran.load(Ordering::SeqCst), 0, "the refund waits for the decision");
    /// # Ok(()) }
    /// ```
    pub async fn start(&self, goal: &str, limits: Limits) -> Result<Run, RuntimeError> {
        let id = self.inner.id();
        self.start_with_id(&id, goal, limits).await
    }

    /// Creates a run with a caller-chosen id and drives it.
    pub async fn start_with_id(
        &self,
        id: &str,
        goal: &str,
        limits: Limits,
    ) -> Result<Run, RuntimeError> {
        let agent = self.agent.clone();
        let (inner, id_owned, goal_owned) = (self.inner.clone(), id.to_string(), goal.to_string());
        let cx =
            blocking(move || ctx::RunCtx::create(inner, &id_owned, &goal_owned, limits)).await??;
        run_loop::drive(cx, agent).await
    }

    /// Resumes a run: a WAITING run whose latest approval was granted (8.2), or a
    /// RUNNING/INTERRUPTED run whose previous driver stopped (8.3).
    ///
    /// After a reviewer approved the request they were shown, the resume runs exactly that
    /// request, once, and the agent goes on:
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::sync::atomic::{AtomicUsize, Ordering};
    /// # use std::time::Duration;
    /// # use countersign::runtime::agent::{self, Agent, DecideFuture, StepInput};
    /// # use countersign::runtime::driver::{Config, Driver, default_limits};
    /// # use countersign::runtime::operator;
    /// # use countersign::runtime::policy::{
    /// #     self, FnPolicy, PolicyDecision, PolicyError, PolicyRequest, RunView,
    /// # };
    /// # use countersign::runtime::store::Store;
    /// # use countersign::runtime::tools::{FnTool, Registry, SideEffect, ToolDef, ToolOutput};
    /// # use countersign::runtime::types::{RunStatus, Timestamp};
    /// # struct Refunder;
    /// # impl Agent for Refunder {
    /// #     fn decide(&self, input: StepInput) -> DecideFuture {
    /// #         let d = match input.steps.len() {
    /// #             0 => agent::tool_call("refund", r#"{"order":"A-1","cents":500}"#),
    /// #             _ => agent::complete("{}"),
    /// #         };
    /// #         Box::pin(async move { Ok(d) })
    /// #     }
    /// # }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// # let store = Arc::new(Store::open(dir.path().join("runs.db"))?);
    /// # let ran = Arc::new(AtomicUsize::new(0));
    /// # let counter = ran.clone();
    /// # let mut tools = Registry::new();
    /// # tools.register(FnTool::new(
    /// #     ToolDef {
    /// #         name: "refund".into(),
    /// #         description: "refund an order".into(),
    /// #         input_schema: br#"{"type":"object"}"#.to_vec(),
    /// #         side_effect: SideEffect::RemoteMutation,
    /// #         timeout: Duration::from_secs(5),
    /// #         terminal: false,
    /// #     },
    /// #     move |_| {
    /// #         counter.fetch_add(1, Ordering::SeqCst);
    /// #         Box::pin(async { Ok(ToolOutput::default()) })
    /// #     },
    /// # ))?;
    /// // Every refund waits for a person; the approval binds the request shown to them.
    /// fn review(req: &PolicyRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
    ///     policy::need_approval("refund", "refunds need a person", &req.args, &req.args)
    /// }
    /// let driver = Config::new(store.clone(), tools, Arc::new(FnPolicy(review)))
    ///     .agent(Arc::new(Refunder))
    ///     .build()?;
    /// let rt = tokio::runtime::Runtime::new()?;
    /// let paused = rt.block_on(driver.start("refund order A-1", default_limits()))?;
    /// let pending = operator::pending_approval(&store, &paused.id, None)?;
    /// operator::approve_shown(&store, &paused.id, &pending.id, &pending.hash,
    ///     "alice", "checked the order", Timestamp::now())?;
    /// let done = rt.block_on(driver.resume(&paused.id))?;
    /// assert_eq!(done.status, RunStatus::Completed);
    /// assert_eq!(ran.load(Ordering::SeqCst), 1, "the approved request ran once");
    /// # Ok(()) }
    /// ```
    pub async fn resume(&self, run_id: &str) -> Result<Run, RuntimeError> {
        let agent = self.agent.clone();
        match attach::attach(self.inner.clone(), run_id, false).await? {
            resume::Attached::Done(run) => Ok(*run),
            resume::Attached::Continue(cx, first) => run_loop::drive_from(*cx, agent, first).await,
            resume::Attached::Grant(cx, d) => match blocking(move || cx.run_grant(*d)).await?? {
                resume::Attached::Continue(cx, first) => {
                    run_loop::drive_from(*cx, agent, first).await
                }
                resume::Attached::Done(run) => Ok(*run),
                resume::Attached::Grant(..) => {
                    Err(RuntimeError::Config("a grant was deferred twice".into()))
                }
            },
        }
    }

    /// Operator cancel on the driver's clock (`Driver.Cancel`): never overwritten by a live
    /// loop, which returns the cancelled run at its next write.
    pub fn cancel(&self, run_id: &str, by: &str, note: &str) -> Result<Run, RuntimeError> {
        self.inner
            .store
            .cancel(run_id, by, note, self.inner.now())
            .map(|c| c.run)
            .map_err(RuntimeError::from)
    }
}

/// Validates limits (spec 14.1).
pub fn validate_limits(l: &Limits) -> Result<(), RuntimeError> {
    if l.max_steps <= 0 {
        return Err(RuntimeError::Config(
            "limits: max_steps must be positive".into(),
        ));
    }
    if l.max_consecutive_tool_failures <= 0 {
        return Err(RuntimeError::Config(
            "limits: max_consecutive_tool_failures must be positive".into(),
        ));
    }
    if l.loop_threshold <= 0 {
        return Err(RuntimeError::Config(
            "limits: loop_threshold must be positive".into(),
        ));
    }
    Ok(())
}

/// agentrt's `DefaultLimits()`: 50 steps, 3 consecutive failures, loop threshold 3.
pub fn default_limits() -> Limits {
    Limits {
        max_steps: 50,
        max_consecutive_tool_failures: 3,
        loop_threshold: 3,
        ..Limits::default()
    }
}
