//! `countersign stats` (issue 21, the queue's numbers): counts per tool and per reviewer on a
//! database the independent Python implementation wrote, the threshold table against the seed
//! article's figures, hostile and damaged rows, and the `--since` window.

mod support;

use std::path::Path;

use serde_json::Value;

fn cs(db: &Path, args: &[&str]) -> (i32, String, String) {
    let out = support::bin::cs(db, args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stats_json(db: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["--json", "stats"];
    args.extend_from_slice(extra);
    let (code, out, err) = cs(db, &args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn tool<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == name)
        .unwrap_or_else(|| panic!("no {name} in {doc:#}"))
}

fn fixture() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = support::tempdir();
    let db = dir.path().join("runs.db");
    support::fixture(&db, &["--seed", "7", "--base-time", "2026-10-01T09:00:00Z"]);
    (dir, db)
}

#[test]
fn every_scenarios_calls_are_counted_per_tool_and_per_reviewer() {
    let (_d, db) = fixture();
    let doc = stats_json(&db, &[]);
    let refund = tool(&doc, "issue_refund");
    // The `failed` scenario's three schema-refused calls, the seven approvals of the waiting,
    // hostile, queue, approved, rejected and interrupted scenarios.
    assert_eq!(refund["calls"], 10, "{refund:#}");
    assert_eq!(refund["invalid"], 3);
    assert_eq!(refund["needs_approval"], 7);
    assert_eq!(refund["approved"], 1);
    assert_eq!(refund["rejected"], 1);
    assert_eq!(refund["pending"], 5);
    assert_eq!(refund["allowed"], 0);
    // The approved and rejected scenarios decide 5 and 10 minutes after the request.
    let med = refund["median_decision_seconds"].as_f64().unwrap();
    let p90 = refund["p90_decision_seconds"].as_f64().unwrap();
    assert!(
        (med - 300.0).abs() < 1.0 && (p90 - 600.0).abs() < 1.0,
        "{med} {p90}"
    );
    assert_eq!(tool(&doc, "get_order")["allowed"], 14);
    assert_eq!(tool(&doc, "send_status_email")["pending"], 2);
    let reviewers = doc["reviewers"].as_array().unwrap();
    assert_eq!(reviewers.len(), 2);
    assert_eq!(reviewers[0]["by"], "alice");
    assert_eq!(reviewers[0]["approved"], 1);
    assert_eq!(reviewers[1]["by"], "bob");
    assert_eq!(reviewers[1]["rejected"], 1);
    // The oldest pending is the waiting scenario's refund.
    assert_eq!(doc["oldest_pending_at"], refund["oldest_pending_at"]);
    assert!(
        doc["caveat"]
            .as_str()
            .unwrap()
            .contains("model, not a measurement")
    );
}

#[test]
fn a_damaged_row_is_counted_as_damaged_and_never_fails_the_report() {
    // The damaged scenario's step decision is not JSON: stats still answers, counts the row,
    // and files its pending approval under no readable tool.
    let (_d, db) = fixture();
    let doc = stats_json(&db, &[]);
    assert_eq!(doc["damaged_steps"], 1);
    let unknown = doc["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"].is_null())
        .expect("an entry for the damaged call");
    assert_eq!(unknown["pending"], 1);
    let (code, text, _) = cs(&db, &["stats"]);
    assert_eq!(code, 0);
    assert!(text.contains("(no readable tool)"), "{text}");
    assert!(
        text.contains("not counted: 1 damaged step(s) whose decision is not JSON"),
        "{text}"
    );
}

/// Adds `n` copies of the approved scenario's approval, `rejected` of them refused by `by`.
fn add_reviews(db: &Path, n: usize, rejected: usize, by: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let id: String = conn
        .query_row(
            "SELECT id FROM approvals WHERE status = 'approved'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    for i in 0..n {
        let status = if i < rejected { "rejected" } else { "approved" };
        conn.execute(
            "INSERT INTO approvals (id, run_id, step_id, kind, capability_json, presentation_json,
               request_json, hash, status, created_at, decided_at, decided_by, note, expires_at)
             SELECT ?1, run_id, step_id, kind, capability_json, presentation_json, request_json,
               hash, ?2, created_at, decided_at, ?3, note, expires_at FROM approvals WHERE id = ?4",
            rusqlite::params![format!("extra-{by}-{i}"), status, by, id],
        )
        .unwrap();
    }
}

#[test]
fn the_threshold_table_is_the_articles_formula_on_the_measured_share() {
    // 1 approved + 1 rejected in the fixture; 18 more reviews, 1 refused: 2 of 20 refused,
    // p = 0.1, and with the article's c = 1.50 and q = 0.9, L* = 16.67.
    let (_d, db) = fixture();
    add_reviews(&db, 18, 1, "carol");
    let doc = stats_json(&db, &[]);
    let r = &tool(&doc, "issue_refund")["review"];
    assert_eq!(r["reviewed"], 20, "{r:#}");
    assert_eq!(r["refused"], 2);
    assert!((r["p"].as_f64().unwrap() - 0.1).abs() < 1e-9);
    assert!((r["threshold"].as_f64().unwrap() - 16.6667).abs() < 1e-3);
    // Wilson 95% for 2/20: [0.0279, 0.3010]; L* runs the other way.
    assert!(
        (r["p_low"].as_f64().unwrap() - 0.0279).abs() < 1e-3,
        "{r:#}"
    );
    assert!(
        (r["p_high"].as_f64().unwrap() * 1000.0).round() == 301.0,
        "{r:#}"
    );
    assert!(r["threshold_low"].as_f64().unwrap() < r["threshold_high"].as_f64().unwrap());
    // Other assumptions change L* as the formula says: c = 3, q = 0.5 -> 3 / 0.05 = 60.
    let doc = stats_json(&db, &["--review-cost", "3", "--catch", "0.5"]);
    let l = tool(&doc, "issue_refund")["review"]["threshold"]
        .as_f64()
        .unwrap();
    assert!((l - 60.0).abs() < 1e-6, "{l}");
    let (_, text, _) = cs(&db, &["stats"]);
    assert!(
        text.contains("issue_refund  20        2        0.100"),
        "{text}"
    );
    assert!(text.contains("16.67"), "{text}");
    let carol = doc["reviewers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["by"] == "carol")
        .unwrap();
    assert_eq!(carol["approved"], 17);
    assert_eq!(carol["rejected"], 1);
}

#[test]
fn hostile_and_huge_names_are_escaped_and_cut_visibly() {
    let (_d, db) = fixture();
    let evil = "\u{1b}]52;c;cm0gLXJm\u{7}\u{202e}pwned";
    add_reviews(&db, 1, 1, evil);
    let long = "r".repeat(10_000);
    add_reviews(&db, 1, 0, &long);
    let (code, text, _) = cs(&db, &["stats"]);
    assert_eq!(code, 0);
    assert!(!text.contains('\u{1b}') && !text.contains('\u{202e}') && !text.contains('\u{7}'));
    assert!(
        text.contains("\\u{202e}pwned") || text.contains("\\u{202E}pwned"),
        "{text}"
    );
    assert!(text.contains("…[cut]"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() < 400), "{text}");
    let doc = stats_json(&db, &[]);
    let cut = doc["reviewers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["by_cut"] == true)
        .expect("the long name is flagged as cut");
    assert_eq!(cut["by"].as_str().unwrap().len(), 256);
}

#[test]
fn since_counts_only_the_recent_window_and_a_bad_span_is_a_usage_error() {
    let (_d, db) = fixture();
    // The fixture's rows are from 2026-10-01; an hour back from now holds none of them.
    let doc = stats_json(&db, &["--since", "1h"]);
    assert_eq!(doc["tools"].as_array().unwrap().len(), 0, "{doc:#}");
    assert!(doc["since"].is_string());
    let (code, text, _) = cs(&db, &["stats", "--since", "1h"]);
    assert_eq!(code, 0);
    assert!(text.contains("no tool calls"), "{text}");
    // A window back past the fixture's start counts everything.
    let all = stats_json(&db, &[]);
    let wide = stats_json(&db, &["--since", "5200w"]);
    assert_eq!(all["tools"], wide["tools"]);
    for bad in ["5x", "h", "-3h", "99999999999999w"] {
        let (code, _, err) = cs(&db, &["stats", "--since", bad]);
        assert_eq!(code, 2, "{bad}: {err}");
    }
    let (code, _, _) = cs(&db, &["stats", "--catch", "1.5"]);
    assert_eq!(code, 2);
    // Values that made L* infinite (printed `inf`, written `null`) are refused as usage.
    for bad in [
        &["--review-cost", "1e308"][..],
        &["--catch", "1e-308"],
        &["--catch", "5e-324"],
        &["--review-cost", "1e13"],
    ] {
        let (code, _, err) = cs(&db, &[&["stats"][..], bad].concat());
        assert_eq!(code, 2, "{bad:?}: {err}");
    }
    let edge = stats_json(&db, &["--review-cost", "1e12", "--catch", "1e-6"]);
    let text = edge.to_string();
    assert!(!text.contains("inf") && !text.contains("NaN"), "{text}");
}

/// A pending request whose time is the zero time is not given an age it does not have, and
/// one dated after this clock is said to be ahead of it, not `0s ago`: in `stats` and in a
/// bulk decision's dry run.
#[test]
fn a_zero_or_future_time_is_not_shown_as_an_age() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    support::fixture(&db, &["--scenario", "waiting", "--base-time", "now"]);
    let set = |at: &str| {
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute("UPDATE approvals SET created_at = ?1", [at])
            .unwrap();
    };
    set("0001-01-01T00:00:00Z");
    let (code, out, err) = cs(&db, &["stats"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("oldest pending: at no readable time"), "{out}");
    assert!(
        !out.contains("106751d"),
        "no tool's OLDEST is an age it does not have: {out}"
    );
    let tool = out
        .lines()
        .find(|l| l.starts_with("issue_refund"))
        .unwrap_or_default();
    assert!(tool.trim_end().ends_with(" ?"), "OLDEST is `?`: {tool}");
    let doc = stats_json(&db, &[]);
    assert_eq!(doc["oldest_pending_at"], Value::Null, "{doc}");
    assert_eq!(doc["unreadable_times"], 1, "{doc}");
    set("2099-01-01T00:00:00Z");
    let (_, out, _) = cs(&db, &["stats"]);
    assert!(
        out.contains("oldest pending: ") && out.contains(" from now"),
        "{out}"
    );
    let tool = out
        .lines()
        .find(|l| l.starts_with("issue_refund"))
        .unwrap_or_default();
    assert!(
        tool.trim_end()
            .rsplit("  ")
            .next()
            .unwrap_or("")
            .starts_with("in "),
        "{tool}"
    );
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE runs SET created_at = '2099-01-01T00:00:00Z'", [])
        .unwrap();
    let (code, out, err) = cs(
        &db,
        &["reject", "--status", "waiting", "--note", "x", "--dry-run"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(" from now") && !out.contains("0s ago"),
        "{out}"
    );
}
