//! Damaged-file helpers: a clean fixture to damage, the ids of its rows, and a reader that
//! walks every list the console uses.

use std::path::{Path, PathBuf};

use countersign::runtime::store::{Store, StoreError};

use super::{Raw, invariants};
use crate::support::{fixture, s, tempdir};

/// Every scenario except the fixture's own `damaged` one and the live `running` one, so that
/// whatever is damaged here is the only damage there is.
pub const CLEAN: &str =
    "completed,waiting,hostile,queue,approved,rejected,cancelled,failed,interrupted";

pub struct Db {
    pub _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub m: serde_json::Value,
}

pub fn clean_db() -> Db {
    let dir = tempdir();
    let path = dir.path().join("run.db");
    let m = fixture(&path, &["--scenario", CLEAN]);
    assert!(
        invariants::store_holds(&path).is_empty(),
        "the clean fixture already has violations: {:?}",
        invariants::store_holds(&path)
    );
    Db { _dir: dir, path, m }
}

pub fn run_of(m: &serde_json::Value, scenario: &str) -> String {
    s(m, &format!("/scenarios/{scenario}/runs/0/id")).to_string()
}

pub fn step_of(raw: &Raw, run: &str, idx: i64) -> String {
    raw.text(&format!(
        "SELECT id FROM steps WHERE run_id = '{run}' AND idx = {idx}"
    ))
}

pub fn approval_of(raw: &Raw, run: &str) -> String {
    raw.text(&format!(
        "SELECT id FROM approvals WHERE run_id = '{run}' ORDER BY rowid DESC LIMIT 1"
    ))
}

/// The store's violations, with each damaged row's id replaced by a label, sorted.
pub fn found(db: &Path, labels: &[(&str, &str)]) -> Vec<String> {
    let mut v: Vec<String> = invariants::rows_decode(db)
        .into_iter()
        .map(|mut line| {
            for (id, label) in labels {
                line = line.replace(id, label);
            }
            line
        })
        .collect();
    v.sort();
    v
}

/// Reads every page of every list the console uses (the chain is verified by each test on its
/// own: verifying is the slow read); panics only through a failed assertion.
pub fn read_everything(store: &Store) -> Vec<String> {
    let mut errors = Vec::new();
    let mut note = |r: Result<(), StoreError>| {
        if let Err(e) = r {
            errors.push(e.to_string());
        }
    };
    let runs = store.list_runs_page(1000, 0);
    let ids: Vec<String> = runs
        .as_ref()
        .map(|p| p.items.iter().map(|r| r.id.clone()).collect())
        .unwrap_or_default();
    note(runs.map(|_| ()));
    note(store.pending_approval_ids().map(|_| ()));
    note(store.list_events_page("", 1000, 0).map(|_| ()));
    for id in &ids {
        note(store.get_run(id).map(|_| ()));
        note(store.get_run_capped(id).map(|_| ()));
        note(store.list_steps(id).map(|_| ()));
        note(store.list_steps_page(id, 100, 0).map(|_| ()));
        note(store.list_approvals(id).map(|_| ()));
        note(store.list_approvals_page(id, "", 100, 0).map(|_| ()));
        note(store.list_events_page(id, 100, 0).map(|_| ()));
    }
    errors
}

/// A fresh copy of a clean fixture with everything in the main file (no WAL).
pub fn flat_db() -> Db {
    let db = clean_db();
    Raw::open(&db.path).flatten();
    db
}
