//! Help, generated from the keymap (so rebound keys show as bound): the keys of the screen
//! help was opened from first, then the ones that work everywhere, then the other screens'.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::console::keymap::Action;
use crate::console::state::{App, Screen};
use crate::console::theme::Role;

/// The actions that mean the same on every screen.
const GLOBAL: &[Action] = &[
    Action::Up,
    Action::Down,
    Action::Top,
    Action::Bottom,
    Action::PageDown,
    Action::PageUp,
    Action::HalfDown,
    Action::HalfUp,
    Action::Back,
    Action::Quit,
    Action::CommandLine,
    Action::Help,
    Action::Queue,
    Action::Runs,
    Action::Damaged,
    Action::Stats,
    Action::Refresh,
];

/// The actions a screen has of its own, in the order help lists them.
fn own(s: &Screen) -> &'static [Action] {
    use Action::*;
    match s {
        Screen::Queue(_) => &[
            Open, Filter, NextMatch, PrevMatch, Sort, Mark, MarkAll, ClearMarks, Copy,
        ],
        Screen::Runs(_) => &[Open, Filter, NextMatch, PrevMatch, StatusFilter, Copy],
        Screen::Damaged(_) => &[Open, Filter, NextMatch, PrevMatch, Copy, CancelRun],
        Screen::RunDetail(_) => &[Open, NextTab, PrevTab, Copy, CancelRun, ResumeRun],
        Screen::Approval(_) => &[
            Approve, Reject, Deny, Expand, Strict, Inspect, NextTab, PrevTab, Copy, ResumeRun,
        ],
        Screen::Stats(_) => &[],
        Screen::Help { .. } | Screen::Messages { .. } => &[],
    }
}

fn key_line(app: &App, a: Action) -> Line<'static> {
    let th = &app.theme;
    let keys: Vec<String> = app.keymap.keys(a).iter().map(|k| k.to_string()).collect();
    let keys = if keys.is_empty() {
        "(unbound)".to_string()
    } else {
        keys.join(" ")
    };
    Line::from(vec![
        Span::styled(format!(" {keys:<22}"), th.style(Role::KeyHint)),
        Span::raw(a.help().to_string()),
        Span::styled(format!("  [{}]", a.name()), th.style(Role::Dim)),
    ])
}

fn fixed_line(app: &App, key: &str, what: &str) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!(" {key:<22}"), app.theme.style(Role::KeyHint)),
        Span::raw(what.to_string()),
    ])
}

pub(super) fn lines(app: &App) -> Vec<Line<'static>> {
    let th = &app.theme;
    // The screen help was opened from: the one under it on the stack.
    let under = app
        .stack
        .iter()
        .rev()
        .find(|s| !matches!(s, Screen::Help { .. }));
    let here = under.map_or(&[][..], own);
    let mut v = Vec::new();
    if let Some(s) = under.filter(|_| !here.is_empty()) {
        v.push(Line::styled(
            format!(" Keys on this screen ({})", s.title()),
            th.style(Role::Title),
        ));
        v.extend(here.iter().map(|a| key_line(app, *a)));
        v.push(Line::from(""));
    }
    v.push(Line::styled(" Keys everywhere", th.style(Role::Title)));
    v.push(fixed_line(app, "ctrl-c", "quit, always"));
    v.push(fixed_line(app, "ctrl-z", "suspend"));
    v.extend(GLOBAL.iter().map(|a| key_line(app, *a)));
    let rest: Vec<Action> = Action::ALL
        .iter()
        .copied()
        .filter(|a| !GLOBAL.contains(a) && !here.contains(a))
        .collect();
    if !rest.is_empty() {
        v.push(Line::from(""));
        v.push(Line::styled(
            " Keys on other screens",
            th.style(Role::Title),
        ));
        v.extend(rest.iter().map(|a| key_line(app, *a)));
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
