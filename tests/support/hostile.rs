//! The hostile corpus of untrusted identifiers and texts shared by the command and console
//! tests: every id here is written into a database and must come back exact (a printed command
//! run by `sh`) or be refused with a reason, never run code or look like another.

/// Run ids a caller of agentrt may choose. Each is also used as the stem of its approval id.
pub const IDS: &[&str] = &[
    "t-4711'$(touch X)'",
    "t-4711;touch${IFS}X",
    "t-4711`touch X`",
    "t $(touch X) \"q\" \\ %s %% %n ~ * ? [a] #c !!",
    "t-4711\u{1b}]0;pwned\u{7}\u{1b}[2J",
    "t\u{202e}1174-t",
    "\u{43e}rd_1004",
    "ord_10\u{1161}\u{11a8}04",
    "t\ttab\rcr",
    "t-\u{9b}2J\u{85}",
    "t\nnewline-inside",
    "\\x1b \\u{202e}",
    "'",
    "\u{1fae9}\u{1fae9}",
    // Untypable: the printed line must say so, not print a command.
    "ends-with-newline\n",
    "-rf",
    "nul\0byte",
];

/// A directory name for the database: quotes, a command substitution, a space, non-ASCII and
/// a byte that is not UTF-8.
pub const DIR: &[u8] = b"db 'q' $(touch X) `touch Y` \xc3\xa9 \xff";

/// Ids that are not UTF-8 (agentrt's callers choose run ids and a Go string holds any bytes;
/// SQLite stores TEXT as given). The first two differ only in their invalid byte; `LOSSY_TWIN`
/// is the lossy form of both, a valid UTF-8 id another run may really have.
pub const NOT_UTF8: &[&[u8]] = &[
    b"t-\xff",
    b"t-\xfe",
    b"t-\xe6\x97-truncated",
    b"\xff\xfe leading bytes and a quote ' and $(touch X)",
    b"t-\xc0\xaf-overlong",
];

/// The lossy form (U+FFFD) of `NOT_UTF8[0]` and `NOT_UTF8[1]`, as a real UTF-8 id.
pub const LOSSY_TWIN: &str = "t-\u{fffd}";

/// Gives the run `old` (written by `runs::waiting_run` or `runs::create`) the id `new`, any
/// bytes, as agentrt would have written a run with that id: every row naming it, the
/// `run_id` of its approvals' requests (Go JSON: `\ufffd` per invalid byte) with their hashes
/// recomputed, and the whole event chain rehashed over the stored bytes.
pub fn rekey_run(db: &std::path::Path, old: &str, new: &[u8]) {
    use countersign::runtime::json::{approval_hash, gojson};
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch("PRAGMA foreign_keys = OFF; BEGIN").unwrap();
    for (table, col) in [
        ("runs", "id"),
        ("steps", "run_id"),
        ("approvals", "run_id"),
        ("events", "run_id"),
        ("model_calls", "run_id"),
    ] {
        c.execute(
            &format!("UPDATE {table} SET {col} = ?1 WHERE {col} = ?2"),
            rusqlite::params![Text(new), old],
        )
        .unwrap();
    }
    let go = |b: &[u8]| {
        let mut v = Vec::new();
        gojson::write_bytes(&mut v, b);
        String::from_utf8(v).unwrap()
    };
    let (old_json, new_json) = (
        format!("\"run_id\":{}", go(old.as_bytes())),
        format!("\"run_id\":{}", go(new)),
    );
    let rows: Vec<(i64, String, String, String, String, String)> = c
        .prepare("SELECT rowid, kind, capability_json, presentation_json, request_json, hash FROM approvals WHERE run_id = ?1")
        .unwrap()
        .query_map([Text(new)], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (rowid, kind, cap, pres, req, old_hash) in rows {
        let req = req.replacen(&old_json, &new_json, 1);
        let hash = approval_hash(&kind, cap.as_bytes(), pres.as_bytes(), req.as_bytes()).unwrap();
        c.execute(
            "UPDATE approvals SET request_json = ?1, hash = ?2 WHERE rowid = ?3",
            rusqlite::params![req, hash, rowid],
        )
        .unwrap();
        c.execute(
            "UPDATE events SET payload_json = replace(payload_json, ?1, ?2)",
            rusqlite::params![old_hash, hash],
        )
        .unwrap();
    }
    rehash_chain(&c);
    c.execute_batch("COMMIT").unwrap();
}

/// Recomputes every event's chain hash in seq order over the stored bytes.
pub fn rehash_chain(c: &rusqlite::Connection) {
    type Row = (i64, Vec<u8>, Vec<u8>, String, String, String);
    let events: Vec<Row> = c
        .prepare("SELECT seq, CAST(run_id AS BLOB), CAST(step_id AS BLOB), at, type, payload_json FROM events ORDER BY seq")
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut prev = String::new();
    for (seq, run, step, at, kind, payload) in events {
        let h = countersign::runtime::json::event_hash_bytes(
            &prev, seq, &run, &step, &at, &kind, &payload,
        );
        c.execute(
            "UPDATE events SET hash = ?1 WHERE seq = ?2",
            rusqlite::params![h, seq],
        )
        .unwrap();
        prev = h;
    }
}

/// Bytes bound as TEXT (as agentrt's Go driver binds a string).
pub struct Text<'a>(pub &'a [u8]);

impl rusqlite::ToSql for Text<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(rusqlite::types::ToSqlOutput::Borrowed(
            rusqlite::types::ValueRef::Text(self.0),
        ))
    }
}

/// Checks a database's approval hashes and event chain with the shared tools' `canon.py`,
/// reading TEXT as bytes. (`agentrt_verify.py` itself cannot open a database holding TEXT that
/// is not UTF-8: Python's sqlite3 decodes every TEXT value as UTF-8 and it exits 2.) Returns
/// the problems found.
pub fn verify_bytes(db: &std::path::Path) -> Vec<String> {
    let script = r#"
import hashlib, sqlite3, sys
sys.path.insert(0, sys.argv[1])
import canon
conn = sqlite3.connect('file:%s?mode=ro' % sys.argv[2], uri=True)
conn.text_factory = bytes
problems = []
for aid, kind, cap, pres, req, h in conn.execute('SELECT id, kind, capability_json, presentation_json, request_json, hash FROM approvals'):
    doc = b'{"kind":' + canon.enc_str(kind.decode()).encode() + b',"capability":' + (cap or b'{}') + b',"presentation":' + (pres or b'{}') + b',"request":' + req + b'}'
    if hashlib.sha256(canon.canonical(doc)).hexdigest().encode() != h:
        problems.append('approval %r: hash' % aid)
prev = b''
for seq, run, step, at, typ, payload, h in conn.execute('SELECT seq, run_id, step_id, at, type, payload_json, hash FROM events ORDER BY seq'):
    fields = [prev, str(seq).encode(), run, step, at, typ, payload]
    if hashlib.sha256(b''.join(str(len(f)).encode() + b':' + f + b',' for f in fields)).hexdigest().encode() != h:
        problems.append('chain at seq %d' % seq)
    prev = h
for (rid,) in conn.execute('SELECT id FROM runs r WHERE step_count != (SELECT COUNT(*) FROM steps s WHERE s.run_id = r.id)'):
    problems.append('run %r: step_count' % rid)
print('\n'.join(problems))
"#;
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(super::shared_dir().join("tools"))
        .arg(db)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the byte check failed to run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}
