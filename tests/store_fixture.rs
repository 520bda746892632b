//! A database written by the independent Python implementation of agentrt's format opens
//! read-only and reads back whole: rows, approval hashes, Go-JSON encodings, the chain; the
//! damaged scenario lists with decode errors; every tamper is caught.

mod support;

use countersign::runtime::json::approval_hash;
use countersign::runtime::store::{Store, StoreError};
use countersign::runtime::types::{
    ApprovalStatus, Decision, Observation, PolicyDecision, RunStatus, StepStatus,
};
use support::{fixture, s, tempdir};

fn sha_file(p: &std::path::Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn store_reads_every_fixture_scenario_read_only() {
    let dir = tempdir();
    let db = dir.path().join("fixture.db");
    let m = fixture(&db, &[]);
    let before = sha_file(&db);
    let store = Store::open_existing(&db, true).expect("fixture opens read-only");
    assert!(store.is_read_only());

    let runs = store.list_runs_page(1000, 0).unwrap();
    assert_eq!(runs.total, m["counts"]["runs"].as_i64().unwrap());
    assert_eq!(runs.items.len() as i64, runs.total);
    let (mut steps_seen, mut approvals_seen, mut hashes_checked) = (0, 0, 0);
    let damaged = &m["scenarios"]["damaged"]["runs"][0]["damaged"];
    let damaged_step = s(damaged, "/step_id");
    let damaged_approval = s(damaged, "/approval_id");
    for listed in &runs.items {
        let run = store.get_run(&listed.id).unwrap();
        assert_eq!(run.decode_error, "", "run {}", run.id);
        assert!(!matches!(run.status, RunStatus::Unknown(_)));
        assert_eq!(
            run.limits.to_go_json(),
            run.limits_json.as_bytes(),
            "limits_json re-encodes byte for byte"
        );
        let steps = store.list_steps(&run.id).unwrap();
        assert_eq!(steps.len() as i64, run.step_count);
        for (i, st) in steps.iter().enumerate() {
            assert_eq!(st.index, i as i64);
            assert!(!matches!(st.status, StepStatus::Unknown(_)));
            steps_seen += 1;
            if st.id == damaged_step {
                assert!(
                    st.decode_error.starts_with("decision: "),
                    "{}",
                    st.decode_error
                );
                assert!(st.decision.is_none());
                continue;
            }
            assert_eq!(st.decode_error, "", "step {}", st.id);
            if let Some(d) = &st.decision {
                assert_eq!(d.to_go_json().unwrap(), st.decision_json.as_bytes());
            }
            if let Some(p) = &st.policy {
                assert_eq!(p.to_go_json().unwrap(), st.policy_json.as_bytes());
            }
            if let Some(o) = &st.observation {
                assert_eq!(o.to_go_json().unwrap(), st.observation_json.as_bytes());
                assert_eq!(o.content_hash, st.observation_hash);
            }
        }
        for a in store.list_approvals(&run.id).unwrap() {
            approvals_seen += 1;
            let whole = store.get_approval(&run.id, &a.id).unwrap();
            assert_eq!(whole, a);
            if a.id == damaged_approval {
                assert!(a.decode_error.contains("request: "), "{}", a.decode_error);
                assert!(a.request.is_none());
                continue;
            }
            assert_eq!(a.decode_error, "");
            let req = a.request.as_ref().unwrap();
            let encoded = req.to_go_json().unwrap();
            assert_eq!(
                encoded,
                a.request_json.as_bytes(),
                "request_json re-encodes byte for byte"
            );
            let h = approval_hash(
                &a.kind,
                a.capability.as_bytes(),
                a.presentation.as_bytes(),
                &encoded,
            )
            .unwrap();
            assert_eq!(h, a.hash, "approval {} hash", a.id);
            hashes_checked += 1;
            // The stored spec is the canonical form of the request's spec: same hash.
            let hash = req.spec.spec_hash().unwrap();
            let spec = store.tool_spec(&hash).unwrap();
            assert_eq!(spec.spec_hash().unwrap(), hash);
            assert_eq!(
                (&spec.name, spec.timeout_ns),
                (&req.spec.name, req.spec.timeout_ns)
            );
        }
    }
    assert_eq!(steps_seen, m["counts"]["steps"].as_i64().unwrap());
    assert_eq!(approvals_seen, m["counts"]["approvals"].as_i64().unwrap());
    assert_eq!(hashes_checked, approvals_seen - 1);

    let events = m["counts"]["events"].as_i64().unwrap();
    let page = store.list_events_page("", 10_000, 0).unwrap();
    assert_eq!(page.total, events);
    assert!(
        page.items
            .iter()
            .enumerate()
            .all(|(i, e)| e.seq == i as i64 + 1 && e.decode_error.is_empty())
    );
    let report = store.verify_events(0, 0).unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.checked, events);
    assert_eq!(report.hash, s(&m, "/chain/head_hash"));
    assert_eq!(
        store.chain_head().unwrap(),
        (events, s(&m, "/chain/head_hash").to_string())
    );
    drop(store);
    assert_eq!(
        sha_file(&db),
        before,
        "a read-only open never writes the database"
    );
}

#[test]
fn store_undecodable_rows_list_with_decode_errors() {
    let dir = tempdir();
    let db = dir.path().join("damaged.db");
    let m = fixture(&db, &["--scenario", "damaged"]);
    let store = Store::open_existing(&db, true).unwrap();
    let run_id = s(&m, "/scenarios/damaged/runs/0/id");
    let steps = store.list_steps_page(run_id, 10, 0).unwrap();
    let bad: Vec<_> = steps
        .items
        .iter()
        .filter(|s| !s.decode_error.is_empty())
        .collect();
    assert_eq!(bad.len(), 1);
    assert!(bad[0].decode_error.starts_with("decision: "));
    let approvals = store.list_approvals_page(run_id, "pending", 10, 0).unwrap();
    assert_eq!(approvals.total, 1);
    assert!(approvals.items[0].decode_error.starts_with("request: "));
    assert!(approvals.items[0].request.is_none());
    // The capability and presentation are kept raw and still readable.
    assert!(approvals.items[0].capability.contains("issue_refund"));
}

#[test]
fn store_decodes_the_json_shapes_as_stored() {
    // Raw fields keep `null` as bytes (Go's RawMessage) and absent fields stay empty.
    let d = Decision::from_json(br#"{"kind":"tool_call","tool":"t","args":null}"#).unwrap();
    assert_eq!(d.args, b"null");
    assert_eq!(
        d.to_go_json().unwrap(),
        br#"{"kind":"tool_call","tool":"t","args":null}"#
    );
    let p = PolicyDecision::from_json(br#"{"outcome":"allow"}"#).unwrap();
    assert_eq!(p.to_go_json().unwrap(), br#"{"outcome":"allow"}"#);
    let o = Observation::from_json(br#"{"kind":"tool_result","content":{"a": "<b>"}}"#).unwrap();
    assert_eq!(
        o.to_go_json().unwrap(),
        br#"{"kind":"tool_result","content":{"a":"\u003cb\u003e"}}"#
    );
}

fn tampered(mode: &str) -> (tempfile::TempDir, std::path::PathBuf, serde_json::Value) {
    let dir = tempdir();
    let db = dir.path().join("tampered.db");
    let m = fixture(&db, &["--tamper", mode]);
    (dir, db, m)
}

#[test]
fn store_tampered_approval_no_longer_hashes() {
    let (_d, db, m) = tampered("approval-hash");
    let store = Store::open_existing(&db, true).unwrap();
    let run = s(&m, "/tampered/approval-hash/run_id");
    let a = store
        .get_approval(run, s(&m, "/tampered/approval-hash/approval_id"))
        .unwrap();
    assert_eq!(a.status, ApprovalStatus::Pending);
    let h = approval_hash(
        &a.kind,
        a.capability.as_bytes(),
        a.presentation.as_bytes(),
        &a.request.unwrap().to_go_json().unwrap(),
    )
    .unwrap();
    assert_ne!(h, a.hash);
}

#[test]
fn store_verify_events_finds_the_tampered_event() {
    let (_d, db, m) = tampered("chain");
    let store = Store::open_existing(&db, true).unwrap();
    let report = store.verify_events(0, 0).unwrap();
    let b = report.chain_break.expect("a break");
    assert_eq!(b.seq, m["tampered"]["chain"]["seq"].as_i64().unwrap());
    assert_eq!(
        b.detail,
        "the stored hash is not the one the event's fields and the previous event's hash give"
    );
    assert_eq!(report.checked, b.seq);
    // A range after the break verifies from the stored hash before it.
    assert!(store.verify_events(b.seq + 1, 0).unwrap().ok());
}

#[test]
fn store_refuses_a_database_others_can_write() {
    let (_d, db, _m) = tampered("mode");
    let err = Store::open_existing(&db, true).unwrap_err();
    assert!(matches!(err, StoreError::InsecureMode { .. }));
    let msg = err.to_string();
    assert_eq!(
        msg,
        format!(
            "agentrt: {p} is -rw-rw-r--, writable by group or others; the runtime keeps its database readable and writable by its owner only: chmod 600 {p} and chown it to the user that runs the runtime",
            p = db.display()
        )
    );
    // A writer refuses it too (it only tightens what others can read).
    assert!(matches!(
        Store::open(&db).unwrap_err(),
        StoreError::InsecureMode { .. }
    ));
}

#[test]
fn store_refuses_triggers_and_views() {
    for (mode, kind, name) in [
        ("trigger", "trigger", "approvals_touch"),
        ("view", "view", "pending_approvals"),
    ] {
        let (_d, db, _m) = tampered(mode);
        for err in [
            Store::open_existing(&db, true).unwrap_err(),
            Store::open(&db).unwrap_err(),
        ] {
            assert!(matches!(err, StoreError::UnsafeSchema { .. }), "{err}");
            assert!(
                err.to_string().starts_with(&format!(
                    "agentrt: database holds a trigger or view: {} has {kind} \"{name}\"; ",
                    db.display()
                )),
                "{err}"
            );
        }
    }
}

#[test]
fn open_existing_refuses_either_other_version() {
    for (mode, found, side) in [
        ("version7", 7, "the database is newer"),
        ("version5", 5, "the database is older"),
    ] {
        let (_d, db, _m) = tampered(mode);
        let err = Store::open_existing(&db, true).unwrap_err();
        assert!(
            matches!(err, StoreError::SchemaVersion { found: f, .. } if f == found),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "agentrt: database schema version does not match this build: {} is at version {found}, this build writes 6; {side}: {}",
                db.display(),
                if found > 6 {
                    "open it with a newer build"
                } else {
                    "let the consumer that owns it migrate it"
                }
            )
        );
    }
    let (_d, db, _m) = tampered("version7");
    assert!(matches!(
        Store::open(&db).unwrap_err(),
        StoreError::SchemaVersion { found: 7, .. }
    ));
}

#[test]
fn open_of_a_database_whose_tables_are_past_its_recorded_version_is_a_typed_refusal() {
    // The fixture records version 5 on a database that already has migration 6's columns:
    // the migrating open fails in migration 6 and says what to do; nothing changes.
    let (_d, db, _m) = tampered("version5");
    let err = Store::open(&db).unwrap_err();
    assert!(
        matches!(err, StoreError::Migration { version: 6, .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("agentrt: migrate {} to version 6: ", db.display())),
        "{msg}"
    );
    assert!(msg.contains("already exists"), "SQLite's reason: {msg}");
    assert!(
        !msg.contains('\n') && !msg.contains("CREATE TABLE"),
        "one line, no script: {msg}"
    );
    assert!(
        msg.ends_with("its tables do not match the version it records (5), so nothing was changed: restore it from a backup or open it with the build that wrote it"),
        "{msg}"
    );
    let c = rusqlite::Connection::open(&db).unwrap();
    let v: i64 = c
        .query_row("SELECT MAX(version) FROM schema_migrations", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(v, 5, "the migration rolled back");
}
