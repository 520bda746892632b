//! Runs driven by a model through the render layer, and replay: a run recorded against a local
//! OpenAI-compatible server replays offline, byte for byte.

mod providers_support;
mod runtime_support;

use std::path::Path;
use std::sync::{Arc, Mutex};

use countersign::providers::agent::ModelAgent;
use countersign::providers::openai::{self, OpenAi};
use countersign::providers::render::{self, Options};
use countersign::providers::replay::{Recorder, Replayer};
use countersign::providers::{ChatRequest, ChatResponse, Secret, ToolUse};
use countersign::runtime::driver::{Config, Driver};
use countersign::runtime::model::{
    FakeModel, FakeReply, Model, ModelError, ModelFuture, ModelRequest, ModelSetup, Usage,
};
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::tools::{FnTool, SideEffect, ToolOutput};
use countersign::runtime::types::{Run, RunStatus};
use runtime_support::*;

fn agent() -> Arc<ModelAgent> {
    Arc::new(ModelAgent {
        options: Options::new(Arc::new(|i| format!("Goal: {}", i.goal))),
        system: "You help with orders.".into(),
        max_output_tokens: 200,
    })
}

/// echo (counts calls) and a terminal `finish`.
fn tools(calls: Arc<Mutex<Vec<String>>>) -> countersign::runtime::tools::Registry {
    let c2 = calls.clone();
    let finish = FnTool::new(
        {
            let mut d = def("finish", SideEffect::ReadOnly, OBJ);
            d.terminal = true;
            d
        },
        move |c| {
            c2.lock()
                .unwrap()
                .push(format!("finish {}", String::from_utf8_lossy(&c.args)));
            Box::pin(async move {
                Ok(ToolOutput {
                    content: br#"{"done":true}"#.to_vec(),
                    summary: "finished".into(),
                })
            })
        },
    );
    let c1 = calls.clone();
    let echo = FnTool::new(def("echo", SideEffect::ReadOnly, OBJ), move |c| {
        c1.lock()
            .unwrap()
            .push(format!("echo {}", String::from_utf8_lossy(&c.args)));
        let args = c.args.clone();
        Box::pin(async move {
            Ok(ToolOutput {
                content: args,
                summary: "echoed".into(),
            })
        })
    });
    registry(vec![echo, finish])
}

/// (request body, reply body) pairs.
type Seen = Arc<Mutex<Vec<(Vec<u8>, Vec<u8>)>>>;

/// Keeps every request and reply body that passes through.
struct Capture {
    inner: Arc<dyn Model>,
    seen: Seen,
}

impl Model for Capture {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn generate(&self, req: ModelRequest) -> ModelFuture {
        let body = req.body.clone();
        let fut = self.inner.generate(req);
        let seen = self.seen.clone();
        Box::pin(async move {
            let r = fut.await?;
            seen.lock().unwrap().push((body, r.body.clone()));
            Ok(r)
        })
    }
}

fn run_on(db: &Db, model: Arc<dyn Model>, calls: Arc<Mutex<Vec<String>>>) -> Run {
    let mut cfg =
        Config::new(db.store.clone(), tools(calls), Arc::new(DefaultPolicy)).agent(agent());
    cfg.now = Some(clock());
    cfg.ids = Some(ids());
    cfg.lease_owner = "test".into();
    cfg.model = Some(ModelSetup::new(model));
    let d = Driver::new(cfg).unwrap();
    rt().block_on(d.start_with_id("r", "refund order 7", limits()))
        .unwrap()
}

fn reply(text: &str, uses: &[(&str, &str)], stop: &str) -> FakeReply {
    let r = ChatResponse {
        text: text.into(),
        tool_uses: uses
            .iter()
            .map(|(n, a)| ToolUse {
                id: "x".into(),
                name: n.to_string(),
                args: a.as_bytes().to_vec(),
            })
            .collect(),
        stop_reason: stop.into(),
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
            cached_input_tokens: 0,
        },
        raw: Vec::new(),
    };
    FakeReply::ok(
        &String::from_utf8(r.go_json(true).unwrap()).unwrap(),
        r.usage,
    )
}

#[test]
fn model_agent_records_pseudo_kinds_nudges_and_runs_only_the_first_call() {
    let db = db();
    let fake = Arc::new(FakeModel::new(
        "m",
        vec![
            reply("I would refund it.", &[], "end_turn"),
            reply("", &[("echo", r#"{"x":2}"#)], "max_tokens"),
            reply(
                "Checking.",
                &[("echo", r#"{"x":1}"#), ("wipe", "{}")],
                "tool_use",
            ),
            reply("", &[("finish", r#"{"summary":"done"}"#)], "tool_use"),
        ],
    ));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let run = run_on(&db, fake.clone(), calls.clone());
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    assert_eq!(
        *calls.lock().unwrap(),
        vec![
            r#"echo {"x":1}"#.to_string(),
            r#"finish {"summary":"done"}"#.to_string()
        ],
        "only the first tool call of a reply runs; pseudo kinds run nothing"
    );
    let steps = db.store.list_steps("r").unwrap();
    let kinds: Vec<(String, String)> = steps
        .iter()
        .map(|s| {
            (
                s.decision.as_ref().unwrap().kind.to_string(),
                s.observation.as_ref().unwrap().kind.clone(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("no_tool_call", "invalid_decision"),
            ("truncated", "invalid_decision"),
            ("tool_call", "tool_result"),
            ("tool_call", "tool_result"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert_eq!(
        steps[2].decision.as_ref().unwrap().reason,
        "Checking. [1 further tool call(s) not executed: wipe]"
    );
    // The last request shows the model every earlier step, with the nudges.
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 4);
    let last = ChatRequest::decode(&reqs[3].body).unwrap();
    assert_eq!(last.system, "You help with orders.");
    assert_eq!(last.max_output_tokens, 200);
    assert_eq!(last.tools.len(), 2);
    let m = &last.messages;
    assert_eq!(m.len(), 7);
    assert_eq!(m[0].content[0].text, "Goal: refund order 7");
    assert_eq!(m[1].content[0].text, "I would refund it.");
    assert_eq!(m[2].content[0].text, render::NUDGE_NO_TOOL_CALL);
    assert_eq!(m[4].content[0].text, render::NUDGE_TRUNCATED);
    assert_eq!(m[5].content[1].kind, "tool_use");
    assert_eq!(m[5].content[1].tool_use_id, "step_2");
    assert_eq!(m[5].content[1].input, br#"{"x":1}"#.to_vec());
    assert_eq!(m[6].content[0].kind, "tool_result");
    assert_eq!(m[6].content[0].tool_use_id, "step_2");
    assert_eq!(m[6].content[0].content, r#"{"x":1}"#);
    assert!(!m[6].content[0].is_error);
    verify(&db.path);
}

const R1: &str = r#"{"id":"a","choices":[{"message":{"content":"Looking it up.","tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{\"order\": 7, \"big\": 9007199254740993}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":120,"completion_tokens":20}}"#;
const R2: &str = r#"{"id":"b","choices":[{"message":{"content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"finish","arguments":"{\"summary\":\"refund <small> & done\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":200,"completion_tokens":12,"prompt_tokens_details":{"cached_tokens":100}}}"#;

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn replay_reproduces_a_recorded_run_byte_for_byte_offline() {
    let server = providers_support::Server::start(vec![
        providers_support::json(200, R1),
        providers_support::json(200, R2),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let live = OpenAi::new_with_env(
        openai::Config {
            model: "gpt-x".into(),
            base_url: server.url(),
            api_key: Secret::new("sk-local"),
            ..Default::default()
        },
        &|_| None,
    )
    .unwrap();
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let rec = Recorder::new(Arc::new(live), &dir).unwrap();
    let db1 = db();
    let calls1 = Arc::new(Mutex::new(Vec::new()));
    let run1 = run_on(
        &db1,
        Arc::new(Capture {
            inner: Arc::new(rec),
            seen: recorded.clone(),
        }),
        calls1.clone(),
    );
    assert_eq!(run1.status, RunStatus::Completed, "{}", run1.reason_detail);
    assert_eq!(server.requests.lock().unwrap().len(), 2);

    // Owner-only: the directory 0700, each file 0600, nothing else left in it.
    assert_eq!(mode(&dir), 0o700);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    for n in &names {
        assert!(n.len() == 64 + 5 && n.ends_with(".json"), "{n}");
        assert_eq!(mode(&dir.join(n)), 0o600, "{n}");
    }

    // Offline: the same run from the recording, with the server gone.
    drop(server);
    let replayed = Arc::new(Mutex::new(Vec::new()));
    let db2 = db();
    let calls2 = Arc::new(Mutex::new(Vec::new()));
    let run2 = run_on(
        &db2,
        Arc::new(Capture {
            inner: Arc::new(Replayer::new("openai:gpt-x", &dir)),
            seen: replayed.clone(),
        }),
        calls2.clone(),
    );
    assert_eq!(run2.status, RunStatus::Completed, "{}", run2.reason_detail);
    let (a, b) = (
        recorded.lock().unwrap().clone(),
        replayed.lock().unwrap().clone(),
    );
    assert_eq!(a.len(), 2);
    assert_eq!(
        a, b,
        "every request and reply body is the same, byte for byte"
    );
    assert_eq!(
        ChatResponse::decode(&b[0].1).unwrap().raw,
        R1.as_bytes(),
        "the provider's raw bytes come back exactly"
    );
    assert_eq!(*calls1.lock().unwrap(), *calls2.lock().unwrap());
    assert_eq!(
        calls2.lock().unwrap()[0],
        r#"echo {"order": 7, "big": 9007199254740993}"#
    );
    let s1: Vec<_> = db1
        .store
        .list_steps("r")
        .unwrap()
        .into_iter()
        .map(|s| s.decision_json)
        .collect();
    let s2: Vec<_> = db2
        .store
        .list_steps("r")
        .unwrap()
        .into_iter()
        .map(|s| s.decision_json)
        .collect();
    assert_eq!(s1, s2);
    verify(&db1.path);
    verify(&db2.path);

    // A request asked once more than recorded says so.
    let again = Replayer::new("openai:gpt-x", &dir);
    let first = a[0].0.clone();
    let req = ModelRequest {
        body: first,
        max_output_tokens: 200,
    };
    assert!(rt().block_on(again.generate(req.clone())).is_ok());
    match rt().block_on(again.generate(req)) {
        Err(ModelError::Fatal(e)) => assert!(
            e.starts_with("replay: no recorded response for this request (key ")
                && e.ends_with(": recorded 1 times, requested 2)"),
            "{e}"
        ),
        other => panic!("{other:?}"),
    }

    // Re-recording through a planted symlink replaces the link, never writes through it.
    let outside = tmp.path().join("outside.txt");
    std::fs::write(&outside, "keep me").unwrap();
    let target = dir.join(&names[0]);
    std::fs::remove_file(&target).unwrap();
    std::os::unix::fs::symlink(&outside, &target).unwrap();
    let server = providers_support::Server::start(vec![
        providers_support::json(200, R1),
        providers_support::json(200, R2),
    ]);
    let live = OpenAi::new_with_env(
        openai::Config {
            model: "gpt-x".into(),
            base_url: server.url(),
            ..Default::default()
        },
        &|_| None,
    )
    .unwrap();
    let rec = Recorder::new(Arc::new(live), &dir).unwrap();
    let run3 = run_on(&db(), Arc::new(rec), Arc::new(Mutex::new(Vec::new())));
    assert_eq!(run3.status, RunStatus::Completed);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    assert!(std::fs::symlink_metadata(&target).unwrap().is_file());
    assert_eq!(mode(&target), 0o600);
}
