//! `runs`: every run, newest first, one bounded page at a time.

use serde_json::{Value, json};

use super::CommandError;
use super::cli::RunsArgs;
use super::open::{Reading, fail};
use super::out::{JsonArray, Out, Raws, summary_json};
use super::text::{
    clean, col, col_dash, count_cell, ident_col, ident_dash, lease_ran_out, stamp, table,
};
use crate::runtime::store::RunStore;
use crate::runtime::types::{Run, RunStatus};

/// Rows read per page when `--limit 0` asks for everything.
const PAGE: i64 = 500;

pub fn run(r: Reading<'_>, a: &RunsArgs) -> Result<(), CommandError> {
    let (_, store, json_out, out) = r.parts();
    list(&store, json_out, out, a)
}

/// `runs` on an open store.
pub(crate) fn list<S: RunStore>(
    store: &S,
    json_out: bool,
    out: &mut Out,
    a: &RunsArgs,
) -> Result<(), CommandError> {
    let status = a.status.as_deref().unwrap_or("");
    let mut offset = a.offset as i64;
    let all = a.limit == 0;
    let mut first = true;
    // Pages by rowid: each continues below the last run printed (no OFFSET past the first
    // page, no COUNT per page: a page says whether more follow).
    let mut before = None;
    let mut skip = offset;
    // The JSON contract carries the total: counted once, when JSON is asked for.
    let total = if json_out {
        store.count_runs(status).map_err(fail)?
    } else {
        0
    };
    // `--limit 0 --json`: one document, its array written a page at a time.
    let mut array = if json_out && all {
        Some(JsonArray::begin(out, &json!({}), &Raws::default(), "runs")?)
    } else {
        None
    };
    loop {
        let want = if all { PAGE } else { a.limit as i64 };
        let page = store
            .runs_page_by_key(status, before, skip, want)
            .map_err(fail)?;
        skip = 0;
        before = page.last_key;
        let waiting: Vec<&[u8]> = page
            .items
            .iter()
            .filter(|r| r.status == RunStatus::WaitingForApproval)
            .map(Run::id_bytes)
            .collect();
        let pending = store.pending_approval_ids_of(&waiting, 2).map_err(fail)?;
        let one_pending = |r: &Run| -> Vec<u8> {
            match pending.get(r.id_bytes()) {
                Some(ids) if ids.len() == 1 => ids[0].as_bytes().to_vec(),
                _ => Vec::new(),
            }
        };
        let shown = page.items.len() as i64;
        if json_out {
            let runs: Vec<Value> = page
                .items
                .iter()
                .map(|r| summary_json(r, &one_pending(r)))
                .collect();
            if let Some(arr) = &mut array {
                for run in &runs {
                    arr.push(out, run, &Raws::default())?;
                }
            } else {
                let mut doc =
                    json!({"runs": runs, "total": total, "limit": a.limit, "offset": offset});
                if page.more {
                    doc["truncated"] = json!(true);
                }
                out.json(&doc, &Default::default())?;
            }
        } else {
            if first && page.items.is_empty() && a.offset == 0 {
                out.line("no runs")?;
                return Ok(());
            }
            let rows: Vec<Vec<String>> = page
                .items
                .iter()
                .map(|r| {
                    vec![
                        ident_col(&r.raw_invalid, "id", &r.id, 64),
                        if lease_ran_out(r) {
                            format!("{} (lease expired)", clean(r.status.as_str(), 32))
                        } else {
                            clean(r.status.as_str(), 32)
                        },
                        col_dash(&r.raw_invalid, "reason", &r.reason, 32),
                        count_cell(r, "step_count", r.step_count),
                        stamp(&r.created_at),
                        ident_dash(&one_pending(r), 64),
                        col(&r.raw_invalid, "goal", &r.goal, 60),
                    ]
                })
                .collect();
            let header = [
                "RUN", "STATUS", "REASON", "STEPS", "CREATED", "APPROVAL", "GOAL",
            ];
            let t = table(&header, &rows);
            if first {
                out.raw(&t)?;
            } else {
                // Later pages: the rows only, aligned on their own.
                out.raw(t.split_once('\n').map(|x| x.1).unwrap_or(""))?;
            }
            if !all && page.more {
                out.line(&format!(
                    "... more runs follow; rerun with --offset {} to see them (showing {shown})",
                    offset + shown,
                ))?;
            }
        }
        first = false;
        offset += shown;
        if !all || !page.more {
            if let Some(arr) = array.take() {
                let tail = json!({"total": total, "limit": a.limit, "offset": a.offset});
                arr.finish(out, &tail, &Raws::default())?;
            }
            return Ok(());
        }
    }
}
