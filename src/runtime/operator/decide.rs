//! Approve / Reject / ApproveShown / RejectShown (spec 4.4).

use crate::runtime::json::{approval_hash, gojson::Object};
use crate::runtime::store::{Failing, IN_CRATE, RunStore, RunTx};
use crate::runtime::types::{
    Approval, ApprovalStatus, AsKey, Event, Key, Run, RunStatus, Said, Timestamp,
};

use super::OperatorError;
use super::common::{
    decide_row, failure, finish, not_found, not_pending, observation, require_waiting,
};
use super::expire;

/// What the decision is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown<'a> {
    /// Approve/Reject: the stored row, whatever its hash (still verified against its request).
    Unbound,
    /// ApproveShown/RejectShown: only if the stored hash is this one (compared under the
    /// write lock). An empty hash is refused.
    Hash(&'a str),
}

/// A decision that landed.
#[derive(Debug, Clone)]
pub struct Decided {
    /// The run after the decision (WAITING after an approve, CANCELLED after a reject).
    pub run: Run,
    /// The approval after the decision.
    pub approval: Approval,
    /// The events appended, in seq order.
    pub events: Vec<Event>,
}

/// What a reviewer decides about a pending approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ruling {
    /// Approve: the run stays WAITING until a resume runs the request.
    Approve,
    /// Reject: the step fails and the run is CANCELLED (`approval_rejected`).
    Reject,
}

impl Decided {
    /// The run and the approval as the decision's transaction left them, read after it, with
    /// the events it appended.
    pub(super) fn read<S: RunStore + ?Sized>(
        store: &S,
        run_id: &[u8],
        approval_id: &[u8],
        events: Vec<Event>,
    ) -> Result<Decided, OperatorError> {
        Ok(Decided {
            run: store.get_run(run_id)?,
            approval: store.get_approval(run_id, approval_id)?,
            events,
        })
    }
}

impl Ruling {
    /// The approval's status after it.
    pub fn status(self) -> ApprovalStatus {
        match self {
            Ruling::Approve => ApprovalStatus::Approved,
            Ruling::Reject => ApprovalStatus::Rejected,
        }
    }
}

/// agentrt's four deciding calls, each one [`decide`] with its [`Ruling`] and [`Shown`].
macro_rules! ruling_fn {
    ($(#[$m:meta])* $name:ident($ruling:ident)) => {
        $(#[$m])*
        pub fn $name<S: RunStore + ?Sized>(store: &S, run_id: impl AsKey, approval_id: impl AsKey, by: &str,
            note: &str, now: Timestamp) -> Result<Decided, OperatorError> {
            let shown = Shown::Unbound;
            decide(store, run_id, approval_id, Review { ruling: Ruling::$ruling, shown, by, note, now })
        }
    };
    ($(#[$m:meta])* $name:ident($ruling:ident, shown)) => {
        $(#[$m])*
        pub fn $name<S: RunStore + ?Sized>(store: &S, run_id: impl AsKey, approval_id: impl AsKey, shown: &str,
            by: &str, note: &str, now: Timestamp) -> Result<Decided, OperatorError> {
            let shown = Shown::Hash(shown);
            decide(store, run_id, approval_id, Review { ruling: Ruling::$ruling, shown, by, note, now })
        }
    };
}

ruling_fn!(
    /// Approves a pending approval: the run stays WAITING until a resume.
    approve(Approve)
);

ruling_fn!(
    /// Rejects a pending approval: its step fails and the run is CANCELLED
    /// (`approval_rejected`).
    reject(Reject)
);

ruling_fn!(
/// Approves only if the stored hash is `shown`, the hash the reviewer read.
///
/// The decision is one compare-and-set: a hash that is not the stored one (the request was
/// changed after it was read, or another request was shown) decides nothing, and an approval
/// already decided cannot be decided again. A `by` that [`super::name_refused`] refuses is
/// [`OperatorError::NameRefused`], with nothing written.
///
/// Its five text arguments are run id, approval id, shown hash, who and note, in that order;
/// [`decide`] with a [`Review`] names each part where a call site should say which is which.
///
/// ```
/// # use std::sync::Arc;
/// # use std::sync::atomic::{AtomicUsize, Ordering};
/// # use std::time::Duration;
/// # use countersign::runtime::agent::{self, Agent, DecideFuture, StepInput};
/// # use countersign::runtime::driver::{Config, Driver, default_limits};
/// # use countersign::runtime::operator;
/// # use countersign::runtime::policy::{self, FnPolicy, PolicyDecision, PolicyError, PolicyRequest, RunView};
/// # use countersign::runtime::store::Store;
/// # use countersign::runtime::tools::{FnTool, Registry, SideEffect, ToolDef, ToolOutput};
/// # use countersign::runtime::types::{RunStatus, Timestamp};
/// # struct Refunder;
/// # impl Agent for Refunder {
/// #     fn decide(&self, input: StepInput) -> DecideFuture {
/// #         let d = match input.steps.len() {
/// #             0 => agent::tool_call("refund", r#"{"order":"A-1","cents":500}"#),
/// #             _ => agent::complete("{}"),
/// #         };
/// #         Box::pin(async move { Ok(d) })
/// #     }
/// # }
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// # let store = Arc::new(Store::open(dir.path().join("runs.db"))?);
/// # let ran = Arc::new(AtomicUsize::new(0));
/// # let counter = ran.clone();
/// # let mut tools = Registry::new();
/// # tools.register(FnTool::new(
/// #     ToolDef {
/// #         name: "refund".into(),
/// #         description: "refund an order".into(),
/// #         input_schema: br#"{"type":"object"}"#.to_vec(),
/// #         side_effect: SideEffect::RemoteMutation,
/// #         timeout: Duration::from_secs(5),
/// #         terminal: false,
/// #     },
/// #     move |_| {
/// #         counter.fetch_add(1, Ordering::SeqCst);
/// #         Box::pin(async { Ok(ToolOutput::default()) })
/// #     },
/// # ))?;
/// // Every refund waits for a person; the approval binds the request shown to them.
/// fn review(req: &PolicyRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
///     policy::need_approval("refund", "refunds need a person", &req.args, &req.args)
/// }
/// let driver = Config::new(store.clone(), tools, Arc::new(FnPolicy(review)))
///     .agent(Arc::new(Refunder))
///     .build()?;
/// let rt = tokio::runtime::Runtime::new()?;
/// let paused = rt.block_on(driver.start("refund order A-1", default_limits()))?;
/// let pending = operator::pending_approval(&store, &paused.id, None)?;
/// // A hash the reviewer was not shown is refused, and the approval stays pending.
/// let wrong = "0".repeat(64);
/// assert!(operator::approve_shown(&store, &paused.id, &pending.id, &wrong,
///     "alice", "", Timestamp::now()).is_err());
/// // The hash they read approves it, once.
/// operator::approve_shown(&store, &paused.id, &pending.id, &pending.hash,
///     "alice", "checked the order", Timestamp::now())?;
/// assert!(operator::approve_shown(&store, &paused.id, &pending.id, &pending.hash,
///     "bob", "", Timestamp::now()).is_err());
/// # Ok(()) }
/// ```
approve_shown(Approve, shown)
);

ruling_fn!(
    /// Rejects only if the stored hash is `shown`.
    reject_shown(Reject, shown)
);

/// One reviewer's decision: what, bound to which shown row, by whom, why and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Review<'a> {
    /// Approve or reject.
    pub ruling: Ruling,
    /// What the decision is bound to.
    pub shown: Shown<'a>,
    /// Who decides (recorded as `decided_by`).
    pub by: &'a str,
    /// The reviewer's note (recorded; a rejection's reason).
    pub note: &'a str,
    /// The deciding clock's reading.
    pub now: Timestamp,
}

/// agentrt's `decide`: the one call behind [`approve`], [`reject`], [`approve_shown`] and
/// [`reject_shown`].
pub fn decide<S: RunStore + ?Sized>(
    store: &S,
    run_id: impl AsKey,
    approval_id: impl AsKey,
    review: Review<'_>,
) -> Result<Decided, OperatorError> {
    decide_hooked(store, run_id, approval_id, review, || {})
}

testing_pub! {
/// [`decide`] with `between` called after the checks made outside the transaction and before
/// it begins: lets a test change the row in that window to prove the checks are repeated
/// under the write lock. Public only with the `testing` feature.
fn decide_hooked<S: RunStore + ?Sized>(
    store: &S,
    run_id: impl AsKey,
    approval_id: impl AsKey,
    review: Review<'_>,
    between: impl FnOnce(),
) -> Result<Decided, OperatorError> {
    let Review { ruling, shown, by, note, now } = review;
    // Ids as given, bytes: a run or approval id need not be UTF-8 (the lookups bind them as
    // stored); messages keep them as stored.
    let (run_id, approval_id) = (run_id.key_bytes(), approval_id.key_bytes());
    let status = ruling.status();
    super::check_name(by)?;
    if shown == Shown::Hash("") {
        return Err(OperatorError::Changed {
            approval_id: Key::new(approval_id),
            detail: ": no hash was shown".into(),
        });
    }
    // 1-3: outside the transaction (cheap refusals, and expiry by the deciding clock).
    precheck(store, run_id, approval_id, shown, now)?;
    between();
    // 4: the same checks again under the write lock, then a conditional update.
    let ((), events) = store.write(IN_CRATE, |tx| -> Result<(), OperatorError> {
        let a = recheck(tx, run_id, approval_id, shown)?;
        decide_row(tx, run_id, &a, &status, (by, note, now))?;
        if status == ApprovalStatus::Rejected {
            let content = Object::new()
                .str_bytes("approval_id", a.id_bytes())
                .str("note", note)
                .finish();
            let (obs, hash) = observation(
                "policy_denied",
                &content,
                &format!("approval rejected: {note}"),
            )?;
            tx.fail_steps(run_id, Failing::Step(a.step_id_bytes()), &failure(&obs, &hash, now))?;
            finish(
                tx,
                run_id,
                RunStatus::Cancelled,
                "approval_rejected",
                note,
                None,
                now,
            )?;
        }
        Ok(())
    })?;
    Decided::read(store, run_id, approval_id, events)
}
}

/// agentrt's `check`: expired, not pending, not the shown one, then the hash.
/// The checks a decision makes before its transaction (spec 4.5 steps 1-3): the run is
/// waiting, the approval exists, is pending and matches what was shown, and has not expired by
/// the deciding clock (an expired one is expired here, in its own transaction). The same
/// checks are made again under the write lock.
pub(super) fn precheck<S: RunStore + ?Sized>(
    store: &S,
    run_id: &[u8],
    approval_id: &[u8],
    shown: Shown<'_>,
    now: Timestamp,
) -> Result<(), OperatorError> {
    let run = store.get_run(run_id)?;
    if run.status != RunStatus::WaitingForApproval {
        return Err(OperatorError::RunNotWaiting {
            run_id: Key::new(run_id),
            status: run.status,
        });
    }
    let a = store
        .get_approval(run_id, approval_id)
        .map_err(|e| not_found(e, run_id, approval_id))?;
    check(&a, shown)?;
    if !a.expires_at.is_zero() && now > a.expires_at {
        expire::expire(store, run_id, &a, now)?;
        return Err(OperatorError::Expired {
            approval_id: Key::new(approval_id),
            at: a.expires_at,
            already: false,
        });
    }
    Ok(())
}

/// The checks of [`precheck`] again under the write lock: the run is waiting and the approval
/// is the pending one shown. Returns the approval as read in the transaction.
pub(super) fn recheck<X: RunTx + ?Sized>(
    tx: &mut X,
    run_id: &[u8],
    approval_id: &[u8],
    shown: Shown<'_>,
) -> Result<Approval, OperatorError> {
    require_waiting(tx, run_id)?;
    let a = tx
        .get_approval(run_id, approval_id)
        .map_err(|e| not_found(e, run_id, approval_id))?;
    check(&a, shown)?;
    Ok(a)
}

pub(super) fn check(a: &Approval, shown: Shown<'_>) -> Result<(), OperatorError> {
    match a.status {
        ApprovalStatus::Pending => {}
        ApprovalStatus::Expired => {
            return Err(OperatorError::Expired {
                approval_id: Key::new(a.id_bytes()),
                at: a.expires_at,
                already: true,
            });
        }
        _ => return Err(not_pending(a)),
    }
    if let Shown::Hash(h) = shown
        && a.hash != h
    {
        return Err(OperatorError::Changed {
            approval_id: Key::new(a.id_bytes()),
            detail: String::new(),
        });
    }
    verify_hash(a)
}

/// agentrt's `verifyHash`: a row with a decode error, or whose stored kind, capability,
/// presentation and decoded request do not hash to its `hash`, is refused.
pub fn verify_hash(a: &Approval) -> Result<(), OperatorError> {
    let mismatch = |detail: Said| OperatorError::HashMismatch {
        approval_id: Key::new(a.id_bytes()),
        detail,
    };
    // `approval <id>`, the id as stored.
    let named = || Said::from("approval ").id(a.id_bytes());
    if !a.decode_error.is_empty() {
        // agentrt's sentinel, saying that the row could not be read rather than a changed hash.
        return Err(mismatch(
            named()
                .text(" could not be read (")
                .text(&a.decode_error)
                .text(")"),
        ));
    }
    let Some(req) = &a.request else {
        return Err(mismatch(named().text(" has no request")));
    };
    let encoded = req
        .to_go_json()
        .map_err(|e| mismatch(named().text(format!(": request: {e}"))))?;
    let h = approval_hash(
        &a.kind,
        a.capability.as_bytes(),
        a.presentation.as_bytes(),
        &encoded,
    )
    .map_err(|e| mismatch(named().text(format!(": {e}"))))?;
    if h != a.hash {
        return Err(mismatch(named()));
    }
    Ok(())
}
