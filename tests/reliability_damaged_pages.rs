//! Damaged pages (issue 9 part 3): a run database whose bytes were overwritten on disk (a
//! torn write, a bad sector). Reads of what is damaged fail with one sentence, reads of the
//! rest keep working, integrity_check and the independent verifier see it, nothing panics.

mod reliability_support;
mod support;

use countersign::runtime::store::Store;
use reliability_support::damage::{flat_db, read_everything, run_of};
use reliability_support::{invariants, overwrite, page_size, root_page};
use support::tempdir;

#[test]
fn a_corrupted_table_page_is_reported_and_the_other_tables_read() {
    let db = flat_db();
    let ps = page_size(&db.path);
    let root = root_page(&db.path, "model_calls");
    overwrite(&db.path, (root - 1) * ps + 8, ps - 16);

    assert!(
        !invariants::integrity(&db.path).is_empty(),
        "integrity_check sees the damage"
    );
    let store = Store::open_existing(&db.path, true).expect("the schema page is intact");
    assert_eq!(
        read_everything(&store),
        Vec::<String>::new(),
        "no read touches model_calls"
    );
    assert!(store.verify_events(1, 0).unwrap().ok());
    let (code, _) = support::verify(&db.path);
    assert_ne!(code, 0, "the independent verifier reports the damage too");
}

#[test]
fn a_corrupted_approvals_page_fails_those_reads_with_a_sentence_and_the_chain_still_verifies() {
    let db = flat_db();
    let ps = page_size(&db.path);
    let root = root_page(&db.path, "approvals");
    overwrite(&db.path, (root - 1) * ps, ps);

    let store = Store::open_existing(&db.path, true).unwrap();
    let errors = read_everything(&store);
    assert!(!errors.is_empty(), "reads of approvals report the damage");
    for e in &errors {
        assert!(e.starts_with("agentrt: ") && !e.contains('\n'), "{e}");
        assert!(e.contains("malformed") || e.contains("corrupt"), "{e}");
    }
    assert!(store.list_runs_page(1000, 0).is_ok());
    assert!(store.verify_events(1, 0).unwrap().ok());
    let waiting = run_of(&db.m, "waiting");
    assert!(store.list_steps(&waiting).is_ok());
    assert!(store.list_events_page(&waiting, 100, 0).is_ok());
}

#[test]
fn bytes_overwritten_anywhere_never_panic_a_reader() {
    let base = flat_db();
    let len = std::fs::metadata(&base.path).unwrap().len() as usize;
    let ps = page_size(&base.path);
    let dir = tempdir();
    let mut noticed = Vec::new();
    // Offsets spread over the file (header page included), chunks of 512 bytes.
    for k in 0..24usize {
        let copy = dir.path().join(format!("c{k}.db"));
        std::fs::copy(&base.path, &copy).unwrap();
        let offset = if k == 0 {
            0
        } else {
            (len / 24 * k) / 512 * 512
        };
        overwrite(&copy, offset, 512.min(ps));
        let errors = match Store::open_existing(&copy, true) {
            Ok(store) => read_everything(&store),
            Err(e) => vec![e.to_string()],
        };
        if !errors.is_empty() || !invariants::integrity(&copy).is_empty() {
            noticed.push(k);
        }
        for e in &errors {
            assert!(
                e.starts_with("agentrt: ") && !e.contains('\n'),
                "offset {offset}: {e}"
            );
        }
        let _ = invariants::store_holds(&copy);
    }
    // Free pages and the middle of long values hold nothing SQLite can check, so not every
    // overwrite is noticed; the header always is.
    assert_eq!(
        noticed.first(),
        Some(&0),
        "the header overwrite is reported: {noticed:?}"
    );
}

#[test]
fn cancel_ends_a_run_whose_steps_cannot_be_read() {
    // A garbled steps page: the in-flight steps cannot be failed ("database disk image is
    // malformed"), and the run is cancelled all the same, in one transaction with its
    // run.finished, the chain intact.
    use countersign::runtime::operator;
    use countersign::runtime::types::{RunStatus, Timestamp};
    let db = flat_db();
    let ps = page_size(&db.path);
    let root = root_page(&db.path, "steps");
    overwrite(&db.path, (root - 1) * ps, ps);
    let waiting = run_of(&db.m, "waiting");
    let store = Store::open_existing(&db.path, false).unwrap();
    let e = store.list_steps(&waiting).unwrap_err().to_string();
    assert!(e.contains("malformed") || e.contains("corrupt"), "{e}");
    let done = operator::cancel(
        &store,
        &waiting,
        "ops",
        "steps unreadable",
        Timestamp::now(),
    )
    .unwrap_or_else(|e| panic!("cancel must end the run: {e}"));
    assert_eq!(
        (done.run.status.clone(), done.run.reason.as_str()),
        (RunStatus::Cancelled, "operator_cancelled")
    );
    assert_eq!(done.steps_failed, 0);
    let why = done
        .steps_unreadable
        .expect("it says the steps were not read");
    assert!(
        why.contains("malformed") || why.contains("corrupt"),
        "{why}"
    );
    assert_eq!(done.events.last().unwrap().kind, "run.finished");
    let run = store.get_run(&waiting).unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    assert!(store.verify_events(1, 0).unwrap().ok());
    match operator::cancel(&store, &waiting, "ops", "again", Timestamp::now()) {
        Err(operator::OperatorError::RunFinished { .. }) => {}
        other => panic!("a second cancel is refused: {other:?}"),
    }
}
