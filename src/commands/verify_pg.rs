//! `verify --db postgres://...`: the chain and every approval hash on PostgreSQL, and the line
//! that says which commands run on PostgreSQL in this build (the console, verify, copy, runs,
//! show, events, watch, stats, a reviewer's approve, reject, deny and cancel, and the example
//! consumer's resume, recheck, worker and agent).

use std::path::Path;

use serde_json::json;

use super::CommandError;
use super::cli::{Command, VerifyArgs};
use super::out::{Out, Raws};
use super::text::clean;
use super::verify::seq;
use crate::pgstore::{PgStore, PgUrl, is_pg_url};

fn failed(e: crate::pgstore::PgError) -> CommandError {
    CommandError::Failed(clean(&e.to_string(), 4000))
}

/// The refusal for a command given a PostgreSQL URL that does not run there yet.
pub fn only_some_on_postgres(db: Option<&Path>, cmd: &Command) -> Option<CommandError> {
    let db = db
        .map(|p| p.as_os_str().to_owned())
        .or_else(|| std::env::var_os("COUNTERSIGN_DB").filter(|v| !v.is_empty()))?;
    let url = db.to_str().filter(|s| is_pg_url(s))?;
    match cmd {
        // The reviewer's decisions, on one run or on selected queue rows, through the same
        // operator code as SQLite.
        Command::Verify(_)
        | Command::Copy(_)
        | Command::Migrate
        | Command::Approve(_)
        | Command::Reject(_)
        | Command::Deny(_)
        | Command::Cancel(_)
        | Command::Runs(_)
        | Command::Show(_)
        | Command::Events(_)
        | Command::Watch(_)
        | Command::Stats(_) => None,
        // The example consumer's runs, resumed and rechecked by the same driver (decision 0083).
        Command::Resume(_) | Command::Worker(_) | Command::Recheck(_) => None,
        #[cfg(feature = "providers")]
        Command::Agent(_) => None,
        // Written into an empty database by `copy` (`demo`'s PostgreSQL path); the demo never
        // reads COUNTERSIGN_DB, so only its --db counts.
        Command::Demo(_) => None,
        // The commands of the other features; with none of them built in, nothing is left.
        #[allow(unreachable_patterns)]
        _ => Some(refused(
            url,
            "on PostgreSQL this build runs the console, verify, copy, migrate, runs, show, events, watch, stats, approve, reject, deny, cancel, resume, recheck, worker, agent and demo only; copy the database to SQLite (countersign copy --from URL --to runs.db) for the rest",
        )),
    }
}

/// The PostgreSQL database `db` names, opened (never migrated); `None` for a SQLite path.
pub fn open_reader(db: &Path) -> Result<Option<PgStore>, CommandError> {
    let Some(url) = db.to_str().filter(|s| is_pg_url(s)) else {
        return Ok(None);
    };
    let url = PgUrl::parse(url).map_err(|e| CommandError::Usage(clean(&e.to_string(), 600)))?;
    PgStore::open_existing(&url).map(Some).map_err(failed)
}

/// As [`open_reader`], with the URL (no password) the commands it prints name the database by.
pub fn open_named(db: &Path) -> Result<Option<(PgStore, std::path::PathBuf)>, CommandError> {
    Ok(open_reader(db)?.map(|s| {
        let shown = std::path::PathBuf::from(s.url().for_commands());
        (s, shown)
    }))
}

/// A usage error naming the URL as it parses (its password hidden), then `why`.
fn refused(url: &str, why: &str) -> CommandError {
    let shown = PgUrl::parse(url)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| "the PostgreSQL URL".into());
    CommandError::Usage(format!("{}: {why}", clean(&shown, 300)))
}

pub fn run(url: &str, json_out: bool, a: &VerifyArgs, out: &mut Out) -> Result<(), CommandError> {
    let url = PgUrl::parse(url).map_err(|e| CommandError::Usage(clean(&e.to_string(), 600)))?;
    let mut store = PgStore::open_existing(&url).map_err(failed)?;
    let (head_seq, head_hash) = store.chain_head().map_err(failed)?;
    let report = store
        .verify_events(seq(a.from), seq(a.to))
        .map_err(failed)?;
    let approvals = store.verify_approvals().map_err(failed)?;
    // Committed events a sequencer has not chained yet are not on the chain to verify.
    let unchained = store.unchained().map_err(failed)?;
    let orphans = store.orphans().map_err(failed)?;
    let reached_to = a.to == 0 || seq(a.to) <= head_seq;
    let reached_from = seq(a.from) <= head_seq.saturating_add(1);
    if json_out {
        let mut doc = json!({
            "database": url.to_string(),
            "head": {"seq": head_seq, "hash": head_hash},
            "from": report.from, "to": report.to, "hash": report.hash,
            "checked": report.checked, "intact": report.ok(), "unchained": unchained,
            "approvals": super::verify::approvals_json(&approvals),
            "orphans": orphans.iter().map(|(t, n)| ((*t).to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
        });
        if let Some(b) = &report.chain_break {
            doc["break"] =
                json!({"seq": b.seq, "expected": b.expected, "found": b.found, "detail": b.detail});
        }
        out.json(&doc, &Raws::default())?;
    } else {
        out.line(&format!("database: {}", clean(&url.to_string(), 300)))?;
        if head_seq == 0 {
            out.line("head: no events")?;
        } else {
            out.line(&format!("head: seq {head_seq} {}", clean(&head_hash, 128)))?;
        }
        match &report.chain_break {
            Some(b) => out.line(&format!(
                "broken at seq {}: {}",
                b.seq,
                clean(&b.detail, 400)
            ))?,
            None if !reached_from => out.line(&format!(
                "not checked: --from {} is past the head's next seq",
                a.from
            ))?,
            None if report.checked == 0 => out.line("intact: no events in the range")?,
            None => out.line(&format!(
                "intact: {} event(s), seq {} to {}",
                report.checked,
                report.from,
                report.to.min(head_seq)
            ))?,
        }
        if unchained > 0 {
            out.line(&format!(
                "inbox: {unchained} event(s) committed and not chained yet (not verified until a sequencer chains them)"
            ))?;
        }
        out.line(&format!(
            "approvals: {} hash(es) verified",
            approvals.verified
        ))?;
        for id in &approvals.mismatched {
            out.line(&super::verify::mismatch(id))?;
        }
        for (id, why) in &approvals.unrecorded {
            out.line(&super::verify::unrecorded(id, why))?;
        }
        for (id, why) in &approvals.damaged {
            out.line(&format!(
                "approval {} is damaged: {}",
                clean(id, 80),
                clean(why, 200)
            ))?;
        }
        if !orphans.is_empty() {
            out.line(&format!(
                "rows of no run: {} (their run's row is gone)",
                orphan_counts(&orphans)
            ))?;
        }
    }
    out.flush()?;
    super::verify::broken(&report, &approvals)?;
    if !orphans.is_empty() {
        return Err(CommandError::Failed(format!(
            "rows name a run that is not in runs, a deleted run: {}",
            orphan_counts(&orphans)
        )));
    }
    if !reached_from {
        return Err(CommandError::Failed(super::verify::past_from(
            a.from, head_seq,
        )));
    }
    if !reached_to {
        return Err(CommandError::Failed(format!(
            "the event chain is shorter than asked: --to {} was not reached; the last event checked is seq {head_seq}",
            a.to
        )));
    }
    if let Some((seq, hash)) = &a.head {
        let found = store.event_hash(super::verify::seq(*seq)).map_err(failed)?;
        if found.as_deref() != Some(hash.as_str()) {
            return Err(CommandError::Failed(format!(
                "the event chain does not reach the head kept: seq {seq} is {}",
                found
                    .map(|h| clean(&h, 128))
                    .unwrap_or_else(|| "missing".into())
            )));
        }
    }
    Ok(())
}

/// `migrate`: the schema of the PostgreSQL database `db` names brought to this build's version.
pub fn migrate(db: &Path, json_out: bool, out: &mut Out) -> Result<(), CommandError> {
    let Some(url) = db.to_str().filter(|s| is_pg_url(s)) else {
        return Err(CommandError::Usage(format!(
            "migrate: {} is not a postgres:// URL; a SQLite run database is migrated by the runtime that opens it, as agentrt's is",
            super::text::path(db, 300)
        )));
    };
    let url = PgUrl::parse(url).map_err(|e| CommandError::Usage(clean(&e.to_string(), 600)))?;
    let now = crate::pgstore::PG_SCHEMA_VERSION;
    // A database at this build's schema is read as it is, so a login that may not migrate
    // (a reviewer's, the runtime's) is told "nothing changed" rather than "permission denied".
    let before = match PgStore::open_existing(&url) {
        Ok(_) => now,
        Err(_) => PgStore::upgrade(&url).map_err(failed)?,
    };
    let shown = url.to_string();
    if json_out {
        let doc = serde_json::json!({"database": shown, "from": before, "to": now});
        return out.json(&doc, &Raws::default());
    }
    out.line(&if before == now {
        format!(
            "{}: at schema version {now} already; nothing changed",
            clean(&shown, 600)
        )
    } else {
        format!(
            "{}: migrated from schema version {before} to {now}",
            clean(&shown, 600)
        )
    })
}

/// After a decision on PostgreSQL: chains every event committed to the inbox (the decision's
/// and anyone's), when this login may (the owner, or one holding `countersign_sequencer`), so
/// that `verify`, `events`, `watch` and `copy` see it at once even when no runtime process
/// runs a sequencer. A reviewer's login without that role leaves it to the runtime's
/// sequencers, as docs/postgres.md says. A failure here neither undoes nor fails the decision
/// (it committed): one line on stderr says its events wait.
pub fn chain_after(db: &Path) {
    let Some(url) = db.to_str().filter(|s| is_pg_url(s)) else {
        return;
    };
    let Ok(url) = PgUrl::parse(url) else {
        return;
    };
    let Ok(mut store) = PgStore::open_existing(&url) else {
        return;
    };
    if let Err(e) = store.chain_if_allowed() {
        crate::commands::say_err!(
            "note: the decision is recorded; its events wait in the inbox for a sequencer to chain them: {}",
            clean(&e.to_string(), 600)
        );
    }
}

/// `3 events, 1 approvals` for the tables with rows of no run.
fn orphan_counts(orphans: &[(&str, i64)]) -> String {
    orphans
        .iter()
        .map(|(t, n)| format!("{n} {t}"))
        .collect::<Vec<_>>()
        .join(", ")
}
