//! A real crash in the middle of a tool call, for the demo and the tests: a driver whose tools
//! stop forever inside `call()` (after their effect landed, or before it) runs on its own tokio
//! runtime, which is shut down once the tool got there; the process's short lease then lapses,
//! exactly what a new process finds after the old one died. Nothing here writes to the run
//! database itself: every row is the runtime's.

use std::sync::Arc;
use std::time::Duration;

use crate::consumer::adapter::{ConsumerPolicy, ConsumerTool};
use crate::consumer::dispatch::Dispatcher;
use crate::runtime::agent::Agent;
use crate::runtime::driver::{Config, RuntimeError, default_limits};
use crate::runtime::store::{Store, StoreError};
use crate::runtime::tools::{Registry, Tool, ToolCall, ToolDef, ToolFuture};
use crate::runtime::types::Timestamp;

/// The lease owner of the driver that "crashes".
pub const CRASHED_LEASE_OWNER: &str = "countersign-demo-crashed";

/// Why the crash could not be staged. The demo turns it into its own error.
#[derive(Debug, thiserror::Error)]
pub enum CrashError {
    #[error("the run database failed: {0}")]
    Store(#[from] StoreError),
    #[error("the runtime refused or failed: {0}")]
    Runtime(#[from] RuntimeError),
    #[error("could not start the crashing driver's async runtime: {0}")]
    Io(#[from] std::io::Error),
    #[error("the crash did not happen as staged: {0}")]
    Unexpected(String),
}

/// The lease of the driver that "crashes": short, so a take-over need not wait 30 s.
pub const CRASHED_LEASE_TTL: Duration = Duration::from_millis(600);

/// A tool that reaches its crash point (after its effect, or before it), reports it, and
/// never returns.
struct Crashing {
    inner: Arc<dyn Tool>,
    effect_lands: bool,
    at_crash: tokio::sync::mpsc::UnboundedSender<()>,
}

impl Tool for Crashing {
    fn def(&self) -> ToolDef {
        self.inner.def()
    }
    fn call(&self, call: ToolCall) -> ToolFuture {
        let effect = self.effect_lands.then(|| self.inner.call(call));
        let at_crash = self.at_crash.clone();
        Box::pin(async move {
            if let Some(fut) = effect {
                let _outcome_never_recorded = fut.await;
            }
            let _ = at_crash.send(());
            std::future::pending().await
        })
    }
}

/// Starts run `run_id` (its backend session must already be recorded) under a driver whose
/// first tool call crashes, with the effect landed in the backend when `effect_lands`, and
/// returns once the dead driver's lease has lapsed. The run is left RUNNING with that step
/// `executing`; a resume by another driver takes it over.
pub fn crash_in_tool_call(
    store: &Arc<Store>,
    dispatcher: &Arc<Dispatcher>,
    agent: Arc<dyn Agent>,
    run_id: &str,
    goal: &str,
    effect_lands: bool,
) -> Result<(), CrashError> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tools = Registry::new();
    for c in dispatcher.catalog().contracts() {
        let inner: Arc<dyn Tool> = Arc::new(ConsumerTool::new(c.clone(), dispatcher.clone()));
        let tool = Crashing {
            inner,
            effect_lands,
            at_crash: tx.clone(),
        };
        tools.register(Arc::new(tool)).map_err(RuntimeError::from)?;
    }
    let driver = Config::new(
        store.clone(),
        tools,
        Arc::new(ConsumerPolicy::new(dispatcher.clone())),
    )
    .agent(agent)
    .lease_owner(CRASHED_LEASE_OWNER)
    .lease_ttl(CRASHED_LEASE_TTL)
    .build()?;
    let (id, goal) = (run_id.to_string(), goal.to_string());
    std::thread::scope(|sc| {
        sc.spawn(move || -> Result<(), CrashError> {
            // One thread runs every task of this "process", and only inside `block_on`: once
            // that returns, no task is in the middle of a poll. On a multi-thread runtime the
            // driver could still be inside a step on another worker when the runtime shut
            // down, see the crashed tool's task cancelled, and finish the run as if the tool
            // had failed (seen in tests/consumer_approval.rs under load).
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.spawn(async move {
                let _ = driver.start_with_id(&id, &goal, default_limits()).await;
            });
            let reached = rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(60), rx.recv()).await });
            // The "process" dies: every task of its runtime is dropped where it stands.
            rt.shutdown_background();
            match reached {
                Ok(Some(())) => Ok(()),
                _ => Err(CrashError::Unexpected(
                    "the crashing tool was never called".into(),
                )),
            }
        })
        .join()
        .unwrap_or_else(|_| {
            Err(CrashError::Unexpected(
                "the crashing thread panicked".into(),
            ))
        })
    })?;
    // Wait out the dead process's lease (a few hundred milliseconds, bounded).
    for _ in 0..500 {
        let lease = store.lease(run_id)?;
        if lease.owner.is_empty() || lease.expires_at < Timestamp::now() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(CrashError::Unexpected(format!(
        "the lease of crashed run {run_id} never lapsed"
    )))
}
