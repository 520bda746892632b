//! The reads behind the decision page's context (issue 15 items 1 and 2) and the queue's
//! hostile mark: a run's goal, the agent's stated reason for a call (the step's recorded
//! decision), and the pending approvals related to one by run or by target. Through the
//! store's bounded reads only; read-only like the rest of the console's reader.

use super::data::{Key, PageContext, QueueRow, RelatedRow};
use super::facts::Presented;
use super::reads::{ConsoleReads, found};
use crate::runtime::store::{StoreError, raw_bytes};
use crate::runtime::types::{Run, Step};
use crate::safetext::JsonNode;

/// At most this many pending approvals are compared for related work (a scan: agentrt's
/// schema indexes no status); the page says so when more are pending.
pub const RELATED_SCAN: i64 = 500;

/// A run's goal as stored (capped), empty when the run is gone.
pub fn goal(store: &dyn ConsoleReads, run: &Key) -> Result<Vec<u8>, StoreError> {
    found(store.get_run_capped(run)).map(|r| goal_of(r.as_ref()))
}

fn goal_of(run: Option<&Run>) -> Vec<u8> {
    run.map(|r| raw_bytes(&r.raw_invalid, "goal", &r.goal))
        .unwrap_or_default()
}

/// The reason the model gave for the call of `step` (its recorded decision's `reason`), read
/// as a page reads the step (a decision too large is not read); empty when the step is gone
/// or gave none; with why its decision was not read, when it was not.
pub fn agent_reason(
    store: &dyn ConsoleReads,
    step: &Key,
) -> Result<(Vec<u8>, Option<String>), StoreError> {
    found(store.get_step_capped(step)).map(reason_of)
}

fn reason_of(step: Option<Step>) -> (Vec<u8>, Option<String>) {
    match step {
        Some(s) => match s.decision {
            Some(d) => (d.reason.into_bytes(), None),
            None if !s.decode_error.is_empty() => (Vec::new(), Some(s.decode_error)),
            None => (Vec::new(), None),
        },
        None => (Vec::new(), None),
    }
}

/// The decision page's context of `approval`.
pub fn read(
    store: &dyn ConsoleReads,
    approval: &Key,
    run: &Key,
    step: &Key,
    target: Option<&(Vec<u8>, JsonNode)>,
) -> Result<PageContext, StoreError> {
    let (items, more) = store.list_queue_rows("", RELATED_SCAN, 0)?;
    let compared = items.len();
    let related = items
        .into_iter()
        .filter_map(|q| {
            let a = q.approval;
            let id = Key::new(a.id_bytes());
            if id == *approval {
                return None;
            }
            let run_id = Key::new(a.run_id_bytes());
            let p = Presented::parse(&raw_bytes(&a.raw_invalid, "presentation", &a.presentation));
            let same_run = run_id == *run;
            let same_target = match (target, p.as_ref().and_then(Presented::target)) {
                (Some(mine), Some(theirs)) => *mine == theirs,
                _ => false,
            };
            (same_run || same_target).then(|| RelatedRow {
                approval_id: id,
                run_id,
                same_run,
                same_target,
                title: p
                    .as_ref()
                    .and_then(|p| p.title().map(<[u8]>::to_vec))
                    .or_else(|| q.tool.map(String::into_bytes))
                    .unwrap_or_default(),
                amount: p.as_ref().and_then(Presented::amount),
                expires_at: a.expires_at,
            })
        })
        .collect();
    let (agent_reason, decision_unread) = agent_reason(store, step)?;
    Ok(PageContext {
        goal: goal(store, run)?,
        agent_reason,
        decision_unread,
        related,
        compared,
        more,
    })
}

/// Fills a queue window's rows with their run's goal and the agent's reason, for the queue's
/// hostile mark (one bounded read of each per row shown).
pub fn queue_texts(store: &dyn ConsoleReads, rows: &mut [QueueRow]) -> Result<(), StoreError> {
    let runs: Vec<Key> = rows.iter().map(|r| r.run_id.clone()).collect();
    let steps: Vec<Key> = rows.iter().map(|r| r.step_id.clone()).collect();
    let (runs, steps) = (store.runs_capped(&runs)?, store.steps_capped(&steps)?);
    for ((r, run), step) in rows.iter_mut().zip(runs).zip(steps) {
        r.goal = goal_of(run.as_ref());
        r.agent_reason = reason_of(step).0;
    }
    Ok(())
}
