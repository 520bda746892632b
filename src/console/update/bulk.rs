//! Bulk decisions of the marked rows (issue 21): the confirmation of a reject, deny or cancel
//! with one reason (and its dry run), the writes (the approve table's too, see `table`), one per row, each bound
//! to its own shown hash and done on the worker, and the result that names every row skipped.

use crossterm::event::{KeyCode, KeyEvent};

use super::outcome::reason_required;
use crate::console::bulk::{BulkRun, Item, Purpose, Verb, item, run_item};
use crate::console::data::{
    ApprovalRow, Choice, DecideError, Key, Query, RunHeader, Said, Write, WriteResult,
};
use crate::console::keymap::Action;
use crate::console::layout;
use crate::console::msg::Effect;
use crate::console::state::{App, BulkConfirm, BulkResult, Level, Overlay, TextInput};
use crate::console::time;

/// Asks the worker for the marked rows as they are now.
pub(super) fn read_marked(app: &mut App, purpose: Purpose) -> Vec<Effect> {
    let id = app.id();
    app.marks.reading = Some((id, purpose));
    vec![Effect::Query(
        id,
        Query::Marked {
            ids: app.marks.ids(),
        },
    )]
}

/// Asks the worker for the marked runs as they are now.
pub(super) fn read_marked_runs(app: &mut App, purpose: Purpose) -> Vec<Effect> {
    let id = app.id();
    app.marks.reading_runs = Some((id, purpose));
    let ids = app.marks.runs.iter().map(|m| m.run.clone()).collect();
    vec![Effect::Query(id, Query::MarkedRuns { ids })]
}

/// Opens the confirmation of a cancel of the marked runs as read now.
pub(super) fn open_confirm_runs<'a>(
    app: &mut App,
    now_of: &impl Fn(&Key) -> Option<&'a RunHeader>,
) {
    let items = app
        .marks
        .runs
        .iter()
        .map(|m| run_item(m, now_of(&m.run)))
        .collect();
    app.notice = None;
    app.overlay = Some(Overlay::Bulk(Box::new(BulkConfirm {
        verb: Verb::CancelRuns,
        items,
        reason: TextInput::default(),
        scroll: 0,
    })));
}

/// The dry run of a cancel of marked runs: what `enter` would do now.
pub(super) fn dry_run_runs<'a>(app: &mut App, now_of: &impl Fn(&Key) -> Option<&'a RunHeader>) {
    let Some(Overlay::Bulk(c)) = app.overlay.take() else {
        return;
    };
    let judged: Vec<Item> = app
        .marks
        .runs
        .iter()
        .filter(|m| c.items.iter().any(|i| i.marked.run == m.run))
        .map(|m| run_item(m, now_of(&m.run)))
        .collect();
    show_dry_run(app, c, judged);
}

/// Opens the confirmation of `verb` over the marked rows as read now.
pub(super) fn open_confirm<'a>(
    app: &mut App,
    verb: Verb,
    now_of: &impl Fn(&Key) -> Option<&'a ApprovalRow>,
) {
    let items = items(app, verb, now_of);
    app.notice = None;
    app.overlay = Some(Overlay::Bulk(Box::new(BulkConfirm {
        verb,
        items,
        reason: TextInput::default(),
        scroll: 0,
    })));
}

fn items<'a>(
    app: &App,
    verb: Verb,
    now_of: &impl Fn(&Key) -> Option<&'a ApprovalRow>,
) -> Vec<Item> {
    app.marks
        .rows
        .iter()
        .map(|m| item(m, now_of(&m.approval), verb, app.now))
        .collect()
}

/// The dry run's answer: what the open confirmation would do now, nothing changed.
pub(super) fn dry_run<'a>(app: &mut App, now_of: &impl Fn(&Key) -> Option<&'a ApprovalRow>) {
    let Some(Overlay::Bulk(c)) = app.overlay.take() else {
        return;
    };
    let judged: Vec<Item> = c
        .items
        .iter()
        .map(|i| item(&i.marked, now_of(&i.marked.approval), c.verb, app.now))
        .collect();
    show_dry_run(app, c, judged);
}

/// The dry run's result over the confirmation it was asked from.
fn show_dry_run(app: &mut App, c: Box<BulkConfirm>, judged: Vec<Item>) {
    let (skipped, done): (Vec<Item>, Vec<Item>) =
        judged.into_iter().partition(|i| i.skip.is_some());
    let skipped = skipped
        .into_iter()
        .map(|i| {
            let why = i.skip.clone().unwrap_or_default();
            (i, why)
        })
        .collect();
    app.notice = Some((Level::Info, "dry run: nothing was changed".into()));
    app.overlay = Some(Overlay::BulkResult(Box::new(BulkResult {
        verb: c.verb,
        dry: true,
        done,
        skipped,
        scroll: 0,
        back: Some(c),
    })));
}

/// Keys of the three bulk overlays (`ov` was taken from the app).
pub(super) fn on_overlay_key(app: &mut App, ov: Overlay, k: KeyEvent) -> Vec<Effect> {
    let action = app.keymap.action(&k);
    match ov {
        Overlay::Bulk(mut c) => match k.code {
            KeyCode::Esc => {
                app.notice = Some((Level::Info, "nothing was changed".into()));
                vec![]
            }
            KeyCode::Enter => accept(app, c),
            _ if action == Some(Action::DryRun) => {
                let runs = c.verb == Verb::CancelRuns;
                app.overlay = Some(Overlay::Bulk(c));
                if runs {
                    read_marked_runs(app, Purpose::DryRun)
                } else {
                    read_marked(app, Purpose::DryRun)
                }
            }
            KeyCode::Up | KeyCode::PageUp => {
                c.scroll = c.scroll.saturating_sub(scroll_step(app, k.code));
                app.overlay = Some(Overlay::Bulk(c));
                vec![]
            }
            KeyCode::Down | KeyCode::PageDown => {
                c.scroll += scroll_step(app, k.code);
                app.overlay = Some(Overlay::Bulk(c));
                vec![]
            }
            _ => {
                c.reason.edit_key(&k);
                app.overlay = Some(Overlay::Bulk(c));
                vec![]
            }
        },
        Overlay::BulkResult(mut r) => match k.code {
            KeyCode::Esc | KeyCode::Enter => {
                app.overlay = r.back.take().map(Overlay::Bulk);
                vec![]
            }
            _ => {
                r.scroll = scrolled(r.scroll, action, app);
                app.overlay = Some(Overlay::BulkResult(r));
                vec![]
            }
        },
        other => {
            app.overlay = Some(other);
            vec![]
        }
    }
}

fn scroll_step(app: &App, code: KeyCode) -> usize {
    if matches!(code, KeyCode::PageUp | KeyCode::PageDown) {
        usize::from(layout::list_rows(app.size) / 2).max(1)
    } else {
        1
    }
}

/// A scroll position moved by a keymap action (up, down, pages, top).
pub(super) fn scrolled(at: usize, a: Option<Action>, app: &App) -> usize {
    let page = usize::from(layout::list_rows(app.size) / 2).max(1);
    match a {
        Some(Action::Down) => at + 1,
        Some(Action::Up) => at.saturating_sub(1),
        Some(Action::PageDown | Action::HalfDown) => at + page,
        Some(Action::PageUp | Action::HalfUp) => at.saturating_sub(page),
        Some(Action::Top) => 0,
        Some(Action::Bottom) => usize::MAX / 2,
        _ => at,
    }
}

/// Enter on the bulk confirmation: one write per row not already known to be skipped, each
/// with the hash it was marked with.
fn accept(app: &mut App, c: Box<BulkConfirm>) -> Vec<Effect> {
    let note = c.reason.text.trim().to_string();
    if note.is_empty() {
        let deny = (c.verb == Verb::Deny).then_some(
            "a note for the agents is required: each is told it instead of its call's result",
        );
        return reason_required(app, deny, Overlay::Bulk(c));
    }
    let by = app.cfg.by.clone();
    let write = |i: &Item| -> Option<Write> {
        let m = &i.marked;
        let (run, approval, shown_hash) = (m.run.clone(), m.approval.clone(), m.hash.clone());
        let (by, note) = (by.clone(), note.clone());
        Some(match c.verb {
            Verb::Reject | Verb::Deny => Write::Decide {
                choice: if c.verb == Verb::Reject {
                    Choice::Reject
                } else {
                    Choice::Deny
                },
                run,
                approval,
                shown_hash,
                by,
                note,
            },
            Verb::Cancel => Write::CancelShown {
                run,
                approval,
                shown_hash,
                by,
                reason: note,
            },
            Verb::CancelRuns => Write::Cancel {
                run,
                by,
                reason: note,
            },
            // Approvals go through the table, never through this confirmation.
            Verb::Approve => return None,
        })
    };
    let rows: Vec<(Item, Option<Write>)> = c
        .items
        .iter()
        .map(|i| (i.clone(), if i.skip.is_none() { write(i) } else { None }))
        .collect();
    start(app, c.verb, rows)
}

/// Sends the writes and keeps what is in flight; rows without a write are skipped at once.
pub(super) fn start(app: &mut App, verb: Verb, rows: Vec<(Item, Option<Write>)>) -> Vec<Effect> {
    let mut run = BulkRun {
        verb,
        waiting: Vec::new(),
        done: Vec::new(),
        skipped: Vec::new(),
    };
    let mut fx = Vec::new();
    for (item, w) in rows {
        match w {
            Some(w) => {
                let id = app.id();
                run.waiting.push((id, item));
                fx.push(Effect::Write(id, w));
            }
            None => {
                let why = item.skip.clone().unwrap_or_default();
                run.skipped.push((item, why));
            }
        }
    }
    app.notice = Some((
        Level::Info,
        format!("{} {} row(s)…", verb.name(), run.waiting.len()).into(),
    ));
    app.bulk = Some(run);
    if fx.is_empty() {
        return finish(app);
    }
    fx
}

/// A write of the bulk decision came back; `None` when it is not one of its writes.
pub(super) fn on_done(app: &mut App, id: u64, r: &WriteResult) -> Option<Vec<Effect>> {
    let run = app.bulk.as_mut()?;
    let pos = run.waiting.iter().position(|(i, _)| *i == id)?;
    let (_, item) = run.waiting.remove(pos);
    match r {
        Ok(_) => run.done.push(item),
        Err(e) => {
            let why = skipped_why(e, app.now);
            run.skipped.push((item, why));
        }
    }
    if run.waiting.is_empty() {
        return Some(finish(app));
    }
    Some(vec![])
}

/// Every write is back: the result overlay, the rows decided or skipped unmarked, a reload.
fn finish(app: &mut App) -> Vec<Effect> {
    let Some(run) = app.bulk.take() else {
        return vec![];
    };
    let ended = |k: &Key| {
        run.done.iter().any(|i| i.marked.approval == *k)
            || run.skipped.iter().any(|(i, _)| i.marked.approval == *k)
    };
    app.marks.rows.retain(|m| !ended(&m.approval));
    if run.verb == Verb::CancelRuns {
        let ended_run = |k: &Key| {
            run.done.iter().any(|i| i.marked.run == *k)
                || run.skipped.iter().any(|(i, _)| i.marked.run == *k)
        };
        app.marks.runs.retain(|m| !ended_run(&m.run));
    }
    let level = if run.skipped.is_empty() {
        Level::Ok
    } else {
        Level::Error
    };
    app.notice = Some((
        level,
        format!(
            "{} {}, skipped {} of {}",
            run.verb.done(),
            run.done.len(),
            run.skipped.len(),
            run.done.len() + run.skipped.len()
        )
        .into(),
    ));
    app.overlay = Some(Overlay::BulkResult(Box::new(BulkResult {
        verb: run.verb,
        dry: false,
        done: run.done,
        skipped: run.skipped,
        scroll: 0,
        back: None,
    })));
    let mut fx = app.reload_all();
    fx.dedup();
    fx
}

/// Why the shown-hash call refused a row, in the console's words (untrusted parts escaped
/// when drawn).
fn skipped_why(e: &DecideError, now: i64) -> Vec<u8> {
    match e {
        DecideError::Changed => b"it changed since you marked it".to_vec(),
        DecideError::AlreadyDecided { status, by, at } => {
            let mut s = format!("it was decided meanwhile: already {status}");
            if !by.is_empty() {
                s.push_str(&format!(" by {by}"));
            }
            if let Some(at) = at {
                s.push_str(&format!(" {}", time::ago_at(at, now)));
            }
            s.into_bytes()
        }
        DecideError::RunState(m) => Said::from("its run moved on meanwhile: ").and(m).bytes(),
        other => other.bytes(),
    }
}
