//! The message log (`:messages`): every notice of this session whole, newest first, each
//! wrapped to the screen's width through the sanitiser (notices may quote database text).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::console::state::{App, Level};
use crate::console::text;
use crate::console::theme::Role;
use crate::console::time;

pub(super) fn lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let th = &app.theme;
    let mut v = vec![Line::from(vec![
        Span::styled(
            format!(" Messages {}", app.messages.len()),
            th.style(Role::Title),
        ),
        Span::styled("  every notice in full, newest first", th.style(Role::Dim)),
    ])];
    if app.messages.is_empty() {
        v.push(Line::styled("  no messages yet", th.style(Role::Dim)));
    }
    for m in app.messages.iter().rev() {
        let (label, role) = match m.level {
            Level::Info => ("info ", Role::Dim),
            Level::Ok => ("ok   ", Role::Ok),
            Level::Error => ("error", Role::Error),
        };
        let age = time::span(app.now.saturating_sub(m.at).max(0));
        v.push(Line::from(vec![
            Span::styled(format!(" {label}"), th.style(role)),
            Span::styled(format!(" {age} ago"), th.style(Role::Dim)),
        ]));
        let st = text::TextStyles {
            text: th.style(match m.level {
                Level::Error => Role::Error,
                Level::Ok => Role::Ok,
                Level::Info => Role::Text,
            }),
            ..th.text_styles()
        };
        let (body, _) = text::block(&m.text, usize::from(width.saturating_sub(4)), &st, false);
        for l in body {
            let mut spans = vec![Span::raw("   ")];
            spans.extend(l.spans);
            v.push(Line::from(spans));
        }
    }
    if app.messages_dropped > 0 {
        v.push(Line::styled(
            format!("  ({} older messages were dropped)", app.messages_dropped),
            th.style(Role::Dim),
        ));
    }
    v
}

pub(super) fn draw(f: &mut Frame, area: Rect, app: &App, scroll: usize) {
    let l: Vec<Line> = lines(app, area.width).into_iter().skip(scroll).collect();
    f.render_widget(Paragraph::new(l), area);
}
