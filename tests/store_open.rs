//! Opening a run database: the file-mode rules, refusals with their messages, hardened
//! connections, the pinned migrations, concurrent first opens (threads and processes), paths
//! with URI characters, and owner-only files under any umask.

mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use countersign::runtime::json::sha256_hex;
use countersign::runtime::store::{MIGRATIONS, Store, StoreError};
use support::{assert_verifies, tempdir};

const CHILD: &str = "COUNTERSIGN_STORE_OPEN_CHILD";

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().mode() & 0o777
}

fn sidecar(db: &Path, suffix: &str) -> std::path::PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(suffix);
    s.into()
}

/// Re-runs this test binary as a child process running only `child_entry`.
fn child(action: &str, db: &Path) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD, action)
        .env("COUNTERSIGN_STORE_DB", db)
        .output()
        .unwrap()
}

/// The body of a child process (does nothing in a normal test run).
#[test]
fn child_entry() {
    let Ok(action) = std::env::var(CHILD) else {
        return;
    };
    let db = std::path::PathBuf::from(std::env::var("COUNTERSIGN_STORE_DB").unwrap());
    match action.as_str() {
        "open" => {
            Store::open(&db).unwrap();
        }
        "umask0" => {
            // SAFETY: umask only changes this process's file-creation mask.
            unsafe { libc::umask(0) };
            let store = Store::open(&db).unwrap();
            store
                .write(|tx| {
                    tx.conn()
                        .execute_batch("CREATE TEMP TABLE t(x)")
                        .map_err(|e| StoreError::sqlite("t", e))
                })
                .unwrap();
            for suffix in ["", "-wal", "-shm"] {
                let p = sidecar(&db, suffix);
                println!("MODE{suffix} {:o}", mode(&p));
            }
        }
        "readonly-nobody" => {
            // SAFETY: dropping privileges in this child process only.
            unsafe {
                assert_eq!(libc::setgid(65534), 0);
                assert_eq!(libc::setuid(65534), 0);
            }
            let store = Store::open_existing(&db, true).unwrap();
            println!("\nRUNS {}", store.list_runs_page(10, 0).unwrap().total);
        }
        other => panic!("unknown child action {other}"),
    }
}

#[test]
fn store_released_migrations_are_unchanged() {
    let joined = MIGRATIONS[..4].join("\0");
    assert_eq!(
        sha256_hex(joined.as_bytes()),
        "6ea2e8d7079464c92debd7aea61e380770248ad161b796e9d86fa5b449b7869b"
    );
}

#[test]
fn store_creates_agentrts_schema_and_reopens() {
    let dir = tempdir();
    let db = dir.path().join("new.db");
    let store = Store::open(&db).unwrap();
    assert_eq!(mode(&db), 0o600);
    drop(store);
    assert_verifies(&db);
    // Reopening migrates nothing and still verifies.
    Store::open(&db).unwrap();
    Store::open_existing(&db, false).unwrap();
    assert_verifies(&db);
}

#[test]
fn store_refuses_triggers_and_views_and_hardens_its_connections() {
    let dir = tempdir();
    let db = dir.path().join("h.db");
    let writer = Store::open(&db).unwrap();
    let s = writer.connection_settings().unwrap();
    assert_eq!(
        (
            s.busy_timeout_ms,
            s.foreign_keys,
            s.trusted_schema,
            s.defensive,
            s.synchronous,
            s.journal_mode.as_str()
        ),
        (5000, true, false, true, 2, "wal")
    );
    let reader = Store::open_existing(&db, true).unwrap();
    let r = reader.connection_settings().unwrap();
    assert_eq!(
        (
            r.busy_timeout_ms,
            r.foreign_keys,
            r.trusted_schema,
            r.defensive
        ),
        (5000, true, false, true)
    );
    // DEFENSIVE: the schema cannot be written through writable_schema.
    let res = writer.write(|tx| {
        tx.conn()
            .execute_batch("PRAGMA writable_schema=ON")
            .map_err(|e| StoreError::sqlite("pragma", e))?;
        tx.conn()
            .execute("DELETE FROM sqlite_master WHERE name='approvals_run'", [])
            .map_err(|e| StoreError::sqlite("delete", e))
    });
    assert!(res.is_err(), "defensive mode refuses writing sqlite_master");
    // Foreign keys: an event of an unknown run is refused.
    let res = writer.write(|tx| {
        tx.append_event(
            "no-such-run",
            "",
            &countersign::runtime::types::Timestamp::now(),
            "run.started",
            b"{}",
        )
    });
    assert!(res.is_err(), "foreign keys are enforced");
    drop((writer, reader));
    assert_verifies(&db);
}

#[test]
fn open_existing_refuses_a_symbolic_link() {
    let dir = tempdir();
    let db = dir.path().join("real.db");
    Store::open(&db).unwrap();
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let err = Store::open_existing(&link, true).unwrap_err();
    assert!(matches!(err, StoreError::Symlink { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "agentrt: database path is a symbolic link: {}; name the database file itself",
            link.display()
        )
    );
    // OpenStore follows links, and checks the sidecars SQLite keeps beside the target.
    Store::open(&link).unwrap();
    let real_wal = sidecar(&db, "-wal");
    std::fs::write(&real_wal, b"").unwrap();
    std::fs::set_permissions(&real_wal, std::fs::Permissions::from_mode(0o666)).unwrap();
    let err = Store::open(&link).unwrap_err();
    assert!(
        err.to_string().starts_with(&format!(
            "agentrt: {} is -rw-rw-rw-, writable by group or others; ",
            std::fs::canonicalize(&real_wal).unwrap().display()
        )),
        "{err}"
    );
}

#[test]
fn open_existing_refuses_what_is_not_a_regular_file() {
    let dir = tempdir();
    let err = Store::open_existing(dir.path(), true).unwrap_err();
    assert!(matches!(err, StoreError::NotRegular { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "agentrt: open store: {} is not a regular file; name the database file itself",
            dir.path().display()
        )
    );
}

#[test]
fn open_missing_database_is_error_not_created() {
    let dir = tempdir();
    let db = dir.path().join("missing.db");
    for read_only in [true, false] {
        let err = Store::open_existing(&db, read_only).unwrap_err();
        assert!(matches!(err, StoreError::Missing { .. }));
        assert_eq!(
            err.to_string(),
            format!(
                "agentrt: open store: lstat {}: no such file or directory; check the path (reading never creates a database)",
                db.display()
            )
        );
        assert!(!db.exists() && !sidecar(&db, "-wal").exists());
    }
}

#[test]
fn store_refuses_sidecars_others_can_write_or_that_are_not_files() {
    let dir = tempdir();
    let db = dir.path().join("s.db");
    drop(Store::open(&db).unwrap());
    let wal = sidecar(&db, "-wal");
    std::fs::write(&wal, b"").unwrap();
    std::fs::set_permissions(&wal, std::fs::Permissions::from_mode(0o620)).unwrap();
    let err = Store::open_existing(&db, true).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "agentrt: {p} is -rw--w----, writable by group or others; the runtime keeps its database readable and writable by its owner only: chmod 600 {p} and chown it to the user that runs the runtime",
            p = wal.display()
        )
    );
    std::fs::remove_file(&wal).unwrap();
    let shm = sidecar(&db, "-shm");
    std::fs::create_dir(&shm).unwrap();
    for err in [
        Store::open_existing(&db, true).unwrap_err(),
        Store::open(&db).unwrap_err(),
    ] {
        assert!(matches!(err, StoreError::InsecureMode { .. }));
        assert!(
            err.to_string().contains(", which is not a regular file; "),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains(&format!("chmod 600 {}", shm.display()))
        );
    }
}

#[test]
fn store_refuses_a_sidecar_owned_by_another_user() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: cannot give a sidecar to another user; skipped");
        return;
    }
    let dir = tempdir();
    let db = dir.path().join("o.db");
    drop(Store::open(&db).unwrap());
    let wal = sidecar(&db, "-wal");
    std::fs::write(&wal, b"").unwrap();
    std::fs::set_permissions(&wal, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&wal, Some(65534), Some(65534)).unwrap();
    let err = Store::open_existing(&db, true).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "agentrt: {p} is -rw-------, owned by another user than the database; the runtime keeps its database readable and writable by its owner only: chmod 600 {p} and chown it to the user that runs the runtime",
            p = wal.display()
        )
    );
}

#[test]
fn store_tightens_a_database_others_can_read() {
    let dir = tempdir();
    let db = dir.path().join("t.db");
    drop(Store::open(&db).unwrap());
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    drop(Store::open_existing(&db, true).unwrap());
    assert_eq!(mode(&db), 0o644, "a read-only open changes nothing");
    drop(Store::open(&db).unwrap());
    assert_eq!(mode(&db), 0o600, "a writer tightens what it owns");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o640)).unwrap();
    drop(Store::open_existing(&db, false).unwrap());
    assert_eq!(mode(&db), 0o600);
    // A database its owner made read-only stays read-only for the owner: only group and
    // others lose their bits (found from outside: 0444 became 0600, and was written).
    for (given, kept) in [(0o444, 0o400), (0o440, 0o400), (0o604, 0o600)] {
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(given)).unwrap();
        let _ = Store::open_existing(&db, false);
        assert_eq!(mode(&db), kept, "{given:o}");
    }
}

#[test]
fn store_files_are_owner_only_under_any_umask() {
    let dir = tempdir();
    let db = dir.path().join("umask.db");
    let out = child("umask0", &db);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for suffix in ["", "-wal", "-shm"] {
        assert!(
            stdout.contains(&format!("MODE{suffix} 600\n")),
            "{suffix}: {stdout}"
        );
    }
}

#[test]
fn store_concurrent_first_open() {
    let dir = tempdir();
    let db = dir.path().join("race.db");
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || Store::open(&db).map(|_| ()))
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    assert_verifies(&db);

    let db2 = dir.path().join("race-processes.db");
    let kids: Vec<_> = (0..4)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "child_entry", "--test-threads=1"])
                .env(CHILD, "open")
                .env("COUNTERSIGN_STORE_DB", &db2)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut k in kids {
        assert!(k.wait().unwrap().success());
    }
    assert_verifies(&db2);
    assert_eq!(mode(&db2), 0o600);
}

#[test]
fn store_path_with_uri_characters() {
    let dir = tempdir();
    let sub = dir.path().join("a b?c#d%25e");
    std::fs::create_dir(&sub).unwrap();
    let db = sub.join("run s?mode=ro#x%20.db");
    let store = Store::open(&db).unwrap();
    drop(store);
    assert!(db.exists());
    // Nothing was created elsewhere (a URI parse would have cut the name at '?').
    let names: Vec<_> = std::fs::read_dir(&sub)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| n.to_string_lossy().starts_with("run s?mode=ro#x%20.db")),
        "{names:?}"
    );
    let ro = Store::open_existing(&db, true).unwrap();
    assert_eq!(ro.list_runs_page(10, 0).unwrap().total, 0);
    assert!(!ro.is_read_only() || ro.write(|_| Ok::<_, StoreError>(())).is_err());
}

#[test]
fn open_existing_read_only_never_writes_even_in_an_unwritable_directory() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "not root: cannot drop to another user to make the directory unwritable; skipped"
        );
        return;
    }
    let dir = tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = dir.path().join("ro.db");
    {
        let store = Store::open(&db).unwrap();
        support::runs::create(
            &store,
            "r",
            "g",
            countersign::runtime::types::Timestamp::now(),
        );
    }
    assert!(
        !sidecar(&db, "-shm").exists(),
        "a clean close removes the sidecars"
    );
    std::os::unix::fs::chown(&db, Some(65534), Some(65534)).unwrap();
    let before = std::fs::read(&db).unwrap();
    let out = child("readonly-nobody", &db);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("RUNS 1"), "{stdout}");
    assert!(!sidecar(&db, "-shm").exists() && !sidecar(&db, "-wal").exists());
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

/// `Store::open` names a file that is not SQLite with the same typed error as `open_existing`
/// (it was a `Sqlite` error about `synchronous`, found from outside), and leaves it as it was.
#[test]
fn open_refuses_a_file_that_is_not_sqlite_as_not_a_database() {
    let dir = tempdir();
    let db = dir.path().join("notes.txt");
    let text = "not a database at all, just some text that is long enough to be a header";
    std::fs::write(&db, text).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = Store::open(&db).unwrap_err();
    assert!(matches!(err, StoreError::NotADatabase { .. }), "{err:?}");
    assert_eq!(std::fs::read_to_string(&db).unwrap(), text);
    // A writing `open_existing` (bulk decisions) names it so too, not by a pragma's failure.
    let err = Store::open_existing(&db, false).unwrap_err();
    assert!(matches!(err, StoreError::NotADatabase { .. }), "{err:?}");
}

#[test]
fn open_existing_refuses_what_is_not_a_run_database() {
    let dir = tempdir();
    let db = dir.path().join("notes.txt");
    std::fs::write(
        &db,
        "not a database at all, just some text that is long enough to be a header",
    )
    .unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = Store::open_existing(&db, true).unwrap_err();
    assert!(matches!(err, StoreError::NotADatabase { .. }), "{err}");
    assert!(err.to_string().starts_with(&format!(
        "agentrt: open store: {} is not an agent-runtime database: ",
        db.display()
    )));
    // An SQLite file without schema_migrations.
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t(x)")
        .unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = Store::open_existing(&other, true).unwrap_err();
    assert!(
        err.to_string()
            .contains("is not an agent-runtime database: no such table: schema_migrations"),
        "{err}"
    );
}

/// A store whose path later names another file (one moved over it) or none (removed) refuses
/// its next write and its next change check, saying so, instead of going on in a file no one
/// opening the path can read (found from outside: a console's decision landed in the removed
/// file, and a worker never saw approvals made in the new one).
#[test]
fn a_database_moved_over_or_removed_under_a_store_is_refused() {
    let dir = tempdir();
    let db = dir.path().join("a.db");
    let other = dir.path().join("b.db");
    drop(Store::open(&other).unwrap());
    for how in ["moved over", "removed"] {
        let _ = std::fs::remove_file(&db);
        let store = Store::open(&db).unwrap();
        store.data_version().unwrap();
        store
            .write(|tx| tx.insert_tool_spec("h-before", "{}"))
            .unwrap();
        if how == "removed" {
            std::fs::remove_file(&db).unwrap();
        } else {
            std::fs::copy(&other, dir.path().join("c.db")).unwrap();
            std::fs::rename(dir.path().join("c.db"), &db).unwrap();
        }
        let e = store.data_version().unwrap_err().to_string();
        assert!(e.contains("since it was opened"), "{how}: {e}");
        let e = store
            .write(|tx| tx.insert_tool_spec("h-after", "{}"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(if how == "removed" {
                "was removed"
            } else {
                "is another file"
            }),
            "{how}: {e}"
        );
    }
}
