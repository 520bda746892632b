//! The runs' status picker (`f`): a list of "all" and each status; arrows (or the keymap's
//! up/down/top/bottom) move, `enter` chooses, `esc` closes with the filter unchanged.

use crossterm::event::{KeyCode, KeyEvent};

use crate::console::keymap::Action;
use crate::console::msg::Effect;
use crate::console::state::{App, Level, Overlay, RUN_STATUSES, Screen, StatusPicker};

/// Rows of the picker: "all", then each status.
pub(crate) const ROWS: usize = RUN_STATUSES.len() + 1;

pub(super) fn on_key(app: &mut App, mut p: StatusPicker, k: KeyEvent) -> Vec<Effect> {
    let last = ROWS - 1;
    match (k.code, app.keymap.action(&k)) {
        (KeyCode::Esc, _) => {
            app.notice = Some((Level::Info, "status filter unchanged".into()));
            return vec![];
        }
        (KeyCode::Enter, _) => return choose(app, p.cursor),
        (KeyCode::Up, _) | (_, Some(Action::Up)) => p.cursor = p.cursor.saturating_sub(1),
        (KeyCode::Down, _) | (_, Some(Action::Down)) => p.cursor = (p.cursor + 1).min(last),
        (KeyCode::Home, _) | (_, Some(Action::Top)) => p.cursor = 0,
        (KeyCode::End, _) | (_, Some(Action::Bottom)) => p.cursor = last,
        _ => app.dirty = false,
    }
    app.overlay = Some(Overlay::Picker(p));
    vec![]
}

/// Sets the runs' status filter to row `i` of the picker and reads the list from the top.
fn choose(app: &mut App, i: usize) -> Vec<Effect> {
    let Some(Screen::Runs(s)) = app.stack.last_mut() else {
        return vec![];
    };
    s.status = i.checked_sub(1).and_then(|i| RUN_STATUSES.get(i)).cloned();
    s.list = Default::default();
    app.start()
}
