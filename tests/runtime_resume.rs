//! Resume of a WAITING run (spec 8.2, 4.9) through a real store.

mod runtime_support;

use std::sync::{Arc, Mutex};

use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::driver::Driver;
use countersign::runtime::policy::{self, DefaultPolicy, FnPolicy, PolicyDecision};
use countersign::runtime::tools::{FnTool, SideEffect, ToolOutput};
use countersign::runtime::types::{RunStatus, StepStatus};
use runtime_support::*;

fn paused(db: &Db, args: &str) -> (Calls, Driver) {
    let (tools, calls) = echo_registry("push", SideEffect::RemoteMutation);
    let agent = ScriptedAgent::new([agent::tool_call("push", args), agent::complete("")]);
    let driver = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let run = start_r(&driver);
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
    let (tools, calls) = echo_registry("push", SideEffect::RemoteMutation);
    let n = Arc::new(Mutex::new(0));
    let pol = FnPolicy(move |r: &policy::PolicyRequest, _v: &policy::RunView| {
        let mut g = n.lock().unwrap();
        *g += 1;
        let cap = format!(r#"{{"tool":"{}","round":{}}}"#, r.tool, *g);
        policy::need_approval("remote_mutation", "ask", cap.as_bytes(), b"")
    });
    let agent = ScriptedAgent::new([agent::tool_call("push", "{}"), agent::complete("")]);
    let driver = driver(&db.store, tools, Arc::new(pol), agent);
    start_r(&driver);
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
    let (tools, calls) = echo_registry("push", SideEffect::RemoteMutation);
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
    let (tools, calls) = echo_registry("push", SideEffect::RemoteMutation);
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
    start_r(&driver);
    let e = rt().block_on(driver.resume("r")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "agentrt: run is not in the required state: run r is COMPLETED and cannot be resumed"
    );
}

#[test]
fn policy_loop_and_resume_handed_the_same_bytes() {
    let db = db();
    let calls: Calls = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    type Seen = Arc<Mutex<Vec<(Vec<u8>, Vec<u8>)>>>;
    let pol = |seen: Seen| {
        FnPolicy(move |r: &policy::PolicyRequest, v: &policy::RunView| {
            seen.lock()
                .unwrap()
                .push((r.args.clone(), r.input_schema.clone()));
            DefaultPolicy.evaluate(r, v)
        })
    };
    use countersign::runtime::policy::Policy as _;
    let schema = "{\n  \"type\": \"object\",\n  \"description\": \"a && b <c> \u{2028} é\"\n}";
    let t = |calls: Calls| {
        let c2 = calls.clone();
        FnTool::new(def("sh", SideEffect::RemoteMutation, schema), move |c| {
            c2.lock().unwrap().push(c);
            Box::pin(async { Ok(ToolOutput::default()) })
        })
    };
    let args = "{\n  \"z\": {\"b\": 1.50, \"a\": \"make && rm <x> \u{2028} é \\u00e9 日本\"},\n  \"n\": 1e3\n}";
    let d = driver(
        &db.store,
        registry(vec![t(calls.clone())]),
        Arc::new(pol(seen.clone())),
        ScriptedAgent::new([agent::tool_call("sh", args)]),
    );
    rt().block_on(d.start_with_id("r", "g", limits())).unwrap();
    let a = latest_approval(&db.store, "r");
    approve(&db.store, "r", &a.id, "alice");
    let d2 = driver2(
        &db.store,
        registry(vec![t(calls.clone())]),
        Arc::new(pol(seen.clone())),
        ScriptedAgent::new([agent::complete("")]),
    );
    let run = rt().block_on(d2.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    let s = seen.lock().unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0], s[1], "identical bytes in the loop and on resume");
    assert_eq!(
        String::from_utf8(s[0].0.clone()).unwrap(),
        "{\"n\":1e3,\"z\":{\"a\":\"make && rm <x> \u{2028} é é 日本\",\"b\":1.50}}"
    );
    assert_eq!(calls.lock().unwrap().len(), 1);
}

#[test]
fn resume_reconcile_outcomes() {
    use countersign::runtime::driver::{Reconcile, ReconcileError, Reconciliation};
    use countersign::runtime::types::{Approval, Run, Step};
    // `None`: the hook panics, which ends the run as its error does.
    struct Hook(Option<Reconciliation>);
    impl Reconcile for Hook {
        fn reconcile(
            &self,
            _r: &Run,
            steps: &[Step],
            _a: &[Approval],
        ) -> Result<Reconciliation, ReconcileError> {
            assert!(!steps.is_empty());
            Ok(self.0.clone().expect("the hook's own bug"))
        }
    }
    for (rec, status, reason) in [
        (None, RunStatus::Failed, "internal_error"),
        (
            Some(Reconciliation::Completed {
                result: br#"{"ok":1}"#.to_vec(),
                detail: "did it".into(),
            }),
            RunStatus::Completed,
            "goal_completed",
        ),
        (
            Some(Reconciliation::Conflict {
                detail: "two truths".into(),
            }),
            RunStatus::Failed,
            "reconcile_conflict",
        ),
        (
            Some(Reconciliation::Waiting {
                pause: None,
                detail: String::new(),
            }),
            RunStatus::Failed,
            "reconcile_conflict",
        ),
    ] {
        let db = db();
        let path = db.path.clone();
        // A run whose driver stopped while deciding, its lease lapsed.
        let lapse = countersign::runtime::agent::Scripted::With(Box::new(move |i: countersign::runtime::agent::StepInput| -> countersign::runtime::agent::DecideFuture {
            rusqlite::Connection::open(&path).unwrap().execute("UPDATE runs SET lease_owner = 'gone/1', lease_expires_at = '2001-01-01T00:00:00Z' WHERE id = ?", [&i.run_id]).unwrap();
            Box::pin(async { Ok(agent::complete("")) })
        }));
        let d = driver(
            &db.store,
            registry(vec![]),
            Arc::new(DefaultPolicy),
            ScriptedAgent::new([lapse]),
        );
        assert!(rt().block_on(d.start_with_id("r", "g", limits())).is_err());
        let mut cfg = config(
            &db.store,
            registry(vec![]),
            Arc::new(DefaultPolicy),
            ScriptedAgent::new([agent::complete("")]),
        );
        cfg.ids = None;
        cfg.reconcile = Some(Arc::new(Hook(rec.clone())));
        let d2 = Driver::new(cfg).unwrap();
        let run = rt().block_on(d2.resume("r")).unwrap();
        assert_eq!(
            (run.status, run.reason.as_str()),
            (status, reason),
            "{rec:?}"
        );
        if rec.is_none() {
            assert_eq!(run.reason_detail, "reconcile: panic: the hook's own bug");
        }
        if reason == "goal_completed" {
            assert_eq!(run.reason_detail, "completed by reconciliation: did it");
            assert_eq!(run.result_json, r#"{"ok":1}"#);
        }
        verify(&db.path);
    }
}

#[test]
fn driver_caller_gone_still_records_the_outcome() {
    let db = db();
    // The tool says when it has started, so the caller leaves while it runs whatever the
    // machine's load (a fixed 50 ms could end before the tool began, and then nothing runs).
    let started = Arc::new(tokio::sync::Notify::new());
    let signal = started.clone();
    let t = FnTool::new(def("slow", SideEffect::ReadOnly, OBJ), move |_c| {
        let signal = signal.clone();
        Box::pin(async move {
            signal.notify_one();
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            Ok(ToolOutput {
                content: br#"{"finally":true}"#.to_vec(),
                summary: "done".into(),
            })
        })
    });
    let d = driver(
        &db.store,
        registry(vec![t]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::tool_call("slow", "{}"), agent::complete("")]),
    );
    let rtm = rt();
    // The caller gives up while the tool runs (its future is dropped).
    rtm.block_on(async {
        tokio::select! {
            _ = started.notified() => {}
            r = d.start_with_id("r", "g", limits()) => {
                panic!("the run ended before its caller left: {r:?}")
            }
        }
    });
    // The detached task records the outcome anyway (polled for up to a minute: only a
    // failure waits that long).
    let mut done = false;
    for _ in 0..3000 {
        let s = db.store.list_steps("r").unwrap();
        if s.first().is_some_and(|s| s.status == StepStatus::Done) {
            done = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        done,
        "the tool's outcome was recorded after the caller left"
    );
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(
        s[0].observation.as_ref().unwrap().content,
        br#"{"finally":true}"#
    );
    drop(rtm);
}

/// A run left with a step `executing` (its driver lost the lease while the tool ran).
fn left_executing(db: &Db, side: SideEffect, calls: &Calls) {
    let path = db.path.clone();
    let c2 = calls.clone();
    let t = FnTool::new(def("t", side, OBJ), move |c| {
        c2.lock().unwrap().push(c.clone());
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute("UPDATE runs SET lease_owner = 'gone/1', lease_expires_at = '2001-01-01T00:00:00Z' WHERE id = ?", [&c.run_id])
            .unwrap();
        Box::pin(async { Ok(ToolOutput::default()) })
    });
    let d = driver(
        &db.store,
        registry(vec![t]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::tool_call("t", r#"{"x":1}"#)]),
    );
    let e = rt()
        .block_on(d.start_with_id("r", "g", limits()))
        .unwrap_err();
    assert!(e.is_lease_lost(), "{e}");
    assert_eq!(
        db.store.list_steps("r").unwrap()[0].status,
        StepStatus::Executing
    );
}

#[test]
fn resume_interrupted_read_only_step_continues() {
    let db = db();
    let calls: Calls = Arc::new(Mutex::new(Vec::new()));
    left_executing(&db, SideEffect::ReadOnly, &calls);
    let tools = registry(vec![echo("t", SideEffect::ReadOnly, calls.clone())]);
    let d = driver2(
        &db.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let run = rt().block_on(d.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(calls.lock().unwrap().len(), 1, "not run again");
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(s[0].status, StepStatus::Interrupted);
    assert_eq!(
        s[0].observation.as_ref().unwrap().content,
        br#"{"previous_status":"executing"}"#
    );
    verify(&db.path);
}

#[test]
fn resume_reconcile_waiting_pauses_the_interrupted_request() {
    use countersign::runtime::driver::{Reconcile, ReconcileError, Reconciliation};
    use countersign::runtime::types::{Approval, Run, Step};
    struct Hook;
    impl Reconcile for Hook {
        fn reconcile(
            &self,
            _r: &Run,
            _s: &[Step],
            _a: &[Approval],
        ) -> Result<Reconciliation, ReconcileError> {
            let pd = policy::need_approval(
                "check_first",
                "the ledger disagrees",
                br#"{"ledger":"?"}"#,
                b"",
            )
            .unwrap();
            Ok(Reconciliation::Waiting {
                pause: Some(pd),
                detail: "ledger".into(),
            })
        }
    }
    let db = db();
    let calls: Calls = Arc::new(Mutex::new(Vec::new()));
    left_executing(&db, SideEffect::LocalMutation, &calls);
    let mut cfg = config(
        &db.store,
        registry(vec![echo("t", SideEffect::LocalMutation, calls.clone())]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    cfg.ids = None;
    cfg.reconcile = Some(Arc::new(Hook));
    let d = Driver::new(cfg).unwrap();
    let run = rt().block_on(d.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let a = latest_approval(&db.store, "r");
    assert_eq!(
        (a.kind.as_str(), a.capability.as_str()),
        ("check_first", r#"{"ledger":"?"}"#)
    );
    assert_eq!(
        db.store.list_steps("r").unwrap()[0].status,
        StepStatus::AwaitingApproval
    );
    assert_eq!(calls.lock().unwrap().len(), 1);
    verify(&db.path);
}

/// A refund tool that counts its calls; its first call is cut off (the driver's lease lapses
/// on disk while it runs, so its outcome is never recorded).
fn refund_tool(
    path: std::path::PathBuf,
    calls: Calls,
) -> Arc<dyn countersign::runtime::tools::Tool> {
    FnTool::new(def("refund", SideEffect::RemoteMutation, OBJ), move |c| {
        let first = {
            let mut v = calls.lock().unwrap();
            v.push(c.clone());
            v.len() == 1
        };
        if first {
            rusqlite::Connection::open(&path)
                .unwrap()
                .execute("UPDATE runs SET lease_owner = 'gone/1', lease_expires_at = '2001-01-01T00:00:00Z' WHERE id = ?", [&c.run_id])
                .unwrap();
        }
        Box::pin(async {
            Ok(ToolOutput {
                content: br#"{"refunded":true}"#.to_vec(),
                summary: "refunded".into(),
            })
        })
    })
}

/// Refunds above 100 need a `refund` approval; everything else is allowed.
fn refund_policy() -> Arc<dyn policy::Policy> {
    Arc::new(FnPolicy(
        |r: &policy::PolicyRequest, _v: &policy::RunView| {
            let v: serde_json::Value = serde_json::from_slice(&r.args).unwrap();
            if r.tool == "refund" && v["amount"].as_i64().unwrap_or(0) > 100 {
                policy::need_approval("refund", "above the automatic limit", &r.args, &r.args)
            } else {
                Ok(policy::allow("within the limit"))
            }
        },
    ))
}

#[test]
fn resume_interrupted_grant_still_needs_the_policys_approval() {
    // Spec 8.2 step 9 holds for an interrupted side effect's grant too: after the operator
    // approves the re-run, the policy is asked again; its own approval must be granted.
    let db = db();
    let calls: Calls = Arc::new(Mutex::new(Vec::new()));
    // Each driver's agent refunds 500, then completes (only the first driver gets to decide
    // the refund; the later ones resume it and decide what follows).
    let make = || {
        let mut c = config(
            &db.store,
            registry(vec![refund_tool(db.path.clone(), calls.clone())]),
            refund_policy(),
            ScriptedAgent::new([agent::tool_call("refund", r#"{"amount":500}"#)]),
        );
        c.ids = None;
        Driver::new(c).unwrap()
    };
    let run = rt()
        .block_on(make().start_with_id("r", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let a1 = latest_approval(&db.store, "r");
    assert_eq!(a1.kind, "refund");
    approve(&db.store, "r", &a1.id, "alice");
    // The refund starts and is cut off: its outcome is unknown.
    let e = rt().block_on(make().resume("r")).unwrap_err();
    assert!(e.is_lease_lost(), "{e}");
    assert_eq!(calls.lock().unwrap().len(), 1);
    // The takeover pauses on the interrupted side effect.
    let run = rt().block_on(make().resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let a2 = latest_approval(&db.store, "r");
    assert_eq!(a2.kind, "interrupted_side_effect");
    approve(&db.store, "r", &a2.id, "alice");
    // Approving the re-run is not the refund approval the policy asks for: pause again.
    let run = rt().block_on(make().resume("r")).unwrap();
    assert_eq!(
        run.status,
        RunStatus::WaitingForApproval,
        "the interrupted grant alone does not run a refund above the limit"
    );
    assert_eq!(calls.lock().unwrap().len(), 1, "nothing ran again yet");
    let a3 = latest_approval(&db.store, "r");
    assert_eq!(a3.kind, "refund", "the policy's own approval");
    assert_ne!(a3.id, a2.id);
    let steps = db.store.list_steps("r").unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].status, StepStatus::AwaitingApproval);
    // Both approvals given: it runs, once, on the same step.
    approve(&db.store, "r", &a3.id, "bob");
    let mut c = config(
        &db.store,
        registry(vec![refund_tool(db.path.clone(), calls.clone())]),
        refund_policy(),
        ScriptedAgent::new([agent::complete("")]),
    );
    c.ids = None;
    let run = rt().block_on(Driver::new(c).unwrap().resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    let c = calls.lock().unwrap();
    assert_eq!(c.len(), 2, "the cut-off call and exactly one re-run");
    assert!(c.iter().all(|x| x.step_index == 0));
    drop(c);
    verify(&db.path);
}

#[test]
fn driver_encoding_failure_fails_the_run_internal_error() {
    // A value that will not encode (here a reconciliation's pause whose capability is not
    // JSON) ends the run internal_error with nothing more executed, instead of leaving it
    // RUNNING behind a Json error.
    use countersign::runtime::driver::{Gate, Reconcile, ReconcileError, Reconciliation};
    use countersign::runtime::types::{Approval, Run, Step};
    struct Hook;
    impl Reconcile for Hook {
        fn reconcile(
            &self,
            _r: &Run,
            _s: &[Step],
            _a: &[Approval],
        ) -> Result<Reconciliation, ReconcileError> {
            Ok(Reconciliation::Waiting {
                pause: Some(PolicyDecision {
                    outcome: "require_approval".into(),
                    reason: "check".into(),
                    kind: "check".into(),
                    capability: b"{not json".to_vec(),
                    presentation: Vec::new(),
                }),
                detail: String::new(),
            })
        }
    }
    for gate in [false, true] {
        let db = db();
        let calls: Calls = Arc::new(Mutex::new(Vec::new()));
        left_executing(&db, SideEffect::LocalMutation, &calls);
        let mut cfg = config(
            &db.store,
            registry(vec![echo("t", SideEffect::LocalMutation, calls.clone())]),
            Arc::new(DefaultPolicy),
            ScriptedAgent::new([agent::tool_call("t", "{}"), agent::complete("")]),
        );
        cfg.ids = None;
        cfg.reconcile = Some(Arc::new(Hook));
        let run = if gate {
            let (s, v) = rt().block_on(Gate::new(cfg).unwrap().attach("r")).unwrap();
            assert!(s.is_none(), "no session on an ended run");
            let countersign::runtime::driver::Verdict::Ended(run) = v else {
                panic!("ended, got {}", v.outcome())
            };
            run
        } else {
            rt().block_on(Driver::new(cfg).unwrap().resume("r"))
                .unwrap()
        };
        assert_eq!(
            (run.status.clone(), run.reason.as_str()),
            (RunStatus::Failed, "internal_error"),
            "gate {gate}: {}",
            run.reason_detail
        );
        assert!(
            run.reason_detail.starts_with("internal: policy event: "),
            "{}",
            run.reason_detail
        );
        assert!(run.lease_owner.is_empty(), "the lease was released");
        assert_eq!(calls.lock().unwrap().len(), 1, "nothing more executed");
        assert_eq!(db.store.list_steps("r").unwrap().len(), 1, "no step more");
        verify(&db.path);
    }
}

#[test]
fn resume_interrupted_step_is_reconciled_and_continued() {
    // agentrt's TestResume_InterruptedStepIsReconciledAndContinued: `Continue` carries on
    // with the loop; the interrupted step is not paused for an operator nor run again.
    use countersign::runtime::driver::{Reconcile, ReconcileError, Reconciliation};
    use countersign::runtime::types::{Approval, Run, Step};
    struct Hook(Arc<Mutex<Vec<String>>>);
    impl Reconcile for Hook {
        fn reconcile(
            &self,
            r: &Run,
            s: &[Step],
            a: &[Approval],
        ) -> Result<Reconciliation, ReconcileError> {
            self.0.lock().unwrap().push(format!(
                "{} {} {} {}",
                r.status,
                s.len(),
                s[0].status,
                a.len()
            ));
            Ok(Reconciliation::Continue)
        }
    }
    let db = db();
    let calls: Calls = Arc::new(Mutex::new(Vec::new()));
    left_executing(&db, SideEffect::LocalMutation, &calls);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut cfg = config(
        &db.store,
        registry(vec![echo("t", SideEffect::LocalMutation, calls.clone())]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete(r#"{"reconciled":true}"#)]),
    );
    cfg.ids = None;
    cfg.reconcile = Some(Arc::new(Hook(seen.clone())));
    let run = rt()
        .block_on(Driver::new(cfg).unwrap().resume("r"))
        .unwrap();
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Completed, "goal_completed")
    );
    assert_eq!(run.result_json, r#"{"reconciled":true}"#);
    assert_eq!(
        *seen.lock().unwrap(),
        ["RUNNING 1 interrupted 0"],
        "the hook was handed the run with its step already interrupted"
    );
    assert_eq!(calls.lock().unwrap().len(), 1, "not run again");
    assert!(db.store.list_approvals("r").unwrap().is_empty(), "no pause");
    let steps = db.store.list_steps("r").unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].status, StepStatus::Interrupted);
    assert_eq!(steps[1].status, StepStatus::Done);
    let t = types(&db.store, "r");
    let i = t.iter().position(|k| k == "lease.taken_over").unwrap();
    assert_eq!(
        &t[i..i + 3],
        ["lease.taken_over", "step.interrupted", "run.resumed"]
    );
    assert!(
        kinds(&db.store, "r")
            .iter()
            .any(|(k, p)| k == "run.resumed" && p == r#"{"after":"interruption"}"#)
    );
    verify(&db.path);
}

#[test]
fn resume_and_attach_leave_failed_and_cancelled_runs_terminal() {
    // Terminal stays terminal: a FAILED or CANCELLED run is refused by resume and by a gate's
    // attach, and neither writes anything.
    use countersign::runtime::driver::Gate;
    let db = db();
    let d = driver2(
        &db.store,
        registry(vec![]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::fail("gave up"), agent::complete("")]),
    );
    let run = rt()
        .block_on(d.start_with_id("failed", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    let (calls, d2) = paused(&db, "{}");
    cancel(&db.store, "r", "alice", "no");
    for (id, status) in [("failed", "FAILED"), ("r", "CANCELLED")] {
        let before = (db.store.get_run(id).unwrap(), events(&db.store, id));
        for e in [
            rt().block_on(d2.resume(id)).unwrap_err(),
            rt().block_on(d.resume(id)).unwrap_err(),
            rt().block_on(
                Gate::new(config(
                    &db.store,
                    registry(vec![]),
                    Arc::new(DefaultPolicy),
                    ScriptedAgent::new([agent::complete("")]),
                ))
                .unwrap()
                .attach(id),
            )
            .map(|(_, v)| v.outcome())
            .unwrap_err(),
        ] {
            assert_eq!(
                e.to_string(),
                format!(
                    "agentrt: run is not in the required state: run {id} is {status} and cannot be resumed"
                )
            );
        }
        let after = (db.store.get_run(id).unwrap(), events(&db.store, id));
        assert_eq!(before, after, "{id}: nothing was written");
    }
    assert!(calls.lock().unwrap().is_empty());
    verify(&db.path);
}

/// Two resumes of one grant that the policy, asked again, no longer accepts ask one new
/// question, not two: the pause of the one that comes second finds the grant is no longer its
/// step's latest approval and is refused (`ErrRunState`), leaving one pending approval. Found
/// from outside: three workers on PostgreSQL left two pending approvals for one step, and
/// approving one of them did nothing.
#[test]
fn two_resumes_of_a_grant_the_policy_no_longer_accepts_ask_one_question() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let db = db();
    let asked = Arc::new(AtomicUsize::new(0));
    let (a2, s2) = (asked.clone(), db.store.clone());
    let policy = Arc::new(FnPolicy(
        move |_r: &policy::PolicyRequest, _v: &policy::RunView| {
            let n = a2.fetch_add(1, SeqCst);
            let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
            let wait = |done: &dyn Fn() -> bool| {
                while !done() && std::time::Instant::now() < until {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            };
            match n {
                // The first resume answers once the second is asking too: both read the grant
                // before either pauses.
                1 => wait(&|| a2.load(SeqCst) >= 3),
                // The second answers once the first one's question is committed.
                2 => wait(&|| s2.list_approvals("r").unwrap().len() >= 2),
                _ => {}
            }
            policy::need_approval("ask", "asked", b"{}", format!(r#"{{"n":{n}}}"#).as_bytes())
        },
    ));
    let (tools, calls) = echo_registry("push", SideEffect::RemoteMutation);
    let d = driver(
        &db.store,
        tools.clone(),
        policy.clone(),
        ScriptedAgent::new([agent::tool_call("push", "{}")]),
    );
    assert_eq!(start_r(&d).status, RunStatus::WaitingForApproval);
    let granted = latest_approval(&db.store, "r");
    approve(&db.store, "r", &granted.id, "alice");
    let d1 = driver2(
        &db.store,
        tools.clone(),
        policy.clone(),
        ScriptedAgent::new([agent::complete("")]),
    );
    let d2 = driver2(
        &db.store,
        tools,
        policy,
        ScriptedAgent::new([agent::complete("")]),
    );
    let rtm = rt();
    let h1 = rtm.spawn(async move { d1.resume("r").await });
    let h2 = rtm.spawn(async move { d2.resume("r").await });
    let results = [rtm.block_on(h1).unwrap(), rtm.block_on(h2).unwrap()];
    assert_eq!(asked.load(SeqCst), 3, "both resumes asked the policy");
    assert_eq!(paused_and_refused(&results), (1, 1), "{results:?}");
    let approvals = db.store.list_approvals("r").unwrap();
    let pending: Vec<_> = approvals
        .iter()
        .filter(|a| a.status == countersign::runtime::types::ApprovalStatus::Pending)
        .collect();
    assert_eq!(approvals.len(), 2, "the grant and one new question");
    assert_eq!(pending.len(), 1);
    assert!(calls.lock().unwrap().is_empty(), "nothing ran");
    verify(&db.path);
}
