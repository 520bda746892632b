//! The mouse, when it is on (`--mouse` or `mouse = true`; off by default): a left click on a
//! list's row selects it, a click on the row already selected opens it (so a double click
//! opens what it points at), the wheel moves as the up and down keys do. While an overlay is
//! open the mouse does nothing: a click must not decide, choose or type anything.

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};

use super::actions::on_action;
use crate::console::data::Key;
use crate::console::keymap::Action;
use crate::console::layout;
use crate::console::msg::Effect;
use crate::console::nav::ListView;
use crate::console::state::{App, Screen};

pub(super) fn on_mouse(app: &mut App, m: MouseEvent) -> Vec<Effect> {
    if app.overlay.is_some() {
        app.dirty = false;
        return vec![];
    }
    match m.kind {
        MouseEventKind::ScrollDown => on_action(app, Action::Down),
        MouseEventKind::ScrollUp => on_action(app, Action::Up),
        MouseEventKind::Down(MouseButton::Left) => click(app, m.row),
        _ => {
            app.dirty = false;
            vec![]
        }
    }
}

/// What a click on a list did.
enum Hit {
    /// Nothing there (a title, the header, past the last row).
    Miss,
    /// Selected another row; whether its window must be read.
    Selected(bool),
    /// Clicked the selected row.
    Open,
}

fn click(app: &mut App, y: u16) -> Vec<Effect> {
    let size = app.size;
    let hit = match app.stack.last_mut() {
        Some(Screen::Queue(s)) => hit(&mut s.list, layout::list_rows(size), y, |r| {
            r.approval_id.clone()
        }),
        Some(Screen::Runs(s)) => hit(&mut s.list, layout::list_rows(size), y, |r| r.id.clone()),
        Some(Screen::Damaged(s)) => hit(
            &mut s.list,
            layout::damaged_rows(size),
            y,
            crate::console::data::DamagedRow::key,
        ),
        _ => Hit::Miss,
    };
    match hit {
        Hit::Miss => {
            app.dirty = false;
            vec![]
        }
        Hit::Selected(true) => app.load_window(),
        Hit::Selected(false) => {
            app.notice = None;
            vec![]
        }
        Hit::Open => on_action(app, Action::Open),
    }
}

fn hit<T>(l: &mut ListView<T>, rows: u16, y: u16, id_of: impl Fn(&T) -> Key) -> Hit {
    let Some(i) = y.checked_sub(layout::LIST_FIRST_ROW).filter(|i| *i < rows) else {
        return Hit::Miss;
    };
    let n = l.drawn_top(rows) + u64::from(i);
    if n >= l.page.total {
        return Hit::Miss;
    }
    if n == l.cursor && l.selected().is_some() {
        return Hit::Open;
    }
    let need = l.set_cursor(n);
    l.scroll_into_view(rows);
    l.remember(id_of);
    Hit::Selected(need)
}
