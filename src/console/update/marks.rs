//! Marks on the queue (issue 21): `mark` toggles the selected row, `mark_all` marks every row
//! the current filter matches (read on the worker, at most `MARKS_MAX`), `clear_marks` clears
//! them. Marks are kept by id: a reload keeps them, and after the database changed they are
//! read again by id and the rows that left the queue are unmarked, by name. With marks, the
//! queue's reject, deny and cancel keys read the marked rows again and open one confirmation
//! for all of them, and approve opens the approve table (`bulk`).

use super::bulk::{self, read_marked, read_marked_runs};
use super::outcome::READ_ONLY;
use crate::console::bulk::{MARKS_MAX, Marked, MarkedRun, Purpose, Verb};
use crate::console::data::{
    ApprovalRow, ApprovalStatus, Key, Query, QueueRow, Reply, RunHeader, RunStatus,
};
use crate::console::keymap::Action;
use crate::console::msg::Effect;
use crate::console::state::{App, Level, Screen};
use crate::console::text;

/// Why a second bulk decision is not started while one is in flight.
const BUSY: &str = "a bulk decision is still running: wait for its result";

/// The queue's mark and bulk actions; `None` when the action is not one here (or the top
/// screen is not the queue, or a decision key is pressed with nothing marked).
pub(super) fn on_action(app: &mut App, a: Action) -> Option<Vec<Effect>> {
    if let Some(Screen::Runs(_)) = app.stack.last() {
        return on_runs_action(app, a);
    }
    let Some(Screen::Queue(s)) = app.stack.last() else {
        return None;
    };
    let verb = match a {
        Action::Mark => return Some(toggle(app)),
        Action::MarkAll => {
            let filter = s.filter.clone();
            let id = app.id();
            app.marks.marking_all = Some(id);
            app.notice = Some((Level::Info, "reading every row of the filter…".into()));
            let max = MARKS_MAX as u64;
            return Some(vec![Effect::Query(id, Query::QueueAll { filter, max })]);
        }
        Action::ClearMarks => {
            let n = app.marks.rows.len();
            app.marks.rows.clear();
            app.notice = Some((Level::Info, format!("{n} mark(s) cleared").into()));
            return Some(vec![]);
        }
        _ if app.marks.rows.is_empty() => return None,
        Action::Reject => Verb::Reject,
        Action::Deny => Verb::Deny,
        Action::CancelRun => Verb::Cancel,
        Action::Approve => Verb::Approve,
        _ => return None,
    };
    if refused(app) {
        return Some(vec![]);
    }
    let purpose = match verb {
        Verb::Approve => Purpose::Table,
        v => Purpose::Confirm(v),
    };
    app.notice = Some((
        Level::Info,
        format!("reading the {} marked row(s) again…", app.marks.rows.len()).into(),
    ));
    Some(read_marked(app, purpose))
}

/// After the database changed: the marks are read again (unless a read of them is in flight)
/// so that rows that left the queue are unmarked and said.
pub(super) fn check(app: &mut App) -> Vec<Effect> {
    let mut fx = Vec::new();
    if !app.marks.runs.is_empty() && app.marks.reading_runs.is_none() {
        fx.extend(read_marked_runs(app, Purpose::Check));
    }
    if !app.marks.rows.is_empty() && app.marks.reading.is_none() {
        fx.extend(read_marked(app, Purpose::Check));
    }
    fx
}

/// The runs list's marks: `mark` toggles the selected run, `clear_marks` clears, and
/// `cancel_run` with runs marked reads them again and opens one confirmation.
fn on_runs_action(app: &mut App, a: Action) -> Option<Vec<Effect>> {
    match a {
        Action::Mark => {
            let Some(Screen::Runs(s)) = app.stack.last() else {
                return None;
            };
            let Some(r) = s.list.selected() else {
                app.notice = Some((Level::Info, "no run selected".into()));
                return Some(vec![]);
            };
            let marks = &mut app.marks.runs;
            if let Err(e) = flip(marks, |m| m.run == r.id, || MarkedRun::of(r), "runs") {
                app.notice = Some((Level::Error, e.into()));
                return Some(vec![]);
            }
            let n = app.marks.runs.len();
            app.notice = Some((
                Level::Info,
                format!("{n} run(s) marked · x cancels them").into(),
            ));
            Some(vec![])
        }
        Action::ClearMarks => {
            let n = app.marks.runs.len();
            app.marks.runs.clear();
            app.notice = Some((Level::Info, format!("{n} run mark(s) cleared").into()));
            Some(vec![])
        }
        Action::CancelRun if !app.marks.runs.is_empty() => {
            if refused(app) {
                return Some(vec![]);
            }
            Some(read_marked_runs(app, Purpose::Confirm(Verb::CancelRuns)))
        }
        _ => None,
    }
}

/// `mark` on the queue: the selected row marked or unmarked.
fn toggle(app: &mut App) -> Vec<Effect> {
    let Some(Screen::Queue(s)) = app.stack.last() else {
        return vec![];
    };
    let Some(r) = s.list.selected() else {
        app.notice = Some((Level::Info, "no row selected".into()));
        return vec![];
    };
    let marks = &mut app.marks.rows;
    if let Err(e) = flip(
        marks,
        |m| m.approval == r.approval_id,
        || Marked::of(r),
        "rows",
    ) {
        app.notice = Some((Level::Error, e.into()));
        return vec![];
    }
    app.notice = Some((Level::Info, marked_count(app).into()));
    vec![]
}

/// Unmarks the mark `is` finds, or else marks `new()` while fewer than [`MARKS_MAX`] are
/// marked; past that, why not (`what` names the marks).
fn flip<T>(
    marks: &mut Vec<T>,
    is: impl Fn(&T) -> bool,
    new: impl FnOnce() -> T,
    what: &str,
) -> Result<(), String> {
    if let Some(i) = marks.iter().position(is) {
        marks.remove(i);
    } else if marks.len() >= MARKS_MAX {
        return Err(format!("at most {MARKS_MAX} {what} can be marked at once"));
    } else {
        marks.push(new());
    }
    Ok(())
}

/// Whether a bulk decision may not start now (read-only, or one still running), said.
fn refused(app: &mut App) -> bool {
    let why = if app.cfg.read_only {
        READ_ONLY
    } else if app.bulk.is_some() {
        BUSY
    } else {
        return false;
    };
    app.notice = Some((Level::Error, why.into()));
    true
}

fn marked_count(app: &App) -> String {
    format!(
        "{} marked · r/d/x decide them with one reason · a approves through a table",
        app.marks.rows.len()
    )
}

/// A reply to a read of the marks, or of every row in the filter; `None`: not one of theirs.
pub(super) fn on_reply(app: &mut App, id: u64, r: &Reply) -> Option<Vec<Effect>> {
    if app.marks.marking_all == Some(id) {
        app.marks.marking_all = None;
        match r {
            Reply::QueueAll(rows, more) => mark_all(app, rows, *more),
            Reply::Failed(e) => app.notice = Some((Level::Error, e.to_string().into())),
            _ => {}
        }
        return Some(vec![]);
    }
    if let Some((_, purpose)) = app.marks.reading_runs.take_if(|(i, _)| *i == id) {
        match r {
            Reply::MarkedRuns(rows) => {
                let now_of = |k: &Key| {
                    rows.iter()
                        .find(|(i, _)| i == k)
                        .and_then(|(_, h)| h.as_deref())
                };
                runs_reply(app, purpose, &now_of);
            }
            Reply::Failed(e) => {
                app.notice = Some((Level::Error, format!("reading the marked runs: {e}").into()))
            }
            _ => {}
        }
        return Some(vec![]);
    }
    let (_, purpose) = app.marks.reading.take_if(|(i, _)| *i == id)?;
    let rows = match r {
        Reply::Marked(rows) => rows,
        Reply::Failed(e) => {
            app.notice = Some((Level::Error, format!("reading the marked rows: {e}").into()));
            return Some(vec![]);
        }
        _ => return Some(vec![]),
    };
    let now_of = |k: &Key| {
        rows.iter()
            .find(|(i, _)| i == k)
            .and_then(|(_, a)| a.as_deref())
    };
    match purpose {
        Purpose::Check => unmark_gone(app, &now_of),
        Purpose::Confirm(v) => bulk::open_confirm(app, v, &now_of),
        Purpose::DryRun => bulk::dry_run(app, &now_of),
        Purpose::Table => super::table::open_table(app, &now_of),
    }
    Some(vec![])
}

/// Marks every row of the filter (those already marked stay as they were marked).
fn mark_all(app: &mut App, rows: &[QueueRow], more: bool) {
    let before = app.marks.rows.len();
    for r in rows {
        if app.marks.rows.len() >= MARKS_MAX {
            break;
        }
        if !app.marks.contains(&r.approval_id) {
            app.marks.rows.push(Marked::of(r));
        }
    }
    let added = app.marks.rows.len() - before;
    let mut m = format!("{added} row(s) marked; {}", marked_count(app));
    if more || app.marks.rows.len() >= MARKS_MAX && added < rows.len() {
        m = format!("{m} (more match: at most {MARKS_MAX} are marked at once)");
    }
    app.notice = Some((Level::Info, m.into()));
}

/// Unmarks the rows that are no longer pending approvals of waiting runs, saying which and
/// why; a row whose hash changed stays marked and is flagged (its decision will be refused).
fn unmark_gone<'a>(app: &mut App, now_of: &impl Fn(&Key) -> Option<&'a ApprovalRow>) {
    let mut gone = Vec::new();
    app.marks.rows.retain_mut(|m| {
        let why = match now_of(&m.approval) {
            None => Some("gone".to_string()),
            Some(a) if a.status != ApprovalStatus::Pending => {
                let by = text::escaped(&a.decided_by);
                Some(format!("{} by {by}", a.status))
            }
            Some(a) if a.run_status != RunStatus::WaitingForApproval => {
                Some(format!("run {}", a.run_status))
            }
            Some(a) => {
                m.changed |= a.hash != m.hash;
                None
            }
        };
        if let Some(why) = &why {
            gone.push(format!("{} ({why})", text::escaped(m.approval.as_bytes())));
        }
        why.is_none()
    });
    say_unmarked(app, &gone, "row(s) left the queue");
}

/// Names the marks unmarked because `why` (none: nothing said).
fn say_unmarked(app: &mut App, gone: &[String], why: &str) {
    if !gone.is_empty() {
        let (n, names) = (gone.len(), gone.join("; "));
        let m = format!("{n} marked {why} and were unmarked: {names}");
        app.notice = Some((Level::Info, m.into()));
    }
}

/// The marked runs read again: for a check, ended runs are unmarked by name; else the
/// confirmation or its dry run.
fn runs_reply<'a>(
    app: &mut App,
    purpose: Purpose,
    now_of: &impl Fn(&Key) -> Option<&'a RunHeader>,
) {
    match purpose {
        Purpose::Check => {
            let mut gone = Vec::new();
            app.marks.runs.retain(|m| match now_of(&m.run) {
                Some(h) if !h.status.is_terminal() => true,
                h => {
                    let why = h.map_or("gone".to_string(), |h| h.status.to_string());
                    gone.push(format!("{} ({why})", text::escaped(m.run.as_bytes())));
                    false
                }
            });
            say_unmarked(app, &gone, "run(s) ended");
        }
        Purpose::DryRun => bulk::dry_run_runs(app, now_of),
        _ => bulk::open_confirm_runs(app, now_of),
    }
}
