//! Damaged rows: which rows of which runs do not decode, the decode error, and the raw value
//! escaped byte by byte.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

use super::widgets::{self, block, cell, col, table};
use crate::console::data::DamagedRow;
use crate::console::state::{App, DamagedScreen};
use crate::console::text;
use crate::console::theme::Role;

pub(super) fn draw(f: &mut Frame, area: Rect, app: &App, s: &DamagedScreen) {
    let th = &app.theme;
    let raw_h = crate::console::layout::damaged_raw_rows(area.height);
    let [title, list, raw] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(2),
        Constraint::Length(raw_h),
    ])
    .areas(area);
    let mut t = vec![widgets::list_title(app, "Damaged rows", &s.list)];
    if s.filter.is_empty() {
        t.push(widgets::dim(
            app,
            "  rows that do not decode; their runs can still be cancelled",
        ));
    } else {
        t.extend(widgets::filter_spans(app, &s.filter));
    }
    f.render_widget(Paragraph::new(Line::from(t)), title);
    table(
        f,
        list,
        app,
        &[col("RUN", 8), col("ROW", 22), col("ERROR", 0)],
        &s.list,
        |r, ws| {
            vec![
                cell(app, r.damage.run_id.as_bytes(), 8),
                row_cell(app, r, ws[1]).style(th.style(Role::Damaged)),
                cell(app, r.damage.error.as_bytes(), ws[2]),
            ]
        },
        if s.filter.is_empty() {
            "no damaged rows"
        } else {
            "no damaged row matches the filter"
        },
    );
    let (t, body) = match s.list.selected() {
        Some(r) => (
            format!(
                " raw {}.{} ({} bytes{}) ",
                r.damage.table,
                r.damage.column,
                r.damage.raw_len,
                if r.damage.raw_len as usize > r.damage.raw.len() {
                    ", first 4096 shown"
                } else {
                    ""
                }
            ),
            Line::styled(text::bytes_escaped(&r.damage.raw), th.style(Role::Text)),
        ),
        None => (" raw ".into(), Line::from("")),
    };
    f.render_widget(
        Paragraph::new(body)
            .wrap(Wrap { trim: false })
            .block(block(app, t)),
        raw,
    );
}

/// `table.column id`: the row's id through the sanitiser (an id that is not UTF-8 shows
/// `\xNN`); a plain id shows its first 6 characters as before, any other is cut head-and-tail
/// with a marker in the rest of the column.
fn row_cell(app: &App, r: &DamagedRow, w: u16) -> Line<'static> {
    let head = format!("{}.{} ", r.damage.table, r.damage.column);
    let id = r.damage.row_id.as_bytes();
    let escaped = text::escaped(id);
    let id_line = if escaped.as_bytes() == id {
        Line::from(escaped.chars().take(6).collect::<String>())
    } else {
        let rest = usize::from(w).saturating_sub(head.chars().count()).max(8);
        cell(app, id, u16::try_from(rest).unwrap_or(u16::MAX))
    };
    let mut spans = vec![ratatui::text::Span::raw(head)];
    spans.extend(id_line.spans);
    Line::from(spans)
}
