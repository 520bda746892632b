//! Approval detail, the decision page: a title row (short hash, status, the hostile mark, the
//! expiry countdown), then the page's fields (`console::page`: title, facts, what the policy
//! said and says now, related work, the goal and the agent's reason) and every raw field in
//! full, scrollable, with badges; folded fields expand.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::widgets::{block, cell_in};
use crate::console::data::{ApprovalRow, ApprovalStatus};
use crate::console::layout::{self, CELL_W, INSPECT_MAX, inspector_cells, inspector_grid};
use crate::console::state::{App, ApprovalScreen, short};
use crate::console::text;
use crate::console::theme::Role;
use crate::console::time;

pub(super) fn draw(f: &mut Frame, area: Rect, app: &App, s: &ApprovalScreen) {
    let th = &app.theme;
    let insp_h = if s.inspect {
        layout::inspector_height(area.height)
    } else {
        0
    };
    let [title, body, insp] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(insp_h),
    ])
    .areas(area);
    let Some(a) = &s.row else {
        let msg = if s.missing {
            " no such approval"
        } else {
            " reading…"
        };
        f.render_widget(Paragraph::new(Line::styled(msg, th.style(Role::Dim))), area);
        return;
    };
    let t = title_spans(app, s, a);
    f.render_widget(Paragraph::new(Line::from(t)), title);
    // Only the visible lines are cloned: an expanded 1 MiB field stays cheap to draw.
    let sel = th.style(Role::Selection);
    let rows = usize::from(body.height);
    let mut visible: Vec<Line> = Vec::with_capacity(rows);
    let mut n = 0usize;
    'fields: for (i, v) in s.view.iter().enumerate() {
        if n + v.lines.len() <= s.scroll {
            n += v.lines.len();
            continue;
        }
        for (j, l) in v.lines.iter().enumerate() {
            if n >= s.scroll {
                let mut l = l.clone();
                let mark = if i == s.cursor && j == 0 {
                    Span::styled("▶", sel)
                } else {
                    Span::raw(" ")
                };
                l.spans.insert(0, mark);
                visible.push(l);
                if visible.len() >= rows {
                    break 'fields;
                }
            }
            n += 1;
        }
    }
    f.render_widget(Paragraph::new(visible), body);
    if s.inspect
        && let Some(field) = s.fields.get(s.cursor)
    {
        draw_inspector(f, insp, app, &field.value, field.is_string, s.inspect_page);
    }
}

/// The title line: short hash, status, expiry, escapes, folds, strict, changed.
fn title_spans(app: &App, s: &ApprovalScreen, a: &ApprovalRow) -> Vec<Span<'static>> {
    let th = &app.theme;
    let escapes: usize = s.view.iter().map(|v| v.marks.escapes).sum();
    let folded = s.view.iter().filter(|v| v.folded).count();
    let pending = a.status == ApprovalStatus::Pending;
    let status_style = if pending {
        th.style(Role::StatusWaiting)
    } else {
        th.style(Role::Dim)
    };
    let mut t = vec![Span::styled(" Approval ", th.style(Role::Title))];
    // The stored hash is the database's text: through the sanitiser, never raw.
    t.extend(cell_in(app, short(&a.hash).as_bytes(), 48, th.style(Role::Text)).spans);
    t.push(Span::raw(" "));
    t.extend(cell_in(app, a.status.as_str().as_bytes(), 24, status_style).spans);
    // First, so a narrow terminal cuts other marks before it (found from outside: a tampered
    // approval was offered for a decision that approve then refused): its stored hash does not
    // recompute from what is stored, so approve and reject refuse it; cancel is what is left.
    if pending && a.hash_refused {
        t.push(Span::styled(
            " HASH MISMATCH: cancel run",
            th.style(Role::Danger),
        ));
    }
    if !s.hostile.is_empty() {
        // Before the countdown: on a narrow terminal the end of this row is cut first.
        t.push(Span::raw(" "));
        t.push(Span::styled(
            format!("⚠ HOSTILE {}", s.hostile.join("+")),
            th.style(Role::Badge),
        ));
    }
    let unreadable = a
        .decode_error
        .as_deref()
        .is_some_and(|d| time::names_column(d, "expires_at"));
    if pending && unreadable {
        t.push(Span::styled(
            " expires ? (the stored expiry does not read as a time)",
            th.style(Role::Danger),
        ));
    } else if pending {
        let (txt, st) = if time::expired(&a.expires_at, app.now) {
            (
                format!(" {}", time::countdown(&a.expires_at, app.now)),
                th.style(Role::Danger),
            )
        } else {
            (
                format!(" expires {}", time::countdown(&a.expires_at, app.now)),
                th.style(Role::Dim),
            )
        };
        t.push(Span::styled(txt, st));
    }
    if escapes > 0 {
        t.push(Span::styled(
            format!(" {escapes} escapes"),
            th.style(Role::Escaped),
        ));
    }
    if folded > 0 {
        t.push(Span::styled(
            format!(" {folded} folded"),
            th.style(Role::Truncated),
        ));
    }
    if s.strict {
        t.push(Span::styled(" STRICT", th.style(Role::Badge)));
    }
    if s.changed {
        t.push(Span::styled(" CHANGED", th.style(Role::Danger)));
    }
    t
}

/// The code points of the value, packed into the panel a page at a time (`page`, clamped to
/// the last); everything shown goes through the escaper, and the title says which code points
/// are shown of how many: `U+202E Cf \u{202e}`.
/// `is_string`: the value is a JSON string, which the title says (the cells are its content,
/// without the quotes), so `"8000"` is told from `8000` here too.
fn draw_inspector(
    f: &mut Frame,
    area: Rect,
    app: &App,
    value: &[u8],
    is_string: bool,
    page: usize,
) {
    let th = &app.theme;
    let cells = inspector_cells(value);
    let max = INSPECT_MAX;
    let cell_w = CELL_W;
    let (rows, per_line) = inspector_grid(area);
    let per_page = rows * per_line;
    let pages = cells.len().div_ceil(per_page).max(1);
    let page = page.min(pages - 1);
    let first = page * per_page;
    let mut lines = Vec::new();
    for chunk in cells[first.min(cells.len())..].chunks(per_line).take(rows) {
        let mut spans = Vec::new();
        for (label, raw) in chunk {
            spans.push(Span::styled(label.clone(), th.style(Role::Dim)));
            let shown = text::line(raw, 10, &th.text_styles());
            let pad = cell_w as usize - label.len().min(cell_w as usize);
            spans.extend(shown.line.spans);
            spans.push(Span::raw(" ".repeat(pad.saturating_sub(shown.width))));
        }
        lines.push(Line::from(spans));
    }
    let last = (first + per_page).min(cells.len());
    let capped = if cells.len() >= max {
        format!(" of the first {max}")
    } else {
        format!(" of {}", cells.len())
    };
    let kind = if is_string {
        " a string:"
    } else {
        " not a string:"
    };
    let more = if pages > 1 || cells.len() >= max {
        format!(
            "{kind} code points {}–{last}{capped}, page {}/{pages} ",
            first + 1,
            page + 1
        )
    } else {
        format!("{kind} code points ({}) ", cells.len())
    };
    f.render_widget(Paragraph::new(lines).block(block(app, more)), area);
}
