//! The authorisation matrix over every (user, order, tool), and the seeded-defect proof: the
//! same suite run against a dispatcher whose ownership check was removed must fail exactly
//! the non-owner cases and the missing-vs-not-yours comparison, and nothing else.

mod consumer_support;

use consumer_support::{address, fresh_with, refund};
use countersign::consumer::dispatch::{CallKey, DispatcherOptions};
use countersign::consumer::session::Session;
use countersign::consumer::tools::TOOL_NAMES;
use serde_json::{Value, json};

const USERS: [&str; 2] = ["cu_ana", "cu_ben"];

fn args_for(tool: &str, order: &str) -> Value {
    match tool {
        "issue_refund" => refund(json!({"order_id": order, "amount_cents": 1000})),
        "update_shipping_address" => address(order, "5 Pine Rd", "94107"),
        _ => json!({"order_id": order}),
    }
}

/// One named check of the suite; returns the labels of its failed sub-cases.
type Check = fn(DispatcherOptions) -> Vec<String>;

fn authorization_matrix(opt: DispatcherOptions) -> Vec<String> {
    let mut failed = Vec::new();
    let (b0, _) = fresh_with(opt);
    let owners = b0.owners().unwrap();
    assert_eq!(owners.len(), 4);
    for user in USERS {
        for (order, owner) in &owners {
            for tool in TOOL_NAMES {
                let (backend, d) = fresh_with(opt);
                let s = Session::full("s", user);
                let r = d.call(
                    &s,
                    tool,
                    &args_for(tool, order),
                    Some(&CallKey::plain("k")),
                    None,
                );
                let ledger = backend.ledger().unwrap();
                let ok = if owner != user {
                    r.code() == "not_found" && ledger.is_empty()
                } else {
                    r.code() != "not_found"
                };
                if !ok {
                    failed.push(format!("matrix {user} {order} {tool}: {}", r.code()));
                }
            }
        }
    }
    failed
}

fn other_customers_order_looks_like_a_missing_order(opt: DispatcherOptions) -> Vec<String> {
    let (_, d) = fresh_with(opt);
    let ana = Session::full("s", "cu_ana");
    let mut failed = Vec::new();
    for tool in TOOL_NAMES {
        let other = d.call(
            &ana,
            tool,
            &args_for(tool, "ord_1002"),
            Some(&CallKey::plain("k1")),
            None,
        );
        let missing = d.call(
            &ana,
            tool,
            &args_for(tool, "ord_9999"),
            Some(&CallKey::plain("k2")),
            None,
        );
        if other.to_json() != missing.to_json() {
            failed.push(format!("missing vs not yours {tool}"));
        }
    }
    // One sub-case: the comparison as a whole (the article counts it once).
    if failed.is_empty() {
        failed
    } else {
        vec!["missing vs not yours".into()]
    }
}

fn injected_identity_argument_is_rejected(opt: DispatcherOptions) -> Vec<String> {
    let (backend, d) = fresh_with(opt);
    let r = d.call(
        &Session::full("s", "cu_ana"),
        "issue_refund",
        &refund(json!({"customer_id": "cu_ben"})),
        Some(&CallKey::plain("k")),
        None,
    );
    if r.code() == "invalid_arguments" && backend.ledger().unwrap().is_empty() {
        vec![]
    } else {
        vec!["identity argument".into()]
    }
}

fn large_refund_waits(opt: DispatcherOptions) -> Vec<String> {
    let (backend, d) = fresh_with(opt);
    let r = d.call(
        &Session::full("s", "cu_ana"),
        "issue_refund",
        &refund(json!({"order_id": "ord_1004", "amount_cents": 8000})),
        Some(&CallKey::plain("k")),
        None,
    );
    if r.code() == "needs_approval" && backend.ledger().unwrap().is_empty() {
        vec![]
    } else {
        vec!["large refund".into()]
    }
}

fn approval_binding(opt: DispatcherOptions) -> Vec<String> {
    let (backend, d) = fresh_with(opt);
    let ana = Session::full("s", "cu_ana");
    let g = d
        .grant(
            &ana,
            "issue_refund",
            &refund(json!({"order_id": "ord_1004", "amount_cents": 9000})),
        )
        .unwrap();
    let r = d.call(
        &ana,
        "issue_refund",
        &refund(json!({"order_id": "ord_1004", "amount_cents": 8000})),
        Some(&CallKey::plain("k")),
        Some(&g),
    );
    if r.code() == "needs_approval" && backend.ledger().unwrap().is_empty() {
        vec![]
    } else {
        vec!["binding".into()]
    }
}

fn replay(opt: DispatcherOptions) -> Vec<String> {
    let (backend, d) = fresh_with(opt);
    let ana = Session::full("s", "cu_ana");
    let a = refund(json!({"amount_cents": 1000}));
    d.call(&ana, "issue_refund", &a, Some(&CallKey::plain("k")), None);
    let second = d.call(&ana, "issue_refund", &a, Some(&CallKey::plain("k")), None);
    let replayed = second.to_json()["replayed"] == json!(true);
    if replayed && backend.ledger().unwrap().len() == 1 {
        vec![]
    } else {
        vec!["replay".into()]
    }
}

fn session_cap(opt: DispatcherOptions) -> Vec<String> {
    let (backend, d) = fresh_with(opt);
    let ana = Session::full("s", "cu_ana");
    for i in 0..3 {
        d.call(
            &ana,
            "issue_refund",
            &refund(json!({"order_id": "ord_1004", "amount_cents": 4000})),
            Some(&CallKey::plain(&format!("k{i}"))),
            None,
        );
    }
    if backend.ledger().unwrap().len() == 2 {
        vec![]
    } else {
        vec!["session cap".into()]
    }
}

fn address_after_shipment(opt: DispatcherOptions) -> Vec<String> {
    let (backend, d) = fresh_with(opt);
    let r = d.call(
        &Session::full("s", "cu_ana"),
        "update_shipping_address",
        &address("ord_1001", "5 Pine Rd", "94107"),
        Some(&CallKey::plain("k")),
        None,
    );
    if r.code() == "invalid_state" && backend.ledger().unwrap().is_empty() {
        vec![]
    } else {
        vec!["after shipment".into()]
    }
}

const SUITE: [(&str, Check); 8] = [
    ("authorization_matrix", authorization_matrix),
    (
        "other_customers_order_looks_like_a_missing_order",
        other_customers_order_looks_like_a_missing_order,
    ),
    (
        "injected_identity_argument_is_rejected",
        injected_identity_argument_is_rejected,
    ),
    ("large_refund_waits", large_refund_waits),
    ("approval_binding", approval_binding),
    ("replay", replay),
    ("session_cap", session_cap),
    ("address_after_shipment", address_after_shipment),
];

fn run_suite(opt: DispatcherOptions) -> Vec<(&'static str, Vec<String>)> {
    SUITE
        .iter()
        .map(|(name, check)| (*name, check(opt)))
        .filter(|(_, f)| !f.is_empty())
        .collect()
}

#[test]
fn authorization_matrix_only_owners_reach_their_orders() {
    let failures = run_suite(DispatcherOptions::default());
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn seeded_defect_without_ownership_check_fails_exactly_the_non_owner_cases() {
    let broken = DispatcherOptions {
        skip_ownership_check_for_seeded_defect_test: true,
    };
    let failures = run_suite(broken);
    let names: Vec<&str> = failures.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "authorization_matrix",
            "other_customers_order_looks_like_a_missing_order"
        ]
    );
    let matrix = &failures[0].1;
    assert_eq!(matrix.len(), 16, "{matrix:#?}");
    // Every failed combination is one where the user is not the owner.
    let owners = [
        ("ord_1001", "cu_ana"),
        ("ord_1002", "cu_ben"),
        ("ord_1003", "cu_ana"),
        ("ord_1004", "cu_ana"),
    ];
    for f in matrix {
        let parts: Vec<&str> = f.split_whitespace().collect();
        let (user, order) = (parts[1], parts[2]);
        let owner = owners
            .iter()
            .find(|(o, _)| *o == order)
            .map(|(_, u)| *u)
            .unwrap();
        assert_ne!(owner, user, "{f}");
    }
    assert_eq!(failures[1].1, ["missing vs not yours"]);
}
