//! Policy dispatch (spec 3.5 step 7, 8.2 step 9) and the pause (4.3).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use super::ctx::{RunCtx, StepResult, Stop, step_set};
use super::db::DbTx;
use super::record;
use super::step::json_err;
use crate::runtime::json::{self, gojson::Object};
use crate::runtime::policy::{Outcome, PolicyError, PolicyRequest, RunView, outcome_of};
use crate::runtime::store::{NewApproval, StepUpdate, StoreError, Transition};
use crate::runtime::tools::Registered;
use crate::runtime::types::{PolicyDecision, Run, RunStatus, StepStatus, Timestamp, ToolRequest};

/// The approval kind of the interrupted-side-effect pause (spec 8.3).
pub(crate) const INTERRUPTED_KIND: &str = "interrupted_side_effect";

/// An allowed request, ready to run.
#[derive(Clone)]
pub(crate) struct Allowed {
    pub step_id: String,
    pub index: i64,
    pub tool: Arc<Registered>,
    /// The arguments as recorded (`{}` when there were none).
    pub args: Vec<u8>,
    pub started: Timestamp,
    /// The start not yet written (`None` once `start_tool` committed it).
    pub start: Option<Box<Start>>,
}

/// What the start transaction of an allowed request writes (spec 8.4).
#[derive(Clone)]
pub(crate) struct Start {
    policy_json: Vec<u8>,
    policy_event: Vec<u8>,
    tool_started: Vec<u8>,
    policy_at: Timestamp,
    from_step: StepStatus,
    /// On resume: the granted approval (the start also moves the run WAITING -> RUNNING).
    resumed: Option<String>,
}

/// What dispatch led to.
pub(crate) enum Dispatched {
    Execute(Allowed),
    /// Denied (or otherwise ended the step): the loop goes on.
    Continue,
}

/// Where the dispatch happens: the loop, or a resume of a grant.
pub(crate) struct ResumeGrant {
    pub approval_id: String,
    pub hash: String,
}

/// The approval hash (spec 4.2).
pub fn approval_hash(
    kind: &str,
    capability: &[u8],
    presentation: &[u8],
    request_json: &[u8],
) -> Result<String, json::JsonError> {
    json::approval_hash(kind, capability, presentation, request_json)
}

/// `step.policy`: the decision's fields, then `policy_id`?, `spec_hash`?, `view`?.
pub(crate) fn policy_event(
    pd: &PolicyDecision,
    policy_id: &str,
    spec_hash: &str,
    view: Option<&RunView>,
) -> Result<Vec<u8>, json::JsonError> {
    let mut o = Object::new();
    pd.go_fields(&mut o)?;
    o.str_opt("policy_id", policy_id)
        .str_opt("spec_hash", spec_hash);
    if let Some(v) = view {
        o.encoded("view", &v.go_json());
    }
    Ok(o.finish())
}

impl RunCtx {
    /// The request in policy form.
    pub fn policy_request(
        &self,
        step_id: &str,
        reg: &Registered,
        args: &[u8],
    ) -> Result<PolicyRequest, json::JsonError> {
        Ok(PolicyRequest {
            run_id: self.run_id.clone(),
            step_id: step_id.to_string(),
            tool: reg.def.name.clone(),
            description: reg.def.description.clone(),
            side_effect: reg.def.side_effect.clone(),
            args: json::policy_json(args)?,
            input_schema: json::policy_form_unchecked(&reg.def.input_schema),
        })
    }

    /// Asks the policy; a panic in it is an error.
    pub fn evaluate(
        &self,
        req: &PolicyRequest,
        view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        let policy = self.inner.policy.clone();
        match catch_unwind(AssertUnwindSafe(|| policy.evaluate(req, view))) {
            Ok(r) => r,
            Err(_) => Err(PolicyError::Panicked),
        }
    }

    /// Evaluates and dispatches a recorded, valid tool call. `from` is the run status the
    /// writes expect (RUNNING in the loop, WAITING on resume, where `grant` is set).
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch(
        &mut self,
        step_id: &str,
        index: i64,
        reg: Arc<Registered>,
        args: &[u8],
        view: RunView,
        from_step: StepStatus,
        grant: Option<ResumeGrant>,
    ) -> StepResult<Dispatched> {
        let from_run: &[RunStatus] = if grant.is_some() {
            &[RunStatus::WaitingForApproval]
        } else {
            &[RunStatus::Running]
        };
        let suffix = if grant.is_some() { " on resume" } else { "" };
        let args: Vec<u8> = if args.is_empty() {
            b"{}".to_vec()
        } else {
            args.to_vec()
        };
        let req = match self.policy_request(step_id, &reg, &args) {
            Ok(r) => r,
            Err(e) => {
                return Err(self.fail_internal(from_run, &format!("internal: policy JSON: {e}")));
            }
        };
        let policy_at = self.inner.now();
        let pd = match self.evaluate(&req, &view) {
            Ok(pd) => pd,
            Err(e) => return Err(self.fail_internal(from_run, &format!("policy: {e}"))),
        };
        for (field, v) in [
            ("capability", &pd.capability),
            ("presentation", &pd.presentation),
        ] {
            if !v.is_empty()
                && let Err(e) = json::check_json(v)
            {
                return Err(
                    self.fail_internal(from_run, &format!("internal: approval {field}: {e}"))
                );
            }
        }
        let pj = pd.to_go_json().map_err(json_err("policy decision"))?;
        let ev = policy_event(&pd, &self.inner.policy_id, &reg.spec_hash, Some(&view))
            .map_err(json_err("policy event"))?;
        let request = ToolRequest {
            run_id: self.run_id.clone(),
            step_id: step_id.to_string(),
            spec: reg.spec.clone(),
            args: args.clone(),
        };
        match outcome_of(&pd) {
            Outcome::Allow => self.allow(
                step_id, index, reg, args, &pj, &ev, policy_at, from_step, grant,
            ),
            Outcome::RequireApproval => {
                if let Some(g) = &grant {
                    let rj = request.to_go_json().map_err(json_err("request"))?;
                    let h = approval_hash(&pd.kind, &pd.capability, &pd.presentation, &rj)
                        .map_err(json_err("approval hash"))?;
                    // Spec 8.2 step 9, for every grant (an interrupted side effect's too): the
                    // policy's own approval must be the one granted.
                    if h == g.hash {
                        return self.allow(
                            step_id, index, reg, args, &pj, &ev, policy_at, from_step, grant,
                        );
                    }
                }
                let pid = self.inner.policy_id.clone();
                let superseded = grant.as_ref().map(|g| g.approval_id.clone());
                let run = self.pause(
                    step_id,
                    &[from_step],
                    from_run,
                    &pd,
                    &request,
                    policy_at,
                    &ev,
                    &pid,
                    superseded.as_deref(),
                )?;
                Err(Stop::Ended(Box::new(run)))
            }
            Outcome::Deny | Outcome::Abort => {
                let abort = outcome_of(&pd) == Outcome::Abort;
                let verb = if abort { "aborted" } else { "denied" };
                let obs = record::policy_denied(&pd.reason, &reg.def.name, verb, suffix);
                let now = self.inner.now();
                let detail = obs.summary.clone();
                let (rid, pid) = (self.run_id.clone(), self.inner.policy_id.clone());
                let resumed = grant.as_ref().map(|g| g.approval_id.clone());
                let owner = self.inner.owner.clone();
                let until = self.inner.lease_expiry();
                self.end_step(
                    step_id,
                    &[from_step],
                    StepStatus::Failed,
                    Some(&obs),
                    &detail,
                    now,
                    |cx, tx| {
                        if let Some(aid) = &resumed {
                            cx.resume_to_running(tx, step_id, aid, &owner, until, now)?;
                        }
                        let pjs = String::from_utf8_lossy(&pj).into_owned();
                        let all = [StepStatus::Deciding, StepStatus::AwaitingApproval];
                        step_set(
                            tx,
                            step_id,
                            &all,
                            StepUpdate {
                                policy_json: Some(&pjs),
                                policy_id: Some(&pid),
                                ..StepUpdate::default()
                            },
                        )?;
                        tx.append(&rid, step_id, &policy_at, "step.policy", &ev)?;
                        Ok(())
                    },
                    |cx, tx| {
                        if abort {
                            cx.finish_in(
                                tx,
                                &[RunStatus::Running],
                                RunStatus::Failed,
                                "policy_abort",
                                &pd.reason,
                                b"",
                                now,
                                false,
                            )?;
                        }
                        Ok(())
                    },
                )?;
                if grant.is_some() {
                    self.hold_lease(until);
                }
                if abort {
                    return Err(self.end_result(Ok(())));
                }
                Ok(Dispatched::Continue)
            }
            Outcome::Unknown(x) => Err(self.fail_internal(
                from_run,
                &format!(
                    "unknown policy outcome {}",
                    crate::runtime::json::go_quote(&x)
                ),
            )),
        }
    }

    /// The allowed request, written nowhere yet (spec 8.4): the step stays `deciding` (or
    /// `awaiting_approval` on resume) until [`RunCtx::start_tool`] writes the start.
    #[allow(clippy::too_many_arguments)]
    fn allow(
        &mut self,
        step_id: &str,
        index: i64,
        reg: Arc<Registered>,
        args: Vec<u8>,
        pj: &[u8],
        ev: &[u8],
        policy_at: Timestamp,
        from_step: StepStatus,
        grant: Option<ResumeGrant>,
    ) -> StepResult<Dispatched> {
        let aid = grant
            .as_ref()
            .map(|g| g.approval_id.clone())
            .unwrap_or_default();
        let started_tool =
            record::tool_started(&aid, &args, &reg.def.name).map_err(json_err("tool start"))?;
        let mut started = self
            .step(step_id)
            .map(|s| s.started_at)
            .unwrap_or(policy_at);
        if grant.is_some() {
            // The human wait is not active time: the step's clock restarts at the resume.
            started = policy_at;
        }
        Ok(Dispatched::Execute(Allowed {
            step_id: step_id.to_string(),
            index,
            tool: reg,
            args,
            started,
            start: Some(Box::new(Start {
                policy_json: pj.to_vec(),
                policy_event: ev.to_vec(),
                tool_started: started_tool,
                policy_at,
                from_step,
                resumed: grant.map(|g| g.approval_id),
            })),
        }))
    }

    /// Writes the start of an allowed request (spec 8.4), in one transaction that requires
    /// the run's state and the lease: step `executing`, `step.policy`, `step.tool_started`
    /// (on resume, first WAITING -> RUNNING with `run.resumed`, taking the lease). Nothing
    /// may run unless this commits; a cancel, a lost or lapsed lease or a takeover since the
    /// verdict fails it.
    pub fn start_tool(&mut self, a: &mut Allowed) -> StepResult<()> {
        let Some(st) = a.start.take() else {
            return Ok(());
        };
        let owner = self.inner.owner.clone();
        let pid = self.inner.policy_id.clone();
        let until = self.inner.lease_expiry();
        let step_id = a.step_id.as_str();
        let started = a.started;
        self.write(|tx| {
            if let Some(aid) = &st.resumed {
                self.resume_to_running(tx, step_id, aid, &owner, until, st.policy_at)?;
            } else if !self.lease.ok() {
                return Err(self.lease.lost_error().into());
            }
            tx.require_lease(&self.run_id, &owner, self.inner.lease_now())?;
            let pjs = String::from_utf8_lossy(&st.policy_json).into_owned();
            step_set(
                tx,
                step_id,
                std::slice::from_ref(&st.from_step),
                StepUpdate {
                    status: Some(StepStatus::Executing),
                    policy_json: Some(&pjs),
                    policy_id: Some(&pid),
                    started_at: Some(started),
                    ..StepUpdate::default()
                },
            )?;
            tx.append(
                &self.run_id,
                step_id,
                &st.policy_at,
                "step.policy",
                &st.policy_event,
            )?;
            tx.append(
                &self.run_id,
                step_id,
                &st.policy_at,
                "step.tool_started",
                &st.tool_started,
            )?;
            Ok(())
        })?;
        if st.resumed.is_some() {
            self.hold_lease(until);
            self.run.status = RunStatus::Running;
        }
        if let Some(s) = self.step_mut(step_id) {
            s.status = StepStatus::Executing;
            s.policy = PolicyDecision::from_json(&st.policy_json).ok();
            s.policy_json = String::from_utf8_lossy(&st.policy_json).into_owned();
            s.policy_id = pid;
            s.started_at = started;
        }
        Ok(())
    }

    /// Starts holding the lease a resume write just stamped.
    pub fn hold_lease(&mut self, until: Timestamp) {
        self.attached = true;
        self.lease = super::lease::Lease::hold(
            &self.inner.store,
            &self.run_id,
            &self.inner.owner,
            self.inner.lease_ttl,
            until,
            self.inner.lease_clock.clone(),
        );
    }

    /// `from` -> RUNNING, the lease stamped for `owner` to `until` (as the judging clock
    /// reads it) plus the TTL.
    pub(super) fn to_running(
        &self,
        tx: &mut DbTx<'_, '_>,
        from: &[RunStatus],
        owner: &str,
        until: Timestamp,
    ) -> Result<(), StoreError> {
        let stamped = tx.lease_until(until, self.inner.lease_ttl)?;
        tx.transition(&Transition {
            run_id: self.run_id.as_bytes(),
            from,
            to: RunStatus::Running,
            reason: "",
            detail: "",
            finished_at: Timestamp::ZERO,
            result_json: "",
            lease_owner: Some(owner),
            lease_expires_at: stamped,
        })
    }

    /// WAITING -> RUNNING (lease stamped) with `run.resumed {"approval_id"}`.
    pub fn resume_to_running(
        &self,
        tx: &mut DbTx<'_, '_>,
        step_id: &str,
        approval_id: &str,
        owner: &str,
        until: Timestamp,
        at: Timestamp,
    ) -> Result<(), Stop> {
        self.to_running(tx, &[RunStatus::WaitingForApproval], owner, until)?;
        let p = Object::new().str("approval_id", approval_id).finish();
        tx.append(&self.run_id, step_id, &at, "run.resumed", &p)?;
        Ok(())
    }

    /// Pauses the step on an approval (spec 4.3): one transaction. On a resume whose grant the
    /// policy no longer accepts, `superseded` is that grant: the pause writes only while it is
    /// still the step's latest approval, so two resumes of one grant (two workers, found from
    /// outside on PostgreSQL) ask one new question, not two; the other gets `ErrRunState`.
    #[allow(clippy::too_many_arguments)]
    pub fn pause(
        &mut self,
        step_id: &str,
        expected: &[StepStatus],
        from_run: &[RunStatus],
        pd: &PolicyDecision,
        request: &ToolRequest,
        policy_at: Timestamp,
        policy_ev: &[u8],
        policy_id: &str,
        superseded: Option<&str>,
    ) -> StepResult<Run> {
        let now = self.inner.now();
        let aid = self.inner.id();
        let cap = if pd.capability.is_empty() {
            b"{}".to_vec()
        } else {
            pd.capability.clone()
        };
        let pres = if pd.presentation.is_empty() {
            b"{}".to_vec()
        } else {
            pd.presentation.clone()
        };
        let rj = request.to_go_json().map_err(json_err("request"))?;
        let hash = approval_hash(&pd.kind, &cap, &pres, &rj).map_err(json_err("approval hash"))?;
        let pj = pd.to_go_json().map_err(json_err("policy decision"))?;
        let requested = record::approval_requested(&aid, &cap, &hash, &pd.kind, &pres, &pd.reason)
            .map_err(json_err("approval"))?;
        let expires = if self.limits.approval_ttl > 0 {
            now.add_nanos(self.limits.approval_ttl)
        } else {
            Timestamp::ZERO
        };
        let owner = self.inner.owner.clone();
        let pid = policy_id.to_string();
        self.write(|tx| {
            let pjs = String::from_utf8_lossy(&pj).into_owned();
            step_set(
                tx,
                step_id,
                expected,
                StepUpdate {
                    status: Some(StepStatus::AwaitingApproval),
                    policy_json: Some(&pjs),
                    policy_id: Some(&pid),
                    observation_json: Some(""),
                    observation_hash: Some(""),
                    finished_at: Some(Timestamp::ZERO),
                    ..StepUpdate::default()
                },
            )?;
            tx.transition(&Transition {
                run_id: self.run_id.as_bytes(),
                from: from_run,
                to: RunStatus::WaitingForApproval,
                reason: "",
                detail: "",
                finished_at: Timestamp::ZERO,
                result_json: "",
                lease_owner: Some(&owner),
                lease_expires_at: Timestamp::ZERO,
            })?;
            // After the writes above took their locks: another resume of this grant that
            // committed first has added its own question.
            if let Some(g) = superseded
                && tx.latest_approval_id(&self.run_id, step_id)?.as_deref() != Some(g.as_bytes())
            {
                return Err(StoreError::RunState {
                    detail: crate::runtime::types::Said::from("approval ")
                        .id(g.as_bytes())
                        .text(" is no longer its step's latest: another resume asked again"),
                }
                .into());
            }
            tx.append(&self.run_id, step_id, &policy_at, "step.policy", policy_ev)?;
            tx.insert_approval(&NewApproval {
                id: &aid,
                run_id: &self.run_id,
                step_id,
                kind: &pd.kind,
                capability_json: &String::from_utf8_lossy(&cap),
                presentation_json: &String::from_utf8_lossy(&pres),
                request_json: &String::from_utf8_lossy(&rj),
                hash: &hash,
                created_at: now,
                expires_at: expires,
            })?;
            tx.append(
                &self.run_id,
                step_id,
                &now,
                "approval.requested",
                &requested,
            )?;
            Ok(())
        })?;
        self.lease.mark_lost();
        Ok(self.inner.store.get_run(&self.run_id)?)
    }
}
