//! `show <run>`: the run, its usage and lease, every pending approval in full, then its steps.
//! Reads one bounded page of steps and of pending approvals; totals come from COUNT.

use std::path::Path;

use serde_json::{Value, json};

use super::CommandError;
use super::approval;
use super::cli::PageArgsWithRun;
use super::open::{Reading, fail};
use super::out::{JsonArray, Out, Raws, approval_json, summary_json, text_field};
use super::run_reads::RunReads;
use super::text::{
    clean, col, count_cell, dash, ident, ident_col, lease_ran_out, negative_said, stamp, table,
};
use crate::runtime::types::{Approval, ApprovalStatus, Run, Step};

const PAGE: i64 = 500;

pub fn run(r: Reading<'_>, a: &PageArgsWithRun) -> Result<(), CommandError> {
    let (db, store, json_out, out) = r.parts();
    show(&store, &db, json_out, out, a)
}

/// `show` on the run database `store` reads; `db` names it in the commands printed (a
/// PostgreSQL URL with its password hidden).
pub fn show(
    store: &dyn RunReads,
    db: &Path,
    json_out: bool,
    out: &mut Out,
    a: &PageArgsWithRun,
) -> Result<(), CommandError> {
    let r = store.get_run_capped(a.run.as_bytes()).map_err(fail)?;
    let limit = if a.limit == 0 { PAGE } else { a.limit as i64 };
    let offset = a.offset as i64;
    let pending = store
        .approvals_page(r.id_bytes(), "pending", limit, offset)
        .map_err(fail)?;
    let waiting = r.status == crate::runtime::types::RunStatus::WaitingForApproval;
    // Found from outside: a call whose process was killed mid-call stays `dispatched`, in no
    // total, so the run's model line under-counted the calls made.
    let unrecorded = store
        .count_unrecorded_model_calls(r.id_bytes())
        .map_err(fail)?;
    let unasked = unasked(store, &r, waiting && pending.total == 0)?;
    let one = if waiting && pending.total == 1 {
        pending
            .items
            .first()
            .map(|x| x.id_bytes().to_vec())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    if json_out && a.limit == 0 {
        return show_all_json(store, out, a, &r, &one, (&pending, &unasked, unrecorded));
    }
    if json_out {
        let mut raws = Raws::default();
        let steps = store
            .list_steps_page(r.id_bytes(), limit, offset)
            .map_err(fail)?;
        let shown = steps.items.len() as i64;
        let mut doc = json!({
            "run": summary_json(&r, &one),
            "steps": steps.items.iter().map(step_json).collect::<Vec<_>>(),
            "steps_total": steps.total,
        });
        if offset + shown < steps.total {
            doc["steps_truncated"] = json!(true);
        }
        approvals_and_page(&mut doc, (&pending, &unasked, unrecorded), a, &mut raws);
        return out.json(&doc, &raws);
    }
    header(&r, unrecorded, out)?;
    if let Some(u) = &unasked {
        out.raw(&unasked_text(u, r.id_bytes(), db))?;
    }
    for ap in &pending.items {
        let reason = store
            .approval_reason(r.id_bytes(), ap.id_bytes())
            .unwrap_or_default();
        let (text, _) = approval::render(ap, db, &reason);
        out.raw(&text)?;
    }
    let shown_pending = pending.items.len() as i64;
    if offset + shown_pending < pending.total {
        out.line(&format!(
            "\n... {} more pending approval(s) not shown; rerun with --offset {} to see them",
            pending.total - offset - shown_pending,
            offset + shown_pending
        ))?;
    }
    let mut off = offset;
    let mut first = true;
    // Steps page by (idx, rowid): each page continues after the last step printed.
    let mut after = None;
    let mut skip = offset;
    loop {
        let steps = store
            .steps_page_by_key(r.id_bytes(), after.as_ref(), skip, limit)
            .map_err(fail)?;
        skip = 0;
        after = steps.last_key.clone();
        let shown = steps.items.len() as i64;
        if shown > 0 {
            let rows: Vec<Vec<String>> = steps.items.iter().map(step_row).collect();
            let header = [
                "STEP",
                "TOOL",
                "DECISION",
                "STATUS",
                "POLICY",
                "OBSERVATION",
                "SUMMARY",
            ];
            let t = table(&header, &rows);
            if first {
                out.raw("\n")?;
                out.raw(&t)?;
            } else {
                out.raw(t.split_once('\n').map(|x| x.1).unwrap_or(""))?;
            }
            for s in steps.items.iter().filter(|s| !s.decode_error.is_empty()) {
                out.line(&format!(
                    "  step {} unread: {}",
                    s.index,
                    clean(&s.decode_error, 4000)
                ))?;
            }
        }
        first = false;
        off += shown;
        if a.limit != 0 || !steps.more {
            if a.limit != 0 && steps.more {
                out.line(&format!(
                    "... more steps follow; rerun with --offset {off} to see them (showing {shown})"
                ))?;
            }
            return Ok(());
        }
    }
}

fn header(r: &Run, unrecorded: i64, out: &mut Out) -> Result<(), CommandError> {
    out.line(&format!(
        "run     {}",
        ident_col(&r.raw_invalid, "id", &r.id, 200)
    ))?;
    out.line(&format!(
        "goal    {}",
        col(&r.raw_invalid, "goal", &r.goal, 4000)
    ))?;
    let mut status = clean(r.status.as_str(), 64);
    if !r.reason.is_empty() {
        status.push_str(&format!(
            " ({})",
            col(&r.raw_invalid, "reason", &r.reason, 64)
        ));
    }
    if !r.reason_detail.is_empty() {
        status.push_str(&format!(
            ": {}",
            col(&r.raw_invalid, "reason_detail", &r.reason_detail, 4000)
        ));
    }
    out.line(&format!("status  {status}"))?;
    out.line(&format!(
        "steps   {}",
        count_cell(r, "step_count", r.step_count)
    ))?;
    let mut created = format!("created {}", stamp(&r.created_at));
    if !r.finished_at.is_zero() {
        created.push_str(&format!("  finished {}", stamp(&r.finished_at)));
    }
    out.line(&created)?;
    let usage_unread = [
        "model_calls",
        "input_tokens",
        "output_tokens",
        "estimated_cost_micros",
    ]
    .iter()
    .any(|c| r.unread(c));
    if r.model_calls != 0 || usage_unread {
        let cost = if r.unread("estimated_cost_micros") {
            "?".to_string()
        } else {
            negative_said(
                r.estimated_cost_micros,
                crate::runtime::types::dollars(r.estimated_cost_micros),
            )
        };
        out.line(&format!(
            "model   {} call(s), {} in, {} out, estimated {cost}",
            count_cell(r, "model_calls", r.model_calls),
            count_cell(r, "input_tokens", r.input_tokens),
            count_cell(r, "output_tokens", r.output_tokens),
        ))?;
    }
    if unrecorded > 0 {
        out.line(&format!(
            "model   {unrecorded} more call(s) dispatched with no recorded outcome (in flight, or its process stopped mid-call): in none of these totals"
        ))?;
    }
    if !r.lease_owner.is_empty() {
        out.line(&format!(
            "lease   {} until {}{}",
            col(&r.raw_invalid, "lease_owner", &r.lease_owner, 200),
            stamp(&r.lease_expires_at),
            if lease_ran_out(r) {
                " (EXPIRED: its holder stopped renewing it, the process died?; a worker or `resume` takes the run over)"
            } else {
                ""
            }
        ))?;
    }
    if !r.decode_error.is_empty() {
        out.line(&format!("unread  {}", clean(&r.decode_error, 4000)))?;
    }
    Ok(())
}

fn step_row(s: &Step) -> Vec<String> {
    let (tool, decision) = s
        .decision
        .as_ref()
        .map(|d| (d.tool.as_str(), d.kind.as_str()))
        .unwrap_or(("", ""));
    let policy = s.policy.as_ref().map(|p| p.outcome.as_str()).unwrap_or("");
    let (obs, summary) = s
        .observation
        .as_ref()
        .map(|o| (o.kind.as_str(), o.summary.as_str()))
        .unwrap_or(("", ""));
    vec![
        s.index.to_string(),
        if tool.is_empty() {
            "-".into()
        } else {
            ident(tool.as_bytes(), 40)
        },
        dash(decision, 20),
        clean(s.status.as_str(), 20),
        dash(policy, 20),
        dash(obs, 20),
        dash(summary, 60),
    ]
}

fn step_json(s: &Step) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("index".into(), json!(s.index));
    super::out::id_field(&mut m, "id", s.id_bytes());
    if let Some(d) = &s.decision {
        text_field(&mut m, "tool", &d.tool);
        if !d.kind.as_str().is_empty() {
            m.insert("decision".into(), json!(d.kind));
        }
    }
    m.insert("status".into(), json!(s.status.as_str()));
    if let Some(p) = &s.policy {
        m.insert("policy".into(), json!(p.outcome));
    }
    if let Some(o) = &s.observation {
        m.insert("observation".into(), json!(o.kind));
        text_field(&mut m, "summary", &o.summary);
    }
    text_field(&mut m, "decode_error", &s.decode_error);
    Value::Object(m)
}

/// `show --json --limit 0`: one document holding every step from the offset on, its steps
/// written a page at a time (as the text form prints them), the fields in the order of the
/// paged document.
fn show_all_json(
    store: &dyn RunReads,
    out: &mut Out,
    a: &PageArgsWithRun,
    r: &Run,
    one: &[u8],
    (pending, unasked, unrecorded): (&Pending, &Option<Unasked>, i64),
) -> Result<(), CommandError> {
    let total = store
        .list_steps_page(r.id_bytes(), 1, 0)
        .map_err(fail)?
        .total;
    let head = json!({"run": summary_json(r, one)});
    let mut array = JsonArray::begin(out, &head, &Raws::default(), "steps")?;
    let (mut after, mut skip) = (None, a.offset as i64);
    loop {
        let steps = store
            .steps_page_by_key(r.id_bytes(), after.as_ref(), skip, PAGE)
            .map_err(fail)?;
        skip = 0;
        after = steps.last_key.clone();
        for step in &steps.items {
            array.push(out, &step_json(step), &Raws::default())?;
        }
        if !steps.more {
            break;
        }
    }
    let mut raws = Raws::default();
    let mut tail = json!({"steps_total": total});
    approvals_and_page(&mut tail, (pending, unasked, unrecorded), a, &mut raws);
    array.finish(out, &tail, &raws)
}

/// A run's pending approvals as `show` reads them.
type Pending = crate::runtime::store::Page<crate::runtime::types::Approval>;

/// Why a waiting run has no pending approval.
enum Unasked {
    /// Its latest approval was approved: the run waits for its program to resume it (agentrt
    /// leaves it `WAITING_FOR_APPROVAL` from the decision to the resume).
    Granted(Approval),
    /// Anything else (a damaged status, or no approval at all): its latest approval, if any.
    Damaged(Option<Approval>),
}

/// [`Unasked`] for a run that waits with no pending approval (`without`), else `None`.
fn unasked(store: &dyn RunReads, r: &Run, without: bool) -> Result<Option<Unasked>, CommandError> {
    if !without {
        return Ok(None);
    }
    let total = store
        .approvals_page(r.id_bytes(), "", 1, 0)
        .map_err(fail)?
        .total;
    // A count cut at the cap does not say which approval is the last: read none.
    let latest = if total > 0 && total < crate::runtime::store::COUNT_CAP {
        store
            .approvals_page(r.id_bytes(), "", 1, total - 1)
            .map_err(fail)?
            .items
            .into_iter()
            .next()
    } else {
        None
    };
    Ok(Some(match latest {
        Some(ap) if ap.status == ApprovalStatus::Approved && ap.decode_error.is_empty() => {
            Unasked::Granted(ap)
        }
        latest => Unasked::Damaged(latest),
    }))
}

/// What `show` prints for [`Unasked`]: a granted call waiting for its resume (found from
/// outside: it was called a damaged row, with the run's cancel offered), or a damaged row.
fn unasked_text(u: &Unasked, run: &[u8], db: &Path) -> String {
    match u {
        Unasked::Granted(ap) => format!(
            "\nAPPROVED, NOT RESUMED YET: approval {} was approved by {} at {}; the run waits for its program to resume it, and the approved call runs then, once\n",
            ident(ap.id_bytes(), 64),
            col(&ap.raw_invalid, "decided_by", &ap.decided_by, 200),
            stamp(&ap.decided_at),
        ),
        // Found from outside: an approval whose status was damaged vanished from `show`, the
        // run still waiting, with nothing said.
        Unasked::Damaged(latest) => format!(
            "\nNO PENDING APPROVAL: the run waits for approval, but none of its approvals is stored as pending (a damaged row?){}; approve and reject cannot decide it\n{}",
            latest.as_ref().map_or(String::new(), |ap| format!(
                "; its latest, {}, is stored as {}",
                ident(ap.id_bytes(), 64),
                col(&ap.raw_invalid, "status", ap.status.as_str(), 64)
            )),
            approval::cancel_line(run, db)
        ),
    }
}

/// The fields that follow the steps in `show --json`: the pending approvals (when any), their
/// total, for a waiting run with none `awaiting_resume` (its latest approval approved) or
/// `no_pending_approval` (anything else) with that `latest_approval`, `model_calls_unrecorded`
/// when a call has no recorded outcome, and the page asked for.
fn approvals_and_page(
    doc: &mut Value,
    (pending, unasked, unrecorded): (&Pending, &Option<Unasked>, i64),
    a: &PageArgsWithRun,
    raws: &mut Raws,
) {
    if !pending.items.is_empty() {
        doc["approvals"] = Value::Array(
            pending
                .items
                .iter()
                .map(|x| approval_json(x, raws))
                .collect(),
        );
    }
    doc["approvals_total"] = json!(pending.total);
    let latest = match unasked {
        Some(Unasked::Granted(ap)) => {
            doc["awaiting_resume"] = json!(true);
            Some(ap)
        }
        Some(Unasked::Damaged(latest)) => {
            doc["no_pending_approval"] = json!(true);
            latest.as_ref()
        }
        None => None,
    };
    if let Some(ap) = latest {
        doc["latest_approval"] = approval_json(ap, raws);
    }
    if unrecorded > 0 {
        doc["model_calls_unrecorded"] = json!(unrecorded);
    }
    doc["limit"] = json!(a.limit);
    doc["offset"] = json!(a.offset);
}
