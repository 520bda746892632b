//! The agent: what decides each step (spec 3.5 step 4). It is handed a [`StepInput`], a copy
//! of what the run holds, and a model handle whose calls are accounted (spec 15).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use super::model::ModelCaller;
use super::types::{Decision, DecisionKind, Step, ToolSpec};

/// What the agent is handed for one step. Everything in it is a copy.
#[derive(Clone)]
pub struct StepInput {
    /// The id of the run being stepped.
    pub run_id: String,
    /// The id of the step the driver has just started (status `running`) for this decision.
    pub step_id: String,
    /// That step's position in the run, from 0 (`steps.idx`).
    pub index: i64,
    /// The goal the run was started with, as stored.
    pub goal: String,
    /// The run's earlier steps, oldest first.
    pub steps: Vec<Arc<Step>>,
    /// Every registered tool, by name.
    pub tools: Vec<ToolSpec>,
    /// The step's accounted model handle (absent when the driver has no model).
    pub model: Option<ModelCaller>,
}

impl std::fmt::Debug for StepInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepInput")
            .field("run_id", &self.run_id)
            .field("step_id", &self.step_id)
            .field("index", &self.index)
            .field("goal", &self.goal)
            .field("steps", &self.steps.len())
            .field("tools", &self.tools.len())
            .finish()
    }
}

/// Why an agent could not decide. Its text is recorded as the failed step's error, so a
/// consumer's own failure is an [`AgentError::Message`]: `?` on a `String` or `&str` error, or
/// `.into()`, makes one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A [`ScriptedAgent`] was asked for more answers than it was given.
    #[error("script exhausted")]
    ScriptExhausted,
    /// The consumer's own failure, as its message.
    #[error("{0}")]
    Message(String),
}

from_message!(AgentError);

/// What [`Agent::decide`] returns: the decision, or the error that fails the run.
pub type DecideFuture = Pin<Box<dyn Future<Output = Result<Decision, AgentError>> + Send>>;

/// An agent. An `Err` ends the run FAILED (`agent_error`, or the model's reason when its
/// model handle hit a limit or the model was unavailable). A panic in `decide` or in its
/// future is such an error (`panic: <message>`): it does not unwind through the driver.
pub trait Agent: Send + Sync + 'static {
    /// Decides the step described by `input`. The decision is recorded (arguments or a result
    /// that are not usable JSON kept aside in `invalid_args`/`invalid_result`, spec 3.5 step 4)
    /// and then validated, so an unusable decision fails only the step (`invalid_decision`)
    /// and the loop goes on; only an `Err` ends the run.
    fn decide(&self, input: StepInput) -> DecideFuture;
}

/// A `tool_call` decision.
pub fn tool_call(tool: &str, args: &str) -> Decision {
    Decision {
        kind: DecisionKind::ToolCall,
        tool: tool.into(),
        args: args.as_bytes().to_vec(),
        ..Decision::default()
    }
}

/// A `complete` decision with a JSON result (empty = none).
pub fn complete(result: &str) -> Decision {
    Decision {
        kind: DecisionKind::Complete,
        result: result.as_bytes().to_vec(),
        ..Decision::default()
    }
}

/// A `fail` decision.
pub fn fail(message: &str) -> Decision {
    Decision {
        kind: DecisionKind::Fail,
        message: message.into(),
        ..Decision::default()
    }
}

/// One scripted answer.
pub enum Scripted {
    /// Answer with this decision.
    Decide(Decision),
    /// Answer with this agent error (the run ends FAILED, `agent_error`).
    Error(AgentError),
    /// Computed from the input (may call the model handle).
    With(Box<dyn FnOnce(StepInput) -> DecideFuture + Send>),
}

impl From<Decision> for Scripted {
    fn from(d: Decision) -> Scripted {
        Scripted::Decide(d)
    }
}

/// An agent that answers from a fixed list, then fails with "script exhausted". It records
/// every input it was handed.
#[derive(Default)]
pub struct ScriptedAgent {
    script: Mutex<VecDeque<Scripted>>,
    seen: Mutex<Vec<StepInput>>,
}

impl ScriptedAgent {
    /// An agent that gives `items` in order, one per step.
    pub fn new<I, S>(items: I) -> Arc<ScriptedAgent>
    where
        I: IntoIterator<Item = S>,
        S: Into<Scripted>,
    {
        Arc::new(ScriptedAgent {
            script: Mutex::new(items.into_iter().map(Into::into).collect()),
            seen: Mutex::new(Vec::new()),
        })
    }

    /// Adds answers at the end.
    pub fn push(&self, s: impl Into<Scripted>) {
        self.script
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(s.into());
    }

    /// The inputs handed so far.
    pub fn inputs(&self) -> Vec<StepInput> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many answers are left.
    pub fn remaining(&self) -> usize {
        self.script.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Agent for ScriptedAgent {
    fn decide(&self, input: StepInput) -> DecideFuture {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(input.clone());
        let next = self
            .script
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front();
        match next {
            Some(Scripted::Decide(d)) => Box::pin(async move { Ok(d) }),
            Some(Scripted::Error(e)) => Box::pin(async move { Err(e) }),
            Some(Scripted::With(f)) => f(input),
            None => Box::pin(async { Err(AgentError::ScriptExhausted) }),
        }
    }
}
