//! A reviewer's decisions on PostgreSQL (issue 19, docs/decisions/0082) against a real server
//! (`tests/pg_support`): approve, reject, deny and cancel run the runtime's operator code over
//! the store trait PostgreSQL implements; a decision lands in one transaction, its events go
//! through the inbox and a sequencer chains them; a stale shown hash is refused; two reviewers
//! deciding at once on two connections get one winner; the reviewer role can do all of it.

mod pg_support;
use pg_support::said;
use support::bin::cli;
mod support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use countersign::pgstore::copy::{Endpoint, copy};
use countersign::pgstore::{PgStore, PgUrl};
use countersign::runtime::operator::{self, OperatorError, Review, Ruling, Shown};
use countersign::runtime::store::RunStore;
use countersign::runtime::types::{ApprovalStatus, RunStatus, Timestamp};

/// A PostgreSQL database holding the fixture's waiting run (copied from SQLite), the SQLite
/// file it came from, and the run's and its pending approval's ids and hash.
struct Waiting {
    db: pg_support::TestDb,
    sqlite: PathBuf,
    run: String,
    approval: String,
    hash: String,
    /// The chain's head as copied: what a decision writes is chained after it.
    head: i64,
}

fn waiting(dir: &Path) -> Option<Waiting> {
    let db = pg_support::fresh_db()?;
    let sqlite = dir.join("waiting.db");
    let man = support::fixture(&sqlite, &["--scenario", "waiting"]);
    let a = &man["approvals"][0];
    copy(
        &Endpoint::Sqlite(sqlite.clone()),
        &Endpoint::Pg(db.pg_url()),
    )
    .expect("copy");
    let head: i64 = rusqlite::Connection::open(&sqlite)
        .unwrap()
        .query_row("SELECT max(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    Some(Waiting {
        db,
        head,
        sqlite,
        run: a["run_id"].as_str().unwrap().to_string(),
        approval: a["id"].as_str().unwrap().to_string(),
        hash: a["hash"].as_str().unwrap().to_string(),
    })
}

/// The test database's URL with a password in it (the test cluster trusts its socket, so the
/// password is never checked; it must never be printed).
fn with_password(url: &str) -> String {
    url.replacen("@", ":s3cret-pw@", 1)
}

/// `(type, payload)` of the events waiting in the inbox, in inbox order.
fn inbox(db: &pg_support::TestDb) -> Vec<(String, String)> {
    db.client()
        .query(
            "SELECT type, payload_json FROM event_inbox ORDER BY id",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// `(type, payload)` of what was written since the fixture was copied: the events chained
/// after its head, in seq order, then those still in the inbox. A decision made by the
/// command chains its own events before it exits (this test's login may chain); one made
/// through the library leaves them in the inbox.
fn written(w: &Waiting) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> =
        w.db.client()
            .query(
                "SELECT type, payload_json FROM events WHERE seq > $1 ORDER BY seq",
                &[&w.head],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
    all.extend(inbox(&w.db));
    all
}

fn kinds(events: &[(String, String)]) -> Vec<&str> {
    events.iter().map(|(k, _)| k.as_str()).collect()
}

/// Chains the inbox, checks the chain and every approval hash on PostgreSQL (the command),
/// copies the database back to SQLite and has agentrt's independent verifier check it.
fn chain_verify_and_copy_back(w: &Waiting, dir: &Path) {
    let mut s = PgStore::open_existing(&w.db.pg_url()).unwrap();
    s.sequence_all().unwrap();
    assert_eq!(s.unchained().unwrap(), 0);
    let o = cli(&["--db", &w.db.url, "verify"]);
    assert!(o.status.success(), "{}", said(&o));
    let back = dir.join("back.db");
    copy(
        &Endpoint::Pg(w.db.pg_url()),
        &Endpoint::Sqlite(back.clone()),
    )
    .expect("copy back");
    support::assert_verifies(&back);
}

/// `approve` on a PostgreSQL URL lands the decision in one transaction: the approval is
/// approved by the reviewer, the run stays waiting, `approval.decided` is chained by the
/// command before it exits (this login may chain; no runtime runs a sequencer here), after which `verify` and agentrt's verifier (on a copy back to
/// SQLite) pass. The command prints what it prints on SQLite, the database named by its
/// redacted URL, and never the password.
#[test]
fn pg_approve_lands_and_the_sequencer_chains_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let Some(w) = waiting(dir.path()) else {
        return;
    };
    let url = with_password(&w.db.url);
    let o = cli(&[
        "--db",
        &url,
        "--by",
        "alice",
        "approve",
        &w.run,
        "--approval",
        &w.approval,
        "--note",
        "checked the order",
    ]);
    assert!(o.status.success(), "{}", said(&o));
    assert!(!said(&o).contains("s3cret-pw"), "{}", said(&o));
    let s = PgStore::open_existing(&w.db.pg_url()).unwrap();
    let a = operator::pending_approval(&s, w.run.as_bytes(), None);
    assert!(a.is_err(), "no approval is pending any more");
    let a = s
        .get_approval(w.run.as_bytes(), w.approval.as_bytes())
        .unwrap();
    assert_eq!(a.status, ApprovalStatus::Approved);
    assert_eq!(
        (a.decided_by.as_str(), a.note.as_str()),
        ("alice", "checked the order")
    );
    let run = s.get_run(w.run.as_bytes()).unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    assert!(inbox(&w.db).is_empty(), "the command chained its events");
    let queued = written(&w);
    assert_eq!(kinds(&queued), ["approval.decided"]);
    assert_eq!(
        queued[0].1,
        format!(
            r#"{{"approval_id":"{}","by":"alice","note":"checked the order","status":"approved"}}"#,
            w.approval
        )
    );

    // The same command on the SQLite file prints the same lines, bar the database's name.
    let sq = cli(&[
        "--db",
        w.sqlite.to_str().unwrap(),
        "--by",
        "alice",
        "approve",
        &w.run,
        "--approval",
        &w.approval,
        "--note",
        "checked the order",
    ]);
    assert!(sq.status.success(), "{}", said(&sq));
    // The printed command names the database without the password (not even `***`, which
    // would override the PGPASSWORD or password file of the person who runs it).
    let named = PgUrl::parse(&url).unwrap().for_commands().to_string();
    assert!(!said(&o).contains("***"), "{}", said(&o));
    assert!(
        !named.contains("***") && !named.contains("s3cret-pw"),
        "{named}"
    );
    let pg_out = String::from_utf8_lossy(&o.stdout).replace(&format!("'{named}'"), "DB");
    let sq_out = String::from_utf8_lossy(&sq.stdout).replace(w.sqlite.to_str().unwrap(), "DB");
    assert!(
        pg_out.contains("decide with: countersign --db DB approve"),
        "{pg_out}"
    );
    // But for the last line: `resume` on PostgreSQL needs the order backend, which `approve`
    // does not know, so no command is printed.
    let (pg_head, pg_last) = pg_out.trim_end().rsplit_once('\n').unwrap();
    let (sq_head, sq_last) = sq_out.trim_end().rsplit_once('\n').unwrap();
    assert_eq!(pg_head, sq_head);
    assert!(
        sq_last.ends_with(&format!("resumed: countersign --db DB resume {}", w.run)),
        "{sq_last}"
    );
    assert_eq!(
        pg_last,
        "the run stays waiting until it is resumed; no `resume` command is printed: on PostgreSQL, `resume` also needs the example consumer's order backend (--backend PATH)"
    );

    // A second approve finds it decided, as on SQLite (exit 1, who decided it).
    let again = cli(&["--db", &url, "approve", &w.run, "--approval", &w.approval]);
    assert_eq!(again.status.code(), Some(1), "{}", said(&again));
    assert!(
        said(&again).contains("already approved by alice"),
        "{}",
        said(&again)
    );
    drop(s);
    chain_verify_and_copy_back(&w, dir.path());
}

/// A decision bound to a hash the reviewer was not shown is refused and nothing is written;
/// so is one whose row changed between the checks made before the transaction and the
/// transaction itself (the checks are made again under the run's lock).
#[test]
fn pg_stale_shown_hash_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let Some(w) = waiting(dir.path()) else {
        return;
    };
    let s = PgStore::open_existing(&w.db.pg_url()).unwrap();
    let wrong = "0".repeat(64);
    let e = operator::approve_shown(
        &s,
        &w.run,
        &w.approval,
        &wrong,
        "alice",
        "",
        Timestamp::now(),
    )
    .unwrap_err();
    assert!(matches!(e, OperatorError::Changed { .. }), "{e}");
    assert!(inbox(&w.db).is_empty());

    // The row changes after the checks outside the transaction passed: the request the
    // reviewer read is no longer the stored one.
    let mut admin = w.db.client();
    let review = Review {
        ruling: Ruling::Approve,
        shown: Shown::Hash(&w.hash),
        by: "alice",
        note: "",
        now: Timestamp::now(),
    };
    let e = operator::decide_hooked(&s, &w.run, &w.approval, review, || {
        admin
            .execute(
                "UPDATE approvals SET hash = $1 WHERE id = $2",
                &[&"f".repeat(64), &w.approval],
            )
            .unwrap();
    })
    .unwrap_err();
    assert!(matches!(e, OperatorError::Changed { .. }), "{e}");
    let status: String = admin
        .query_one("SELECT status FROM approvals WHERE id = $1", &[&w.approval])
        .unwrap()
        .get(0);
    assert_eq!(status, "pending");
    assert!(inbox(&w.db).is_empty(), "nothing was written");
}

/// Two reviewers on two connections decide the same approval at once (both pass the checks
/// before either transaction begins): exactly one decision lands, the other is refused with
/// the state it found (who decided it, and how), and one `approval.decided` is queued.
#[test]
fn pg_two_reviewers_at_once_one_wins_the_other_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let Some(w) = waiting(dir.path()) else {
        return;
    };
    let gate = Arc::new(Barrier::new(2));
    let results: Vec<(String, Result<(), OperatorError>)> = std::thread::scope(|sc| {
        let handles: Vec<_> = [("alice", Ruling::Approve), ("bob", Ruling::Reject)]
            .into_iter()
            .map(|(who, ruling)| {
                let (gate, url, w) = (gate.clone(), w.db.pg_url(), &w);
                sc.spawn(move || {
                    let s = PgStore::open_existing(&url).unwrap();
                    let review = Review {
                        ruling,
                        shown: Shown::Hash(&w.hash),
                        by: who,
                        note: "at once",
                        now: Timestamp::now(),
                    };
                    let r = operator::decide_hooked(&s, &w.run, &w.approval, review, || {
                        gate.wait();
                    });
                    (who.to_string(), r.map(|_| ()))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners: Vec<&str> = results
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(w, _)| w.as_str())
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    let winner = winners[0];
    let (_, lost) = results.iter().find(|(w, _)| w != winner).unwrap();
    match lost {
        Err(OperatorError::NotPending {
            decided_by, status, ..
        }) => {
            assert_eq!(decided_by, winner);
            let want = if winner == "alice" {
                ApprovalStatus::Approved
            } else {
                ApprovalStatus::Rejected
            };
            assert_eq!(status, &want);
        }
        Err(OperatorError::RunNotWaiting { status, .. }) => {
            // The reject won and cancelled the run before the approve read it.
            assert_eq!(winner, "bob");
            assert_eq!(status, &RunStatus::Cancelled);
        }
        other => panic!("the loser saw {other:?}"),
    }
    let queued = inbox(&w.db);
    let decided = kinds(&queued)
        .iter()
        .filter(|k| **k == "approval.decided")
        .count();
    assert_eq!(decided, 1, "{queued:?}");
    chain_verify_and_copy_back(&w, dir.path());
}

/// `cancel` on a PostgreSQL URL (the run named by a prefix of its id) ends a waiting run: CANCELLED (`operator_cancelled`), its
/// awaiting step failed, `run.finished` naming who queued; chained, verified, copied back.
#[test]
fn pg_cancel_of_a_waiting_run() {
    let dir = tempfile::tempdir().unwrap();
    let Some(w) = waiting(dir.path()) else {
        return;
    };
    let o = cli(&[
        "--db",
        &with_password(&w.db.url),
        "--by",
        "carol",
        "cancel",
        // A unique prefix names the run, as on SQLite.
        &w.run[..8],
        "--note",
        "customer withdrew",
    ]);
    assert!(o.status.success(), "{}", said(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("run {}: CANCELLED (operator_cancelled)\n", w.run)
    );
    assert!(!said(&o).contains("s3cret-pw"));
    let mut c = w.db.client();
    let row = c
        .query_one(
            "SELECT status, reason, reason_detail FROM runs WHERE id = $1",
            &[&w.run],
        )
        .unwrap();
    let (status, reason, detail): (String, String, String) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(
        (status.as_str(), reason.as_str(), detail.as_str()),
        ("CANCELLED", "operator_cancelled", "customer withdrew")
    );
    let in_flight: i64 = c
        .query_one(
            "SELECT count(*) FROM steps WHERE run_id = $1 AND status IN ('deciding', 'awaiting_approval', 'executing')",
            &[&w.run],
        )
        .unwrap()
        .get(0);
    assert_eq!(in_flight, 0);
    let queued = written(&w);
    assert_eq!(kinds(&queued), ["run.finished"]);
    assert!(
        queued[0]
            .1
            .starts_with(r#"{"by":"carol","detail":"customer withdrew""#),
        "{queued:?}"
    );
    // Cancelled is final: a second cancel says so (exit 1).
    let again = cli(&["--db", &w.db.url, "cancel", &w.run, "--note", "again"]);
    assert_eq!(again.status.code(), Some(1), "{}", said(&again));
    assert!(
        said(&again).contains("already finished"),
        "{}",
        said(&again)
    );
    chain_verify_and_copy_back(&w, dir.path());
}

/// A login in `countersign_reviewer` (docs/postgres-roles.sql) can approve, reject and cancel
/// through the commands, which leave their events to the runtime's sequencers (it may not
/// chain); what it cannot do is tested in pg_store.rs.
/// A login that may only read (`pg_read_all_data`) is refused a cancel with the server's
/// reason (permission denied), as an approve is, not with "current transaction is aborted"
/// (found from outside: the cancel's fallback read ran in the transaction the refused lock
/// had aborted).
#[test]
fn pg_a_read_only_login_is_refused_a_cancel_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let Some(w) = waiting(dir.path()) else {
        return;
    };
    let mut c = w.db.client();
    let login = format!("ro_{}", std::process::id());
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {login}; CREATE ROLE {login} LOGIN IN ROLE pg_read_all_data"
    ))
    .unwrap();
    let url = w.db.url_as(&login);
    for args in [
        vec!["cancel", w.run.as_str(), "--note", "x"],
        vec!["approve", w.run.as_str(), "--approval", w.approval.as_str()],
    ] {
        let mut all = vec!["--db", url.as_str(), "--by", "ro"];
        all.extend(args);
        let o = cli(&all);
        let s = said(&o);
        assert_eq!(o.status.code(), Some(1), "{s}");
        assert!(s.contains("permission denied"), "{s}");
        assert!(!s.contains("aborted"), "{s}");
    }
    let status: String = c
        .query_one("SELECT status FROM runs WHERE id = $1", &[&w.run])
        .unwrap()
        .get(0);
    assert_eq!(status, "WAITING_FOR_APPROVAL");
    let _ = c.batch_execute(&format!("DROP OWNED BY {login}; DROP ROLE {login}"));
}

#[test]
fn pg_reviewer_role_can_decide_and_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let Some(w) = waiting(dir.path()) else {
        return;
    };
    let mut c = w.db.client();
    c.batch_execute(include_str!("../docs/postgres-roles.sql"))
        .unwrap();
    let login = format!("revops_{}", std::process::id());
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {login}; CREATE ROLE {login} LOGIN IN ROLE countersign_reviewer"
    ))
    .unwrap();
    let url = w.db.url_as(&login);
    let o = cli(&[
        "--db",
        &url,
        "--by",
        "rev",
        "approve",
        &w.run,
        "--approval",
        &w.approval,
    ]);
    assert!(o.status.success(), "approve as the reviewer: {}", said(&o));
    let o = cli(&[
        "--db", &url, "--by", "rev", "cancel", &w.run, "--note", "stop",
    ]);
    assert!(o.status.success(), "cancel as the reviewer: {}", said(&o));
    // A reviewer's login may not chain: its events wait for the runtime's sequencers, and
    // the command says nothing of it.
    assert_eq!(kinds(&inbox(&w.db)), ["approval.decided", "run.finished"]);
    assert!(!said(&o).contains("note:"), "{}", said(&o));

    // Reject (the step fails, the run ends) on a second waiting run.
    let dir2 = tempfile::tempdir().unwrap();
    let w2 = waiting(dir2.path()).unwrap();
    let mut c2 = w2.db.client();
    c2.batch_execute(include_str!("../docs/postgres-roles.sql"))
        .unwrap();
    let url2 = w2.db.url_as(&login);
    let o = cli(&[
        "--db",
        &url2,
        "--by",
        "rev",
        "reject",
        &w2.run,
        "--approval",
        &w2.approval,
        "--note",
        "no refunds today",
    ]);
    assert!(o.status.success(), "reject as the reviewer: {}", said(&o));
    assert_eq!(kinds(&inbox(&w2.db)), ["approval.decided", "run.finished"]);
    drop((c2, w2));
    let _ = c.batch_execute(&format!("DROP OWNED BY {login}; DROP ROLE {login}"));
}

/// `runs` on PostgreSQL prints what it prints on SQLite for the same rows, text and `--json`,
/// by status, by page (`--limit`/`--offset`) and all of them page by page by key (more than
/// one page of 500): the list a reviewer chooses from, each waiting run with its one pending
/// approval.
#[test]
fn pg_runs_lists_as_on_sqlite() {
    let Some(db) = pg_support::fresh_db() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("all.db");
    support::fixture(&sqlite, &["--big", "520"]);
    copy(
        &Endpoint::Sqlite(sqlite.clone()),
        &Endpoint::Pg(db.pg_url()),
    )
    .expect("copy");
    let sq = sqlite.to_str().unwrap();
    for args in [
        &["runs"][..],
        &["runs", "--status", "WAITING_FOR_APPROVAL"],
        &["runs", "--limit", "4", "--offset", "3"],
        &["runs", "--limit", "0"],
        &["--json", "runs", "--limit", "5", "--offset", "2"],
        &["--json", "runs", "--status", "WAITING_FOR_APPROVAL"],
    ] {
        let on = |d: &str| {
            let mut all = vec!["--db", d];
            all.extend_from_slice(args);
            cli(&all)
        };
        let (p, s) = (on(&db.url), on(sq));
        assert!(p.status.success(), "{args:?}: {}", said(&p));
        assert!(s.status.success(), "{args:?}: {}", said(&s));
        assert_eq!(
            String::from_utf8_lossy(&p.stdout),
            String::from_utf8_lossy(&s.stdout),
            "{args:?}"
        );
    }
    // The waiting runs show their pending approval, the one `approve` then decides.
    let o = cli(&["--db", &db.url, "runs", "--status", "WAITING_FOR_APPROVAL"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("WAITING_FOR_APPROVAL"));
}

/// `deny` on a PostgreSQL URL: the approval rejected with the note, the awaiting step failed
/// with the feedback for the agent, the run INTERRUPTED for its program to resume; chained,
/// verified and copied back.
#[test]
fn pg_deny_with_feedback_interrupts_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let Some(w) = waiting(dir.path()) else {
        return;
    };
    let o = cli(&[
        "--db",
        &w.db.url,
        "--by",
        "dave",
        "deny",
        &w.run,
        "--approval",
        &w.approval,
        "--note",
        "refund 50 only",
    ]);
    assert!(o.status.success(), "{}", said(&o));
    let mut c = w.db.client();
    let status: String = c
        .query_one("SELECT status FROM runs WHERE id = $1", &[&w.run])
        .unwrap()
        .get(0);
    assert_eq!(status, "INTERRUPTED");
    let (a_status, note): (String, String) = {
        let r = c
            .query_one(
                "SELECT status, note FROM approvals WHERE id = $1",
                &[&w.approval],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(
        (a_status.as_str(), note.as_str()),
        ("rejected", "refund 50 only")
    );
    assert_eq!(kinds(&written(&w)), ["approval.decided", "step.failed"]);
    chain_verify_and_copy_back(&w, dir.path());
}

/// An approval past its expiry when a reviewer decides it is expired instead, on PostgreSQL as
/// on SQLite: the decision exits 1 saying so, the approval is `expired`, the run CANCELLED
/// (`approval_expired`), and both events are queued.
#[test]
fn pg_an_expired_approval_is_expired_not_decided() {
    let dir = tempfile::tempdir().unwrap();
    let Some(w) = waiting(dir.path()) else {
        return;
    };
    let mut c = w.db.client();
    c.execute(
        "UPDATE approvals SET expires_at = '2001-01-01T00:00:00Z' WHERE id = $1",
        &[&w.approval],
    )
    .unwrap();
    let o = cli(&[
        "--db",
        &w.db.url,
        "approve",
        &w.run,
        "--approval",
        &w.approval,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(
        said(&o).contains("approval expired before it was decided"),
        "{}",
        said(&o)
    );
    let r = c
        .query_one(
            "SELECT r.status, r.reason, a.status FROM runs r JOIN approvals a ON a.run_id = r.id WHERE a.id = $1",
            &[&w.approval],
        )
        .unwrap();
    let got: (String, String, String) = (r.get(0), r.get(1), r.get(2));
    assert_eq!(
        (got.0.as_str(), got.1.as_str(), got.2.as_str()),
        ("CANCELLED", "approval_expired", "expired")
    );
    assert_eq!(kinds(&written(&w)), ["approval.decided", "run.finished"]);
}
