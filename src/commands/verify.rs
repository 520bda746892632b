//! `verify`: the event chain over every run's events, optionally a range and a kept head, and
//! every approval's hash.

use serde_json::json;

use super::CommandError;
use super::cli::VerifyArgs;
use super::open::{Reading, fail};
use super::out::Raws;
use super::text::clean;

pub fn run(r: Reading<'_>, a: &VerifyArgs) -> Result<(), CommandError> {
    let (_, store, json_out, out) = r.parts();
    // The head is read first: events committed meanwhile are not checked.
    let (head_seq, head_hash) = store.chain_head().map_err(fail)?;
    let from = seq(a.from);
    let to = if a.to == 0 { head_seq } else { seq(a.to) };
    let report = store.verify_events(from, to).map_err(fail)?;
    // Every approval's hash too, as on PostgreSQL and as agentrt's own verifier does (found from
    // outside: a tampered approval passed `verify`); agentrt's text is unchanged on a clean file.
    let approvals = store.verify_approvals().map_err(fail)?;
    let last = if report.checked > 0 {
        to.min(head_seq)
    } else {
        0
    };
    let reached_to = a.to == 0 || seq(a.to) <= head_seq;
    // `--from` one past the head is "nothing new since"; further is a seq that is not there.
    let reached_from = seq(a.from) <= head_seq.saturating_add(1);
    let kept = match &a.head {
        Some((kept, hash)) if seq(*kept) <= head_seq => {
            let found = store.event_hash(seq(*kept)).map_err(fail)?;
            Some((*kept, hash.clone(), Some(found)))
        }
        Some((kept, hash)) => Some((*kept, hash.clone(), None)),
        None => None,
    };
    if json_out {
        let mut doc = json!({
            "head": {"seq": head_seq, "hash": head_hash},
            "from": report.from, "to": report.to, "hash": report.hash,
            "checked": report.checked, "intact": report.ok(),
            "approvals": approvals_json(&approvals),
        });
        if let Some(b) = &report.chain_break {
            doc["break"] =
                json!({"seq": b.seq, "expected": b.expected, "found": b.found, "detail": b.detail});
        }
        if a.to != 0 || !reached_from {
            let mut asked = json!({"reached": reached_to && reached_from});
            if a.to != 0 {
                asked["to"] = json!(a.to);
            }
            if !reached_from {
                asked["from"] = json!(a.from);
            }
            doc["requested"] = asked;
        }
        if let Some((seq, hash, found)) = &kept {
            doc["kept_head"] = json!({
                "seq": seq, "hash": hash,
                "found": found.clone().unwrap_or_default(),
                "matches": found.as_deref() == Some(hash.as_str()),
            });
        }
        out.json(&doc, &Raws::default())?;
    } else {
        if head_seq == 0 {
            out.line("head: no events")?;
        } else {
            out.line(&format!("head: seq {head_seq} {}", clean(&head_hash, 128)))?;
        }
        match &report.chain_break {
            Some(b) => {
                out.line(&format!(
                    "broken at seq {}: {}",
                    b.seq,
                    clean(&b.detail, 400)
                ))?;
                let hash = |h: &str| {
                    if h.is_empty() {
                        "-".into()
                    } else {
                        clean(h, 128)
                    }
                };
                out.line(&format!("  expected {}", hash(&b.expected)))?;
                out.line(&format!("  found    {}", hash(&b.found)))?;
            }
            None if !reached_from => out.line(&format!(
                "not checked: --from {} is past the head's next seq",
                a.from
            ))?,
            None if report.checked == 0 => out.line("intact: no events in the range")?,
            None => {
                out.line(&format!(
                    "intact: {} event(s), seq {} to {}",
                    report.checked, report.from, last
                ))?;
                out.line(&format!(
                    "last checked: seq {last} {}",
                    clean(&report.hash, 128)
                ))?;
            }
        }
        if let Some((seq, hash, Some(found))) = &kept
            && found == hash
        {
            out.line(&format!("kept head: seq {seq} matches"))?;
        }
        for id in &approvals.mismatched {
            out.line(&mismatch(id))?;
        }
        for (id, why) in &approvals.unrecorded {
            out.line(&unrecorded(id, why))?;
        }
        // A damaged approval (a field that does not decode) is listed by `show`, the console's
        // damaged rows and `--json` here; agentrt's text stays as it is for it.
    }
    out.flush()?;
    broken(&report, &approvals)?;
    if !reached_from {
        return Err(CommandError::Failed(past_from(a.from, head_seq)));
    }
    if !reached_to {
        return Err(CommandError::Failed(format!(
            "the event chain is shorter than asked: --to {} was not reached; the last event checked is seq {head_seq}",
            a.to
        )));
    }
    match kept {
        Some((seq, _, None)) => Err(CommandError::Failed(format!(
            "the kept head, seq {seq}, was not reached; the last event checked is seq {head_seq}"
        ))),
        Some((seq, hash, Some(found))) if found != hash => Err(CommandError::Failed(format!(
            "the event chain does not match the head kept: seq {seq} has hash {}, not the {} kept",
            clean(&found, 128),
            clean(&hash, 128)
        ))),
        _ => Ok(()),
    }
}

/// What `--json` says of the approvals' hashes, on either backend.
pub(super) fn approvals_json(a: &crate::runtime::store::ApprovalCheck) -> serde_json::Value {
    json!({
        "verified": a.verified,
        "mismatched": a.mismatched,
        "unrecorded": a.unrecorded.iter().map(|(id, why)| json!({"id": id, "why": why})).collect::<Vec<_>>(),
        "damaged": a.damaged.iter().map(|(id, why)| json!({"id": id, "why": why})).collect::<Vec<_>>(),
    })
}

/// The first of the chain's break and the approvals' mismatches, as the command's error.
pub(super) fn broken(
    report: &crate::runtime::store::ChainReport,
    approvals: &crate::runtime::store::ApprovalCheck,
) -> Result<(), CommandError> {
    if let Some(b) = &report.chain_break {
        return Err(CommandError::Failed(format!(
            "the event chain is broken at seq {}",
            b.seq
        )));
    }
    if let Some(id) = approvals.mismatched.first() {
        return Err(CommandError::Failed(mismatch(id)));
    }
    match approvals.unrecorded.first() {
        Some((id, why)) => Err(CommandError::Failed(unrecorded(id, why))),
        None => Ok(()),
    }
}

/// The line, and the error, for an approval whose status is not the decision on record.
pub(super) fn unrecorded(id: &str, why: &str) -> String {
    format!(
        "approval {}: {} (its row was changed outside the runtime's decisions)",
        clean(id, 80),
        clean(why, 400)
    )
}

/// The line, and the error, for an approval whose hash does not recompute.
pub(super) fn mismatch(id: &str) -> String {
    format!(
        "approval {} does not hash to its stored hash",
        clean(id, 80)
    )
}

/// The refusal of a `--from` past the head's next seq: the events before it that the caller
/// counts on are not there (a log cut short, or another database), so nothing is "intact".
pub(super) fn past_from(from: u64, head_seq: i64) -> String {
    format!(
        "the event chain is shorter than asked: --from {from} is past its end; the head is seq {head_seq}"
    )
}

/// A seq given on the command line as the store counts them: one past `i64::MAX` (which no
/// log reaches) is `i64::MAX`, never a negative number.
pub(super) fn seq(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
