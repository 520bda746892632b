//! Commands the operator commands print for a person to copy (`decide with: ...`, the note
//! after a cut approval, the resume hint after `approve`): run by a real `sh` with a stub
//! `countersign` on PATH that records its argv, each must pass exactly the stored run id,
//! approval id and database path, and run nothing else. Ids no command line can carry are
//! named with a reason instead. Every id of the hostile corpus is tried.

mod support;

use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use countersign::runtime::store::Store;
use countersign::runtime::types::Timestamp;
use support::bin::{countersign, cs, on};
use support::{hostile, runs, tempdir};

/// Now, so the approval (one hour to live) is still pending when it is approved.
fn t0() -> Timestamp {
    Timestamp::now()
}

/// A directory holding a stub `countersign` that writes its argv (NUL-separated) to a file.
fn stub(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("countersign");
    std::fs::write(
        &script,
        "#!/usr/bin/env python3\nimport os, sys\nwith open(os.environ['ARGV_OUT'], 'wb') as f:\n    for a in sys.argv[1:]:\n        f.write(os.fsencode(a) + b'\\0')\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// Runs `line` in `sh` in an empty directory and returns the argv the stub recorded; asserts
/// the shell created nothing (no injected `touch`).
fn run_in_sh(root: &Path, bin: &Path, line: &str) -> Vec<Vec<u8>> {
    let cwd = root.join("cwd");
    let _ = std::fs::remove_dir_all(&cwd);
    std::fs::create_dir_all(&cwd).unwrap();
    let argv_out = root.join("argv");
    let _ = std::fs::remove_file(&argv_out);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new("sh")
        .arg("-c")
        .arg(line)
        .current_dir(&cwd)
        .env("PATH", path)
        .env("ARGV_OUT", &argv_out)
        .env("IFS", " ")
        .output()
        .expect("sh runs");
    assert!(
        o.status.success(),
        "sh failed on {line:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let made: Vec<_> = std::fs::read_dir(&cwd).unwrap().collect();
    assert!(made.is_empty(), "the line {line:?} created files: {made:?}");
    let rec = std::fs::read(&argv_out).expect("the stub ran");
    let mut args: Vec<Vec<u8>> = rec.split(|&b| b == 0).map(<[u8]>::to_vec).collect();
    args.pop(); // after the last NUL
    args
}

/// The printed command lines of `text`: everything from `countersign --db` to the end of a line.
fn commands(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.find("countersign --db").map(|i| l[i..].to_string()))
        .collect()
}

fn printable_ascii(line: &str) -> bool {
    line.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

fn typable(id: &str) -> bool {
    !id.starts_with('-') && !id.ends_with('\n') && !id.contains('\0')
}

#[test]
fn printed_commands_pass_exactly_the_stored_ids_to_a_shell() {
    let tmp = tempdir();
    let bin = stub(tmp.path());
    let dir = tmp
        .path()
        .join(std::ffi::OsString::from_vec(hostile::DIR.to_vec()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut checked = 0;
    for (i, id) in hostile::IDS.iter().enumerate() {
        let db = dir.join(format!("r{i}.db"));
        let store = Store::open(&db).unwrap();
        let (aid, _) = runs::waiting_run(&store, id, t0());
        drop(store);
        let db_bytes = db.as_os_str().as_bytes().to_vec();
        let want = |verb: &str, with_approval: bool| {
            let mut v = vec![
                b"--db".to_vec(),
                db_bytes.clone(),
                verb.as_bytes().to_vec(),
                id.as_bytes().to_vec(),
            ];
            if with_approval {
                v.push(b"--approval".to_vec());
                v.push(aid.as_bytes().to_vec());
            }
            v
        };
        if !typable(id) {
            // The commands cannot be given this id; what `show` would print says why instead.
            let a = countersign::runtime::store::Store::open(&db)
                .unwrap()
                .get_approval(id, &aid)
                .unwrap();
            let hint = countersign::commands::approval::decide_hint(&a, &db);
            assert!(printable_ascii(hint.trim_end()), "{hint:?}");
            assert!(commands(&hint).is_empty(), "no command for {id:?}: {hint}");
            assert!(hint.contains("the console"), "{hint}");
            continue;
        }
        let show = cs(&db, &[OsStr::new("show"), OsStr::new(id)]);
        assert_eq!(show.status.code(), Some(0), "show {id:?}");
        let text = String::from_utf8_lossy(&show.stdout).into_owned();
        let lines = commands(&text);
        assert_eq!(lines.len(), 1, "one decide line for {id:?}:\n{text}");
        assert!(printable_ascii(&lines[0]), "{:?}", lines[0]);
        let decide_argv = run_in_sh(tmp.path(), &bin, &lines[0]);
        assert_eq!(decide_argv, want("approve", true), "{}", lines[0]);
        checked += 1;
        // The note after a cut or escaped approval: on a copy whose presentation shows escapes.
        let copy = dir.join(format!("n{i}.db"));
        std::fs::copy(&db, &copy).unwrap();
        rusqlite::Connection::open(&copy)
            .unwrap()
            .execute(
                "UPDATE approvals SET presentation_json = '{\"n\":\"a\\tb\"}'",
                [],
            )
            .unwrap();
        let ap = cs(
            &copy,
            &[
                OsStr::new("approve"),
                OsStr::new(id),
                OsStr::new("--approval"),
                OsStr::new(&aid),
            ],
        );
        let text = String::from_utf8_lossy(&ap.stdout).into_owned();
        let note: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("note:"))
            .flat_map(commands)
            .collect();
        assert_eq!(note.len(), 1, "a note for {id:?}:\n{text}");
        let mut want_show = want("show", false);
        want_show[1] = copy.as_os_str().as_bytes().to_vec();
        assert_eq!(
            run_in_sh(tmp.path(), &bin, &note[0]),
            want_show,
            "{}",
            note[0]
        );
        // The note's command, given to the real binary, shows the same run.
        let argv: Vec<std::ffi::OsString> = run_in_sh(tmp.path(), &bin, &note[0])
            .into_iter()
            .map(std::ffi::OsString::from_vec)
            .collect();
        let o = countersign().args(&argv).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "the real binary takes {argv:?}");
        // The decide line's command, given to the real binary, approves; then the resume hint.
        let ap = countersign()
            .args(decide_argv.into_iter().map(std::ffi::OsString::from_vec))
            .output()
            .unwrap();
        assert_eq!(
            ap.status.code(),
            Some(0),
            "approve {id:?}: {}",
            String::from_utf8_lossy(&ap.stderr)
        );
        let text = String::from_utf8_lossy(&ap.stdout).into_owned();
        let resume: Vec<String> = text
            .lines()
            .filter(|l| l.contains("resumed"))
            .flat_map(commands)
            .collect();
        assert_eq!(resume.len(), 1, "a resume hint for {id:?}:\n{text}");
        assert_eq!(
            run_in_sh(tmp.path(), &bin, &resume[0]),
            want("resume", false)
        );
        checked += 2;
    }
    assert!(checked >= 3 * (hostile::IDS.len() - 3), "{checked}");
}

#[test]
fn the_demo_hints_quote_the_database_path() {
    let tmp = tempdir();
    let bin = stub(tmp.path());
    let dir = tmp.path().join(std::ffi::OsString::from_vec(
        b"demo '$(touch X)' \xce\xbf".to_vec(),
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("d.db");
    let o = on(&db).args(["demo", "--no-tui"]).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines = commands(&text);
    assert_eq!(lines.len(), 3, "{text}");
    for line in &lines {
        assert!(printable_ascii(line), "{line:?}");
        let argv = run_in_sh(tmp.path(), &bin, line);
        assert_eq!(
            argv[..2],
            [b"--db".to_vec(), db.as_os_str().as_bytes().to_vec()]
        );
    }
}

#[test]
fn printed_commands_pass_ids_that_are_not_utf8_exactly() {
    let tmp = tempdir();
    let bin = stub(tmp.path());
    for (i, id) in hostile::NOT_UTF8.iter().enumerate() {
        let db = tmp.path().join(format!("u{i}.db"));
        let store = Store::open(&db).unwrap();
        let (aid, _) = runs::waiting_run(&store, "placeholder", t0());
        drop(store);
        hostile::rekey_run(&db, "placeholder", id);
        let db_bytes = db.as_os_str().as_bytes().to_vec();
        let want = |verb: &str, with_approval: bool| {
            let mut v = vec![
                b"--db".to_vec(),
                db_bytes.clone(),
                verb.as_bytes().to_vec(),
                id.to_vec(),
            ];
            if with_approval {
                v.push(b"--approval".to_vec());
                v.push(aid.as_bytes().to_vec());
            }
            v
        };
        let show = cs(&db, &[OsStr::new("show"), OsStr::from_bytes(id)]);
        assert_eq!(
            show.status.code(),
            Some(0),
            "show {id:?}: {}",
            String::from_utf8_lossy(&show.stderr)
        );
        let text = String::from_utf8(show.stdout).expect("printed as UTF-8");
        let lines = commands(&text);
        assert_eq!(lines.len(), 1, "one decide line for {id:?}:\n{text}");
        assert!(printable_ascii(&lines[0]), "{:?}", lines[0]);
        let decide_argv = run_in_sh(tmp.path(), &bin, &lines[0]);
        assert_eq!(decide_argv, want("approve", true), "{}", lines[0]);
        // Pasted, the line approves exactly this run; then its resume hint.
        let ap = countersign()
            .args(decide_argv.into_iter().map(std::ffi::OsString::from_vec))
            .output()
            .unwrap();
        assert_eq!(
            ap.status.code(),
            Some(0),
            "approve {id:?}: {}",
            String::from_utf8_lossy(&ap.stderr)
        );
        let text = String::from_utf8(ap.stdout).unwrap();
        let resume: Vec<String> = text
            .lines()
            .filter(|l| l.contains("resumed"))
            .flat_map(commands)
            .collect();
        assert_eq!(resume.len(), 1, "a resume hint for {id:?}:\n{text}");
        assert_eq!(
            run_in_sh(tmp.path(), &bin, &resume[0]),
            want("resume", false)
        );
        assert_eq!(hostile::verify_bytes(&db), Vec::<String>::new());
    }
}
