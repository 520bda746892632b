//! The loop (spec 3.5) through a real store: rows, events and payloads.

mod runtime_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::driver::Driver;
use countersign::runtime::json;
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::tools::{FnTool, SideEffect, Tool, ToolError, ToolOutput};
use countersign::runtime::types::{RunStatus, StepStatus};
use runtime_support::*;

#[test]
fn driver_completes_and_persists() {
    let db = db();
    let (tools, calls) = echo_registry("lookup", SideEffect::ReadOnly);
    let agent = ScriptedAgent::new([
        agent::tool_call("lookup", r#"{"q": "<x>"}"#),
        agent::complete(r#"{"a":"<b>"}"#),
    ]);
    let delivered: Arc<Mutex<Vec<(i64, bool)>>> = Arc::new(Mutex::new(Vec::new()));
    let mut cfg = config(&db.store, tools, Arc::new(DefaultPolicy), agent.clone());
    let (d2, path) = (delivered.clone(), db.path.clone());
    // The observer checks, on a connection of its own, that each event is committed.
    cfg.observer = Some(Arc::new(move |e| {
        let c = rusqlite::Connection::open(&path).unwrap();
        let n: i64 = c
            .query_row("SELECT COUNT(*) FROM events WHERE seq = ?", [e.seq], |r| {
                r.get(0)
            })
            .unwrap();
        d2.lock().unwrap().push((e.seq, n == 1));
    }));
    let driver = Driver::new(cfg).unwrap();
    let run = rt()
        .block_on(driver.start_with_id("run-1", "find it", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.reason, "goal_completed");
    assert_eq!(run.result_json, r#"{"a":"<b>"}"#);
    assert_eq!(run.step_count, 2);
    assert!(run.lease_owner.is_empty(), "finishing releases the lease");
    let c = calls.lock().unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].run_id, "run-1");
    assert_eq!(c[0].step_index, 0);
    assert_eq!(c[0].args, br#"{"q": "<x>"}"#);
    let steps = db.store.list_steps("run-1").unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(c[0].step_id, steps[0].id);
    assert_eq!(steps[0].status, StepStatus::Done);
    assert_eq!(
        steps[0].decision_json,
        r#"{"kind":"tool_call","tool":"lookup","args":{"q":"\u003cx\u003e"}}"#
    );
    let obs = steps[0].observation.as_ref().unwrap();
    assert_eq!(obs.kind, "tool_result");
    assert_eq!(obs.content_hash, json::content_hash(br#"{"q":"<x>"}"#));
    assert_eq!(steps[0].observation_hash, obs.content_hash);
    assert_eq!(steps[1].status, StepStatus::Done);
    let ev = kinds(&db.store, "run-1");
    let t: Vec<&str> = ev.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        t,
        [
            "run.created",
            "run.started",
            "step.started",
            "step.decided",
            "step.policy",
            "step.tool_started",
            "step.tool_finished",
            "step.started",
            "step.decided",
            "run.finished"
        ]
    );
    assert_eq!(ev[2].1, r#"{"index":0}"#);
    assert_eq!(ev[5].1, r#"{"args":{"q":"\u003cx\u003e"},"tool":"lookup"}"#);
    assert!(ev[4].1.starts_with(r#"{"outcome":"allow","reason":"side effect read_only is allow by policy","spec_hash":""#), "{}", ev[4].1);
    assert!(ev[4].1.ends_with(r#","view":{"status":"RUNNING","step_count":1,"model_calls":0,"input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"estimated_cost_micros":0,"active_ms":0,"steps":0,"approvals":0}}"#), "{}", ev[4].1);
    assert_eq!(
        ev[8].1,
        r#"{"kind":"complete","result":{"a":"\u003cb\u003e"}}"#
    );
    assert_eq!(
        ev[9].1,
        r#"{"detail":"","reason":"goal_completed","status":"COMPLETED","steps":2}"#
    );
    let d = delivered.lock().unwrap();
    assert_eq!(d.len(), ev.len());
    assert!(
        d.iter().all(|(_, committed)| *committed),
        "every event was committed before delivery"
    );
    verify(&db.path);
}

#[test]
fn driver_invalid_arguments_become_observation() {
    let db = db();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let strict = r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#;
    let c2 = calls.clone();
    let t = FnTool::new(def("count", SideEffect::ReadOnly, strict), move |c| {
        c2.lock().unwrap().push(c);
        Box::pin(async { Ok(ToolOutput::default()) })
    });
    let agent = ScriptedAgent::new([
        agent::tool_call("count", r#"{"n": "seven"}"#),
        agent::tool_call("count", r#"{"n": 1"#),
        agent::tool_call("nope", "{}"),
        agent::tool_call("no\u{1b}[2Jpe\u{202e}", "{}"),
        agent::complete(""),
    ]);
    let driver = driver(&db.store, registry(vec![t]), Arc::new(DefaultPolicy), agent);
    let mut l = limits();
    l.max_consecutive_tool_failures = 5;
    let run = rt().block_on(driver.start_with_id("r", "g", l)).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert!(
        calls.lock().unwrap().is_empty(),
        "an invalid decision runs nothing"
    );
    let steps = db.store.list_steps("r").unwrap();
    // Recorded verbatim before validation.
    assert_eq!(
        steps[0].decision_json,
        r#"{"kind":"tool_call","tool":"count","args":{"n":"seven"}}"#
    );
    let o = steps[0].observation.as_ref().unwrap();
    assert_eq!(o.kind, "invalid_decision");
    assert!(
        o.summary
            .starts_with("invalid decision: arguments do not match schema: "),
        "{}",
        o.summary
    );
    assert_eq!(steps[0].status, StepStatus::Failed);
    // Unusable JSON is kept out of band.
    assert_eq!(
        steps[1].decision_json,
        r#"{"kind":"tool_call","tool":"count","invalid_args":"{\"n\": 1"}"#
    );
    assert_eq!(
        steps[1].observation.as_ref().unwrap().kind,
        "invalid_decision"
    );
    assert_eq!(
        steps[2].observation.as_ref().unwrap().content,
        br#"{"error":"unknown tool \"nope\""}"#
    );
    let failed: Vec<String> = events(&db.store, "r")
        .into_iter()
        .filter(|e| e.kind == "step.failed")
        .map(|e| e.payload)
        .collect();
    assert_eq!(failed.len(), 4);
    // A name the runtime does not know is quoted as agentrt quotes it (Go's %q), so the
    // observation and its hash are agentrt's: `\x1b`, `\u202e`, not Rust's `\u{1b}`.
    assert_eq!(
        steps[3].observation.as_ref().unwrap().content,
        br#"{"error":"unknown tool \"no\\x1b[2Jpe\\u202e\""}"#
    );
    let h = json::content_hash(br#"{"error":"unknown tool \"nope\""}"#);
    assert_eq!(
        failed[2],
        format!(
            r#"{{"content_hash":"{h}","detail":"unknown tool \"nope\"","observation":"invalid_decision"}}"#
        )
    );
    verify(&db.path);
}

#[test]
fn driver_invalid_arguments_are_recorded_out_of_band_as_base64_when_not_utf8() {
    let db = db();
    let (tools, calls) = echo_registry("t", SideEffect::ReadOnly);
    let mut d = agent::tool_call("t", "");
    d.args = b"{\"a\":\"\xff\"}".to_vec();
    d.invalid_args = "agent-supplied, dropped".into();
    let agent = ScriptedAgent::new([d, agent::complete("")]);
    let driver = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    start_r(&driver);
    let steps = db.store.list_steps("r").unwrap();
    assert_eq!(
        steps[0].decision_json,
        r#"{"kind":"tool_call","tool":"t","invalid_args":"eyJhIjoi/yJ9","invalid_base64":true}"#
    );
    assert!(calls.lock().unwrap().is_empty());
    verify(&db.path);
}

/// A terminal tool, `finish`, that answers `{"done":true}`.
fn finish_tool() -> Arc<dyn Tool> {
    let mut d = def("finish", SideEffect::ReadOnly, OBJ);
    d.terminal = true;
    FnTool::new(d, |_c| {
        Box::pin(async {
            Ok(ToolOutput {
                content: br#"{"done":true}"#.to_vec(),
                summary: "finished".into(),
            })
        })
    })
}

#[test]
fn driver_terminal_tool_completes_run() {
    let db = db();
    let t = finish_tool();
    let agent = ScriptedAgent::new([agent::tool_call("finish", "{}")]);
    let driver = driver(&db.store, registry(vec![t]), Arc::new(DefaultPolicy), agent);
    let run = start_r(&driver);
    assert_eq!(
        (run.status, run.reason.as_str(), run.reason_detail.as_str()),
        (
            RunStatus::Completed,
            "goal_completed",
            "terminal tool finish"
        )
    );
    assert_eq!(run.result_json, r#"{"done":true}"#);
    let ev = events(&db.store, "r");
    let n = ev.len();
    assert_eq!(ev[n - 2].kind, "step.tool_finished");
    assert_eq!(ev[n - 1].kind, "run.finished");
    verify(&db.path);
}

#[test]
fn driver_tool_abort_ends_run() {
    let db = db();
    let t = FnTool::new(def("t", SideEffect::ReadOnly, OBJ), |_c| {
        Box::pin(async { Err(ToolError::AbortRun("disk full".into())) })
    });
    let agent = ScriptedAgent::new([agent::tool_call("t", "{}"), agent::complete("")]);
    let driver = driver(&db.store, registry(vec![t]), Arc::new(DefaultPolicy), agent);
    let run = start_r(&driver);
    assert_eq!(
        (run.status, run.reason.as_str(), run.reason_detail.as_str()),
        (RunStatus::Failed, "tool_abort", "disk full")
    );
    let s = db.store.list_steps("r").unwrap();
    let o = s[0].observation.as_ref().unwrap();
    assert_eq!(
        o.content,
        br#"{"error":"abort run: disk full","failure":"abort","tool":"t"}"#
    );
    assert_eq!(o.summary, "t aborted the run: disk full");
    verify(&db.path);
}

#[test]
fn driver_step_limit() {
    let db = db();
    let (tools, calls) = echo_registry("t", SideEffect::ReadOnly);
    let agent =
        ScriptedAgent::new((0..10).map(|i| agent::tool_call("t", &format!(r#"{{"i":{i}}}"#))));
    let mut l = limits();
    l.max_steps = 3;
    let driver = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let run = rt().block_on(driver.start_with_id("r", "g", l)).unwrap();
    assert_eq!(
        (run.status, run.reason.as_str(), run.reason_detail.as_str()),
        (RunStatus::Failed, "limit_steps", "step limit 3 reached")
    );
    assert_eq!(calls.lock().unwrap().len(), 3);
    let ev = kinds(&db.store, "r");
    let n = ev.len();
    assert_eq!(
        ev[n - 2],
        (
            "limit.exceeded".into(),
            r#"{"detail":"step limit 3 reached","reason":"limit_steps"}"#.into()
        )
    );
    assert_eq!(ev[n - 1].0, "run.finished");
    verify(&db.path);
}

#[test]
fn driver_consecutive_failures_end_run() {
    let db = db();
    let t = FnTool::new(def("t", SideEffect::ReadOnly, OBJ), |_c| {
        Box::pin(async { Err(ToolError::Failed("boom".into())) })
    });
    let agent =
        ScriptedAgent::new((0..10).map(|i| agent::tool_call("t", &format!(r#"{{"i":{i}}}"#))));
    let driver = driver(&db.store, registry(vec![t]), Arc::new(DefaultPolicy), agent);
    let run = start_r(&driver);
    assert_eq!(
        (run.status, run.reason.as_str(), run.reason_detail.as_str()),
        (
            RunStatus::Failed,
            "repeated_tool_failures",
            "3 consecutive failed steps"
        )
    );
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(s.len(), 3);
    let o = s[0].observation.as_ref().unwrap();
    assert_eq!(
        o.content,
        br#"{"error":"boom","failure":"error","tool":"t"}"#
    );
    assert_eq!(o.summary, "t error: boom");
    let fin: Vec<String> = events(&db.store, "r")
        .into_iter()
        .filter(|e| e.kind == "step.tool_finished")
        .map(|e| e.payload)
        .collect();
    assert!(
        fin[0].starts_with(r#"{"duration_ms":"#)
            && fin[0].ends_with(r#","error":"t error: boom","tool":"t"}"#),
        "{}",
        fin[0]
    );
    verify(&db.path);
}

#[test]
fn driver_failure_streak_resets_on_success() {
    let db = db();
    let n = Arc::new(Mutex::new(0));
    let t = FnTool::new(def("t", SideEffect::ReadOnly, OBJ), move |_c| {
        let mut g = n.lock().unwrap();
        *g += 1;
        let ok = *g % 3 == 0;
        Box::pin(async move {
            if ok {
                Ok(ToolOutput::default())
            } else {
                Err(ToolError::Failed("x".into()))
            }
        })
    });
    let mut script: Vec<_> = (0..6)
        .map(|i| agent::tool_call("t", &format!(r#"{{"i":{i}}}"#)))
        .collect();
    script.push(agent::complete(""));
    let agent = ScriptedAgent::new(script);
    let driver = driver(&db.store, registry(vec![t]), Arc::new(DefaultPolicy), agent);
    let run = start_r(&driver);
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
}

#[test]
fn driver_identical_call_and_result_stops() {
    let db = db();
    let (tools, calls) = echo_registry("t", SideEffect::ReadOnly);
    let agent = ScriptedAgent::new((0..10).map(|_| agent::tool_call("t", r#"{"same":1}"#)));
    let driver = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let run = start_r(&driver);
    assert_eq!(
        (run.status, run.reason.as_str(), run.reason_detail.as_str()),
        (
            RunStatus::Failed,
            "loop_detected",
            "t produced the same observation 3 times in a row"
        )
    );
    assert_eq!(calls.lock().unwrap().len(), 3);
    let ev = kinds(&db.store, "r");
    let n = ev.len();
    let h = json::content_hash(br#"{"same":1}"#);
    assert_eq!(
        ev[n - 2],
        (
            "loop.detected".into(),
            format!(r#"{{"args_hash":"{h}","observation_hash":"{h}","repeats":3,"tool":"t"}}"#)
        )
    );
    verify(&db.path);
}

#[test]
fn driver_repeated_call_with_changing_result_allowed() {
    let db = db();
    let n = Arc::new(Mutex::new(0));
    let t = FnTool::new(def("t", SideEffect::ReadOnly, OBJ), move |_c| {
        let mut g = n.lock().unwrap();
        *g += 1;
        let v = *g;
        Box::pin(async move {
            Ok(ToolOutput {
                content: format!(r#"{{"v":{v}}}"#).into_bytes(),
                summary: String::new(),
            })
        })
    });
    let mut script: Vec<_> = (0..5)
        .map(|_| agent::tool_call("t", r#"{"same":1}"#))
        .collect();
    script.push(agent::complete(""));
    let driver = driver(
        &db.store,
        registry(vec![t]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new(script),
    );
    let run = start_r(&driver);
    assert_eq!(run.status, RunStatus::Completed);
}

#[test]
fn driver_tool_timeout() {
    let db = db();
    let mut d = def("slow", SideEffect::ReadOnly, OBJ);
    d.timeout = Duration::from_millis(20);
    let t = FnTool::new(d, |_c| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(ToolOutput::default())
        })
    });
    let agent = ScriptedAgent::new([agent::tool_call("slow", "{}"), agent::complete("")]);
    let driver = driver(&db.store, registry(vec![t]), Arc::new(DefaultPolicy), agent);
    let run = start_r(&driver);
    assert_eq!(run.status, RunStatus::Completed);
    let s = db.store.list_steps("r").unwrap();
    let o = s[0].observation.as_ref().unwrap();
    assert_eq!(
        o.content,
        br#"{"error":"context deadline exceeded","failure":"timeout","tool":"slow"}"#
    );
    assert_eq!(o.summary, "slow timeout: context deadline exceeded");
}

#[test]
fn driver_tool_panic_is_observed() {
    let db = db();
    // A long timeout: with RUST_BACKTRACE set, the panic hook symbolises a backtrace from the
    // test binary's debug info, which took over 5 s on a loaded machine and turned the panic
    // into a timeout.
    let mut slow_ok = def("bad", SideEffect::ReadOnly, OBJ);
    slow_ok.timeout = std::time::Duration::from_secs(300);
    let t = FnTool::new(slow_ok, |_c| Box::pin(async { panic!("kaboom") }));
    let agent = ScriptedAgent::new([agent::tool_call("bad", "{}"), agent::complete("")]);
    let driver = driver(&db.store, registry(vec![t]), Arc::new(DefaultPolicy), agent);
    let run = start_r(&driver);
    assert_eq!(run.status, RunStatus::Completed);
    let s = db.store.list_steps("r").unwrap();
    let o = s[0].observation.as_ref().unwrap();
    assert_eq!(o.content, br#"{"error":"panic: kaboom","tool":"bad"}"#);
    assert_eq!(o.summary, "bad panicked");
}

#[test]
fn driver_pseudo_decision_kinds_are_invalid() {
    let db = db();
    let (tools, calls) = echo_registry("t", SideEffect::ReadOnly);
    let mut trunc = agent::tool_call("t", "{}");
    trunc.kind = "truncated".into();
    let mut none = agent::tool_call("t", "{}");
    none.kind = "no_tool_call".into();
    let mut empty = agent::tool_call("t", "{}");
    empty.kind = "".into();
    let mut odd = agent::complete("");
    odd.origin = "telepathy".into();
    let agent = ScriptedAgent::new([trunc, none, agent::complete(""), empty, odd]);
    let mut l = limits();
    l.max_consecutive_tool_failures = 10;
    let driver = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let run = rt()
        .block_on(driver.start_with_id("r", "g", l.clone()))
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(s.len(), 3);
    for st in &s[..2] {
        assert_eq!(st.observation.as_ref().unwrap().kind, "invalid_decision");
    }
    assert!(
        calls.lock().unwrap().is_empty(),
        "a pseudo-kind never runs the tool it names"
    );
    // An empty kind and an unknown origin are invalid too.
    let db2 = runtime_support::db();
    let mut empty = agent::tool_call("t", "{}");
    empty.kind = "".into();
    let mut odd = agent::complete("");
    odd.origin = "telepathy".into();
    let tools = registry(vec![echo("t", SideEffect::ReadOnly, calls.clone())]);
    let driver = runtime_support::driver(
        &db2.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([empty, odd, agent::complete("")]),
    );
    rt().block_on(driver.start_with_id("r", "g", l)).unwrap();
    let s = db2.store.list_steps("r").unwrap();
    assert_eq!(
        s[0].observation.as_ref().unwrap().content,
        br#"{"error":"decision has no kind"}"#
    );
    assert_eq!(
        s[1].observation.as_ref().unwrap().content,
        br#"{"error":"unknown decision origin \"telepathy\""}"#
    );
}

#[test]
fn driver_agent_error_fails_run() {
    let db = db();
    let tools = registry(vec![]);
    let agent = ScriptedAgent::new(Vec::<countersign::runtime::agent::Scripted>::new());
    let driver = driver(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let run = start_r(&driver);
    assert_eq!(
        (run.status, run.reason.as_str(), run.reason_detail.as_str()),
        (RunStatus::Failed, "agent_error", "script exhausted")
    );
    let ev = kinds(&db.store, "r");
    assert!(
        ev.iter().any(
            |(k, p)| k == "step.failed" && p == r#"{"detail":"agent error: script exhausted"}"#
        )
    );
    verify(&db.path);
}

/// A panic in the agent's `decide` or in its future is an agent error: the run ends FAILED
/// (`agent error: panic: …`) instead of the panic unwinding through `start` with the run left
/// RUNNING (found from outside).
#[test]
fn driver_agent_panic_fails_the_run_as_an_agent_error() {
    struct Sync;
    impl countersign::runtime::agent::Agent for Sync {
        fn decide(
            &self,
            _: countersign::runtime::agent::StepInput,
        ) -> countersign::runtime::agent::DecideFuture {
            panic!("sync boom")
        }
    }
    let in_future = ScriptedAgent::new([countersign::runtime::agent::Scripted::With(Box::new(
        |_| Box::pin(async { panic!("async boom") }),
    ))]);
    let agents: [(Arc<dyn countersign::runtime::agent::Agent>, &str); 2] =
        [(Arc::new(Sync), "sync boom"), (in_future, "async boom")];
    for (agent, said) in agents {
        let db = db();
        let d = Driver::new(config(
            &db.store,
            registry(vec![]),
            Arc::new(DefaultPolicy),
            agent,
        ))
        .unwrap();
        let run = start_r(&d);
        assert_eq!(
            (run.status, run.reason.as_str()),
            (RunStatus::Failed, "agent_error"),
            "{said}"
        );
        assert_eq!(run.reason_detail, format!("panic: {said}"));
        assert!(run.lease_owner.is_empty(), "{said}: the lease is let go");
        let stored = db.store.get_run("r").unwrap();
        assert_eq!(stored.status, RunStatus::Failed);
        verify(&db.path);
    }
}

/// A panicking observer misses the events it panicked on; the run goes on and every event is
/// written (before, the panic unwound through `start`, the run left RUNNING).
#[test]
fn driver_observer_panic_does_not_stop_the_run() {
    let db = db();
    let (tools, calls) = echo_registry("lookup", SideEffect::ReadOnly);
    let agent = ScriptedAgent::new([
        agent::tool_call("lookup", r#"{"q":1}"#),
        agent::complete(""),
    ]);
    let mut cfg = config(&db.store, tools, Arc::new(DefaultPolicy), agent);
    let handed = Arc::new(Mutex::new(0));
    let h = handed.clone();
    cfg.observer = Some(Arc::new(move |_| {
        *h.lock().unwrap() += 1;
        panic!("observer boom")
    }));
    let d = Driver::new(cfg).unwrap();
    let run = start_r(&d);
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(calls.lock().unwrap().len(), 1);
    let written = events(&db.store, "r").len();
    assert_eq!(
        *handed.lock().unwrap(),
        written,
        "each event was handed once"
    );
    verify(&db.path);
}

/// A run id that is taken is a typed error (`StoreError::RunExists`) from `start_with_id` and
/// `Gate::begin`, and the run that has it is left as it was (it was SQLite's raw "UNIQUE
/// constraint failed", found from outside).
#[test]
fn a_run_id_that_is_taken_is_refused_with_a_typed_error() {
    use countersign::runtime::driver::RuntimeError;
    use countersign::runtime::store::StoreError;
    let db = db();
    let done = start_r(&driver(
        &db.store,
        registry(vec![]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    ));
    let events_before = db.store.count_events("r").unwrap();
    let again = driver(
        &db.store,
        registry(vec![]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let e = rt()
        .block_on(again.start_with_id("r", "another goal", limits()))
        .unwrap_err();
    assert!(
        matches!(&e, RuntimeError::Store(StoreError::RunExists { run_id }) if run_id.as_bytes() == b"r"),
        "{e:?}"
    );
    assert!(e.to_string().contains("run r exists already"), "{e}");
    let gate = gate(&db.store, registry(vec![]), Arc::new(DefaultPolicy));
    let Err(e) = rt().block_on(gate.begin("r", "g", limits())) else {
        panic!("a Gate began a second run r");
    };
    assert!(
        matches!(&e, RuntimeError::Store(StoreError::RunExists { .. })),
        "{e:?}"
    );
    let after = db.store.get_run("r").unwrap();
    assert_eq!((after.status, after.goal), (done.status, done.goal));
    assert_eq!(db.store.count_events("r").unwrap(), events_before);
    verify(&db.path);
}

#[test]
fn driver_unusable_tool_content_is_tool_error() {
    let db = db();
    let t = FnTool::new(def("t", SideEffect::ReadOnly, OBJ), |_c| {
        Box::pin(async {
            Ok(ToolOutput {
                content: br#"{"a":1,"a":2}"#.to_vec(),
                summary: "s".into(),
            })
        })
    });
    let driver = driver(
        &db.store,
        registry(vec![t]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::tool_call("t", "{}"), agent::complete("")]),
    );
    start_r(&driver);
    let s = db.store.list_steps("r").unwrap();
    let o = s[0].observation.as_ref().unwrap();
    assert_eq!(o.kind, "tool_error");
    assert_eq!(o.content, br#"{"content":"{\"a\":1,\"a\":2}","error":"duplicate key \"a\"","failure":"invalid_content","tool":"t"}"#);
    verify(&db.path);
}

#[test]
fn driver_clock_readings_are_stable() {
    // A clock moving 1 ms per reading pins how many readings each write takes, and in what order.
    let db = db();
    let (tools, _calls) = echo_registry("t", SideEffect::ReadOnly);
    let driver = driver(
        &db.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::tool_call("t", "{}"), agent::complete("")]),
    );
    start_r(&driver);
    let at: Vec<(String, String)> = events(&db.store, "r")
        .into_iter()
        .map(|e| (e.kind, e.at_text))
        .collect();
    let t = |ms: u32| {
        if ms == 0 {
            "2026-09-25T14:03:04.5Z".to_string()
        } else {
            format!("2026-09-25T14:03:04.{}Z", 500 + ms)
                .trim_end_matches('0')
                .replace(".Z", "Z")
        }
    };
    let want = [
        ("run.created", 0),
        ("run.started", 0),
        ("step.started", 1),
        ("step.decided", 2),
        ("step.policy", 3),
        ("step.tool_started", 3),
        ("step.tool_finished", 4),
        ("step.started", 5),
        ("step.decided", 6),
        ("run.finished", 8),
    ];
    let want: Vec<(String, String)> = want.iter().map(|(k, ms)| (k.to_string(), t(*ms))).collect();
    assert_eq!(at, want);
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(
        s[1].finished_at.to_rfc3339(),
        t(7),
        "the settling step ends at its own reading, before the run's"
    );
}

#[test]
fn driver_cached_view_equals_a_fresh_read_at_every_policy_call() {
    // The loop keeps the run, its steps and approvals in memory and updates them after each
    // write instead of reading them back. What the policy is handed is that cache: at every
    // call it must equal what another connection reads from the database (the step being
    // decided aside), through tool calls, a failure, a model-free pause, a decision and a
    // resume.
    use countersign::runtime::policy::{self, FnPolicy, Policy};
    use countersign::runtime::store::Store;
    let db = db();
    let fresh = Store::open_existing(&db.path, true).unwrap();
    let diffs = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::new(Mutex::new(0usize));
    let pol = {
        let (diffs, seen) = (diffs.clone(), seen.clone());
        FnPolicy(move |r: &policy::PolicyRequest, v: &policy::RunView| {
            *seen.lock().unwrap() += 1;
            let run = fresh.get_run(&v.run_id).unwrap();
            let mut steps = fresh.list_steps(&v.run_id).unwrap();
            steps.retain(|s| s.id != r.step_id);
            let approvals = fresh.list_approvals(&v.run_id).unwrap();
            let cached: Vec<_> = v.steps.iter().map(|s| (**s).clone()).collect();
            let cached_a: Vec<_> = v.approvals.iter().map(|a| (**a).clone()).collect();
            let mut d = diffs.lock().unwrap();
            if cached != steps {
                d.push(format!("steps at {}: {cached:#?} vs {steps:#?}", r.step_id));
            }
            if cached_a != approvals {
                d.push(format!("approvals at {}", r.step_id));
            }
            let counters = (
                v.step_count,
                v.model_calls,
                v.input_tokens,
                v.output_tokens,
                v.estimated_cost_micros,
                v.active_ms,
            );
            let stored = (
                run.step_count,
                run.model_calls,
                run.input_tokens,
                run.output_tokens,
                run.estimated_cost_micros,
                run.active_ms,
            );
            if counters != stored {
                d.push(format!(
                    "run counters at {}: {counters:?} vs {stored:?}",
                    r.step_id
                ));
            }
            DefaultPolicy.evaluate(r, v)
        })
    };
    let pol: Arc<dyn Policy> = Arc::new(pol);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let reg = || {
        registry(vec![
            echo("look", SideEffect::ReadOnly, calls.clone()),
            echo("push", SideEffect::RemoteMutation, calls.clone()),
        ])
    };
    let d = driver(
        &db.store,
        reg(),
        pol.clone(),
        ScriptedAgent::new([
            agent::tool_call("look", r#"{"q":1}"#),
            agent::tool_call("nope", "{}"),
            agent::tool_call("look", r#"{"q":2}"#),
            agent::tool_call("push", r#"{"to":"origin"}"#),
        ]),
    );
    let run = rt().block_on(d.start_with_id("r", "g", limits())).unwrap();
    assert_eq!(
        run.status,
        RunStatus::WaitingForApproval,
        "{} {} / {}",
        run.reason,
        run.reason_detail,
        diffs.lock().unwrap().join("\n")
    );
    let a = latest_approval(&db.store, "r");
    approve(&db.store, "r", &a.id, "alice");
    let d2 = driver2(
        &db.store,
        reg(),
        pol,
        ScriptedAgent::new([agent::tool_call("look", r#"{"q":3}"#), agent::complete("")]),
    );
    let run = rt().block_on(d2.resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert!(
        *seen.lock().unwrap() >= 4,
        "the policy was asked at each tool call"
    );
    let d = diffs.lock().unwrap();
    assert!(d.is_empty(), "{}", d.join("\n"));
    verify(&db.path);
}

#[test]
fn driver_terminal_tool_commits_with_its_run() {
    // A terminal tool's outcome and its run's ending are one transaction: after every commit
    // (the observer is handed each commit's events before the driver writes again) a
    // connection of its own never sees the step finished while the run is not.
    let db = db();
    let t = finish_tool();
    let seen: Arc<Mutex<Vec<(i64, String, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let (s2, path) = (seen.clone(), db.path.clone());
    let mut cfg = config(
        &db.store,
        registry(vec![t]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::tool_call("finish", "{}")]),
    );
    cfg.observer = Some(Arc::new(move |e| {
        let c = rusqlite::Connection::open(&path).unwrap();
        let state = c
            .query_row(
                "SELECT COALESCE((SELECT status FROM steps WHERE run_id = 'r' AND idx = 0), ''), \
                 (SELECT status FROM runs WHERE id = 'r')",
                [],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )
            .unwrap();
        s2.lock().unwrap().push((e.seq, state.0, state.1));
    }));
    let run = rt()
        .block_on(Driver::new(cfg).unwrap().start_with_id("r", "g", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    let seen = seen.lock().unwrap();
    for (seq, step, run) in seen.iter() {
        let finished = step == "done" || step == "failed";
        assert!(
            !finished || run == "COMPLETED",
            "after the commit of event {seq} the step is {step} and the run {run}"
        );
    }
    let states: Vec<(&str, &str)> = seen
        .iter()
        .map(|(_, s, r)| (s.as_str(), r.as_str()))
        .collect();
    assert!(states.contains(&("executing", "RUNNING")));
    assert_eq!(states.last(), Some(&("done", "COMPLETED")));
    verify(&db.path);
}

#[test]
fn driver_store_work_never_blocks_the_async_executor() {
    // On a current-thread runtime (one thread for every task) store work goes to the blocking
    // pool.
    store_work_leaves_other_tasks_running(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
    );
}

#[test]
fn driver_store_work_never_blocks_a_multi_thread_runtimes_worker() {
    // On a multi-thread runtime with one worker, store work runs in place (`block_in_place`):
    // the worker hands its other tasks on before it waits. Run as a spawned task, as a server
    // would run it; with the store work called plainly on the worker the ticker starves.
    store_work_leaves_other_tasks_running(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap(),
    );
}

/// A driver whose write waits on SQLite's lock (another connection holds it) leaves the
/// runtime's other tasks running: a ticker task must make 50 ticks while the driver is stuck
/// behind the lock; only then is the lock released. With store work on the worker thread the
/// ticker starves until the busy timeout fails the driver.
fn store_work_leaves_other_tasks_running(rtm: tokio::runtime::Runtime) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let db = db();
    let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
    let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
    let path = db.path.clone();
    let holder = std::thread::spawn(move || {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        held_tx.send(()).unwrap();
        hold_rx.recv().unwrap();
        c.execute_batch("COMMIT").unwrap();
    });
    held_rx.recv().unwrap();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let d = driver(
        &db.store,
        registry(vec![echo("lookup", SideEffect::ReadOnly, calls.clone())]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::tool_call("lookup", "{}"), agent::complete("")]),
    );
    let ticks = Arc::new(AtomicUsize::new(0));
    let run = rtm.block_on(async {
        let run = tokio::spawn(async move { d.start_with_id("r", "g", limits()).await });
        let t = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                t.fetch_add(1, Ordering::SeqCst);
            }
        });
        while ticks.load(Ordering::SeqCst) < 50 {
            assert!(
                !run.is_finished(),
                "the driver finished before the lock was released"
            );
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert!(
            !run.is_finished(),
            "the driver is still waiting on the lock"
        );
        hold_tx.send(()).unwrap();
        let r = run.await.unwrap();
        ticker.abort();
        r
    });
    holder.join().unwrap();
    let run = run.expect("the run goes on once the lock is free");
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(calls.lock().unwrap().len(), 1);
    verify(&db.path);
}

/// The driver opens the next step in the store hop that records a tool's outcome; a caller
/// that dropped the driver's future while the tool ran gets the outcome recorded (the task is
/// detached) and no next step opened for nobody to drive.
#[test]
fn driver_dropped_during_a_tool_records_the_outcome_and_opens_no_next_step() {
    let db = db();
    let mut d = def("slow", SideEffect::ReadOnly, OBJ);
    d.timeout = Duration::from_secs(300);
    let t = FnTool::new(d, |_c| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(ToolOutput {
                content: br#"{"ok":true}"#.to_vec(),
                summary: "done".into(),
            })
        })
    });
    let agent = ScriptedAgent::new([
        agent::tool_call("slow", "{}"),
        agent::tool_call("slow", "{}"),
        agent::complete(""),
    ]);
    let driver = driver(&db.store, registry(vec![t]), Arc::new(DefaultPolicy), agent);
    let rt = rt();
    let dropped = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_millis(100),
            driver.start_with_id("r", "g", limits()),
        )
        .await
    });
    assert!(dropped.is_err(), "the driver's future was dropped mid-tool");
    let mut steps = db.store.list_steps("r").unwrap();
    for _ in 0..600 {
        if steps.first().is_some_and(|s| s.status == StepStatus::Done) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        steps = db.store.list_steps("r").unwrap();
    }
    assert_eq!(steps[0].status, StepStatus::Done, "the outcome is recorded");
    // What the recording hop would have opened next is opened in that same hop, right after
    // the outcome: given time, nothing more appears.
    std::thread::sleep(Duration::from_millis(200));
    let steps = db.store.list_steps("r").unwrap();
    assert_eq!(
        steps.len(),
        1,
        "no step opened after the future was dropped"
    );
    assert_eq!(
        db.store.get_run("r").unwrap().status,
        RunStatus::Running,
        "the run waits for a driver to resume it"
    );
    drop(rt);
}
