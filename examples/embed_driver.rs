//! Embedding the driver: register a tool and a policy, start a run that pauses for an
//! approval, decide it the way a reviewer does (bound to the hash they were shown), resume
//! it, and print the run's events.
//!
//! `cargo run --example embed_driver`. `cargo test` runs it too (the test at the bottom), so
//! it keeps compiling and keeps doing what it says. It needs only the runtime and safe text:
//! it builds with `--no-default-features`.

use std::error::Error;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use countersign::runtime::agent::{self, Agent, DecideFuture, StepInput};
use countersign::runtime::driver::{Config, default_limits};
use countersign::runtime::operator;
use countersign::runtime::policy::{
    self, FnPolicy, PolicyDecision, PolicyError, PolicyRequest, RunView,
};
use countersign::runtime::store::Store;
use countersign::runtime::tools::{FnTool, Registry, SideEffect, ToolDef, ToolOutput};
use countersign::runtime::types::{Event, Run, Timestamp};
use countersign::safetext;

/// The agent: looks the order up, asks for the refund, then completes. A real agent would
/// ask a model (`input.model`); this one decides from how many steps the run has had.
struct RefundAgent;

impl Agent for RefundAgent {
    fn decide(&self, input: StepInput) -> DecideFuture {
        let d = match input.steps.len() {
            0 => agent::tool_call("lookup_order", r#"{"order":"A-1001"}"#),
            1 => agent::tool_call("refund", r#"{"order":"A-1001","cents":2500}"#),
            _ => agent::complete(r#"{"refunded":true}"#),
        };
        Box::pin(async move { Ok(d) })
    }
}

/// The policy: a refund needs a person; anything else that is read-only runs; the rest is
/// denied.
fn review_refunds(req: &PolicyRequest, _view: &RunView) -> Result<PolicyDecision, PolicyError> {
    match (req.tool.as_str(), &req.side_effect) {
        // What the reviewer is shown (and the approval's hash binds) is the request itself.
        ("refund", _) => {
            policy::need_approval("refund", "refunds need a person", &req.args, &req.args)
        }
        (_, SideEffect::ReadOnly) => Ok(policy::allow("read-only")),
        _ => Ok(policy::deny("not allowed here")),
    }
}

fn tool(name: &str, side_effect: SideEffect) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: format!("the {name} tool"),
        input_schema:
            br#"{"type":"object","properties":{"order":{"type":"string"}},"required":["order"]}"#
                .to_vec(),
        side_effect,
        timeout: Duration::from_secs(10),
        terminal: false,
    }
}

/// What the example came to.
pub struct Outcome {
    /// The run when it paused.
    pub paused: Run,
    /// The run after the approval and the resume.
    pub finished: Run,
    /// How many times the refund tool ran before the approval, and in all.
    pub refunds_before_approval: usize,
    pub refunds: usize,
    /// Every event of the run, in order.
    pub events: Vec<Event>,
}

/// The whole example, with its database in `dir`.
pub fn run(dir: &Path) -> Result<Outcome, Box<dyn Error>> {
    let store = Arc::new(Store::open(dir.join("runs.db"))?);

    let refunds = Arc::new(AtomicUsize::new(0));
    let counter = refunds.clone();
    let mut tools = Registry::new();
    tools.register(FnTool::new(
        tool("lookup_order", SideEffect::ReadOnly),
        |call| {
            Box::pin(async move {
                Ok(ToolOutput {
                    content: br#"{"order":"A-1001","paid_cents":2500}"#.to_vec(),
                    summary: format!("looked up {} bytes of arguments", call.args.len()),
                })
            })
        },
    ))?;
    tools.register(FnTool::new(
        tool("refund", SideEffect::RemoteMutation),
        move |_call| {
            counter.fetch_add(1, Ordering::SeqCst);
            Box::pin(async {
                Ok(ToolOutput {
                    content: br#"{"ok":true}"#.to_vec(),
                    summary: "refunded".into(),
                })
            })
        },
    ))?;

    // Without `.agent(..)` there would be no `build`: a driver without an agent does not compile.
    let driver = Config::new(store.clone(), tools, Arc::new(FnPolicy(review_refunds)))
        .agent(Arc::new(RefundAgent))
        .lease_owner("embed-example")
        .build()?;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    // 1. The run goes until the policy asks for a person, and waits.
    let paused = rt.block_on(driver.start("refund order A-1001", default_limits()))?;
    let refunds_before_approval = refunds.load(Ordering::SeqCst);

    // 2. A reviewer reads the pending approval. Everything in it came from the database:
    //    it goes through safe text before it reaches a terminal.
    let pending = operator::pending_approval(&store, &paused.id, None)?;
    println!(
        "approval {} asks: {}",
        safetext::plain_line(pending.id.as_bytes(), 80),
        safetext::plain_line(pending.presentation.as_bytes(), 200),
    );

    // 3. They approve what they were shown: the decision binds to that hash, so a request
    //    changed after they read it is refused instead of approved.
    operator::approve_shown(
        &store,
        &paused.id,
        &pending.id,
        &pending.hash,
        "alice",
        "customer was double charged",
        Timestamp::now(),
    )?;

    // 4. The resume runs exactly the approved request, then the agent finishes.
    let finished = rt.block_on(driver.resume(&paused.id))?;

    let events = store.list_events_page(&paused.id, 1_000, 0)?.items;
    Ok(Outcome {
        paused,
        finished,
        refunds_before_approval,
        refunds: refunds.load(Ordering::SeqCst),
        events,
    })
}

/// A stored value, made safe to print (whatever the database holds).
fn shown(s: &str) -> String {
    safetext::plain_line(s.as_bytes(), 200)
}

fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let out = run(dir.path())?;
    println!(
        "paused as {}, finished as {} ({})",
        shown(out.paused.status.as_str()),
        shown(out.finished.status.as_str()),
        shown(&out.finished.reason)
    );
    for e in &out.events {
        println!("{:>3} {:<22} {}", e.seq, shown(&e.kind), shown(&e.payload));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use countersign::runtime::types::RunStatus;

    #[test]
    fn the_refund_waits_for_the_approval_and_runs_once_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = super::run(dir.path()).unwrap();
        assert_eq!(out.paused.status, RunStatus::WaitingForApproval);
        assert_eq!(
            out.refunds_before_approval, 0,
            "nothing ran before the decision"
        );
        assert_eq!(
            out.finished.status,
            RunStatus::Completed,
            "{}",
            out.finished.reason
        );
        assert_eq!(out.refunds, 1, "the approved request ran exactly once");
        let kinds: Vec<&str> = out.events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds.first(), Some(&"run.created"));
        assert_eq!(kinds.last(), Some(&"run.finished"));
        let at = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap_or(usize::MAX);
        assert!(
            at("approval.requested") < at("approval.decided"),
            "{kinds:?}"
        );
        assert!(at("approval.decided") < at("run.resumed"), "{kinds:?}");
        let refund_started = out.events.iter().position(|e| {
            e.kind == "step.tool_started" && e.payload.contains(r#""tool":"refund""#)
        });
        assert!(
            refund_started.unwrap_or(0) > at("run.resumed"),
            "the refund ran after the resume"
        );
    }
}
