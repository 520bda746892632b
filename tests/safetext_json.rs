//! JSON rendering for arguments and presentations: sorted keys, escaped strings, cut long
//! strings, numbers as written, duplicate keys shown, deep nesting refused without a crash.

use countersign::safetext::{
    Badge, Form, JsonError, JsonNode, JsonOptions, MAX_JSON_DEPTH, Options, json_fields,
    parse_json, render_json,
};

fn render(json: &str) -> Vec<String> {
    let node = parse_json(json.as_bytes()).unwrap();
    render_json(&node, &JsonOptions::default())
        .iter()
        .map(|l| l.to_string())
        .collect()
}

#[test]
fn json_renders_sorted_keys_indented() {
    assert_eq!(
        render(r#"{"z":1,"a":{"y":2,"b":[true,null]},"e":{},"f":[]}"#),
        [
            "{",
            r#"  "a": {"#,
            r#"    "b": ["#,
            "      true,",
            "      null",
            "    ],",
            r#"    "y": 2"#,
            "  },",
            r#"  "e": {},"#,
            r#"  "f": [],"#,
            r#"  "z": 1"#,
            "}",
        ]
    );
    assert_eq!(render(r#""just a string""#), [r#""just a string""#]);
}

#[test]
fn json_numbers_keep_their_literal_text() {
    assert_eq!(
        render(r#"{"a":1e3,"b":1.50,"c":-0,"d":123456789012345678901234567890,"e":1E+2}"#),
        [
            "{",
            r#"  "a": 1e3,"#,
            r#"  "b": 1.50,"#,
            r#"  "c": -0,"#,
            r#"  "d": 123456789012345678901234567890,"#,
            r#"  "e": 1E+2"#,
            "}",
        ]
    );
}

#[test]
fn json_escapes_that_decode_to_controls_are_escaped_again() {
    assert_eq!(
        render(r#"{"a":"\u001b[31mred\u001b[0m\u202e\u0000\n"}"#),
        ["{", r#"  "a": "\x1b[31mred\x1b[0m\u{202e}\x00\n""#, "}"]
    );
    // Quotes inside strings and keys are escaped so they cannot close the string.
    assert_eq!(
        render(r#"{"k\"ey":"a\"b\\c"}"#),
        ["{", r#"  "k\"ey": "a\"b\\c""#, "}"]
    );
}

#[test]
fn json_strings_with_invalid_utf8_or_lone_surrogates_show_bytes() {
    let node = parse_json(b"[\"ok \xff\", \"\\ud800x\"]").unwrap();
    let lines: Vec<String> = render_json(&node, &JsonOptions::default())
        .iter()
        .map(|l| l.to_string())
        .collect();
    assert_eq!(lines, ["[", r#"  "ok \xff","#, r#"  "\xed\xa0\x80x""#, "]"]);
    // A surrogate pair decodes to its character.
    assert_eq!(render(r#""\ud83d\ude42""#), ["\"🙂\""]);
}

#[test]
fn json_long_strings_are_cut_head_and_tail_with_counts() {
    let long = "x".repeat(10_000);
    let node = parse_json(format!(r#"{{"body":"{long}"}}"#).as_bytes()).unwrap();
    let opts = JsonOptions {
        string_width: 40,
        ..JsonOptions::default()
    };
    let lines = render_json(&node, &opts);
    assert_eq!(
        lines[1].to_string(),
        format!(
            r#"  "body": "{}…[+9976 bytes]…{}""#,
            "x".repeat(12),
            "x".repeat(12)
        )
    );
    assert!(lines[1].is_cut() && lines[1].badges().contains(Badge::Cut));
    // The full value stays reachable through the field list.
    let fields = json_fields(&node, Options::security());
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0].path.to_string(), "body");
    assert_eq!(fields[0].value.to_string(), long);
    assert!(!fields[0].value.is_cut());
}

#[test]
fn json_duplicate_keys_are_all_shown_and_flagged() {
    let node = parse_json(br#"{"a":1,"b":0,"a":2}"#).unwrap();
    let lines = render_json(&node, &JsonOptions::default());
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    assert_eq!(
        text,
        ["{", r#"  "a": 1,"#, r#"  "a": 2,"#, r#"  "b": 0"#, "}"]
    );
    assert!(!lines[1].badges().contains(Badge::DuplicateKey));
    assert!(lines[2].badges().contains(Badge::DuplicateKey));
    let fields = json_fields(&node, Options::security());
    let paths: Vec<String> = fields.iter().map(|f| f.path.to_string()).collect();
    assert_eq!(paths, ["a", "a", "b"]);
    assert!(fields[1].path.badges().contains(Badge::DuplicateKey));
}

#[test]
fn json_deep_nesting_is_refused_without_a_crash() {
    let ok = format!(
        "{}{}",
        "[".repeat(MAX_JSON_DEPTH),
        "]".repeat(MAX_JSON_DEPTH)
    );
    let node = parse_json(ok.as_bytes()).unwrap();
    assert_eq!(
        render_json(&node, &JsonOptions::default()).len(),
        2 * MAX_JSON_DEPTH - 1
    );
    let deep = "[".repeat(MAX_JSON_DEPTH + 2);
    assert!(matches!(
        parse_json(deep.as_bytes()),
        Err(JsonError::TooDeep { .. })
    ));
    let very_deep = "{\"a\":".repeat(1_000_000);
    assert!(matches!(
        parse_json(very_deep.as_bytes()),
        Err(JsonError::TooDeep { .. })
    ));
}

#[test]
fn json_that_does_not_parse_says_where() {
    for (input, at) in [
        ("", 0),
        ("{", 1),
        (r#"{"a":1,}"#, 7),
        ("[1 2]", 3),
        ("01", 1),
        ("1.", 2),
        ("nul", 0),
        (r#""\x""#, 3),
        ("{} x", 3),
    ] {
        match parse_json(input.as_bytes()) {
            Err(JsonError::Syntax { at: got, .. }) => assert_eq!(got, at, "{input:?}"),
            other => panic!("{input:?}: {other:?}"),
        }
    }
    let err = parse_json(b"{").unwrap_err().to_string();
    assert!(err.starts_with("the value is not JSON"), "{err}");
}

#[test]
fn json_fields_list_every_leaf_with_its_full_escaped_value() {
    let node = parse_json(
        r#"{"cmd":"rm\u200b -rf /","list":[1,"two",{}],"we ird":{"x\u202e":null},"t":true,"text":"a\nb"}"#
            .as_bytes(),
    )
    .unwrap();
    let fields = json_fields(&node, Options::security().with_form(Form::MultiLine));
    let shown: Vec<(String, String, bool)> = fields
        .iter()
        .map(|f| (f.path.to_string(), f.value.to_string(), f.is_string))
        .collect();
    assert_eq!(
        shown,
        [
            ("cmd".into(), r"rm\u{200b} -rf /".into(), true),
            ("list[0]".into(), "1".into(), false),
            ("list[1]".into(), "two".into(), true),
            ("list[2]".into(), "{}".into(), false),
            ("t".into(), "true".into(), false),
            ("text".into(), "a\nb".into(), true),
            (r#"["we ird"]["x\u{202e}"]"#.into(), "null".into(), false),
        ]
    );
    assert_eq!(fields[5].value.line_count(), 2);
    assert!(fields[6].path.badges().contains(Badge::Bidi));
    assert!(fields[0].value.badges().contains(Badge::Invisible));
}

#[test]
fn json_node_keeps_stored_order_and_decoded_bytes() {
    let node = parse_json(br#"{"b":"\u00e9","a":[]}"#).unwrap();
    assert_eq!(
        node,
        JsonNode::Object(vec![
            (b"b".to_vec(), JsonNode::String("é".as_bytes().to_vec())),
            (b"a".to_vec(), JsonNode::Array(vec![])),
        ])
    );
}
