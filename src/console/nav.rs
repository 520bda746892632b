//! A list read a window at a time: the cursor is an absolute row number, the loaded window a
//! page around it; moving outside the window asks for a new one; a reload keeps the cursor on
//! the same row (by its id) when that row is still there.

use super::data::{Key, Page};

/// Rows read around the cursor: a few screens.
pub fn window_for(view_rows: u16) -> u64 {
    (u64::from(view_rows) * 3).max(30)
}

/// Rows of a list's first read: one screen, so the first frame waits for what it draws and
/// not for the screens below it; the whole window follows (`ListView::short`).
pub fn first_window_for(view_rows: u16) -> u64 {
    u64::from(view_rows).max(10)
}

#[derive(Debug, Clone)]
pub struct ListView<T> {
    pub page: Page<T>,
    pub cursor: u64,
    /// Request id of the read in flight; a reply with another id is late and dropped.
    pub pending: Option<u64>,
    /// Request id whose exact total is still to come (the page applied was inexact).
    pub counting: Option<u64>,
    /// Id of the selected row, to find it again after a reload.
    pub key: Option<Key>,
    pub loaded: bool,
    /// First row drawn (kept so the cursor moves within the screen before it scrolls).
    pub top: u64,
    /// Set by a jump to the end of a list longer than a window counts: its length is asked
    /// for first, then the cursor goes to the last row and the window is read from the end.
    pub to_end: bool,
    /// The read in flight (or the page applied) is the list's first, one screen long: once it
    /// is shown, the whole window around the cursor is read.
    pub short: bool,
}

impl<T> Default for ListView<T> {
    fn default() -> Self {
        ListView {
            page: Page {
                offset: 0,
                total: 0,
                rows: Vec::new(),
                exact: true,
            },
            cursor: 0,
            pending: None,
            counting: None,
            key: None,
            loaded: false,
            top: 0,
            to_end: false,
            short: false,
        }
    }
}

impl<T> ListView<T> {
    pub fn selected(&self) -> Option<&T> {
        let i = self.cursor.checked_sub(self.page.offset)?;
        self.page.rows.get(usize::try_from(i).ok()?)
    }

    /// Moves the cursor by `delta` rows (clamped); returns whether the window must be read.
    pub fn move_by(&mut self, delta: i64) -> bool {
        let last = self.page.total.saturating_sub(1);
        let c = (self.cursor as i64)
            .saturating_add(delta)
            .clamp(0, last as i64) as u64;
        self.set_cursor(c)
    }

    pub fn set_cursor(&mut self, c: u64) -> bool {
        self.cursor = c.min(self.page.total.saturating_sub(1));
        !self.in_window(self.cursor)
    }

    fn in_window(&self, c: u64) -> bool {
        self.page.total == 0
            || (c >= self.page.offset && c < self.page.offset + self.page.rows.len() as u64)
    }

    /// The list's length when the page applied says it exactly (a window near the end is then
    /// read from the end, by key in reverse).
    pub fn end(&self) -> Option<u64> {
        (self.loaded && self.page.exact).then_some(self.page.total)
    }

    /// The first row read (its index and key) when it is nearer the window at `off` than the
    /// list's start is: the window is read by key around it.
    /// A row whose key cannot anchor (an id that is not UTF-8: the store's anchors are text)
    /// gives none, and the window is read by position.
    pub fn anchor<K>(&self, off: u64, key: impl Fn(&T) -> Option<K>) -> Option<(u64, K)> {
        let first = self.page.rows.first()?;
        let ai = self.page.offset;
        if ai.abs_diff(off) < off {
            Some((ai, key(first)?))
        } else {
            None
        }
    }

    /// Whether the page of a first, one-screen read is shown, nothing else is in flight and
    /// the list holds more than that page: the whole window is to be read now. The flag is
    /// cleared once the page is shown.
    pub fn widen_due(&mut self) -> bool {
        if !(self.short && self.loaded && self.pending.is_none()) {
            return false;
        }
        self.short = false;
        let whole = self.page.exact
            && self.page.offset == 0
            && self.page.rows.len() as u64 >= self.page.total;
        !whole
    }

    /// Goes to the last row: at once when the length is known, else asks for it first
    /// (`to_end`); returns whether a read must follow.
    pub fn jump_to_end(&mut self) -> bool {
        if self.page.exact {
            self.set_cursor(self.page.total.saturating_sub(1))
        } else {
            self.to_end = true;
            true
        }
    }

    /// Offset of the window to read for the current cursor.
    pub fn window_offset(&self, window: u64) -> u64 {
        self.cursor.saturating_sub(window / 3)
    }

    /// Applies a page that came back; keeps the cursor on the row with the remembered id.
    pub fn apply(&mut self, page: Page<T>, id_of: impl Fn(&T) -> Key) {
        let key = self.key.clone();
        self.page = page;
        self.loaded = true;
        self.pending = None;
        if let Some(k) = key
            && let Some(i) = self.page.rows.iter().position(|r| id_of(r) == k)
        {
            self.cursor = self.page.offset + i as u64;
        }
        self.cursor = self.cursor.min(self.page.total.saturating_sub(1));
        self.key = self.selected().map(&id_of);
    }

    /// Applies the exact total that followed an inexact page of read `id`; false when that
    /// read is no longer the one shown.
    pub fn apply_total(&mut self, id: u64, total: u64) -> bool {
        if self.counting != Some(id) {
            return false;
        }
        self.counting = None;
        self.page.total = total;
        self.page.exact = true;
        if std::mem::take(&mut self.to_end) {
            self.cursor = total.saturating_sub(1);
        }
        self.cursor = self.cursor.min(total.saturating_sub(1));
        true
    }

    /// Forgets the selected row (the cursor moved to a row not read yet).
    pub fn remember_none(&mut self) {
        self.key = None;
    }

    /// Remembers the selected row's id (call after moving).
    pub fn remember(&mut self, id_of: impl Fn(&T) -> Key) {
        self.key = self.selected().map(id_of);
    }

    /// The first row drawn in `rows` lines: `top`, moved down when the cursor is below it
    /// (the table draws from here, and a click is mapped back through it).
    pub fn drawn_top(&self, rows: u16) -> u64 {
        let rows = u64::from(rows.max(1));
        if self.cursor >= self.top + rows {
            self.cursor + 1 - rows
        } else {
            self.top
        }
    }

    /// Keeps `top` such that the cursor is visible in `rows` lines.
    pub fn scroll_into_view(&mut self, rows: u16) {
        let rows = u64::from(rows.max(1));
        if self.cursor < self.top {
            self.top = self.cursor;
        } else if self.cursor >= self.top + rows {
            self.top = self.cursor + 1 - rows;
        }
        let max_top = self.page.total.saturating_sub(rows);
        self.top = self.top.min(max_top);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(offset: u64, total: u64, n: u64) -> Page<u64> {
        Page {
            offset,
            total,
            rows: (offset..offset + n).collect(),
            exact: true,
        }
    }

    #[test]
    fn cursor_stays_on_the_same_row_after_a_reload() {
        let mut l = ListView::default();
        l.apply(page(0, 10, 10), |r| r.to_string().into());
        l.move_by(3);
        l.remember(|r| r.to_string().into());
        // Two rows inserted before it: the same row is now at index 5.
        let shifted = Page {
            offset: 0,
            total: 12,
            rows: vec![100, 101, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            exact: true,
        };
        l.apply(shifted, |r| r.to_string().into());
        assert_eq!(l.cursor, 5);
        assert_eq!(l.selected(), Some(&3));
    }

    #[test]
    fn moving_out_of_the_window_asks_for_a_read() {
        let mut l = ListView::default();
        l.apply(page(0, 1000, 30), |r| r.to_string().into());
        assert!(!l.move_by(29));
        assert!(l.move_by(1));
        assert_eq!(l.window_offset(30), 20);
        assert!(!l.move_by(-10_000));
        assert_eq!(l.cursor, 0);
    }
}
