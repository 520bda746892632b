//! The status tool (agentrt mcp 2.13): reports the session's waiting requests, or what became
//! of one approval. It never executes, decides, writes or creates a run.

use serde::Deserialize;

use super::answer::{Answer, clean};
use super::{Proxy, now_ns};
use crate::runtime::types::{Approval, ApprovalStatus, RunStatus};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    approval_id: Option<String>,
}

fn age(since_ns: i128) -> String {
    let secs = (i128::from(now_ns()) - since_ns).max(0) / 1_000_000_000;
    crate::mcp::duration::format(std::time::Duration::from_secs(
        u64::try_from(secs).unwrap_or(0),
    ))
}

fn describe(p: &Proxy, a: &Approval, tool: &str, args: &[u8], run: RunStatus) -> String {
    let head = format!(
        "approval {} for {} {}: ",
        clean(&a.id, 100),
        clean(tool, 64),
        clean(&String::from_utf8_lossy(args), 200)
    );
    let now = i128::from(now_ns());
    let tail = match a.status {
        ApprovalStatus::Pending if !a.expires_at.is_zero() && now > a.expires_at.unix_nanos() => {
            "EXPIRED without a decision. It was not executed.".to_string()
        }
        ApprovalStatus::Pending if a.kind == super::policy::INTERRUPTED_KIND => format!(
            "OUTCOME UNKNOWN, waiting {} for an operator to decide whether it runs again; an earlier attempt may have taken effect. Nothing further has been executed.",
            age(a.created_at.unix_nanos())
        ),
        ApprovalStatus::Pending => format!(
            "PENDING for {}. Nothing has been executed; the operator decides elsewhere. Do not call the tool again until it is approved.",
            age(a.created_at.unix_nanos())
        ),
        ApprovalStatus::Rejected => {
            let note = if a.note.trim().is_empty() {
                String::new()
            } else {
                format!(
                    " The operator's note: {}.",
                    super::answer::quoted_note(&a.note)
                )
            };
            format!("REJECTED by the operator.{note} It was not executed; do not ask for it again.")
        }
        ApprovalStatus::Expired => "EXPIRED. It was not executed.".to_string(),
        ApprovalStatus::Approved => match run {
            RunStatus::WaitingForApproval => format!(
                "APPROVED, awaiting collection. Call {} again with exactly the same arguments to run it and get the result.",
                clean(tool, 64)
            ),
            RunStatus::Completed => "APPROVED and executed, and it succeeded.".to_string(),
            RunStatus::Running => "APPROVED and executing now.".to_string(),
            _ => "APPROVED; its run has ended.".to_string(),
        },
        ApprovalStatus::Unknown(_) => "in a state this build does not know.".to_string(),
    };
    let _ = p;
    head + &tail
}

/// The status tool's answer.
pub fn status(p: &Proxy, raw: &[u8]) -> Answer {
    let Ok(args) = serde_json::from_slice::<Args>(raw) else {
        return Answer {
            text: "INVALID: the arguments do not match the tool's input schema: the only argument is approval_id, a string. Nothing was executed. Correct the arguments and call again.".into(),
            is_error: true,
            structured: None,
        };
    };
    let rows = {
        let mut calls = p.calls.lock().unwrap_or_else(|e| e.into_inner());
        calls.recent(now_ns())
    };
    let Ok(rows) = rows else {
        return super::answer::unavailable("the gate could not read its records");
    };
    let mut found: Vec<String> = Vec::new();
    let want = args.approval_id.as_deref().map(str::trim);
    for r in &rows {
        let Ok(run) = p.o.store.get_run(&r.run_id) else {
            continue;
        };
        let Ok(approvals) = p.o.store.list_approvals(&r.run_id) else {
            continue;
        };
        let recorded = |a: &Approval| {
            a.request
                .as_ref()
                .map(|q| q.args.clone())
                .unwrap_or_default()
        };
        for a in &approvals {
            match want {
                Some(id) if a.id == id => {
                    return Answer::ok(format!(
                        "GATE_STATUS: {}",
                        describe(p, a, &r.tool, &recorded(a), run.status.clone())
                    ));
                }
                Some(_) => {}
                None => {
                    let live = a.status == ApprovalStatus::Pending
                        && (a.expires_at.is_zero()
                            || i128::from(now_ns()) <= a.expires_at.unix_nanos());
                    if live {
                        found.push(describe(p, a, &r.tool, &recorded(a), run.status.clone()));
                    }
                }
            }
        }
    }
    if let Some(id) = want {
        return Answer::ok(format!(
            "GATE_STATUS: no approval {} is known in this session from the last hour.",
            clean(id, 100)
        ));
    }
    let head = match found.len() {
        0 => "GATE_STATUS: no request in this session is waiting for an operator's approval."
            .to_string(),
        1 => "GATE_STATUS: 1 request in this session is waiting for an operator's approval."
            .to_string(),
        n => format!(
            "GATE_STATUS: {n} requests in this session are waiting for an operator's approval."
        ),
    };
    let mut text = head;
    for f in found {
        text.push_str("\n- ");
        text.push_str(&f);
    }
    Answer::ok(text)
}
