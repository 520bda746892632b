//! The invariants a crash-injection or stress trial must leave holding (issue 9): each
//! checker returns the violations it found, one sentence each, so a harness can print every
//! one with its trial and seed instead of stopping at the first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use countersign::runtime::store::Store;
use countersign::runtime::types::{ApprovalStatus, RunStatus};

/// Rows read per page when walking a whole database.
const PAGE: i64 = 200;

fn open_ro(db: &Path) -> Result<Connection, String> {
    Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| format!("{}: cannot open read-only: {e}", db.display()))
}

/// `PRAGMA integrity_check` says `ok`.
pub fn integrity(db: &Path) -> Vec<String> {
    let conn = match open_ro(db) {
        Ok(c) => c,
        Err(e) => return vec![e],
    };
    let rows: Result<Vec<String>, _> = conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect());
    match rows {
        Ok(r) if r == ["ok"] => vec![],
        Ok(r) => r
            .into_iter()
            .map(|line| format!("integrity_check: {line}"))
            .collect(),
        Err(e) => vec![format!("integrity_check could not run: {e}")],
    }
}

/// The whole event chain verifies through the store (`verify_events`).
pub fn chain(db: &Path) -> Vec<String> {
    let store = match Store::open_existing(db, true) {
        Ok(s) => s,
        Err(e) => return vec![format!("open for chain check: {e}")],
    };
    match store.verify_events(1, 0) {
        Ok(r) => match r.chain_break {
            None => vec![],
            Some(b) => vec![format!("event chain breaks at seq {}: {}", b.seq, b.detail)],
        },
        Err(e) => vec![format!("verify_events failed: {e}")],
    }
}

/// The independent Python verifier accepts the database (`agentrt_verify.py`).
pub fn python_verifier(db: &Path) -> Vec<String> {
    let (code, report) = crate::support::verify(db);
    if code == 0 {
        vec![]
    } else {
        vec![format!("agentrt_verify.py exit {code}: {report}")]
    }
}

/// Every run, step, approval and event decodes (no `decode_error`), and every row's
/// referenced run (and an approval's step) exists.
pub fn rows_decode(db: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let store = match Store::open_existing(db, true) {
        Ok(s) => s,
        Err(e) => return vec![format!("open for decoding: {e}")],
    };
    for id in match run_ids(&store) {
        Ok(ids) => ids,
        Err(e) => return vec![e],
    } {
        match store.get_run(&id) {
            Ok(r) if !r.decode_error.is_empty() => {
                out.push(format!("run {id} does not decode: {}", r.decode_error))
            }
            Ok(_) => {}
            Err(e) => out.push(format!("run {id}: {e}")),
        }
        match store.list_steps(&id) {
            Ok(steps) => out.extend(
                steps
                    .iter()
                    .filter(|s| !s.decode_error.is_empty())
                    .map(|s| {
                        format!(
                            "step {} of run {id} does not decode: {}",
                            s.id, s.decode_error
                        )
                    }),
            ),
            Err(e) => out.push(format!("steps of run {id}: {e}")),
        }
        match store.list_approvals(&id) {
            Ok(a) => out.extend(a.iter().filter(|a| !a.decode_error.is_empty()).map(|a| {
                format!(
                    "approval {} of run {id} does not decode: {}",
                    a.id, a.decode_error
                )
            })),
            Err(e) => out.push(format!("approvals of run {id}: {e}")),
        }
        let mut offset = 0;
        loop {
            match store.list_events_page(&id, PAGE, offset) {
                Ok(page) => {
                    out.extend(
                        page.items
                            .iter()
                            .filter(|e| !e.decode_error.is_empty())
                            .map(|e| {
                                format!(
                                    "event {} of run {id} does not decode: {}",
                                    e.seq, e.decode_error
                                )
                            }),
                    );
                    offset += page.items.len() as i64;
                    if page.items.is_empty() || offset >= page.total {
                        break;
                    }
                }
                Err(e) => {
                    out.push(format!("events of run {id}: {e}"));
                    break;
                }
            }
        }
    }
    out.extend(orphans(db));
    out
}

/// Rows whose referenced run or step is missing.
fn orphans(db: &Path) -> Vec<String> {
    let conn = match open_ro(db) {
        Ok(c) => c,
        Err(e) => return vec![e],
    };
    let checks = [
        (
            "steps",
            "SELECT id FROM steps WHERE run_id NOT IN (SELECT id FROM runs)",
        ),
        (
            "events",
            "SELECT seq FROM events WHERE run_id NOT IN (SELECT id FROM runs)",
        ),
        (
            "approvals",
            "SELECT id FROM approvals WHERE run_id NOT IN (SELECT id FROM runs)",
        ),
        (
            "approvals",
            "SELECT id FROM approvals WHERE step_id NOT IN (SELECT id FROM steps)",
        ),
        (
            "model_calls",
            "SELECT id FROM model_calls WHERE run_id NOT IN (SELECT id FROM runs)",
        ),
    ];
    let mut out = Vec::new();
    for (table, sql) in checks {
        let ids: Result<Vec<String>, _> = conn.prepare(sql).and_then(|mut s| {
            s.query_map([], |r| {
                Ok(match r.get_ref(0)? {
                    rusqlite::types::ValueRef::Integer(i) => i.to_string(),
                    v => String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned(),
                })
            })?
            .collect()
        });
        match ids {
            Ok(ids) => out.extend(
                ids.into_iter()
                    .map(|id| format!("{table} row {id} refers to a row that does not exist")),
            ),
            Err(e) => out.push(format!("orphan check on {table}: {e}")),
        }
    }
    out
}

fn run_ids(store: &Store) -> Result<Vec<String>, String> {
    let mut ids = Vec::new();
    let mut offset = 0;
    loop {
        let page = store
            .list_runs_page(PAGE, offset)
            .map_err(|e| format!("list runs: {e}"))?;
        offset += page.items.len() as i64;
        ids.extend(page.items.into_iter().map(|r| r.id));
        if offset >= page.total || offset == 0 {
            return Ok(ids);
        }
    }
}

/// Every run either finished (terminal with a reason) or waits for a person: WAITING with a
/// pending approval whose reason can be shown. RUNNING or INTERRUPTED after recovery, a
/// terminal run without a reason, or a WAITING run with nothing pending is a violation.
pub fn runs_settled(db: &Path) -> Vec<String> {
    let store = match Store::open_existing(db, true) {
        Ok(s) => s,
        Err(e) => return vec![format!("open for settled check: {e}")],
    };
    let ids = match run_ids(&store) {
        Ok(ids) => ids,
        Err(e) => return vec![e],
    };
    let mut out = Vec::new();
    for id in ids {
        let run = match store.get_run(&id) {
            Ok(r) => r,
            Err(e) => {
                out.push(format!("run {id}: {e}"));
                continue;
            }
        };
        match &run.status {
            s if s.is_terminal() => {
                if run.reason.is_empty() {
                    out.push(format!("run {id} is {s} without a reason"));
                }
            }
            RunStatus::WaitingForApproval => {
                let pending: Vec<_> = match store.list_approvals(&id) {
                    Ok(a) => a
                        .into_iter()
                        .filter(|a| a.status == ApprovalStatus::Pending)
                        .collect(),
                    Err(e) => {
                        out.push(format!("approvals of waiting run {id}: {e}"));
                        continue;
                    }
                };
                if pending.is_empty() {
                    out.push(format!(
                        "run {id} is WAITING_FOR_APPROVAL with no pending approval (approved but never resumed?)"
                    ));
                }
                for a in pending {
                    match store.approval_reason(&id, &a.id) {
                        Ok(r) if r.trim().is_empty() => out.push(format!(
                            "run {id} waits on approval {} that gives no reason",
                            a.id
                        )),
                        Ok(_) => {}
                        Err(e) => out.push(format!("reason of approval {}: {e}", a.id)),
                    }
                }
            }
            s => out.push(format!(
                "run {id} is {s}: neither finished nor waiting for a person"
            )),
        }
    }
    out
}

/// No side effect in the consumer's ledger ran twice for one step, unless the run database
/// holds an approved `interrupted_side_effect` approval for that step (an operator approved
/// the re-run; one approval allows one repeat).
pub fn ledger_once(ledger_db: &Path, run_db: &Path) -> Vec<String> {
    let ledger = match open_ro(ledger_db) {
        Ok(c) => c,
        Err(e) => return vec![e],
    };
    let effects: Result<Vec<(String, String, String, i64)>, _> = ledger
        .prepare(
            "SELECT k.session_id, k.step_id, e.tool, COUNT(*) FROM effects e \
             JOIN call_keys k ON k.key = e.call_key GROUP BY k.session_id, k.step_id, e.tool \
             HAVING COUNT(*) > 1",
        )
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                .collect()
        });
    let effects = match effects {
        Ok(e) => e,
        Err(e) => return vec![format!("read the effect ledger: {e}")],
    };
    if effects.is_empty() {
        return vec![];
    }
    let approved = match approved_reruns(run_db) {
        Ok(a) => a,
        Err(e) => return vec![e],
    };
    effects
        .into_iter()
        .filter(|(_, step, _, n)| (*n - 1) > approved.get(step).copied().unwrap_or(0))
        .map(|(session, step, tool, n)| {
            format!(
                "{tool} ran {n} times for step {step} (session {session}) with {} approved re-run(s)",
                approved.get(&step).copied().unwrap_or(0)
            )
        })
        .collect()
}

/// Step id → approved `interrupted_side_effect` approvals.
fn approved_reruns(run_db: &Path) -> Result<BTreeMap<String, i64>, String> {
    let conn = open_ro(run_db)?;
    let rows: Result<Vec<(String, i64)>, _> = conn
        .prepare(
            "SELECT step_id, COUNT(*) FROM approvals WHERE kind = 'interrupted_side_effect' \
             AND status = 'approved' GROUP BY step_id",
        )
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect());
    rows.map(|r| r.into_iter().collect())
        .map_err(|e| format!("read approved re-runs: {e}"))
}

/// Everything a finished trial must satisfy: the store checks, settled runs, and (when the
/// consumer's ledger is given) no doubled effect. With `python`, also the Python verifier.
pub fn after_trial(run_db: &Path, ledger_db: Option<&Path>, python: bool) -> Vec<String> {
    let mut v = store_holds(run_db);
    v.extend(runs_settled(run_db));
    if let Some(l) = ledger_db {
        v.extend(ledger_once(l, run_db));
    }
    if python {
        v.extend(python_verifier(run_db));
    }
    v
}

/// What must hold at any instant, even mid-trial: integrity, the chain, every row decodes.
pub fn store_holds(run_db: &Path) -> Vec<String> {
    let mut v = integrity(run_db);
    v.extend(chain(run_db));
    v.extend(rows_decode(run_db));
    v
}

/// On PostgreSQL, after a trial: waits until the processes' sequencers have drained the inbox, runs
/// `countersign verify` on the URL, and copies the database back to SQLite (the copy checks
/// the chain and every approval hash on both sides). Returns the copy, where the SQLite
/// trial's checks then run (each check above takes the copy).
#[cfg(feature = "postgres")]
pub fn pg_checked_copy(url: &str, dir: &Path) -> Result<std::path::PathBuf, Vec<String>> {
    use countersign::pgstore::copy::{Endpoint, copy};
    use countersign::pgstore::{PgStore, PgUrl};
    use std::process::Command;
    use std::time::Duration;
    let pg = PgUrl::parse(url).map_err(|e| vec![e.to_string()])?;
    let mut s = PgStore::open_existing(&pg).map_err(|e| vec![e.to_string()])?;
    for _ in 0..500 {
        match s.unchained() {
            Ok(0) => break,
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(vec![format!("unchained: {e}")]),
        }
    }
    let n = s.unchained().map_err(|e| vec![e.to_string()])?;
    if n != 0 {
        return Err(vec![format!(
            "{n} events still wait in the inbox after every process stopped"
        )]);
    }
    drop(s);
    let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["--db", url, "verify"])
        .env_remove("COUNTERSIGN_DB")
        .output()
        .map_err(|e| vec![e.to_string()])?;
    if !o.status.success() {
        return Err(vec![format!(
            "countersign verify on the URL failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )]);
    }
    let back = dir.join("back.db");
    copy(&Endpoint::Pg(pg), &Endpoint::Sqlite(back.clone()))
        .map_err(|e| vec![format!("copy back to SQLite: {e}")])?;
    Ok(back)
}

/// Distinct violations, sorted (for stable reports).
pub fn distinct(v: Vec<String>) -> Vec<String> {
    v.into_iter().collect::<BTreeSet<_>>().into_iter().collect()
}
