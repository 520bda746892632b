//! Runs, newest first: id (a typable prefix), status, reason, steps, age, goal; markers for waiting and damaged;
//! filter by status (f) and by text (/), both in SQL.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::widgets::{self, Col, cell, col, run_status_cell, table};
use crate::console::state::{App, RunsScreen};
use crate::console::theme::Role;
use crate::console::time;

pub(super) fn draw(f: &mut Frame, area: Rect, app: &App, s: &RunsScreen) {
    let th = &app.theme;
    let [title, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(area);
    let mut t = vec![
        widgets::list_title(app, "Runs", &s.list),
        widgets::dim(app, "  newest first"),
    ];
    if let Some(st) = &s.status {
        t.push(widgets::dim(app, "  status "));
        t.push(widgets::styled(st.as_str(), th.status(st)));
    }
    if !s.filter.is_empty() {
        t.extend(widgets::filter_spans(app, &s.filter));
    }
    f.render_widget(Paragraph::new(Line::from(t)), title);
    let narrow = area.width < 76;
    let now = app.now;
    table(
        f,
        rest,
        app,
        &columns(narrow),
        &s.list,
        |r, ws| {
            let mut marks = Vec::new();
            // A run marked for a bulk cancel (issue 21).
            if app.marks.runs.iter().any(|m| m.run == r.id) {
                marks.push(Span::styled("*", th.style(Role::Badge)));
            }
            if r.pending > 0 {
                marks.push(Span::styled("⏸", th.style(Role::StatusWaiting)));
            }
            if r.damaged {
                marks.push(Span::styled("!", th.style(Role::Damaged)));
            }
            let mut v = vec![
                Line::from(marks),
                id_prefix(app, r.id.as_bytes()),
                run_status_cell(app, &r.status, ws[2]),
            ];
            if !narrow {
                // The fate of its latest approved call where it has one (issue 15 item 5),
                // else the run's reason.
                v.push(match &r.fate {
                    Some(fate) => widgets::fate_cell(app, fate, ws[3], true),
                    None => cell(app, &r.reason, ws[3]),
                });
                v.push(Line::from(r.step_count.to_string()));
            }
            v.push(Line::from(time::age(&r.created_at, now)));
            v.push(cell(app, &r.goal, *ws.last().unwrap_or(&8)));
            v
        },
        if s.filter.is_empty() {
            "no runs"
        } else {
            "no run matches the filter"
        },
    );
}

/// How many bytes of a run's id the ID column shows: enough to type as a unique prefix
/// (`:run PREFIX`, every command taking a run).
const ID_SHOWN: usize = 8;

/// The first [`ID_SHOWN`] bytes of an id through the sanitiser, and a dim `…` when there is
/// more (the cut is visible; what is shown is a prefix, never head-and-tail).
fn id_prefix(app: &App, id: &[u8]) -> Line<'static> {
    let n = id.len().min(ID_SHOWN);
    let mut l = cell(app, &id[..n], ID_SHOWN as u16);
    if id.len() > n {
        l.spans.push(widgets::dim(app, "…"));
    }
    l
}

/// The table's columns (fewer on a narrow terminal).
fn columns(narrow: bool) -> Vec<Col> {
    if narrow {
        vec![
            col("", 2),
            col("ID", ID_SHOWN as u16 + 1),
            col("STATUS", 9),
            col("AGE", 5),
            col("GOAL", 0),
        ]
    } else {
        vec![
            col("", 2),
            col("ID", ID_SHOWN as u16 + 1),
            col("STATUS", 9),
            col("REASON / CALL", 20),
            col("STEPS", 5),
            col("AGE", 6),
            col("GOAL", 0),
        ]
    }
}
