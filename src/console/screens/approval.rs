//! Approval detail: tool, kind, who asked, when, expiry, short hash, then every field of the
//! arguments and the presentation in full, scrollable, with badges; folded fields expand.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::console::app::{App, ApprovalScreen, short};
use crate::console::theme::Role;
use crate::console::time;

pub fn draw(f: &mut Frame, area: Rect, app: &App, s: &ApprovalScreen) {
    let th = &app.theme;
    let insp_h = if s.inspect {
        (area.height / 3).clamp(4, 10)
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
    let escapes: usize = s.view.iter().map(|v| v.badges.escapes).sum();
    let folded = s.view.iter().filter(|v| v.folded).count();
    let mut t = vec![
        Span::styled(" Approval ", th.style(Role::Title)),
        Span::styled(short(&a.hash).to_string(), th.style(Role::Text)),
        Span::raw(" "),
        Span::styled(
            a.status.clone(),
            if a.status == "pending" {
                th.style(Role::StatusWaiting)
            } else {
                th.style(Role::Dim)
            },
        ),
    ];
    if a.status == "pending" {
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
        draw_inspector(f, insp, app, &field.value);
    }
}

/// One cell per code point of the value (invalid bytes as bytes): `U+202E Cf \u{202e}`,
/// packed into the panel; everything shown goes through the escaper.
fn draw_inspector(f: &mut Frame, area: Rect, app: &App, value: &[u8]) {
    use unicode_general_category::get_general_category;
    let th = &app.theme;
    let mut cells: Vec<(String, Vec<u8>)> = Vec::new();
    let mut rest = value;
    let max = 2000;
    while !rest.is_empty() && cells.len() < max {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, 0),
            Err(e) => (
                std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or(""),
                e.error_len().unwrap_or(rest.len() - e.valid_up_to()),
            ),
        };
        for c in valid.chars().take(max - cells.len()) {
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
    let inner = area.width.saturating_sub(2);
    let cell_w: u16 = 22;
    let per_line = usize::from((inner / cell_w).max(1));
    let mut lines = Vec::new();
    for chunk in cells
        .chunks(per_line)
        .take(usize::from(area.height.saturating_sub(2)))
    {
        let mut spans = Vec::new();
        for (label, raw) in chunk {
            spans.push(Span::styled(label.clone(), th.style(Role::Dim)));
            let shown = crate::console::text::line(raw, 10, &th.text_styles());
            let pad = cell_w as usize - label.len().min(cell_w as usize);
            spans.extend(shown.line.spans);
            spans.push(Span::raw(" ".repeat(pad.saturating_sub(shown.width))));
        }
        lines.push(Line::from(spans));
    }
    let more = if cells.len() >= max || lines.len() * per_line < cells.len() {
        format!(
            " code points ({} shown of the first {}) ",
            (lines.len() * per_line).min(cells.len()),
            cells.len()
        )
    } else {
        format!(" code points ({}) ", cells.len())
    };
    f.render_widget(
        Paragraph::new(lines).block(crate::console::render::block(app, more)),
        area,
    );
}
