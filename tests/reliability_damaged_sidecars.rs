//! Damaged and hostile files beside the database (issue 14 items 2, 7, 9): a crafted hot
//! `-journal` another user dropped in a shared directory (SQLite replays a hot journal into the
//! database before it looks at WAL), a super-journal a journal names, leftovers a read-only
//! open must not create or need, and the messages for each. Tests run as root: files are
//! given to another uid with `chown`, and readers run under another uid in a forked child.

mod console_support;
mod reliability_support;
mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use countersign::runtime::store::{Store, StoreError};
use reliability_support::damage::{approval_of, clean_db, run_of};
use reliability_support::{Raw, page_size};

/// The uid (and gid) given the hostile files and running the second-user readers.
const OTHER: u32 = 65534;

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn sidecar(db: &Path, suffix: &str) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(suffix);
    s.into()
}

/// The approval's request as the main file holds it (immutable: no journal is looked at).
fn request_of(db: &Path, approval: &str) -> String {
    let conn = rusqlite::Connection::open_with_flags(
        format!("file:{}?immutable=1", db.display()),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    conn.query_row(
        "SELECT request_json FROM approvals WHERE id = ?",
        [approval],
        |r| r.get(0),
    )
    .unwrap()
}

/// Everything in the main file, the database still in WAL mode, no sidecars left.
fn settle(db: &Path) {
    let raw = Raw::open(db);
    raw.exec("PRAGMA wal_checkpoint(TRUNCATE);");
    drop(raw);
    assert!(!sidecar(db, "-wal").exists());
}

/// A rollback journal (SQLite's format: header padded to one 512-byte sector, then page
/// records `pgno, page, checksum`) holding `pages` (1-based number, bytes), optionally naming
/// a super-journal at its end.
fn journal_bytes(
    page_size: usize,
    db_pages: u32,
    pages: &[(u32, &[u8])],
    super_name: &[u8],
) -> Vec<u8> {
    const MAGIC: [u8; 8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7];
    let nonce: u32 = 0x1234_5678;
    let sector = 512usize;
    let mut j = Vec::new();
    j.extend_from_slice(&MAGIC);
    j.extend_from_slice(&(pages.len() as u32).to_be_bytes());
    j.extend_from_slice(&nonce.to_be_bytes());
    j.extend_from_slice(&db_pages.to_be_bytes());
    j.extend_from_slice(&(sector as u32).to_be_bytes());
    j.extend_from_slice(&(page_size as u32).to_be_bytes());
    j.resize(sector, 0);
    for (pgno, data) in pages {
        assert_eq!(data.len(), page_size);
        j.extend_from_slice(&pgno.to_be_bytes());
        j.extend_from_slice(data);
        let mut sum = nonce;
        let mut i = page_size as isize - 200;
        while i > 0 {
            sum = sum.wrapping_add(u32::from(data[i as usize]));
            i -= 200;
        }
        j.extend_from_slice(&sum.to_be_bytes());
    }
    if !super_name.is_empty() {
        // PENDING_BYTE page number, the name, its length, its checksum, the magic.
        j.extend_from_slice(&((1u32 << 30) / page_size as u32 + 1).to_be_bytes());
        j.extend_from_slice(super_name);
        j.extend_from_slice(&(super_name.len() as u32).to_be_bytes());
        let sum = super_name
            .iter()
            .fold(0u32, |acc, &b| acc.wrapping_add(b as i8 as i32 as u32));
        j.extend_from_slice(&sum.to_be_bytes());
        j.extend_from_slice(&MAGIC);
    }
    j
}

/// The attack of issue 14 item 2: a copy of the database whose waiting approval asks for
/// 9000 instead of 8000 with a hash that matches, turned into a hot journal of the pages that
/// differ. Returns (database, approval id, run id, the journal's bytes).
struct Attack {
    _dir: tempfile::TempDir,
    db: PathBuf,
    approval: String,
    run: String,
    journal: Vec<u8>,
    before: Vec<u8>,
}

fn attack() -> Attack {
    let fx = clean_db();
    let run = run_of(&fx.m, "waiting");
    let raw = Raw::open(&fx.path);
    let approval = approval_of(&raw, &run);
    drop(raw);
    settle(&fx.path);
    let dir = support::tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let db = dir.path().join("run.db");
    std::fs::copy(&fx.path, &db).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::read(&db).unwrap();

    let evil = dir.path().join("evil.db");
    std::fs::copy(&fx.path, &evil).unwrap();
    let raw = Raw::open(&evil);
    let (kind, cap, pres, req): (String, String, String, String) = raw
        .conn
        .query_row(
            "SELECT kind, capability_json, presentation_json, request_json FROM approvals WHERE id = ?",
            [&approval],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    let forged = req.replacen("\"amount_cents\":8000", "\"amount_cents\":9000", 1);
    assert_ne!(forged, req, "the waiting approval asks for 8000");
    let hash = countersign::runtime::json::approval_hash(
        &kind,
        cap.as_bytes(),
        pres.as_bytes(),
        forged.as_bytes(),
    )
    .unwrap();
    raw.conn
        .execute(
            "UPDATE approvals SET request_json = ?, hash = ? WHERE id = ?",
            [&forged, &hash, &approval],
        )
        .unwrap();
    drop(raw);
    settle(&evil);
    let evil_bytes = std::fs::read(&evil).unwrap();
    std::fs::remove_file(&evil).unwrap();
    assert_eq!(evil_bytes.len(), before.len());

    let ps = page_size(&db);
    let pages: Vec<(u32, &[u8])> = evil_bytes
        .chunks(ps)
        .zip(before.chunks(ps))
        .enumerate()
        .filter(|(_, (e, b))| e != b)
        .map(|(i, (e, _))| (i as u32 + 1, e))
        .collect();
    assert!(!pages.is_empty());
    let journal = journal_bytes(ps, (evil_bytes.len() / ps) as u32, &pages, b"");
    Attack {
        _dir: dir,
        db,
        approval,
        run,
        journal,
        before,
    }
}

fn drop_journal(db: &Path, bytes: &[u8], uid: u32, mode: u32) -> PathBuf {
    let j = sidecar(db, "-journal");
    std::fs::write(&j, bytes).unwrap();
    std::fs::set_permissions(&j, std::fs::Permissions::from_mode(mode)).unwrap();
    std::os::unix::fs::chown(&j, Some(uid), Some(uid)).unwrap();
    j
}

#[test]
fn the_crafted_hot_journal_does_rewrite_an_approval_when_sqlite_replays_it() {
    // The control: the attack is real. The same journal owned by the database's owner is a
    // journal SQLite trusts and replays: the approval then asks for 9000, with a valid hash.
    if !root() {
        eprintln!("not root; skipped");
        return;
    }
    let a = attack();
    drop_journal(&a.db, &a.journal, 0, 0o600);
    let store = Store::open_existing(&a.db, false).expect("its owner's journal is replayed");
    let ap = store.get_approval(&a.run, &a.approval).unwrap();
    assert!(
        ap.request_json.contains("\"amount_cents\":9000"),
        "{}",
        ap.request_json
    );
    assert!(!sidecar(&a.db, "-journal").exists(), "replayed and deleted");
}

#[test]
fn a_hot_journal_owned_by_another_user_is_refused_and_the_database_is_untouched() {
    if !root() {
        eprintln!("not root: cannot give the journal to another user; skipped");
        return;
    }
    let a = attack();
    let j = drop_journal(&a.db, &a.journal, OTHER, 0o644);
    for read_only in [false, true] {
        let err = Store::open_existing(&a.db, read_only).unwrap_err();
        assert!(matches!(err, StoreError::ForeignJournal { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "agentrt: {j} is -rw-r--r--, owned by another user than the database; SQLite would replay it into {db} and rewrite the database, so nothing was opened: if you did not leave it there yourself, move it away (mv {j} {j}.suspect) and open the database again",
                j = j.display(),
                db = a.db.display()
            )
        );
    }
    // The creating opener checks it too.
    let err = Store::open(&a.db).unwrap_err();
    assert!(matches!(err, StoreError::ForeignJournal { .. }), "{err}");
    assert_eq!(
        std::fs::read(&a.db).unwrap(),
        a.before,
        "not a byte changed"
    );
    assert!(j.exists(), "the journal is left for the person to look at");
    assert!(request_of(&a.db, &a.approval).contains("\"amount_cents\":8000"));
    // The command says the same in one line and exits 1.
    let out = support::bin::cs(&a.db, &["show", &a.run]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("SQLite would replay it"), "{stderr}");
    // Moved away as the message says, the database opens as it was.
    std::fs::rename(&j, sidecar(&a.db, "-journal.suspect")).unwrap();
    let store = Store::open_existing(&a.db, true).unwrap();
    let ap = store.get_approval(&a.run, &a.approval).unwrap();
    assert!(ap.request_json.contains("\"amount_cents\":8000"));
}

#[test]
fn a_journal_others_can_write_or_that_is_not_a_file_is_refused() {
    if !root() {
        eprintln!("not root; skipped");
        return;
    }
    let a = attack();
    let j = drop_journal(&a.db, &a.journal, 0, 0o600);
    std::fs::set_permissions(&j, std::fs::Permissions::from_mode(0o666)).unwrap();
    let err = Store::open_existing(&a.db, false).unwrap_err();
    assert!(
        err.to_string()
            .contains("is -rw-rw-rw-, writable by group or others; SQLite would replay it"),
        "{err}"
    );
    std::fs::remove_file(&j).unwrap();
    // A symbolic link to a journal (SQLite would follow it).
    let elsewhere = a.db.with_file_name("elsewhere");
    std::fs::write(&elsewhere, &a.journal).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &j).unwrap();
    let err = Store::open_existing(&a.db, false).unwrap_err();
    assert!(
        err.to_string().contains("which is not a regular file"),
        "{err}"
    );
    std::fs::remove_file(&j).unwrap();
    std::fs::create_dir(&j).unwrap();
    let err = Store::open_existing(&a.db, true).unwrap_err();
    assert!(
        err.to_string().contains("which is not a regular file"),
        "{err}"
    );
    assert_eq!(std::fs::read(&a.db).unwrap(), a.before);
}

#[test]
fn a_super_journal_a_journal_names_is_checked_like_the_database() {
    if !root() {
        eprintln!("not root; skipped");
        return;
    }
    let a = attack();
    // The owner's own journal names a super-journal another user wrote (SQLite reads it, and
    // deletes it after the replay).
    let sup = a.db.with_file_name("planted-super-journal");
    std::fs::write(&sup, b"").unwrap();
    std::fs::set_permissions(&sup, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::chown(&sup, Some(OTHER), Some(OTHER)).unwrap();
    let ps = page_size(&a.db);
    let mut bytes = a.journal.clone();
    // Same pages, now naming the super-journal.
    let named = journal_bytes(
        ps,
        (a.before.len() / ps) as u32,
        &[],
        sup.as_os_str().as_encoded_bytes(),
    );
    bytes.extend_from_slice(&named[512..]);
    drop_journal(&a.db, &bytes, 0, 0o600);
    let err = Store::open_existing(&a.db, false).unwrap_err();
    assert!(matches!(err, StoreError::ForeignJournal { .. }), "{err}");
    assert!(
        err.to_string().starts_with(&format!(
            "agentrt: {} is -rw-r--r--, owned by another user than the database; SQLite would replay it",
            sup.display()
        )),
        "{err}"
    );
    assert_eq!(std::fs::read(&a.db).unwrap(), a.before);
    assert!(sup.exists());
}

#[test]
fn a_sidecar_given_to_another_user_after_a_check_is_still_seen_by_the_next_open() {
    // The check runs on every open, not once per path: a journal dropped between two opens is
    // refused by the second.
    if !root() {
        eprintln!("not root; skipped");
        return;
    }
    let a = attack();
    drop(Store::open_existing(&a.db, true).unwrap());
    drop_journal(&a.db, &a.journal, OTHER, 0o600);
    let err = Store::open_existing(&a.db, false).unwrap_err();
    assert!(matches!(err, StoreError::ForeignJournal { .. }), "{err}");
    assert_eq!(std::fs::read(&a.db).unwrap(), a.before);
    assert_eq!(std::fs::metadata(&a.db).unwrap().uid(), 0);
}

thread_local! {
    /// What the "other user" drops in the instant between the path checks and SQLite's open:
    /// (suffix, bytes, owner).
    static DROP: std::cell::RefCell<Option<(&'static str, Vec<u8>, u32)>> =
        const { std::cell::RefCell::new(None) };
}

/// The store's test hook: plants `DROP` beside the database after the path checks passed.
fn plant(db: &Path) {
    if let Some((suffix, bytes, uid)) = DROP.with(|d| d.borrow().clone()) {
        let p = sidecar(db, suffix);
        std::fs::write(&p, bytes).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
    }
}

/// Opens `db` with `DROP` planted after the checks, by the writer (0), the reader (1) or
/// the creating opener (2).
fn open_with_plant(
    db: &Path,
    how: usize,
    what: (&'static str, Vec<u8>, u32),
) -> Result<Store, StoreError> {
    DROP.with(|d| *d.borrow_mut() = Some(what));
    countersign::runtime::store::hooks::before_sqlite_opens(Some(plant));
    let out = match how {
        0 => Store::open_existing(db, false),
        1 => Store::open_existing(db, true),
        _ => Store::open(db),
    };
    countersign::runtime::store::hooks::before_sqlite_opens(None);
    DROP.with(|d| *d.borrow_mut() = None);
    out
}

#[test]
fn a_journal_dropped_between_the_checks_and_sqlites_open_is_replayed_when_it_is_the_owners() {
    // The control for the next test: the hook's instant is real. A journal that appears after
    // the path checks passed is read by SQLite's first read; the owner's own is replayed.
    if !root() {
        eprintln!("not root; skipped");
        return;
    }
    let a = attack();
    let store = open_with_plant(&a.db, 0, ("-journal", a.journal.clone(), 0))
        .expect("the owner's journal is replayed");
    let ap = store.get_approval(&a.run, &a.approval).unwrap();
    assert!(ap.request_json.contains("\"amount_cents\":9000"));
}

#[test]
fn a_journal_another_user_drops_after_the_checks_is_refused_when_sqlite_opens_it() {
    // Issue 14 item 2's window: the check is made again on the file SQLite opens, by the VFS
    // every connection uses, so a journal dropped after the path checks is never replayed.
    if !root() {
        eprintln!("not root; skipped");
        return;
    }
    let a = attack();
    let j = sidecar(&a.db, "-journal");
    for i in 0..3 {
        let opened = open_with_plant(&a.db, i, ("-journal", a.journal.clone(), OTHER));
        let err = opened.expect_err("refused");
        assert!(
            matches!(err, StoreError::ForeignJournal { .. }),
            "open {i}: {err}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "agentrt: {j} is -rw-r--r--, owned by another user than the database; SQLite would replay it into {db} and rewrite the database, so nothing was opened: if you did not leave it there yourself, move it away (mv {j} {j}.suspect) and open the database again",
                j = j.display(),
                db = a.db.display()
            ),
            "open {i}"
        );
        assert_eq!(std::fs::read(&a.db).unwrap(), a.before, "open {i}");
        std::fs::remove_file(&j).unwrap();
    }
    assert!(request_of(&a.db, &a.approval).contains("\"amount_cents\":8000"));
    let store = Store::open_existing(&a.db, false).unwrap();
    let ap = store.get_approval(&a.run, &a.approval).unwrap();
    assert!(ap.request_json.contains("\"amount_cents\":8000"));
}

#[test]
fn a_wal_another_user_drops_after_the_checks_is_refused_when_sqlite_opens_it() {
    if !root() {
        eprintln!("not root; skipped");
        return;
    }
    let a = attack();
    let w = sidecar(&a.db, "-wal");
    for i in 0..3 {
        let opened = open_with_plant(&a.db, i, ("-wal", Vec::new(), OTHER));
        let err = opened.expect_err("refused");
        assert!(
            matches!(err, StoreError::ForeignJournal { .. }),
            "open {i}: {err}"
        );
        assert!(
            err.to_string().starts_with(&format!(
                "agentrt: {} is -rw-r--r--, owned by another user than the database;",
                w.display()
            )),
            "open {i}: {err}"
        );
        std::fs::remove_file(&w).unwrap();
        let _ = std::fs::remove_file(sidecar(&a.db, "-shm"));
    }
    assert_eq!(std::fs::read(&a.db).unwrap(), a.before);
}

#[test]
fn a_shm_another_user_drops_after_the_checks_is_refused_when_sqlite_opens_it() {
    // The `-shm` is opened by SQLite's WAL code through the `unix` VFS's own `open` system
    // call, not `xOpen`: the check there looks at the descriptor SQLite will map, so a `-shm`
    // another user drops after the path checks is refused, by the writer, the reader and the
    // creating opener, with the sentence the path check gives for one.
    if !root() {
        eprintln!("not root; skipped");
        return;
    }
    let a = attack();
    let shm = sidecar(&a.db, "-shm");
    for i in 0..3 {
        let opened = open_with_plant(&a.db, i, ("-shm", Vec::new(), OTHER));
        let err = opened.expect_err("refused");
        assert!(
            matches!(err, StoreError::InsecureMode { .. }),
            "open {i}: {err}"
        );
        assert!(
            err.to_string().starts_with(&format!(
                "agentrt: {} is -rw-r--r--, owned by another user than the database;",
                shm.display()
            )),
            "open {i}: {err}"
        );
        std::fs::remove_file(&shm).unwrap();
        let _ = std::fs::remove_file(sidecar(&a.db, "-wal"));
    }
    // The owner's own `-shm`, dropped in the same instant, is used as usual.
    let store = open_with_plant(&a.db, 0, ("-shm", Vec::new(), 0)).expect("the owner's -shm");
    let ap = store.get_approval(&a.run, &a.approval).unwrap();
    assert!(ap.request_json.contains("\"amount_cents\":8000"));
}

#[test]
fn a_database_in_a_directory_others_can_write_without_the_sticky_bit_is_refused() {
    // Without the sticky bit, another user can rename the owner's journal away and put theirs
    // back between any check and SQLite's read: such a directory is refused before anything
    // is opened, with the command that fixes it.
    let fx = clean_db();
    let dir = support::tempdir();
    let db = dir.path().join("run.db");
    std::fs::copy(&fx.path, &db).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    for opened in [
        Store::open_existing(&db, false),
        Store::open_existing(&db, true),
        Store::open(&db),
    ] {
        let err = opened.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "agentrt: {d} is drwxrwxrwx: other users can write in it and its sticky bit is not set, so they could swap the database's journal or -wal before SQLite reads it, and nothing was opened; keep run databases in a directory only their owner can write (or set its sticky bit: chmod +t {d})",
                d = dir.path().display()
            )
        );
    }
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    Store::open_existing(&db, true).expect("sticky: opens");
}

/// Runs `countersign --db <db> <args>` as `uid` (setpriv): (exit code, stdout, stderr).
fn as_user(uid: u32, db: &Path, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
        ])
        .arg(env!("CARGO_BIN_EXE_countersign"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("setpriv runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every file in `dir` with its owner, sorted.
fn listing(dir: &Path) -> Vec<(String, u32)> {
    let mut v: Vec<(String, u32)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().uid(),
            )
        })
        .collect();
    v.sort();
    v
}

/// A fixture database alone in a 1777 directory (a shared /tmp), owned by `uid`, `mode`.
fn shared_db(uid: u32, mode: u32) -> (tempfile::TempDir, PathBuf, String) {
    let fx = clean_db();
    let run = run_of(&fx.m, "waiting");
    settle(&fx.path);
    let dir = support::tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let db = dir.path().join("run.db");
    std::fs::copy(&fx.path, &db).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(mode)).unwrap();
    std::os::unix::fs::chown(&db, Some(uid), Some(uid)).unwrap();
    (dir, db, run)
}

fn read_commands(run: &str) -> Vec<Vec<String>> {
    [
        vec!["runs"],
        vec!["show", run],
        vec!["events", run, "--limit", "0"],
        vec!["verify"],
        vec!["--json", "runs"],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(String::from).collect())
    .collect()
}

#[test]
fn read_only_commands_as_another_user_create_nothing_and_the_owner_still_writes() {
    if !root() {
        eprintln!("not root: cannot run a second user; skipped");
        return;
    }
    // The owner's database, readable by others, in a directory everyone can write.
    let (dir, db, run) = shared_db(0, 0o644);
    let before = std::fs::read(&db).unwrap();
    for args in read_commands(&run) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = as_user(OTHER, &db, &args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        assert_eq!(
            listing(dir.path()),
            vec![("run.db".to_string(), 0)],
            "{args:?} left a file behind"
        );
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
    // The owner's writer is not refused.
    let store = Store::open_existing(&db, false).expect("the owner's writer opens");
    drop(store);
}

#[test]
fn read_only_commands_as_the_owner_leave_no_sidecars() {
    if !root() {
        eprintln!("not root: cannot run a second user; skipped");
        return;
    }
    let (dir, db, run) = shared_db(OTHER, 0o600);
    let before = std::fs::read(&db).unwrap();
    for args in read_commands(&run) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = as_user(OTHER, &db, &args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        assert_eq!(
            listing(dir.path()),
            vec![("run.db".to_string(), OTHER)],
            "{args:?} left a sidecar behind"
        );
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
    // And root reading someone else's database leaves nothing either.
    let store = Store::open_existing(&db, true).unwrap();
    assert!(!store.list_runs_page(10, 0).unwrap().items.is_empty());
    drop(store);
    assert_eq!(listing(dir.path()), vec![("run.db".to_string(), OTHER)]);
}

#[test]
fn a_reader_of_another_user_sees_a_live_writers_commits_without_writing_its_sidecars() {
    if !root() {
        eprintln!("not root: cannot run a second user; skipped");
        return;
    }
    let (dir, db, _) = shared_db(0, 0o600);
    let writer = Store::open_existing(&db, false).unwrap();
    support::runs::create(
        &writer,
        "live-run-7",
        "g",
        countersign::runtime::types::Timestamp::now(),
    );
    // Readable by others, as a consumer with a looser umask would leave it.
    for suffix in ["", "-wal", "-shm"] {
        std::fs::set_permissions(sidecar(&db, suffix), std::fs::Permissions::from_mode(0o644))
            .unwrap();
    }
    let files = listing(dir.path());
    let shm = std::fs::read(sidecar(&db, "-shm")).unwrap();
    let (code, out, err) = as_user(OTHER, &db, &["runs"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("live-run-7"),
        "the reader sees the live commit: {out}"
    );
    assert_eq!(listing(dir.path()), files);
    assert_eq!(
        std::fs::read(sidecar(&db, "-shm")).unwrap(),
        shm,
        "-shm not written"
    );
    drop(writer);
}

/// A database whose last writes are only in a `-wal` with no `-shm` beside it (a copy taken
/// while a writer was open).
fn leftover_wal(uid: u32, dir_mode: u32) -> (tempfile::TempDir, PathBuf) {
    let fx = clean_db();
    settle(&fx.path);
    let conn = rusqlite::Connection::open(&fx.path).unwrap();
    conn.execute_batch(
        "PRAGMA wal_autocheckpoint=0; UPDATE runs SET goal = 'only in the wal' WHERE rowid = 1;",
    )
    .unwrap();
    let dir = support::tempdir();
    let db = dir.path().join("run.db");
    std::fs::copy(&fx.path, &db).unwrap();
    std::fs::copy(sidecar(&fx.path, "-wal"), sidecar(&db, "-wal")).unwrap();
    drop(conn);
    for suffix in ["", "-wal"] {
        let p = sidecar(&db, suffix);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
    }
    assert!(std::fs::metadata(sidecar(&db, "-wal")).unwrap().len() > 0);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(dir_mode)).unwrap();
    (dir, db)
}

#[test]
fn a_leftover_wal_in_a_read_only_directory_is_named_not_called_a_foreign_database() {
    if !root() {
        eprintln!("not root: cannot run a second user; skipped");
        return;
    }
    // The owner reads, but cannot create the -shm (the directory is root's, 0755).
    let (dir, db) = leftover_wal(OTHER, 0o755);
    let (code, out, err) = as_user(OTHER, &db, &["runs"]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: agentrt: open store: {p}-wal holds writes that are not yet in {p} and there is no {p}-shm to read it with, and the directory is read-only to this reader; open it once with a writing command (approve, reject, cancel or the consumer) as the database's owner to fold them in, then read again",
            p = db.display()
        )
    );
    assert!(!err.contains("not an agent-runtime database"));
    assert_eq!(listing(dir.path()).len(), 2, "nothing created");
    // A reader that is not the owner would leave its own -shm: refused the same way.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(sidecar(&db, "-wal"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let (code, _, err) = as_user(1234, &db, &["runs"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("a reader that is not its owner would create it"),
        "{err}"
    );
    assert_eq!(listing(dir.path()).len(), 2, "nothing created");
    // Its owner reading in a directory it can write folds nothing and sees the writes.
    let store = Store::open_existing(&db, true).unwrap();
    let goals: Vec<String> = store
        .list_runs_page(100, 0)
        .unwrap()
        .items
        .into_iter()
        .map(|r| r.goal)
        .collect();
    assert!(goals.iter().any(|g| g == "only in the wal"), "{goals:?}");
}

#[test]
fn a_hot_journal_a_reader_cannot_roll_back_is_named() {
    if !root() {
        eprintln!("not root: cannot run a second user; skipped");
        return;
    }
    // The owner's own journal (it passes the checks), read by another user.
    let a = attack();
    std::fs::set_permissions(&a.db, std::fs::Permissions::from_mode(0o644)).unwrap();
    drop_journal(&a.db, &a.journal, 0, 0o644);
    let (code, out, err) = as_user(OTHER, &a.db, &["runs"]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: agentrt: open store: {p} has a hot journal ({p}-journal) left by a write that did not finish, and a read-only open cannot roll it back; open it once with a writing command (approve, reject, cancel or the consumer) as the database's owner, then read again",
            p = a.db.display()
        )
    );
    assert_eq!(std::fs::read(&a.db).unwrap(), a.before);
}

/// `countersign --db <db> <args>` as this user, stdin closed.
fn cs(db: &Path, args: &[&str]) -> (i32, String, String) {
    let out = support::bin::cs(db, args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_table_rebuilt_with_a_generated_status_column_is_refused_at_open() {
    let fx = clean_db();
    let run = run_of(&fx.m, "waiting");
    let raw = Raw::open(&fx.path);
    let approval = approval_of(&raw, &run);
    // The approvals table rebuilt so that its status is computed, not stored.
    raw.exec(
        "CREATE TABLE approvals_new (id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id), \
         step_id TEXT NOT NULL, kind TEXT NOT NULL, capability_json TEXT NOT NULL, \
         presentation_json TEXT NOT NULL, request_json TEXT NOT NULL, hash TEXT NOT NULL, \
         status TEXT GENERATED ALWAYS AS ('pending') VIRTUAL, created_at TEXT NOT NULL, \
         decided_at TEXT NOT NULL DEFAULT '', decided_by TEXT NOT NULL DEFAULT '', \
         note TEXT NOT NULL DEFAULT '', expires_at TEXT NOT NULL DEFAULT ''); \
         INSERT INTO approvals_new (id, run_id, step_id, kind, capability_json, presentation_json, \
         request_json, hash, created_at, decided_at, decided_by, note, expires_at) \
         SELECT id, run_id, step_id, kind, capability_json, presentation_json, request_json, hash, \
         created_at, decided_at, decided_by, note, expires_at FROM approvals; \
         DROP TABLE approvals; ALTER TABLE approvals_new RENAME TO approvals;",
    );
    drop(raw);
    let expected = format!(
        "agentrt: open store: {}: approvals.status is a generated column, computed by SQL stored in the file rather than written by the runtime, so it is refused (the runtime cannot write it and would show values nobody stored): rebuild the table without it or use a copy without it",
        fx.path.display()
    );
    for read_only in [true, false] {
        let err = Store::open_existing(&fx.path, read_only).unwrap_err();
        assert!(matches!(err, StoreError::GeneratedColumn { .. }), "{err}");
        assert_eq!(err.to_string(), expected);
    }
    let err = Store::open(&fx.path).unwrap_err();
    assert_eq!(err.to_string(), expected);
    let before = std::fs::read(&fx.path).unwrap();
    let (code, out, err) = cs(&fx.path, &["approve", &run, "--approval", &approval]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(err.trim_end(), format!("error: {expected}"));
    assert_eq!(std::fs::read(&fx.path).unwrap(), before);
}

#[test]
fn a_missing_column_is_one_line_naming_the_table_and_the_column() {
    let fx = clean_db();
    let run = run_of(&fx.m, "waiting");
    let raw = Raw::open(&fx.path);
    raw.exec("ALTER TABLE approvals DROP COLUMN note;");
    drop(raw);
    let expected = format!(
        "agentrt: open store: {} has no column approvals.note, which every version-6 run database has; it was changed by hand or restored from parts: restore it from a backup",
        fx.path.display()
    );
    let err = Store::open_existing(&fx.path, true).unwrap_err();
    assert_eq!(err.to_string(), expected);
    for args in [vec!["show", run.as_str()], vec!["runs"], vec!["verify"]] {
        let (code, out, err) = cs(&fx.path, &args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert_eq!(err.trim_end(), format!("error: {expected}"), "{args:?}");
    }
    // A missing table too.
    let raw = Raw::open(&fx.path);
    raw.exec(
        "ALTER TABLE approvals ADD COLUMN note TEXT NOT NULL DEFAULT ''; DROP TABLE model_calls;",
    );
    drop(raw);
    let err = Store::open_existing(&fx.path, true).unwrap_err();
    assert!(
        err.to_string().contains(" has no table model_calls, "),
        "{err}"
    );
}

#[test]
fn a_statement_that_fails_on_a_damaged_schema_is_one_line_without_its_sql() {
    // Whatever still fails at a read (a column renamed after the open) says SQLite's message,
    // not the statement's text.
    let fx = clean_db();
    let store = Store::open_existing(&fx.path, true).unwrap();
    let raw = Raw::open(&fx.path);
    raw.exec("ALTER TABLE runs RENAME COLUMN goal TO goal_was;");
    drop(raw);
    let err = store.list_runs_page(10, 0).unwrap_err().to_string();
    assert!(err.contains("no such column: goal"), "{err}");
    assert!(!err.contains("SELECT") && err.len() < 200, "{err}");
}

#[test]
fn the_demos_orders_database_is_owner_only() {
    let dir = support::tempdir();
    let db = dir.path().join("demo.db");
    // SAFETY: umask only changes this process's file-creation mask; the child inherits it.
    let old = unsafe { libc::umask(0o022) };
    let (code, out, err) = cs(&db, &["demo", "--no-tui"]);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    assert_eq!(code, 0, "{out}{err}");
    for name in ["demo.db", "demo.orders.db"] {
        let mode = std::fs::metadata(dir.path().join(name)).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name} is {mode:o}");
    }
}

#[test]
fn a_reader_then_a_writer_in_one_process_both_work_while_another_process_writes() {
    // The console opens a reader and then, to decide, a writer, while the agent's process
    // holds the database open: the reader must not map the -shm in a way the writer cannot
    // use.
    let fx = clean_db();
    let mut other = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\nc.execute(\"UPDATE runs SET goal=goal\")\nc.commit()\nprint('ready',flush=True)\nsys.stdin.read()",
        ])
        .arg(&fx.path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(other.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    assert!(sidecar(&fx.path, "-shm").exists() && sidecar(&fx.path, "-wal").exists());
    let reader = Store::open_existing(&fx.path, true).unwrap();
    assert!(!reader.list_runs_page(10, 0).unwrap().items.is_empty());
    let writer = Store::open_existing(&fx.path, false).unwrap();
    support::runs::create(
        &writer,
        "written-beside-a-reader",
        "g",
        countersign::runtime::types::Timestamp::now(),
    );
    assert!(
        reader
            .list_runs_page(100, 0)
            .unwrap()
            .items
            .iter()
            .any(|r| r.id == "written-beside-a-reader")
    );
    drop(other.stdin.take());
    other.wait().unwrap();
}

#[test]
fn the_consoles_seq_column_never_cuts_a_number() {
    // A run whose events carry 13-digit sequence numbers (a long-lived database, or a hand
    // edit): the events tab shows each number whole.
    let dir = support::tempdir();
    let (db, m) = console_support::fixture(dir.path(), "seq", "completed", &[]);
    let run = console_support::run_of(&m, "completed");
    let raw = Raw::open(&db);
    raw.exec(&format!(
        "UPDATE events SET seq = seq + 4711000000000 WHERE run_id = '{run}';"
    ));
    drop(raw);
    let mut h = console_support::Harness::open(&db, 120, 40);
    h.command(&format!("run {run}"));
    h.key(crossterm::event::KeyCode::Tab);
    let screen = h.screen();
    assert!(screen.contains("4711000000001"), "{screen}");
}
