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
    let [title, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(area);
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
}
