//! The scripted scenarios through the dispatcher directly: what each proposal gets, and the
//! prompt-injected conversation changing nothing and leaving only a runtime-built approval.

mod consumer_support;

use consumer_support::fresh;
use countersign::consumer::dispatch::Response;
use countersign::consumer::scenarios;
use countersign::consumer::session::Session;

fn codes(name: &str) -> (Vec<String>, usize, Vec<Response>) {
    let (backend, d) = fresh();
    let s = scenarios::named(name).expect("scenario exists");
    let rs = scenarios::run_on_dispatcher(&d, &Session::full(&format!("run-{name}"), s.user), &s);
    (
        rs.iter().map(|r| r.code().to_string()).collect(),
        backend.ledger().unwrap().len(),
        rs,
    )
}

#[test]
fn injected_conversation_changes_nothing_and_waits_with_a_clean_presentation() {
    let (codes, effects, rs) = codes("injected");
    assert_eq!(codes, ["not_found", "invalid_arguments", "needs_approval"]);
    assert_eq!(effects, 0);
    let Response::NeedsApproval(req) = &rs[2] else {
        panic!()
    };
    let shown = format!("{} {} {}", req.reason, req.capability, req.presentation);
    for bad in [
        "APPROVED", "\u{1b}", "\u{202e}", "\u{200b}", "ord_1002", "cu_ben",
    ] {
        assert!(!shown.contains(bad), "{bad:?} in {shown}");
    }
    assert_eq!(req.presentation["order"], "ord_1004");
    assert_eq!(req.presentation["amount_cents"], 6000);
}

#[test]
fn scenarios_end_where_their_policy_says() {
    assert_eq!(codes("small_refund").0, ["ok", "ok"]);
    assert_eq!(codes("large_refund").0, ["needs_approval"]);
    assert_eq!(codes("late_refund").0, ["needs_approval"]);
    assert_eq!(codes("session_cap").0, ["ok", "ok", "needs_approval"]);
    assert_eq!(codes("address_change").0, ["ok", "ok"]);
    assert_eq!(codes("not_delivered").0, ["invalid_state"]);
}
