//! `countersign agent` end to end: the example consumer on a "live" model served by a local
//! OpenAI-compatible server on 127.0.0.1; the run database checked by the independent
//! verifier. Also the one-line failures: no key, a key file others can read, no network.

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
    // `resume` and `recheck` of an agent's run point at `agent --resume`, not at "another
    // program's tools".
    let run = stdout
        .split_once("run ")
        .and_then(|(_, r)| r.split(':').next())
        .unwrap_or_else(|| panic!("{stdout}"))
        .to_string();
    for (verb, want) in [
        ("resume", "was made by `countersign agent`"),
        ("recheck", "was made by `countersign agent`"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .arg("--db")
            .arg(&db)
            .args([verb, run.as_str()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{verb}");
        let e = text(&o.stderr);
        assert!(
            e.contains(want) && !e.contains("does not register"),
            "{verb}: {e}"
        );
    }
    // Approving it points at `agent ... --resume`, not at a `resume` that would refuse it.
    let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .arg("--db")
        .arg(&db)
        .args(["approve", run.as_str(), "--yes", "--by", "alice"])
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(
        out.contains("a `countersign agent` run") && !out.contains(" resume "),
        "{out}"
    );
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
    // The refusal names the host as written, through the sanitiser: a bidi override or a C1
    // control sequence introducer in the URL never reaches the terminal raw.
    for (host, escaped) in [("ev\u{202e}il", "\\u{202e}"), ("ev\u{9b}2Jil", "\\u{009b}")] {
        let url = format!("http://{host}:9/v1");
        let out = agent(
            &db,
            &[
                "--model",
                "openai:gpt-x",
                "--model-base-url",
                &url,
                "--model-key-file",
                key.to_str().unwrap(),
                "hello",
            ],
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(!stderr.contains(host), "{stderr:?}");
        assert!(stderr.contains(escaped), "{stderr:?}");
    }
    // A malformed model is a usage error.
    let out = agent(&db, &["--model", "gpt-x", "hello"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A model that asks for `issue_refund` with `args`, then finishes with `summary`.
fn refund_then_finish(args: &str, summary: &str) -> Server {
    let finish = serde_json::json!({ "summary": summary }).to_string();
    Server::start(vec![
        json(200, &call("issue_refund", "c1", args)),
        json(200, &call("finish", "c2", &finish)),
    ])
}

/// A paused run is continued with the model: the two lines `agent` prints (decide it, then
/// continue it) run as printed in `sh`; the approved refund executes once, the model's next
/// reply ends the run, and the database passes the independent verifier.
#[test]
fn agent_resumes_an_approved_run_with_the_model_and_the_refund_runs_once() {
    let s = refund_then_finish(
        r#"{"order_id":"ord_1004","amount_cents":9000,"reason":"damaged"}"#,
        "Refunded 90.00 USD.",
    );
    // A directory name a shell would act on, so the printed lines must quote it.
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("a b'$(touch X)'");
    std::fs::create_dir(&home).unwrap();
    let db = home.join("runs.db");
    let base = format!("{}/v1", s.url());
    let out = agent(
        &db,
        &[
            "--model",
            "openai:gpt-x",
            "--model-base-url",
            &base,
            "Refund ord_1004, it broke",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(": WAITING_FOR_APPROVAL"), "{stdout}");
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    let at = |label: &str| {
        let i = lines
            .iter()
            .position(|l| l.ends_with(label))
            .unwrap_or_else(|| panic!("{label:?} in {stdout}"));
        lines[i + 1].to_string()
    };
    let decide = at("decide with:");
    let resume = at("then continue it with:");
    // `countersign` on PATH is the real binary; the lines run from an empty directory.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_countersign"), bin.join("countersign")).unwrap();
    let cwd = dir.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let sh = |line: &str| {
        let mut c = Command::new("sh");
        c.arg("-c").arg(line).current_dir(&cwd);
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        c.env("PATH", path);
        for k in [
            "OPENAI_API_KEY",
            "COUNTERSIGN_DB",
            "AGENTRT_DB",
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
        ] {
            c.env_remove(k);
        }
        c.output().unwrap()
    };
    let o = sh(&format!("{decide} --yes --by tester"));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{decide}: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let o = sh(&resume);
    let (so, se) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{resume}: {so}{se}");
    assert!(so.contains(": COMPLETED"), "{so}");
    assert_eq!(
        std::fs::read_dir(&cwd).unwrap().count(),
        0,
        "the shell ran nothing else"
    );
    assert_eq!(
        s.requests.lock().unwrap().len(),
        2,
        "one model call per step"
    );
    // The refund ran exactly once, for the approved amount.
    let orders = rusqlite::Connection::open(home.join("runs.orders.db")).unwrap();
    let refunds: (i64, i64) = orders
        .query_row(
            "SELECT count(*), coalesce(sum(amount_cents), 0) FROM effects WHERE tool = 'issue_refund'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(refunds, (1, 9000));
    // The model saw the refund's outcome before it finished.
    let second = s.body_json(1);
    assert!(
        second["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool"),
        "{second}"
    );
    runtime_support::verify(&db);
    // Continuing a run that is over is refused in one line.
    let o = sh(&resume);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    assert_eq!(text(&o.stderr).lines().count(), 1, "{}", text(&o.stderr));
}

/// Ctrl-C (SIGINT) or a supervisor's SIGTERM while the model is thinking ends `agent` with
/// exit 128 plus the signal and one message naming the run, which stays RUNNING under the lease it held
/// (agentrt's crash semantics: a resume after the lease lapses reconciles what was in flight),
/// and the command that continues it with the same model; it was killed silently before, the
/// run id never printed.
#[test]
fn agent_interrupted_during_a_model_call_names_the_run_and_how_to_go_on() {
    use std::io::Read;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", l.local_addr().unwrap());
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    {
        let held = held.clone();
        std::thread::spawn(move || {
            for mut c in l.incoming().flatten() {
                let mut buf = [0u8; 4096];
                let _ = c.read(&mut buf); // the request arrives; no answer ever comes
                held.lock().unwrap().push(c);
            }
        });
    }
    for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        let asked = held.lock().unwrap().len();
        let child = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .arg("--db")
            .arg(&db)
            .args([
                "agent",
                "--model",
                "openai:gpt-x",
                "--model-base-url",
                &base,
            ])
            .arg("Where is my order ord_1001?")
            .env("OPENAI_API_KEY", "sk-local")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("all_proxy")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Wait (event-driven, by polling what the server holds) for the model call.
        for _ in 0..600 {
            if held.lock().unwrap().len() > asked {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(held.lock().unwrap().len() > asked, "the model was asked");
        let st = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let out = child.wait_with_output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{signal}: {stderr}");
        assert!(stderr.starts_with("interrupted: run "), "{stderr}");
        let run = stderr["interrupted: run ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .to_string();
        assert!(stderr.contains("stays RUNNING"), "{stderr}");
        let cont = stderr
            .lines()
            .skip_while(|l| !l.ends_with("then continue it with:"))
            .nth(1)
            .unwrap_or_else(|| panic!("{stderr}"));
        assert!(
            cont.contains(" agent --model openai:gpt-x --model-base-url ")
                && cont.ends_with(&format!(" --resume {run}")),
            "{cont}"
        );
        let runs = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .arg("--db")
            .arg(&db)
            .args(["--json", "runs"])
            .output()
            .unwrap();
        let runs: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
        let r = &runs["runs"][0];
        assert_eq!(r["id"], run.as_str());
        assert_eq!(r["status"], "RUNNING");
        runtime_support::verify(&db);
    }
}

/// A key that cannot go into an HTTP header (a line break or control inside it, non-ASCII),
/// from the key file or the environment, is refused before anything is sent or written, and
/// a key file is read no further than 16 KiB (a huge file was read whole, then a FAILED run
/// written).
#[test]
fn a_key_no_header_can_carry_is_refused_before_a_run_is_written() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let key = dir.path().join("key");
    let base = "http://127.0.0.1:9/v1";
    for (content, want) in [
        (
            b"sk-a\r\nX-Evil: 1".to_vec(),
            "holds a character an API key does not",
        ),
        (
            b"sk-\x1b[2J".to_vec(),
            "holds a character an API key does not",
        ),
        (vec![b'k'; 16 * 1024 + 1], "is larger than 16384 bytes"),
    ] {
        std::fs::write(&key, &content).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let args = [
            "--model",
            "openai:gpt-x",
            "--model-base-url",
            base,
            "--model-key-file",
            key.to_str().unwrap(),
            "hello",
        ];
        let out = agent(&db, &args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(want), "{stderr}");
        assert!(
            !stderr.contains("sk-"),
            "the key is never printed: {stderr}"
        );
    }
    let out = agent_env(
        &db,
        &[
            "--model",
            "anthropic:claude-x",
            "--model-base-url",
            base,
            "hello",
        ],
        &[("ANTHROPIC_API_KEY", "sk-a\nb")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("ANTHROPIC_API_KEY holds a character"),
        "{}",
        text(&out.stderr)
    );
    // Set but not UTF-8: refused for what it holds, not taken as unset.
    use std::os::unix::ffi::OsStrExt;
    let out = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .arg("--db")
        .arg(&db)
        .args([
            "agent",
            "--model",
            "anthropic:claude-x",
            "--model-base-url",
            base,
            "hi",
        ])
        .env("ANTHROPIC_API_KEY", std::ffi::OsStr::from_bytes(b"sk-\xff"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("ANTHROPIC_API_KEY holds a character"),
        "{}",
        text(&out.stderr)
    );
    if db.exists() {
        let n: i64 = rusqlite::Connection::open(&db)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0, "no run was written");
    }
}

/// A resumed run acts for the customer its session records, and its prompt says so too: the
/// printed `--resume` line carries no `--customer`, and a `--customer` naming another is a
/// usage error before any model call (found from outside: `--customer` was taken for the
/// prompt while the tools acted for the run's own customer, and the default `cu_ana` named
/// the customer of every resumed run).
#[test]
fn a_resumed_run_acts_and_is_prompted_for_its_own_customer() {
    let s = refund_then_finish(
        r#"{"order_id":"ord_1002","amount_cents":15900,"reason":"damaged"}"#,
        "Refunded 159.00 USD.",
    );
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let base = format!("{}/v1", s.url());
    let model = ["--model", "openai:gpt-x", "--model-base-url", base.as_str()];
    let mut first = model.to_vec();
    first.extend(["--customer", "cu_ben", "Refund ord_1002, it broke"]);
    let out = agent(&db, &first);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(": WAITING_FOR_APPROVAL"), "{stdout}");
    let run = stdout
        .split_once("run ")
        .and_then(|(_, r)| r.split(':').next())
        .unwrap_or_else(|| panic!("{stdout}"))
        .to_string();
    let mut wrong = model.to_vec();
    wrong.extend(["--resume", run.as_str(), "--customer", "cu_ana"]);
    let o = agent(&db, &wrong);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("acts for customer cu_ben"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(
        s.requests.lock().unwrap().len(),
        1,
        "no model call was made"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .arg("--db")
        .arg(&db)
        .args(["approve", run.as_str(), "--yes", "--by", "alice"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let mut again = model.to_vec();
    again.extend(["--resume", run.as_str()]);
    let o = agent(&db, &again);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let resumed = s.body_json(1).to_string();
    assert!(resumed.contains("Customer cu_ben asks"), "{resumed}");
    assert!(!resumed.contains("cu_ana"), "{resumed}");
}

/// What could only fail after the databases were made is refused before either is (found from
/// outside: `--resume nope` on a mistyped `--db`, or an unknown `--customer`, left a new run
/// database and a new order backend behind and blamed the run id).
#[test]
fn a_refusal_before_the_run_creates_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("typo.db");
    for (args, says) in [
        (
            &["--model", "ollama:llama3", "--resume", "run_nope"][..],
            "no run database at",
        ),
        (
            &["--model", "ollama:llama3", "--customer", "cu_zed", "refund"],
            "no customer cu_zed in a new order backend (its customers are cu_ana, cu_ben)",
        ),
    ] {
        let o = agent(&db, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(says),
            "{args:?}: {}",
            text(&o.stderr)
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{args:?}: nothing created"
        );
    }
    // An existing run database with no backend beside it: a resume does not make one.
    rusqlite::Connection::open(&db).unwrap();
    let before = std::fs::read(&db).unwrap();
    let o = agent(&db, &["--model", "ollama:llama3", "--resume", "run_nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("no order backend at"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// A new run is capped in tokens (and, on a priced model, in cost) by default: a server that
/// reports more tokens than the cap in one reply ends the run `limit_tokens` before the next
/// call, instead of running on to COMPLETED (found from outside: 2^63 tokens a reply, bounded
/// only by the step count). `--max-tokens 0` lifts the cap; a resume may not set one.
#[test]
fn a_new_run_is_capped_in_tokens_by_default() {
    let huge = call("get_order", "c1", r#"{"order_id":"ord_1001"}"#)
        .replace(r#""prompt_tokens":900"#, r#""prompt_tokens":3000000"#);
    let finish = call("finish", "c2", r#"{"summary":"Delivered."}"#);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    // One run against a server that reports 3M prompt tokens on its first reply: its exit
    // code, its output and how many calls the server got.
    let run = |extra: &[&str]| {
        let s = Server::start(vec![json(200, &huge), json(200, &finish)]);
        let base = format!("{}/v1", s.url());
        let mut args = vec!["--model", "openai:gpt-x", "--model-base-url", &base];
        args.extend_from_slice(extra);
        args.push("Where is ord_1001?");
        let o = agent(&db, &args);
        let calls = s.requests.lock().unwrap().len();
        (o.status.code(), text(&o.stdout) + &text(&o.stderr), calls)
    };
    let (code, said, calls) = run(&[]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("limit_tokens"), "{said}");
    assert_eq!(calls, 1, "no call past the cap");
    runtime_support::verify(&db);
    let (code, said, calls) = run(&["--max-tokens", "0"]);
    assert_eq!((code, calls), (Some(0), 2), "{said}");
    let o = agent(
        &db,
        &[
            "--model",
            "openai:gpt-x",
            "--resume",
            "run_x",
            "--max-cost",
            "1",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}
