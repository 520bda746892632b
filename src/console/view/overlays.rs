//! The confirmation overlay (filter and command line draw in the notice line, see mod.rs).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::widgets::{block, cell, clear};
use crate::console::data::Choice;
use crate::console::state::{App, Confirm, Pending, Screen};
use crate::console::text;
use crate::console::theme::Role;

pub(super) fn draw_confirm(f: &mut Frame, body: Rect, app: &App, c: &Confirm) {
    let th = &app.theme;
    let w = body.width.saturating_sub(4).min(76);
    let h = (c.lines.len() + c.warnings.len() + 6 + usize::from(c.reason.is_some()) * 2) as u16;
    let area = Rect {
        x: body.x + (body.width - w) / 2,
        y: body.y + body.height.saturating_sub(h) / 2,
        width: w,
        height: h.min(body.height),
    };
    // Clear whole rows: no untrusted text may sit beside the decision box.
    clear(
        f,
        Rect {
            x: body.x,
            width: body.width,
            ..area
        },
    );
    let (title, what) = match &c.what {
        Pending::Decide {
            choice: Choice::Approve,
            ..
        } => (
            " APPROVE ",
            "approve this request: the tool will run when the run resumes",
        ),
        Pending::Decide {
            choice: Choice::Reject,
            ..
        } => (
            " REJECT ",
            "reject this request: the run ends as CANCELLED (approval_rejected)",
        ),
        Pending::Decide {
            choice: Choice::Deny,
            ..
        } => (
            " DENY WITH FEEDBACK ",
            "deny this call: it does not run; the agent is told your note and goes on",
        ),
        Pending::Cancel { .. } => (" CANCEL RUN ", "cancel this run"),
        Pending::Resume { .. } => (" RESUME RUN ", "resume this run in the background"),
    };
    let inner = w.saturating_sub(2);
    let mut lines = vec![Line::styled(what, th.style(Role::Text)), Line::from("")];
    for (k, v) in &c.lines {
        let mut l = vec![Span::styled(format!("{k:>10} "), th.style(Role::Dim))];
        l.extend(cell(app, v, inner.saturating_sub(11)).spans);
        lines.push(Line::from(l));
    }
    for wn in &c.warnings {
        lines.push(Line::from(vec![
            Span::styled(" ⚠ ", th.style(Role::Badge)),
            Span::styled(format!(" {wn}"), th.style(Role::Error)),
        ]));
    }
    if let Some(r) = &c.reason {
        lines.push(Line::from(""));
        let label = if c.what.is_deny() {
            "  note for the agent "
        } else {
            "    reason "
        };
        let mut l = vec![Span::styled(label, th.style(Role::Dim))];
        l.push(Span::raw(text::escaped(r.text.as_bytes())));
        l.push(Span::styled("▏", th.style(Role::KeyHint)));
        lines.push(Line::from(l));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(vec![
        Span::styled("enter", th.style(Role::KeyHint)),
        Span::raw(" confirms   "),
        Span::styled("esc", th.style(Role::KeyHint)),
        Span::raw(" goes back, nothing changes"),
    ]));
    let blk = block(app, Span::styled(title, th.style(Role::Danger)));
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(blk),
        area,
    );
}

/// What the filter line says while the filter is typed: how many rows match (once read).
pub(super) fn matches(app: &App) -> String {
    let list = match app.top() {
        Screen::Queue(s) => (s.list.loaded, s.list.page.total),
        Screen::Runs(s) => (s.list.loaded, s.list.page.total),
        Screen::Damaged(s) => (s.list.loaded, s.list.page.total),
        _ => (false, 0),
    };
    let n = match list {
        (false, _) => "reading…".to_string(),
        (true, 1) => "1 row".to_string(),
        (true, n) => format!("{n} rows"),
    };
    format!("{n} · enter keeps · esc puts back")
}
