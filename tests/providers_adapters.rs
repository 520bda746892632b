//! The three adapters against local HTTP servers on 127.0.0.1 started by each test: request
//! mapping, replies (tool use, text only, max tokens, refusal), error classes (429 with
//! Retry-After, 5xx, 400, a redirect, a body over the cap, a connection dropped mid-body,
//! implausible usage) and key hygiene. No test reaches beyond this machine.

mod providers_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use countersign::providers::anthropic::{self, Anthropic};
use countersign::providers::http::{self as phttp, Header};
use countersign::providers::ollama::{self, Ollama};
use countersign::providers::openai::{self, OpenAi};
use countersign::providers::{ChatRequest, ChatResponse, ContentBlock, Failure, Message, Secret};
use countersign::runtime::model::{Model, ModelError, ModelReply, Usage};
use countersign::runtime::types::ToolSpec;
use providers_support::*;

const KEY: &str = "sk-SECRET-4242";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        system: "be brief".into(),
        messages: vec![
            Message::user(vec![ContentBlock::text("refund order 7")]),
            Message::assistant(vec![
                ContentBlock::text("looking"),
                ContentBlock::tool_use("t1", "lookup", br#"{"id":9007199254740993}"#),
            ]),
            Message::user(vec![ContentBlock::tool_result("t1", "{\"total\":5}", false)]),
        ],
        tools: vec![ToolSpec {
            name: "refund".into(),
            description: "refund an order".into(),
            input_schema: br#"{"type":"object","properties":{"amount":{"type":"number","maximum":1e3}},"required":["amount",7]}"#.to_vec(),
            side_effect: "remote_mutation".into(),
            timeout_ns: 0,
            terminal: false,
        }],
        max_output_tokens: 300,
    }
}

fn call(m: &dyn Model) -> Result<ChatResponse, ModelError> {
    let r = request().to_model_request().unwrap();
    rt().block_on(m.generate(r))
        .map(|reply: ModelReply| ChatResponse::decode(&reply.body).unwrap())
}

fn openai_at(url: &str, key: &str) -> OpenAi {
    OpenAi::new_with_env(
        openai::Config {
            model: "gpt-x".into(),
            base_url: url.into(),
            api_key: Secret::new(key),
            ..Default::default()
        },
        &|_| None,
    )
    .unwrap()
}

fn anthropic_at(url: &str) -> Anthropic {
    Anthropic::new_with_env(
        anthropic::Config {
            model: "claude-opus-5".into(),
            base_url: url.into(),
            api_key: Secret::new(KEY),
            ..Default::default()
        },
        &|_| None,
    )
    .unwrap()
}

fn ollama_at(url: &str) -> Ollama {
    Ollama::new_with_env(
        ollama::Config {
            model: "qwen".into(),
            host: url.into(),
            ..Default::default()
        },
        &|_| None,
    )
    .unwrap()
}

fn u(i: i64, o: i64, c: i64) -> Usage {
    Usage {
        input_tokens: i,
        output_tokens: o,
        cached_input_tokens: c,
    }
}

const OA_TOOL: &str = r#"{"choices":[{"message":{"content":"ok","tool_calls":[{"id":"c1","type":"function","function":{"name":"refund","arguments":" {\"amount\": 12345678901234567890.5} "}},{"id":"c2","type":"function","function":{"name":"wipe","arguments":""}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5000,"completion_tokens":300,"prompt_tokens_details":{"cached_tokens":1200}}}"#;

#[test]
fn openai_maps_the_request_tool_calls_and_usage() {
    let s = Server::start(vec![json(200, OA_TOOL)]);
    let m = openai_at(&format!("{}/v1/", s.url()), KEY);
    assert_eq!(m.name(), "openai:gpt-x");
    let r = call(&m).unwrap();
    assert_eq!(r.stop_reason, "tool_use");
    assert_eq!(r.usage, u(5000, 300, 1200));
    assert_eq!(r.text, "ok");
    assert_eq!(r.tool_uses.len(), 2);
    assert_eq!(
        r.tool_uses[0].args,
        br#"{"amount": 12345678901234567890.5}"#.to_vec(),
        "arguments passed on as sent"
    );
    assert_eq!(r.tool_uses[1].args, b"{}".to_vec());
    assert_eq!(r.raw, OA_TOOL.as_bytes(), "the provider's bytes kept");
    let (head, body) = s.request(0);
    assert!(
        head.starts_with("POST /v1/chat/completions HTTP/1.1"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("authorization: bearer {KEY}").to_ascii_lowercase())
    );
    let body = String::from_utf8(body).unwrap();
    assert!(
        body.contains(r#""arguments":"{\"id\":9007199254740993}""#),
        "{body}"
    );
    assert!(
        body.contains(r#""maximum":1e3"#),
        "the schema passes through as written: {body}"
    );
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["messages"][0],
        serde_json::json!({"role":"system","content":"be brief"})
    );
    assert_eq!(
        v["messages"][3],
        serde_json::json!({"role":"tool","tool_call_id":"t1","content":"{\"total\":5}"})
    );
    assert_eq!(v["tool_choice"], "auto");
    assert_eq!(v["parallel_tool_calls"], false);
    assert_eq!(v["max_tokens"], 300);
    assert_eq!(v["temperature"], 0);
}

/// A tool call whose arguments are a JSON object the runtime refuses (a key twice, a number
/// past any float) is refused saying so, not as "not a JSON object".
#[test]
fn openai_arguments_refused_for_what_they_hold_say_why() {
    let dup = r#"{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"refund","arguments":"{\"a\":1,\"a\":2}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":3}}"#;
    let huge = r#"{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"refund","arguments":"{\"a\":1e400}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":3}}"#;
    let errored = r#"{"error":{"message":"quota exceeded"}}"#;
    let s = Server::start(vec![json(200, dup), json(200, huge), json(200, errored)]);
    let m = openai_at(&s.url(), "");
    for _ in 0..2 {
        match call(&m) {
            Err(ModelError::Served { message, .. }) => {
                assert!(
                    message.starts_with(
                        "openai: tool call refund: arguments are a JSON object the runtime refuses ("
                    ),
                    "{message}"
                );
                assert!(!message.contains("not a JSON object"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    // An error without a type is said without an empty label.
    match call(&m) {
        Err(ModelError::Served { message, .. }) => assert_eq!(message, "openai: quota exceeded"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn openai_replies_and_errors_are_classified() {
    let text = r#"{"choices":[{"message":{"content":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2}}"#;
    let length = r#"{"choices":[{"message":{"content":"","tool_calls":[{"id":"c","function":{"name":"refund","arguments":"{\"a\":"}}]},"finish_reason":"length"}],"usage":{"prompt_tokens":10,"completion_tokens":300}}"#;
    let filtered = r#"{"choices":[{"message":{"content":"no"},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":10,"completion_tokens":1}}"#;
    let bad_args = r#"{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"refund","arguments":"[1]"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5000,"completion_tokens":300}}"#;
    let bad_usage = r#"{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":11}}}"#;
    let neg_usage = r#"{"choices":[],"usage":{"prompt_tokens":-1,"completion_tokens":2}}"#;
    let s = Server::start(vec![
        json(200, text),
        json(200, length),
        json(200, filtered),
        json(200, bad_args),
        json(200, bad_usage),
        json(200, neg_usage),
        with_header(429, "retry-after", "7", r#"{"error":"slow down"}"#),
        json(503, "upstream busy"),
        json(400, r#"{"error":{"message":"bad"}}"#),
        json(200, "<html>not json</html>"),
    ]);
    let m = openai_at(&s.url(), "");
    let r = call(&m).unwrap();
    assert_eq!((r.text.as_str(), r.stop_reason.as_str()), ("", "end_turn"));
    let r = call(&m).unwrap();
    assert_eq!(
        (r.stop_reason.as_str(), r.tool_uses.len(), r.usage),
        ("max_tokens", 0, u(10, 300, 0))
    );
    let r = call(&m).unwrap();
    assert_eq!((r.stop_reason.as_str(), r.tool_uses.len()), ("refusal", 0));
    match call(&m) {
        Err(ModelError::Served { message, usage }) => {
            assert_eq!(
                usage,
                u(5000, 300, 0),
                "an unusable reply is charged what it reported"
            );
            assert_eq!(
                message,
                "openai: tool call refund: arguments are not a JSON object: [1]"
            );
        }
        other => panic!("{other:?}"),
    }
    match call(&m) {
        Err(ModelError::UnusableUsage(m)) => assert!(
            m.contains("cached input tokens 11 exceed input tokens 10"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    match call(&m) {
        Err(ModelError::UnusableUsage(m)) => {
            assert!(m.contains("usage.prompt_tokens is -1, not a count"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    match call(&m) {
        Err(ModelError::RetryAfter { message, after }) => {
            assert_eq!(after, Duration::from_secs(7));
            assert_eq!(message, r#"transient: openai: 429: {"error":"slow down"}"#);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        call(&m).unwrap_err(),
        ModelError::Transient("transient: openai: 503: upstream busy".into())
    );
    assert_eq!(
        call(&m).unwrap_err(),
        ModelError::Fatal(r#"openai: 400: {"error":{"message":"bad"}}"#.into())
    );
    assert!(
        matches!(call(&m), Err(ModelError::Served { ref message, usage }) if message.starts_with("openai: decode:") && usage == Usage::default())
    );
    assert!(
        !s.request(0)
            .0
            .to_ascii_lowercase()
            .contains("authorization"),
        "no key, no Authorization header"
    );
    assert!(
        !s.body_json(0)
            .as_object()
            .unwrap()
            .contains_key("max_tokens")
            || s.body_json(0)["max_tokens"] == 300
    );
}

#[test]
fn a_body_over_the_cap_is_permanent_and_a_cut_body_is_ambiguous() {
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(16 * 1024 * 1024));
    let s = Server::start(vec![
        json(200, &big),
        cut_off(5000, 100),
        json(200, &"y".repeat(16 * 1024 * 1024)),
    ]);
    {
        let m = Box::new(openai_at(&s.url(), "")) as Box<dyn Model>;
        assert_eq!(
            call(m.as_ref()).unwrap_err(),
            ModelError::Fatal(
                "providers: response body too large: over the 16777216-byte limit".into()
            )
        );
        match call(m.as_ref()) {
            Err(ModelError::Ambiguous(e)) => assert!(e.contains("cut off after 109 bytes"), "{e}"),
            other => panic!("{other:?}"),
        }
        // Exactly the limit reads (and then fails to decode: charged nothing, not retried).
        assert!(matches!(call(m.as_ref()), Err(ModelError::Served { .. })));
    }
    // The same for the other two adapters.
    let s = Server::start(vec![
        json(200, &big),
        cut_off(5000, 10),
        json(200, &big),
        cut_off(5000, 10),
    ]);
    let a = anthropic_at(&s.url());
    let o = ollama_at(&s.url());
    for m in [&a as &dyn Model, &o as &dyn Model] {
        assert!(matches!(call(m), Err(ModelError::Fatal(ref e)) if e.contains("too large")));
        assert!(matches!(call(m), Err(ModelError::Ambiguous(_))));
    }
}

#[test]
fn a_refused_connection_is_transient() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let m = openai_at(&format!("http://{addr}"), KEY);
    assert!(
        matches!(call(&m), Err(ModelError::Transient(ref e)) if !e.contains(KEY)),
        "{:?}",
        call(&m)
    );
}

const AN_TOOL: &str = r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"text","text":"checking"},{"type":"tool_use","id":"tu_1","name":"refund","input":{"amount":9007199254740993}},{"type":"text","text":"then"}],"stop_reason":"tool_use","usage":{"input_tokens":100,"output_tokens":40,"cache_read_input_tokens":2000,"cache_creation_input_tokens":501,"cache_creation":{"ephemeral_1h_input_tokens":100,"ephemeral_5m_input_tokens":401}}}"#;

#[test]
fn anthropic_maps_tool_use_and_folds_cache_usage() {
    let s = Server::start(vec![
        json(200, AN_TOOL),
        json(
            200,
            r#"{"content":[{"type":"text","text":"no"}],"stop_reason":"refusal","usage":{"input_tokens":5,"output_tokens":1}}"#,
        ),
        json(
            200,
            r#"{"content":[{"type":"tool_use","id":"x","name":"refund","input":{}}],"stop_reason":"max_tokens","usage":{"input_tokens":5,"output_tokens":300}}"#,
        ),
        json(
            200,
            r#"{"content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":{"input_tokens":100,"output_tokens":3,"cache_read_input_tokens":2000,"cache_creation_input_tokens":401}}"#,
        ),
        with_header(
            529,
            "retry-after",
            "3",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"overloaded"}}"#,
        ),
        json(
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
        ),
        json(
            200,
            r#"{"content":[],"usage":{"input_tokens":5,"output_tokens":"12"}}"#,
        ),
        json(200, r#"{"content":"#),
    ]);
    let m = anthropic_at(&s.url());
    assert_eq!(m.name(), "anthropic:claude-opus-5");
    let r = call(&m).unwrap();
    // 100 + 2000 read + ceil(1.25 × 401) + 2 × 100 = 100 + 2000 + 502 + 200
    assert_eq!(r.usage, u(2802, 40, 2000));
    assert_eq!(r.text, "checking\nthen");
    assert_eq!(r.tool_uses.len(), 1);
    assert_eq!(
        r.tool_uses[0].args,
        br#"{"amount":9007199254740993}"#.to_vec()
    );
    assert_eq!(r.stop_reason, "tool_use");
    let (head, body) = s.request(0);
    let lower = head.to_ascii_lowercase();
    assert!(head.starts_with("POST /v1/messages HTTP/1.1"), "{head}");
    assert!(lower.contains(&format!("x-api-key: {}", KEY.to_ascii_lowercase())));
    assert!(lower.contains("anthropic-version: 2023-06-01"));
    assert!(!lower.contains("authorization"));
    let b = String::from_utf8(body).unwrap();
    assert!(b.contains(r#""input":{"id":9007199254740993}"#), "{b}");
    let v: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v["max_tokens"], 300);
    assert_eq!(
        v["system"],
        serde_json::json!([{"type":"text","text":"be brief"}])
    );
    assert_eq!(
        v["tool_choice"],
        serde_json::json!({"type":"auto","disable_parallel_tool_use":true})
    );
    assert_eq!(
        v["tools"][0]["input_schema"]["required"],
        serde_json::json!(["amount"])
    );
    assert!(b.contains(r#""maximum":1e3"#));
    assert_eq!(
        v["messages"][2]["content"][0],
        serde_json::json!({"type":"tool_result","tool_use_id":"t1","content":"{\"total\":5}","is_error":false})
    );
    let r = call(&m).unwrap();
    assert_eq!((r.stop_reason.as_str(), r.tool_uses.len()), ("refusal", 0));
    let r = call(&m).unwrap();
    assert_eq!(
        (r.stop_reason.as_str(), r.tool_uses.len(), r.usage),
        ("max_tokens", 0, u(5, 300, 0))
    );
    let r = call(&m).unwrap();
    assert_eq!(
        r.usage,
        u(100 + 2000 + 502, 3, 2000),
        "an undivided write is charged at 1.25"
    );
    match call(&m) {
        Err(ModelError::RetryAfter { message, after }) => {
            assert_eq!(after, Duration::from_secs(3));
            assert!(
                message.starts_with("transient: anthropic: 529: "),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    match call(&m) {
        Err(e @ ModelError::Fatal(_)) => assert!(!format!("{e:?}{e}").contains("SECRET")),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(call(&m), Err(ModelError::UnusableUsage(ref e)) if e.contains("usage.output_tokens is \"12\", not a count"))
    );
    assert!(
        matches!(call(&m), Err(ModelError::Served { ref message, .. }) if message.starts_with("anthropic: decode:"))
    );
}

#[test]
fn anthropic_construction_rules() {
    let mk = |c: anthropic::Config, env: Option<&str>| {
        Anthropic::new_with_env(c, &|k| {
            (k == "ANTHROPIC_API_KEY")
                .then(|| env.map(String::from))
                .flatten()
        })
    };
    let base = anthropic::Config {
        model: "claude-opus-5".into(),
        ..Default::default()
    };
    assert_eq!(
        mk(base.clone(), None).unwrap_err(),
        "anthropic: no API key: set Config.APIKey or ANTHROPIC_API_KEY"
    );
    assert!(mk(base.clone(), Some("k")).is_ok());
    let unpriced = anthropic::Config {
        model: "claude-9".into(),
        ..base.clone()
    };
    assert!(
        mk(unpriced.clone(), Some("k"))
            .unwrap_err()
            .contains("no price for this model")
    );
    assert!(
        mk(
            anthropic::Config {
                name: "mine".into(),
                ..unpriced
            },
            Some("k")
        )
        .is_ok()
    );
    let big = anthropic::Config {
        max_tokens: 32000,
        ..base.clone()
    };
    assert!(
        mk(big, Some("k"))
            .unwrap_err()
            .contains("max_tokens 32000 is too large")
    );
    let plain = anthropic::Config {
        base_url: "http://api.example.com/".into(),
        ..base.clone()
    };
    assert_eq!(
        mk(plain, Some("k")).unwrap_err(),
        "anthropic: refusing to send an API key over plain http to api.example.com"
    );
    let p = anthropic::prices();
    assert_eq!(p.len(), 12);
    assert!(p.contains_key("anthropic:claude-opus-5") && !p.contains_key("claude-opus-5"));
    assert!(
        p.values()
            .all(|v| v.input > 0 && v.output > 0 && v.cached_input > 0)
    );
}

#[test]
fn ollama_maps_the_request_and_replies() {
    let s = Server::start(vec![
        json(
            200,
            r#"{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"refund","arguments":{"amount":5}}}]},"done_reason":"stop","prompt_eval_count":7,"eval_count":2}"#,
        ),
        json(
            200,
            r#"{"message":{"content":"cut"},"done_reason":"length","prompt_eval_count":7,"eval_count":300}"#,
        ),
        json(
            200,
            r#"{"error":"context length exceeded","prompt_eval_count":7,"eval_count":2}"#,
        ),
        json(
            200,
            r#"{"message":{"tool_calls":[{"function":{"name":"refund","arguments":[1]}}]},"prompt_eval_count":7,"eval_count":2}"#,
        ),
        with_header(429, "retry-after", "3", "busy"),
        json(404, "model not found"),
        json(
            200,
            r#"{"message":{"content":"x"},"prompt_eval_count":1.5,"eval_count":2}"#,
        ),
    ]);
    let m = ollama_at(&s.url());
    assert_eq!(m.name(), "ollama:qwen");
    let r = call(&m).unwrap();
    assert_eq!((r.stop_reason.as_str(), r.usage), ("tool_use", u(7, 2, 0)));
    assert!(
        r.tool_uses[0].id.starts_with("call_"),
        "a missing id is synthesized"
    );
    assert_eq!(r.tool_uses[0].args, br#"{"amount":5}"#.to_vec());
    let (head, _) = s.request(0);
    assert!(head.starts_with("POST /api/chat HTTP/1.1"));
    let v = s.body_json(0);
    assert_eq!(v["stream"], false);
    assert_eq!(
        v["options"],
        serde_json::json!({"temperature":0,"num_ctx":32768,"num_predict":300})
    );
    assert_eq!(
        v["messages"][2]["tool_calls"][0]["function"]["arguments"]["id"].to_string(),
        "9007199254740993"
    );
    assert_eq!(
        v["messages"][3],
        serde_json::json!({"role":"tool","content":"{\"total\":5}"})
    );
    let r = call(&m).unwrap();
    assert_eq!(
        (r.stop_reason.as_str(), r.tool_uses.len(), r.usage),
        ("max_tokens", 0, u(7, 300, 0))
    );
    assert_eq!(
        call(&m).unwrap_err(),
        ModelError::Served {
            message: "ollama: context length exceeded".into(),
            usage: u(7, 2, 0)
        }
    );
    assert!(
        matches!(call(&m), Err(ModelError::Served { ref message, usage }) if message.contains("arguments are not a JSON object") && usage == u(7, 2, 0))
    );
    assert!(
        matches!(call(&m), Err(ModelError::RetryAfter { after, .. }) if after == Duration::from_secs(3))
    );
    assert_eq!(
        call(&m).unwrap_err(),
        ModelError::Fatal("ollama: 404: model not found".into())
    );
    assert!(matches!(call(&m), Err(ModelError::UnusableUsage(_))));
    assert_eq!(ollama::host("box:1234/").unwrap(), "http://box:1234");
    assert_eq!(ollama::host("https://box:443").unwrap(), "https://box:443");
    for bad in [
        "ftp://x",
        "file:///etc/passwd",
        "http://",
        "http://u:p@box:1",
        "http://box:1/?q=1",
    ] {
        assert!(ollama::host(bad).is_err(), "{bad}");
    }
    // A password in OLLAMA_HOST is never repeated in the refusal.
    for h in ["http://u:secretpw@box:1", "ftp://u:secretpw@box/"] {
        let e = ollama::host(h).unwrap_err();
        assert!(!e.contains("secretpw") && e.contains("***@box"), "{e}");
    }
    // Nor a token in its query or fragment.
    let e = ollama::host("http://box:1/?token=SEKRITPW#SEKRIT2").unwrap_err();
    assert!(
        !e.contains("SEKRIT") && e.contains("\"http://box:1/?***#***\""),
        "{e}"
    );
}

/// A 307 to a second local server: not followed; the second server receives nothing; the
/// error names only the redirect's host, never its path, query or the key.
#[test]
fn generate_redirect_is_refused_and_the_key_stays_home() {
    let target = Server::start(vec![
        json(200, OA_TOOL),
        json(200, OA_TOOL),
        json(200, OA_TOOL),
    ]);
    let loc = format!("http://{}/steal/path?token=leak", target.addr);
    let first = Server::start(vec![
        with_header(307, "location", &loc, ""),
        with_header(307, "location", &loc, ""),
        with_header(308, "location", &loc, ""),
    ]);
    let want = format!(
        "redirects are not followed; the response pointed to host \"{}\"",
        target.addr
    );
    let models: Vec<Box<dyn Model>> = vec![
        Box::new(openai_at(&first.url(), KEY)),
        Box::new(anthropic_at(&first.url())),
        Box::new(ollama_at(&first.url())),
    ];
    for m in &models {
        match call(m.as_ref()) {
            Err(e @ ModelError::Fatal(_)) => {
                let text = format!("{e} {e:?}");
                assert!(text.contains(&want), "{text}");
                assert!(
                    !text.contains("steal") && !text.contains("leak") && !text.contains(KEY),
                    "{text}"
                );
            }
            other => panic!("{}: {other:?}", m.name()),
        }
    }
    assert_eq!(*first.connections.lock().unwrap(), 3);
    assert_eq!(
        *target.connections.lock().unwrap(),
        0,
        "the redirect target was never contacted"
    );
    assert_eq!(*target.bytes.lock().unwrap(), 0);
}

/// This machine's address on its outward interface (found without sending a packet).
fn outward_ip() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.7:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// A key over plain http goes only to a loopback peer: a `localhost` that resolves off
/// loopback is refused after the dial and before any request byte; the refusal is permanent
/// (not retried) and names the peer.
#[test]
fn loopback_only_refuses_a_connection_that_leaves_the_machine() {
    // The host as written decides first: spellings a URL parser would rewrite are refused.
    for base in [
        "http://127.1:9/v1",
        "http://LOCALHOST:9/v1",
        "http://0177.0.0.1:9/v1",
        "http://2130706433/v1",
        "http://127.0.0.1.nip.io/v1",
        "http://[fe80::1%25lo0]:9/",
    ] {
        let e = OpenAi::new_with_env(
            openai::Config {
                model: "m".into(),
                base_url: base.into(),
                api_key: Secret::new(KEY),
                ..Default::default()
            },
            &|_| None,
        )
        .unwrap_err();
        assert!(
            e.starts_with("openai: refusing to send an API key over plain http to")
                || e.contains("is not an http or https URL"),
            "{base}: {e}"
        );
    }
    // A loopback peer is fine.
    let ok = Server::start(vec![json(200, OA_TOOL)]);
    let m = openai_at(&format!("http://localhost:{}/v1", ok.addr.port()), KEY);
    assert!(call(&m).is_ok());

    // `localhost` resolved to this machine's outward address: the connection is made (the
    // server sees it) but not a byte is written on it.
    let ip =
        outward_ip().expect("a non-loopback interface address to test the post-dial check with");
    let away = Server::start_on(
        &format!("{ip}:0"),
        vec![json(200, OA_TOOL), json(200, OA_TOOL)],
    );
    let resolve: Vec<(&str, SocketAddr)> = vec![("localhost", away.addr)];
    let client =
        phttp::client_with(Some(&format!("localhost:{}", away.addr.port())), &resolve).unwrap();
    let key = Secret::new(KEY);
    let out = rt().block_on(phttp::post(
        "openai",
        &client,
        &format!("http://localhost:{}/v1/chat/completions", away.addr.port()),
        &[Header::Secret("authorization", &key, "Bearer ")],
        b"{}".to_vec(),
    ));
    match out {
        Err(Failure::Permanent(e)) => {
            assert_eq!(
                e,
                format!(
                    "providers: localhost:{} resolved to {}: not a loopback address",
                    away.addr.port(),
                    away.addr
                )
            );
        }
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("the request went through"),
    }
    // Give the server thread a moment to count what arrived (bounded: 200 × 5 ms).
    for _ in 0..200 {
        if *away.connections.lock().unwrap() > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        *away.bytes.lock().unwrap(),
        0,
        "no request byte reached the peer"
    );
    assert!(away.requests.lock().unwrap().is_empty());
    // Without the check the same client setup does reach it: the test can see a leak.
    let open = phttp::client_with(None, &resolve).unwrap();
    let leaked = rt().block_on(phttp::post(
        "openai",
        &open,
        &format!("http://localhost:{}/v1/chat/completions", away.addr.port()),
        &[],
        b"{}".to_vec(),
    ));
    assert!(leaked.is_ok(), "{:?}", leaked.err());
    assert!(*away.bytes.lock().unwrap() > 0);
}

/// Every encoding of a configuration or a model shows `[redacted]`, never the key, for an
/// explicit key and for one read from the environment.
#[test]
fn config_and_model_encode_without_the_key() {
    let oc = openai::Config {
        model: "m".into(),
        name: "n".into(),
        base_url: "https://api.example.com/v1".into(),
        api_key: Secret::new(KEY),
    };
    let ac = anthropic::Config {
        model: "claude-opus-5".into(),
        api_key: Secret::new(KEY),
        ..Default::default()
    };
    let om = OpenAi::new_with_env(oc.clone(), &|_| None).unwrap();
    let envm = OpenAi::new_with_env(
        openai::Config {
            model: "m".into(),
            ..Default::default()
        },
        &|k| (k == "OPENAI_API_KEY").then(|| KEY.to_string()),
    )
    .unwrap();
    let am = Anthropic::new_with_env(ac.clone(), &|_| None).unwrap();
    let forms = [
        format!("{oc:?}"),
        format!("{:?}", Secret::new(KEY)),
        format!("{}", Secret::new(KEY)),
        serde_json::to_string(&Secret::new(KEY)).unwrap(),
        format!("{oc}"),
        format!("{oc:#?}"),
        serde_json::to_string(&oc).unwrap(),
        format!("{om:?}"),
        format!("{om}"),
        serde_json::to_string(&om).unwrap(),
        format!("{envm:?}"),
        serde_json::to_string(&envm).unwrap(),
        format!("{ac:?}"),
        format!("{ac}"),
        serde_json::to_string(&ac).unwrap(),
        format!("{am:?}"),
        format!("{am}"),
        serde_json::to_string(&am).unwrap(),
    ];
    for f in &forms {
        assert!(!f.contains("SECRET") && !f.contains("4242"), "{f}");
    }
    assert_eq!(
        forms[0],
        r#"openai.Config{Model:"m" Name:"n" BaseURL:"https://api.example.com/v1" APIKey:[redacted]}"#
    );
    assert_eq!(
        forms[6],
        r#"{"Model":"m","Name":"n","BaseURL":"https://api.example.com/v1","APIKey":"[redacted]"}"#
    );
    assert_eq!(
        forms[7],
        r#"openai.Model{Name:"n" BaseURL:"https://api.example.com/v1" APIKey:[redacted]}"#
    );
    assert!(
        forms[10].contains("APIKey:[redacted]"),
        "the environment key is held, and hidden"
    );
    let empty = openai::Config {
        model: "m".into(),
        ..Default::default()
    };
    assert!(format!("{empty:?}").ends_with(r#"APIKey:""}"#));
    // The environment key goes only to OpenAI's own base, never a custom one.
    let s = Server::start(vec![json(200, OA_TOOL)]);
    let custom = OpenAi::new_with_env(
        openai::Config {
            model: "m".into(),
            base_url: s.url(),
            ..Default::default()
        },
        &|_| Some(KEY.to_string()),
    )
    .unwrap();
    call(&custom).unwrap();
    assert!(!String::from_utf8_lossy(&s.requests.lock().unwrap()[0]).contains(KEY));
}

#[test]
fn the_models_work_through_the_accounting_caller_types() {
    // A decoded reply through the runtime's reply body keeps the raw bytes exactly.
    let s = Server::start(vec![json(200, OA_TOOL)]);
    let m: Arc<dyn Model> = Arc::new(openai_at(&s.url(), ""));
    let reply = rt()
        .block_on(m.generate(request().to_model_request().unwrap()))
        .unwrap();
    assert_eq!(reply.usage, u(5000, 300, 1200));
    assert_eq!(
        ChatResponse::decode(&reply.body).unwrap().raw,
        OA_TOOL.as_bytes()
    );
}

#[test]
fn ollama_text_only_and_5xx_and_anthropic_raw_assistant_turns() {
    let s = Server::start(vec![
        json(
            200,
            r#"{"message":{"role":"assistant","content":"just text"},"done_reason":"stop","prompt_eval_count":3,"eval_count":2}"#,
        ),
        json(500, "boom"),
    ]);
    let m = ollama_at(&s.url());
    let r = call(&m).unwrap();
    assert_eq!(
        (r.text.as_str(), r.stop_reason.as_str(), r.tool_uses.len()),
        ("just text", "end_turn", 0)
    );
    assert_eq!(
        call(&m).unwrap_err(),
        ModelError::Transient("transient: ollama: 500: boom".into())
    );

    // A whole assistant message handed back in the configured raw block is resent as it was
    // (thinking block and signature intact); another consumer's raw block type is refused.
    let s = Server::start(vec![json(
        200,
        r#"{"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#,
    )]);
    let a = anthropic_at(&s.url());
    let raw = r#"{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"sig=="},{"type":"tool_use","id":"tu","name":"refund","input":{"n":9007199254740995}}]}"#;
    let mut req = request();
    req.messages[1] = Message::assistant(vec![ContentBlock {
        kind: a.raw_assistant_block().into(),
        text: raw.into(),
        ..ContentBlock::default()
    }]);
    let reply = rt()
        .block_on(a.generate(req.to_model_request().unwrap()))
        .unwrap();
    assert_eq!(reply.usage, u(1, 1, 0));
    let body = String::from_utf8(s.request(0).1).unwrap();
    assert!(body.contains(r#"{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"sig=="},{"type":"tool_use","id":"tu","name":"refund","input":{"n":9007199254740995}}]}"#), "{body}");
    req.messages[1].content[0].kind = "other.raw_assistant".into();
    match rt().block_on(a.generate(req.to_model_request().unwrap())) {
        Err(ModelError::Fatal(e)) => assert_eq!(
            e,
            "anthropic: unsupported content block type \"other.raw_assistant\""
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.requests.lock().unwrap().len(),
        1,
        "nothing sent for the refused turn"
    );
}

/// A certificate nobody vouches for, or one for another name, is permanent (a retry would
/// meet the same certificate), and the request with its key never left the client.
#[test]
fn a_certificate_the_client_cannot_trust_is_permanent_and_nothing_is_sent() {
    use providers_support::tls::{ELSEWHERE, TlsServer, UNTRUSTED_LOCALHOST};
    for (pair, what) in [
        (UNTRUSTED_LOCALHOST, "unknown issuer"),
        (ELSEWHERE, "other name"),
    ] {
        let s = TlsServer::start(pair);
        let m = openai_at(&format!("https://localhost:{}", s.addr.port()), KEY);
        match call(&m) {
            Err(ModelError::Fatal(e)) => {
                assert!(!e.contains(KEY), "{what}: {e}");
                assert!(e.to_lowercase().contains("certificate"), "{what}: {e}");
            }
            other => panic!("{what}: a certificate failure must be permanent: {other:?}"),
        }
        assert!(*s.connections.lock().unwrap() >= 1, "{what}: never dialled");
        assert_eq!(*s.plaintext.lock().unwrap(), 0, "{what}: bytes got through");
    }
}

/// A name the resolver says does not exist is permanent; a resolver that could not answer
/// now, or failed otherwise, is transient (spec §2.7). The failures are the resolver's typed
/// answers, not its text.
#[test]
fn a_host_that_does_not_exist_is_permanent_and_a_resolver_failure_is_transient() {
    use countersign::providers::dns::{DnsError, FailingResolver};
    type Make = fn(&str) -> DnsError;
    let cases: [(Make, bool); 3] = [
        (|h| DnsError::NotFound { host: h.into() }, true),
        (|h| DnsError::Temporary { host: h.into() }, false),
        (
            |h| DnsError::Other {
                host: h.into(),
                detail: "resolver went away".into(),
            },
            false,
        ),
    ];
    for (make, permanent) in cases {
        let c = phttp::client_resolving(None, FailingResolver(Arc::new(make))).unwrap();
        let out = rt().block_on(phttp::post(
            "openai",
            &c,
            "https://api.nowhere.invalid/v1/chat/completions",
            &[Header::Secret(
                "authorization",
                &Secret::new(KEY),
                "Bearer ",
            )],
            b"{}".to_vec(),
        ));
        let Err(f) = out else {
            panic!("a failed lookup cannot answer")
        };
        match (&f, permanent) {
            (Failure::Permanent(m), true) => {
                assert!(
                    m.contains("api.nowhere.invalid") && m.contains("no such host"),
                    "{m}"
                )
            }
            (Failure::Transient { message, .. }, false) => {
                assert!(message.contains("api.nowhere.invalid"), "{message}")
            }
            _ => panic!("permanent={permanent}: {f:?}"),
        }
    }
}

/// One stray escaped surrogate in a model's reply (here in its prose) is one U+FFFD, as Go's
/// decoder reads it, for all three adapters; the reply is kept as received. It failed the
/// whole run before ("decode: unexpected end of hex escape", "lone leading surrogate").
#[test]
fn a_lone_surrogate_in_a_reply_is_one_replacement_character() {
    let anthropic_body = br#"{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"I will look \ud83d it up"},{"type":"tool_use","id":"t","name":"get_order","input":{"order_id":"ord_1004"}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":1}}"#;
    let r = anthropic::parse_reply(anthropic_body).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(r.text, "I will look \u{fffd} it up");
    assert_eq!(r.tool_uses.len(), 1);
    assert_eq!(r.usage.input_tokens, 3, "usage read too");
    assert_eq!(r.raw, anthropic_body.to_vec(), "kept as received");
    let ollama_body = br#"{"model":"m","message":{"role":"assistant","content":"looking \udc00 up","tool_calls":[{"function":{"name":"get_order","arguments":{"order_id":"ord_1004"}}}]},"done":true,"done_reason":"stop","prompt_eval_count":1,"eval_count":1}"#;
    let r = ollama::parse_reply(ollama_body).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(r.text, "looking \u{fffd} up");
    let openai_body = br#"{"choices":[{"message":{"content":"a \ud800\u0041","tool_calls":[]},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1}}"#;
    let r = openai::parse_reply(openai_body).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(r.text, "a \u{fffd}A");
    assert_eq!(r.usage.input_tokens, 2);
}
