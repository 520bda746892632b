//! One run per call (agentrt mcp 2.5, 2.10): begin a run and propose the model's call, execute
//! what the Gate allowed, end a run that did not complete with a `fail` decision of origin
//! `operator`, and keep the question of an unknown outcome open in the same run.

use super::answer::{self, Answer, Earlier};
use super::attempt::{Last, classify, error_text, last_attempt, not_sent};
use super::calls::{Calls, Claim, OUTCOME_KNOWN, OUTCOME_NONE, OUTCOME_UNKNOWN, nanos};
use super::open::Offered;
use super::policy::{Attempt, INTERRUPTED_KIND, how};
use super::{Proxy, now_ns};
use crate::runtime::driver::{NextStep, Session, Verdict};
use crate::runtime::types::{Decision, DecisionKind, Limits, Origin, Run};

/// What the rules found before a new run is begun.
#[derive(Default)]
pub struct Found {
    /// The key's open row, which a claim must still find.
    pub expected: Option<i64>,
    /// An open row whose run was never begun: begun under its id.
    pub reuse: Option<String>,
    /// An earlier attempt of this request whose outcome is unknown and unresolved.
    pub prior: Option<Attempt>,
    /// The run reopens another request's unresolved question (agentrt's `unknownBlock`): its
    /// decision is recorded with origin `operator`, not `model`.
    pub reopened: bool,
}

/// What a decision under the mutex came to.
pub enum Next {
    Answer(Answer),
    /// Decide again (a race with another caller).
    Retry,
    /// Run the allowed request (outside the mutex).
    Execute(Box<Session>, String),
    /// An approval is pending: (run, approval id, kind).
    Hold(String, String, String),
}

pub const CLOSE_ERROR: &str = "one call per run: the tool call returned an error";
pub const CLOSE_DENIED: &str = "one call per run: the request was denied";
pub const CLOSE_INVALID: &str = "one call per run: the request was invalid";
pub const CLOSE_TAKEN_OVER: &str =
    "one call per run: taken over after an interruption, with nothing left in it to execute";
pub const CLOSE_UNRECORDED: &str =
    "one call per run: the tool call executed and its result could not be recorded";

fn decision(
    kind: DecisionKind,
    tool: &str,
    args: &[u8],
    message: &str,
    origin: Origin,
) -> Decision {
    Decision {
        kind,
        tool: tool.into(),
        args: args.to_vec(),
        message: message.into(),
        origin,
        ..Decision::default()
    }
}

/// The pending answer for an approval of `kind`.
pub fn pending_answer(kind: &str, id: &str, capability: &str) -> Answer {
    if kind != INTERRUPTED_KIND {
        return answer::pending(id);
    }
    let ended = serde_json::from_str::<serde_json::Value>(capability)
        .ok()
        .and_then(|v| v["interrupted"]["ended"].as_str().map(str::to_string))
        .unwrap_or_else(|| "cut_off".into());
    if ended == "cut_off" {
        answer::interrupted(id)
    } else {
        answer::unknown(how(&ended), "", Some(id))
    }
}

impl Proxy {
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            max_steps: 3,
            max_consecutive_tool_failures: 3,
            loop_threshold: 3,
            approval_ttl: nanos(self.o.cfg.approval_ttl),
            grant_ttl: nanos(self.o.cfg.grant_ttl),
            ..Limits::default()
        }
    }

    /// Tells the operator an approval waits, and how to decide it.
    pub(crate) fn hint(&self, tool: &str, run: &Run) {
        let Ok(list) = self.o.store.list_approvals(&run.id) else {
            return;
        };
        let Some(a) = list.iter().rev().find(|a| a.status.as_str() == "pending") else {
            return;
        };
        let s = crate::mcp::sanitize;
        self.say(&format!(
            "approval {} ({}) for {} waits for an operator: run {}",
            s(&a.id),
            s(&a.kind),
            s(tool),
            s(&run.id)
        ));
        // A line to paste: every word a shell word that reads back the stored bytes
        // (`safetext::shell`), never the display escaper's text.
        use crate::safetext::shell::{command, id_word};
        let line = match (id_word(run.id.as_bytes()), id_word(a.id.as_bytes())) {
            (Ok(r), Ok(ap)) => command(
                &self.o.cfg.database.db_arg(),
                &format!("approve {r} --approval {ap}"),
            ),
            (Err(why), _) | (_, Err(why)) => Err(format!(
                "an id {}, so no command can be printed for it",
                why.why()
            )),
        };
        self.say(&match line {
            // Printed last on its line, so what a person copies ends where the line ends.
            Ok(cmd) => format!("  decide with (or `reject` in place of `approve`): {cmd}"),
            Err(why) => format!("  decide it in the console or with approve: {why}"),
        });
    }

    /// The latest approval of a run waiting on one, as a pending answer.
    pub(crate) fn pending_of(&self, run: &Run) -> Answer {
        match self.o.store.list_approvals(&run.id) {
            Ok(list) => match list.last() {
                Some(a) => pending_answer(&a.kind, &a.id, &a.capability),
                None => answer::in_progress(),
            },
            Err(_) => {
                answer::unavailable("the gate could not read its records, and nothing was executed")
            }
        }
    }

    /// Ends a run whose call did not complete (a `fail` decision of origin `operator`).
    pub(crate) fn end_run(&self, s: &mut Session, message: &str) {
        match s.step() {
            Ok(NextStep::Open(_)) => {
                if let Err(e) = s.propose(decision(
                    DecisionKind::Fail,
                    "",
                    b"",
                    message,
                    Origin::Operator,
                )) {
                    self.say(&format!(
                        "run closing: {}",
                        crate::mcp::sanitize_message(&e.to_string())
                    ));
                }
            }
            Ok(NextStep::Over(_)) => {}
            Err(e) => self.say(&format!(
                "run closing: {}",
                crate::mcp::sanitize_message(&e.to_string())
            )),
        }
        s.close();
    }

    fn settle(&self, calls: &mut Calls, run_id: &str, outcome: i64) {
        if let Err(e) = calls.settle(run_id, outcome, now_ns()) {
            self.say(&format!("error: {}", crate::mcp::sanitize_message(&e)));
        }
    }

    /// Rule 7: a new run for this request (or the reused row's), its row claimed first.
    pub(crate) fn begin(
        &self,
        calls: &mut Calls,
        t: &Offered,
        key: Option<&str>,
        found: Found,
        args: &[u8],
    ) -> Next {
        let Found {
            expected,
            reuse,
            prior,
            reopened,
        } = found;
        let mut rnd = [0u8; 8];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut rnd);
        let run_id = reuse
            .clone()
            .unwrap_or_else(|| format!("{}.{}", self.o.cfg.session, hex::encode(rnd)));
        if reuse.is_none() {
            let k = key.map_or_else(|| format!("invalid:{run_id}"), str::to_string);
            let now = now_ns();
            match calls.claim(
                &k,
                expected,
                &t.built.name,
                &t.built.side_effect,
                &run_id,
                now,
            ) {
                Ok(Claim::Claimed) => {}
                Ok(Claim::Race) => return Next::Retry,
                Err(e) => {
                    self.say(&format!("error: {}", crate::mcp::sanitize_message(&e)));
                    return Next::Answer(answer::unavailable(
                        "the gate could not record this request, and nothing was executed",
                    ));
                }
            }
        }
        let goal = format!("call {}", t.built.name);
        let mut s = match self
            .rt
            .block_on(self.o.gate.begin(&run_id, &goal, self.limits()))
        {
            Ok(s) => s,
            // Another caller began this run id first (the store refuses a second): decide again.
            Err(e)
                if e.is_run_state()
                    || e.to_string().contains("UNIQUE constraint failed: runs.id") =>
            {
                return Next::Retry;
            }
            Err(e) => {
                // The row stays without a run: "nothing started", begun by the next identical
                // call under its id.
                self.say(&format!(
                    "error: {}",
                    crate::mcp::sanitize_message(&e.to_string())
                ));
                return Next::Answer(answer::unavailable(
                    "the gate could not start this request, and nothing was executed",
                ));
            }
        };
        let _ = calls.unsettle(&run_id);
        match s.step() {
            Ok(NextStep::Open(_)) => {}
            Ok(NextStep::Over(v)) => return Next::Answer(self.ended_answer(&v)),
            Err(_) => {
                return Next::Answer(answer::unavailable(
                    "the gate could not start this request, and nothing was executed",
                ));
            }
        }
        // After an unresolved unknown outcome of this request the policy asks the operator
        // again, whatever it would say of the call alone.
        if let (Some(a), Ok(mut n)) = (prior, self.o.policy.noted.lock()) {
            n.insert(run_id.clone(), a);
        }
        let origin = if reopened {
            Origin::Operator
        } else {
            Origin::Model
        };
        let v = s.propose(decision(
            DecisionKind::ToolCall,
            &t.built.name,
            args,
            "",
            origin,
        ));
        if let Ok(mut n) = self.o.policy.noted.lock() {
            n.remove(&run_id);
        }
        self.after_proposal(calls, s, &run_id, t, v)
    }

    /// What a proposal's verdict comes to.
    pub(crate) fn after_proposal(
        &self,
        calls: &mut Calls,
        mut s: Session,
        run_id: &str,
        t: &Offered,
        v: Result<Verdict, crate::runtime::driver::RuntimeError>,
    ) -> Next {
        match v {
            Ok(Verdict::Allowed(_)) => Next::Execute(Box::new(s), run_id.to_string()),
            Ok(Verdict::Pending(run)) => {
                self.hint(&t.built.name, &run);
                match self
                    .o
                    .store
                    .list_approvals(run_id)
                    .ok()
                    .and_then(|l| l.last().cloned())
                {
                    Some(a) => Next::Hold(run_id.to_string(), a.id, a.kind),
                    None => Next::Answer(answer::in_progress()),
                }
            }
            Ok(Verdict::Denied(obs)) => {
                let invalid = obs.kind == "invalid_decision";
                self.end_run(&mut s, if invalid { CLOSE_INVALID } else { CLOSE_DENIED });
                self.settle(calls, run_id, OUTCOME_NONE);
                let why = reason_of(&obs.content, if invalid { "error" } else { "reason" });
                Next::Answer(if invalid {
                    answer::invalid(&why)
                } else {
                    answer::denied(&why)
                })
            }
            Ok(other) => {
                self.settle(calls, run_id, OUTCOME_NONE);
                Next::Answer(self.ended_answer(&other))
            }
            Err(e) if e.is_run_state() || e.is_lease_lost() => Next::Answer(answer::in_progress()),
            Err(e) => {
                self.say(&format!(
                    "error: {}",
                    crate::mcp::sanitize_message(&e.to_string())
                ));
                Next::Answer(answer::unavailable(
                    "the gate could not record this request, and nothing was executed",
                ))
            }
        }
    }

    pub(crate) fn ended_answer(&self, v: &Verdict) -> Answer {
        match v {
            Verdict::Ended(run) if run.reason == "approval_expired" => {
                let id = self
                    .o
                    .store
                    .list_approvals(&run.id)
                    .ok()
                    .and_then(|l| l.last().map(|a| a.id.clone()))
                    .unwrap_or_default();
                answer::expired(
                    &id,
                    now_ns().saturating_add(nanos(self.o.cfg.repeat_window)),
                )
            }
            Verdict::Ended(run) => answer::denied(if run.reason_detail.is_empty() {
                &run.reason
            } else {
                &run.reason_detail
            }),
            Verdict::Pending(run) => self.pending_of(run),
            _ => answer::in_progress(),
        }
    }

    /// Runs the allowed request (outside the mutex) and answers with what it came to.
    pub(crate) fn execute(&self, mut s: Session, run_id: &str, t: &Offered) -> Answer {
        let v = self.rt.block_on(s.execute());
        let lock = || self.calls.lock().unwrap_or_else(|p| p.into_inner());
        match v {
            Ok(Verdict::Observed(obs)) => {
                self.settle(&mut lock(), run_id, OUTCOME_KNOWN);
                s.close();
                answer::result(&obs.content)
            }
            Ok(Verdict::Ended(run))
                if run.status == crate::runtime::types::RunStatus::Completed =>
            {
                // A terminal tool's success completes its run in the same transaction.
                self.settle(&mut lock(), run_id, OUTCOME_KNOWN);
                let steps = self.o.store.list_steps(run_id).unwrap_or_default();
                match steps
                    .iter()
                    .rev()
                    .find_map(|x| x.observation.clone().filter(|o| o.kind == "tool_result"))
                {
                    Some(obs) => answer::result(&obs.content),
                    None => answer::unavailable("the call's outcome was not recorded"),
                }
            }
            Ok(Verdict::Denied(obs)) if obs.kind == "tool_error" => {
                self.tool_failed(s, run_id, t, &obs.content)
            }
            Ok(Verdict::Denied(obs)) => {
                let invalid = obs.kind == "invalid_decision";
                self.end_run(&mut s, if invalid { CLOSE_INVALID } else { CLOSE_DENIED });
                self.settle(&mut lock(), run_id, OUTCOME_NONE);
                let why = reason_of(&obs.content, if invalid { "error" } else { "reason" });
                if invalid {
                    answer::invalid(&why)
                } else {
                    answer::denied(&why)
                }
            }
            Ok(Verdict::Pending(run)) => {
                self.hint(&t.built.name, &run);
                self.pending_of(&run)
            }
            Ok(other) => {
                self.settle(&mut lock(), run_id, OUTCOME_NONE);
                self.ended_answer(&other)
            }
            Err(e) if e.is_run_state() || e.is_lease_lost() => answer::in_progress(),
            Err(e) => {
                self.say(&format!(
                    "error: {}",
                    crate::mcp::sanitize_message(&e.to_string())
                ));
                answer::unavailable(
                    "the gate could not start this request, and nothing was executed",
                )
            }
        }
    }

    fn tool_failed(&self, mut s: Session, run_id: &str, t: &Offered, content: &[u8]) -> Answer {
        let lock = || self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if not_sent(content, &t.server, &t.built.tool) {
            // The connection went between the check before executing and the request: it was
            // never written, so this is no attempt (an earlier one in the run keeps its
            // outcome, which settles the row). The grant it used is spent.
            self.end_run(&mut s, CLOSE_ERROR);
            let ro = t.built.side_effect == "read_only";
            let code = match last_attempt(&self.o.store, run_id, t, ro) {
                Ok(Last::Known(_)) => OUTCOME_KNOWN,
                Ok(Last::Unknown(_)) => OUTCOME_UNKNOWN,
                Ok(Last::None) | Err(_) => OUTCOME_NONE,
            };
            self.settle(&mut lock(), run_id, code);
            let why = self
                .lost(t)
                .unwrap_or_else(|| "the connection was closed".into());
            return self.not_connected(t, &why, None);
        }
        if t.built.side_effect == "read_only" {
            self.end_run(&mut s, CLOSE_ERROR);
            self.settle(&mut lock(), run_id, OUTCOME_KNOWN);
            return answer::tool_error(&error_text(content));
        }
        match classify(content, &t.server, &t.built.tool, &t.built.name) {
            Ok(Earlier::Unrecorded(why)) => {
                self.end_run(&mut s, CLOSE_UNRECORDED);
                self.settle(&mut lock(), run_id, OUTCOME_KNOWN);
                answer::unrecorded(&why, self.window(t))
            }
            Ok(_) => {
                self.end_run(&mut s, CLOSE_ERROR);
                self.settle(&mut lock(), run_id, OUTCOME_KNOWN);
                answer::tool_error(&error_text(content))
            }
            Err(ended) => {
                let mut calls = lock();
                self.rerun(&mut calls, s, run_id, t, &ended, &error_text(content))
            }
        }
    }

    /// Asks about an unknown outcome again in a fresh run of the request (agentrt: the step
    /// limit was reached, or the proposal ended the run): the id of the approval it waits on.
    fn reopen(
        &self,
        calls: &mut Calls,
        t: &Offered,
        args: &[u8],
        attempt: Attempt,
    ) -> Option<String> {
        let key = super::key::request_key(&t.built.name, args)?;
        let expected = calls
            .for_key(&key, now_ns(), 0)
            .ok()?
            .iter()
            .find(|r| r.open)
            .map(|r| r.id);
        let found = Found {
            expected,
            reuse: None,
            prior: Some(attempt),
            reopened: true,
        };
        match self.begin(calls, t, Some(&key), found, args) {
            Next::Hold(_, id, _) => Some(id),
            _ => None,
        }
    }

    /// An unknown outcome: the same run asks an operator whether it runs again.
    fn rerun(
        &self,
        calls: &mut Calls,
        mut s: Session,
        run_id: &str,
        t: &Offered,
        ended: &str,
        err: &str,
    ) -> Answer {
        let how = how(ended);
        self.say(&format!(
            "run {}: a call to {} {how}; its outcome is unknown",
            crate::mcp::sanitize(run_id),
            crate::mcp::sanitize(&t.built.name)
        ));
        let steps = self.o.store.list_steps(run_id).unwrap_or_default();
        let Some(last) = steps.iter().rev().find(|x| {
            x.decision
                .as_ref()
                .is_some_and(|d| d.kind == DecisionKind::ToolCall)
        }) else {
            self.settle(calls, run_id, OUTCOME_UNKNOWN);
            s.close();
            return answer::unknown(how, err, None);
        };
        let (attempt, args) = Attempt::of_step(run_id, last, ended.to_string());
        if let Ok(mut n) = self.o.policy.noted.lock() {
            n.insert(run_id.to_string(), attempt.clone());
        }
        let asked = match s.step() {
            Ok(NextStep::Open(_)) => {
                match s.propose(decision(
                    DecisionKind::ToolCall,
                    &t.built.name,
                    &args,
                    "",
                    Origin::Operator,
                )) {
                    Ok(Verdict::Pending(run)) => {
                        self.hint(&t.built.name, &run);
                        Asked::Approval(
                            self.o
                                .store
                                .list_approvals(run_id)
                                .ok()
                                .and_then(|l| l.last().map(|a| a.id.clone())),
                        )
                    }
                    Ok(Verdict::Ended(_)) => Asked::Reopen,
                    _ => Asked::Approval(None),
                }
            }
            // No step left in this run (the step limit): the question moves to a fresh run.
            Ok(NextStep::Over(_)) => Asked::Reopen,
            Err(_) => Asked::Approval(None),
        };
        if let Ok(mut n) = self.o.policy.noted.lock() {
            n.remove(run_id);
        }
        s.close();
        let asked = match asked {
            Asked::Approval(Some(id)) => Some(id),
            Asked::Approval(None) => {
                self.settle(calls, run_id, OUTCOME_UNKNOWN);
                None
            }
            Asked::Reopen => {
                self.settle(calls, run_id, OUTCOME_UNKNOWN);
                self.reopen(calls, t, &args, attempt)
            }
        };
        answer::unknown(how, err, asked.as_deref())
    }
}

/// What the re-run proposal came to.
enum Asked {
    /// It waits on this approval (none: the policy denies, or the store failed).
    Approval(Option<String>),
    /// No step was left, or the proposal ended the run: ask in a fresh run.
    Reopen,
}

/// A string member of a recorded observation.
fn reason_of(content: &[u8], key: &str) -> String {
    serde_json::from_slice::<serde_json::Value>(content)
        .ok()
        .and_then(|v| v[key].as_str().map(str::to_string))
        .unwrap_or_default()
}
