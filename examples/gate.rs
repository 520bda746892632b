//! A loop the caller owns, through the Gate: the caller asks its own agent for each decision
//! and the runtime still records, checks and gates every step the way its driver does.
//! `begin` creates the run, `step` opens a step (or says a limit ended the run), `propose`
//! records the decision and asks the policy, `execute` runs exactly the request the policy
//! allowed.
//!
//! `cargo run --example gate`. `cargo test` runs it too (the test at the bottom). It builds
//! with `--no-default-features`.

use std::error::Error;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use countersign::runtime::agent::{self, StepInput};
use countersign::runtime::driver::{Config, NextStep, Verdict, default_limits};
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::store::Store;
use countersign::runtime::tools::{FnTool, Registry, SideEffect, ToolDef, ToolOutput};
use countersign::runtime::types::{Decision, Run};
use countersign::safetext;

/// The caller's own agent: tries to delete the cache (the default policy denies destructive
/// tools), reads the disk usage instead, then completes.
fn my_agent(input: &StepInput) -> Decision {
    match input.index {
        0 => agent::tool_call("wipe_cache", "{}"),
        1 => agent::tool_call("disk_usage", r#"{"path":"/var/cache"}"#),
        _ => agent::complete(r#"{"cache_mb":512}"#),
    }
}

fn tool(name: &str, side_effect: SideEffect) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: format!("the {name} tool"),
        input_schema: br#"{"type":"object"}"#.to_vec(),
        side_effect,
        timeout: Duration::from_secs(10),
        terminal: false,
    }
}

/// What the example came to.
pub struct Outcome {
    /// The run as the loop left it.
    pub run: Run,
    /// Each verdict's outcome name, in order (`denied`, `allowed`, `observed`, `ended`).
    pub verdicts: Vec<&'static str>,
    /// How many times each tool ran.
    pub wipes: usize,
    pub usages: usize,
}

/// The whole example, with its database in `dir`.
pub fn run(dir: &Path) -> Result<Outcome, Box<dyn Error>> {
    let store = Arc::new(Store::open(dir.join("runs.db"))?);
    let (wipes, usages) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (w, u) = (wipes.clone(), usages.clone());
    let mut tools = Registry::new();
    tools.register(FnTool::new(
        tool("wipe_cache", SideEffect::Destructive),
        move |_| {
            w.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(ToolOutput::default()) })
        },
    ))?;
    tools.register(FnTool::new(
        tool("disk_usage", SideEffect::ReadOnly),
        move |_| {
            u.fetch_add(1, Ordering::SeqCst);
            Box::pin(async {
                Ok(ToolOutput {
                    content: br#"{"mb":512}"#.to_vec(),
                    summary: "512 MB".into(),
                })
            })
        },
    ))?;

    // No agent: the loop below is the caller's own, so the configuration builds a Gate.
    let gate = Config::new(store, tools, Arc::new(DefaultPolicy))
        .lease_owner("gate-example")
        .gate()?;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut verdicts = Vec::new();
    let mut session =
        rt.block_on(gate.begin("cache-check-1", "how big is the cache?", default_limits()))?;
    let run = loop {
        let input = match session.step()? {
            NextStep::Open(input) => input,
            // A limit ended the run before the step opened.
            NextStep::Over(Verdict::Ended(run) | Verdict::Pending(run)) => break run,
            NextStep::Over(v) => return Err(format!("unexpected verdict {}", v.outcome()).into()),
        };
        let verdict = session.propose(my_agent(&input))?;
        verdicts.push(verdict.outcome());
        let verdict = match verdict {
            // The policy allowed it: run exactly the recorded request.
            Verdict::Allowed(_) => {
                let v = rt.block_on(session.execute())?;
                verdicts.push(v.outcome());
                v
            }
            v => v,
        };
        match verdict {
            // A denied or failed step, or a tool result: the agent decides again.
            Verdict::Denied(obs) | Verdict::Observed(obs) => {
                println!(
                    "step {}: {}",
                    input.index,
                    safetext::plain_line(obs.summary.as_bytes(), 100)
                );
            }
            // The run ended or waits for a person: the session is over.
            Verdict::Ended(run) | Verdict::Pending(run) => break run,
            Verdict::Allowed(_) | Verdict::Ready => return Err("a step was left open".into()),
        }
    };
    session.close();
    Ok(Outcome {
        run,
        verdicts,
        wipes: wipes.load(Ordering::SeqCst),
        usages: usages.load(Ordering::SeqCst),
    })
}

/// A stored value, made safe to print (whatever the database holds).
fn shown(s: &str) -> String {
    safetext::plain_line(s.as_bytes(), 200)
}

fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let out = run(dir.path())?;
    println!("verdicts: {}", out.verdicts.join(", "));
    println!(
        "run {} is {} ({}), result {}",
        shown(&out.run.id),
        shown(out.run.status.as_str()),
        shown(&out.run.reason),
        shown(&out.run.result_json),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use countersign::runtime::types::RunStatus;

    #[test]
    fn the_callers_loop_is_gated_like_the_drivers() {
        let dir = tempfile::tempdir().unwrap();
        let out = super::run(dir.path()).unwrap();
        assert_eq!(out.run.status, RunStatus::Completed, "{}", out.run.reason);
        assert_eq!(out.run.result_json, r#"{"cache_mb":512}"#);
        assert_eq!(out.verdicts, ["denied", "allowed", "observed", "ended"]);
        assert_eq!(out.wipes, 0, "the denied tool never ran");
        assert_eq!(out.usages, 1);
    }
}
