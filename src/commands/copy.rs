//! `copy --from A --to B`: a whole run database between SQLite and PostgreSQL (docs/postgres.md).

use serde_json::json;

use super::CommandError;
use super::cli::CopyArgs;
use super::out::{Out, Raws};
use super::text::clean;
use crate::pgstore::copy::{CopyError, Endpoint, copy};

fn failed(e: CopyError) -> CommandError {
    match e {
        // The store's refusal keeps its ids' and paths' bytes and its hint to paste.
        CopyError::Store(e) => CommandError::Failed(super::text::said(&e.said(), 4000)),
        e => CommandError::Failed(clean(&e.to_string(), 4000)),
    }
}

pub fn run(json_out: bool, a: &CopyArgs, out: &mut Out) -> Result<(), CommandError> {
    let from =
        Endpoint::parse(&a.from).map_err(|e| CommandError::Usage(clean(&e.to_string(), 600)))?;
    let to = Endpoint::parse(&a.to).map_err(|e| CommandError::Usage(clean(&e.to_string(), 600)))?;
    if matches!(from, Endpoint::Sqlite(_)) == matches!(to, Endpoint::Sqlite(_)) {
        return Err(CommandError::Usage(
            "copy goes from SQLite to PostgreSQL or from PostgreSQL to SQLite: one of --from and --to is a postgres:// URL, the other a SQLite file".into(),
        ));
    }
    let report = copy(&from, &to).map_err(failed)?;
    if json_out {
        let rows: serde_json::Map<String, serde_json::Value> = report
            .rows
            .iter()
            .map(|(t, n)| (t.to_string(), json!(n)))
            .collect();
        let damaged: Vec<_> = report
            .damaged
            .iter()
            .map(|(id, why)| json!({"approval": id, "why": why}))
            .collect();
        let doc = json!({
            "from": from.shown(), "to": to.shown(), "rows": rows,
            "head": {"seq": report.head_seq, "hash": report.head_hash},
            "approvals_verified": report.approvals_verified,
            "damaged": damaged,
            "left_behind": report.left_behind,
        });
        out.json(&doc, &Raws::default())?;
    } else {
        out.line(&format!("copied {} to {}", from.shown(), to.shown()))?;
        let counts: Vec<String> = report
            .rows
            .iter()
            .map(|(t, n)| format!("{n} {t}"))
            .collect();
        out.line(&format!("  rows: {}", counts.join(", ")))?;
        out.line(&format!(
            "  chain intact on both sides: head seq {} {}",
            report.head_seq,
            clean(&report.head_hash, 128)
        ))?;
        out.line(&format!(
            "  approval hashes verified on both sides: {}",
            report.approvals_verified
        ))?;
        for (id, why) in &report.damaged {
            out.line(&format!(
                "  damaged approval {} copied as it is: {}",
                clean(id, 80),
                clean(why, 200)
            ))?;
        }
        if !report.left_behind.is_empty() {
            let names: Vec<String> = report.left_behind.iter().map(|t| clean(t, 80)).collect();
            out.line(&format!(
                "  not copied, not agentrt's or countersign's: table {}",
                names.join(", table ")
            ))?;
        }
    }
    out.flush()
}
