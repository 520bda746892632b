//! Golden vectors for canonical JSON, the policy form, the boundary check and the hashes
//! (spec 4.2, 4.6, 5; /work/shared/golden).

use std::path::PathBuf;

use countersign::runtime::json::gojson::Object;
use countersign::runtime::json::{
    JsonError, approval_hash, canonical_json, check_json, checked_canonical_json, content_hash,
    event_hash, policy_form_unchecked, policy_json, sha256_hex, tool_spec_hash, try_canonical,
};

/// The shared directory: `<manifest>/../shared` in the final layout, else `/work/shared`.
fn shared_dir() -> PathBuf {
    let up = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if up.join("golden").is_dir() {
        up
    } else {
        PathBuf::from("/work/shared")
    }
}

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).expect("hex in content-hash.tsv")
}

#[test]
fn content_hash_golden() {
    let text = std::fs::read_to_string(shared_dir().join("golden/content-hash.tsv"))
        .expect("golden/content-hash.tsv is readable");
    let mut n = 0;
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 4, "line {line:?}");
        let (input, want, hash) = (unhex(f[1]), unhex(f[2]), f[3]);
        assert_eq!(
            canonical_json(&input),
            want,
            "vector #{}: canonical of {:?}",
            f[0],
            String::from_utf8_lossy(&input)
        );
        assert_eq!(content_hash(&input), hash, "vector #{}", f[0]);
        assert_eq!(sha256_hex(&want), hash, "vector #{}", f[0]);
        n += 1;
    }
    assert_eq!(n, 36, "all 36 vectors of spec 5.4 ran");
}

#[test]
fn canonical_json_matches_go_encoding() {
    let cases: &[(&[u8], &[u8])] = &[
        // invalid UTF-8: one U+FFFD per byte, Go's way (not a maximal subpart)
        (b"\"\xe6\x97\"", "\"\u{fffd}\u{fffd}\"".as_bytes()),
        (
            b"\"\xed\xa0\x80\"",
            "\"\u{fffd}\u{fffd}\u{fffd}\"".as_bytes(),
        ),
        (
            b"\"\xf0\x9f\x99\"",
            "\"\u{fffd}\u{fffd}\u{fffd}\"".as_bytes(),
        ),
        (b"\"\xc0\xaf\"", "\"\u{fffd}\u{fffd}\"".as_bytes()),
        // escaped lone surrogates and pairs
        (
            br#""\udc00\ud83d\ude42\ud800\u0041""#,
            "\"\u{fffd}🙂\u{fffd}A\"".as_bytes(),
        ),
        (
            br#""\ud800\ud800\udc00""#,
            "\"\u{fffd}\u{10000}\"".as_bytes(),
        ),
        // escapes: short forms, lowercase \u00xx, HTML and line separators, DEL raw
        (
            b"\"\\u0001\\u001F\\u007f\\u2028\\u2029\"",
            b"\"\\u0001\\u001f\x7f\\u2028\\u2029\"",
        ),
        ("\"\u{2028}\u{2029}\"".as_bytes(), b"\"\\u2028\\u2029\""),
        (
            br#"{"<":"&","a":">"}"#,
            br#"{"\u003c":"\u0026","a":"\u003e"}"#,
        ),
        // keys sorted by UTF-8 bytes, not UTF-16 units: U+FF61 sorts before U+1F600
        (
            "{\"😀\":1,\"｡\":2,\"z\":3}".as_bytes(),
            "{\"z\":3,\"｡\":2,\"😀\":1}".as_bytes(),
        ),
        // escaped and raw spellings of the same key collide; the last wins
        (br#"{"a":1,"\u0061":2}"#, br#"{"a":2}"#),
        (br#"{"a":{"x":1},"a":[2]}"#, br#"{"a":[2]}"#),
        // trailing data after the first value is ignored, as Go's Decoder does
        (b"1x", b"1"),
        (b"01", b"0"),
        (b"truex", b"true"),
        (b"\"s\"junk", b"\"s\""),
        (b"[1]]]", b"[1]"),
        (b"\t\r\n [ 1 , { } ]", b"[1,{}]"),
        // blank is null (Go's bytes.TrimSpace: Unicode white space)
        (b"\n\t \r", b"null"),
        ("\u{a0}\u{3000}".as_bytes(), b"null"),
    ];
    for (input, want) in cases {
        assert_eq!(
            String::from_utf8_lossy(&canonical_json(input)),
            String::from_utf8_lossy(want),
            "input {:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn canonical_json_hashes_malformed_input_raw() {
    for bad in [
        &b"{"[..],
        b"[1,]",
        b"{\"a\" 1}",
        b"tru",
        b"1.",
        b"-",
        b"1e",
        b"\"abc",
        b"\"a\x01\"",
        b"\"\\x\"",
        b"\"\\u12\"",
        b"[01]",
        b"{'a':1}",
        b"\xef\xbb\xbf{}",
        b"]",
    ] {
        assert_eq!(
            try_canonical(bad),
            None,
            "{:?}",
            String::from_utf8_lossy(bad)
        );
        assert_eq!(canonical_json(bad), bad);
        assert_eq!(content_hash(bad), sha256_hex(bad));
    }
}

#[test]
fn canonical_json_survives_deep_nesting() {
    // Go's scanner allows 10,000 levels; beyond that it fails, and the raw bytes are hashed.
    let ok = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    assert_eq!(canonical_json(ok.as_bytes()), ok.as_bytes());
    let deep = format!("{}{}", "[".repeat(10_001), "]".repeat(10_001));
    assert_eq!(try_canonical(deep.as_bytes()), None);
    let million = "[".repeat(1_000_000);
    assert_eq!(canonical_json(million.as_bytes()), million.as_bytes());
    let objs = format!("{}1{}", "{\"a\":".repeat(9_999), "}".repeat(9_999));
    assert_eq!(canonical_json(objs.as_bytes()), objs.as_bytes());
    assert_eq!(check_json(million.as_bytes()), Err(JsonError::TooDeep));
}

#[test]
fn canonical_json_is_the_hashed_form() {
    let raw = br#"{"s":"<\u00e9>","n":1.50}"#;
    let canon = checked_canonical_json(raw).unwrap();
    assert_eq!(canon, "{\"n\":1.50,\"s\":\"\\u003cé\\u003e\"}".as_bytes());
    assert_eq!(content_hash(raw), sha256_hex(&canon));
    // same form: key order, whitespace, escape spelling
    let same: &[&[u8]] = &[
        br#"{"n":1.50,"s":"<\u00e9>"}"#,
        "{ \"s\" : \"\\u003c\u{e9}\\u003e\" ,\n\"n\":1.50 }".as_bytes(),
    ];
    for s in same {
        assert_eq!(content_hash(s), content_hash(raw));
    }
    // different forms
    for (a, b) in [
        ("10", "10.0"),
        ("10", "1e1"),
        ("1250.5", "1250.50"),
        ("0", "-0"),
    ] {
        assert_ne!(content_hash(a.as_bytes()), content_hash(b.as_bytes()));
    }
    assert_ne!(content_hash(b"\"A\""), content_hash(b"\"a\""));
}

fn refused(raw: &[u8]) -> String {
    match check_json(raw) {
        Ok(()) => panic!("accepted {:?}", String::from_utf8_lossy(raw)),
        Err(e) => e.to_string(),
    }
}

#[test]
fn check_json_rejects_what_would_hash_lossily() {
    assert_eq!(refused(b""), "not valid JSON");
    assert_eq!(refused(b"  "), "not valid JSON");
    assert_eq!(refused(br#"{"a":1,"a":2}"#), r#"duplicate key "a""#);
    assert_eq!(refused(br#"{"s":"\ud800"}"#), r"unpaired surrogate \ud800");
    assert_eq!(
        refused(br#"{"s":"\uDC00\ud800"}"#),
        r"unpaired surrogate \uDC00"
    );
    assert_eq!(
        refused(br#"["\ud800\u0041"]"#),
        r"unpaired surrogate \ud800"
    );
    assert_eq!(refused(b"{\"s\":\"\xff\"}"), "not valid UTF-8");
    assert_eq!(refused(b"\"\xed\xa0\x80\""), "not valid UTF-8");
    assert_eq!(
        refused(br#"{"n":1e-10000000}"#),
        "number 1e-10000000 has an exponent beyond ±10000"
    );
    assert_eq!(refused(b"{} {}"), "not valid JSON");
    assert_eq!(refused(b"1x"), "not valid JSON");
    assert_eq!(refused(b"{"), "not valid JSON");
    let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
    assert_eq!(refused(deep.as_bytes()), "nested deeper than 256 levels");
    // nested objects are tracked separately; the key is Go-%q-quoted after decoding
    assert_eq!(
        refused(br#"{"a":{"b":1,"c":{"b":2}},"d":{"\u0062":1,"b":2}}"#),
        r#"duplicate key "b""#
    );
    assert_eq!(
        refused("{\"é\\n\\u0000\u{200b}\":1,\"é\\n\\u0000\u{200b}\":1}".as_bytes()),
        r#"duplicate key "é\n\x00\u200b""#
    );
    // the checks run in the spec's order, whatever the position in the document
    assert_eq!(
        refused(br#"{"a":1,"a":2,"s":"\udc00"}"#),
        r"unpaired surrogate \udc00"
    );
    assert_eq!(
        refused(br#"{"n":1e-99999,"a":1,"a":2}"#),
        r#"duplicate key "a""#
    );
    for ok in [
        &b"{}"[..],
        b"[]",
        b"1",
        b"\"s\"",
        br#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#,
        br#"{"a":1,"b":{"a":2}}"#,
        br#"[{"a":1},{"a":1}]"#,
        br#""\ud83d\ude42""#,
        "{\"é\":\"日本\"}".as_bytes(),
        b" \n{\"a\" : [ 1 , 2 ]}\t",
        br#""\\ud800""#,
    ] {
        assert_eq!(check_json(ok), Ok(()), "{:?}", String::from_utf8_lossy(ok));
    }
}

#[test]
fn check_json_refuses_deep_nesting() {
    let at = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert_eq!(check_json(at(256).as_bytes()), Ok(()));
    assert_eq!(check_json(at(257).as_bytes()), Err(JsonError::TooDeep));
    // brackets inside strings do not count, escaped quotes do not end a string
    let in_str = format!("[\"\\\"{}\"]", "[".repeat(1000));
    assert_eq!(check_json(in_str.as_bytes()), Ok(()));
    // depth runs first: needs no valid input, not even UTF-8
    let bad = format!("\u{fffd}{}\u{ff}", "{".repeat(257));
    let mut bytes = bad.into_bytes();
    bytes.push(0xff);
    assert_eq!(check_json(&bytes), Err(JsonError::TooDeep));
}

#[test]
fn check_json_refuses_numbers_past_the_bound() {
    let long = format!("1{}", "0".repeat(10_000));
    assert_eq!(
        refused(long.as_bytes()),
        "number 100000000000000000000000... is longer than 10000 characters"
    );
    let just = format!("0.{}", "1".repeat(9_998));
    assert_eq!(check_json(just.as_bytes()), Ok(()));
    assert_eq!(check_json(b"1e10000"), Ok(()));
    assert_eq!(check_json(b"1e-10000"), Ok(()));
    assert_eq!(check_json(b"1E+0000000010000"), Ok(()));
    assert_eq!(
        refused(b"1e10001"),
        "number 1e10001 has an exponent beyond ±10000"
    );
    assert_eq!(
        refused(b"-2.5E-000100000"),
        "number -2.5E-000100000 has an exponent beyond ±10000"
    );
    assert_eq!(
        refused(b"1e99999"),
        "number 1e99999 has an exponent beyond ±10000"
    );
    // a top-level number is not range-checked; a nested one is (Go's token decoder)
    assert_eq!(check_json(b"1e400"), Ok(()));
    assert_eq!(check_json(b"[1e-400]"), Ok(()));
    assert_eq!(
        refused(b"[1e400]"),
        "json: cannot unmarshal number 1e400 into Go value of type float64"
    );
    assert_eq!(
        refused(br#"{"n":-1.8e308}"#),
        "json: cannot unmarshal number -1.8e308 into Go value of type float64"
    );
    assert_eq!(check_json(br#"{"n":1.7976931348623157e308}"#), Ok(()));
    assert!(refused(b"[1e99999999999999999999999999]").starts_with("json: cannot unmarshal"));
    assert_eq!(
        refused(b"[1e-99999999999999999999999999]"),
        "number 1e-99999999999999999999999999 has an exponent beyond ±10000"
    );
    let tiny = format!("[0.{}1]", "0".repeat(9_990));
    assert_eq!(check_json(tiny.as_bytes()), Ok(()));
    // the range refusal is part of the token walk (check 5), before the length check (6)
    let nested_long = format!("[{long}]");
    assert!(refused(nested_long.as_bytes()).starts_with("json: cannot unmarshal number 1000"));
}

#[test]
fn policy_json_form() {
    let cases: &[(&[u8], &str)] = &[
        (br#""\u003c\u003e\u0026""#, "\"<>&\""),
        (br#""a\u2028b\u2029""#, "\"a\u{2028}b\u{2029}\""),
        (
            br#""q\"\\ \n\t\u0001 \u007f /""#,
            "\"q\\\"\\\\ \\n\\t\\u0001 \u{7f} /\"",
        ),
        (b"[10, 10.0, 1e1, -0, 1E+2]", "[10,10.0,1e1,-0,1E+2]"),
        (
            br#"{"b": {"d": 1, "c": [true, null]}, "a": "\ud83d\ude42"}"#,
            "{\"a\":\"🙂\",\"b\":{\"c\":[true,null],\"d\":1}}",
        ),
    ];
    for (raw, want) in cases {
        assert_eq!(
            String::from_utf8(policy_json(raw).unwrap()).unwrap(),
            *want,
            "{:?}",
            String::from_utf8_lossy(raw)
        );
    }
    for bad in [
        &b""[..],
        br#"{"a":1,"a":2}"#,
        b"{",
        b"\"\xff\"",
        br#""\ud800""#,
        b"1e99999",
    ] {
        assert!(
            policy_json(bad).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // the unchecked form keeps the last of a repeated key; empty is null
    assert_eq!(
        policy_form_unchecked(br#"{"a":1,"a":"<2>"}"#),
        br#"{"a":"<2>"}"#
    );
    assert_eq!(policy_form_unchecked(b""), b"null");
}

/// Vector B's raw inputs (golden/README.md).
fn raw_policy_args() -> Vec<u8> {
    "{\n  \"z\": {\"b\": 1.50, \"a\": \"make && rm <x> \u{2028} é \\u00e9 日本\"},\n  \"n\": 1e3\n}"
        .as_bytes()
        .to_vec()
}

fn raw_policy_schema() -> Vec<u8> {
    "{\n  \"type\": \"object\",\n  \"description\": \"a && b <c> \u{2028} é\",\n  \"properties\": {\"z\": {\"type\": \"object\"}, \"n\": {\"type\": \"number\", \"maximum\": 1e4, \"multipleOf\": 0.50}}\n}"
        .as_bytes()
        .to_vec()
}

/// The Go JSON of a ToolRequest (spec 2: spec fields in declaration order).
fn tool_request(
    (run, step): (&str, &str),
    name: &str,
    desc: &str,
    schema: &[u8],
    side: &str,
    timeout_ns: i64,
    args: &[u8],
) -> Vec<u8> {
    let spec = Object::new()
        .str("name", name)
        .str("description", desc)
        .raw("input_schema", schema)
        .unwrap()
        .str("side_effect", side)
        .int("timeout", timeout_ns)
        .finish();
    let mut req = Object::new();
    req.str("run_id", run)
        .str("step_id", step)
        .encoded("spec", &spec);
    req.raw("args", args).unwrap();
    req.finish()
}

#[test]
fn approval_hash_golden_a() {
    let req = tool_request(
        ("r1", "s1"),
        "push",
        "push <main> & tag",
        br#"{"type":"object"}"#,
        "remote_mutation",
        30_000_000_000,
        br#"{"n":7,"ref":"refs/heads/main"}"#,
    );
    let cap = br#"{"tool":"push","args":{"n":7}}"#;
    let pres = br#"{"title":"Publish <PR> & tag","lines":1.0}"#;
    let want = r#"{"capability":{"args":{"n":7},"tool":"push"},"kind":"remote_mutation","presentation":{"lines":1.0,"title":"Publish \u003cPR\u003e \u0026 tag"},"request":{"args":{"n":7,"ref":"refs/heads/main"},"run_id":"r1","spec":{"description":"push \u003cmain\u003e \u0026 tag","input_schema":{"type":"object"},"name":"push","side_effect":"remote_mutation","timeout":30000000000},"step_id":"s1"}}"#;
    let mut m = Object::new();
    m.raw("capability", cap)
        .unwrap()
        .str("kind", "remote_mutation");
    m.raw("presentation", pres)
        .unwrap()
        .encoded("request", &req);
    assert_eq!(
        String::from_utf8(canonical_json(&m.finish())).unwrap(),
        want
    );
    assert_eq!(
        approval_hash("remote_mutation", cap, pres, &req).unwrap(),
        "175bcfc7a7e3cdab6b98d7b50caf9f2a8e59d5208211b97de39a4b027c7fa0b2"
    );
    assert_eq!(
        sha256_hex(want.as_bytes()),
        approval_hash("remote_mutation", cap, pres, &req).unwrap()
    );
}

#[test]
fn approval_hash_unchanged_by_the_policy_form() {
    let (args, schema) = (raw_policy_args(), raw_policy_schema());
    let pargs = policy_json(&args).unwrap();
    assert_eq!(
        String::from_utf8(pargs.clone()).unwrap(),
        "{\"n\":1e3,\"z\":{\"a\":\"make && rm <x> \u{2028} é é 日本\",\"b\":1.50}}"
    );
    assert_eq!(
        String::from_utf8(policy_form_unchecked(&schema)).unwrap(),
        "{\"description\":\"a && b <c> \u{2028} é\",\"properties\":{\"n\":{\"maximum\":1e4,\"multipleOf\":0.50,\"type\":\"number\"},\"z\":{\"type\":\"object\"}},\"type\":\"object\"}"
    );
    let mut cap = b"{\"tool\":\"sh\",\"args\":".to_vec();
    cap.extend_from_slice(&pargs);
    cap.push(b'}');
    let want = "8441b46fd5ab497a17788f45d057d8ec122a0bbba20f39f3d45fa37061479a6b";
    // the request carries the arguments as the agent wrote them ...
    let req = tool_request(
        ("id-01", "id-02"),
        "sh",
        "sh",
        &schema,
        "remote_mutation",
        2_000_000_000,
        &args,
    );
    assert_eq!(
        approval_hash("remote_mutation", &cap, &cap, &req).unwrap(),
        want
    );
    // ... and the policy form of them in the request would hash the same
    let req2 = tool_request(
        ("id-01", "id-02"),
        "sh",
        "sh",
        &schema,
        "remote_mutation",
        2_000_000_000,
        &pargs,
    );
    assert_eq!(
        approval_hash("remote_mutation", &cap, &cap, &req2).unwrap(),
        want
    );
}

#[test]
fn approval_hash_refuses_an_encoding_error() {
    let req = tool_request(("r", "s"), "t", "d", b"{}", "read_only", 1, b"{}");
    assert_eq!(
        approval_hash("k", b"{", b"{}", &req),
        Err(JsonError::Invalid)
    );
    assert_eq!(
        approval_hash("k", b"{}", b"[1,]", &req),
        Err(JsonError::Invalid)
    );
    assert_eq!(
        approval_hash("k", b"{}", b"{}", b""),
        Err(JsonError::Invalid)
    );
    // empty capability and presentation are {}
    assert_eq!(
        approval_hash("k", b"", b"", &req),
        approval_hash("k", b"{}", b" {} ", &req)
    );
}

#[test]
fn tool_spec_hash_is_the_hash_of_the_canonical_spec() {
    let spec = Object::new()
        .str("name", "push")
        .str("description", "a <b>")
        .raw("input_schema", b"{ \"type\" : \"object\" }")
        .unwrap()
        .str("side_effect", "read_only")
        .int("timeout", 5)
        .finish();
    let canon = br#"{"description":"a \u003cb\u003e","input_schema":{"type":"object"},"name":"push","side_effect":"read_only","timeout":5}"#;
    assert_eq!(tool_spec_hash(&spec), sha256_hex(canon));
}

#[test]
fn event_hash_golden() {
    assert_eq!(
        event_hash("", 1, "r", "", "2026-10-01T09:00:00Z", "run.started", "{}"),
        "215d2d4feca5e8542594838002508a9d6739ae568ac25b15fa28058b3943b60f"
    );
    assert_eq!(
        sha256_hex(b"0:,1:1,1:r,0:,20:2026-10-01T09:00:00Z,11:run.started,2:{},"),
        "215d2d4feca5e8542594838002508a9d6739ae568ac25b15fa28058b3943b60f"
    );
    // the byte length, not the char count, prefixes each field
    assert_eq!(
        event_hash("p", 2, "é", "", "", "", ""),
        sha256_hex("1:p,1:2,2:é,0:,0:,0:,0:,".as_bytes())
    );
}

#[test]
fn gojson_writes_what_go_marshal_writes() {
    let mut out = Vec::new();
    countersign::runtime::json::gojson::write_string(
        &mut out,
        "q\"\\/<>&\u{8}\u{c}\n\r\t\u{1}\u{7f}\u{2028}\u{2029}é",
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "\"q\\\"\\\\/\\u003c\\u003e\\u0026\\b\\f\\n\\r\\t\\u0001\u{7f}\\u2028\\u2029é\""
    );
    // RawMessage: validated, compacted, HTML-escaped; key order and duplicates kept
    let mut out = Vec::new();
    countersign::runtime::json::gojson::write_raw(
        &mut out,
        "{ \"b\" : [1 , 2.50],\n \"a\":\"<x> \u{2028}\\u003c\", \"b\": null }".as_bytes(),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"b":[1,2.50],"a":"\u003cx\u003e \u2028\u003c","b":null}"#
    );
    // like Go's compact, UTF-8 validity is not its business
    let mut out = Vec::new();
    countersign::runtime::json::gojson::write_raw(&mut out, b" \"\xff\" ").unwrap();
    assert_eq!(out, b"\"\xff\"");
    for bad in [&b""[..], b" ", b"{} {}", b"[1,]", b"\"\x01\"", b"01"] {
        let mut out = Vec::new();
        assert_eq!(
            countersign::runtime::json::gojson::write_raw(&mut out, bad),
            Err(JsonError::Invalid),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // the object builder writes fields in the order added, omitting empty optional ones
    let o = Object::default()
        .str("s", "<")
        .str_opt("e", "")
        .int("i", -3)
        .int_opt("z", 0)
        .bool("b", true)
        .raw_opt("r", b"")
        .unwrap()
        .finish();
    assert_eq!(o, br#"{"s":"\u003c","i":-3,"b":true}"#);
}
