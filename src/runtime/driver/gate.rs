//! The Gate (spec 8.4): the same step code for a consumer that owns its loop. A [`Session`]
//! holds the run's lease, at most one open step, and refuses calls once it is over.
//!
//! `begin` creates the run (as `start_with_id` does before its loop); `attach` does what
//! `resume` does before its loop. `step` checks the limits and opens a step; `propose`
//! records and validates a decision and asks the policy, answering with a [`Verdict`] (an
//! `Allowed` verdict writes nothing more: the step is still deciding and nothing runs);
//! `execute` writes the tool start in one transaction that compare-and-sets on the lease and
//! the run's state, then runs exactly the recorded request the verdict allowed; `fail` ends the
//! step as an agent error; `close` releases the lease. Once the lease is lost every later call
//! is refused with `ErrLeaseLost`.

use std::sync::Arc;

use super::ctx::{RunCtx, Stop};
use super::dispatch::Allowed;
use super::execute::execute;
use super::open::{Open, open_step};
use super::resume::{self, Attached};
use super::run_loop::{Next, decided};
use super::{Config, Inner, RuntimeError};
use crate::runtime::agent::{AgentError, StepInput};
use crate::runtime::store::StoreError;
use crate::runtime::types::{Decision, Limits, Observation, Run, RunStatus, Said, ToolRequest};

/// What a proposal (or an execution) came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The request may run: `execute` runs exactly this.
    Allowed(ToolRequest),
    /// The step failed (invalid decision, policy denial, tool failure); the session goes on.
    Denied(Observation),
    /// The tool ran and succeeded; the session goes on.
    Observed(Observation),
    /// The run waits on an approval: the session is over.
    Pending(Run),
    /// The run ended: the session is over.
    Ended(Run),
    /// After `attach` of a run taken over (or resumed to a fresh decision): open a step.
    Ready,
}

impl Verdict {
    /// agentrt's outcome names: `allowed`, `denied`, `pending`, `ended` (and `observed`).
    pub fn outcome(&self) -> &'static str {
        match self {
            Verdict::Allowed(_) => "allowed",
            Verdict::Denied(_) => "denied",
            Verdict::Observed(_) => "observed",
            Verdict::Pending(_) => "pending",
            Verdict::Ended(_) => "ended",
            Verdict::Ready => "ready",
        }
    }
}

/// What [`Session::step`] came to.
// A verdict is as large as every other Gate answer (`propose` and `execute` return one too);
// a `NextStep` lives for one match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum NextStep {
    /// A step is open: what an agent would be handed for it. Propose a decision, or `fail`.
    Open(StepInput),
    /// No step was opened: a limit ended the run (or it paused); the session is over.
    Over(Verdict),
}

impl NextStep {
    /// The open step's input, or the verdict that ended the session as an `Err` (for `?` in
    /// a loop that treats an ended run as its way out).
    // The `Err` is the session's last verdict, handed back once, as every Gate call does.
    #[allow(clippy::result_large_err)]
    pub fn open(self) -> Result<StepInput, Verdict> {
        match self {
            NextStep::Open(input) => Ok(input),
            NextStep::Over(v) => Err(v),
        }
    }
}

/// The Gate: a driver without an agent. The caller's own loop proposes each decision; the
/// Gate records it, checks it against the tool's schema, asks the policy and answers with a
/// [`Verdict`]. An allowed call runs only through [`Session::execute`], which first writes the
/// tool's start in one compare-and-set on the lease and the run's state.
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use countersign::runtime::agent;
/// # use countersign::runtime::driver::{Config, NextStep, Verdict, default_limits};
/// # use countersign::runtime::policy::DefaultPolicy;
/// # use countersign::runtime::store::Store;
/// # use countersign::runtime::tools::{FnTool, Registry, SideEffect, ToolDef, ToolOutput};
/// # use countersign::runtime::types::RunStatus;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// # let store = Arc::new(Store::open(dir.path().join("runs.db"))?);
/// let mut tools = Registry::new();
/// tools.register(FnTool::new(
///     ToolDef {
///         name: "disk_usage".into(),
///         description: "how full a path is".into(),
///         input_schema: br#"{"type":"object"}"#.to_vec(),
///         side_effect: SideEffect::ReadOnly,
///         timeout: Duration::from_secs(5),
///         terminal: false,
///     },
///     |_| Box::pin(async { Ok(ToolOutput::default()) }),
/// ))?;
/// let gate = Config::new(store, tools, Arc::new(DefaultPolicy)).gate()?;
/// let rt = tokio::runtime::Runtime::new()?;
/// let mut session = rt.block_on(gate.begin("check-1", "how big is the cache?", default_limits()))?;
///
/// // The caller's model chose a call: the Gate judges it; nothing has run yet.
/// let NextStep::Open(_input) = session.step()? else { panic!("the run ended") };
/// let verdict = session.propose(agent::tool_call("disk_usage", r#"{"path":"/var"}"#))?;
/// assert_eq!(verdict.outcome(), "allowed");
/// // Only `execute` runs it, after checking that the lease and the run still allow it.
/// let observed = rt.block_on(session.execute())?;
/// assert_eq!(observed.outcome(), "observed");
///
/// session.step()?.open().map_err(|v| v.outcome())?;
/// match session.propose(agent::complete("{}"))? {
///     Verdict::Ended(run) => assert_eq!(run.status, RunStatus::Completed),
///     other => panic!("{}", other.outcome()),
/// }
/// session.close();
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Gate {
    inner: Arc<Inner>,
}

impl Gate {
    /// Asks this Gate's policy again, read-only, about a run's recorded evaluations, as
    /// [`super::Driver::recheck_with`] does (no agent is needed to ask).
    pub fn recheck_with(
        &self,
        run_id: &str,
        scope: super::RecheckScope,
        specs: super::RecheckSpecs,
    ) -> Result<super::RecheckReport, RuntimeError> {
        super::recheck::recheck(&self.inner, run_id, scope, specs)
    }

    /// Validates the configuration as `Driver::new` does. A configuration with an agent is
    /// taken too; the agent is unused.
    pub fn new<A>(cfg: Config<A>) -> Result<Gate, RuntimeError> {
        let (cfg, _agent) = cfg.split();
        Ok(Gate {
            inner: Arc::new(Inner::new(cfg)?),
        })
    }

    /// This gate's lease owner (as [`Driver::owner`](super::Driver::owner)).
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// Creates a run with a caller-chosen id and opens a session on it.
    pub async fn begin(
        &self,
        run_id: &str,
        goal: &str,
        limits: Limits,
    ) -> Result<Session, RuntimeError> {
        let (inner, id, goal) = (self.inner.clone(), run_id.to_string(), goal.to_string());
        let cx = super::blocking(move || RunCtx::create(inner, &id, &goal, limits)).await??;
        Ok(Session::new(cx, None))
    }

    /// Does what a resume does before its loop. With a granted approval the session holds the
    /// allowed request (execute it); with a run that ended or paused there is no session.
    pub async fn attach(&self, run_id: &str) -> Result<(Option<Session>, Verdict), RuntimeError> {
        match super::attach::attach(self.inner.clone(), run_id, true).await? {
            Attached::Done(run) => Ok((None, ended(*run))),
            Attached::Continue(cx, first) => {
                let v = match &first {
                    Some(a) => Verdict::Allowed(request_of(&cx, a)),
                    None => Verdict::Ready,
                };
                Ok((Some(Session::new(*cx, first)), v))
            }
            // Nothing is written until `execute`: an abandoned session leaves the grant as it was.
            Attached::Grant(cx, d) => {
                let v = Verdict::Allowed(d.request(&cx.run_id));
                let mut s = Session::new(*cx, None);
                s.grant = Some(d);
                Ok((Some(s), v))
            }
        }
    }
}

fn ended(run: Run) -> Verdict {
    if run.status == RunStatus::WaitingForApproval {
        Verdict::Pending(run)
    } else {
        Verdict::Ended(run)
    }
}

/// The observation the step `step_id` ended with (empty if it has none).
fn observed(cx: &RunCtx, step_id: &str) -> Observation {
    cx.step(step_id)
        .and_then(|s| s.observation.clone())
        .unwrap_or_default()
}

fn request_of(cx: &RunCtx, a: &Allowed) -> ToolRequest {
    ToolRequest {
        run_id: cx.run_id.clone(),
        step_id: a.step_id.clone(),
        spec: a.tool.spec.clone(),
        args: a.args.clone(),
    }
}

/// A session: holds the run's lease while open.
pub struct Session {
    cx: Option<RunCtx>,
    open: Option<Open>,
    allowed: Option<Allowed>,
    /// A grant `attach` checked; `execute` writes the resume and runs it.
    grant: Option<Box<resume::Deferred>>,
    /// Why the session is over (returned by every later call).
    over: Option<Over>,
}

/// Why a session is over.
/// `run <id> is <status>`, the id as stored.
fn run_is(run: &Run) -> Said {
    Said::from("run ")
        .id(run.id_bytes())
        .text(format!(" is {}", run.status))
}

enum Over {
    /// The run paused or ended: `ErrRunState`.
    State(Said),
    /// The lease was lost: `ErrLeaseLost`, for every later call (spec 7).
    Lost(Said),
}

fn closed() -> RuntimeError {
    RuntimeError::SessionClosed
}

impl Session {
    fn new(cx: RunCtx, allowed: Option<Allowed>) -> Session {
        Session {
            cx: Some(cx),
            grant: None,
            open: None,
            allowed,
            over: None,
        }
    }

    fn cx(&mut self) -> Result<&mut RunCtx, RuntimeError> {
        match &self.over {
            Some(Over::State(why)) => {
                return Err(RuntimeError::Store(StoreError::RunState {
                    detail: why.clone(),
                }));
            }
            Some(Over::Lost(why)) => {
                return Err(RuntimeError::Store(StoreError::LeaseLost {
                    detail: why.clone(),
                }));
            }
            None => {}
        }
        self.cx.as_mut().ok_or_else(closed)
    }

    /// Ends the session on a stop: a paused or ended run is a verdict, an error closes it.
    fn stop(&mut self, s: Stop) -> Result<Verdict, RuntimeError> {
        let s = match self.cx.as_mut() {
            Some(cx) => super::off_worker(|| cx.fail_encoding(s)),
            None => s,
        };
        self.open = None;
        self.allowed = None;
        match s {
            Stop::Ended(run) => {
                let run = *run;
                self.over = Some(Over::State(run_is(&run)));
                self.release();
                self.cx = None;
                Ok(ended(run))
            }
            Stop::Err(e) => {
                if let RuntimeError::Store(StoreError::LeaseLost { detail }) = &e {
                    self.over = Some(Over::Lost(detail.clone()));
                }
                self.release();
                self.cx = None;
                Err(e)
            }
        }
    }

    fn release(&mut self) {
        if let Some(cx) = self.cx.as_mut() {
            super::off_worker(|| {
                cx.lease.stop();
                super::lease::release(&cx.inner.store, &cx.run_id, &cx.inner.owner);
            });
        }
    }

    /// Checks the limits and opens a step: [`NextStep::Open`] with what an agent would be
    /// handed, or [`NextStep::Over`] with the verdict of a run a limit ended (the session is
    /// then over). A step may not be opened while one is open.
    pub fn step(&mut self) -> Result<NextStep, RuntimeError> {
        if self.open.is_some() || self.allowed.is_some() || self.grant.is_some() {
            return Err(RuntimeError::Config(
                "a step is already open in this session".into(),
            ));
        }
        let cx = self.cx()?;
        match super::off_worker(|| open_step(cx)) {
            Ok(open) => {
                let input = cx.input(&open);
                self.open = Some(open);
                Ok(NextStep::Open(input))
            }
            Err(s) => self.stop(s).map(NextStep::Over),
        }
    }

    /// What an agent would be handed for the open step (a copy; reads no clock).
    pub fn input(&mut self) -> Result<StepInput, RuntimeError> {
        let cx = self.cx.as_ref().ok_or_else(closed)?;
        let open = self
            .open
            .as_ref()
            .ok_or_else(|| RuntimeError::Config("no step is open".into()))?;
        Ok(cx.input(open))
    }

    /// Records, validates and evaluates a decision for the open step.
    pub fn propose(&mut self, d: Decision) -> Result<Verdict, RuntimeError> {
        self.conclude(Ok(d))
    }

    /// Ends the open step as an agent error (`agent_error`, or the model's reason). A `&str`
    /// or `String` is taken as the message.
    pub fn fail(&mut self, err: impl Into<AgentError>) -> Result<Verdict, RuntimeError> {
        self.conclude(Err(err.into()))
    }

    fn conclude(&mut self, d: Result<Decision, AgentError>) -> Result<Verdict, RuntimeError> {
        self.cx()?;
        let open = self
            .open
            .take()
            .ok_or_else(|| RuntimeError::Config("no step is open".into()))?;
        let step_id = open.step.id.clone();
        let cx = self.cx.as_mut().ok_or_else(closed)?;
        match super::off_worker(|| decided(cx, open, d)) {
            Ok(Next::Execute(a)) => {
                let req = request_of(cx, &a);
                self.allowed = Some(a);
                Ok(Verdict::Allowed(req))
            }
            Ok(Next::Continue) => Ok(Verdict::Denied(observed(cx, &step_id))),
            Err(s) => self.stop(s),
        }
    }

    /// Runs exactly the request the last verdict allowed, and records its outcome.
    pub async fn execute(&mut self) -> Result<Verdict, RuntimeError> {
        self.cx()?;
        if let Some(d) = self.grant.take() {
            // The grant TTL is judged again, then the policy, then the resume is written.
            let mut cx = self.cx.take().ok_or_else(closed)?;
            let step_id = d.step_id.clone();
            let judged = super::blocking(move || match cx.grant_expired(&d) {
                Some(stop) => Err(Box::new((cx, stop))),
                None => Ok(cx.run_grant(*d)),
            })
            .await?;
            let attached = match judged {
                Err(expired) => {
                    let (cx, stop) = *expired;
                    self.cx = Some(cx);
                    return self.stop(stop);
                }
                Ok(attached) => attached,
            };
            match attached? {
                Attached::Continue(cx, Some(a)) => {
                    self.cx = Some(*cx);
                    self.allowed = Some(a);
                }
                Attached::Continue(cx, None) => {
                    let obs = observed(&cx, &step_id);
                    self.cx = Some(*cx);
                    return Ok(Verdict::Denied(obs));
                }
                Attached::Done(run) => {
                    self.over = Some(Over::State(run_is(&run)));
                    return Ok(ended(*run));
                }
                Attached::Grant(..) => {
                    return Err(RuntimeError::Config("a grant was deferred twice".into()));
                }
            }
        }
        let a = self
            .allowed
            .take()
            .ok_or_else(|| RuntimeError::Config("no allowed request to execute".into()))?;
        let cx = self.cx.take().ok_or_else(closed)?;
        let step_id = a.step_id.clone();
        let (back, res) = execute(cx, a, false).await;
        self.cx = back;
        match res {
            Ok(_) => {
                let cx = self.cx.as_ref().ok_or_else(closed)?;
                let obs = observed(cx, &step_id);
                Ok(if obs.is_failure() {
                    Verdict::Denied(obs)
                } else {
                    Verdict::Observed(obs)
                })
            }
            Err(s) => self.stop(s),
        }
    }

    /// Releases the lease; later calls get `ErrSessionClosed`.
    pub fn close(&mut self) {
        self.release();
        self.cx = None;
        self.open = None;
        self.allowed = None;
        self.grant = None;
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(cx) = self.cx.as_mut() {
            cx.lease.stop();
        }
    }
}
