//! The core types encode as Go does: the approval-hash golden vectors of spec 4.2, computed
//! over `ToolRequest::to_go_json`, and limits stored before `grant_ttl` existed.

use countersign::runtime::json::{approval_hash, gojson::Object, policy_json};
use countersign::runtime::types::{Limits, ToolRequest, ToolSpec};

#[test]
fn approval_hash_golden_vector_a_over_the_go_json_request() {
    let req = ToolRequest {
        run_id: "r1".into(),
        step_id: "s1".into(),
        spec: ToolSpec {
            name: "push".into(),
            description: "push <main> & tag".into(),
            input_schema: br#"{"type":"object"}"#.to_vec(),
            side_effect: "remote_mutation".into(),
            timeout_ns: 30_000_000_000,
            terminal: false,
        },
        args: br#"{"n":7,"ref":"refs/heads/main"}"#.to_vec(),
    };
    let json = req.to_go_json().unwrap();
    assert_eq!(
        String::from_utf8(json.clone()).unwrap(),
        r#"{"run_id":"r1","step_id":"s1","spec":{"name":"push","description":"push \u003cmain\u003e \u0026 tag","input_schema":{"type":"object"},"side_effect":"remote_mutation","timeout":30000000000},"args":{"n":7,"ref":"refs/heads/main"}}"#
    );
    let h = approval_hash(
        "remote_mutation",
        br#"{"tool":"push","args":{"n":7}}"#,
        br#"{"title":"Publish <PR> & tag","lines":1.0}"#,
        &json,
    )
    .unwrap();
    assert_eq!(
        h,
        "175bcfc7a7e3cdab6b98d7b50caf9f2a8e59d5208211b97de39a4b027c7fa0b2"
    );
}

#[test]
fn approval_hash_unchanged_by_the_policy_form() {
    let raw_args = "{\n  \"z\": {\"b\": 1.50, \"a\": \"make && rm <x> \u{2028} é \\u00e9 日本\"},\n  \"n\": 1e3\n}";
    let raw_schema = "{\n  \"type\": \"object\",\n  \"description\": \"a && b <c> \u{2028} é\",\n  \"properties\": {\"z\": {\"type\": \"object\"}, \"n\": {\"type\": \"number\", \"maximum\": 1e4, \"multipleOf\": 0.50}}\n}";
    let form = policy_json(raw_args.as_bytes()).unwrap();
    let cap = Object::new()
        .raw("args", &form)
        .unwrap()
        .str("tool", "sh")
        .finish();
    let req = ToolRequest {
        run_id: "id-01".into(),
        step_id: "id-02".into(),
        spec: ToolSpec {
            name: "sh".into(),
            description: "sh".into(),
            input_schema: raw_schema.as_bytes().to_vec(),
            side_effect: "remote_mutation".into(),
            timeout_ns: 2_000_000_000,
            terminal: false,
        },
        args: raw_args.as_bytes().to_vec(),
    };
    let h = approval_hash("remote_mutation", &cap, &cap, &req.to_go_json().unwrap()).unwrap();
    assert_eq!(
        h,
        "8441b46fd5ab497a17788f45d057d8ec122a0bbba20f39f3d45fa37061479a6b"
    );
}

#[test]
fn store_limits_without_grant_ttl_decode_to_zero() {
    let l = Limits::from_json(br#"{"max_steps":10,"max_consecutive_tool_failures":3,"loop_threshold":5,"approval_ttl":3600000000000}"#).unwrap();
    assert_eq!(
        (l.grant_ttl, l.approval_ttl, l.max_steps),
        (0, 3_600_000_000_000, 10)
    );
    assert_eq!(
        Limits::default().to_go_json(),
        br#"{"max_steps":0,"max_consecutive_tool_failures":0,"loop_threshold":0}"#
    );
    let all = Limits {
        max_steps: 1,
        max_consecutive_tool_failures: 2,
        loop_threshold: 3,
        max_model_calls: 4,
        max_output_tokens_per_call: 5,
        max_total_tokens: 6,
        max_estimated_cost_micros: 7,
        max_active_time: 8,
        max_elapsed_time: 9,
        approval_ttl: 10,
        grant_ttl: 11,
    };
    let json = all.to_go_json();
    assert_eq!(
        String::from_utf8(json.clone()).unwrap(),
        r#"{"max_steps":1,"max_consecutive_tool_failures":2,"loop_threshold":3,"max_model_calls":4,"max_output_tokens_per_call":5,"max_total_tokens":6,"max_estimated_cost_micros":7,"max_active_time":8,"max_elapsed_time":9,"approval_ttl":10,"grant_ttl":11}"#
    );
    assert_eq!(Limits::from_json(&json).unwrap(), all);
}

#[test]
fn tool_spec_terminal_is_omitted_unless_true() {
    let mut s = ToolSpec {
        name: "t".into(),
        input_schema: b"{}".to_vec(),
        side_effect: "read_only".into(),
        timeout_ns: 1,
        ..ToolSpec::default()
    };
    assert_eq!(
        s.to_go_json().unwrap(),
        br#"{"name":"t","description":"","input_schema":{},"side_effect":"read_only","timeout":1}"#
    );
    let plain = s.spec_hash().unwrap();
    s.terminal = true;
    assert!(
        s.to_go_json()
            .unwrap()
            .ends_with(br#","timeout":1,"terminal":true}"#)
    );
    assert_ne!(
        s.spec_hash().unwrap(),
        plain,
        "a changed field is another spec hash"
    );
    assert_eq!(
        String::from_utf8(s.spec_json().unwrap()).unwrap(),
        r#"{"description":"","input_schema":{},"name":"t","side_effect":"read_only","terminal":true,"timeout":1}"#
    );
}

/// A kind, origin or outcome this build does not know is kept as stored: decoding and
/// encoding again gives the same bytes, and the known ones read as their variants.
#[test]
fn unknown_kinds_origins_and_outcomes_keep_their_stored_bytes() {
    use countersign::runtime::types::{Decision, DecisionKind, Origin, Outcome, PolicyDecision};
    let raw = br#"{"kind":"teleport","tool":"t","origin":"telepathy"}"#;
    let d = Decision::from_json(raw).unwrap();
    assert_eq!(d.kind, DecisionKind::Unknown("teleport".into()));
    assert_eq!(d.origin, Origin::Unknown("telepathy".into()));
    assert_eq!(d.to_go_json().unwrap(), raw.to_vec());
    let raw = br#"{"kind":"","message":"m"}"#;
    let d = Decision::from_json(raw).unwrap();
    assert_eq!(
        (&d.kind, &d.origin),
        (&DecisionKind::Unknown(String::new()), &Origin::Absent)
    );
    assert_eq!(d.to_go_json().unwrap(), raw.to_vec());
    let raw = br#"{"kind":"tool_call","tool":"t","args":{"a":1},"origin":"plan"}"#;
    let d = Decision::from_json(raw).unwrap();
    assert_eq!(
        (&d.kind, &d.origin),
        (&DecisionKind::ToolCall, &Origin::Plan)
    );
    assert_eq!(d.to_go_json().unwrap(), raw.to_vec());
    let raw = br#"{"outcome":"Allow","reason":"case matters"}"#;
    let p = PolicyDecision::from_json(raw).unwrap();
    assert_eq!(p.outcome, Outcome::Unknown("Allow".into()));
    assert_eq!(p.to_go_json().unwrap(), raw.to_vec());
    let raw =
        br#"{"outcome":"require_approval","kind":"refund","capability":{},"presentation":{}}"#;
    let p = PolicyDecision::from_json(raw).unwrap();
    assert_eq!(p.outcome, Outcome::RequireApproval);
    assert_eq!(p.to_go_json().unwrap(), raw.to_vec());
}
