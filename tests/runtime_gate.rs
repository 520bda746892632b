//! The Gate (spec 8.4): a loop the runtime does not own, on the driver's own step code.

mod runtime_support;

use std::sync::{Arc, Mutex};

use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::driver::{Gate, NextStep, Verdict};
use countersign::runtime::policy::{self, DefaultPolicy, FnPolicy};
use countersign::runtime::store::Store;
use countersign::runtime::tools::SideEffect;
use countersign::runtime::types::{Decision, RunStatus};
use runtime_support::*;

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
    let gate = gate(&b.store, tools(&calls), Arc::new(DefaultPolicy));
    let rtm = rt();
    let mut s = rtm.block_on(gate.begin("r", "g", l)).unwrap();
    let mut last = None;
    for dec in script() {
        let input = s.step().unwrap().open().expect("a step opens");
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
    // What the two databases must agree on: every event with its clock reading and chain
    // hash, and every step's recorded columns.
    let rows = |store: &Store| {
        let events: Vec<_> = events(store, "r")
            .into_iter()
            .map(|e| (e.seq, e.kind, e.at_text, e.payload, e.hash))
            .collect();
        let steps: Vec<_> = store
            .list_steps("r")
            .unwrap()
            .into_iter()
            .map(|s| {
                let cols = (s.decision_json, s.policy_json, s.observation_json);
                (s.id, s.status, cols)
            })
            .collect();
        (events, steps)
    };
    let ((ea, sa), (eb, sb)) = (rows(&a.store), rows(&b.store));
    assert_eq!(ea, eb, "identical rows, events, clock readings and chain");
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
    let gate = gate(&db.store, tools(&calls), Arc::new(pol));
    let mut s = rt().block_on(gate.begin("r", "g", limits())).unwrap();
    s.step().unwrap().open().unwrap();
    let Verdict::Denied(o) = s.propose(agent::tool_call("look", "{}")).unwrap() else {
        panic!()
    };
    assert_eq!(o.summary, "denied: not now");
    s.step().unwrap().open().unwrap();
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
    let (reg, calls) = echo_registry("push", SideEffect::RemoteMutation);
    let gate = gate(&db.store, reg, Arc::new(DefaultPolicy));
    let rtm = rt();
    let mut s = rtm.block_on(gate.begin("r", "g", limits())).unwrap();
    s.step().unwrap().open().unwrap();
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
    s2.step().unwrap().open().unwrap();
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
    let gate = gate(&db.store, tools(&calls), Arc::new(DefaultPolicy));
    let rtm = rt();
    let mut s = rtm.block_on(gate.begin("r", "g", limits())).unwrap();
    assert!(s.propose(agent::complete("")).is_err(), "no step is open");
    assert!(rtm.block_on(s.execute()).is_err(), "nothing was allowed");
    s.step().unwrap().open().unwrap();
    assert!(s.step().is_err(), "one open step at a time");
    s.close();
    let e = s.step().unwrap_err();
    assert_eq!(e.to_string(), "agentrt: session is closed");
    // A second begin of the same id is refused by the store (the run exists).
    assert!(rtm.block_on(gate.begin("r", "g", limits())).is_err());
    let run = db.store.get_run("r").unwrap();
    assert!(run.lease_owner.is_empty(), "close released the lease");
}

#[test]
fn gate_abandoned_approved_step_stays_approved_and_grant_ttl_holds_until_execute() {
    use std::sync::atomic::Ordering;
    let db = db();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let reg = || {
        registry(vec![echo(
            "push",
            SideEffect::RemoteMutation,
            calls.clone(),
        )])
    };
    let (clock, offset) =
        countersign::runtime::clock::manual(countersign::runtime::types::Timestamp::now());
    let mut cfg = gate_config(&db.store, reg(), Arc::new(DefaultPolicy));
    cfg.now = Some(clock.clone());
    let gate = Gate::new(cfg).unwrap();
    let rtm = rt();
    let mut l = limits();
    l.grant_ttl = 60_000_000_000;
    let mut s = rtm.block_on(gate.begin("r", "g", l)).unwrap();
    s.step().unwrap().open().unwrap();
    assert!(matches!(
        s.propose(agent::tool_call("push", "{}")).unwrap(),
        Verdict::Pending(_)
    ));
    let a = latest_approval(&db.store, "r");
    approve(&db.store, "r", &a.id, "alice");
    // Attach, then abandon the session: nothing is written, the grant stays usable.
    let before = events(&db.store, "r").len();
    let (s1, v) = rtm.block_on(gate.attach("r")).unwrap();
    assert!(matches!(v, Verdict::Allowed(_)));
    drop(s1);
    assert_eq!(events(&db.store, "r").len(), before);
    assert_eq!(latest_approval(&db.store, "r").status.as_str(), "approved");
    // Attach again within the TTL; the grant expires before execute: nothing runs.
    let (s2, v) = rtm.block_on(gate.attach("r")).unwrap();
    assert!(matches!(v, Verdict::Allowed(_)));
    let mut s2 = s2.unwrap();
    offset.store(120_000_000_000, Ordering::SeqCst);
    let Verdict::Ended(run) = rtm.block_on(s2.execute()).unwrap() else {
        panic!()
    };
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Cancelled, "approval_expired")
    );
    assert!(calls.lock().unwrap().is_empty());
    verify(&db.path);
}

#[test]
fn gate_limits_fire_through_step() {
    let db = db();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let gate = gate(&db.store, tools(&calls), Arc::new(DefaultPolicy));
    let rtm = rt();
    let mut l = limits();
    l.max_steps = 1;
    let mut s = rtm.block_on(gate.begin("r", "g", l)).unwrap();
    s.step().unwrap().open().unwrap();
    assert!(matches!(
        s.propose(agent::tool_call("look", "{}")).unwrap(),
        Verdict::Allowed(_)
    ));
    assert!(matches!(
        rtm.block_on(s.execute()).unwrap(),
        Verdict::Observed(_)
    ));
    // The next step is refused by the limit: no step, no error, the run ended.
    let NextStep::Over(Verdict::Ended(run)) = s.step().unwrap() else {
        panic!("the limit ends the run")
    };
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Failed, "limit_steps")
    );
    assert_eq!(db.store.list_steps("r").unwrap().len(), 1);
    verify(&db.path);
}

#[test]
fn gate_abandoned_during_execute_pauses_for_an_operator() {
    // Spec 8.4: a session abandoned while its tool runs leaves what a crash leaves: the step is
    // `executing`, and the next attach marks it interrupted and pauses the run on an
    // interrupted-side-effect approval (no reconcile hook here). The tool is not run again.
    use countersign::runtime::tools::{FnTool, ToolOutput};
    let db = db();
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Arc::new(tokio::sync::Notify::new());
    let tool = {
        let (calls, started) = (calls.clone(), started.clone());
        FnTool::new(def("push", SideEffect::RemoteMutation, OBJ), move |_c| {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let started = started.clone();
            Box::pin(async move {
                started.notify_one();
                tokio::time::sleep(std::time::Duration::from_secs(4)).await;
                Ok(ToolOutput::default())
            })
        })
    };
    let make = || {
        gate(
            &db.store,
            registry(vec![tool.clone()]),
            Arc::new(DefaultPolicy),
        )
    };
    let gate = make();
    let rtm = rt();
    let mut s = rtm.block_on(gate.begin("r", "g", limits())).unwrap();
    s.step().unwrap().open().unwrap();
    assert!(matches!(
        s.propose(agent::tool_call("push", "{}")).unwrap(),
        Verdict::Pending(_)
    ));
    let a = latest_approval(&db.store, "r");
    approve(&db.store, "r", &a.id, "alice");
    let (s1, v) = rtm.block_on(gate.attach("r")).unwrap();
    assert!(matches!(v, Verdict::Allowed(_)));
    let mut s1 = s1.unwrap();
    // Execute, and abandon the session once the tool has started.
    rtm.block_on(async {
        tokio::select! {
            r = s1.execute() => panic!("the tool finished: {:?}", r.map(|v| v.outcome())),
            _ = started.notified() => {}
        }
    });
    drop(s1);
    let steps = db.store.list_steps("r").unwrap();
    assert_eq!(steps.last().unwrap().status.as_str(), "executing");
    // As after a crash, the abandoned session's lease is left to lapse (nothing renews it; the
    // test's clock is fixed, so the lapse is written); then the next attach, by another owner
    // (another process), finds the step in flight: interrupted, and an operator decides.
    rusqlite::Connection::open(&db.path)
        .unwrap()
        .execute(
            "UPDATE runs SET lease_expires_at = '2001-01-01T00:00:00Z' WHERE id = 'r'",
            [],
        )
        .unwrap();
    let (s2, v) = rtm.block_on(make().attach("r")).unwrap();
    assert!(s2.is_none(), "the session is over at once");
    let Verdict::Pending(run) = v else {
        panic!("expected a pause, got {}", v.outcome())
    };
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let a2 = latest_approval(&db.store, "r");
    assert_ne!(a2.id, a.id);
    assert_eq!(a2.kind, "interrupted_side_effect");
    let steps = db.store.list_steps("r").unwrap();
    assert_eq!(
        steps.last().unwrap().status.as_str(),
        "awaiting_approval",
        "interrupted, then paused on the operator"
    );
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the side effect was not repeated"
    );
    let ev = types(&db.store, "r");
    let i = ev
        .iter()
        .rposition(|k| k == "lease.taken_over")
        .expect("taken over");
    assert_eq!(
        &ev[i..],
        [
            "lease.taken_over",
            "step.interrupted",
            "step.policy",
            "approval.requested"
        ],
        "the driver's crash path, event for event"
    );
    verify(&db.path);
}

/// The tool-start events of a run's step.
fn starts(db: &Db, step_id: &str) -> usize {
    events(&db.store, "r")
        .into_iter()
        .filter(|e| e.kind == "step.tool_started" && e.step_id == step_id)
        .count()
}

#[test]
fn gate_allowed_then_cancelled_runs_nothing() {
    // Spec 8.4: an allowed verdict writes no start; `execute` writes it in one transaction
    // that requires the run's state and the lease. An operator's cancel in between wins.
    let db = db();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let gate = gate(&db.store, tools(&calls), Arc::new(DefaultPolicy));
    let rtm = rt();
    let mut s = rtm.block_on(gate.begin("r", "g", limits())).unwrap();
    let input = s.step().unwrap().open().unwrap();
    let Verdict::Allowed(_) = s.propose(agent::tool_call("look", "{}")).unwrap() else {
        panic!("allowed")
    };
    let step = db.store.get_step(&input.step_id).unwrap();
    assert_eq!(
        step.status.as_str(),
        "deciding",
        "the verdict starts nothing"
    );
    assert_eq!(starts(&db, &input.step_id), 0);
    // The operator cancels on a connection of its own.
    let other = countersign::runtime::store::Store::open_existing(&db.path, false).unwrap();
    cancel(&other, "r", "alice", "stop");
    let Verdict::Ended(run) = rtm.block_on(s.execute()).unwrap() else {
        panic!("the cancelled run is the verdict")
    };
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Cancelled, "operator_cancelled")
    );
    assert!(calls.lock().unwrap().is_empty(), "the tool did not run");
    assert_eq!(starts(&db, &input.step_id), 0, "no start was logged");
    assert!(s.step().unwrap_err().is_run_state());
    verify(&db.path);
}

#[test]
fn gate_abandoned_after_allowed_runs_nothing() {
    // An allowed step abandoned before `execute` is still deciding: the next attach finds no
    // attempt (interrupted while deciding, no operator pause), and the tool can be proposed
    // and run again.
    let db = db();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let reg = || registry(vec![echo("push", SideEffect::LocalMutation, calls.clone())]);
    let make = || {
        let mut c = gate_config(&db.store, reg(), Arc::new(DefaultPolicy));
        c.ids = None;
        Gate::new(c).unwrap()
    };
    let rtm = rt();
    let mut s = rtm.block_on(make().begin("r", "g", limits())).unwrap();
    let first = s.step().unwrap().open().unwrap();
    assert!(matches!(
        s.propose(agent::tool_call("push", r#"{"n":1}"#)).unwrap(),
        Verdict::Allowed(_)
    ));
    drop(s);
    // The abandoned owner's lease lapses (as after a crash).
    rusqlite::Connection::open(&db.path)
        .unwrap()
        .execute(
            "UPDATE runs SET lease_expires_at = '2001-01-01T00:00:00Z' WHERE id = 'r'",
            [],
        )
        .unwrap();
    let (s2, v) = rtm.block_on(make().attach("r")).unwrap();
    assert!(matches!(v, Verdict::Ready), "no pause: {}", v.outcome());
    let mut s2 = s2.expect("a session");
    let st = db.store.get_step(&first.step_id).unwrap();
    assert_eq!(st.status.as_str(), "interrupted");
    assert_eq!(
        st.observation.unwrap().content,
        br#"{"previous_status":"deciding"}"#,
        "interrupted while deciding: no attempt"
    );
    assert_eq!(starts(&db, &first.step_id), 0);
    assert!(
        db.store.list_approvals("r").unwrap().is_empty(),
        "nothing waits on an operator"
    );
    assert!(calls.lock().unwrap().is_empty());
    // The tool is not blocked.
    s2.step().unwrap().open().unwrap();
    assert!(matches!(
        s2.propose(agent::tool_call("push", r#"{"n":1}"#)).unwrap(),
        Verdict::Allowed(_)
    ));
    assert!(matches!(
        rtm.block_on(s2.execute()).unwrap(),
        Verdict::Observed(_)
    ));
    assert_eq!(
        calls.lock().unwrap().len(),
        1,
        "run once, by the new session"
    );
    verify(&db.path);
}

#[test]
fn gate_calls_after_the_lease_is_lost_are_refused() {
    // A takeover by another owner between the verdict and `execute`: the start does not
    // commit, the tool does not run, and every later call of the old session is refused with
    // ErrLeaseLost.
    let db = db();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let make = || {
        let mut c = gate_config(&db.store, tools(&calls), Arc::new(DefaultPolicy));
        c.ids = None;
        Gate::new(c).unwrap()
    };
    let rtm = rt();
    let g1 = make();
    let mut s = rtm.block_on(g1.begin("r", "g", limits())).unwrap();
    let first = s.step().unwrap().open().unwrap();
    assert!(matches!(
        s.propose(agent::tool_call("look", "{}")).unwrap(),
        Verdict::Allowed(_)
    ));
    // The lease lapses on disk (the heartbeat has not run yet) and another process's gate,
    // on its own connection, takes the run over.
    rusqlite::Connection::open(&db.path)
        .unwrap()
        .execute(
            "UPDATE runs SET lease_expires_at = '2001-01-01T00:00:00Z' WHERE id = 'r'",
            [],
        )
        .unwrap();
    let other =
        Arc::new(countersign::runtime::store::Store::open_existing(&db.path, false).unwrap());
    let mut c2 = gate_config(&other, tools(&calls), Arc::new(DefaultPolicy));
    c2.ids = None;
    let (s2, v) = rtm.block_on(Gate::new(c2).unwrap().attach("r")).unwrap();
    assert!(matches!(v, Verdict::Ready));
    let e = rtm.block_on(s.execute()).unwrap_err();
    assert!(e.is_lease_lost(), "{e}");
    assert!(
        calls.lock().unwrap().is_empty(),
        "the side effect did not start"
    );
    assert_eq!(starts(&db, &first.step_id), 0);
    for e in [
        s.step().unwrap_err(),
        rtm.block_on(s.execute()).unwrap_err(),
        s.propose(agent::complete("")).unwrap_err(),
        s.fail("x").unwrap_err(),
    ] {
        assert!(e.is_lease_lost(), "every later call: {e}");
    }
    let run = db.store.get_run("r").unwrap();
    assert_eq!(run.status, RunStatus::Running);
    assert_ne!(run.lease_owner, g1.owner(), "the new owner holds it");
    drop(s2);
    verify(&db.path);
}
