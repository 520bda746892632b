//! Help, generated from the keymap (so rebound keys show as bound).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::console::keymap::Action;
use crate::console::state::App;
use crate::console::theme::Role;

pub(super) fn lines(app: &App) -> Vec<Line<'static>> {
    let th = &app.theme;
    let mut v = vec![
        Line::styled(" Keys", th.style(Role::Title)),
        Line::from(vec![
            Span::styled(format!(" {:<22}", "ctrl-c"), th.style(Role::KeyHint)),
            Span::raw("quit, always"),
        ]),
        Line::from(vec![
            Span::styled(format!(" {:<22}", "ctrl-z"), th.style(Role::KeyHint)),
            Span::raw("suspend"),
        ]),
    ];
    for a in Action::ALL {
        let keys: Vec<String> = app.keymap.keys(*a).iter().map(|k| k.to_string()).collect();
        let keys = if keys.is_empty() {
            "(unbound)".to_string()
        } else {
            keys.join(" ")
        };
        v.push(Line::from(vec![
            Span::styled(format!(" {keys:<22}"), th.style(Role::KeyHint)),
            Span::raw(a.help().to_string()),
            Span::styled(format!("  [{}]", a.name()), th.style(Role::Dim)),
        ]));
    }
    v.push(Line::from(""));
    v.push(Line::styled(" Escapes", th.style(Role::Title)));
    v.push(Line::from(
        "  Text from the database is never shown raw: controls, bidi and invisible",
    ));
    v.push(Line::from(
        "  characters appear as \\x1b, \\u{202e}... in the escape style; a backslash in",
    ));
    v.push(Line::from(
        "  the data shows as \\\\. Cut values say how many bytes were cut.",
    ));
    v
}

pub(super) fn draw(f: &mut Frame, area: Rect, app: &App, scroll: usize) {
    let l: Vec<Line> = lines(app).into_iter().skip(scroll).collect();
    f.render_widget(Paragraph::new(l), area);
}
