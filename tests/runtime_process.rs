//! Guarantees that only hold across real OS processes: concurrent resumes execute once, and a
//! process killed mid-tool leaves a run that pauses for an operator instead of re-running.
//!
//! The test binary re-executes itself: `child_role` (ignored by default) reads its role from
//! `RT_CHILD_ROLE` and does one thing.

mod runtime_support;

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign::runtime::agent::{self, ScriptedAgent};
use countersign::runtime::driver::{Config, Driver, INTERRUPTED_NOTICE, WorkOptions};
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::store::Store;
use countersign::runtime::tools::{FnTool, SideEffect, ToolOutput};
use countersign::runtime::types::{RunStatus, StepStatus};
use runtime_support::*;

/// A side-effecting tool that appends one line to `file` per call.
fn counting_tool(
    name: &str,
    side: SideEffect,
    file: PathBuf,
    hang: bool,
) -> Arc<dyn countersign::runtime::tools::Tool> {
    FnTool::new(def(name, side, OBJ), move |c| {
        let file = file.clone();
        Box::pin(async move {
            let mut f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&file)
                .unwrap();
            writeln!(
                f,
                "{} {} pid {}",
                c.run_id,
                c.step_index,
                std::process::id()
            )
            .unwrap();
            f.sync_all().unwrap();
            if hang {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Ok(ToolOutput {
                content: br#"{"done":true}"#.to_vec(),
                summary: "done".into(),
            })
        })
    })
}

fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn child(role: &str, envs: &[(&str, &str)]) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--ignored",
        "--exact",
        "child_role",
        "--nocapture",
        "--test-threads=1",
    ]);
    c.env("RT_CHILD_ROLE", role);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    c.spawn().unwrap()
}

/// What a child process does, chosen by `RT_CHILD_ROLE`.
#[test]
#[ignore = "run by the process tests as a child"]
fn child_role() {
    let role = std::env::var("RT_CHILD_ROLE").expect("run only as a child");
    let db = PathBuf::from(std::env::var("RT_DB").unwrap());
    let count = PathBuf::from(std::env::var("RT_COUNT").unwrap());
    let run_id = std::env::var("RT_RUN").unwrap();
    let store = Arc::new(Store::open_existing(&db, false).unwrap());
    match role.as_str() {
        "resume" => {
            let tools = registry(vec![counting_tool(
                "push",
                SideEffect::RemoteMutation,
                count,
                false,
            )]);
            let mut c = Config::new(store, tools, Arc::new(DefaultPolicy))
                .agent(ScriptedAgent::new([agent::complete("")]));
            c.lease_owner = "worker".into();
            let d = Driver::new(c).unwrap();
            let r = rt().block_on(d.resume(&run_id));
            // Exit 0 when this process executed, 3 when it lost the race with ErrRunState.
            match r {
                Ok(run) if run.status == RunStatus::Completed => std::process::exit(0),
                Err(e) if e.is_run_state() => std::process::exit(3),
                other => panic!("unexpected {other:?}"),
            }
        }
        "crash" => {
            let tools = registry(vec![counting_tool(
                "write",
                SideEffect::LocalMutation,
                count,
                true,
            )]);
            let mut c =
                Config::new(store, tools, Arc::new(DefaultPolicy)).agent(ScriptedAgent::new([
                    agent::tool_call("write", r#"{"file":"a.txt"}"#),
                ]));
            c.lease_owner = "doomed".into();
            c.lease_ttl = Duration::from_millis(600);
            let d = Driver::new(c).unwrap();
            let _ = rt().block_on(d.start_with_id(&run_id, "write a file", limits()));
            unreachable!("the parent kills this process while the tool runs");
        }
        "resume_then_die" => {
            // Resume an approved run and SIGKILL this process the moment the resume
            // transaction (WAITING -> RUNNING, step executing, tool start) has committed:
            // the observer is handed `step.tool_started` after the commit, before the tool runs.
            let tools = registry(vec![counting_tool(
                "push",
                SideEffect::RemoteMutation,
                count,
                false,
            )]);
            let mut c = Config::new(store, tools, Arc::new(DefaultPolicy))
                .agent(ScriptedAgent::new([agent::complete("")]));
            c.lease_owner = "doomed".into();
            c.lease_ttl = Duration::from_millis(600);
            c.observer = Some(Arc::new(|e| {
                if e.kind == "step.tool_started" {
                    unsafe {
                        libc::kill(libc::getpid(), libc::SIGKILL);
                    }
                }
            }));
            let d = Driver::new(c).unwrap();
            let _ = rt().block_on(d.resume(&run_id));
            unreachable!("killed after the resume transaction");
        }
        "hold" | "contend" => {
            // Two processes configured with the same owner name: `hold` starts the run and
            // keeps its tool running; `contend` tries to resume it (exit 4 when refused as
            // leased by another owner).
            let tools = registry(vec![counting_tool(
                "write",
                SideEffect::LocalMutation,
                count,
                true,
            )]);
            let mut c = Config::new(store, tools, Arc::new(DefaultPolicy))
                .agent(ScriptedAgent::new([agent::tool_call("write", "{}")]));
            c.lease_owner = "worker".into();
            let d = Driver::new(c).unwrap();
            if role == "hold" {
                let _ = rt().block_on(d.start_with_id(&run_id, "hold it", limits()));
                unreachable!("the parent kills this process while the tool runs");
            }
            match rt().block_on(d.resume(&run_id)) {
                Err(e) if e.is_run_leased() && e.to_string().contains(" is leased by worker/") => {
                    std::process::exit(4)
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn resume_concurrent_resume_executes_once() {
    let db = db();
    let count = db.dir.path().join("count.txt");
    let rounds = 50;
    // 50 runs paused on an approval, each approved.
    let tools = registry(vec![counting_tool(
        "push",
        SideEffect::RemoteMutation,
        count.clone(),
        false,
    )]);
    let script: Vec<_> = (0..rounds)
        .map(|i| agent::tool_call("push", &format!(r#"{{"round":{i}}}"#)))
        .collect();
    let mut cfg = config(
        &db.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new(script),
    );
    cfg.ids = None;
    let d = Driver::new(cfg).unwrap();
    let rtm = rt();
    for i in 0..rounds {
        let run = rtm
            .block_on(d.start_with_id(&format!("run-{i}"), "push", limits()))
            .unwrap();
        assert_eq!(run.status, RunStatus::WaitingForApproval);
        let a = latest_approval(&db.store, &run.id);
        approve(&db.store, &run.id, &a.id, "alice");
    }
    let path = db.path.to_string_lossy().into_owned();
    let cnt = count.to_string_lossy().into_owned();
    for i in 0..rounds {
        let run_id = format!("run-{i}");
        let kids: Vec<Child> = (0..8)
            .map(|_| {
                child(
                    "resume",
                    &[("RT_DB", &path), ("RT_COUNT", &cnt), ("RT_RUN", &run_id)],
                )
            })
            .collect();
        let codes: Vec<i32> = kids
            .into_iter()
            .map(|mut k| k.wait().unwrap().code().unwrap_or(-1))
            .collect();
        assert_eq!(
            codes.iter().filter(|c| **c == 0).count(),
            1,
            "round {i}: exactly one resume executes: {codes:?}"
        );
        assert_eq!(
            codes.iter().filter(|c| **c == 3).count(),
            7,
            "round {i}: the others get ErrRunState: {codes:?}"
        );
        let executed = lines(&count)
            .into_iter()
            .filter(|l| l.starts_with(&format!("{run_id} ")))
            .count();
        assert_eq!(executed, 1, "round {i}: the tool ran once");
        let run = db.store.get_run(&run_id).unwrap();
        assert_eq!(run.status, RunStatus::Completed);
    }
    assert_eq!(lines(&count).len(), rounds);
    verify(&db.path);
}

/// Starts `crash-run` in a child process whose `write` tool hangs, and SIGKILLs the child while
/// the tool runs: the run is left RUNNING under the dead process's 600 ms lease.
fn kill_mid_tool(db: &Db, count: &Path) {
    let path = db.path.to_string_lossy().into_owned();
    let cnt = count.to_string_lossy().into_owned();
    let mut k = child(
        "crash",
        &[
            ("RT_DB", &path),
            ("RT_COUNT", &cnt),
            ("RT_RUN", "crash-run"),
        ],
    );
    // Wait until the tool has started (its line is written), then SIGKILL the process.
    while lines(count).is_empty() {
        if let Some(st) = k.try_wait().unwrap() {
            panic!("child exited early: {st}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    unsafe {
        libc::kill(k.id() as i32, libc::SIGKILL);
    }
    k.wait().unwrap();
    let run = db.store.get_run("crash-run").unwrap();
    assert_eq!(
        run.status,
        RunStatus::Running,
        "the dead process left the run RUNNING"
    );
    assert!(run.lease_owner.starts_with("doomed/"));
}

fn crashed_run(db: &Db, count: &Path) -> countersign::runtime::types::Approval {
    kill_mid_tool(db, count);
    // Wait out the dead owner's short lease.
    while db.store.get_run("crash-run").unwrap().lease_expires_at
        > countersign::runtime::types::Timestamp::now()
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (tools, calls) = echo_registry("write", SideEffect::LocalMutation);
    let d = driver2(
        &db.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let run = rt().block_on(d.resume("crash-run")).unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    assert!(
        calls.lock().unwrap().is_empty(),
        "nothing re-runs without an operator"
    );
    let s = db.store.list_steps("crash-run").unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].status, StepStatus::AwaitingApproval);
    let a = latest_approval(&db.store, "crash-run");
    assert_eq!(a.kind, "interrupted_side_effect");
    assert_eq!(
        a.presentation,
        format!(
            r#"{{"args":{{"file":"a.txt"}},"notice":"{INTERRUPTED_NOTICE}","side_effect":"local_mutation","tool":"write"}}"#
        )
    );
    let t = types(&db.store, "crash-run");
    let i = t.iter().position(|k| k == "lease.taken_over").unwrap();
    assert_eq!(
        &t[i..],
        [
            "lease.taken_over",
            "step.interrupted",
            "step.policy",
            "approval.requested"
        ]
    );
    a
}

/// A worker takes over a run whose process died mid-tool once the dead holder's lease runs
/// out, though nothing commits after the death to wake it: the run pauses for an operator
/// (`interrupted_side_effect`) and the call does not run again (found from outside, with the
/// binary's worker on PostgreSQL: such a run stayed RUNNING under a dead lease for good, and
/// no worker touched it).
#[test]
fn worker_takes_over_a_run_whose_holder_died_once_its_lease_runs_out() {
    let db = db();
    let count = db.dir.path().join("count.txt");
    kill_mid_tool(&db, &count);
    let tools = registry(vec![counting_tool(
        "write",
        SideEffect::LocalMutation,
        count.clone(),
        false,
    )]);
    let d = driver2(
        &db.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let opts = WorkOptions::default();
    let stop = opts.stop.clone();
    let rt = rt();
    let worker = rt.spawn(async move { d.work(opts).await });
    // Bounded wait for the takeover (the lease runs out 600 ms after the tool started).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while db.store.get_run("crash-run").unwrap().status != RunStatus::WaitingForApproval {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker never took the run over"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let report = rt.block_on(worker).unwrap().unwrap();
    assert_eq!(report.resumed, 1, "{report:?}");
    assert_eq!(lines(&count).len(), 1, "nothing ran again");
    assert_eq!(
        latest_approval(&db.store, "crash-run").kind,
        "interrupted_side_effect"
    );
    assert!(types(&db.store, "crash-run").contains(&"lease.taken_over".to_string()));
    verify(&db.path);
}

#[test]
fn resume_interrupted_side_effect_waits_for_an_operator_and_runs_once_more_when_approved() {
    let db = db();
    let count = db.dir.path().join("count.txt");
    let a = crashed_run(&db, &count);
    approve(&db.store, "crash-run", &a.id, "alice");
    let c2 = count.clone();
    let tools = registry(vec![counting_tool(
        "write",
        SideEffect::LocalMutation,
        c2,
        false,
    )]);
    let d = driver2(
        &db.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let run = rt().block_on(d.resume("crash-run")).unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    let l = lines(&count);
    assert_eq!(l.len(), 2, "the crashed call and exactly one re-run: {l:?}");
    assert!(
        l.iter().all(|x| x.starts_with("crash-run 0 ")),
        "both on the same step: {l:?}"
    );
    let s = db.store.list_steps("crash-run").unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].status, StepStatus::Done);
    verify(&db.path);
}

#[test]
fn resume_interrupted_side_effect_rejected_ends_the_run() {
    let db = db();
    let count = db.dir.path().join("count.txt");
    let a = crashed_run(&db, &count);
    reject(&db.store, "crash-run", &a.id, "bob", "did it by hand");
    let (tools, calls) = echo_registry("write", SideEffect::LocalMutation);
    let d = driver2(
        &db.store,
        tools,
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::complete("")]),
    );
    let e = rt().block_on(d.resume("crash-run")).unwrap_err();
    assert!(e.is_run_state(), "{e}");
    let run = db.store.get_run("crash-run").unwrap();
    assert_eq!(
        (run.status, run.reason.as_str()),
        (RunStatus::Cancelled, "approval_rejected")
    );
    assert_eq!(lines(&count).len(), 1, "nothing executed twice");
    assert!(calls.lock().unwrap().is_empty());
    verify(&db.path);
}

/// Waits until `k` has died, and says whether a signal killed it.
fn killed_by_sigkill(mut k: Child) -> bool {
    use std::os::unix::process::ExitStatusExt;
    k.wait().unwrap().signal() == Some(libc::SIGKILL)
}

#[test]
fn resume_crash_after_resume_keeps_the_approved_request() {
    // agentrt's TestResume_CrashAfterResumeKeepsTheApprovedRequest, with a real SIGKILL: the
    // process dies right after the resume transaction commits. The approved request is kept
    // (the step is executing with it), the next resume pauses it as an interrupted side
    // effect with the same arguments, and once approved it runs exactly once.
    let db = db();
    let count = db.dir.path().join("count.txt");
    let calls = Arc::new(Mutex::new(Vec::new()));
    let d = driver2(
        &db.store,
        registry(vec![echo(
            "push",
            SideEffect::RemoteMutation,
            calls.clone(),
        )]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([agent::tool_call("push", r#"{"n": 7}"#)]),
    );
    let run = rt()
        .block_on(d.start_with_id("r", "push", limits()))
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let a1 = latest_approval(&db.store, "r");
    approve(&db.store, "r", &a1.id, "alice");
    let path = db.path.to_string_lossy().into_owned();
    let cnt = count.to_string_lossy().into_owned();
    let k = child(
        "resume_then_die",
        &[("RT_DB", &path), ("RT_COUNT", &cnt), ("RT_RUN", "r")],
    );
    assert!(killed_by_sigkill(k), "the child died by SIGKILL");
    assert!(
        lines(&count).is_empty(),
        "the dead process never called the tool"
    );
    let run = db.store.get_run("r").unwrap();
    assert_eq!(run.status, RunStatus::Running, "the resume committed");
    assert!(run.lease_owner.starts_with("doomed/"));
    let s = db.store.list_steps("r").unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].status, StepStatus::Executing);
    let t = types(&db.store, "r");
    assert_eq!(
        &t[t.len() - 3..],
        ["run.resumed", "step.policy", "step.tool_started"],
        "the resume transaction is the last thing written"
    );
    // Wait out the dead owner's short lease, then take over: an operator decides.
    while db.store.get_run("r").unwrap().lease_expires_at
        > countersign::runtime::types::Timestamp::now()
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let make = || {
        driver2(
            &db.store,
            registry(vec![counting_tool(
                "push",
                SideEffect::RemoteMutation,
                count.clone(),
                false,
            )]),
            Arc::new(countersign::runtime::policy::FnPolicy(
                |_r: &countersign::runtime::policy::PolicyRequest,
                 _v: &countersign::runtime::policy::RunView| {
                    Ok(countersign::runtime::policy::allow("re-run"))
                },
            )),
            ScriptedAgent::new([agent::complete("")]),
        )
    };
    let run = rt().block_on(make().resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    assert!(
        lines(&count).is_empty(),
        "nothing re-runs without an operator"
    );
    let a2 = latest_approval(&db.store, "r");
    assert_eq!(a2.kind, "interrupted_side_effect");
    assert_eq!(a2.step_id, a1.step_id, "the same step");
    let (r1, r2) = (a1.request.clone().unwrap(), a2.request.clone().unwrap());
    assert_eq!(r2.args, r1.args, "the approved request was kept");
    assert_eq!(r2.spec.name, "push");
    approve(&db.store, "r", &a2.id, "alice");
    let run = rt().block_on(make().resume("r")).unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{}", run.reason_detail);
    let l = lines(&count);
    assert_eq!(l.len(), 1, "it ran exactly once: {l:?}");
    assert!(l[0].starts_with("r 0 "), "on the approved step: {l:?}");
    assert!(calls.lock().unwrap().is_empty());
    verify(&db.path);
}

#[test]
fn lease_same_owner_name_in_two_processes_excludes_each_other() {
    // Two processes configured with the same lease owner name are two owners: while one
    // holds the run, the other's resume is refused as leased, and nothing runs twice.
    let db = db();
    let count = db.dir.path().join("count.txt");
    let path = db.path.to_string_lossy().into_owned();
    let cnt = count.to_string_lossy().into_owned();
    let env = [
        ("RT_DB", path.as_str()),
        ("RT_COUNT", cnt.as_str()),
        ("RT_RUN", "r"),
    ];
    let mut holder = child("hold", &env);
    while lines(&count).is_empty() {
        if let Some(st) = holder.try_wait().unwrap() {
            panic!("holder exited early: {st}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let owner = db.store.get_run("r").unwrap().lease_owner;
    assert!(owner.starts_with("worker/"), "{owner}");
    let codes: Vec<i32> = (0..3)
        .map(|_| child("contend", &env))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|mut k| k.wait().unwrap().code().unwrap_or(-1))
        .collect();
    assert_eq!(codes, [4, 4, 4], "each contender was refused as leased");
    assert_eq!(lines(&count).len(), 1, "the tool ran once, in the holder");
    let run = db.store.get_run("r").unwrap();
    assert_eq!(run.lease_owner, owner, "the holder still holds it");
    unsafe {
        libc::kill(holder.id() as i32, libc::SIGKILL);
    }
    holder.wait().unwrap();
}
