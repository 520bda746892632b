//! The Gate (spec 8.4): a loop the runtime does not own, on the driver's own step code.

mod runtime_support;

use std::sync::{Arc, Mutex};

use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::driver::{Gate, Verdict};
use countersign::runtime::policy::{self, DefaultPolicy, FnPolicy};
use countersign::runtime::tools::SideEffect;
use countersign::runtime::types::{Decision, RunStatus};
use runtime_support::*;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn script() -> Vec<Decision> {
    vec![
        agent::tool_call("look", r#"{"q": 1}"#),
        agent::tool_call("nope", "{}"),
        agent::tool_call("rm", "{}"),
        agent::complete(r#"{"ok":true}"#),
    ]
}

fn tools(
    calls: &Arc<Mutex<Vec<countersign::runtime::tools::ToolCall>>>,
) -> countersign::runtime::tools::Registry {
    registry(vec![
        echo("look", SideEffect::ReadOnly, calls.clone()),
        echo("rm", SideEffect::Destructive, calls.clone()),
    ])
}

#[test]
fn gate_external_loop_matches_the_driver() {
    let (a, b) = (db(), db());
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut l = limits();
    l.max_consecutive_tool_failures = 5;
    let d = driver(
        &a.store,
        tools(&calls),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new(script()),
    );
    let run_a = rt().block_on(d.start_with_id("r", "g", l.clone())).unwrap();
    let gate = Gate::new(config(
        &b.store,
        tools(&calls),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new(Vec::<Decision>::new()),
    ))
    .unwrap();
    let rtm = rt();
    let mut s = rtm.block_on(gate.begin("r", "g", l)).unwrap();
    let mut last = None;
    for dec in script() {
        let input = s.step().unwrap().expect("a step opens");
        assert_eq!(input.run_id, "r");
        match s.propose(dec).unwrap() {
            Verdict::Allowed(req) => {
                assert_eq!(req.args, br#"{"q": 1}"#);
                assert!(matches!(
                    rtm.block_on(s.execute()).unwrap(),
                    Verdict::Observed(_)
                ));
            }
            Verdict::Denied(o) => assert!(o.is_failure()),
            v => last = Some(v),
        }
    }
    let Some(Verdict::Ended(run_b)) = last else {
        panic!("the run ended")
    };
    assert_eq!(run_b.status, run_a.status);
    let ea: Vec<_> = events(&a.store, "r")
        .into_iter()
        .map(|e| (e.seq, e.kind, e.at_text, e.payload, e.hash))
        .collect();
    let eb: Vec<_> = events(&b.store, "r")
        .into_iter()
        .map(|e| (e.seq, e.kind, e.at_text, e.payload, e.hash))
        .collect();
    assert_eq!(ea, eb, "identical rows, events, clock readings and chain");
    let sa: Vec<_> = a
        .store
        .list_steps("r")
        .unwrap()
        .into_iter()
        .map(|s| {
            (
                s.id,
                s.status,
                s.decision_json,
                s.policy_json,
                s.observation_json,
            )
        })
        .collect();
    let sb: Vec<_> = b
        .store
        .list_steps("r")
        .unwrap()
        .into_iter()
        .map(|s| {
            (
                s.id,
                s.status,
                s.decision_json,
                s.policy_json,
                s.observation_json,
            )
        })
        .collect();
    assert_eq!(sa, sb);
    verify(&b.path);
}

#[test]
fn gate_deny_continues_and_abort_ends() {
    let db = db();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let pol = FnPolicy(|r: &policy::PolicyRequest, _v: &policy::RunView| {
        Ok(if r.tool == "rm" {
            policy::abort("never rm")
        } else {
            policy::deny("not now")
        })
    });
    let gate = Gate::new(config(
        &db.store,
        tools(&calls),
        Arc::new(pol),
        ScriptedAgent::new(Vec::<Decision>::new()),
    ))
    .unwrap();
    let mut s = rt().block_on(gate.begin("r", "g", limits())).unwrap();
    s.step().unwrap().unwrap();
    let Verdict::Denied(o) = s.propose(agent::tool_call("look", "{}")).unwrap() else {
        panic!()
    };
    assert_eq!(o.summary, "denied: not now");
    s.step().unwrap().unwrap();
    let Verdict::Ended(run) = s.propose(agent::tool_call("rm", "{}")).unwrap() else {
        panic!()
    };
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Failed, "policy_abort")
    );
    assert!(calls.lock().unwrap().is_empty());
    // The session is over.
    assert!(s.step().unwrap_err().is_run_state());
}

#[test]
fn gate_approved_step_executes_the_recorded_request() {
    let db = db();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let reg = registry(vec![echo(
        "push",
        SideEffect::RemoteMutation,
        calls.clone(),
    )]);
    let gate = Gate::new(config(
        &db.store,
        reg,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new(Vec::<Decision>::new()),
    ))
    .unwrap();
    let rtm = rt();
    let mut s = rtm.block_on(gate.begin("r", "g", limits())).unwrap();
    s.step().unwrap().unwrap();
    let Verdict::Pending(run) = s.propose(agent::tool_call("push", r#"{"n": 7}"#)).unwrap() else {
        panic!()
    };
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let a = latest_approval(&db.store, "r");
    approve(&db.store, "r", &a.id, "alice");
    let (s2, v) = rtm.block_on(gate.attach("r")).unwrap();
    let mut s2 = s2.expect("a session");
    let Verdict::Allowed(req) = v else {
        panic!("{v:?}")
    };
    assert_eq!(req.args, br#"{"n":7}"#);
    assert!(
        calls.lock().unwrap().is_empty(),
        "nothing runs before execute"
    );
    assert!(matches!(
        rtm.block_on(s2.execute()).unwrap(),
        Verdict::Observed(_)
    ));
    assert_eq!(calls.lock().unwrap().len(), 1);
    s2.step().unwrap().unwrap();
    let Verdict::Ended(run) = s2.propose(agent::complete("")).unwrap() else {
        panic!()
    };
    assert_eq!(run.status, RunStatus::Completed);
    verify(&db.path);
}

#[test]
fn gate_misuse_is_refused() {
    let db = db();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let gate = Gate::new(config(
        &db.store,
        tools(&calls),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new(Vec::<Decision>::new()),
    ))
    .unwrap();
    let rtm = rt();
    let mut s = rtm.block_on(gate.begin("r", "g", limits())).unwrap();
    assert!(s.propose(agent::complete("")).is_err(), "no step is open");
    assert!(rtm.block_on(s.execute()).is_err(), "nothing was allowed");
    s.step().unwrap().unwrap();
    assert!(s.step().is_err(), "one open step at a time");
    s.close();
    let e = s.step().unwrap_err();
    assert_eq!(e.to_string(), "agentrt: session is closed");
    // A second begin of the same id is refused by the store (the run exists).
    assert!(rtm.block_on(gate.begin("r", "g", limits())).is_err());
    let run = db.store.get_run("r").unwrap();
    assert!(run.lease_owner.is_empty(), "close released the lease");
}
