//! The reads a screen asks for: its rows (a window of each list around the cursor) and the
//! header counts, each tagged with a fresh request id the reply must carry.

use crate::console::data::*;
use crate::console::fields;
use crate::console::layout;
use crate::console::msg::Effect;
use crate::console::nav::{ListView, first_window_for, window_for};
use crate::console::state::{App, ApprovalScreen, RunDetailScreen, Screen};
use crate::console::theme::Role;

impl App {
    /// Effects to read everything the top screen shows. The header counts follow the first
    /// reply (see `replies::on_reply`): on a large database they are scans, and the rows come
    /// first.
    pub fn start(&mut self) -> Vec<Effect> {
        self.load_top(false)
    }

    /// The top screen's rows and then the header counts (a refresh, or after a decision).
    pub fn reload_all(&mut self) -> Vec<Effect> {
        let mut fx = self.load_top(false);
        fx.extend(self.load_counts());
        fx
    }

    pub(crate) fn load_counts(&mut self) -> Vec<Effect> {
        let id = self.id();
        self.counts_pending = Some(id);
        vec![Effect::Query(id, Query::Counts)]
    }

    /// Reads the top screen's data; `keep` re-reads the same window (live reload).
    pub(crate) fn load_top(&mut self, keep: bool) -> Vec<Effect> {
        let win = Window::new(self.list_rows());
        let id = self.id();
        let Some(top) = self.stack.last_mut() else {
            return vec![];
        };
        let q = match top {
            Screen::Queue(s) => {
                let (filter, sort) = (s.filter.clone(), s.sort);
                list_query(
                    &mut s.list,
                    id,
                    keep,
                    win,
                    |r| r.approval_id.as_str().map(str::to_string),
                    |offset, limit, anchor, end| {
                        narrowed(
                            filter,
                            Query::Queue {
                                filter: String::new(),
                                sort,
                                offset,
                                limit,
                                anchor,
                                end,
                            },
                        )
                    },
                )
            }
            Screen::Runs(s) => {
                let (status, filter) = (s.status.clone(), s.filter.clone());
                list_query(
                    &mut s.list,
                    id,
                    keep,
                    win,
                    |r| r.id.as_str().map(str::to_string),
                    |offset, limit, anchor, end| {
                        narrowed(
                            filter,
                            Query::Runs {
                                status,
                                filter: String::new(),
                                offset,
                                limit,
                                anchor,
                                end,
                            },
                        )
                    },
                )
            }
            Screen::Damaged(s) => {
                let filter = s.filter.clone();
                list_query(
                    &mut s.list,
                    id,
                    keep,
                    win,
                    DamagedRow::anchor,
                    |offset, limit, anchor, end| {
                        narrowed(
                            filter,
                            Query::Damaged {
                                offset,
                                limit,
                                anchor,
                                end,
                            },
                        )
                    },
                )
            }
            Screen::Approval(s) => {
                s.pending = Some(id);
                Query::Approval { id: s.id.clone() }
            }
            Screen::RunDetail(s) => {
                s.header_pending = Some(id);
                let hq = Query::Run { id: s.id.clone() };
                let id2 = self.next_id + 1;
                self.next_id = id2;
                let q = tab_query(s, id2, keep, win);
                return vec![Effect::Query(id, hq), Effect::Query(id2, q)];
            }
            Screen::Stats(_) if keep => return vec![],
            Screen::Stats(s) => {
                s.pending = Some(id);
                Query::Stats { now: self.now }
            }
            Screen::Help { .. } | Screen::Messages { .. } => return vec![],
        };
        vec![Effect::Query(id, q)]
    }

    /// Reads the window around the top screen's cursor again (it moved, a tab or filter
    /// changed). The run detail's header is not read again: a read of it still in flight
    /// stays the one it waits for (issue 16: it was replaced by a read never sent).
    pub(crate) fn load_window(&mut self) -> Vec<Effect> {
        let win = Window::new(self.list_rows());
        let id = self.id();
        match self.stack.last_mut() {
            Some(Screen::RunDetail(s)) => vec![Effect::Query(id, tab_query(s, id, false, win))],
            _ => {
                self.next_id -= 1;
                self.load_top(false)
            }
        }
    }

    fn push(&mut self, s: Screen) -> Vec<Effect> {
        self.stack.push(s);
        self.load_top(false)
    }

    pub fn push_run(&mut self, id: Key) -> Vec<Effect> {
        self.push(Screen::RunDetail(Box::new(RunDetailScreen::new(id))))
    }

    pub fn push_approval(&mut self, id: Key) -> Vec<Effect> {
        self.push(Screen::Approval(Box::new(ApprovalScreen::new(id))))
    }

    /// Lays the approval detail's fields out again (its width, expansions or mode changed).
    pub fn relayout(&mut self) {
        let w = layout::detail_width(self.size);
        let st = self.theme.text_styles();
        let th = &self.theme;
        let (label, badge) = (th.style(Role::Title), th.style(Role::Badge));
        let (danger, ok, dim) = (
            th.style(Role::Danger),
            th.style(Role::Ok),
            th.style(Role::Dim),
        );
        if let Some(Screen::Approval(s)) = self.stack.last_mut() {
            let o = fields::LayoutOpts {
                width: usize::from(w),
                expanded: &s.expanded,
                strict: s.strict,
                st: &st,
                label_style: label,
                badge_style: badge,
                danger_style: danger,
                ok_style: ok,
                dim_style: dim,
            };
            s.view = fields::layout(&s.fields, &o);
            if let Some(off) = s.keep.take() {
                s.scroll = s.lines_before(s.cursor).saturating_sub(off);
            }
        }
        super::table::layout_table(self);
    }
}

/// A list's read narrowed by the `/` filter: matched on the rows' shown text by the worker's
/// scan (`console::scan`), never by the SQL filter on stored bytes; as it is when empty.
fn narrowed(filter: String, list: Query) -> Query {
    if filter.is_empty() {
        list
    } else {
        Query::Filtered {
            filter,
            list: Box::new(list),
        }
    }
}

/// The read of the run detail's open tab.
fn tab_query(s: &mut RunDetailScreen, id: u64, keep: bool, win: Window) -> Query {
    let run = s.id.clone();
    // The tabs differ only in their list, their query and what anchors a read by key.
    macro_rules! tab {
        ($list:ident, $query:ident, $anchor:expr) => {
            list_query(
                &mut s.$list,
                id,
                keep,
                win,
                $anchor,
                |offset, limit, anchor, end| Query::$query {
                    run,
                    offset,
                    limit,
                    anchor,
                    end,
                },
            )
        };
    }
    match s.tab {
        Tab::Steps => tab!(steps, Steps, |r| r.id.as_str().map(str::to_string)),
        Tab::Events => tab!(events, Events, |r| Some(r.seq)),
        Tab::Approvals => tab!(approvals, Approvals, |r| r.id.as_str().map(str::to_string)),
        Tab::ModelCalls => tab!(calls, ModelCalls, |r| r.id.as_str().map(str::to_string)),
    }
}

/// How many rows a list's read asks for: a window of a few screens, or one screen when the
/// list has not been read yet (the first frame waits only for what it draws).
#[derive(Clone, Copy)]
struct Window {
    whole: u64,
    first: u64,
}

impl Window {
    fn new(view_rows: u16) -> Window {
        Window {
            whole: window_for(view_rows),
            first: first_window_for(view_rows),
        }
    }
}

/// The read of a list's window for its cursor (`keep`: the same window again, a live reload):
/// by key around the first row already read when that row is nearer than the list's start,
/// or from the end when the length is known and the end is nearer (the store picks the nearest;
/// issue 14 item 8). After a jump to the end of a list longer than a window counts, its length
/// is asked first (on the counting lane). A list's first read is one screen long; the whole
/// window follows once it is shown (`replies::on_reply`).
fn list_query<T, K>(
    l: &mut ListView<T>,
    id: u64,
    keep: bool,
    win: Window,
    key: impl Fn(&T) -> Option<K>,
    build: impl FnOnce(u64, u64, Option<(u64, K)>, Option<u64>) -> Query,
) -> Query {
    l.short = !keep && !l.loaded && !l.to_end;
    let limit = if l.short { win.first } else { win.whole };
    let off = if keep {
        l.page.offset
    } else {
        l.window_offset(limit)
    };
    let q = build(off, limit, l.anchor(off, key), l.end());
    if l.to_end && !l.page.exact {
        l.counting = Some(id);
        Query::Length(Box::new(q))
    } else {
        l.to_end = false;
        l.pending = Some(id);
        q
    }
}
