//! Writing runs through the store's write API the way the runtime does (spec 3.5, 4.3).

use countersign::runtime::json::{approval_hash, content_hash};
use countersign::runtime::store::{
    Charge, NewApproval, NewModelCall, NewRun, StepUpdate, Store, StoreError, Transition,
};
use countersign::runtime::types::{
    Decision, Limits, Observation, PolicyDecision, RunStatus, StepStatus, Timestamp, ToolRequest,
    ToolSpec,
};

pub const OWNER: &str = "test-worker/0123456789ab";

pub fn spec(name: &str, side_effect: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("{name} <tool> & co"),
        input_schema: br#"{ "type": "object" }"#.to_vec(),
        side_effect: side_effect.into(),
        timeout_ns: 30_000_000_000,
        terminal: false,
    }
}

pub fn limits() -> Limits {
    Limits {
        max_steps: 10,
        max_consecutive_tool_failures: 3,
        loop_threshold: 5,
        approval_ttl: 3_600_000_000_000,
        ..Limits::default()
    }
}

/// A run created RUNNING at `now`, leased by OWNER.
pub fn create(store: &Store, run_id: &str, goal: &str, now: Timestamp) {
    let specs = [
        spec("lookup", "read_only"),
        spec("refund", "remote_mutation"),
    ];
    let hashes: Vec<String> = specs.iter().map(|s| s.spec_hash().unwrap()).collect();
    let limits = limits();
    store
        .write(|tx| {
            for s in &specs {
                let json = s.spec_json().unwrap();
                tx.insert_tool_spec(&s.spec_hash().unwrap(), std::str::from_utf8(&json).unwrap())?;
            }
            tx.insert_run(&NewRun {
                id: run_id,
                goal,
                limits: &limits,
                now,
                tools: &hashes,
                lease_owner: OWNER,
                lease_expires_at: now.add_nanos(30_000_000_000),
            })
        })
        .unwrap();
}

fn decide(
    store: &Store,
    run_id: &str,
    step_id: &str,
    index: i64,
    tool: &ToolSpec,
    args: &str,
    now: Timestamp,
) {
    store
        .write(|tx| {
            tx.start_step(run_id, step_id, index, OWNER, now)?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let d = Decision {
        kind: "tool_call".into(),
        tool: tool.name.clone(),
        args: args.as_bytes().to_vec(),
        ..Decision::default()
    };
    let dj = d.to_go_json().unwrap();
    let hash = tool.spec_hash().unwrap();
    store
        .write(|tx| {
            tx.require_status(run_id, &[RunStatus::Running], Some(OWNER))?;
            tx.update_step(
                step_id,
                &[StepStatus::Deciding],
                &StepUpdate {
                    decision_json: Some(std::str::from_utf8(&dj).unwrap()),
                    spec_hash: Some(&hash),
                    ..StepUpdate::default()
                },
            )?;
            tx.append_event(run_id, step_id, &now, "step.decided", &dj)
        })
        .unwrap();
}

/// One allowed read-only tool step that succeeds, with a model call.
pub fn tool_step(store: &Store, run_id: &str, step_id: &str, index: i64, now: Timestamp) {
    let tool = spec("lookup", "read_only");
    decide(
        store,
        run_id,
        step_id,
        index,
        &tool,
        r#"{"order": "o<1>"}"#,
        now,
    );
    let policy = PolicyDecision {
        outcome: "allow".into(),
        reason: "side effect read_only is allow by policy".into(),
        ..PolicyDecision::default()
    };
    let pj = policy.to_go_json().unwrap();
    store
        .write(|tx| {
            tx.require_lease(run_id, OWNER, now)?;
            tx.update_step(
                step_id,
                &[StepStatus::Deciding],
                &StepUpdate {
                    status: Some(StepStatus::Executing),
                    policy_json: Some(std::str::from_utf8(&pj).unwrap()),
                    policy_id: Some("test-policy@v1"),
                    ..StepUpdate::default()
                },
            )?;
            tx.append_event(run_id, step_id, &now, "step.policy", &pj)?;
            tx.append_event(
                run_id,
                step_id,
                &now,
                "step.tool_started",
                br#"{"args":{"order":"o\u003c1\u003e"},"tool":"lookup"}"#,
            )
        })
        .unwrap();
    let content = br#"{"status":"shipped"}"#;
    let obs = Observation {
        kind: "tool_result".into(),
        content: content.to_vec(),
        summary: "order shipped".into(),
        content_hash: content_hash(content),
    };
    let oj = obs.to_go_json().unwrap();
    let call_id = format!("{step_id}-call");
    store
        .write(|tx| {
            tx.insert_model_call(&NewModelCall {
                id: &call_id,
                run_id,
                step_id,
                attempt: 1,
                status: "ok",
                model: "test-model",
                input_tokens: 100,
                output_tokens: 10,
                dispatched_at: now,
                completed_at: now,
                ..NewModelCall::default()
            })?;
            tx.add_usage(
                run_id,
                &Charge {
                    calls: 1,
                    input_tokens: 100,
                    output_tokens: 10,
                    cached_input_tokens: 0,
                    cost_micros: 450,
                },
            )?;
            tx.update_step(
                step_id,
                &[StepStatus::Executing],
                &StepUpdate {
                    status: Some(StepStatus::Done),
                    observation_json: Some(std::str::from_utf8(&oj).unwrap()),
                    observation_hash: Some(&obs.content_hash),
                    finished_at: Some(now),
                    ..StepUpdate::default()
                },
            )?;
            tx.add_active_ms(run_id, 12)?;
            let payload = format!(
                r#"{{"content_hash":"{}","duration_ms":12,"summary":"order shipped","tool":"lookup"}}"#,
                obs.content_hash
            );
            tx.append_event(run_id, step_id, &now, "step.tool_finished", payload.as_bytes())
        })
        .unwrap();
}

/// A remote-mutation step paused for approval: returns (approval id, hash).
pub fn pause_step(
    store: &Store,
    run_id: &str,
    step_id: &str,
    approval_id: &str,
    index: i64,
    now: Timestamp,
) -> (String, String) {
    let tool = spec("refund", "remote_mutation");
    let args = r#"{"order": "o1", "amount": 800}"#;
    decide(store, run_id, step_id, index, &tool, args, now);
    let cap = format!(
        r#"{{"args":{},"tool":"refund"}}"#,
        r#"{"amount":800,"order":"o1"}"#
    );
    let policy = PolicyDecision {
        outcome: "require_approval".into(),
        reason: "side effect remote_mutation is require_approval by policy".into(),
        kind: "remote_mutation".into(),
        capability: cap.as_bytes().to_vec(),
        presentation: cap.as_bytes().to_vec(),
    };
    let pj = policy.to_go_json().unwrap();
    let req = ToolRequest {
        run_id: run_id.into(),
        step_id: step_id.into(),
        spec: tool,
        args: args.as_bytes().to_vec(),
    };
    let rj = req.to_go_json().unwrap();
    let hash = approval_hash("remote_mutation", cap.as_bytes(), cap.as_bytes(), &rj).unwrap();
    let mut requested = countersign::runtime::json::gojson::Object::new();
    requested
        .str("approval_id", approval_id)
        .encoded("capability", cap.as_bytes())
        .str("hash", &hash)
        .str("kind", "remote_mutation")
        .encoded("presentation", cap.as_bytes())
        .str("reason", &policy.reason);
    let requested = requested.finish();
    store
        .write(|tx| {
            tx.update_step(
                step_id,
                &[StepStatus::Deciding],
                &StepUpdate {
                    status: Some(StepStatus::AwaitingApproval),
                    policy_json: Some(std::str::from_utf8(&pj).unwrap()),
                    ..StepUpdate::default()
                },
            )?;
            tx.transition(&Transition {
                run_id: run_id.as_bytes(),
                from: &[RunStatus::Running],
                to: RunStatus::WaitingForApproval,
                reason: "",
                detail: "",
                finished_at: Timestamp::ZERO,
                result_json: "",
                lease_owner: Some(OWNER),
                lease_expires_at: Timestamp::ZERO,
            })?;
            tx.append_event(run_id, step_id, &now, "step.policy", &pj)?;
            tx.append_event(run_id, step_id, &now, "approval.requested", &requested)?;
            tx.insert_approval(&NewApproval {
                id: approval_id,
                run_id,
                step_id,
                kind: "remote_mutation",
                capability_json: &cap,
                presentation_json: &cap,
                request_json: std::str::from_utf8(&rj).unwrap(),
                hash: &hash,
                created_at: now,
                expires_at: now.add_nanos(limits().approval_ttl),
            })
        })
        .unwrap();
    (approval_id.to_string(), hash)
}

/// A run with one done step and one step waiting for approval: (approval id, hash).
pub fn waiting_run(store: &Store, run_id: &str, now: Timestamp) -> (String, String) {
    create(store, run_id, &format!("goal of {run_id}"), now);
    tool_step(store, run_id, &format!("{run_id}-s0"), 0, now);
    pause_step(
        store,
        run_id,
        &format!("{run_id}-s1"),
        &format!("{run_id}-a1"),
        1,
        now,
    )
}
