//! The runtime on databases agentrt wrote (the independent fixture writer): it resumes them,
//! refuses what is damaged, and leaves a database the verifier accepts.

mod runtime_support;

use std::path::Path;
use std::sync::Arc;

use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::store::Store;
use countersign::runtime::tools::SideEffect;
use countersign::runtime::types::{RunStatus, StepStatus};
use runtime_support::*;

/// Writes a fixture database with one scenario and returns its first run id.
fn fixture(dir: &Path, scenario: &str) -> (std::path::PathBuf, String) {
    let path = dir.join(format!("{scenario}.db"));
    let out = std::process::Command::new("python3")
        .arg(shared_dir().join("tools/agentrt_fixture.py"))
        .arg(&path)
        .args(["--scenario", scenario, "--manifest"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = m["scenarios"][scenario]["runs"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    (path, id)
}

#[test]
fn interop_damaged_waiting_run_fails_as_internal_error_without_rewriting_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (path, id) = fixture(dir.path(), "damaged");
    let store = Arc::new(Store::open_existing(&path, false).unwrap());
    let before = store.list_steps(&id).unwrap();
    let (tools, calls) = echo_registry("issue_refund", SideEffect::RemoteMutation);
    let d = driver2(
        &store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let run = rt().block_on(d.resume(&id)).unwrap();
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Failed, "internal_error")
    );
    assert!(
        run.reason_detail.starts_with("internal: step 1 ("),
        "{}",
        run.reason_detail
    );
    assert!(calls.lock().unwrap().is_empty());
    let after = store.list_steps(&id).unwrap();
    assert_eq!(
        after[1].decision_json, before[1].decision_json,
        "the damaged column is not rewritten"
    );
}

#[test]
fn interop_agentrt_interrupted_side_effect_runs_once_when_approved() {
    let dir = tempfile::tempdir().unwrap();
    let (path, id) = fixture(dir.path(), "interrupted");
    let store = Arc::new(Store::open_existing(&path, false).unwrap());
    let a = latest_approval(&store, &id);
    assert_eq!(a.kind, "interrupted_side_effect");
    approve(&store, &id, &a.id, "alice");
    let (tools, calls) = echo_registry("update_shipping_address", SideEffect::LocalMutation);
    let d = driver2(
        &store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let run = rt().block_on(d.resume(&id)).unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    let c = calls.lock().unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].step_index, 1, "the same step runs again");
    let steps = store.list_steps(&id).unwrap();
    assert_eq!(steps[1].status, StepStatus::Done);
    verify(&path);
}
