//! Policy in the loop (spec 3.5 step 7, 4.3): outcomes, the pause, identity; rows and events.

mod runtime_support;

use std::sync::{Arc, Mutex};

use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::driver::Driver;
use countersign::runtime::json;
use countersign::runtime::policy::{
    self, DefaultPolicy, FnPolicy, Policy, PolicyDecision, PolicyError,
};
use countersign::runtime::tools::{Registry, SideEffect};
use countersign::runtime::types::{Run, RunStatus, StepStatus};
use runtime_support::*;

/// Run `r`, whose agent calls `t` once with `{}`, under `pol`, driven until it stops.
fn one_call_under(db: &Db, tools: Registry, pol: impl Policy + 'static) -> Run {
    let agent = ScriptedAgent::new([agent::tool_call("t", "{}")]);
    let driver = driver(&db.store, tools, Arc::new(pol), agent);
    start_r(&driver)
}

#[test]
fn driver_policy_deny_is_observation() {
    let db = db();
    let (tools, calls) = echo_registry("rm", SideEffect::Destructive);
    let agent = ScriptedAgent::new([
        agent::tool_call("rm", r#"{"path":"/"}"#),
        agent::complete(""),
    ]);
    let driver = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let run = start_r(&driver);
    assert_eq!(run.status, RunStatus::Completed);
    assert!(calls.lock().unwrap().is_empty());
    let steps = db.store.list_steps("r").unwrap();
    assert_eq!(steps[0].status, StepStatus::Failed);
    assert_eq!(
        steps[0].policy_json,
        r#"{"outcome":"deny","reason":"side effect destructive is deny by policy"}"#
    );
    let o = steps[0].observation.as_ref().unwrap();
    assert_eq!(o.kind, "policy_denied");
    assert_eq!(
        o.content,
        br#"{"reason":"side effect destructive is deny by policy","tool":"rm"}"#
    );
    assert_eq!(
        o.summary,
        "denied: side effect destructive is deny by policy"
    );
    let t = types(&db.store, "r");
    assert_eq!(
        &t[2..6],
        ["step.started", "step.decided", "step.policy", "step.failed"]
    );
    verify(&db.path);
}

#[test]
fn driver_policy_abort_ends_run() {
    let db = db();
    let (tools, calls) = echo_registry("t", SideEffect::ReadOnly);
    let agent = ScriptedAgent::new([agent::tool_call("t", "{}"), agent::complete("")]);
    let pol =
        FnPolicy(|_r: &policy::PolicyRequest, _v: &policy::RunView| Ok(policy::abort("never")));
    let driver = driver(&db.store, tools, Arc::new(pol), agent);
    let run = start_r(&driver);
    assert_eq!(
        (run.status, run.reason.as_str(), run.reason_detail.as_str()),
        (RunStatus::Failed, "policy_abort", "never")
    );
    assert!(calls.lock().unwrap().is_empty());
    let steps = db.store.list_steps("r").unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(
        steps[0].observation.as_ref().unwrap().summary,
        "aborted: never"
    );
    let t = types(&db.store, "r");
    assert_eq!(&t[4..], ["step.policy", "step.failed", "run.finished"]);
    verify(&db.path);
}

#[test]
fn driver_require_approval_pauses_run() {
    let db = db();
    let (tools, calls) = echo_registry("push", SideEffect::RemoteMutation);
    let args = "{\"ref\": \"main\", \"n\": 7, \"why\": \"<a> & b\"}";
    let agent = ScriptedAgent::new([agent::tool_call("push", args)]);
    let driver = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let run = start_r(&driver);
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    assert!(run.lease_owner.is_empty() && run.lease_expires_at.is_zero());
    assert!(calls.lock().unwrap().is_empty());
    let steps = db.store.list_steps("r").unwrap();
    assert_eq!(steps[0].status, StepStatus::AwaitingApproval);
    let a = db.store.list_approvals("r").unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].status.as_str(), "pending");
    assert_eq!(a[0].kind, "remote_mutation");
    // The request carries the arguments as the agent wrote them (compacted, escaped).
    let req = a[0].request.as_ref().unwrap();
    assert_eq!(
        req.args,
        br#"{"ref":"main","n":7,"why":"\u003ca\u003e \u0026 b"}"#
    );
    let want = json::approval_hash(
        &a[0].kind,
        a[0].capability.as_bytes(),
        a[0].presentation.as_bytes(),
        a[0].request_json.as_bytes(),
    )
    .unwrap();
    assert_eq!(a[0].hash, want);
    // The capability carries the policy form of the arguments.
    assert_eq!(
        a[0].capability,
        r#"{"args":{"n":7,"ref":"main","why":"\u003ca\u003e \u0026 b"},"tool":"push"}"#
    );
    let ev = kinds(&db.store, "r");
    let t: Vec<&str> = ev.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        &t[2..],
        [
            "step.started",
            "step.decided",
            "step.policy",
            "approval.requested"
        ]
    );
    assert_eq!(
        ev[5].1,
        format!(
            r#"{{"approval_id":"{}","capability":{},"hash":"{}","kind":"remote_mutation","presentation":{},"reason":"side effect remote_mutation is require_approval by policy"}}"#,
            a[0].id, a[0].capability, a[0].hash, a[0].presentation
        )
    );
    verify(&db.path);
}

#[test]
fn policy_unknown_outcome_fails_loop() {
    let db = db();
    let (tools, calls) = echo_registry("t", SideEffect::ReadOnly);
    let pol = FnPolicy(|_r: &policy::PolicyRequest, _v: &policy::RunView| {
        Ok(PolicyDecision {
            outcome: "maybe".into(),
            ..PolicyDecision::default()
        })
    });
    let run = one_call_under(&db, tools, pol);
    assert_eq!(
        (run.status, run.reason.as_str(), run.reason_detail.as_str()),
        (
            RunStatus::Failed,
            "internal_error",
            "unknown policy outcome \"maybe\""
        )
    );
    assert!(calls.lock().unwrap().is_empty());
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(s[0].status, StepStatus::Failed);
    verify(&db.path);
}

#[test]
fn driver_policy_error_fails_run_as_internal_error() {
    let db = db();
    let (tools, calls) = echo_registry("t", SideEffect::ReadOnly);
    let pol = FnPolicy(|_r: &policy::PolicyRequest, _v: &policy::RunView| {
        Err(PolicyError::from("rules file missing"))
    });
    let run = one_call_under(&db, tools, pol);
    assert_eq!(
        (run.reason.as_str(), run.reason_detail.as_str()),
        ("internal_error", "policy: rules file missing")
    );
    assert!(calls.lock().unwrap().is_empty());
}

#[test]
fn new_driver_rejects_a_malformed_policy_id() {
    struct Named;
    impl countersign::runtime::policy::Policy for Named {
        fn evaluate(
            &self,
            _r: &policy::PolicyRequest,
            _v: &policy::RunView,
        ) -> Result<PolicyDecision, PolicyError> {
            Ok(policy::allow("ok"))
        }
        fn id(&self) -> Option<String> {
            Some("bad\nid".into())
        }
    }
    let db = db();
    let cfg = config(
        &db.store,
        registry(vec![]),
        Arc::new(Named),
        ScriptedAgent::new([agent::complete("")]),
    );
    assert!(Driver::new(cfg).is_err());
}

#[test]
fn policy_id_recorded_on_step_and_event() {
    struct Named;
    impl countersign::runtime::policy::Policy for Named {
        fn evaluate(
            &self,
            r: &policy::PolicyRequest,
            v: &policy::RunView,
        ) -> Result<PolicyDecision, PolicyError> {
            DefaultPolicy.evaluate(r, v)
        }
        fn id(&self) -> Option<String> {
            Some("rules@v1".into())
        }
    }
    let db = db();
    let (tools, _calls) = echo_registry("t", SideEffect::ReadOnly);
    let driver = driver(
        &db.store,
        tools,
        Arc::new(Named),
        ScriptedAgent::new([agent::tool_call("t", "{}"), agent::complete("")]),
    );
    start_r(&driver);
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(s[0].policy_id, "rules@v1");
    let spec_hash = &s[0].spec_hash;
    assert_eq!(spec_hash, &db.store.list_steps("r").unwrap()[0].spec_hash);
    assert!(
        db.store.tool_spec(spec_hash).is_ok(),
        "the spec is stored once under its hash"
    );
    let ev = kinds(&db.store, "r");
    let p = &ev.iter().find(|(k, _)| k == "step.policy").unwrap().1;
    assert!(
        p.contains(&format!(
            r#","policy_id":"rules@v1","spec_hash":"{spec_hash}","view":{{"#
        )),
        "{p}"
    );
    verify(&db.path);
}

#[test]
fn driver_unusable_policy_json_fails_without_executing() {
    let db = db();
    let (tools, calls) = echo_registry("t", SideEffect::ReadOnly);
    let pol = FnPolicy(|_r: &policy::PolicyRequest, _v: &policy::RunView| {
        Ok(PolicyDecision {
            outcome: "require_approval".into(),
            kind: "k".into(),
            capability: b"{\"a\":".to_vec(),
            ..PolicyDecision::default()
        })
    });
    let run = one_call_under(&db, tools, pol);
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Failed, "internal_error")
    );
    assert!(
        run.reason_detail
            .starts_with("internal: approval capability: "),
        "{}",
        run.reason_detail
    );
    assert!(calls.lock().unwrap().is_empty());
    assert!(db.store.list_approvals("r").unwrap().is_empty());
    verify(&db.path);
}

#[test]
fn runtime_written_run_passes_the_outside_verifier() {
    // Tool calls, a denial, an invalid decision and a pause, in one database.
    let db = db();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let tools = registry(vec![
        echo("look", SideEffect::ReadOnly, calls.clone()),
        echo("rm", SideEffect::Destructive, calls.clone()),
        echo("push", SideEffect::RemoteMutation, calls.clone()),
    ]);
    let agent = ScriptedAgent::new([
        agent::tool_call("look", r#"{"q": "a <b> & c"}"#),
        agent::tool_call("rm", r#"{"path": "/"}"#),
        agent::tool_call("look", r#"{"q": 1, "q": 2}"#),
        agent::tool_call(
            "push",
            "{\n  \"ref\": \"main\",\n  \"why\": \"\u{2028}é\"\n}",
        ),
    ]);
    let driver = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let run = start_r(&driver);
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let kinds: Vec<String> = db
        .store
        .list_steps("r")
        .unwrap()
        .iter()
        .map(|s| {
            s.observation
                .as_ref()
                .map(|o| o.kind.clone())
                .unwrap_or_else(|| s.status.to_string())
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "tool_result",
            "policy_denied",
            "invalid_decision",
            "awaiting_approval"
        ]
    );
    let a = latest_approval(&db.store, "r");
    let h = json::approval_hash(
        &a.kind,
        a.capability.as_bytes(),
        a.presentation.as_bytes(),
        a.request_json.as_bytes(),
    )
    .unwrap();
    assert_eq!(a.hash, h);
    verify(&db.path);
}
