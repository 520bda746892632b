//! The runs' status picker: "all" and each status, with its count where the header's counts
//! know it (all runs, waiting, failed; running and interrupted are counted together there, so
//! neither is given alone, nor are completed and cancelled).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::widgets::{block, centred_box};
use crate::console::data::{Counts, RunStatus};
use crate::console::state::{App, RUN_STATUSES, StatusPicker};
use crate::console::theme::Role;

/// The count shown beside a row, when known.
fn count(c: Option<&Counts>, s: Option<&RunStatus>) -> Option<u64> {
    let c = c?;
    match s {
        None => Some(c.runs),
        Some(RunStatus::WaitingForApproval) => Some(c.waiting),
        Some(RunStatus::Failed) => Some(c.failed),
        Some(_) => None,
    }
}

pub(super) fn draw(f: &mut Frame, body: Rect, app: &App, p: &StatusPicker) {
    let th = &app.theme;
    let rows: Vec<Option<&RunStatus>> = std::iter::once(None)
        .chain(RUN_STATUSES.iter().map(Some))
        .collect();
    let w = 36u16.min(body.width);
    // Whole rows, as the confirmation does: no untrusted text sits beside the choices (a
    // goal drawn next to the box could pass for one of its rows).
    let area = centred_box(f, body, w, rows.len() as u16 + 4);
    let mut lines = Vec::new();
    for (i, s) in rows.iter().enumerate() {
        let name = s.map_or("all runs", RunStatus::as_str);
        let n = count(app.counts.as_ref(), *s).map_or(String::new(), |n| n.to_string());
        let inner = usize::from(w.saturating_sub(4));
        let pad = inner.saturating_sub(name.chars().count() + n.chars().count());
        let text = format!(" {name}{}{n} ", " ".repeat(pad));
        let style = if i == p.cursor {
            th.style(Role::Selection)
        } else {
            s.map_or(th.style(Role::Text), |s| th.status(s))
        };
        lines.push(Line::from(Span::styled(text, style)));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(vec![
        Span::styled("enter", th.style(Role::KeyHint)),
        Span::styled(" choose  ", th.style(Role::Dim)),
        Span::styled("esc", th.style(Role::KeyHint)),
        Span::styled(" keep", th.style(Role::Dim)),
    ]));
    let blk = block(app, Span::styled(" run status ", th.style(Role::Title)));
    f.render_widget(Paragraph::new(lines).block(blk), area);
}
