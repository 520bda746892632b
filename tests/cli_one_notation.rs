//! One escape notation everywhere (issue 14, item 5), as the real binary prints it: stored
//! bytes that are not UTF-8 show as `\xNN` in every field (never a lossy U+FFFD); an event line
//! shows a JSON-escaped ESC and a raw bidi control in the same notation; `--json` writes C1
//! and bidi controls as `\u` escapes of the same JSON string; a literal cut marker in the data
//! can be told from a real one; a mixed-script id is badged in the commands as in the console.

mod support;

use std::path::Path;
use std::process::Output;

use countersign::runtime::store::Store;
use countersign::runtime::types::Timestamp;
use support::bin::cs;
use support::{runs, tempdir};

fn text(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).expect("output is UTF-8")
}

fn waiting(dir: &Path, id: &str) -> std::path::PathBuf {
    let db = dir.join("n.db");
    let store = Store::open(&db).unwrap();
    runs::waiting_run(&store, id, Timestamp::now());
    db
}

fn exec(db: &Path, sql: &str) {
    rusqlite::Connection::open(db)
        .unwrap()
        .execute_batch(sql)
        .unwrap();
}

#[test]
fn invalid_utf8_shows_as_bytes_in_every_field_of_runs_and_show() {
    let d = tempdir();
    let db = waiting(d.path(), "r1");
    // goal, reason, reason_detail, lease_owner and the approval's kind hold a 0xFF byte.
    exec(
        &db,
        "UPDATE runs SET goal = CAST(X'676f616cff' AS TEXT), reason = CAST(X'726561736f6eff' AS TEXT), \
         reason_detail = CAST(X'64657461696cff' AS TEXT), lease_owner = CAST(X'6f776e6572ff' AS TEXT);
         UPDATE approvals SET kind = CAST(X'6b696e64ff' AS TEXT);",
    );
    let runs = text(&cs(&db, &["runs"]));
    let show = text(&cs(&db, &["show", "r1"]));
    for (what, out) in [("runs", &runs), ("show", &show)] {
        assert!(!out.contains('\u{fffd}'), "{what} printed U+FFFD:\n{out}");
        assert!(out.contains(r"goal\xff"), "{what}: goal\n{out}");
        assert!(out.contains(r"reason\xff"), "{what}: reason\n{out}");
    }
    for field in [r"detail\xff", r"owner\xff", r"kind\xff"] {
        assert!(show.contains(field), "show: {field}\n{show}");
    }
}

#[test]
fn an_event_line_uses_one_notation() {
    let d = tempdir();
    let db = waiting(d.path(), "r1");
    exec(
        &db,
        "UPDATE events SET payload_json = '{\"a\":\"\\u001b[2J\",\"b\":\"x\u{202e}y\",\"c\":\"lit \\\\u001b\"}' \
         WHERE seq = (SELECT min(seq) FROM events WHERE run_id = 'r1');",
    );
    let out = text(&cs(&db, &["events", "r1"]));
    let line = out.lines().next().unwrap();
    assert!(line.contains(r#""a": "\x1b[2J""#), "{line}");
    assert!(line.contains(r#""b": "x\u{202e}y""#), "{line}");
    // The data's own backslash is `\\`, so the literal text `\u001b` is told from an ESC.
    assert!(line.contains(r#""c": "lit \\u001b""#), "{line}");
    assert!(!line.contains(r"\\u001b["), "{line}");
}

#[test]
fn json_output_escapes_c1_and_bidi_controls_and_keeps_the_value() {
    let d = tempdir();
    let db = waiting(d.path(), "r1");
    let goal = "pay \u{202e}evil\u{202c} \u{85}\u{9b}2J \u{2066}i\u{2069} z\u{200b}w \u{e0041}";
    exec(
        &db,
        &format!(
            "UPDATE runs SET goal = '{goal}';
             UPDATE events SET payload_json = '{{\"g\":\"{goal}\"}}' WHERE seq = (SELECT min(seq) FROM events WHERE run_id = 'r1');"
        ),
    );
    let forbidden = |s: &str| {
        s.chars().find(|&c| {
            matches!(c as u32, 0x80..=0x9f | 0x200b..=0x200f | 0x202a..=0x202e | 0x2066..=0x2069 | 0xe0000..=0xe007f)
        })
    };
    for args in [
        vec!["--json", "runs"],
        vec!["--json", "show", "r1"],
        vec!["--json", "events", "r1"],
    ] {
        let out = text(&cs(&db, &args));
        assert_eq!(forbidden(&out), None, "{args:?} wrote it raw:\n{out}");
        assert!(out.contains(r"\u202e"), "{args:?}:\n{out}");
        let first = if args[1] == "events" {
            out.lines().next().unwrap().to_string()
        } else {
            out.clone()
        };
        let v: serde_json::Value = serde_json::from_str(&first).unwrap();
        let got = match args[1] {
            "runs" => v["runs"][0]["goal"].clone(),
            "show" => v["run"]["goal"].clone(),
            _ => v["payload"]["g"].clone(),
        };
        assert_eq!(got.as_str(), Some(goal), "{args:?}: the same JSON string");
    }
}

#[test]
fn a_literal_cut_marker_is_told_from_a_real_one() {
    let d = tempdir();
    let db = waiting(d.path(), "r1");
    exec(
        &db,
        "UPDATE runs SET goal = 'refund …[+9 bytes]… and [+3 combining marks dropped]';",
    );
    let show = text(&cs(&db, &["show", "r1"]));
    let goal = show.lines().find(|l| l.starts_with("goal")).unwrap();
    assert_eq!(
        goal,
        r"goal    refund …\x5b+9 bytes]… and \x5b+3 combining marks dropped]"
    );
}

#[test]
fn a_mixed_script_id_is_badged_in_the_commands() {
    let d = tempdir();
    let db = waiting(d.path(), "\u{43e}rd_1004");
    let runs = text(&cs(&db, &["runs"]));
    assert!(
        runs.lines()
            .any(|l| l.starts_with("\u{43e}rd_1004 [mixed scripts]")),
        "{runs}"
    );
    let show = text(&cs(&db, &["show", "\u{43e}rd_1004"]));
    assert!(
        show.starts_with("run     \u{43e}rd_1004 [mixed scripts]\n"),
        "{show}"
    );
    assert!(
        show.contains("APPROVAL WAITING  \u{43e}rd_1004-a1 [mixed scripts]"),
        "{show}"
    );
}

/// Issue 14, item 4: two different requests never print alike in `show` / `approve`: a dotted
/// key is quoted, a trailing space is inside quotes, strings keep their quotes, and a duplicate
/// key is marked with a warning before anything is decided.
#[test]
fn different_requests_never_print_alike() {
    let d = tempdir();
    let db = waiting(d.path(), "r1");
    exec(
        &db,
        r#"UPDATE approvals SET request_json = replace(request_json, '"args":{', '"args":{"refund":{"amount_cents":100},"refund.amount_cents":900000,"amount ":"8000","n":"null","o":"{}","p":{},"amount":1,');"#,
    );
    let show = text(&cs(&db, &["show", "r1"]));
    let args = &show[show.find("arguments").unwrap()..show.find("presentation").unwrap()];
    for want in [
        "  \"refund.amount_cents\" (6 bytes)\n    900000\n",
        "  refund (",
        "      \"amount_cents\": 100\n",
        "  \"amount \" (6 bytes)\n    \"8000\"\n",
        "  n (6 bytes)\n    \"null\"\n",
        "  o (4 bytes)\n    \"{}\"\n",
        "  p (2 bytes)\n    {}\n",
        "  amount (DUPLICATE KEY: occurrence 1 of 2, in stored order)\n    1\n",
        "  amount (DUPLICATE KEY: occurrence 2 of 2, in stored order)\n    800\n",
    ] {
        assert!(args.contains(want), "show lacks {want:?}:\n{args}");
    }
    assert!(
        show.contains("WARNING: the arguments repeat 1 key(s)"),
        "{show}"
    );
    // approve says so before it decides (here: before the prompt it would show).
    let o = cs(&db, &["approve", "r1", "--approval", "r1-a1", "--by", "t"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let warn = out
        .find("WARNING: the arguments repeat")
        .expect("a warning");
    let decided = out.find("approval r1-a1:").unwrap_or(usize::MAX);
    assert!(warn < decided, "{out}");
}

#[test]
fn a_lone_jamo_in_an_id_is_escaped_and_badged_in_the_commands() {
    let d = tempdir();
    let id = "ord_10\u{1161}\u{11a8}04";
    let db = waiting(d.path(), id);
    let show = text(&cs(&db, &["show", id]));
    assert!(
        show.starts_with("run     ord_10\\u{1161}\\u{11a8}04 [invisible]\n"),
        "{show}"
    );
    let runs = text(&cs(&db, &["runs"]));
    assert!(
        runs.contains("ord_10\\u{1161}\\u{11a8}04 [invisible]"),
        "{runs}"
    );
}
