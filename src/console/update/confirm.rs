//! The confirmations: what each write will do, said before it is done, or why it cannot be.

use super::outcome::{Ctx, READ_ONLY};
use crate::console::bulk::TheirWords;
use crate::console::data::{
    ApprovalRow, ApprovalStatus, Choice, Key, Recheck, RunHeader, RunStatus,
};
use crate::console::fields;
use crate::console::state::{
    AppConfig, ApprovalScreen, Confirm, PROGRAM_RESUMES, PROXY_COLLECTS, Pending, RunDetailScreen,
    TextInput, short,
};
use crate::console::time;

/// Builds the confirmation for a decision on the shown approval.
pub(crate) fn confirm_decision(
    cfg: &AppConfig,
    s: &ApprovalScreen,
    choice: Choice,
    now: i64,
) -> Result<Confirm, String> {
    let Some(a) = &s.row else {
        return Err("the approval is not loaded yet".into());
    };
    if cfg.read_only {
        return Err(READ_ONLY.into());
    }
    if a.status != ApprovalStatus::Pending {
        return Err(format!("approval is {}, not pending", a.status));
    }
    if a.decode_error.is_some() {
        return Err(
            "this approval does not decode; it cannot be decided (cancel the run instead)".into(),
        );
    }
    if let Some((n, bytes)) = a.request_not_shown {
        // Issue 14 item 6: nothing is decided on arguments the reviewer was not shown.
        return Err(format!(
            "no argument shown ({n} {}): not decidable here; x cancels",
            if bytes { "bytes" } else { "chars" }
        ));
    }
    if a.run_status != RunStatus::WaitingForApproval {
        return Err(format!("run is {}, not waiting for approval", a.run_status));
    }
    let tool = fields::tool_of(a).unwrap_or_default();
    let (run, approval, hash) = (a.run_id.clone(), a.id.clone(), a.hash.clone());
    let what = Pending::Decide {
        choice,
        run,
        approval,
        hash,
    };
    let mut warnings = decision_warnings(s, now);
    // An expired approval's decision only records the expiry (the run is cancelled), which
    // the warnings above already say.
    if choice == Choice::Deny && !crate::console::time::expired(&a.expires_at, now) {
        warnings.push("the run goes INTERRUPTED; its program resumes it".into());
    }
    let mut lines = in_their_words(a);
    lines.extend([
        ("tool".into(), tool),
        ("run".into(), a.run_id.as_bytes().to_vec()),
        ("approval".into(), a.id.as_bytes().to_vec()),
        ("hash".into(), short(&a.hash).as_bytes().to_vec()),
        ("by".into(), cfg.by.clone().into_bytes()),
    ]);
    Ok(Confirm {
        what,
        lines,
        warnings,
        reason: (choice != Choice::Approve).then(TextInput::default),
    })
}

/// [`TheirWords`] as a confirmation lists them: title, amount, target.
fn in_their_words(a: &ApprovalRow) -> Vec<(String, Vec<u8>)> {
    let w = TheirWords::of(a);
    [w.what, w.amount, w.target].into_iter().flatten().collect()
}

/// What the reviewer is reminded of before deciding: folded fields, escapes, flagged text, a
/// change while reading, an expiry already past.
fn decision_warnings(s: &ApprovalScreen, now: i64) -> Vec<String> {
    let folded = s.view.iter().filter(|v| v.folded).count();
    let escapes: usize = s.view.iter().map(|v| v.marks.escapes).sum();
    let flagged: usize = s.view.iter().filter(|v| v.marks.any()).count();
    let mut warnings = Vec::new();
    if folded > 0 {
        warnings.push(format!(
            "{folded} field(s) were folded in the view you saw (e expands)"
        ));
    }
    if escapes > 0 {
        warnings.push(format!("{escapes} escape(s) in the values"));
    }
    if flagged > 0 {
        warnings.push(format!(
            "{flagged} field(s) hold bidi, hidden or control text"
        ));
    }
    if s.changed {
        warnings.push("this approval changed while you were reading it".into());
    }
    // Only the console's own words here: the warnings are not drawn through the escaper.
    match &s.recheck {
        Some(Recheck::Differs(d)) => warnings.push(format!(
            "today's policy answers differently ({} difference(s), \"policy now\" on the page)",
            d.len()
        )),
        None if s
            .row
            .as_ref()
            .is_some_and(|a| a.status == ApprovalStatus::Pending) =>
        {
            warnings.push("the policy has not been asked again yet".into())
        }
        _ => {}
    }
    if let Some(c) = &s.context {
        let n = c.related.iter().filter(|r| r.same_target).count();
        if n > 0 {
            warnings.push(format!(
                "{n} other pending approval(s) act on the same target (see \"related\")"
            ));
        }
    }
    if let Some(a) = &s.row
        && time::expired(&a.expires_at, now)
    {
        warnings.push(format!(
            "it {}: deciding now expires it and cancels the run",
            time::countdown(&a.expires_at, now)
        ));
    }
    warnings
}

pub(super) fn cancel_confirm(run: &Key, h: Option<&RunHeader>) -> Confirm {
    let mut lines = vec![("cancel run".into(), run.as_bytes().to_vec())];
    if let Some(h) = h {
        lines.push(("status".into(), h.status.as_str().as_bytes().to_vec()));
        lines.push(("goal".into(), h.goal.clone()));
    }
    Confirm {
        what: Pending::Cancel { run: run.clone() },
        lines,
        warnings: vec![
            "the run ends as CANCELLED (operator_cancelled); this cannot be undone".into(),
        ],
        reason: Some(TextInput::default()),
    }
}

/// `R` on an approval: the resume of its run, or why it cannot be resumed from here.
pub(super) fn resume_from_approval(s: &ApprovalScreen, cx: &Ctx) -> Result<Confirm, String> {
    let Some(a) = &s.row else {
        return Err("the approval is not loaded yet".into());
    };
    let status = &a.run_status;
    if cx.cfg.read_only {
        Err(READ_ONLY.into())
    } else if a.proxy_session.is_some() {
        Err(PROXY_COLLECTS.into())
    } else if a.status == ApprovalStatus::Pending {
        Err("not approved yet: a resume runs only an approved call (a approves)".into())
    } else if status.is_terminal() || matches!(status, RunStatus::Unknown(_)) {
        Err(format!(
            "run is {status}; only waiting or interrupted runs resume"
        ))
    } else if !cx.cfg.can_resume || !a.resumable {
        Err(PROGRAM_RESUMES.into())
    } else {
        Ok(Confirm {
            what: Pending::Resume {
                run: a.run_id.clone(),
            },
            lines: vec![
                ("resume run".into(), a.run_id.as_bytes().to_vec()),
                ("status".into(), status.as_str().as_bytes().to_vec()),
                ("approval".into(), a.id.as_bytes().to_vec()),
            ],
            warnings: vec!["the run's next step executes its tool for real".into()],
            reason: None,
        })
    }
}

pub(super) fn resume_confirm(s: &RunDetailScreen, cx: &Ctx) -> Result<Confirm, String> {
    let status = s
        .header
        .as_ref()
        .map(|h| h.status.clone())
        .unwrap_or_default();
    // Waiting, running or interrupted: every status a run resumes from (unknown text does not).
    let resumes = !status.is_terminal() && !matches!(status, RunStatus::Unknown(_));
    if cx.cfg.read_only {
        Err(READ_ONLY.into())
    } else if s.header.is_none() {
        Err("the run is not loaded yet".into())
    } else if s.header.as_ref().is_some_and(|h| h.proxy_session.is_some()) {
        Err(PROXY_COLLECTS.into())
    } else if !resumes {
        Err(format!(
            "run is {status}; only waiting or interrupted runs resume"
        ))
    } else if !cx.cfg.can_resume || !s.header.as_ref().is_some_and(|h| h.resumable) {
        Err(PROGRAM_RESUMES.into())
    } else {
        Ok(Confirm {
            what: Pending::Resume { run: s.id.clone() },
            lines: vec![
                ("resume run".into(), s.id.clone().into_bytes()),
                ("status".into(), status.as_str().as_bytes().to_vec()),
            ],
            warnings: vec!["the run's next step executes its tool for real".into()],
            reason: None,
        })
    }
}
