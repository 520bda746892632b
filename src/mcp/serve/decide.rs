//! Deciding a call (agentrt mcp 2.8): the rules in agentrt's order, under the decision mutex;
//! executing and holding happen outside it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::answer::{self, Answer};
use super::attempt::{Last, last_attempt, not_sent};
use super::calls::{Calls, OUTCOME_KNOWN, OUTCOME_NONE, OUTCOME_UNKNOWN, Row, nanos};
use super::key::request_key;
use super::open::Offered;
use super::policy::{Attempt, INTERRUPTED_KIND};
use super::run::{CLOSE_INVALID, CLOSE_TAKEN_OVER, Found, Next, pending_answer};
use super::{Proxy, now_ns};
use crate::mcp::config::Outcome;
use crate::runtime::driver::Verdict;
use crate::runtime::store::StoreError;
use crate::runtime::types::{Approval, ApprovalStatus, Run, RunStatus, Timestamp};

const READ_FAILED: &str = "the gate could not read its records, and nothing was executed";
const UNKNOWN_ASK_FAILED: &str = "the gate could not ask an operator about an earlier call to this tool whose outcome is unknown, and nothing was executed";

/// Progress of a held call: (elapsed seconds, hold seconds).
pub type Progress<'a> = &'a (dyn Fn(f64, f64) + Sync);

fn live_pending(a: &Approval, now: i64) -> bool {
    a.status == ApprovalStatus::Pending
        && (a.expires_at.is_zero() || i128::from(now) <= a.expires_at.unix_nanos())
}

impl Proxy {
    /// One `tools/call`: decided under the mutex, executed or held outside it.
    pub fn handle_call(
        &self,
        name: &str,
        args: &[u8],
        live: &(dyn Fn() -> bool + Sync),
        progress: Option<Progress<'_>>,
    ) -> Answer {
        let Some(t) = self.tool(name) else {
            return answer::denied(&format!("tool {} is not offered", crate::mcp::quote(name)));
        };
        let key = request_key(name, args);
        let mut held = false;
        for _ in 0..6 {
            let next = {
                let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
                self.decide(&mut calls, t, key.as_deref(), args)
            };
            match next {
                Next::Answer(a) => return a,
                Next::Retry => continue,
                Next::Execute(s, run_id) => return self.execute(*s, &run_id, t),
                Next::Hold(run_id, id, kind) => {
                    if held || !self.hold(&run_id, &id, live, progress) {
                        let cap = self
                            .o
                            .store
                            .get_approval(&run_id, &id)
                            .map(|a| a.capability)
                            .unwrap_or_default();
                        return pending_answer(&kind, &id, &cap);
                    }
                    held = true;
                }
            }
        }
        answer::in_progress()
    }

    /// Holds while the approval is pending: true when it was decided (decide again).
    fn hold(
        &self,
        run_id: &str,
        id: &str,
        live: &(dyn Fn() -> bool + Sync),
        progress: Option<Progress<'_>>,
    ) -> bool {
        let bound = self.o.cfg.hold;
        if bound.is_zero() {
            return false;
        }
        let start = Instant::now();
        let mut last_progress: Option<Instant> = None;
        while start.elapsed() < bound && live() && !self.shutting.load(Ordering::SeqCst) {
            match self.o.store.get_approval(run_id, id) {
                Ok(a) if !live_pending(&a, now_ns()) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
            if let Some(p) = progress
                && last_progress.is_none_or(|l| l.elapsed() >= Duration::from_secs(1))
            {
                p(start.elapsed().as_secs_f64(), bound.as_secs_f64());
                last_progress = Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }

    pub(crate) fn decide(
        &self,
        calls: &mut Calls,
        t: &Offered,
        key: Option<&str>,
        args: &[u8],
    ) -> Next {
        let Some(key) = key else {
            return self.begin(calls, t, None, Found::default(), args);
        };
        let now = now_ns();
        let window = nanos(self.window(t));
        let rows = match calls.for_key(key, now, window) {
            Ok(r) => r,
            Err(e) => return self.unavailable(&e, READ_FAILED),
        };
        let (mut expected, mut reuse) = (None, None);
        if let Some(open) = rows.iter().find(|r| r.open) {
            expected = Some(open.id);
            match self.o.store.get_run(&open.run_id) {
                Err(StoreError::NotFound { .. }) => reuse = Some(open.run_id.clone()),
                Err(e) => return self.unavailable(&e.to_string(), READ_FAILED),
                Ok(run) if !run.status.is_terminal() => {
                    if let Some(n) = self.open_run(calls, t, &run) {
                        return n;
                    }
                    match self.o.store.get_run(&open.run_id) {
                        Ok(r) if r.status.is_terminal() => {}
                        _ => return Next::Answer(answer::in_progress()),
                    }
                }
                Ok(_) => {}
            }
        }
        if window > 0
            && let Some(a) = self.repeat_rules(calls, t, &rows, now, window)
        {
            return Next::Answer(a);
        }
        let prior = if t.built.side_effect == "read_only" {
            None
        } else {
            self.prior(calls, t, key, now)
        };
        if let Some(a) = self.session_rules(calls, t, key, now, prior.is_some()) {
            return Next::Answer(a);
        }
        // A call the policy would run at once is not begun when its server's connection is
        // gone: it could not be sent. (One that asks an operator first is asked: its approval
        // stands until the proxy restarts, above.)
        if prior.is_none()
            && self.o.policy.decide(&t.built.name).map(|d| d.0) == Some(Outcome::Allow)
            && let Some(why) = self.lost(t)
        {
            return Next::Answer(self.not_connected(t, &why, None));
        }
        let found = Found {
            expected,
            reuse,
            prior,
            reopened: false,
        };
        self.begin(calls, t, Some(key), found, args)
    }

    fn unavailable(&self, e: &str, what: &str) -> Next {
        self.say(&format!("error: {}", crate::mcp::sanitize(e)));
        Next::Answer(answer::unavailable(what))
    }

    /// Rules 1-3 on the key's open run, not terminal. `None`: it is finished now; go on.
    fn open_run(&self, calls: &mut Calls, t: &Offered, run: &Run) -> Option<Next> {
        let mut approval = None;
        if run.status == RunStatus::WaitingForApproval {
            let a = match self.o.store.list_approvals(&run.id) {
                Ok(l) => l.last().cloned(),
                Err(e) => return Some(self.unavailable(&e.to_string(), READ_FAILED)),
            };
            let a = a?;
            approval = Some(a.id.clone());
            if live_pending(&a, now_ns()) {
                return Some(Next::Hold(run.id.clone(), a.id, a.kind));
            }
            if a.status != ApprovalStatus::Approved && a.status != ApprovalStatus::Pending {
                return Some(Next::Answer(answer::in_progress()));
            }
        } else {
            match self.o.store.lease_live(&run.id, Timestamp::now()) {
                Ok(true) => return Some(Next::Answer(answer::in_progress())),
                Ok(false) => {}
                Err(e) => return Some(self.unavailable(&e.to_string(), READ_FAILED)),
            }
        }
        let collect = run.status == RunStatus::WaitingForApproval;
        match self.rt.block_on(self.o.gate.attach(&run.id)) {
            Ok((Some(mut s), Verdict::Allowed(_))) if collect => {
                // A server whose connection is gone is not sent the approved request: the
                // session is left unused (nothing is written before `execute`), so the run
                // keeps waiting on its approval, granted, for an identical call after a
                // restart. Not an attempt: nobody is asked, nothing is blocked.
                if let Some(why) = self.lost(t) {
                    s.close();
                    return Some(Next::Answer(self.not_connected(
                        t,
                        &why,
                        approval.as_deref(),
                    )));
                }
                Some(Next::Execute(Box::new(s), run.id.clone()))
            }
            Ok((Some(mut s), Verdict::Allowed(_))) => {
                s.close();
                Some(Next::Answer(answer::in_progress()))
            }
            Ok((_, Verdict::Pending(r))) => {
                if !collect {
                    self.say(&format!(
                        "run {}: a call to {} was cut off while executing; its outcome is unknown",
                        crate::mcp::sanitize(&r.id),
                        crate::mcp::sanitize(&t.built.name)
                    ));
                }
                self.hint(&t.built.name, &r);
                Some(Next::Answer(self.pending_of(&r)))
            }
            Ok((Some(mut s), Verdict::Ready)) => {
                self.end_run(&mut s, if collect { CLOSE_INVALID } else { CLOSE_TAKEN_OVER });
                let _ = calls.settle(&run.id, OUTCOME_NONE, now_ns());
                None
            }
            Ok((Some(mut s), _)) => {
                s.close();
                None
            }
            Ok((None, _)) => None,
            Err(e) if e.is_run_leased() => Some(Next::Answer(answer::in_progress())),
            Err(e) if e.is_run_state() => Some(Next::Retry),
            Err(e) => Some(self.unavailable(
                &e.to_string(),
                if collect {
                    "the gate could not collect the approved request, and nothing was executed"
                } else {
                    "the gate could not recover an earlier attempt of this request, and nothing was executed"
                },
            )),
        }
    }

    fn settle_run(&self, calls: &mut Calls, t: &Offered, run: &Run) -> Last {
        let ro = t.built.side_effect == "read_only";
        let last = last_attempt(&self.o.store, &run.id, t, ro).unwrap_or(Last::None);
        let code = match &last {
            Last::None => OUTCOME_NONE,
            Last::Known(_) => OUTCOME_KNOWN,
            Last::Unknown(_) => OUTCOME_UNKNOWN,
        };
        let _ = calls.settle(&run.id, code, now_ns());
        last
    }

    /// Rule 6: the newest attempt of this request with an outcome, when it is unknown (and not
    /// answered since by a known one).
    fn prior(&self, calls: &mut Calls, t: &Offered, key: &str, now: i64) -> Option<Attempt> {
        let rows = calls.for_key(key, now, i64::MAX).ok()?;
        for r in &rows {
            if r.outcome == OUTCOME_KNOWN {
                return None;
            }
            let Ok(run) = self.o.store.get_run(&r.run_id) else {
                continue;
            };
            if !run.status.is_terminal() {
                continue;
            }
            match self.settle_run(calls, t, &run) {
                Last::Known(_) => return None,
                Last::None => {}
                Last::Unknown(ended) => return self.unknown_attempt(t, &run, ended).map(|a| a.0),
            }
        }
        None
    }

    /// Attaches to a run whose pending approval expired, which expires it and ends the run
    /// (the Gate's own expiry), and settles its row.
    fn expire(&self, calls: &mut Calls, t: &Offered, run_id: &str) {
        if let Ok((Some(mut s), _)) = self.rt.block_on(self.o.gate.attach(run_id)) {
            s.close();
        }
        if let Ok(run) = self.o.store.get_run(run_id)
            && run.status.is_terminal()
        {
            self.settle_run(calls, t, &run);
        }
    }

    /// The attempt of `run` whose outcome is unknown (`ended` says how), with the arguments it
    /// was called with.
    fn unknown_attempt(&self, t: &Offered, run: &Run, ended: String) -> Option<(Attempt, Vec<u8>)> {
        let steps = self.o.store.list_steps(&run.id).ok()?;
        let s = steps.iter().rev().find(|s| {
            s.observation.as_ref().is_some_and(|o| {
                (o.kind == "tool_error" && !not_sent(&o.content, &t.server, &t.built.tool))
                    || o.kind == "interrupted"
            })
        })?;
        Some(Attempt::of_step(&run.id, s, ended))
    }

    /// agentrt's `unknownBlock`: another request of this tool whose last attempt's outcome is
    /// unknown, and whose question ended unresolved (expired, a step limit, a crash before
    /// asking; not rejected or cancelled), is asked again in a fresh run of *that* request
    /// (its recorded arguments, origin `operator`), and this call is blocked on the new
    /// approval. `None`: no such request.
    fn unknown_block(&self, calls: &mut Calls, t: &Offered, key: &str) -> Option<Answer> {
        let rows = match calls.unresolved_of_tool(&t.built.name, key) {
            Ok(r) => r,
            Err(e) => {
                self.say(&format!("error: {}", crate::mcp::sanitize_message(&e)));
                return Some(answer::unavailable(READ_FAILED));
            }
        };
        for r in rows {
            let Ok(run) = self.o.store.get_run(&r.run_id) else {
                continue;
            };
            if !run.status.is_terminal()
                || matches!(
                    run.reason.as_str(),
                    "approval_rejected" | "operator_cancelled"
                )
            {
                continue;
            }
            let Last::Unknown(ended) = self.settle_run(calls, t, &run) else {
                continue;
            };
            let Some((attempt, args)) = self.unknown_attempt(t, &run, ended) else {
                continue;
            };
            let found = Found {
                expected: r.open.then_some(r.id),
                reuse: None,
                prior: Some(attempt),
                reopened: true,
            };
            return Some(
                match self.begin(calls, t, Some(&r.request_key), found, &args) {
                    Next::Hold(_, id, _) => answer::blocked_unknown(&t.built.name, &id),
                    _ => answer::unavailable(UNKNOWN_ASK_FAILED),
                },
            );
        }
        None
    }

    /// Rules 4 and 5: rejected, expired or cancelled within the window; a duplicate.
    fn repeat_rules(
        &self,
        calls: &mut Calls,
        t: &Offered,
        rows: &[Row],
        now: i64,
        window: i64,
    ) -> Option<Answer> {
        for r in rows {
            let Ok(run) = self.o.store.get_run(&r.run_id) else {
                continue;
            };
            if !run.status.is_terminal() {
                continue;
            }
            let last = self.settle_run(calls, t, &run);
            if run.finished_at.is_zero() {
                continue;
            }
            let fin = i64::try_from(run.finished_at.unix_nanos()).unwrap_or(i64::MAX);
            if fin < now.saturating_sub(window) {
                continue;
            }
            let until = fin.saturating_add(window);
            let latest = || {
                self.o
                    .store
                    .list_approvals(&run.id)
                    .ok()
                    .and_then(|l| l.last().cloned())
            };
            match run.reason.as_str() {
                "approval_rejected" => {
                    let a = latest();
                    let (id, note) = a.map(|a| (a.id, a.note)).unwrap_or_default();
                    return Some(answer::rejected(&id, &note, until));
                }
                "approval_expired" if !matches!(last, Last::Unknown(_)) => {
                    let id = latest().map(|a| a.id).unwrap_or_default();
                    return Some(answer::expired(&id, until));
                }
                "operator_cancelled" => return Some(answer::cancelled(&run.reason_detail, until)),
                _ => {}
            }
            if t.built.side_effect != "read_only" {
                match last {
                    Last::Known(e) => return Some(answer::duplicate(fin, self.window(t), &e)),
                    Last::Unknown(_) => return None,
                    Last::None => {}
                }
            }
        }
        None
    }

    /// The session rules: a tool blocked by an unknown outcome; the cap on pending approvals.
    fn session_rules(
        &self,
        calls: &mut Calls,
        t: &Offered,
        key: &str,
        now: i64,
        prior: bool,
    ) -> Option<Answer> {
        let outcome = self.o.policy.decide(&t.built.name).map(|d| d.0);
        let needs =
            outcome == Some(Outcome::RequireApproval) || (prior && outcome != Some(Outcome::Deny));
        let ro = t.built.side_effect == "read_only";
        if ro && !needs {
            return None;
        }
        let rows = match calls.unsettled() {
            Ok(r) => r,
            Err(e) => {
                self.say(&format!("error: {}", crate::mcp::sanitize_message(&e)));
                return Some(answer::unavailable(READ_FAILED));
            }
        };
        let mut pending = 0usize;
        for r in rows.iter().filter(|r| r.request_key != key) {
            let run = match self.o.store.get_run(&r.run_id) {
                Err(StoreError::NotFound { .. }) => {
                    let _ = calls.settle_empty(r.id, now);
                    continue;
                }
                Err(_) => continue,
                Ok(run) => run,
            };
            if run.status.is_terminal() {
                if let Some(other) = self.tool(&r.tool) {
                    self.settle_run(calls, other, &run);
                }
                continue;
            }
            if run.status != RunStatus::WaitingForApproval {
                continue;
            }
            let Some(a) = self
                .o
                .store
                .list_approvals(&run.id)
                .ok()
                .and_then(|l| l.last().cloned())
            else {
                continue;
            };
            let live = live_pending(&a, now);
            if !ro
                && r.tool == t.built.name
                && a.kind == INTERRUPTED_KIND
                && outcome != Some(Outcome::Deny)
            {
                if live || a.status == ApprovalStatus::Approved {
                    return Some(answer::blocked_unknown(&t.built.name, &a.id));
                }
                if a.status == ApprovalStatus::Pending {
                    // Its question expired: attaching expires it and ends the run, so the
                    // unknown outcome below asks again rather than letting the tool run.
                    self.expire(calls, t, &run.id);
                }
            } else if live {
                pending += 1;
            }
        }
        if !ro
            && outcome != Some(Outcome::Deny)
            && let Some(a) = self.unknown_block(calls, t, key)
        {
            return Some(a);
        }
        (needs && pending >= self.o.cfg.max_pending)
            .then(|| answer::blocked_cap(self.o.cfg.max_pending))
    }
}
