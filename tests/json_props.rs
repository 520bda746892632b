//! Properties of canonical JSON and the boundary check over generated documents, and a
//! cross-check against the independent Python implementation (/work/shared/tools/canon.py).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use countersign::runtime::json::gojson;
use countersign::runtime::json::{
    canonical_json, check_json, checked_canonical_json, content_hash, policy_form_unchecked,
    policy_json, try_canonical,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

#[derive(Debug, Clone)]
enum V {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<V>),
    Obj(BTreeMap<String, V>),
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,6}",
        "[<>&\"\\\\/\u{2028}\u{2029}\u{7f}\u{0}-\u{1f}az\u{e9}\u{65e5}\u{1f642}\u{ff61}]{0,8}",
    ]
}

fn value() -> impl Strategy<Value = V> {
    let leaf = prop_oneof![
        Just(V::Null),
        any::<bool>().prop_map(V::Bool),
        "-?(0|[1-9][0-9]{0,5})(\\.[0-9]{1,4})?([eE][+-]?[0-9]{1,2})?".prop_map(V::Num),
        text().prop_map(V::Str),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(V::Arr),
            prop::collection::btree_map(text(), inner, 0..6).prop_map(V::Obj),
        ]
    })
}

/// A tiny deterministic generator for printing choices.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn ws(r: &mut Rng, out: &mut Vec<u8>) {
    let spaces: [&[u8]; 6] = [b"", b"", b" ", b"\n  ", b"\t", b"\r\n"];
    out.extend_from_slice(spaces[r.pick(6) as usize]);
}

fn u_escape(out: &mut Vec<u8>, unit: u32, upper: bool) {
    let s = if upper {
        format!("\\u{unit:04X}")
    } else {
        format!("\\u{unit:04x}")
    };
    out.extend_from_slice(s.as_bytes());
}

/// Prints a string with randomly chosen (valid) escape spellings.
fn print_str(s: &str, r: &mut Rng, out: &mut Vec<u8>) {
    out.push(b'"');
    for c in s.chars() {
        let cp = u32::from(c);
        let choice = r.pick(3);
        if choice == 0 {
            let upper = r.pick(2) == 0;
            if cp >= 0x10000 {
                let v = cp - 0x10000;
                u_escape(out, 0xd800 + (v >> 10), upper);
                u_escape(out, 0xdc00 + (v & 0x3ff), upper);
            } else {
                u_escape(out, cp, upper);
            }
            continue;
        }
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '/' if choice == 1 => out.extend_from_slice(b"\\/"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            c if cp < 0x20 => u_escape(out, u32::from(c), false),
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// Prints `v` with shuffled keys, random whitespace and random escape spellings.
fn print(v: &V, r: &mut Rng, out: &mut Vec<u8>) {
    ws(r, out);
    match v {
        V::Null => out.extend_from_slice(b"null"),
        V::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        V::Num(n) => out.extend_from_slice(n.as_bytes()),
        V::Str(s) => print_str(s, r, out),
        V::Arr(items) => {
            out.push(b'[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                print(it, r, out);
            }
            ws(r, out);
            out.push(b']');
        }
        V::Obj(m) => {
            let mut members: Vec<(&String, &V)> = m.iter().collect();
            for i in (1..members.len()).rev() {
                members.swap(i, r.pick(i as u64 + 1) as usize);
            }
            out.push(b'{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                ws(r, out);
                print_str(k, r, out);
                ws(r, out);
                out.push(b':');
                print(v, r, out);
            }
            ws(r, out);
            out.push(b'}');
        }
    }
    ws(r, out);
}

fn printed(v: &V, seed: u64) -> Vec<u8> {
    let mut out = Vec::new();
    print(v, &mut Rng(seed | 1), &mut out);
    out
}

proptest! {
    #![proptest_config(Config { cases: 300, ..Config::default() })]

    #[test]
    fn canonical_form_is_idempotent(v in value(), seed in any::<u64>()) {
        let c = canonical_json(&printed(&v, seed));
        prop_assert_eq!(canonical_json(&c), c.clone());
        prop_assert_eq!(checked_canonical_json(&c), Ok(c));
    }

    #[test]
    fn key_order_whitespace_and_escapes_never_change_the_hash(
        v in value(), s1 in any::<u64>(), s2 in any::<u64>()
    ) {
        let (a, b) = (printed(&v, s1), printed(&v, s2));
        prop_assert_eq!(canonical_json(&a), canonical_json(&b));
        prop_assert_eq!(content_hash(&a), content_hash(&b));
    }

    #[test]
    fn generated_documents_pass_the_check_and_every_form_hashes_alike(
        v in value(), seed in any::<u64>()
    ) {
        let raw = printed(&v, seed);
        prop_assert_eq!(check_json(&raw), Ok(()));
        prop_assert_eq!(checked_canonical_json(&raw), Ok(canonical_json(&raw)));
        let policy = policy_json(&raw).unwrap();
        prop_assert_eq!(&policy, &policy_form_unchecked(&raw));
        prop_assert_eq!(content_hash(&policy), content_hash(&raw));
        let mut go = Vec::new();
        gojson::write_raw(&mut go, &raw).unwrap();
        prop_assert_eq!(content_hash(&go), content_hash(&raw));
        prop_assert!(!go.iter().any(|&c| c == b'<' || c == b'>' || c == b'&'));
    }

    #[test]
    fn check_and_canonical_never_panic_on_arbitrary_bytes(
        raw in prop::collection::vec(any::<u8>(), 0..64)
    ) {
        let checked = check_json(&raw);
        let canon = canonical_json(&raw);
        let _ = policy_form_unchecked(&raw);
        let mut out = Vec::new();
        let go = gojson::write_raw(&mut out, &raw);
        if checked.is_ok() {
            prop_assert!(try_canonical(&raw).is_some());
            prop_assert!(go.is_ok());
        }
        if try_canonical(&raw).is_none() {
            prop_assert_eq!(canon, raw);
        }
    }

    #[test]
    fn check_and_canonical_never_panic_on_damaged_json(
        v in value(), seed in any::<u64>(), edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4)
    ) {
        let mut raw = printed(&v, seed);
        for (at, b) in edits {
            if raw.is_empty() { break; }
            let at = at % raw.len();
            match b % 3 {
                0 => raw[at] = b,
                1 => { raw.remove(at); }
                _ => raw.insert(at, b"{}[]\",:\\u"[usize::from(b) % 9]),
            }
        }
        let _ = check_json(&raw);
        let _ = canonical_json(&raw);
        let _ = policy_json(&raw);
        let _ = gojson::write_raw(&mut Vec::new(), &raw);
    }
}

fn shared_dir() -> PathBuf {
    let up = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if up.join("tools").is_dir() {
        up
    } else {
        PathBuf::from("/work/shared")
    }
}

/// Documents for the Python cross-check: generated values, plus the lossy cases (invalid
/// UTF-8, lone surrogates, repeated keys, trailing data) both implementations decode.
fn cross_check_corpus() -> Vec<Vec<u8>> {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strat = value();
    let mut docs = Vec::new();
    for i in 0..300u64 {
        let v = strat.new_tree(&mut runner).expect("a value").current();
        let doc = printed(&v, i * 7919 + 1);
        let lossy = match i % 5 {
            0 => [&b"{\"d\":"[..], &doc, b",\"d\":", &printed(&v, i + 3), b"}"].concat(),
            1 => [
                &b"["[..],
                &doc,
                b",\"\xff\xe6\x97 \\ud800 \\udc00x \xed\xa0\x80\"]",
            ]
            .concat(),
            2 => [&doc[..], b" trailing {"].concat(),
            3 => [
                &b"{\"\xf0\x9f\x99\":"[..],
                &doc,
                b",\"\\ud83d\\ude42\":\"\\uD800\\u0041\"}",
            ]
            .concat(),
            _ => [
                &b"[\"<\\u2028>\",\"\xc0\xaf\",\""[..],
                "\u{2029}".as_bytes(),
                b"\",",
                &doc,
                b"]",
            ]
            .concat(),
        };
        docs.push(doc);
        docs.push(lossy);
    }
    docs
}

#[test]
fn canonical_json_agrees_with_the_independent_python_implementation() {
    let tools = shared_dir().join("tools");
    let script = format!(
        "import sys\nsys.path.insert(0, {:?})\nimport canon\nfor line in sys.stdin:\n    print(canon.canonical(bytes.fromhex(line.strip())).hex())\n",
        tools.display().to_string()
    );
    let child = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "SKIPPED: python3 is not available ({e}); the Python cross-check did not run"
            );
            return;
        }
    };
    let docs = cross_check_corpus();
    let input: String = docs.iter().map(|d| hex::encode(d) + "\n").collect();
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("python3 ran");
    writer.join().expect("writer").expect("write to python3");
    assert!(out.status.success(), "canon.py failed");
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), docs.len());
    for (doc, want) in docs.iter().zip(lines) {
        assert_eq!(
            hex::encode(canonical_json(doc)),
            want,
            "document {:?}",
            String::from_utf8_lossy(doc)
        );
    }
}
