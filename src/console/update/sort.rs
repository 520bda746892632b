//! The `sort` action on the queue (issue 21): the next order, read around the selected row so
//! the selection follows its row into the new order.

use crate::console::data::Query;
use crate::console::msg::Effect;
use crate::console::nav::window_for;
use crate::console::state::{App, Level, Screen};

/// Sorts the queue by its next order. When the queue is counted (at most a window's count,
/// `COUNT_CAP`), the window is read by key around the selected row, whose index in the new
/// order the store finds, and the cursor stays on that row; a longer queue (or a row whose id
/// cannot anchor) starts again at its first row, and says so.
pub(super) fn resort(app: &mut App) -> Vec<Effect> {
    let win = window_for(app.list_rows());
    let id = app.id();
    let Some(Screen::Queue(s)) = app.stack.last_mut() else {
        return vec![];
    };
    s.sort = s.sort.next();
    let l = &mut s.list;
    let selected = l.selected().map(|r| r.approval_id.clone());
    // The store moves the window by as many rows as come before the anchor in the new order,
    // less the anchor's index given: handed `win / 3` from 0, the window starts a third of
    // a window above the row (or at the top), whatever its index was.
    let anchor = selected
        .as_ref()
        .filter(|_| l.page.exact)
        .and_then(|k| Some((win / 3, k.as_str()?.to_string())));
    let mut moved = false;
    let offset = match &anchor {
        Some(_) => 0,
        None => {
            moved = selected.is_some() && l.cursor > 0;
            l.cursor = 0;
            l.top = 0;
            l.key = None;
            0
        }
    };
    l.pending = Some(id);
    l.counting = None;
    l.to_end = false;
    let q = Query::Queue {
        filter: s.filter.clone(),
        sort: s.sort,
        offset,
        limit: win,
        anchor,
        end: None,
    };
    if moved {
        app.notice = Some((Level::Info, FOLLOW_LOST.into()));
    }
    vec![Effect::Query(id, q)]
}

/// What a re-sort says when it could not keep the selected row.
const FOLLOW_LOST: &str =
    "sorted; the queue is too long to follow the selected row here: back at the first row";
