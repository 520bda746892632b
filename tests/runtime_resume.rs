//! Resume of a WAITING run (spec 8.2, 4.9) through a real store.

mod runtime_support;

use std::sync::{Arc, Mutex};

use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::driver::Driver;
use countersign::runtime::policy::{self, DefaultPolicy, FnPolicy, PolicyDecision};
use countersign::runtime::tools::{FnTool, SideEffect, ToolOutput};
use countersign::runtime::types::{RunStatus, StepStatus};
use runtime_support::*;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

type Calls = Arc<Mutex<Vec<countersign::runtime::tools::ToolCall>>>;

fn paused(db: &Db, args: &str) -> (Calls, Driver) {
    let calls: Calls = Arc::new(Mutex::new(Vec::new()));
    let tools = registry(vec![echo(
        "push",
        SideEffect::RemoteMutation,
        calls.clone(),
    )]);
    let agent = ScriptedAgent::new([agent::tool_call("push", args), agent::complete("")]);
    let driver = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let run = rt()
        .block_on(driver.start_with_id("r", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    (calls, driver)
}

#[test]
fn approval_approve_then_resume_executes_recorded_request() {
    let db = db();
    let (calls, driver) = paused(&db, r#"{"ref": "main", "n": 7}"#);
    let a = latest_approval(&db.store, "r");
    approve(&db.store, "r", &a.id, "alice");
    let run = rt().block_on(driver.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    let c = calls.lock().unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(
        c[0].args, br#"{"ref":"main","n":7}"#,
        "the recorded request runs"
    );
    let ev = events(&db.store, "r");
    let i = ev.iter().position(|e| e.kind == "run.resumed").unwrap();
    assert_eq!(ev[i].payload, format!(r#"{{"approval_id":"{}"}}"#, a.id));
    assert_eq!(ev[i + 1].kind, "step.policy");
    assert_eq!(ev[i + 2].kind, "step.tool_started");
    assert_eq!(
        ev[i + 2].payload,
        format!(
            r#"{{"approval_id":"{}","args":{{"ref":"main","n":7}},"tool":"push"}}"#,
            a.id
        )
    );
    // One transaction: the three events share the resume's clock reading.
    assert_eq!(ev[i].at, ev[i + 2].at);
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(s[0].status, StepStatus::Done);
    verify(&db.path);
}

#[test]
fn resume_refuses_a_pending_approval_and_changes_nothing() {
    let db = db();
    let (calls, driver) = paused(&db, "{}");
    let before = events(&db.store, "r").len();
    for _ in 0..3 {
        let e = rt().block_on(driver.resume("r")).unwrap_err();
        assert!(e.is_run_state(), "{e}");
        assert!(e.to_string().contains("is pending, not approved"), "{e}");
    }
    assert_eq!(events(&db.store, "r").len(), before);
    assert!(calls.lock().unwrap().is_empty());
}

#[test]
fn approval_resume_repauses_when_policy_wants_different_approval() {
    let db = db();
    let calls: Calls = Arc::new(Mutex::new(Vec::new()));
    let tools = registry(vec![echo(
        "push",
        SideEffect::RemoteMutation,
        calls.clone(),
    )]);
    let n = Arc::new(Mutex::new(0));
    let pol = FnPolicy(move |r: &policy::PolicyRequest, _v: &policy::RunView| {
        let mut g = n.lock().unwrap();
        *g += 1;
        let cap = format!(r#"{{"tool":"{}","round":{}}}"#, r.tool, *g);
        policy::need_approval("remote_mutation", "ask", cap.as_bytes(), b"")
    });
    let agent = ScriptedAgent::new([agent::tool_call("push", "{}"), agent::complete("")]);
    let driver = driver(&db.store, tools, Arc::new(pol), agent);
    rt().block_on(driver.start_with_id("r", "g", limits()))
        .unwrap();
    let first = latest_approval(&db.store, "r");
    approve(&db.store, "r", &first.id, "alice");
    let run = rt().block_on(driver.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    assert!(calls.lock().unwrap().is_empty());
    let all = db.store.list_approvals("r").unwrap();
    assert_eq!(all.len(), 2);
    assert_ne!(all[1].hash, first.hash);
    // The old grant is spent: only the latest approval of the step can grant.
    let e = rt().block_on(driver.resume("r")).unwrap_err();
    assert!(e.to_string().contains("is pending, not approved"), "{e}");
    verify(&db.path);
}

#[test]
fn approval_expiry_cancels_run() {
    let db = db();
    let calls: Calls = Arc::new(Mutex::new(Vec::new()));
    let tools = registry(vec![echo(
        "push",
        SideEffect::RemoteMutation,
        calls.clone(),
    )]);
    let agent = ScriptedAgent::new([agent::tool_call("push", "{}")]);
    let (clock, offset) = countersign::runtime::clock::manual(start_time());
    let mut cfg = config(&db.store, tools, Arc::new(DefaultPolicy), agent);
    cfg.now = Some(clock);
    let driver = Driver::new(cfg).unwrap();
    let mut l = limits();
    l.approval_ttl = 60_000_000_000;
    rt().block_on(driver.start_with_id("r", "g", l)).unwrap();
    let a = latest_approval(&db.store, "r");
    assert_eq!(a.expires_at, start_time().add_nanos(60_000_000_000));
    offset.store(61_000_000_000, std::sync::atomic::Ordering::SeqCst);
    let run = rt().block_on(driver.resume("r")).unwrap();
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Cancelled, "approval_expired")
    );
    assert_eq!(run.reason_detail, format!("approval {} expired", a.id));
    let a2 = latest_approval(&db.store, "r");
    assert_eq!(a2.status.as_str(), "expired");
    assert_eq!(a2.note, "expired");
    let ev = kinds(&db.store, "r");
    let n = ev.len();
    assert_eq!(
        ev[n - 2],
        (
            "approval.decided".into(),
            format!(r#"{{"approval_id":"{}","status":"expired"}}"#, a.id)
        )
    );
    assert!(calls.lock().unwrap().is_empty());
    verify(&db.path);
}

#[test]
fn resume_grant_not_resumed_within_the_ttl_expires() {
    let db = db();
    let calls: Calls = Arc::new(Mutex::new(Vec::new()));
    let tools = registry(vec![echo(
        "push",
        SideEffect::RemoteMutation,
        calls.clone(),
    )]);
    let agent = ScriptedAgent::new([agent::tool_call("push", "{}")]);
    let (clock, offset) =
        countersign::runtime::clock::manual(countersign::runtime::types::Timestamp::now());
    let mut cfg = config(&db.store, tools, Arc::new(DefaultPolicy), agent);
    cfg.now = Some(clock);
    let driver = Driver::new(cfg).unwrap();
    let mut l = limits();
    l.grant_ttl = 1_000_000_000;
    rt().block_on(driver.start_with_id("r", "g", l)).unwrap();
    let a = latest_approval(&db.store, "r");
    approve(&db.store, "r", &a.id, "bob");
    offset.store(3_600_000_000_000, std::sync::atomic::Ordering::SeqCst);
    let run = rt().block_on(driver.resume("r")).unwrap();
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Cancelled, "approval_expired")
    );
    let a2 = latest_approval(&db.store, "r");
    assert_eq!(
        (a2.status.as_str(), a2.decided_by.as_str()),
        ("expired", "bob"),
        "a grant keeps who decided"
    );
    assert!(calls.lock().unwrap().is_empty());
    verify(&db.path);
}

#[test]
fn resume_approved_arguments_meet_the_current_schema() {
    let db = db();
    let (calls, _driver) = paused(&db, r#"{"n": "seven"}"#);
    let a = latest_approval(&db.store, "r");
    approve(&db.store, "r", &a.id, "alice");
    // The tool's schema tightened since the pause.
    let c2 = calls.clone();
    let strict = r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#;
    let t = FnTool::new(def("push", SideEffect::RemoteMutation, strict), move |c| {
        c2.lock().unwrap().push(c);
        Box::pin(async { Ok(ToolOutput::default()) })
    });
    let driver = driver2(
        &db.store,
        registry(vec![t]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let run = rt().block_on(driver.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert!(calls.lock().unwrap().is_empty());
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(s[0].status, StepStatus::Failed);
    let o = s[0].observation.as_ref().unwrap();
    assert!(
        o.summary
            .starts_with("invalid decision on resume: arguments do not match schema"),
        "{}",
        o.summary
    );
    verify(&db.path);
}

#[test]
fn policy_unknown_outcome_fails_resume() {
    let db = db();
    let (calls, _d) = paused(&db, "{}");
    let a = latest_approval(&db.store, "r");
    approve(&db.store, "r", &a.id, "alice");
    let tools = registry(vec![echo(
        "push",
        SideEffect::RemoteMutation,
        calls.clone(),
    )]);
    let pol = FnPolicy(|_r: &policy::PolicyRequest, _v: &policy::RunView| {
        Ok(PolicyDecision {
            outcome: "perhaps".into(),
            ..Default::default()
        })
    });
    let driver = driver2(
        &db.store,
        tools,
        Arc::new(pol),
        ScriptedAgent::new([agent::complete("")]),
    );
    let run = rt().block_on(driver.resume("r")).unwrap();
    assert_eq!(
        (run.status, run.reason.as_str(), run.reason_detail.as_str()),
        (
            RunStatus::Failed,
            "internal_error",
            "unknown policy outcome \"perhaps\""
        )
    );
    assert!(calls.lock().unwrap().is_empty());
    verify(&db.path);
}

#[test]
fn approval_tampered_row_refused() {
    let db = db();
    let (calls, driver) = paused(&db, r#"{"n":1}"#);
    let a = latest_approval(&db.store, "r");
    approve(&db.store, "r", &a.id, "alice");
    let c = rusqlite::Connection::open(&db.path).unwrap();
    c.execute(
        "UPDATE approvals SET request_json = replace(request_json, '\"n\":1', '\"n\":2')",
        [],
    )
    .unwrap();
    let e = rt().block_on(driver.resume("r")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("agentrt: approval hash does not match its recorded request"),
        "{e}"
    );
    assert!(calls.lock().unwrap().is_empty());
}

#[test]
fn resume_of_a_terminal_run_is_refused() {
    let db = db();
    let tools = registry(vec![]);
    let driver = driver(
        &db.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete(""), agent::complete("")]),
    );
    rt().block_on(driver.start_with_id("r", "g", limits()))
        .unwrap();
    let e = rt().block_on(driver.resume("r")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "agentrt: run is not in the required state: run r is COMPLETED and cannot be resumed"
    );
}
