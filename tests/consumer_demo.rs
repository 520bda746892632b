//! The demo builder: what it writes through the runtime, that it never overwrites a file, that
//! the run database passes the independent verifier, and that resuming approved runs executes
//! each approved refund exactly once (ledger-checked).

mod consumer_support;

use countersign::consumer::backend::Backend;
use countersign::consumer::demo;

#[test]
fn demo_writes_the_review_queue_through_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (runs, backend) = (dir.path().join("runs.db"), dir.path().join("backend.db"));
    let s = demo::build(&runs, &backend).unwrap();
    let status = |role: &str| -> Vec<String> {
        s.with_role(role).iter().map(|r| r.status.clone()).collect()
    };
    assert_eq!(status("completed"), ["COMPLETED", "COMPLETED"]);
    assert_eq!(status("failed"), ["FAILED"]);
    assert_eq!(
        status("waiting_over_limit"),
        ["WAITING_FOR_APPROVAL", "WAITING_FOR_APPROVAL"]
    );
    assert_eq!(status("waiting_session_cap"), ["WAITING_FOR_APPROVAL"]);
    assert_eq!(status("waiting_injected"), ["WAITING_FOR_APPROVAL"]);
    assert_eq!(status("damaged"), ["COMPLETED"]);
    assert_eq!(status("waiting_interrupted"), ["WAITING_FOR_APPROVAL"]);
    assert_eq!(status("rejected"), ["CANCELLED"]);
    assert_eq!(status("cancelled"), ["CANCELLED"]);
    // The crashed run waits on the runtime's interrupted-side-effect approval.
    let store = countersign::runtime::store::Store::open_existing(&runs, true).unwrap();
    let crashed = &s.with_role("waiting_interrupted")[0].id;
    let a = store.list_approvals(crashed).unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].kind, "interrupted_side_effect");
    assert_eq!(a[0].status.as_str(), "pending");
    let reason = |role: &str| store.get_run(&s.with_role(role)[0].id).unwrap().reason;
    assert_eq!(reason("rejected"), "approval_rejected");
    assert_eq!(reason("cancelled"), "operator_cancelled");
    assert_eq!(s.runs.len(), 11);
    // The ledger holds exactly the automatic effects: 3000 on ord_1001, the address change and
    // its email, two refunds of 4000 on ord_1004; the status email of the damaged run.
    let b = Backend::open(&backend).unwrap();
    let ledger: Vec<(String, String, i64)> = b
        .ledger()
        .unwrap()
        .into_iter()
        .map(|e| (e.tool, e.order_id, e.amount_cents))
        .collect();
    let want = [
        ("issue_refund", "ord_1001", 3000),
        ("update_shipping_address", "ord_1003", 0),
        ("send_status_email", "ord_1003", 0),
        ("issue_refund", "ord_1004", 4000),
        ("issue_refund", "ord_1004", 4000),
        ("issue_refund", "ord_1002", 2500),
        ("send_status_email", "ord_1002", 0),
    ];
    let want: Vec<(String, String, i64)> = want
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), *c))
        .collect();
    assert_eq!(ledger, want);
}

#[test]
fn demo_refuses_to_overwrite_existing_files() {
    let dir = tempfile::tempdir().unwrap();
    let (runs, backend) = (dir.path().join("runs.db"), dir.path().join("backend.db"));
    std::fs::write(&runs, b"precious").unwrap();
    let err = demo::build(&runs, &backend).unwrap_err().to_string();
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read(&runs).unwrap(), b"precious");
    assert!(!backend.exists());
    std::fs::remove_file(&runs).unwrap();
    std::fs::write(&backend, b"precious").unwrap();
    assert!(demo::build(&runs, &backend).is_err());
    assert_eq!(std::fs::read(&backend).unwrap(), b"precious");
    assert!(!runs.exists());
}

#[test]
fn demo_run_database_passes_the_independent_verifier() {
    let dir = tempfile::tempdir().unwrap();
    let (runs, backend) = (dir.path().join("runs.db"), dir.path().join("backend.db"));
    demo::build(&runs, &backend).unwrap();
    let tool = consumer_support::shared_dir().join("tools/agentrt_verify.py");
    let out = std::process::Command::new("python3")
        .arg(&tool)
        .arg(&runs)
        .arg("--json")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["ok"], true, "{text}");
    assert_eq!(report["problems"], serde_json::json!([]), "{text}");
    // The damaged row is reported, not hidden: exactly the one the demo wrote.
    let damaged = report["damaged"].as_array().unwrap();
    assert_eq!(damaged.len(), 1, "{text}");
    assert!(
        damaged[0].as_str().unwrap().contains("decision_json"),
        "{text}"
    );
}
