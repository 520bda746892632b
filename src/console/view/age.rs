//! Ages drawn in their band (issue 21): fresh, warning or stale by the `[queue]` thresholds,
//! in the queue's AGE column and the header's oldest pending age.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::console::data::{SortValue, Timestamp};
use crate::console::settings::Band;
use crate::console::state::App;
use crate::console::text;
use crate::console::theme::Role;
use crate::console::time;

/// The style of an age's band; `?` (a time not set) and a time after this clock (`in 3h`, no
/// age at all) are drawn as text.
pub(super) fn style(app: &App, at: &Timestamp) -> Style {
    let th = &app.theme;
    let age = time::age_secs(at, app.now).filter(|a| *a >= 0);
    match age.map(|a| app.settings.age.band(a)) {
        Some(Band::Fresh) => th.style(Role::AgeFresh),
        Some(Band::Warning) => th.style(Role::AgeWarning),
        Some(Band::Stale) => th.style(Role::AgeStale),
        None => th.style(Role::Text),
    }
}

/// The queue's AGE cell: the age in its band.
pub(super) fn cell(app: &App, at: &Timestamp) -> Line<'static> {
    Line::styled(time::age(at, app.now), style(app, at))
}

/// The header's `· oldest 3h09m` (after the counts came back, and only with pending work).
pub(super) fn oldest(app: &App) -> Vec<Span<'static>> {
    let bar = app.theme.style(Role::StatusBar);
    match app.counts.as_ref().and_then(|c| c.oldest.as_ref()) {
        Some(at) if app.counts.as_ref().is_some_and(|c| c.pending > 0) => vec![
            Span::styled(" · oldest ", bar),
            Span::styled(time::age(at, app.now), style(app, at)),
        ],
        _ => vec![],
    }
}

/// The group column's cell: the value the row was sorted by (untrusted: through the
/// sanitiser), dimmed when the row above has the same one, or what stands for none.
pub(super) fn group(app: &App, v: Option<&SortValue>, repeat: bool, w: u16) -> Line<'static> {
    let th = &app.theme;
    let mut line = match v {
        Some(SortValue::Bytes(b)) => text::line(b, usize::from(w), &th.text_styles()).line,
        Some(SortValue::Int(n)) => Line::from(n.to_string()),
        Some(SortValue::Twice) => Line::styled("(twice)", th.style(Role::Damaged)),
        Some(SortValue::Missing) | None => Line::styled("(none)", th.style(Role::Dim)),
    };
    if repeat {
        for s in &mut line.spans {
            if s.style == Style::default() || s.style == th.style(Role::Text) {
                s.style = th.style(Role::Dim);
            }
        }
    }
    line
}
