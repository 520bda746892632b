//! `stats` (issue 21) reads each step's decision and policy once, in Rust, and asks SQLite's
//! JSON functions only about rows it is not sure of. These tests hold it to the scan it
//! replaced (`support/stats_oracle.rs`, every count through SQLite's JSON functions): the
//! same report, to the count, over every scenario of the fixture plus steps and approvals with
//! hostile and damaged decisions and policies, and over thousands of mutated documents.

#[path = "support/stats_oracle.rs"]
mod stats_oracle;
mod support;

use std::path::Path;

use countersign::runtime::stats::Stats;
use countersign::runtime::store::Store;
use countersign::runtime::types::Timestamp;
use rusqlite::{Connection, params};
use stats_oracle::stats_by_sql;

/// How a document is stored: as TEXT (its bytes as they are, UTF-8 or not) or as a BLOB.
#[derive(Clone, Copy)]
enum As {
    Text,
    Blob,
}

struct Rows<'c> {
    conn: &'c Connection,
    step: String,
    approval: String,
    n: usize,
}

impl Rows<'_> {
    fn new(conn: &Connection) -> Rows<'_> {
        let one = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, String>(0)).unwrap();
        Rows {
            step: one("SELECT id FROM steps WHERE policy_json != '' ORDER BY rowid LIMIT 1"),
            approval: one("SELECT id FROM approvals ORDER BY rowid LIMIT 1"),
            conn,
            n: 0,
        }
    }

    /// A step copied from the fixture's first policy-checked step with this decision, policy,
    /// status and start; returns its id.
    fn step(
        &mut self,
        decision: &[u8],
        policy: &[u8],
        stored: As,
        status: &str,
        at: &str,
    ) -> String {
        self.n += 1;
        let id = format!("hostile-step-{}", self.n);
        let text = matches!(stored, As::Text);
        let failed_invalid = status == "failed" && policy.is_empty();
        let observation = if failed_invalid {
            r#"{"kind":"invalid_decision","content":"x"}"#
        } else {
            ""
        };
        self.conn
            .execute(
                "INSERT INTO steps (id, run_id, idx, status, decision_json, policy_json,
                   observation_json, observation_hash, started_at, finished_at, spec_hash,
                   policy_id)
                 SELECT ?1, run_id, ?2, ?3,
                   CASE WHEN ?4 THEN CAST(?5 AS TEXT) ELSE ?5 END,
                   CASE WHEN ?4 THEN CAST(?6 AS TEXT) ELSE ?6 END,
                   ?7, observation_hash, ?8, finished_at, spec_hash, policy_id
                 FROM steps WHERE id = ?9",
                params![
                    id,
                    100_000 + self.n,
                    status,
                    text,
                    decision,
                    policy,
                    observation,
                    at,
                    self.step
                ],
            )
            .unwrap();
        id
    }

    /// An approval copied from the fixture's first one, for `step_id`.
    fn approval(&mut self, step_id: &str, status: &str, by: &str, created: &str, decided: &str) {
        self.n += 1;
        self.conn
            .execute(
                "INSERT INTO approvals (id, run_id, step_id, kind, capability_json,
                   presentation_json, request_json, hash, status, created_at, decided_at,
                   decided_by, note, expires_at)
                 SELECT ?1, run_id, ?2, kind, capability_json, presentation_json, request_json,
                   hash, ?3, ?4, ?5, ?6, note, expires_at FROM approvals WHERE id = ?7",
                params![
                    format!("hostile-approval-{}", self.n),
                    step_id,
                    status,
                    created,
                    decided,
                    by,
                    self.approval
                ],
            )
            .unwrap();
    }
}

/// Decisions: the fixture's shapes, names SQLite renders (escapes, numbers, objects), long
/// names, escaped and duplicated keys, JSON5, invalid and non-UTF-8 text, deep nesting.
fn decisions() -> Vec<Vec<u8>> {
    let call = |tool: &str| format!(r#"{{"kind":"tool_call","tool":{tool},"args":{{}}}}"#);
    let mut d: Vec<String> = [
        r#""get_order""#,
        r#""issue_refund""#,
        "null",
        "5",
        "-0",
        "1.5e300",
        "1e999",
        "12345678901234567890123",
        "true",
        "false",
        r#"{"a": [1, 2.50, "x"]}"#,
        r#"["x"]"#,
        r#""a\"b""#,
        r#""get\u005forder""#,
        r#""\ud800""#,
        r#""\ud83d\ude00""#,
        r#""\u0000x""#,
        r#""\u001b]52;c;x\u0007""#,
        "\"é ☃ 😀\"",
        "\"\u{202e}rtl\"",
        "\"del\u{7f}\"",
        "\"ctl\t\"",
        "\"esc\u{1b}]52\"",
        r#""/\/""#,
    ]
    .iter()
    .map(|t| call(t))
    .collect();
    for n in [255, 256, 257, 300, 10_000] {
        d.push(call(&format!("\"{}\"", "t".repeat(n))));
    }
    d.push(call(&format!("\"{}\"", "é".repeat(200))));
    d.push(call(&format!("\"{}\\n\"", "t".repeat(300))));
    d.extend(
        [
            r#"{"kind":"tool_call"}"#,
            r#"{"tool":"no_kind"}"#,
            r#"{"kind":"tool\u005fcall","tool":"esc_kind"}"#,
            r#"{"ki\u006ed":"tool_call","tool":"esc_key"}"#,
            r#"{"kind":"tool_call","to\u006fl":"esc_tool_key"}"#,
            r#"{"kind":"tool_call","kind":"final","tool":"dup_kind"}"#,
            r#"{"kind":"final","kind":"tool_call","tool":"dup_kind2"}"#,
            r#"{"kind":"tool_call","tool":"dup1","tool":"dup2"}"#,
            r#"{"kind":"complete","tool":"not_a_call"}"#,
            r#"{"kind":"TOOL_CALL","tool":"upper"}"#,
            r#"{"kind":5,"tool":"x"}"#,
            r#"{"kind":null,"tool":"x"}"#,
            r#"{"kind":["tool_call"],"tool":"arr_kind"}"#,
            r#"{"kind":{"a":"tool_call"},"tool":"obj_kind"}"#,
            r#"{"args":{"kind":"tool_call","tool":"nested"}}"#,
            r#"["tool_call"]"#,
            "5",
            "\"tool_call\"",
            "null",
            "true",
            "{}",
            "[]",
            " \t\n{\"kind\" : \"tool_call\" , \"tool\" : \"ws\"}\r\n ",
            "{kind:'tool_call',tool:'json5'}",
            "{\"kind\":\"tool_call\",\"tool\":\"json5_comma\",}",
            "{\"kind\":\"tool_call\",\"tool\":\"comment\"} // c",
            "/* c */{\"kind\":\"tool_call\",\"tool\":\"comment2\"}",
            "{\"kind\":\"tool_call\",\"tool\":\"hex\",\"n\":0x1F}",
            "{\"kind\":\"tool_call\",\"tool\":\"inf\",\"n\":Infinity}",
            "{\"kind\":\"tool_call\",\"tool\":\"nan\",\"n\":NaN}",
            "{\"kind\":\"tool_call\",\"tool\":\"plus\",\"n\":+1}",
            "{\"kind\":\"tool_call\",\"tool\":\"dot\",\"n\":.5}",
            "{\"kind\":\"tool_call\",\"tool\":\"lead0\",\"n\":01}",
            "{\"kind\":\"tool_call\",\"tool\":\"single\",\"n\":'x'}",
            "{\"kind\":\"tool_call\",\"tool\":\"nl_esc\",\"s\":\"a\\\nb\"}",
            "{\"kind\":\"tool_call\",\"tool\":\"xesc\",\"s\":\"\\x41\"}",
            "{\"kind\":\"tool_call\",\"tool\":\"nbsp\"}\u{a0}",
            "\u{feff}{\"kind\":\"tool_call\",\"tool\":\"bom\"}",
            "{\"kind\":\"tool_call\",\"tool\":\"vt\"}\u{b}",
            "{\"kind\":\"tool_call\",\"tool\":\"two\"}{}",
            "{\"kind\":\"tool_call\",\"tool\":\"trunc\"",
            "not json",
            "{",
            "",
            " ",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    for depth in [63, 64, 65, 100, 999, 1000, 1001, 2000] {
        let args = "[".repeat(depth) + &"]".repeat(depth);
        d.push(format!(
            r#"{{"kind":"tool_call","tool":"deep{depth}","args":{args}}}"#
        ));
        let objs = "{\"a\":".repeat(depth) + "1" + &"}".repeat(depth);
        d.push(format!(
            r#"{{"kind":"tool_call","tool":"deepo{depth}","args":{objs}}}"#
        ));
    }
    let mut d: Vec<Vec<u8>> = d.into_iter().map(String::into_bytes).collect();
    d.push(b"{\"kind\":\"tool_call\",\"tool\":\"bad\xff\xfeutf8\"}".to_vec());
    d.push(b"{\"kind\":\"tool_call\",\"tool\":\"ok\",\"args\":\"\xc3\"}".to_vec());
    d.push(b"{\"kind\":\"tool_call\",\"tool\":\"nul\x00\"}".to_vec());
    d.push(b"{\"kind\":\"tool_call\",\"tool\":\"after_nul\"}\x00".to_vec());
    d
}

/// Policies: outcomes and reasons as the counts read them, and the same kinds of damage.
fn policies() -> Vec<Vec<u8>> {
    let mut p: Vec<String> = [
        "",
        r#"{"outcome":"allow","reason":"ok"}"#,
        r#"{"outcome":"deny","reason":"not_found: order ord_1"}"#,
        r#"{"outcome":"abort","reason":"budget_exceeded: 5 of 4"}"#,
        r#"{"outcome":"require_approval","reason":"write: needs a person"}"#,
        r#"{"outcome":"deny","reason":"Amount too high: 5"}"#,
        r#"{"outcome":"deny"}"#,
        r#"{"outcome":"deny","reason":null}"#,
        r#"{"outcome":"deny","reason":5}"#,
        r#"{"outcome":"deny","reason":{"a":"b:c"}}"#,
        r#"{"outcome":"deny","reason":["x:y"]}"#,
        r#"{"outcome":"deny","reason":"not\u005ffound: x"}"#,
        r#"{"outcome":"deny","reason":"not_found\u003a x"}"#,
        r#"{"outcome":"deny","reason":"not_found: \u0000 \" x"}"#,
        r#"{"outcome":"deny","reason":"\u006eot_found: x"}"#,
        r#"{"outcome":"deny","reason":"no colon"}"#,
        r#"{"outcome":"deny","reason":":"}"#,
        r#"{"outcome":"deny","reason":"a:b:c"}"#,
        r#"{"outcome":"deny","reason":"dup_one: x","reason":"dup_two: y"}"#,
        r#"{"outcome":"allow","outcome":"deny","reason":"x: y"}"#,
        r#"{"outcome":"ALLOW"}"#,
        r#"{"outcome":"al\u006cow"}"#,
        r#"{"outcome":"de\u006ey","reason":"esc_outcome: x"}"#,
        r#"{"outcome":1}"#,
        r#"{"outcome":null}"#,
        r#"{"outcome":true}"#,
        r#"{"outcome":{"a":1}}"#,
        r#"{"outc\u006fme":"allow"}"#,
        r#"["allow"]"#,
        "{outcome:'allow'}",
        "{\"outcome\":\"deny\",\"reason\":\"json5: x\",}",
        "not json",
        "{\"outcome\":\"allow\"",
        "\"allow\"",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for n in [39, 40, 41, 46, 47, 48, 49, 60] {
        p.push(format!(
            r#"{{"outcome":"deny","reason":"{}: x"}}"#,
            "a".repeat(n)
        ));
    }
    p.push(format!(
        r#"{{"outcome":"deny","reason":"{}:x"}}"#,
        "é".repeat(47)
    ));
    p.push(format!(
        r#"{{"outcome":"deny","reason":"{}:x"}}"#,
        "é".repeat(48)
    ));
    let mut p: Vec<Vec<u8>> = p.into_iter().map(String::into_bytes).collect();
    p.push(b"{\"outcome\":\"deny\",\"reason\":\"bad\xff: x\"}".to_vec());
    p.push(b"{\"outcome\":\"allow\",\"reason\":\"\xc3\"}".to_vec());
    p
}

/// A small deterministic generator (xorshift64*), so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `doc` with one to three bytes replaced, inserted or removed, from bytes that matter to JSON.
fn mutate(rng: &mut Rng, doc: &[u8]) -> Vec<u8> {
    const BYTES: &[u8] = b"\"\\:{}[],. \t\n\x00\x1f\x7f\xff\xc3ue0-+nt_aE";
    let mut d = doc.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(d.len() + 1);
        let b = BYTES[rng.below(BYTES.len())];
        match rng.below(3) {
            0 if at < d.len() => d[at] = b,
            1 if at < d.len() => {
                d.remove(at);
            }
            _ => d.insert(at, b),
        }
    }
    d
}

fn same(db: &Path, since: Option<Timestamp>) {
    let now = Timestamp::parse("2026-12-03T12:00:00Z").unwrap();
    let store = Store::open_existing(db, true).unwrap();
    let mut fast = store.stats(since, now).unwrap();
    let conn = Connection::open(db).unwrap();
    let mut oracle = stats_by_sql(&conn, since, now);
    for s in [&mut fast, &mut oracle] {
        for t in &mut s.tools {
            t.decision_times.sort();
        }
    }
    assert_eq!(
        fast.tools.len(),
        oracle.tools.len(),
        "tools: {:#?}",
        names(&fast, &oracle)
    );
    for (f, o) in fast.tools.iter().zip(&oracle.tools) {
        assert_eq!(
            f,
            o,
            "tool {:?}",
            o.tool.as_deref().map(String::from_utf8_lossy)
        );
    }
    assert_eq!(fast, oracle);
}

fn names(a: &Stats, b: &Stats) -> (Vec<String>, Vec<String>) {
    let n = |s: &Stats| {
        s.tools
            .iter()
            .map(|t| format!("{:?}", t.tool.as_deref().map(String::from_utf8_lossy)))
            .collect()
    };
    (n(a), n(b))
}

fn fixture() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = support::tempdir();
    let db = dir.path().join("runs.db");
    support::fixture(
        &db,
        &[
            "--seed",
            "7",
            "--base-time",
            "2026-10-01T09:00:00Z",
            "--big",
            "20",
        ],
    );
    (dir, db)
}

#[test]
fn the_scan_counts_every_scenario_as_the_sql_function_scan_did() {
    let (_d, db) = fixture();
    same(&db, None);
    same(&db, Some(Timestamp::parse("2026-10-01T09:00:30Z").unwrap()));
}

#[test]
fn hostile_and_damaged_rows_are_counted_as_the_sql_function_scan_counts_them() {
    let (_d, db) = fixture();
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("BEGIN").unwrap();
    let mut rows = Rows::new(&conn);
    let statuses = ["pending", "approved", "rejected", "expired", "odd"];
    let times = [
        "2026-10-01T09:00:00Z",
        "2027-01-01T00:00:00Z",
        "",
        "garbage",
    ];
    let mut k = 0usize;
    for d in decisions() {
        for p in policies() {
            k += 1;
            let stored = if k.is_multiple_of(11) {
                As::Blob
            } else {
                As::Text
            };
            let status = if p.is_empty() && k.is_multiple_of(2) {
                "failed"
            } else {
                "done"
            };
            let id = rows.step(&d, &p, stored, status, times[k % times.len()]);
            if k.is_multiple_of(7) {
                let by = ["alice", "\u{1b}]52;c;x\u{7}", ""][k % 3];
                let created = times[(k / 7) % times.len()];
                rows.approval(
                    &id,
                    statuses[k % statuses.len()],
                    by,
                    created,
                    "2026-10-01T09:05:00Z",
                );
            }
        }
    }
    rows.approval("no-such-step", "pending", "", "2026-10-01T09:00:00Z", "");
    rows.approval(
        "no-such-step",
        "approved",
        "bob",
        "2026-10-01T09:00:00Z",
        "2026-10-01T09:01:00Z",
    );
    conn.execute_batch("COMMIT").unwrap();
    same(&db, None);
    same(&db, Some(Timestamp::parse("2026-10-01T09:00:30Z").unwrap()));
}

#[test]
fn mutated_documents_are_counted_as_the_sql_function_scan_counts_them() {
    let (_d, db) = fixture();
    let conn = Connection::open(&db).unwrap();
    let (decisions, policies) = (decisions(), policies());
    let bases_d: Vec<&[u8]> = decisions.iter().take(40).map(Vec::as_slice).collect();
    let bases_p: Vec<&[u8]> = policies
        .iter()
        .skip(1)
        .take(20)
        .map(Vec::as_slice)
        .collect();
    conn.execute_batch("BEGIN").unwrap();
    let mut rows = Rows::new(&conn);
    let mut rng = Rng(0x5eed_0021);
    for i in 0..4000usize {
        let d = bases_d[rng.below(bases_d.len())];
        let p = bases_p[rng.below(bases_p.len())];
        let (d, p) = match i % 3 {
            0 => (mutate(&mut rng, d), p.to_vec()),
            1 => (d.to_vec(), mutate(&mut rng, p)),
            _ => (mutate(&mut rng, d), mutate(&mut rng, p)),
        };
        let id = rows.step(&d, &p, As::Text, "done", "2026-10-01T09:00:00Z");
        if i.is_multiple_of(5) {
            rows.approval(
                &id,
                "approved",
                "carol",
                "2026-10-01T09:00:00Z",
                "2026-10-01T09:02:00Z",
            );
        }
    }
    conn.execute_batch("COMMIT").unwrap();
    same(&db, None);
}
