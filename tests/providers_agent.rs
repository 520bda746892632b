//! `countersign agent` end to end: the example consumer on a "live" model served by a local
//! OpenAI-compatible server on 127.0.0.1; the run database checked by the independent
//! verifier. Also the one-line failures: no key, a key file others can read, no network.
#![cfg(feature = "providers")]

mod providers_support;
mod runtime_support;

use std::path::Path;
use std::process::{Command, Output};

use providers_support::{Server, json};

fn call(name: &str, id: &str, args: &str) -> String {
    let args = serde_json::to_string(args).unwrap();
    format!(
        r#"{{"choices":[{{"message":{{"content":"","tool_calls":[{{"id":"{id}","type":"function","function":{{"name":"{name}","arguments":{args}}}}}]}},"finish_reason":"tool_calls"}}],"usage":{{"prompt_tokens":900,"completion_tokens":30}}}}"#
    )
}

fn agent(db: &Path, args: &[&str]) -> Output {
    agent_env(db, args, &[])
}

fn agent_env(db: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_countersign"));
    c.arg("--db").arg(db).arg("agent").args(args);
    for k in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OLLAMA_HOST",
        "COUNTERSIGN_DB",
        "AGENTRT_DB",
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        c.env_remove(k);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn agent_runs_the_consumer_on_a_live_model_to_the_end() {
    let s = Server::start(vec![
        json(200, &call("get_order", "c1", r#"{"order_id":"ord_1001"}"#)),
        json(
            200,
            &call(
                "finish",
                "c2",
                r#"{"summary":"Order ord_1001 was delivered."}"#,
            ),
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let base = format!("{}/v1", s.url());
    // A proxy named in the environment is never used: it would carry the key elsewhere.
    let proxy = Server::start(vec![]);
    let p = proxy.url();
    let out = agent_env(
        &db,
        &[
            "--model",
            "openai:gpt-x",
            "--model-base-url",
            &base,
            "Where is my order ord_1001?",
        ],
        &[
            ("HTTP_PROXY", &p),
            ("http_proxy", &p),
            ("ALL_PROXY", &p),
            ("all_proxy", &p),
            ("NO_PROXY", ""),
            ("no_proxy", ""),
        ],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("run run_") && stdout.contains(": COMPLETED"),
        "{stdout}"
    );
    assert_eq!(s.requests.lock().unwrap().len(), 2);
    assert_eq!(
        *proxy.connections.lock().unwrap(),
        0,
        "the environment's proxy was not used"
    );
    let first = s.body_json(0);
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"get_order") && names.contains(&"finish"),
        "{names:?}"
    );
    assert!(
        first["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("cu_ana asks: Where is my order ord_1001?")
    );
    // The second request carries the order the tool read.
    let second = s.body_json(1);
    let tool_msg = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        tool_msg["content"].as_str().unwrap().contains("ord_1001"),
        "{tool_msg}"
    );
    assert!(
        dir.path().join("runs.orders.db").is_file(),
        "the backend was created beside the database"
    );
    runtime_support::verify(&db);
}

#[test]
fn agent_pauses_for_approval_as_the_demo_does() {
    let s = Server::start(vec![json(
        200,
        &call(
            "issue_refund",
            "c1",
            r#"{"order_id":"ord_1004","amount_cents":15000,"reason":"damaged"}"#,
        ),
    )]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let key = dir.path().join("key");
    std::fs::write(&key, "sk-local-key\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let base = format!("{}/v1", s.url());
    let out = agent(
        &db,
        &[
            "--model",
            "openai:gpt-x",
            "--model-base-url",
            &base,
            "--model-key-file",
            key.to_str().unwrap(),
            "Refund ord_1004 in full, it arrived broken",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(": WAITING_FOR_APPROVAL"), "{stdout}");
    assert!(stdout.contains("the run waits for a person"), "{stdout}");
    let (head, _) = s.request(0);
    assert!(
        head.to_ascii_lowercase()
            .contains("authorization: bearer sk-local-key"),
        "the key file's key went to the loopback server"
    );
    runtime_support::verify(&db);

    // A key file others can read is refused, before anything is sent.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = agent(
        &db,
        &[
            "--model",
            "openai:gpt-x",
            "--model-base-url",
            &base,
            "--model-key-file",
            key.to_str().unwrap(),
            "hello",
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("readable by others (mode 0644)"),
        "{stderr}"
    );
    assert_eq!(s.requests.lock().unwrap().len(), 1);
}

#[test]
fn agent_without_a_key_or_a_network_says_what_is_missing_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for (model, want) in [
        (
            "anthropic:claude-opus-5",
            "error: no API key for Anthropic: set ANTHROPIC_API_KEY or pass --model-key-file",
        ),
        (
            "openai:gpt-x",
            "error: no API key for OpenAI: set OPENAI_API_KEY or pass --model-key-file",
        ),
    ] {
        let out = agent(&db, &["--model", model, "hello"]);
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(text(&out.stderr).trim_end(), want);
        assert!(out.stdout.is_empty());
    }
    // No network: nothing listens where the model should be.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let base = format!("http://127.0.0.1:{port}/v1");
    let out = agent(
        &db,
        &[
            "--model",
            "openai:gpt-x",
            "--model-base-url",
            &base,
            "hello",
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: the model could not be reached or answered unusably: "),
        "{stderr}"
    );
    // A key over plain http to a host that is not this machine is refused at once.
    let key = dir.path().join("key");
    std::fs::write(&key, "sk-x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = agent(
        &db,
        &[
            "--model",
            "openai:gpt-x",
            "--model-base-url",
            "http://127.1:9/v1",
            "--model-key-file",
            key.to_str().unwrap(),
            "hello",
        ],
    );
    assert_eq!(
        text(&out.stderr).trim_end(),
        "error: openai: refusing to send an API key over plain http to 127.1:9"
    );
    // A malformed model is a usage error.
    let out = agent(&db, &["--model", "gpt-x", "hello"]);
    assert_eq!(out.status.code(), Some(2));
}
