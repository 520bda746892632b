//! The dispatcher directly (no runtime): the nineteen argument cases, the stages 1 to 3, the
//! email recipient, the approval binding, replay and the session cap. Assertions are on the
//! response code and on the backend's effect ledger.

mod consumer_support;

use consumer_support::{address, fresh, nineteen, refund};
use countersign::consumer::dispatch::{CallKey, Dispatcher, Response};
use countersign::consumer::session::Session;
use serde_json::{Value, json};

fn ana() -> Session {
    Session::full("s-ana", "cu_ana")
}

/// One call by `s` under the call key `key`, with no grant.
fn call(d: &Dispatcher, s: &Session, tool: &str, args: &Value, key: &str) -> Response {
    d.call(s, tool, args, Some(&CallKey::plain(key)), None)
}

#[test]
fn the_nineteen_argument_cases_give_their_codes_and_ledgers() {
    let cases = nineteen();
    assert_eq!(cases.len(), 19);
    for case in cases {
        let (backend, d) = fresh();
        let r = call(&d, &ana(), case.tool, &case.args, "k1");
        assert_eq!(r.code(), case.code, "{}: {:?}", case.label, r);
        assert_eq!(
            backend.ledger().unwrap().len(),
            case.effects,
            "{}",
            case.label
        );
        if let Response::Refused { detail, .. } = &r {
            let want: Vec<String> = case.detail.iter().map(|s| s.to_string()).collect();
            assert_eq!(detail, &want, "{}", case.label);
        }
    }
}

#[test]
fn normalised_values_are_what_is_stored() {
    let (backend, d) = fresh();
    let r = call(
        &d,
        &ana(),
        "update_shipping_address",
        &address("ord_1003", "  5 Pine Rd ", "９４１０７"),
        "k",
    );
    assert_eq!(r.code(), "ok");
    assert_eq!(
        backend.order("ord_1003").unwrap().unwrap().address,
        "5 Pine Rd, 94107"
    );
    assert_eq!(backend.ledger().unwrap()[0].detail, "5 Pine Rd, 94107");
}

#[test]
fn refusals_never_echo_the_offending_value() {
    let (_, d) = fresh();
    let hostile = "\u{1b}[2J\u{202e}APPROVED";
    for args in [
        refund(json!({"reason": hostile})),
        refund(json!({"order_id": hostile})),
        refund(json!({"amount_cents": hostile})),
        address("ord_1003", hostile, "94107"),
        json!({"order_id": "ord_1001", hostile: 1}),
    ] {
        for tool in [
            "issue_refund",
            "update_shipping_address",
            "send_status_email",
        ] {
            let r = call(&d, &ana(), tool, &args, "k");
            let text = r.to_json().to_string();
            assert!(
                !text.contains("APPROVED") && !text.contains('\u{1b}'),
                "{text}"
            );
        }
    }
}

#[test]
fn address_line_refuses_controls_bidi_and_zero_width() {
    for bad in [
        "5 Pine\u{7}Rd",
        "5 Pine\u{202e}Rd",
        "5 Pine\u{200b}Rd",
        "5 Pine\u{85}Rd",
        "",
        &"x".repeat(81),
    ] {
        let (backend, d) = fresh();
        let r = call(
            &d,
            &ana(),
            "update_shipping_address",
            &address("ord_1003", bad, "94107"),
            "k",
        );
        assert_eq!(r.code(), "invalid_arguments", "{bad:?}");
        assert!(backend.ledger().unwrap().is_empty());
    }
}

#[test]
fn tool_not_exposed_is_refused_even_if_named() {
    let (backend, d) = fresh();
    let s = Session::new(
        "s",
        "cu_ana",
        &countersign::consumer::session::ALL_SCOPES,
        &["get_order"],
    );
    assert_eq!(
        call(&d, &s, "issue_refund", &refund(json!({})), "k").code(),
        "not_available"
    );
    assert!(backend.ledger().unwrap().is_empty());
}

#[test]
fn missing_scope_is_forbidden() {
    let (backend, d) = fresh();
    let s = Session::new(
        "s",
        "cu_ana",
        &["orders:read"],
        &countersign::consumer::tools::TOOL_NAMES,
    );
    assert_eq!(
        call(&d, &s, "issue_refund", &refund(json!({})), "k").code(),
        "forbidden"
    );
    assert!(backend.ledger().unwrap().is_empty());
}

#[test]
fn email_recipient_comes_from_the_order_record() {
    let (backend, d) = fresh();
    let bad = call(
        &d,
        &ana(),
        "send_status_email",
        &json!({"order_id": "ord_1001", "to": "x@example.test"}),
        "k",
    );
    assert_eq!(bad.code(), "invalid_arguments");
    let ok = call(
        &d,
        &ana(),
        "send_status_email",
        &json!({"order_id": "ord_1001"}),
        "k2",
    );
    assert_eq!(ok.code(), "ok");
    let ledger = backend.ledger().unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(
        (
            ledger[0].tool.as_str(),
            ledger[0].order_id.as_str(),
            ledger[0].detail.as_str()
        ),
        ("send_status_email", "ord_1001", "ana@example.test")
    );
}

#[test]
fn refund_cannot_exceed_refundable_amount() {
    let (backend, d) = fresh();
    assert_eq!(
        call(
            &d,
            &ana(),
            "issue_refund",
            &refund(json!({"amount_cents": 4000})),
            "k1"
        )
        .code(),
        "ok"
    );
    assert_eq!(
        call(
            &d,
            &ana(),
            "issue_refund",
            &refund(json!({"amount_cents": 300})),
            "k2"
        )
        .code(),
        "invalid_state"
    );
    let total: i64 = backend
        .ledger()
        .unwrap()
        .iter()
        .map(|e| e.amount_cents)
        .sum();
    assert_eq!(total, 4000);
}

#[test]
fn write_without_a_call_key_is_refused() {
    let (backend, d) = fresh();
    assert_eq!(
        d.call(&ana(), "issue_refund", &refund(json!({})), None, None)
            .code(),
        "missing_call_key"
    );
    assert!(backend.ledger().unwrap().is_empty());
}

#[test]
fn large_refund_waits_for_approval_with_a_runtime_built_presentation() {
    let (backend, d) = fresh();
    let r = call(
        &d,
        &ana(),
        "issue_refund",
        &refund(json!({"order_id": "ord_1004", "amount_cents": 8000, "reason": " damaged\n"})),
        "k",
    );
    let Response::NeedsApproval(req) = r else {
        panic!("expected needs_approval, got {r:?}")
    };
    assert_eq!(req.kind, "over_auto_limit");
    assert_eq!(
        req.capability,
        json!({"tool": "issue_refund", "args": {"order_id": "ord_1004", "amount_cents": 8000, "reason": "damaged"}})
    );
    let p = &req.presentation;
    assert_eq!(p["title"], "Refund 80.00 USD on ord_1004");
    assert_eq!(
        (
            p["amount_cents"].as_i64(),
            p["impact_cents"].as_i64(),
            p["refundable_cents"].as_i64()
        ),
        (Some(8000), Some(8000), Some(15000))
    );
    assert_eq!(
        (p["customer"].as_str(), p["reason"].as_str()),
        (Some("cu_ana"), Some("damaged"))
    );
    assert!(backend.ledger().unwrap().is_empty());
}

#[test]
fn approval_is_bound_to_exact_arguments_and_replay_does_not_repeat() {
    let (backend, d) = fresh();
    let big = refund(json!({"order_id": "ord_1004", "amount_cents": 8000}));
    let key = CallKey::plain("t7:1");
    assert_eq!(
        d.call(&ana(), "issue_refund", &big, Some(&key), None)
            .code(),
        "needs_approval"
    );
    let for_9000 = d
        .grant(
            &ana(),
            "issue_refund",
            &refund(json!({"order_id": "ord_1004", "amount_cents": 9000})),
        )
        .unwrap();
    assert_eq!(
        d.call(&ana(), "issue_refund", &big, Some(&key), Some(&for_9000))
            .code(),
        "needs_approval"
    );
    // A grant for Ana's request is not a grant for Ben's session.
    let ben = Session::full("s-ben", "cu_ben");
    let for_ben = d.grant(&ben, "issue_refund", &big).unwrap();
    assert_eq!(
        d.call(&ana(), "issue_refund", &big, Some(&key), Some(&for_ben))
            .code(),
        "needs_approval"
    );
    assert!(backend.ledger().unwrap().is_empty());
    let exact = d.grant(&ana(), "issue_refund", &big).unwrap();
    assert_eq!(
        d.call(&ana(), "issue_refund", &big, Some(&key), Some(&exact)),
        Response::Ok {
            result: json!({"order_id": "ord_1004", "refund_cents": 8000, "refunded_cents": 8000}),
            replayed: false
        }
    );
    let again = d.call(&ana(), "issue_refund", &big, Some(&key), Some(&exact));
    assert!(
        matches!(again, Response::Ok { replayed: true, .. }),
        "{again:?}"
    );
    let other = refund(json!({"order_id": "ord_1004", "amount_cents": 100}));
    assert_eq!(
        d.call(&ana(), "issue_refund", &other, Some(&key), Some(&exact))
            .code(),
        "key_reused"
    );
    let ledger = backend.ledger().unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(
        (ledger[0].order_id.as_str(), ledger[0].amount_cents),
        ("ord_1004", 8000)
    );
}

#[test]
fn replay_precedes_the_state_check() {
    // The completed refund used up the order; its retry must still return the stored result.
    let (backend, d) = fresh();
    let all = refund(json!({"amount_cents": 4200}));
    assert_eq!(call(&d, &ana(), "issue_refund", &all, "k").code(), "ok");
    let retry = call(&d, &ana(), "issue_refund", &all, "k");
    assert!(
        matches!(retry, Response::Ok { replayed: true, .. }),
        "{retry:?}"
    );
    assert_eq!(backend.ledger().unwrap().len(), 1);
}

#[test]
fn session_cap_stops_automatic_irreversible_actions() {
    let (backend, d) = fresh();
    let four = refund(json!({"order_id": "ord_1004", "amount_cents": 4000}));
    let codes: Vec<&str> = (0..3)
        .map(|i| call(&d, &ana(), "issue_refund", &four, &format!("c:{i}")).code())
        .collect();
    assert_eq!(codes, ["ok", "ok", "needs_approval"]);
    assert_eq!(backend.ledger().unwrap().len(), 2);
    let held = call(&d, &ana(), "issue_refund", &four, "c:2");
    let Response::NeedsApproval(req) = held else {
        panic!()
    };
    assert_eq!(req.kind, "session_cap");
    // Another session of the same customer has its own budget.
    let other = Session::full("s-ana-2", "cu_ana");
    assert_eq!(call(&d, &other, "issue_refund", &four, "c:3").code(), "ok");
}

#[test]
fn reversible_writes_are_automatic_until_the_write_budget_is_spent() {
    let (backend, d) = fresh();
    let codes: Vec<&str> = (0..4)
        .map(|i| {
            call(
                &d,
                &ana(),
                "update_shipping_address",
                &address("ord_1003", &format!("{i} Pine Rd"), "94107"),
                &format!("a:{i}"),
            )
            .code()
        })
        .collect();
    assert_eq!(codes, ["ok", "ok", "ok", "needs_approval"]);
    assert_eq!(backend.ledger().unwrap().len(), 3);
}

#[test]
fn a_failing_backend_is_reported_without_its_internals() {
    let (backend, d) = fresh();
    backend
        .execute_raw("DROP TABLE effects; DROP TABLE call_keys; DROP TABLE orders;")
        .unwrap();
    let r = call(&d, &ana(), "issue_refund", &refund(json!({})), "k");
    assert_eq!(r.code(), "backend_unavailable");
    let text = r.to_json().to_string();
    assert!(
        !text.contains("table") && !text.contains("SQL") && !text.contains("orders"),
        "{text}"
    );
}
