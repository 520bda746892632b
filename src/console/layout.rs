//! Size arithmetic both `update` (how far a page moves, where the inspector stops) and the
//! view (where things are drawn) use, so the two never disagree. Pure functions of the
//! terminal size; nothing here draws.
//!
//! The frame is: header (1 row), body, notice (1), key hints (1). A list screen's body is a
//! title row, a table header row and the rows; the run detail's body is its 5-row header, the
//! tab row, a table header and the rows; the approval detail's is a title row, the fields and,
//! when open, the code-point inspector.

use ratatui::layout::Rect;

/// Rows of the frame outside the body: header, notice, key hints.
pub const FRAME_ROWS: u16 = 3;
/// Rows of the run detail above its table header: the run's header lines and the tab row.
pub const RUN_HEADER_ROWS: u16 = 5;
/// Most code points the inspector walks (it says so when a value has more).
pub const INSPECT_MAX: usize = 2000;
/// Width of one inspector cell.
pub const CELL_W: u16 = 22;

/// The body's height on a terminal of `size`.
pub fn body_rows(size: (u16, u16)) -> u16 {
    size.1.saturating_sub(FRAME_ROWS)
}

/// Rows a list screen shows (the body minus its title and table header rows).
pub fn list_rows(size: (u16, u16)) -> u16 {
    size.1.saturating_sub(FRAME_ROWS + 2).max(1)
}

/// The terminal row of a list screen's first row: under the frame's header, the list's
/// title and its table header.
pub const LIST_FIRST_ROW: u16 = 3;

/// The damaged rows' raw panel height for a body of `body` rows.
pub fn damaged_raw_rows(body: u16) -> u16 {
    (body / 3).clamp(3, 10)
}

/// Rows the damaged list shows (its body minus title, raw panel and table header).
pub fn damaged_rows(size: (u16, u16)) -> u16 {
    let body = body_rows(size);
    body.saturating_sub(2 + damaged_raw_rows(body)).max(1)
}

/// Rows a run detail tab shows.
pub fn tab_rows(size: (u16, u16)) -> u16 {
    list_rows(size).saturating_sub(RUN_HEADER_ROWS).max(1)
}

/// Lines of fields the approval detail shows at once (the body minus its title row).
pub fn approval_rows(size: (u16, u16)) -> usize {
    usize::from(size.1.saturating_sub(FRAME_ROWS + 1).max(1))
}

/// Lines of the approve table (issue 21) shown at once: the body minus its border and the
/// table's two heading lines.
pub fn table_rows(size: (u16, u16)) -> usize {
    usize::from(body_rows(size).saturating_sub(4)).max(1)
}

/// Width the approve table lays its lines out at (inside its border).
pub fn table_width(size: (u16, u16)) -> usize {
    usize::from(size.0.saturating_sub(2)).max(20)
}

/// Width the approval detail lays its fields out at.
pub fn detail_width(size: (u16, u16)) -> u16 {
    size.0.saturating_sub(2)
}

/// The inspector panel's height for a screen body `h` rows high.
pub fn inspector_height(h: u16) -> u16 {
    (h / 3).clamp(4, 10)
}

/// Rows and cells per row of an inspector panel `area` holds.
pub fn inspector_grid(area: Rect) -> (usize, usize) {
    let rows = usize::from(area.height.saturating_sub(2)).max(1);
    let per_line = usize::from((area.width.saturating_sub(2) / CELL_W).max(1));
    (rows, per_line)
}

/// The inspector's cells of a value: one per code point (invalid bytes one per byte), its
/// label and its bytes, the first [`INSPECT_MAX`] code points.
pub fn inspector_cells(value: &[u8]) -> Vec<(String, Vec<u8>)> {
    use unicode_general_category::get_general_category;
    let mut cells: Vec<(String, Vec<u8>)> = Vec::new();
    let mut rest = value;
    while !rest.is_empty() && cells.len() < INSPECT_MAX {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, 0),
            Err(e) => (
                std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or(""),
                e.error_len().unwrap_or(rest.len() - e.valid_up_to()),
            ),
        };
        for c in valid.chars().take(INSPECT_MAX - cells.len()) {
            let cat = format!("{:?}", get_general_category(c));
            let short: String = cat.chars().filter(|c| c.is_ascii_uppercase()).collect();
            cells.push((
                format!("U+{:04X} {short:<2} ", c as u32),
                c.to_string().into_bytes(),
            ));
        }
        let used = valid.len();
        for b in &rest[used..used + bad] {
            cells.push((format!("byte {b:02X} "), vec![*b]));
        }
        rest = &rest[used + bad..];
    }
    cells
}

/// How many pages the inspector shows `value` in, on a terminal of `size` (the panel the view
/// draws in the body), so `]` stops at the last page.
pub fn inspector_pages(size: (u16, u16), value: &[u8]) -> usize {
    let panel = Rect::new(0, 0, size.0, inspector_height(body_rows(size)));
    let (rows, per_line) = inspector_grid(panel);
    inspector_cells(value)
        .len()
        .div_ceil(rows * per_line)
        .max(1)
}
