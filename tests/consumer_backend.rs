//! The backend on a real file with several connections: key and effect land together, one key
//! executes once however many processes race on it, and the refund invariant holds under races.

use std::sync::Arc;

use countersign::consumer::backend::{Applied, Backend, WriteRequest};
use countersign::consumer::tools::{EffectClass, ValidArgs};

fn refund(order: &str, cents: i64) -> ValidArgs {
    ValidArgs::IssueRefund {
        order_id: order.into(),
        amount_cents: cents,
        reason: "damaged".into(),
    }
}

fn write<'a>(key: &'a str, hash: &'a str, args: &'a ValidArgs) -> WriteRequest<'a> {
    WriteRequest {
        session_id: "s",
        step_id: "",
        key,
        tool: "issue_refund",
        args_hash: hash,
        owner: Some("cu_ana"),
        effect: EffectClass::IrreversibleWrite,
        args,
    }
}

#[test]
fn backend_refuses_to_overwrite_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("backend.db");
    Backend::create_new(&path).unwrap();
    let err = Backend::create_new(&path).unwrap_err().to_string();
    assert!(err.contains("already exists"), "{err}");
    // A database that is not a backend (e.g. the run database) is refused, not seeded.
    let other = dir.path().join("runs.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE runs (id TEXT)")
        .unwrap();
    let err = Backend::open(&other).unwrap_err().to_string();
    assert!(err.contains("not a consumer backend"), "{err}");
}

#[test]
fn one_call_key_executes_once_across_racing_connections() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("backend.db");
    Backend::create_new(&path).unwrap();
    let args = refund("ord_1004", 1000);
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let path = path.clone();
            let args = args.clone();
            std::thread::spawn(move || {
                let b = Backend::open(&path).unwrap();
                b.apply(&write("run#0", "h", &args)).unwrap()
            })
        })
        .collect();
    let outcomes: Vec<Applied> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let executed = outcomes
        .iter()
        .filter(|o| matches!(o, Applied::Executed(_)))
        .count();
    let replayed = outcomes
        .iter()
        .filter(|o| matches!(o, Applied::Replayed(_)))
        .count();
    assert_eq!((executed, replayed), (1, 7));
    let b = Backend::open(&path).unwrap();
    assert_eq!(b.ledger().unwrap().len(), 1);
    assert_eq!(b.order("ord_1004").unwrap().unwrap().refunded_cents, 1000);
}

#[test]
fn racing_refunds_never_exceed_what_was_paid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("backend.db");
    Backend::create_new(&path).unwrap();
    // 8 refunds of 3000 on a 15000 order: at most 5 can land.
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let path = path.clone();
            std::thread::spawn(move || {
                let b = Backend::open(&path).unwrap();
                let args = refund("ord_1004", 3000);
                b.apply(&write(&format!("run#{i}"), "h", &args)).unwrap()
            })
        })
        .collect();
    let outcomes: Vec<Applied> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let executed = outcomes
        .iter()
        .filter(|o| matches!(o, Applied::Executed(_)))
        .count();
    assert_eq!(executed, 5);
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Applied::Executed(_) | Applied::InvalidState(_)))
    );
    let b = Backend::open(&path).unwrap();
    assert_eq!(b.order("ord_1004").unwrap().unwrap().refunded_cents, 15000);
    assert_eq!(b.ledger().unwrap().len(), 5);
}

#[test]
fn key_and_effect_are_recorded_together_or_not_at_all() {
    let b = Arc::new(Backend::in_memory().unwrap());
    let ok = refund("ord_1001", 4000);
    let too_much = refund("ord_1001", 4000);
    assert!(matches!(
        b.apply(&write("k1", "a", &ok)).unwrap(),
        Applied::Executed(_)
    ));
    // The state re-check inside the transaction refuses; nothing of the call is kept, so the
    // key is still free.
    assert!(matches!(
        b.apply(&write("k2", "b", &too_much)).unwrap(),
        Applied::InvalidState(_)
    ));
    assert!(b.completed_call("k2").unwrap().is_none());
    assert!(b.completed_call("k1").unwrap().is_some());
    assert_eq!(
        b.ledger()
            .unwrap()
            .iter()
            .map(|e| e.call_key.as_str())
            .collect::<Vec<_>>(),
        ["k1"]
    );
    // Same key, different request: refused, no effect.
    assert_eq!(
        b.apply(&write("k1", "other", &refund("ord_1001", 100)))
            .unwrap(),
        Applied::KeyReused
    );
    assert_eq!(b.ledger().unwrap().len(), 1);
}

#[test]
fn another_customers_order_is_not_found_inside_the_transaction() {
    let b = Backend::in_memory().unwrap();
    let args = refund("ord_1002", 100);
    assert_eq!(b.apply(&write("k", "h", &args)).unwrap(), Applied::NotFound);
    assert!(b.ledger().unwrap().is_empty());
}
