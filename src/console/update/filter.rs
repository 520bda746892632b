//! The `/` filter as you type: every key that changes the text narrows the list at once (at
//! most one filter read in flight: a key typed meanwhile is read when that one comes back),
//! `esc` puts back the filter there was, `enter` keeps the one typed; `up`/`down` move through
//! the narrowed rows while typing; `n`/`N` move to the next/previous row of a filtered list,
//! wrapping. What a row is matched on is `console::filter`'s business (its shown text).

use crossterm::event::{KeyCode, KeyEvent};

use super::outcome::{Outcome, move_list};
use crate::console::data::{DamagedRow, Key};
use crate::console::keymap::Action;
use crate::console::msg::Effect;
use crate::console::nav::ListView;
use crate::console::state::{App, FilterEdit, Level, Overlay, Screen, TextInput};

/// The overlay `/` opens on a list whose filter is `current`.
pub(super) fn edit(current: &str) -> Overlay {
    Overlay::Filter(FilterEdit {
        input: TextInput {
            text: current.to_string(),
        },
        before: current.to_string(),
        inflight: None,
        stale: false,
    })
}

/// A key while the filter is typed.
pub(super) fn on_key(app: &mut App, mut e: FilterEdit, k: KeyEvent) -> Vec<Effect> {
    match k.code {
        KeyCode::Esc => {
            let fx = if e.before != shown_filter(app).unwrap_or_default() {
                narrow(app, &e.before)
            } else {
                vec![]
            };
            app.notice = Some((Level::Info, "filter put back as it was".into()));
            fx
        }
        KeyCode::Enter => {
            // The text typed last may not have been read yet: read it now.
            if e.stale || shown_filter(app).as_deref() != Some(e.input.text.as_str()) {
                narrow(app, &e.input.text)
            } else {
                vec![]
            }
        }
        KeyCode::Up | KeyCode::Down => {
            let a = if k.code == KeyCode::Up {
                Action::Up
            } else {
                Action::Down
            };
            let fx = move_top(app, a);
            app.overlay = Some(Overlay::Filter(e));
            fx
        }
        _ => {
            let before = e.input.text.clone();
            e.input.edit_key(&k);
            changed(app, e, before)
        }
    }
}

/// Text pasted while the filter is typed narrows the list as typing does.
pub(super) fn on_paste(app: &mut App, mut e: FilterEdit, s: &str) -> Vec<Effect> {
    let before = e.input.text.clone();
    e.input.paste(s);
    changed(app, e, before)
}

fn changed(app: &mut App, mut e: FilterEdit, before: String) -> Vec<Effect> {
    let mut fx = vec![];
    if e.input.text != before {
        if e.inflight.is_some() {
            e.stale = true;
        } else {
            fx = narrow(app, &e.input.text);
            e.inflight = read_id(&fx);
        }
    }
    app.overlay = Some(Overlay::Filter(e));
    fx
}

/// After a reply: when it was the filter read in flight and keys were typed meanwhile, the
/// text as it is now is read.
pub(super) fn after_reply(app: &mut App, id: u64) -> Vec<Effect> {
    let Some(Overlay::Filter(e)) = &mut app.overlay else {
        return vec![];
    };
    if e.inflight != Some(id) {
        return vec![];
    }
    e.inflight = None;
    if !std::mem::take(&mut e.stale) {
        return vec![];
    }
    let text = e.input.text.clone();
    let fx = narrow(app, &text);
    if let Some(Overlay::Filter(e)) = &mut app.overlay {
        e.inflight = read_id(&fx);
    }
    fx
}

/// Moves the top list's cursor (while the filter is typed the keys are text, so only the
/// arrows move).
fn move_top(app: &mut App, a: Action) -> Vec<Effect> {
    let rows = app.list_rows();
    let need = match app.stack.last_mut() {
        Some(Screen::Queue(s)) => move_list(rows, &mut s.list, a, |r| r.approval_id.clone()),
        Some(Screen::Runs(s)) => move_list(rows, &mut s.list, a, |r| r.id.clone()),
        Some(Screen::Damaged(s)) => move_list(rows, &mut s.list, a, DamagedRow::key),
        _ => false,
    };
    if need { app.load_window() } else { vec![] }
}

fn read_id(fx: &[Effect]) -> Option<u64> {
    fx.iter().find_map(|e| match e {
        Effect::Query(id, _) => Some(*id),
        _ => None,
    })
}

/// The top list's filter, when the top screen is a list.
fn shown_filter(app: &App) -> Option<String> {
    match app.top() {
        Screen::Queue(s) => Some(s.filter.clone()),
        Screen::Runs(s) => Some(s.filter.clone()),
        Screen::Damaged(s) => Some(s.filter.clone()),
        _ => None,
    }
}

/// Sets the top list's filter to `text` and reads its first window (from the top).
fn narrow(app: &mut App, text: &str) -> Vec<Effect> {
    match app.stack.last_mut() {
        Some(Screen::Queue(s)) => {
            s.filter = text.to_string();
            s.list = Default::default();
        }
        Some(Screen::Runs(s)) => {
            s.filter = text.to_string();
            s.list = Default::default();
        }
        Some(Screen::Damaged(s)) => {
            s.filter = text.to_string();
            s.list = Default::default();
        }
        _ => return vec![],
    }
    app.start()
}

/// `n` / `N` on a list: the next or previous row of the narrowed list, wrapping at its ends.
pub(super) fn next_match<T>(
    rows: u16,
    l: &mut ListView<T>,
    filter: &str,
    a: Action,
    out: &mut Outcome,
    id_of: impl Fn(&T) -> Key,
) {
    let forward = match a {
        Action::NextMatch => true,
        Action::PrevMatch => false,
        _ => return,
    };
    let total = l.page.total;
    if filter.is_empty() {
        out.notice = Some((
            Level::Info,
            "no filter: / narrows the list, then n and N move through the matches".into(),
        ));
        return;
    }
    if total == 0 {
        out.notice = Some((Level::Info, "no row matches the filter".into()));
        return;
    }
    let c = match (forward, l.cursor) {
        (true, c) if c + 1 >= total => 0,
        (true, c) => c + 1,
        (false, 0) => total - 1,
        (false, c) => c.min(total) - 1,
    };
    out.need = l.set_cursor(c);
    l.scroll_into_view(rows);
    l.remember(id_of);
    out.notice = Some((Level::Info, format!("match {} of {total}", c + 1).into()));
}
