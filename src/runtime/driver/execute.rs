//! Running an allowed request (spec 3.5 step 8): under the tool's timeout, a panic caught, the
//! outcome recorded by a task detached from the caller, so a caller that gives up (drops the
//! driver's future) still gets the outcome written.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use base64::Engine as _;

use super::RuntimeError;
use super::ctx::{RunCtx, StepResult, Stop};
use super::dispatch::Allowed;
use super::open::{Open, open_step};
use super::record::{self, observation, string_map};
use super::step::json_err;
use crate::runtime::json;
use crate::runtime::tools::{ToolCall, ToolError, ToolOutput};
use crate::runtime::types::{Observation, RunStatus, StepStatus};

/// What a tool call came to, before it is recorded.
pub(crate) enum Outcome {
    Ok(ToolOutput),
    Failed(String),
    Abort(String),
    Timeout,
    Panic(String),
}

/// Calls the tool under its timeout, catching a panic.
pub(crate) async fn call_tool(a: &Allowed, run_id: &str) -> Outcome {
    let call = ToolCall {
        run_id: run_id.to_string(),
        step_id: a.step_id.clone(),
        step_index: a.index,
        args: a.args.clone(),
    };
    let tool = a.tool.tool.clone();
    // The tool runs in its own task so that a panic in it is caught at the join.
    let mut handle = tokio::spawn(async move { tool.call(call).await });
    match tokio::time::timeout(a.tool.def.timeout, &mut handle).await {
        Err(_) => {
            handle.abort();
            Outcome::Timeout
        }
        Ok(Err(join)) => {
            if join.is_panic() {
                Outcome::Panic(panic_text(join.into_panic().as_ref()))
            } else {
                Outcome::Failed("the tool's task was cancelled".into())
            }
        }
        Ok(Ok(Ok(out))) => Outcome::Ok(out),
        Ok(Ok(Err(ToolError::Failed(e)))) => Outcome::Failed(e),
        Ok(Ok(Err(ToolError::AbortRun(d)))) => Outcome::Abort(d),
    }
}

/// The observation of an outcome, and whether it is a success.
pub(crate) fn observe(tool: &str, outcome: &Outcome) -> (Observation, bool) {
    let err_obs = |error: &str, failure: &str, summary: String| {
        let content = if failure.is_empty() {
            string_map(&[("error", error), ("tool", tool)])
        } else {
            string_map(&[("error", error), ("failure", failure), ("tool", tool)])
        };
        observation("tool_error", content, summary)
    };
    match outcome {
        Outcome::Ok(out) => {
            let content: &[u8] = if out.content.iter().all(|b| b.is_ascii_whitespace()) {
                b"{}"
            } else {
                &out.content
            };
            match json::checked_content_hash(content) {
                Ok(content_hash) => (
                    Observation {
                        kind: "tool_result".into(),
                        content: content.to_vec(),
                        summary: out.summary.clone(),
                        content_hash,
                    },
                    true,
                ),
                Err(reason) => {
                    let reason = reason.to_string();
                    let mut o = json::gojson::Object::new();
                    match std::str::from_utf8(content) {
                        Ok(s) => o.str("content", s),
                        Err(_) => o.str(
                            "content_base64",
                            &base64::engine::general_purpose::STANDARD.encode(content),
                        ),
                    };
                    o.str("error", &reason)
                        .str("failure", "invalid_content")
                        .str("tool", tool);
                    (
                        observation(
                            "tool_error",
                            o.finish(),
                            format!("{tool} returned content is not usable JSON: {reason}"),
                        ),
                        false,
                    )
                }
            }
        }
        Outcome::Failed(e) => (err_obs(e, "error", format!("{tool} error: {e}")), false),
        Outcome::Timeout => {
            let e = "context deadline exceeded";
            (err_obs(e, "timeout", format!("{tool} timeout: {e}")), false)
        }
        Outcome::Abort(d) => (
            err_obs(
                &format!("abort run: {d}"),
                "abort",
                format!("{tool} aborted the run: {d}"),
            ),
            false,
        ),
        Outcome::Panic(p) => (
            err_obs(&format!("panic: {p}"), "", format!("{tool} panicked")),
            false,
        ),
    }
}

impl RunCtx {
    /// Records a tool's outcome: step done/failed with `step.tool_finished`; a terminal tool's
    /// success completes the run and a tool abort fails it, in the same transaction. If an
    /// operator cancelled the run meanwhile, the outcome is appended late.
    pub fn record_outcome(&mut self, a: &Allowed, outcome: Outcome) -> StepResult<()> {
        let name = a.tool.def.name.clone();
        let (obs, ok) = observe(&name, &outcome);
        let now = self.inner.now();
        let detail = if ok {
            String::new()
        } else {
            obs.summary.clone()
        };
        let status = if ok {
            StepStatus::Done
        } else {
            StepStatus::Failed
        };
        let terminal = ok && a.tool.def.terminal;
        let abort = match &outcome {
            Outcome::Abort(d) => Some(d.clone()),
            _ => None,
        };
        let result = if terminal {
            obs.content.clone()
        } else {
            Vec::new()
        };
        let res = self.end_step(
            &a.step_id,
            &[StepStatus::Executing],
            status,
            Some(&obs),
            &detail,
            now,
            |_, _| Ok(()),
            |cx, tx| {
                if terminal {
                    let d = format!("terminal tool {name}");
                    cx.finish_in(
                        tx,
                        &[RunStatus::Running],
                        RunStatus::Completed,
                        "goal_completed",
                        &d,
                        &result,
                        now,
                        false,
                    )?;
                } else if let Some(d) = &abort {
                    cx.finish_in(
                        tx,
                        &[RunStatus::Running],
                        RunStatus::Failed,
                        "tool_abort",
                        d,
                        b"",
                        now,
                        false,
                    )?;
                }
                Ok(())
            },
        );
        match res {
            Ok(()) if terminal || abort.is_some() => Err(self.end_result(Ok(()))),
            Ok(()) => Ok(()),
            Err(Stop::Ended(run)) => {
                self.record_late(a, &obs)?;
                Err(Stop::Ended(run))
            }
            Err(e) => Err(e),
        }
    }

    /// A late `step.tool_finished` after the run was cancelled (spec 8.1).
    fn record_late(&mut self, a: &Allowed, obs: &Observation) -> StepResult<()> {
        let now = self.inner.now();
        let dur = (now.sub(&a.started) / 1_000_000).max(0);
        let p = record::tool_finished_late(&a.tool.def.name, dur, obs)
            .map_err(json_err("late outcome"))?;
        let ((), events) = self.inner.store.write(|tx| -> Result<(), RuntimeError> {
            tx.get_run(&self.run_id)?;
            tx.append(&self.run_id, &a.step_id, &now, "step.tool_finished", &p)?;
            Ok(())
        })?;
        self.inner.deliver(events);
        Ok(())
    }
}

/// Writes the start of an allowed request, then executes it and records its outcome; if the
/// caller drops the driver's future meanwhile, the rest goes on as a task of its own and the
/// outcome is still recorded ([`Detachable`]).
///
/// With `open_next` (the driver's own loop), the next step is opened in the same store hop as
/// the outcome's recording (one hand-off of the worker fewer a step), unless the caller has
/// dropped the driver's future by then: `Ok(Some(open))`. A caller that drops the future just
/// after that check leaves an opened step with no driver, as one that drops it just after a
/// step was opened always could; the next attach finds it deciding, with no decision.
pub(crate) async fn execute(
    mut cx: RunCtx,
    mut a: Allowed,
    open_next: bool,
) -> (Option<RunCtx>, StepResult<Option<Open>>) {
    // The start is written (compare-and-set on the lease and the run's state) before the tool
    // is called: if it does not commit, nothing runs. Store work runs off the async worker.
    if a.start.is_some() {
        match super::blocking(move || {
            let r = cx.start_tool(&mut a);
            (cx, a, r)
        })
        .await
        {
            Ok((c, al, Ok(()))) => {
                cx = c;
                a = al;
            }
            Ok((c, _, Err(s))) => return (Some(c), Err(s)),
            Err(e) => return (None, Err(Stop::Err(e))),
        }
    }
    let wanted = Arc::new(AtomicBool::new(open_next));
    let recorded = Detachable::new(wanted.clone(), async move {
        let outcome = call_tool(&a, &cx.run_id).await;
        super::blocking(move || {
            let res = cx.record_outcome(&a, outcome).and_then(|()| {
                if wanted.load(Ordering::Acquire) {
                    open_step(&mut cx).map(Some)
                } else {
                    Ok(None)
                }
            });
            (cx, res)
        })
        .await
    });
    match recorded.await {
        Ok(Ok((cx, res))) => (Some(cx), res),
        Ok(Err(e)) => (None, Err(Stop::Err(e))),
        Err(panic) => (
            None,
            Err(Stop::Err(RuntimeError::Config(format!(
                "recording a tool outcome failed: a panic: {panic}"
            )))),
        ),
    }
}

/// The call of an allowed tool and the recording of its outcome, polled by the driver's own
/// task: a task of its own cost a hand-off to another thread and back every step. If the
/// driver's future is dropped before this is done, what is left is spawned then as a task, so
/// the outcome is still recorded, with `wanted` cleared first so that no next step is opened.
/// A panic in it becomes an error, as a task's join would make it.
struct Detachable<T: Send + 'static> {
    work: Caught<T>,
    wanted: Arc<AtomicBool>,
    runtime: Option<tokio::runtime::Handle>,
}

impl<T: Send + 'static> Detachable<T> {
    fn new(wanted: Arc<AtomicBool>, work: impl Future<Output = T> + Send + 'static) -> Self {
        Detachable {
            work: Caught::new(Box::pin(work)),
            wanted,
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }
}

impl<T: Send + 'static> Future for Detachable<T> {
    type Output = Result<T, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.work).poll(cx)
    }
}

impl<T: Send + 'static> Drop for Detachable<T> {
    fn drop(&mut self) {
        self.wanted.store(false, Ordering::Release);
        if let (Some(work), Some(rt)) = (self.work.0.take(), &self.runtime) {
            drop(rt.spawn(work));
        }
    }
}

/// A future whose panic is caught and given as its message; it is not polled again once it
/// finished or panicked.
pub(super) struct Caught<T>(Option<Pin<Box<dyn Future<Output = T> + Send>>>);

impl<T> Caught<T> {
    pub(super) fn new(work: Pin<Box<dyn Future<Output = T> + Send>>) -> Self {
        Caught(Some(work))
    }
}

impl<T> Future for Caught<T> {
    type Output = Result<T, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(work) = self.0.as_mut() else {
            return Poll::Ready(Err("polled again after it finished".into()));
        };
        let polled = match std::panic::catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(v)) => Ok(v),
            Err(p) => Err(panic_text(p.as_ref())),
        };
        self.0 = None;
        Poll::Ready(polled)
    }
}

/// A panic's message, when it is a string.
pub(super) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic value".into())
}
