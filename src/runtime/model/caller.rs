//! The accounted model handle an agent is given for one step.

use crate::runtime::store::Charge;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{ModelCallError, ModelError, ModelReply, ModelRequest, ModelSetup, Usage};
use crate::runtime::driver::Inner;
use crate::runtime::driver::lease::LeaseProbe;
use crate::runtime::driver::limits::go_duration;
use crate::runtime::json::gojson::Object;
use crate::runtime::store::{NewModelCall, StoreError};
use crate::runtime::types::{Limits, Timestamp};

#[derive(Default, Clone, Copy)]
struct Reserved {
    calls: i64,
    tokens: i64,
    cost: i64,
}

struct State {
    setup: ModelSetup,
    inner: Arc<Inner>,
    run_id: String,
    step_id: String,
    limits: Limits,
    lease: LeaseProbe,
    reserved: Mutex<Reserved>,
    failure: Mutex<Option<String>>,
}

/// The step's model handle: each call is reserved, dispatched, recorded and charged.
#[derive(Clone)]
pub struct ModelCaller {
    s: Arc<State>,
}

impl std::fmt::Debug for ModelCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ModelCaller({}/{})", self.s.run_id, self.s.step_id)
    }
}

/// How one attempt ended, as recorded.
struct Recorded {
    status: &'static str,
    usage: Usage,
    error: String,
    retry: bool,
    /// The least wait before another attempt (a rate limit's Retry-After).
    wait: Duration,
    reply: Option<ModelReply>,
    /// When the attempt's outcome was recorded (the clock reading the wait is measured from).
    completed: Timestamp,
    /// The run's earliest time limit, as read when the attempt was dispatched.
    deadline: Option<Deadline>,
}

/// The first of the run's time limits to run out: when, and which.
#[derive(Clone, Copy, Debug)]
struct Deadline {
    at: Timestamp,
    /// `"elapsed"` or `"active"`.
    which: &'static str,
    /// The limit as configured (ns).
    limit: i64,
}

impl Deadline {
    /// The earlier of the elapsed-time deadline (`created_at + max_elapsed_time`) and the
    /// active-time one (this step's start + what the run has left of `max_active_time`; the
    /// step's own time counts as active until it finishes).
    fn of(
        limits: &Limits,
        run: &crate::runtime::types::Run,
        step_started: Option<Timestamp>,
    ) -> Option<Deadline> {
        let mut best: Option<Deadline> = None;
        let mut consider = |d: Deadline| {
            if best.is_none_or(|b| d.at.sub(&b.at) < 0) {
                best = Some(d);
            }
        };
        if limits.max_elapsed_time > 0 {
            consider(Deadline {
                at: run.created_at.add_nanos(limits.max_elapsed_time),
                which: "elapsed",
                limit: limits.max_elapsed_time,
            });
        }
        if limits.max_active_time > 0
            && let Some(started) = step_started
        {
            let used = run.active_ms.saturating_mul(1_000_000);
            consider(Deadline {
                at: started.add_nanos(limits.max_active_time.saturating_sub(used)),
                which: "active",
                limit: limits.max_active_time,
            });
        }
        best
    }

    /// Nanoseconds left at `now` (≤ 0: none).
    fn left(&self, now: &Timestamp) -> i64 {
        self.at.sub(now)
    }
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

impl ModelCaller {
    pub(crate) fn new(
        setup: ModelSetup,
        inner: Arc<Inner>,
        run_id: &str,
        step_id: &str,
        limits: Limits,
        lease: LeaseProbe,
    ) -> ModelCaller {
        ModelCaller {
            s: Arc::new(State {
                setup,
                inner,
                run_id: run_id.to_string(),
                step_id: step_id.to_string(),
                limits,
                lease,
                reserved: Mutex::new(Reserved::default()),
                failure: Mutex::new(None),
            }),
        }
    }

    /// Adds (`sign` 1) or gives back (`sign` -1) a reservation.
    fn adjust(&self, by: &Reserved, sign: i64) {
        let mut r = self.s.reserved.lock().unwrap_or_else(|e| e.into_inner());
        r.calls = r.calls.saturating_add(sign * by.calls);
        r.tokens = r.tokens.saturating_add(sign.saturating_mul(by.tokens));
        r.cost = r.cost.saturating_add(sign.saturating_mul(by.cost));
    }

    /// The run reason when a call failed on a model limit or an unavailable model.
    pub fn failure_reason(&self) -> Option<String> {
        self.s
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn fail(&self, reason: &str) {
        *self.s.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.to_string());
    }

    /// Calls the model (with retries), accounting every attempt.
    pub async fn call(&self, req: ModelRequest) -> Result<ModelReply, ModelCallError> {
        let s = &self.s;
        let mut req = req;
        let cap_limit = s.limits.max_output_tokens_per_call;
        if cap_limit > 0 && (req.max_output_tokens == 0 || req.max_output_tokens > cap_limit) {
            req.max_output_tokens = cap_limit;
        }
        let max_attempts = s.setup.max_retries.saturating_add(1);
        let mut backoff = s.setup.backoff;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            if !s.lease.ok() {
                return Err(ModelCallError::LeaseLost(format!("run {}", s.run_id)));
            }
            let est = Usage {
                input_tokens: req.input_estimate(),
                output_tokens: req.max_output_tokens,
                cached_input_tokens: 0,
            };
            let this = self.clone();
            let r = req.clone();
            // Dispatch, call and record on a task of its own: a caller that gives up still
            // gets the attempt recorded.
            let task = tokio::spawn(async move { this.attempt(attempt, r, est).await });
            let rec = match task.await {
                Ok(r) => r?,
                Err(e) => {
                    return Err(ModelCallError::Store(format!(
                        "model call task failed: {e}"
                    )));
                }
            };
            if let Some(reply) = rec.reply {
                return Ok(reply);
            }
            if !rec.retry || attempt >= max_attempts {
                self.fail("model_unavailable");
                return Err(ModelCallError::Unavailable {
                    attempts: attempt,
                    last: rec.error,
                });
            }
            if rec.wait > s.setup.max_retry_after {
                // The provider asks for a wait longer than this caller may wait: the call
                // cannot succeed in time, so it is unavailable now rather than after sleeping.
                self.fail("model_unavailable");
                return Err(ModelCallError::Unavailable {
                    attempts: attempt,
                    last: format!(
                        "{}: the provider asks to retry after {} ms, longer than the {} ms this run waits",
                        rec.error,
                        rec.wait.as_millis(),
                        s.setup.max_retry_after.as_millis()
                    ),
                });
            }
            // The backoff doubles up to its cap; a provider's wait raises it, never lowers it.
            let wait = backoff.min(s.setup.max_backoff).max(rec.wait);
            if let Some(dl) = rec.deadline
                && nanos(wait) >= dl.left(&rec.completed)
            {
                // Sleeping would reach a time limit: the next attempt could not start in time,
                // so the call is unavailable now.
                self.fail("model_unavailable");
                return Err(ModelCallError::Unavailable {
                    attempts: attempt,
                    last: format!(
                        "a retry after {} would reach the {} time limit {}: {}",
                        go_duration(nanos(wait)),
                        dl.which,
                        go_duration(dl.limit),
                        rec.error
                    ),
                });
            }
            (s.setup.sleep)(wait).await;
            backoff = backoff.saturating_mul(2).min(s.setup.max_backoff);
        }
    }

    /// The run's earliest time limit, read in the dispatch transaction.
    fn deadline(
        &self,
        tx: &mut crate::runtime::driver::DbTx<'_, '_>,
    ) -> Result<Option<Deadline>, ModelCallError> {
        let s = &self.s;
        let l = &s.limits;
        if l.max_elapsed_time <= 0 && l.max_active_time <= 0 {
            return Ok(None);
        }
        let run = tx
            .get_run(&s.run_id)
            .map_err(|e| ModelCallError::Store(e.to_string()))?;
        let started = if l.max_active_time > 0 {
            Some(
                tx.get_step(&s.step_id)
                    .map_err(|e| ModelCallError::Store(e.to_string()))?
                    .started_at,
            )
        } else {
            None
        };
        Ok(Deadline::of(l, &run, started))
    }

    fn project(
        &self,
        tx: &mut crate::runtime::driver::DbTx<'_, '_>,
        est: &Usage,
        model: &str,
    ) -> Result<Reserved, ModelCallError> {
        let s = &self.s;
        let l = &s.limits;
        let run = tx
            .get_run(&s.run_id)
            .map_err(|e| ModelCallError::Store(e.to_string()))?;
        let res = *s.reserved.lock().unwrap_or_else(|e| e.into_inner());
        let limit = |reason: &str, detail: String| {
            self.fail(reason);
            ModelCallError::Limit {
                reason: reason.into(),
                detail,
            }
        };
        if l.max_model_calls > 0 && run.model_calls.saturating_add(res.calls) >= l.max_model_calls {
            return Err(limit(
                "limit_model_calls",
                format!("model call limit {} reached", l.max_model_calls),
            ));
        }
        let tokens = est.input_tokens.saturating_add(est.output_tokens);
        let cost = s.setup.price(model).map(|p| p.cost(est)).unwrap_or(0);
        let priced = s.setup.price(model).is_some();
        // Tokens, and cost where the model is priced: a call projected past a limit is refused,
        // and so is a request without an output cap, which cannot be projected.
        type Over = fn(i64, i64) -> String;
        let projections: [(&str, &str, i64, i64, Over); 2] = [
            (
                "limit_tokens",
                "token",
                l.max_total_tokens,
                run.input_tokens
                    .saturating_add(run.output_tokens)
                    .saturating_add(res.tokens)
                    .saturating_add(tokens),
                |p, max| format!("projected tokens {p} exceed limit {max}"),
            ),
            (
                "limit_cost",
                "cost",
                if priced {
                    l.max_estimated_cost_micros
                } else {
                    0
                },
                run.estimated_cost_micros
                    .saturating_add(res.cost)
                    .saturating_add(cost),
                |p, max| format!("projected cost {p} micros exceeds limit {max}"),
            ),
        ];
        for (reason, what, max, projected, over) in projections {
            if max <= 0 {
                continue;
            }
            if est.output_tokens == 0 {
                return Err(limit(
                    reason,
                    format!(
                        "a request without an output cap cannot be projected under the {what} limit {max}"
                    ),
                ));
            }
            if projected > max {
                return Err(limit(reason, over(projected, max)));
            }
        }
        Ok(Reserved {
            calls: 1,
            tokens,
            cost,
        })
    }

    async fn attempt(
        &self,
        attempt: u32,
        req: ModelRequest,
        est: Usage,
    ) -> Result<Recorded, ModelCallError> {
        let s = &self.s;
        let model = s.setup.model.name();
        let call_id = s.inner.id();
        let dispatched = s.inner.now();
        // Reserve against the limits and record the dispatch, under the lease.
        // The reservation is taken inside the dispatch transaction (under the store's write
        // lock), so a concurrent call of this step projects against it.
        let reserved_here = std::cell::Cell::new(None::<Reserved>);
        let written = s.inner.store.write(
            |tx| -> Result<(Reserved, Option<Deadline>), ModelCallError> {
                tx.require_lease(&s.run_id, &s.inner.owner, s.inner.lease_now())
                    .map_err(|e| match e {
                        StoreError::LeaseLost { detail } => {
                            ModelCallError::LeaseLost(detail.to_string())
                        }
                        e if e.is_run_state() => ModelCallError::LeaseLost(e.to_string()),
                        e => ModelCallError::Store(e.to_string()),
                    })?;
                let deadline = self.deadline(tx)?;
                if let Some(dl) = deadline
                    && dl.left(&dispatched) <= 0
                {
                    // No time is left for an attempt: the run is at its limit.
                    let (reason, detail) = if dl.which == "elapsed" {
                        (
                            "limit_elapsed_time",
                            format!("elapsed time reached limit {}", go_duration(dl.limit)),
                        )
                    } else {
                        (
                            "limit_active_time",
                            format!("active time reached limit {}", go_duration(dl.limit)),
                        )
                    };
                    self.fail(reason);
                    return Err(ModelCallError::Limit {
                        reason: reason.into(),
                        detail,
                    });
                }
                let r = self.project(tx, &est, &model)?;
                tx.insert_model_call(&NewModelCall {
                    id: &call_id,
                    run_id: &s.run_id,
                    step_id: &s.step_id,
                    attempt: attempt as i64,
                    status: "dispatched",
                    model: &model,
                    dispatched_at: dispatched,
                    ..NewModelCall::default()
                })
                .map_err(|e| ModelCallError::Store(e.to_string()))?;
                let p = Object::new()
                    .int("attempt", attempt as i64)
                    .str("call_id", &call_id)
                    .str("model", &model)
                    .finish();
                tx.append(&s.run_id, &s.step_id, &dispatched, "model.dispatched", &p)
                    .map_err(|e| ModelCallError::Store(e.to_string()))?;
                self.adjust(&r, 1);
                reserved_here.set(Some(r));
                Ok((r, deadline))
            },
        );
        let (reserve, deadline) = match written {
            Ok((r, events)) => {
                s.inner.deliver(events);
                r
            }
            Err(e) => {
                // The commit failed after the reservation was taken: give it back.
                if let Some(r) = reserved_here.get() {
                    self.adjust(&r, -1);
                }
                return Err(e);
            }
        };
        let timeout = if s.setup.attempt_timeout.is_zero() {
            Duration::from_secs(120)
        } else {
            s.setup.attempt_timeout
        };
        // No attempt runs past the time the run has left.
        let timeout = match deadline {
            Some(dl) => timeout.min(Duration::from_nanos(dl.left(&dispatched).max(0) as u64)),
            None => timeout,
        };
        let generate = s.setup.model.generate(req);
        let timer = (s.setup.sleep)(timeout);
        let out = tokio::select! {
            biased;
            r = generate => Ok(r),
            () = timer => Err(()),
        };
        // An attempt that brought no reply: its status, what it is charged, why, and whether
        // another attempt may follow.
        let failed = |status, usage, error, retry| Recorded {
            status,
            usage,
            error,
            retry,
            wait: Duration::ZERO,
            reply: None,
            completed: Timestamp::default(),
            deadline,
        };
        let rec = match out {
            Err(_) => failed("ambiguous", est, "attempt timed out".into(), true),
            Ok(Ok(reply)) if reply.usage.is_unusable() => failed(
                "error",
                est,
                format!("unusable usage: {:?}", reply.usage),
                false,
            ),
            Ok(Ok(reply)) => Recorded {
                status: "ok",
                usage: reply.usage,
                error: String::new(),
                retry: false,
                wait: Duration::ZERO,
                reply: Some(reply),
                completed: Timestamp::default(),
                deadline,
            },
            Ok(Err(ModelError::Transient(e))) => failed("error", Usage::default(), e, true),
            Ok(Err(ModelError::Ambiguous(e))) => failed("ambiguous", est, e, true),
            Ok(Err(ModelError::Served { message, usage })) => {
                let usage = if usage.is_unusable() { est } else { usage };
                failed("error", usage, message, false)
            }
            Ok(Err(ModelError::RetryAfter { message, after })) => Recorded {
                wait: after,
                ..failed("error", Usage::default(), message, true)
            },
            Ok(Err(ModelError::Fatal(e))) => failed("error", Usage::default(), e, false),
            Ok(Err(ModelError::UnusableUsage(e))) => {
                failed("error", est, format!("unusable usage: {e}"), false)
            }
        };
        let completed = s.inner.now();
        let rec = Recorded { completed, ..rec };
        let latency = (completed.sub(&dispatched) / 1_000_000).max(0);
        let cost = s
            .setup
            .price(&model)
            .map(|p| p.cost(&rec.usage))
            .unwrap_or(0);
        let kind = if rec.status == "ok" {
            "model.completed"
        } else {
            "model.failed"
        };
        let usage_json = rec.usage.go_json();
        let p = Object::new()
            .int("attempt", attempt as i64)
            .str("call_id", &call_id)
            .int("cost_micros", cost)
            .str("error", &rec.error)
            .int("latency_ms", latency)
            .str("model", &model)
            .str("status", rec.status)
            .encoded("usage", &usage_json)
            .finish();
        let written = s.inner.store.write(|tx| -> Result<(), StoreError> {
            tx.finish_model_call(&NewModelCall {
                id: &call_id,
                status: rec.status,
                input_tokens: rec.usage.input_tokens,
                output_tokens: rec.usage.output_tokens,
                cached_input_tokens: rec.usage.cached_input_tokens,
                cost_micros: cost,
                latency_ms: latency,
                error: &rec.error,
                completed_at: completed,
                ..NewModelCall::default()
            })?;
            let charge = Charge {
                calls: 1,
                input_tokens: rec.usage.input_tokens,
                output_tokens: rec.usage.output_tokens,
                cached_input_tokens: rec.usage.cached_input_tokens,
                cost_micros: cost,
            };
            tx.add_usage(&s.run_id, &charge)?;
            tx.append(&s.run_id, &s.step_id, &completed, kind, &p)?;
            Ok(())
        });
        self.adjust(&reserve, -1);
        match written {
            Ok(((), events)) => s.inner.deliver(events),
            Err(e) => return Err(ModelCallError::Store(e.to_string())),
        }
        if rec.status != "ok" && !rec.retry && rec.error.starts_with("unusable usage") {
            self.fail("model_unavailable");
        }
        Ok(rec)
    }
}
