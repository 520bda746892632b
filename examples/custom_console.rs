//! countersign's review console with the caller's own toolkit registered: `R` on a run, and
//! the approval worker after an approve, resume the caller's runs with the caller's tools,
//! policy and agent (the `countersign` binary can resume only its example consumer's).
//!
//! `cargo run --example custom_console -- /tmp/deploys.db` opens the console on that database,
//! first starting a run there that waits for an approval if the database has none. `cargo test`
//! runs the resume hook against a real database (the test at the bottom); the terminal part is
//! countersign's console itself, whose own tests drive it in a pty. Needs the `console` feature.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use countersign::console::ResumeHook;
use countersign::console::{self, ConsoleOptions};
use countersign::runtime::agent::{self, Agent, DecideFuture, StepInput};
use countersign::runtime::driver::{Config, Driver, RecheckReport, RecheckScope, default_limits};
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::store::Store;
use countersign::runtime::tools::{FnTool, Registry, SideEffect, ToolDef, ToolOutput};
use countersign::runtime::types::Run;
use countersign::safetext;

/// The caller's toolkit: one tool, a deploy, which the default policy sends to a person
/// (a remote mutation).
fn toolkit() -> Result<Registry, Box<dyn Error>> {
    let deploy = ToolDef {
        name: "deploy".into(),
        description: "deploys a service version".into(),
        input_schema: br#"{"type":"object","properties":{"service":{"type":"string"}}}"#.to_vec(),
        side_effect: SideEffect::RemoteMutation,
        timeout: Duration::from_secs(30),
        terminal: false,
    };
    let mut tools = Registry::new();
    tools.register(FnTool::new(deploy, |_| {
        Box::pin(async {
            Ok(ToolOutput {
                content: br#"{"deployed":true}"#.to_vec(),
                summary: "deployed".into(),
            })
        })
    }))?;
    Ok(tools)
}

/// The caller's agent: deploys once, then completes.
struct DeployAgent;

impl Agent for DeployAgent {
    fn decide(&self, input: StepInput) -> DecideFuture {
        let d = if input.steps.is_empty() {
            agent::tool_call("deploy", r#"{"service":"billing","version":"1.4.2"}"#)
        } else {
            agent::complete(r#"{"deployed":"billing 1.4.2"}"#)
        };
        Box::pin(async move { Ok(d) })
    }
}

/// The caller's driver on `db`.
fn driver(store: Arc<Store>) -> Result<Driver, Box<dyn Error>> {
    Ok(Config::new(store, toolkit()?, Arc::new(DefaultPolicy))
        .agent(Arc::new(DeployAgent))
        .lease_owner("custom-console")
        .build()?)
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// The names of the tools the run's steps called (names from the database are untrusted:
/// they are only compared).
fn tools_of(store: &Store, run_id: &str) -> Result<Vec<String>, Box<dyn Error>> {
    let (mut names, mut offset) = (Vec::new(), 0);
    loop {
        let page = store.list_steps_page(run_id, 500, offset)?;
        let decisions = page.items.iter().filter_map(|s| s.decision.as_ref());
        names.extend(decisions.map(|d| d.tool.clone()));
        offset += page.items.len() as i64;
        if page.items.is_empty() || offset >= page.total {
            return Ok(names);
        }
    }
}

/// Whether this toolkit can resume the run: it has not ended and uses only our tools.
fn resumable(db: &Path, run_id: &str) -> Result<bool, Box<dyn Error>> {
    let store = Store::open_existing(db, true)?;
    if store.get_run_capped(run_id)?.status.is_terminal() {
        return Ok(false);
    }
    let tools = toolkit()?;
    let names = tools_of(&store, run_id)?;
    Ok(names.iter().all(|t| t.is_empty() || tools.get(t).is_some()))
}

/// What the console calls for `R` and after an approve (on a thread of its own, so it may
/// block on a runtime of its own).
pub struct Hook {
    /// The database the console opened (`can_resume` is asked with a run id alone).
    pub db: PathBuf,
}

impl ResumeHook for Hook {
    fn can_resume(&self, run_id: &str) -> bool {
        resumable(&self.db, run_id).unwrap_or(false)
    }

    fn resume(&self, db_path: &Path, run_id: &str) -> Result<String, String> {
        let shown = |s: &str| safetext::plain_line(s.as_bytes(), 200);
        let resumed = Store::open_existing(db_path, false)
            .map_err(Box::<dyn Error>::from)
            .and_then(|store| driver(Arc::new(store)))
            .and_then(|d| Ok(runtime()?.block_on(d.resume(run_id))?));
        match resumed {
            Ok(run) => Ok(format!(
                "run {} is {} ({})",
                shown(&run.id),
                shown(run.status.as_str()),
                shown(&run.reason)
            )),
            Err(e) => Err(shown(&e.to_string())),
        }
    }

    /// The decision page's "policy now": our policy asked again, read-only (the store opened
    /// read-only; the driver's recheck writes nothing), for runs of our toolkit only.
    fn recheck(&self, db_path: &Path, run_id: &str) -> Result<RecheckReport, String> {
        let shown = |s: &str| safetext::plain_line(s.as_bytes(), 200);
        let ours = Store::open_existing(db_path, true)
            .map_err(Box::<dyn Error>::from)
            .and_then(|store| {
                let tools = toolkit()?;
                let names = tools_of(&store, run_id)?;
                Ok(names.iter().all(|t| t.is_empty() || tools.get(t).is_some()))
            });
        match ours {
            Ok(true) => {}
            Ok(false) => {
                return Err("this program does not register the tools this run uses".into());
            }
            Err(e) => return Err(shown(&e.to_string())),
        }
        Store::open_existing(db_path, true)
            .map_err(Box::<dyn Error>::from)
            .and_then(|store| driver(Arc::new(store)))
            .and_then(|d| Ok(d.recheck(run_id, RecheckScope::Awaiting)?))
            .map_err(|e| shown(&e.to_string()))
    }
}

/// Starts a run on `db` that waits for an approval of the deploy.
pub fn seed(db: &Path) -> Result<Run, Box<dyn Error>> {
    let d = driver(Arc::new(Store::open(db)?))?;
    Ok(runtime()?.block_on(d.start("deploy billing 1.4.2", default_limits()))?)
}

fn main() -> Result<(), Box<dyn Error>> {
    let Some(db) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: custom_console <run database>");
        std::process::exit(2);
    };
    if !db.exists() || Store::open_existing(&db, true)?.list_runs_page(1, 0)?.total == 0 {
        seed(&db)?;
    }
    let mut opts = ConsoleOptions::new(&db);
    opts.resume = Some(Arc::new(Hook { db: db.clone() }));
    console::run(opts)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use countersign::runtime::operator;
    use countersign::runtime::types::{RunStatus, Timestamp};

    #[test]
    fn the_hook_resumes_the_callers_run_after_an_approval() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("deploys.db");
        let run = seed(&db).unwrap();
        assert_eq!(run.status, RunStatus::WaitingForApproval);
        let hook = Hook { db: db.clone() };
        assert!(
            hook.can_resume(&run.id),
            "our toolkit has every tool the run used"
        );
        assert!(!hook.can_resume("no-such-run"));

        // The decision page's recheck: our policy, asked again, answers as it did.
        let before = std::fs::read(&db).unwrap();
        let r = hook.recheck(&db, &run.id).unwrap();
        assert_eq!(r.checked.len(), 1, "{r:?}");
        assert!(!r.differs(), "{r:?}");
        assert_eq!(
            std::fs::read(&db).unwrap(),
            before,
            "the recheck wrote nothing"
        );

        // What the console's approve does: bound to the hash it showed.
        let store = Store::open_existing(&db, false).unwrap();
        let a = operator::pending_approval(&store, &run.id, None).unwrap();
        operator::approve_shown(
            &store,
            &run.id,
            &a.id,
            &a.hash,
            "alice",
            "",
            Timestamp::now(),
        )
        .unwrap();

        let line = hook.resume(&db, &run.id).unwrap();
        assert!(line.ends_with("is COMPLETED (goal_completed)"), "{line}");
        assert_eq!(store.get_run(&run.id).unwrap().status, RunStatus::Completed);
        assert!(
            !hook.can_resume(&run.id),
            "an ended run is not offered again"
        );
    }
}
