//! Time limits (spec 14.1), entry-point refusals (huge numbers, deep JSON), and copies handed to
//! consumers.

mod runtime_support;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use countersign::runtime::agent::{self, DecideFuture, Scripted, ScriptedAgent, StepInput};
use countersign::runtime::clock;
use countersign::runtime::driver::Driver;
use countersign::runtime::policy::{self, DefaultPolicy, FnPolicy};
use countersign::runtime::tools::SideEffect;
use countersign::runtime::types::RunStatus;
use runtime_support::*;

#[test]
fn limits_active_time_stops_run() {
    let db = db();
    let (tools, _calls) = echo_registry("t", SideEffect::ReadOnly);
    let agent =
        ScriptedAgent::new((0..20).map(|i| agent::tool_call("t", &format!(r#"{{"i":{i}}}"#))));
    let mut l = limits();
    l.max_active_time = 5_000_000; // 5 ms on a clock that moves 1 ms per reading
    let d = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let run = rt().block_on(d.start_with_id("r", "g", l)).unwrap();
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Failed, "limit_active_time")
    );
    assert!(
        run.reason_detail.starts_with("active time ")
            && run.reason_detail.ends_with(" reached limit 5ms"),
        "{}",
        run.reason_detail
    );
    assert!(
        run.active_ms >= 5,
        "active time survives the finish: {}",
        run.active_ms
    );
    let ev = kinds(&db.store, "r");
    assert_eq!(ev[ev.len() - 2].0, "limit.exceeded");
    verify(&db.path);
}

#[test]
fn limits_active_time_excludes_approval_wait_and_elapsed_time_includes_it() {
    let db = db();
    let (tools, calls) = echo_registry("push", SideEffect::RemoteMutation);
    let (c, offset) = clock::manual(start_time());
    let mut cfg = config(
        &db.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::tool_call("push", "{}"), agent::complete("")]),
    );
    cfg.now = Some(c);
    let d = Driver::new(cfg).unwrap();
    let mut l = limits();
    l.max_active_time = 60_000_000_000; // 1 min
    l.max_elapsed_time = 3_600_000_000_000; // 1 h
    rt().block_on(d.start_with_id("r", "g", l)).unwrap();
    let a = latest_approval(&db.store, "r");
    approve(&db.store, "r", &a.id, "alice");
    // A 2-hour wait for the operator: not active time, but elapsed time.
    offset.store(2 * 3_600_000_000_000, Ordering::SeqCst);
    let run = rt().block_on(d.resume("r")).unwrap();
    assert_eq!(
        calls.lock().unwrap().len(),
        1,
        "the grant ran: the wait was not active time"
    );
    assert_eq!(
        (run.status, run.reason.as_str(), run.reason_detail.as_str()),
        (
            RunStatus::Failed,
            "limit_elapsed_time",
            "elapsed time reached limit 1h0m0s"
        )
    );
    assert!(run.active_ms < 60_000, "{}", run.active_ms);
    verify(&db.path);
}

#[test]
fn driver_huge_numbers_and_deep_json_are_refused_where_they_enter() {
    let db = db();
    let (tools, calls) = echo_registry("t", SideEffect::ReadOnly);
    let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
    let agent = ScriptedAgent::new([
        agent::tool_call("t", r#"{"n": 1e400}"#),
        agent::tool_call("t", r#"{"n": 1e99999}"#),
        agent::tool_call("t", &format!(r#"{{"d": {deep}}}"#)),
        agent::complete(""),
    ]);
    let mut l = limits();
    l.max_consecutive_tool_failures = 5;
    let d = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let run = rt().block_on(d.start_with_id("r", "g", l)).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert!(calls.lock().unwrap().is_empty());
    let s = db.store.list_steps("r").unwrap();
    let err =
        |i: usize| String::from_utf8(s[i].observation.as_ref().unwrap().content.clone()).unwrap();
    assert!(
        err(0).contains("cannot unmarshal number 1e400"),
        "{}",
        err(0)
    );
    assert!(err(1).contains("1e99999"), "{}", err(1));
    assert!(
        s[2].decision_json.contains(r#""invalid_args":"#),
        "deep JSON is kept out of band"
    );
    verify(&db.path);
}

#[test]
fn driver_consumers_cannot_corrupt_each_other() {
    let db = db();
    let (tools, _calls) = echo_registry("t", SideEffect::ReadOnly);
    // The agent rewrites the copy of the steps it was handed.
    let meddle = Scripted::With(Box::new(|mut i: StepInput| -> DecideFuture {
        for s in i.steps.iter_mut() {
            let s = Arc::make_mut(s);
            s.observation = None;
            s.decision_json = "tampered".into();
        }
        Box::pin(async { Ok(agent::tool_call("t", r#"{"i":2}"#)) })
    }));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let pol = FnPolicy(move |_r: &policy::PolicyRequest, v: &policy::RunView| {
        seen2.lock().unwrap().push(
            v.steps
                .iter()
                .map(|s| (s.decision_json.clone(), s.observation.is_some()))
                .collect::<Vec<_>>(),
        );
        // A policy can only change its own copy.
        let mut mine = v.clone();
        mine.steps.clear();
        Ok(policy::allow("ok"))
    });
    let agent = ScriptedAgent::new([
        Scripted::from(agent::tool_call("t", r#"{"i":1}"#)),
        meddle,
        Scripted::from(agent::complete("")),
    ]);
    let d = driver(&db.store, tools, Arc::new(pol), agent);
    rt().block_on(d.start_with_id("r", "g", limits())).unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].len(), 1);
    assert_eq!(
        seen[1][0].0,
        r#"{"kind":"tool_call","tool":"t","args":{"i":1}}"#
    );
    assert!(
        seen[1][0].1,
        "the policy still sees the observation the agent's copy dropped"
    );
    let s = db.store.list_steps("r").unwrap();
    assert!(s[0].observation.is_some());
}
