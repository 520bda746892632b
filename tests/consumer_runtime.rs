//! The consumer through the REAL runtime: driver, run database, consumer tools and consequence
//! policy. The nineteen argument cases, the authorisation matrix, the injected conversation.

mod consumer_support;

use consumer_support::nineteen;
use consumer_support::rt::{outcome, world};
use countersign::consumer::dispatch::DispatcherOptions;

#[tokio::test]
async fn the_nineteen_argument_cases_through_the_runtime() {
    let mut w = world();
    // Where each case is answered: the runtime's admission schema (shape), the policy
    // (stages 2 to 8), or the tool (execution).
    let layers = [
        "tool", "runtime", "runtime", "runtime", "runtime", "policy", "policy", "runtime",
        "runtime", "policy", "policy", "policy", "policy", "runtime", "tool", "tool", "policy",
        "policy", "runtime",
    ];
    for (i, case) in nineteen().into_iter().enumerate() {
        w.fresh_backend(DispatcherOptions::default());
        let id = format!("case-{i:02}");
        let run = w
            .run_calls(&id, "cu_ana", &[(case.tool, case.args.clone())])
            .await;
        let steps = w.steps(&id);
        let (code, layer) = outcome(&steps[0]);
        assert_eq!(
            code, case.code,
            "{}: {:?}",
            case.label, steps[0].observation
        );
        assert_eq!(layer, layers[i], "{}", case.label);
        assert_eq!(w.effects(&id), case.effects, "{}", case.label);
        assert_eq!(run.status.as_str(), "COMPLETED", "{}", case.label);
        // A policy refusal carries the same property-path detail as the dispatcher.
        if layer == "policy" && !case.detail.is_empty() {
            let obs = steps[0].observation.as_ref().unwrap();
            let content: serde_json::Value = serde_json::from_slice(&obs.content).unwrap();
            let reason = content["reason"].as_str().unwrap();
            assert_eq!(
                reason,
                format!("{}: {}", case.code, case.detail.join("; ")),
                "{}",
                case.label
            );
        }
    }
}

fn args_for(tool: &str, order: &str) -> serde_json::Value {
    match tool {
        "issue_refund" => {
            consumer_support::refund(serde_json::json!({"order_id": order, "amount_cents": 1000}))
        }
        "update_shipping_address" => consumer_support::address(order, "5 Pine Rd", "94107"),
        _ => serde_json::json!({"order_id": order}),
    }
}

/// Runs the 32 (user, order, tool) combinations through the runtime, one run each on a fresh
/// backend, and returns the combinations that broke the rule "only owners reach an order".
async fn matrix_failures(options: DispatcherOptions) -> Vec<String> {
    let mut w = consumer_support::rt::world_with(options);
    let owners = [
        ("ord_1001", "cu_ana"),
        ("ord_1002", "cu_ben"),
        ("ord_1003", "cu_ana"),
        ("ord_1004", "cu_ana"),
    ];
    let mut failed = Vec::new();
    let mut n = 0;
    for user in ["cu_ana", "cu_ben"] {
        for (order, owner) in owners {
            for tool in countersign::consumer::tools::TOOL_NAMES {
                w.fresh_backend(options);
                n += 1;
                let id = format!("m-{user}-{order}-{tool}");
                w.run_calls(&id, user, &[(tool, args_for(tool, order))])
                    .await;
                let (code, _) = outcome(&w.steps(&id)[0]);
                let ok = if owner != user {
                    code == "not_found" && w.effects(&id) == 0
                } else {
                    code != "not_found"
                };
                if !ok {
                    failed.push(format!("{user} {order} {tool}: {code}"));
                }
            }
        }
    }
    assert_eq!(n, 32);
    failed
}

/// Whether, for every tool, the observation for another customer's order is byte-identical to
/// the one for an order that does not exist.
async fn missing_looks_like_not_yours(options: DispatcherOptions) -> bool {
    let w = consumer_support::rt::world_with(options);
    let mut same = true;
    for tool in countersign::consumer::tools::TOOL_NAMES {
        let other = format!("o-{tool}");
        let missing = format!("x-{tool}");
        w.run_calls(&other, "cu_ana", &[(tool, args_for(tool, "ord_1002"))])
            .await;
        w.run_calls(&missing, "cu_ana", &[(tool, args_for(tool, "ord_9999"))])
            .await;
        let a = w.steps(&other)[0].observation_json.clone();
        let b = w.steps(&missing)[0].observation_json.clone();
        same &= a == b;
    }
    same
}

#[tokio::test]
async fn authorization_matrix_through_the_runtime() {
    let failed = matrix_failures(DispatcherOptions::default()).await;
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(missing_looks_like_not_yours(DispatcherOptions::default()).await);
}

#[tokio::test]
async fn seeded_defect_fails_the_matrix_through_the_runtime_only_for_non_owners() {
    let broken = DispatcherOptions {
        skip_ownership_check_for_seeded_defect_test: true,
    };
    let failed = matrix_failures(broken).await;
    assert_eq!(failed.len(), 16, "{failed:#?}");
    assert!(!missing_looks_like_not_yours(broken).await);
    for f in &failed {
        let user = f.split_whitespace().next().unwrap();
        let order = f.split_whitespace().nth(1).unwrap();
        let owner = if order == "ord_1002" {
            "cu_ben"
        } else {
            "cu_ana"
        };
        assert_ne!(user, owner, "{f}");
    }
}

#[tokio::test]
async fn session_cap_pauses_the_third_refund_through_the_runtime() {
    let w = world();
    let four =
        consumer_support::refund(serde_json::json!({"order_id": "ord_1004", "amount_cents": 4000}));
    let run = w
        .run_calls(
            "cap",
            "cu_ana",
            &[
                ("issue_refund", four.clone()),
                ("issue_refund", four.clone()),
                ("issue_refund", four),
            ],
        )
        .await;
    assert_eq!(run.status.as_str(), "WAITING_FOR_APPROVAL");
    let codes: Vec<String> = w.steps("cap").iter().map(|s| outcome(s).0).collect();
    assert_eq!(codes, ["ok", "ok", "needs_approval"]);
    assert_eq!(w.effects("cap"), 2);
    let approvals = w.store.list_approvals("cap").unwrap();
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].kind, "session_cap");
    let p: serde_json::Value = serde_json::from_str(&approvals[0].presentation).unwrap();
    assert_eq!(
        (
            p["session_irreversible_cents"].as_i64(),
            p["impact_cents"].as_i64()
        ),
        (Some(8000), Some(4000))
    );
    let c: serde_json::Value = serde_json::from_str(&approvals[0].capability).unwrap();
    assert_eq!(
        c,
        serde_json::json!({"args": {"amount_cents": 4000, "order_id": "ord_1004", "reason": "damaged"}, "tool": "issue_refund"})
    );
}

#[tokio::test]
async fn injected_conversation_through_the_runtime_changes_nothing_and_waits_clean() {
    use countersign::consumer::adapter::{self, ScenarioAgent};
    use countersign::consumer::scenarios;
    use countersign::consumer::session::Session;
    let w = world();
    let s = scenarios::named("injected").unwrap();
    w.backend
        .put_session(&Session::full("inj", s.user), s.name)
        .unwrap();
    let d = adapter::driver(
        w.store.clone(),
        &w.dispatcher,
        ScenarioAgent::by_session(w.backend.clone()),
        "test",
        None,
    )
    .unwrap();
    let run = d
        .start_with_id(
            "inj",
            &s.goal,
            countersign::runtime::driver::default_limits(),
        )
        .await
        .unwrap();
    assert_eq!(run.status.as_str(), "WAITING_FOR_APPROVAL");
    let steps = w.steps("inj");
    let got: Vec<(String, &str)> = steps.iter().map(outcome).collect();
    assert_eq!(
        got,
        [
            ("not_found".to_string(), "policy"),
            ("invalid_arguments".into(), "runtime"),
            ("needs_approval".into(), "policy")
        ]
    );
    assert!(w.backend.ledger().unwrap().is_empty());
    // The hostile text is stored as data (goal, the model's prose) ...
    assert_eq!(w.store.get_run("inj").unwrap().goal, s.goal);
    assert!(
        steps[2]
            .decision
            .as_ref()
            .unwrap()
            .reason
            .contains("APPROVED")
    );
    // ... but what the operator is asked to approve was built by the runtime.
    let a = &w.store.list_approvals("inj").unwrap()[0];
    let shown = format!("{} {} {}", a.kind, a.capability, a.presentation);
    for bad in [
        "APPROVED", "\u{1b}", "\\u001b", "\u{202e}", "\\u202e", "\u{200b}", "ord_1002", "cu_ben",
    ] {
        assert!(!shown.contains(bad), "{bad:?} in {shown}");
    }
    let p: serde_json::Value = serde_json::from_str(&a.presentation).unwrap();
    assert_eq!(
        (
            p["order"].as_str(),
            p["amount_cents"].as_i64(),
            p["customer"].as_str()
        ),
        (Some("ord_1004"), Some(6000), Some("cu_ana"))
    );
    assert_eq!(p["title"], "Refund 60.00 USD on ord_1004");
}

#[tokio::test]
async fn exposure_scope_and_a_missing_session_are_refused_by_the_policy() {
    use countersign::consumer::session::{ALL_SCOPES, Session};
    use countersign::consumer::tools::TOOL_NAMES;
    let w = world();
    let r = consumer_support::refund(serde_json::json!({}));
    w.backend
        .put_session(
            &Session::new("narrow", "cu_ana", &ALL_SCOPES, &["get_order"]),
            "",
        )
        .unwrap();
    w.backend
        .put_session(
            &Session::new("readonly", "cu_ana", &["orders:read"], &TOOL_NAMES),
            "",
        )
        .unwrap();
    for (id, want) in [
        ("narrow", "not_available"),
        ("readonly", "forbidden"),
        ("nobody", "no_session"),
    ] {
        let scenario = consumer_support::rt::calls_scenario(&[("issue_refund", r.clone())]);
        let d = w.driver(scenario);
        d.start_with_id(id, "test", countersign::runtime::driver::default_limits())
            .await
            .unwrap();
        let (code, layer) = outcome(&w.steps(id)[0]);
        assert_eq!((code.as_str(), layer), (want, "policy"), "{id}");
    }
    assert!(w.backend.ledger().unwrap().is_empty());
}
