//! Model accounting through the agent's handle (spec 15) against a real store, with a fake
//! model (no network).

mod runtime_support;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign::runtime::agent::{self, DecideFuture, Scripted, ScriptedAgent, StepInput};
use countersign::runtime::clock;
use countersign::runtime::driver::Driver;
use countersign::runtime::model::{
    FakeModel, FakeReply, ModelError, ModelRequest, ModelSetup, Price, Usage,
};
use countersign::runtime::policy::DefaultPolicy;
use countersign::runtime::types::{Decision, Limits, Run, RunStatus};
use runtime_support::*;

fn req(cap: i64) -> ModelRequest {
    ModelRequest {
        body: br#"{"messages":["hello there, model"]}"#.to_vec(),
        max_output_tokens: cap,
    }
}

/// Calls the model `n` times with `r`, then decides `d` (an error ends the step as the agent's).
fn calls_then(n: usize, r: ModelRequest, d: Decision) -> Scripted {
    Scripted::With(Box::new(move |i: StepInput| -> DecideFuture {
        Box::pin(async move {
            let m = i.model.clone().expect("a model handle");
            for _ in 0..n {
                m.call(r.clone()).await.map_err(|e| e.to_string())?;
            }
            Ok(d)
        })
    }))
}

fn u(i: i64, o: i64, c: i64) -> Usage {
    Usage {
        input_tokens: i,
        output_tokens: o,
        cached_input_tokens: c,
    }
}

struct Case {
    db: Db,
    run: Run,
}

fn run_with(
    script: Vec<FakeReply>,
    agent_script: Vec<Scripted>,
    limits: Limits,
    tune: impl FnOnce(&mut ModelSetup),
) -> Case {
    let db = db();
    let fake = Arc::new(FakeModel::new("m1", script));
    let mut setup = ModelSetup::new(fake);
    setup.backoff = Duration::from_millis(1);
    setup.prices.insert(
        "m1".into(),
        Price {
            input: 3_000_000,
            cached_input: 300_000,
            output: 15_000_000,
        },
    );
    tune(&mut setup);
    let mut cfg = config(
        &db.store,
        registry(vec![]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new(agent_script),
    );
    cfg.model = Some(setup);
    let d = Driver::new(cfg).unwrap();
    let run = rt().block_on(d.start_with_id("r", "g", limits)).unwrap();
    Case { db, run }
}

fn rows(db: &Db) -> Vec<(i64, String, i64, i64, i64, i64, String)> {
    let c = rusqlite::Connection::open(&db.path).unwrap();
    let mut st = c.prepare("SELECT attempt, status, input_tokens, output_tokens, cached_input_tokens, cost_micros, error FROM model_calls ORDER BY rowid").unwrap();
    st.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
        ))
    })
    .unwrap()
    .map(|r| r.unwrap())
    .collect()
}

#[test]
fn model_usage_and_cost_recorded() {
    let c = run_with(
        vec![FakeReply::ok("{}", u(1000, 100, 400))],
        vec![calls_then(1, req(500), agent::complete(""))],
        limits(),
        |_| {},
    );
    assert_eq!(c.run.status, RunStatus::Completed);
    // (1000-400)*3 + 400*0.3 + 100*15 = 1800 + 120 + 1500 micros
    let cost = 1800 + 120 + 1500;
    assert_eq!(
        rows(&c.db),
        [(1, "ok".into(), 1000, 100, 400, cost, String::new())]
    );
    let run = c.db.store.get_run("r").unwrap();
    assert_eq!(
        (
            run.model_calls,
            run.input_tokens,
            run.output_tokens,
            run.cached_input_tokens,
            run.estimated_cost_micros
        ),
        (1, 1000, 100, 400, cost)
    );
    let ev = events(&c.db.store, "r");
    let d = ev.iter().find(|e| e.kind == "model.dispatched").unwrap();
    assert!(
        d.payload.starts_with(r#"{"attempt":1,"call_id":""#)
            && d.payload.ends_with(r#"","model":"m1"}"#),
        "{}",
        d.payload
    );
    let m = ev.iter().find(|e| e.kind == "model.completed").unwrap();
    assert!(
        m.payload
            .contains(&format!(r#""cost_micros":{cost},"error":"","latency_ms":"#)),
        "{}",
        m.payload
    );
    assert!(m.payload.ends_with(r#","model":"m1","status":"ok","usage":{"input_tokens":1000,"output_tokens":100,"cached_input_tokens":400}}"#), "{}", m.payload);
    verify(&c.db.path);
}

#[test]
fn model_transient_retry_then_success() {
    let script = vec![
        FakeReply::err(ModelError::Transient("503".into())),
        FakeReply::ok("{}", u(10, 1, 0)),
    ];
    let c = run_with(
        script,
        vec![calls_then(1, req(50), agent::complete(""))],
        limits(),
        |s| s.max_retries = 2,
    );
    assert_eq!(c.run.status, RunStatus::Completed);
    let r = rows(&c.db);
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0].0, r[0].1.as_str(), r[0].6.as_str()),
        (1, "error", "503")
    );
    assert_eq!((r[1].0, r[1].1.as_str()), (2, "ok"));
    assert_eq!(
        c.db.store.get_run("r").unwrap().model_calls,
        2,
        "every attempt counts"
    );
}

#[test]
fn model_exhausted_retries_is_unavailable() {
    let script = (0..3)
        .map(|_| FakeReply::err(ModelError::Transient("503".into())))
        .collect();
    let c = run_with(
        script,
        vec![calls_then(1, req(50), agent::complete(""))],
        limits(),
        |s| s.max_retries = 2,
    );
    assert_eq!(
        (c.run.status, c.run.reason.as_str()),
        (RunStatus::Failed, "model_unavailable")
    );
    assert_eq!(
        c.run.reason_detail,
        "model unavailable after 3 attempt(s): 503"
    );
    assert_eq!(rows(&c.db).len(), 3);
    let ev = kinds(&c.db.store, "r");
    assert!(
        ev.iter()
            .any(|(k, p)| k == "limit.exceeded" && p.contains(r#""reason":"model_unavailable""#))
    );
    verify(&c.db.path);
}

/// Like `run_with`, but on a manual clock that only the model caller's waits move: every
/// wait it asks for is recorded as (clock offset when it began, length) and then "passes" at
/// once by moving the clock on. Nothing sleeps for real.
fn run_timed(
    script: Vec<FakeReply>,
    limits: Limits,
    n_calls: usize,
    tune: impl FnOnce(&mut ModelSetup),
) -> (Case, Vec<(i64, Duration)>) {
    let db = db();
    let fake = Arc::new(FakeModel::new("m1", script));
    let mut setup = ModelSetup::new(fake);
    let (now, offset) = clock::manual(start_time());
    let waits = Arc::new(Mutex::new(Vec::new()));
    let w = waits.clone();
    setup.sleep = Arc::new(move |d: Duration| {
        let (w, offset) = (w.clone(), offset.clone());
        Box::pin(async move {
            let at = offset.load(Ordering::SeqCst);
            w.lock().unwrap().push((at, d));
            offset.fetch_add(d.as_nanos() as i64, Ordering::SeqCst);
        })
    });
    tune(&mut setup);
    let mut cfg = config(
        &db.store,
        registry(vec![]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new(vec![calls_then(n_calls, req(50), agent::complete(""))]),
    );
    cfg.now = Some(now);
    cfg.model = Some(setup);
    let d = Driver::new(cfg).unwrap();
    let run = rt().block_on(d.start_with_id("r", "g", limits)).unwrap();
    let waits = waits.lock().unwrap().clone();
    (Case { db, run }, waits)
}

#[test]
fn model_retry_after_is_honoured() {
    // The backoff is 1 ms; the provider asks for 300 ms: the retry waits that long.
    let wait = Duration::from_millis(300);
    let script = vec![
        FakeReply::err(ModelError::RetryAfter {
            message: "429 rate limited".into(),
            after: wait,
        }),
        FakeReply::ok("{}", u(10, 1, 0)),
    ];
    let (c, waits) = run_timed(script, limits(), 1, |s| {
        s.max_retries = 1;
        s.backoff = Duration::from_millis(1);
    });
    assert_eq!(
        waits,
        vec![(0, wait)],
        "the second attempt came after the provider's wait, not the 1 ms backoff"
    );
    assert_eq!(c.run.status, RunStatus::Completed);
    let r = rows(&c.db);
    assert_eq!(
        r.iter()
            .map(|r| (r.0, r.1.as_str(), r.6.as_str()))
            .collect::<Vec<_>>(),
        vec![(1, "error", "429 rate limited"), (2, "ok", "")]
    );
    verify(&c.db.path);
}

#[test]
fn model_retry_never_sleeps_past_a_time_limit() {
    const S: i64 = 1_000_000_000;
    let secs = Duration::from_secs;
    let transient = |n: usize| -> Vec<FakeReply> {
        (0..n)
            .map(|_| FakeReply::err(ModelError::Transient("503 overloaded".into())))
            .collect()
    };
    // Every wait the caller asked for ended by the time limit.
    let within = |waits: &[(i64, Duration)], limit: i64| {
        for (at, d) in waits {
            assert!(
                at + d.as_nanos() as i64 <= limit,
                "a wait of {d:?} from {at} ns runs past the {limit} ns limit: {waits:?}"
            );
        }
    };

    // 1. A Retry-After shorter than max_retry_after but longer than the elapsed time left is
    //    not slept: the call is unavailable at once, though retries were left.
    let mut l = limits();
    l.max_elapsed_time = 10 * S;
    let script = vec![
        FakeReply::err(ModelError::RetryAfter {
            message: "429 rate limited".into(),
            after: secs(30),
        }),
        FakeReply::ok("{}", u(10, 1, 0)),
    ];
    let (c, waits) = run_timed(script, l, 1, |s| s.max_retries = 5);
    assert_eq!(waits, vec![], "nothing slept");
    assert_eq!(
        (
            c.run.status,
            c.run.reason.as_str(),
            c.run.reason_detail.as_str()
        ),
        (
            RunStatus::Failed,
            "model_unavailable",
            "model unavailable after 1 attempt(s): a retry after 30s would reach the elapsed time limit 10s: 429 rate limited"
        )
    );
    assert_eq!(rows(&c.db).len(), 1);
    verify(&c.db.path);

    // 2. The doubling backoff stops once it would reach the active-time limit: 1 s and 2 s
    //    are slept, the 4 s wait would end past 5 s of active time.
    let mut l = limits();
    l.max_active_time = 5 * S;
    let (c, waits) = run_timed(transient(10), l, 1, |s| {
        s.max_retries = 10;
        s.backoff = secs(1);
    });
    assert_eq!(waits, vec![(0, secs(1)), (S, secs(2))]);
    within(&waits, 5 * S);
    assert_eq!(
        c.run.reason_detail,
        "model unavailable after 3 attempt(s): a retry after 4s would reach the active time limit 5s: 503 overloaded"
    );
    assert_eq!(rows(&c.db).len(), 3);
    verify(&c.db.path);

    // 3. Without time limits the backoff still stops doubling at its cap.
    let (c, waits) = run_timed(transient(6), limits(), 1, |s| {
        s.max_retries = 5;
        s.backoff = secs(1);
        s.max_backoff = secs(4);
    });
    let lengths: Vec<Duration> = waits.iter().map(|w| w.1).collect();
    assert_eq!(lengths, [1, 2, 4, 4, 4].map(secs));
    assert_eq!(
        c.run.reason_detail,
        "model unavailable after 6 attempt(s): 503 overloaded"
    );

    // 4. An attempt's timeout is cut to the time left: a model that never answers is given
    //    the 10 s the run has, not the 120 s attempt timeout, and no retry follows.
    let mut l = limits();
    l.max_elapsed_time = 10 * S;
    let script = vec![FakeReply::ok("{}", u(10, 1, 0)).after(secs(3600))];
    let (c, waits) = run_timed(script, l, 1, |s| {
        s.max_retries = 3;
        s.attempt_timeout = secs(120);
    });
    assert_eq!(waits, vec![(0, secs(10))]);
    within(&waits, 10 * S);
    assert_eq!(
        c.run.reason_detail,
        "model unavailable after 1 attempt(s): a retry after 1s would reach the elapsed time limit 10s: attempt timed out"
    );
    let r = rows(&c.db);
    assert_eq!((r.len(), r[0].1.as_str()), (1, "ambiguous"));
    verify(&c.db.path);

    // 5. A Retry-After that fits is honoured in full.
    let mut l = limits();
    l.max_elapsed_time = 100 * S;
    l.max_active_time = 100 * S;
    let script = vec![
        FakeReply::err(ModelError::RetryAfter {
            message: "429 rate limited".into(),
            after: secs(30),
        }),
        FakeReply::ok("{}", u(10, 1, 0)),
    ];
    let (c, waits) = run_timed(script, l, 1, |s| s.max_retries = 1);
    assert_eq!(waits, vec![(0, secs(30))]);
    assert_eq!(c.run.status, RunStatus::Completed);
}

#[test]
fn model_retry_wait_that_cannot_fit_is_unavailable() {
    // A wait past max_retry_after is not slept: the run ends model_unavailable after the one
    // attempt, though retries were left.
    let script = vec![
        FakeReply::err(ModelError::RetryAfter {
            message: "429 rate limited".into(),
            after: Duration::from_secs(90),
        }),
        FakeReply::ok("{}", u(10, 1, 0)),
    ];
    let c = run_with(
        script,
        vec![calls_then(1, req(50), agent::complete(""))],
        limits(),
        |s| {
            s.max_retries = 3;
            s.max_retry_after = Duration::from_secs(60);
        },
    );
    assert_eq!(
        (c.run.status, c.run.reason.as_str()),
        (RunStatus::Failed, "model_unavailable")
    );
    assert_eq!(
        c.run.reason_detail,
        "model unavailable after 1 attempt(s): 429 rate limited: the provider asks to retry after 90000 ms, longer than the 60000 ms this run waits"
    );
    assert_eq!(rows(&c.db).len(), 1, "no second attempt");
    verify(&c.db.path);
}

#[test]
fn model_ambiguous_attempt_charged_conservatively() {
    let script = vec![
        FakeReply::err(ModelError::Ambiguous("connection reset".into())),
        FakeReply::ok("{}", u(10, 1, 0)),
    ];
    let c = run_with(
        script,
        vec![calls_then(1, req(50), agent::complete(""))],
        limits(),
        |s| s.max_retries = 1,
    );
    let r = rows(&c.db);
    let est_in = req(50).input_estimate();
    assert_eq!(
        (r[0].1.as_str(), r[0].2, r[0].3),
        ("ambiguous", est_in, 50),
        "charged the estimate: input estimate + output cap"
    );
    let run = c.db.store.get_run("r").unwrap();
    assert_eq!(run.input_tokens, est_in + 10);
}

#[test]
fn model_served_error_is_charged_and_not_retried() {
    let script = vec![
        FakeReply::err(ModelError::Served {
            message: "content filter".into(),
            usage: u(40, 2, 0),
        }),
        FakeReply::ok("{}", u(1, 1, 0)),
    ];
    let c = run_with(
        script,
        vec![calls_then(1, req(50), agent::complete(""))],
        limits(),
        |s| s.max_retries = 3,
    );
    assert_eq!(c.run.reason, "model_unavailable");
    let r = rows(&c.db);
    assert_eq!(r.len(), 1, "not retried");
    assert_eq!((r[0].1.as_str(), r[0].2, r[0].3), ("error", 40, 2));
}

#[test]
fn model_unusable_usage_is_charged_the_estimate() {
    let c = run_with(
        vec![FakeReply::ok("{}", u(5, 1, 9))],
        vec![calls_then(1, req(50), agent::complete(""))],
        limits(),
        |_| {},
    );
    assert_eq!(c.run.reason, "model_unavailable");
    let r = rows(&c.db);
    assert_eq!(
        (r[0].1.as_str(), r[0].2, r[0].3),
        ("error", req(50).input_estimate(), 50)
    );
    assert!(r[0].6.starts_with("unusable usage"), "{}", r[0].6);
}

#[test]
fn model_call_limit_stops_before_dispatch() {
    let mut l = limits();
    l.max_model_calls = 1;
    let script = vec![
        FakeReply::ok("{}", u(1, 1, 0)),
        FakeReply::ok("{}", u(1, 1, 0)),
    ];
    let c = run_with(
        script,
        vec![calls_then(2, req(50), agent::complete(""))],
        l,
        |_| {},
    );
    assert_eq!(
        (
            c.run.status,
            c.run.reason.as_str(),
            c.run.reason_detail.as_str()
        ),
        (
            RunStatus::Failed,
            "limit_model_calls",
            "limit_model_calls: model call limit 1 reached"
        )
    );
    assert_eq!(rows(&c.db).len(), 1, "the second call was never dispatched");
    let ev = kinds(&c.db.store, "r");
    let n = ev.len();
    assert_eq!(ev[n - 2].0, "limit.exceeded");
    verify(&c.db.path);
}

#[test]
fn model_token_and_cost_limits_projected() {
    let mut l = limits();
    l.max_total_tokens = 100;
    let c = run_with(
        vec![FakeReply::ok("{}", u(1, 1, 0))],
        vec![calls_then(1, req(200), agent::complete(""))],
        l,
        |_| {},
    );
    assert_eq!(c.run.reason, "limit_tokens");
    assert!(
        c.run
            .reason_detail
            .starts_with("limit_tokens: projected tokens ")
            && c.run.reason_detail.ends_with(" exceed limit 100"),
        "{}",
        c.run.reason_detail
    );
    assert!(rows(&c.db).is_empty(), "refused before dispatch");
    let mut l = limits();
    l.max_estimated_cost_micros = 100;
    let c = run_with(
        vec![FakeReply::ok("{}", u(1, 1, 0))],
        vec![calls_then(1, req(200), agent::complete(""))],
        l,
        |_| {},
    );
    assert_eq!(c.run.reason, "limit_cost");
    assert!(
        c.run
            .reason_detail
            .starts_with("limit_cost: projected cost ")
            && c.run.reason_detail.ends_with(" micros exceeds limit 100"),
        "{}",
        c.run.reason_detail
    );
    assert!(rows(&c.db).is_empty());
}

#[test]
fn model_uncapped_request_refused_under_a_projected_limit() {
    let mut l = limits();
    l.max_total_tokens = 1_000_000;
    let c = run_with(
        vec![FakeReply::ok("{}", u(1, 1, 0))],
        vec![calls_then(1, req(0), agent::complete(""))],
        l,
        |_| {},
    );
    assert_eq!(c.run.reason, "limit_tokens");
    assert!(
        c.run.reason_detail.contains("without an output cap"),
        "{}",
        c.run.reason_detail
    );
    // max_output_tokens_per_call caps a request that had none.
    let mut l = limits();
    l.max_total_tokens = 1_000_000;
    l.max_output_tokens_per_call = 64;
    let c = run_with(
        vec![FakeReply::ok("{}", u(1, 1, 0))],
        vec![calls_then(1, req(0), agent::complete(""))],
        l,
        |_| {},
    );
    assert_eq!(c.run.status, RunStatus::Completed);
}

#[test]
fn model_totals_saturate_rather_than_wrap() {
    let script = vec![
        FakeReply::ok("{}", u(i64::MAX - 5, i64::MAX, 0)),
        FakeReply::ok("{}", u(100, 100, 0)),
    ];
    let c = run_with(
        script,
        vec![calls_then(2, req(50), agent::complete(""))],
        limits(),
        |s| s.prices.clear(),
    );
    assert_eq!(c.run.status, RunStatus::Completed);
    let run = c.db.store.get_run("r").unwrap();
    assert_eq!(
        (run.input_tokens, run.output_tokens, run.model_calls),
        (i64::MAX, i64::MAX, 2)
    );
}

#[test]
fn lease_no_model_call_after_the_lease_is_lost() {
    let db = db();
    let fake = Arc::new(FakeModel::new("m1", vec![FakeReply::ok("{}", u(1, 1, 0))]));
    let path = db.path.clone();
    let steal = Scripted::With(Box::new(move |i: StepInput| -> DecideFuture {
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute(
                "UPDATE runs SET lease_owner = 'thief' WHERE id = ?",
                [&i.run_id],
            )
            .unwrap();
        Box::pin(async move {
            let m = i.model.clone().unwrap();
            m.call(req(50)).await.map_err(|e| e.to_string())?;
            Ok(agent::complete(""))
        })
    }));
    let mut cfg = config(
        &db.store,
        registry(vec![]),
        Arc::new(DefaultPolicy),
        ScriptedAgent::new([steal]),
    );
    cfg.model = Some(ModelSetup::new(fake.clone()));
    let d = Driver::new(cfg).unwrap();
    let r = rt().block_on(d.start_with_id("r", "g", limits()));
    assert!(r.is_err(), "{r:?}");
    assert!(fake.requests().is_empty(), "the model was never asked");
    assert!(rows(&db).is_empty());
}

#[test]
fn model_concurrent_calls_reserve_against_the_limits() {
    let mut l = limits();
    l.max_model_calls = 1;
    let slow = |_| FakeReply::ok("{}", u(1, 1, 0)).after(Duration::from_millis(100));
    let both = Scripted::With(Box::new(move |i: StepInput| -> DecideFuture {
        Box::pin(async move {
            let m = i.model.clone().unwrap();
            let (a, b) = tokio::join!(m.call(req(50)), m.call(req(50)));
            assert!(
                a.is_ok() != b.is_ok(),
                "exactly one of two concurrent calls fits the limit"
            );
            Ok(agent::complete(""))
        })
    }));
    let c = run_with((0..2).map(slow).collect(), vec![both], l, |_| {});
    assert_eq!(
        rows(&c.db).len(),
        1,
        "the second call was refused before dispatch"
    );
    assert_eq!(c.db.store.get_run("r").unwrap().model_calls, 1);
}
