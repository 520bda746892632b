//! Usage errors exit 2 and touch nothing; open failures are one sentence and exit 1; help is
//! snapshot-tested.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::{fixture, tempdir};

fn cs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(args)
        .env_remove("COUNTERSIGN_DB")
        .env_remove("AGENTRT_DB")
        .env_remove("COUNTERSIGN_BY")
        .output()
        .expect("countersign runs")
}

/// The binary run in `dir`, `COUNTERSIGN_DB` set to `db` or removed.
fn cs_in(dir: &Path, args: &[&str], db: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_countersign"));
    c.current_dir(dir).args(args).env_remove("COUNTERSIGN_DB");
    if let Some(db) = db {
        c.env("COUNTERSIGN_DB", db);
    }
    c.output().expect("countersign runs")
}

fn with_db(db: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--db", db.to_str().expect("utf8 path")];
    all.extend_from_slice(args);
    cs(&all)
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_flags_exit_two_and_touch_nothing() {
    let dir = tempdir();
    let db = dir.path().join("never.db");
    let head_before_from = format!("2:{}", "a".repeat(64));
    let cases: &[&[&str]] = &[
        &["runs", "--limit", "x"],
        &["runs", "--status", "DONE"],
        &["runs", "extra"],
        &["show"],
        &["show", "--limit", "5"],
        &["events", "r1", "r2"],
        &["approve"],
        &["reject", "r1"],
        &["reject", "r1", "--note", "  "],
        &["cancel", "r1"],
        &["verify", "--from", "5", "--to", "2"],
        &["verify", "--head", "nope"],
        &["verify", "--head", "0:abc"],
        // Not a hash verify prints (64 lowercase hex digits): a mistyped argument.
        &["verify", "--head", "5:zz"],
        &["verify", "--head", "5:abc"],
        &["verify", "--from", "3", "--head", head_before_from.as_str()],
        &["frobnicate"],
        &["resume"],
    ];
    for args in cases {
        let o = with_db(&db, args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?} is a usage error: {}",
            err(&o)
        );
        assert!(o.stdout.is_empty(), "{args:?} printed to stdout");
        assert!(!db.exists(), "{args:?} created the database");
    }
}

#[test]
fn no_database_is_a_usage_error() {
    let o = cs(&["runs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).starts_with("usage: no database: pass --db or set COUNTERSIGN_DB"),
        "{}",
        err(&o)
    );
}

#[test]
fn the_database_comes_from_the_environment() {
    let dir = tempdir();
    let db = dir.path().join("env.db");
    fixture(&db, &["--scenario", "completed"]);
    for var in ["COUNTERSIGN_DB", "AGENTRT_DB"] {
        let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .arg("runs")
            .env_remove("COUNTERSIGN_DB")
            .env_remove("AGENTRT_DB")
            .env(var, &db)
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(0), "{var}: {}", err(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains("COMPLETED"));
    }
}

#[test]
fn open_failures_are_one_sentence_and_exit_one() {
    let dir = tempdir();
    let missing = dir.path().join("missing.db");
    let o = with_db(&missing, &["runs"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("no such file"), "{}", err(&o));
    assert!(!missing.exists(), "a missing database is not created");

    let cases = [
        ("mode", "writable by group or others"),
        ("trigger", "trigger or view"),
        ("view", "trigger or view"),
        ("version7", "newer"),
        ("version5", "older"),
    ];
    for (tamper, needle) in cases {
        let db = dir.path().join(format!("{tamper}.db"));
        fixture(&db, &["--scenario", "completed", "--tamper", tamper]);
        let o = with_db(&db, &["runs"]);
        assert_eq!(o.status.code(), Some(1), "{tamper}");
        assert!(o.stdout.is_empty(), "{tamper}: nothing on stdout");
        let e = err(&o);
        assert!(e.starts_with("error: "), "{tamper}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{tamper}: one line: {e}");
        assert!(e.contains(needle), "{tamper}: {e}");
        assert!(
            e.contains(db.to_str().expect("utf8")),
            "{tamper} names the path: {e}"
        );
    }

    let real = dir.path().join("real.db");
    fixture(&real, &["--scenario", "completed"]);
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let o = with_db(&link, &["runs"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("symbolic link") && err(&o).contains("name the database file itself"),
        "{}",
        err(&o)
    );
}

#[test]
fn paths_with_spaces_and_url_characters_work() {
    let dir = tempdir();
    // The fixture tool itself cannot write to such a path: write, then rename.
    let plain = dir.path().join("plain.db");
    fixture(&plain, &["--scenario", "completed"]);
    let db = dir.path().join("a b?c#d%20e.db");
    for suffix in ["", "-wal", "-shm"] {
        let from = dir.path().join(format!("plain.db{suffix}"));
        if from.exists() {
            std::fs::rename(&from, dir.path().join(format!("a b?c#d%20e.db{suffix}")))
                .expect("rename");
        }
    }
    let o = with_db(&db, &["runs"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
}

fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s
}

#[test]
fn help_texts_are_stable() {
    let settings = snapshot_settings();
    for cmd in [
        "", "runs", "show", "events", "approve", "reject", "deny", "cancel", "resume", "recheck",
        "worker", "verify", "copy", "demo", "agent",
    ] {
        let mut args: Vec<&str> = Vec::new();
        if !cmd.is_empty() {
            args.push(cmd);
        }
        args.push("--help");
        let o = cs(&args);
        assert_eq!(o.status.code(), Some(0), "{cmd} --help exits 0");
        let name = if cmd.is_empty() {
            "help__countersign".to_string()
        } else {
            format!("help__{cmd}")
        };
        settings.bind(|| insta::assert_snapshot!(name, String::from_utf8_lossy(&o.stdout)));
    }
}

/// A database named by something that is neither a `postgres://` URL nor a path (a URL of
/// another kind or a mistyped scheme, a libpq connection string) is a usage error whose line
/// hides the password it holds, from `--db` and from `COUNTERSIGN_DB`; nothing is created.
/// Every command that takes `--db` refuses it, also `demo` and `agent`, which read `--db`
/// themselves (they created it as directories and a file and printed it whole).
#[test]
fn a_database_name_that_is_a_url_or_connection_string_is_refused_with_its_password_hidden() {
    let dir = tempdir();
    let secret = "Hunter2Sekrit";
    for name in [
        "postgress://alice:Hunter2Sekrit@db.example/x",
        "postgres:/alice:Hunter2Sekrit@db.example/x",
        "mysql://u:Hunter2Sekrit@h/x",
        "host=db.example password=Hunter2Sekrit dbname=x",
        " postgres://alice:Hunter2Sekrit@db.example/x",
        "host=db.example password = 'Hunter2Sekrit x'",
        "postgres://alice:Hunter2Sekrit",
    ] {
        for cmd in [
            &["runs"][..],
            &["demo", "--no-tui"],
            &["agent", "--model", "ollama:m", "hi"],
            &["worker"],
            &[],
        ] {
            let mut args = vec!["--db", name];
            args.extend(cmd);
            let o = cs_in(dir.path(), &args, None);
            assert_eq!(o.status.code(), Some(2), "{name} {cmd:?}: {}", err(&o));
            assert!(!err(&o).contains(secret), "{}", err(&o));
            assert!(!String::from_utf8_lossy(&o.stdout).contains(secret));
            assert!(err(&o).contains("postgres://"), "{}", err(&o));
        }
        let o = cs_in(dir.path(), &["runs"], Some(name));
        assert_eq!(o.status.code(), Some(2), "{name}: {}", err(&o));
        // (A real PostgreSQL URL is refused by its parser, which does not name the variable.)
        if !name.starts_with("postgres://") {
            assert!(err(&o).contains("COUNTERSIGN_DB: "), "{}", err(&o));
        }
        assert!(!err(&o).contains(secret), "{}", err(&o));
    }
    // The order backend is always a SQLite file: a URL there, PostgreSQL's too, is refused
    // the same way.
    for name in [
        "postgres://alice:Hunter2Sekrit@db.example/x",
        "postgress://alice:Hunter2Sekrit@db.example/x",
        "host=db.example password=Hunter2Sekrit dbname=x",
    ] {
        for args in [
            &["--db", "r.db", "worker", "--backend", name][..],
            &["--db", "r.db", "--backend", name, "resume", "run_1"],
            &["--db", "r.db", "recheck", "run_1", "--backend", name],
            &["--db", "r.db", "--backend", name],
            &["--db", "r.db", "demo", "--backend", name],
        ] {
            let o = cs_in(dir.path(), args, None);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
            assert!(err(&o).starts_with("usage: --backend: "), "{}", err(&o));
            assert!(!err(&o).contains(secret), "{}", err(&o));
        }
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing created"
    );
}

/// The refusal of a database other users may write names the `chmod` to run with the path as
/// one shell word: a file named with `;`, `$(…)` and backticks pastes as that name, and the
/// pasted command runs no code (it fixes the mode).
#[test]
fn the_chmod_in_an_insecure_mode_refusal_pastes_as_the_files_name() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let name = "a b;$(touch PWNED1)`touch PWNED2`.db";
    let db = dir.path().join(name);
    fixture(&db, &["--scenario", "completed"]);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = cs_in(dir.path(), &["--db", name, "runs"], None);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let e = err(&o);
    let at = e.find("chmod 600 ").unwrap_or_else(|| panic!("{e}"));
    let cmd = &e[at..e[at..].find(" and chown").map_or(e.len(), |i| at + i)];
    let ran = Command::new("bash")
        .current_dir(dir.path())
        .args(["-c", cmd])
        .output()
        .unwrap();
    assert!(ran.status.success(), "{cmd}: {}", err(&ran));
    assert!(!dir.path().join("PWNED1").exists() && !dir.path().join("PWNED2").exists());
    let mode = std::fs::metadata(&db).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the pasted command fixed the file: {cmd}");
}

/// The store's refusals print hints to paste (`chmod 600 F`, `mv J J.suspect`, `chmod +t D`)
/// as shell words shown as they are, never through the terminal escaper (which doubled their
/// backslashes: a name holding `'` then pasted as code, a `printf` word named other bytes).
/// For names holding a quote, a backslash, a control byte or bytes that are not UTF-8, each
/// pasted hint acts on exactly that file and runs nothing the name holds.
#[test]
fn every_store_hint_pastes_as_the_files_name_whatever_it_holds() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let names: [&[u8]; 5] = [
        b"q'$(touch PWNED1)'.db",
        b"b\\$(touch PWNED2)\\.db",
        b"c\x1b[31m'`touch PWNED3`.db",
        b"\xff'$(touch PWNED4).db",
        b"-d e.db",
    ];
    let run = |dir: &Path, db: &OsStr| {
        let mut flag = std::ffi::OsString::from("--db=");
        flag.push(db);
        Command::new(env!("CARGO_BIN_EXE_countersign"))
            .current_dir(dir)
            .arg(flag)
            .arg("runs")
            .env_remove("COUNTERSIGN_DB")
            .output()
            .unwrap()
    };
    let paste = |dir: &Path, e: &str, head: &str, tail: &str| {
        let at = e.find(head).unwrap_or_else(|| panic!("{head}: {e}"));
        let cmd = &e[at..e[at..].find(tail).map_or(e.len(), |i| at + i)];
        let ran = Command::new("sh")
            .current_dir(dir)
            .args(["-c", cmd])
            .output()
            .unwrap();
        assert!(ran.status.success(), "{cmd}: {}", err(&ran));
        cmd.to_string()
    };
    // The fixture writer names its file in a JSON manifest: written under a plain name, then
    // renamed to the hostile one.
    let scratch = tempdir();
    let fixture_at = |at: &Path| {
        let plain = scratch.path().join("plain.db");
        fixture(&plain, &["--scenario", "completed"]);
        std::fs::rename(&plain, at).unwrap();
    };
    for name in names {
        let dir = tempdir();
        let name = OsStr::from_bytes(name);
        // Group-writable: the chmod 600 hint.
        let db = dir.path().join(name);
        fixture_at(&db);
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o660)).unwrap();
        // The console says it the same way before it opens.
        let mut flag = std::ffi::OsString::from("--db=");
        flag.push(name);
        let console = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .current_dir(dir.path())
            .arg(flag)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(console.status.code(), Some(1), "{}", err(&console));
        let o = run(dir.path(), name);
        assert_eq!(o.status.code(), Some(1), "{}", err(&o));
        let hint = |e: &str| e[e.find("chmod 600 ").unwrap_or(0)..].to_string();
        assert_eq!(hint(&err(&console)), hint(&err(&o)), "one hint in both");
        let cmd = paste(dir.path(), &err(&o), "chmod 600 ", " and chown");
        let mode = std::fs::metadata(&db).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the pasted command fixed the file: {cmd}");
        // A journal others may write: the mv hint.
        let mut j = name.to_os_string();
        j.push("-journal");
        let journal = dir.path().join(&j);
        std::fs::write(&journal, b"not a journal").unwrap();
        std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o666)).unwrap();
        let o = run(dir.path(), name);
        assert_eq!(o.status.code(), Some(1), "{}", err(&o));
        let cmd = paste(dir.path(), &err(&o), "mv ", ") and open");
        assert!(!journal.exists(), "moved away: {cmd}");
        // A shared directory without the sticky bit: the chmod +t hint.
        let shared = dir.path().join(name);
        std::fs::remove_file(&shared).unwrap();
        let mut sj = j.clone();
        sj.push(".suspect");
        std::fs::remove_file(dir.path().join(sj)).unwrap();
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let inner = shared.join("a.db");
        fixture_at(&inner);
        let o = run(
            dir.path(),
            inner.strip_prefix(dir.path()).unwrap().as_os_str(),
        );
        assert_eq!(o.status.code(), Some(1), "{}", err(&o));
        let e = err(&o);
        let e = e
            .trim_end()
            .strip_suffix(')')
            .unwrap_or_else(|| panic!("{e}"));
        let cmd = paste(dir.path(), e, "chmod +t ", "\u{0}");
        let mode = std::fs::metadata(&shared).unwrap().permissions().mode();
        assert_ne!(mode & 0o1000, 0, "sticky after: {cmd}");
        for p in ["PWNED1", "PWNED2", "PWNED3", "PWNED4"] {
            assert!(!dir.path().join(p).exists(), "{p} ran");
        }
    }
}

/// A usage error names the value or argument given, escaped: one holding terminal sequences
/// is shown with them as `\x1b`, never dropped (clap's rendering strips what looks like
/// styling, and would name another value) and never raw.
#[test]
fn a_usage_error_shows_a_hostile_value_escaped_not_stripped() {
    let dir = tempdir();
    let db = dir.path().join("u.db");
    fixture(&db, &["--scenario", "completed"]);
    for (args, want) in [
        (vec!["show", "--", "-\u{1b}]0;T\u{7}x"], r"'-\x1b]0;T\x07x'"),
        (vec!["runs", "--status", "\u{1b}[31mX"], r"'\x1b[31mX'"),
        (vec!["--\u{1b}[31mx"], r"'--\x1b[31mx'"),
        // An unknown command and a value a flag does not take, likewise (found from outside:
        // clap printed U+202E raw and dropped `\e[31mRED`).
        (vec!["xx\u{1b}[31mRED"], r"'xx\x1b[31mRED'"),
        (vec!["ru\u{202e}ns"], r"'ru\u{202e}ns'"),
        (vec!["runs", "--json=x\u{202e}y"], r"'x\u{202e}y'"),
        // The parser's reason names the value in the same notation, once (not `\\u{1b}`).
        (
            vec!["stats", "--since", "\u{1b}]0;T\u{7}"],
            r"'\x1b]0;T\x07' does not start with a whole number",
        ),
    ] {
        let o = with_db(&db, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
        assert!(err(&o).contains(want), "{args:?}: {}", err(&o));
        assert!(
            !o.stderr.iter().any(|&b| b == 0x1b || b == 0x07) && !err(&o).contains('\u{202e}'),
            "{args:?}: raw control bytes"
        );
    }
}

/// `--json` with a command that prints text only (demo, worker) is a usage error, not text
/// where a script expects JSON; `demo --backend PATH` is `--backend PATH demo`.
#[test]
fn json_with_a_text_only_command_is_a_usage_error() {
    let dir = tempdir();
    for args in [
        vec!["--json", "demo", "--no-tui"],
        vec!["demo", "--no-tui", "--json"],
        vec!["--json", "--db", "x.db", "worker", "--once"],
        vec!["--json", "mcp-proxy", "check", "--config", "p.json"],
        vec!["mcp-proxy", "pin", "--config", "p.json", "--json"],
        vec!["--json", "mcp-proxy", "--config", "p.json"],
    ] {
        let o = cs_in(dir.path(), &args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
        assert!(
            err(&o).contains("prints text only"),
            "{args:?}: {}",
            err(&o)
        );
    }
    // After the command: taken (here refused for what it is, not as an unknown argument).
    let o = cs_in(
        dir.path(),
        &["demo", "--no-tui", "--backend", "b.db", "--db", "d.db"],
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("--backend goes with a postgres://"),
        "{}",
        err(&o)
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

/// A refusal whose stderr cannot be written (`2>/dev/full`, a closed pipe) still exits with
/// its own code, never 101 from a panic in the print.
#[test]
fn an_unwritable_stderr_does_not_turn_a_refusal_into_a_panic() {
    let dir = tempdir();
    let db = dir.path().join("q.db");
    fixture(&db, &["--scenario", "completed"]);
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full")
    };
    for (args, code) in [
        (&["show", "nosuch"][..], 1),
        (&["verify", "--to", "999999"], 1),
        (&["runs", "--limit", "x"], 2),
        (&["approve", "nosuch", "--by", "a\u{1b}"], 2),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .arg("--db")
            .arg(&db)
            .args(args)
            .env_remove("COUNTERSIGN_DB")
            .stderr(full())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(code), "{args:?}");
    }
}

/// clap's usage errors are one line like every other refusal (found from outside: five lines
/// with a tip, the usage and a pointer to `--help`), keeping the tip and the usage.
#[test]
fn usage_errors_are_one_line_with_their_tip() {
    for (args, says) in [
        (
            &["runz"][..],
            "usage: unrecognized subcommand 'runz'; a similar subcommand exists: 'runs' (countersign ",
        ),
        (
            &["runs", "--limt", "5"],
            "usage: unexpected argument '--limt' found; a similar argument exists: '--limit' (countersign runs",
        ),
        (
            &["show"],
            "usage: the following required arguments were not provided: <RUN> (countersign show <RUN>; --help says more)",
        ),
        (
            &["runs", "--limit", "x"],
            "usage: invalid value 'x' for '--limit <N>'",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(args)
            .env_remove("COUNTERSIGN_DB")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with(says), "{args:?}: {err}");
    }
}

/// A long value cut in a refusal keeps its cut marker as every screen writes it (found from
/// outside: the error line's last guard escaped the marker's `[` as `\x5b`).
#[test]
fn a_value_cut_in_a_refusal_keeps_its_marker() {
    let dir = tempdir();
    let db = dir.path().join("q.db");
    fixture(&db, &["--scenario", "completed"]);
    let db = db.to_str().unwrap();
    let long = "a".repeat(300);
    let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["--db", db, "approve", "r1", "--by", &long])
        .env_remove("COUNTERSIGN_DB")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("…[+234 bytes]…"), "{err}");
    assert!(!err.contains("x5b"), "{err}");
    // A raw control in the same line is still escaped, marker and all.
    let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args([
            "--db",
            "/nonexistent/x.db",
            "approve",
            "r1",
            "--by",
            &format!("{long}\u{1b}"),
        ])
        .env_remove("COUNTERSIGN_DB")
        .output()
        .unwrap();
    assert!(
        !o.stderr.contains(&0x1b),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Help and version that cannot be written to stdout (`>/dev/full`) fail with exit 1 and say
/// why, as any command's output does (found from outside: exit 0, nothing said).
#[test]
fn help_that_cannot_be_written_is_a_failure() {
    for args in [&["--help"][..], &["--version"], &["runs", "--help"]] {
        let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(args)
            .stdout(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .expect("/dev/full"),
            )
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.starts_with("error: writing output:"), "{args:?}: {err}");
        let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        assert!(!o.stdout.is_empty() && o.stderr.is_empty(), "{args:?}");
    }
}

/// `--read-only` is the console's flag: on a command that writes it is a usage error and
/// nothing is written (before, it was ignored and the decision landed); the commands that
/// only read take it and read.
#[test]
fn read_only_on_a_command_that_writes_is_refused_and_nothing_is_written() {
    let dir = tempdir();
    let db = dir.path().join("w.db");
    let m = fixture(&db, &["--scenario", "waiting"]);
    let run = m
        .pointer("/scenarios/waiting/runs/0/id")
        .and_then(|v| v.as_str())
        .unwrap()
        .to_string();
    let before = std::fs::read(&db).unwrap();
    for args in [
        &["approve", run.as_str(), "--yes", "--by", "a"][..],
        &["reject", &run, "--note", "n", "--yes", "--by", "a"],
        &["deny", &run, "--note", "n", "--yes", "--by", "a"],
        &["cancel", &run, "--note", "n", "--by", "a"],
        &["resume", &run],
        &["worker", "--once"],
    ] {
        let o = with_db(&db, &[args, &["--read-only"]].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
        assert!(
            err(&o).contains("--read-only is the console's"),
            "{}",
            err(&o)
        );
    }
    assert!(
        std::fs::read(&db).unwrap() == before,
        "the database changed"
    );
    let o = with_db(&db, &["runs", "--read-only"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
}

/// The console without a terminal (a script, a CI job) says that it needs one and what to
/// use instead, and makes nothing: no log file in the configuration directory (before, it
/// made `console.log` and then failed with "No such device or address").
#[test]
fn the_console_without_a_terminal_says_so_and_makes_nothing() {
    let dir = tempdir();
    let db = dir.path().join("q.db");
    fixture(&db, &["--scenario", "waiting"]);
    let config = dir.path().join("cfg");
    for db in [db.clone(), dir.path().join("missing.db")] {
        let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .arg("--db")
            .arg(&db)
            .env("XDG_CONFIG_HOME", &config)
            .env("USER", "ci-user")
            .env_remove("COUNTERSIGN_DB")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", err(&o));
        assert!(!config.exists(), "the console made {}", config.display());
        if db.exists() {
            assert_eq!(
                err(&o),
                "error: the console needs a terminal on standard input and output; in a script, use a command instead (runs, show, approve, ...; see --help)\n"
            );
        }
    }
}
