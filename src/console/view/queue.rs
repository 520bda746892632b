//! The queue (home): pending approvals oldest first, with age, expiry countdown, run, step,
//! tool and a one-line escaped summary of the arguments.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::age;
use super::widgets::{self, Col, cell, col, table};
use crate::console::data::QueueRow;
use crate::console::filter;
use crate::console::sort::Sort;
use crate::console::state::{App, QueueScreen};
use crate::console::text;
use crate::console::theme::Role;
use crate::console::time;

/// What a queue row of a call asked again after its grant starts with.
const AGAIN: &str = "again: ";

pub(super) fn draw(f: &mut Frame, area: Rect, app: &App, s: &QueueScreen) {
    let th = &app.theme;
    let [title, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(area);
    let mut t = vec![
        widgets::list_title(app, "Pending approvals", &s.list),
        widgets::dim(app, format!("  {}", s.sort.label())),
    ];
    if !s.filter.is_empty() {
        t.extend(widgets::filter_spans(app, &s.filter));
    }
    f.render_widget(Paragraph::new(Line::from(t)), title);
    // Sorted by a fact: its value leads each row, as a group column (issue 21); the run and
    // step columns make room for it on a terminal under 100 columns.
    let grouped = s.sort.column();
    let narrow = area.width < 76 || (grouped.is_some() && area.width < 100);
    let mut cols = columns(narrow);
    if let Some(title) = grouped {
        let width = if s.sort == Sort::Amount { 10 } else { 14 };
        cols.insert(1, Col { title, width });
    }
    let rows = &s.list.page.rows;
    // A row sorted by the same value as the row above it draws that value dim.
    let repeat = |r: &QueueRow| {
        let i = rows.iter().position(|x| std::ptr::eq(x, r)).unwrap_or(0);
        i > 0 && rows[i - 1].sorted_by == r.sorted_by
    };
    let shift = usize::from(grouped.is_some());
    let now = app.now;
    table(
        f,
        rest,
        app,
        &cols,
        &s.list,
        |r, ws| {
            let exp_style = if time::expired(&r.expires_at, now) {
                th.style(Role::Danger)
            } else {
                th.style(Role::Text)
            };
            let tool_w = ws[if narrow { 2 } else { 4 } + shift];
            let tool = match &r.tool {
                // By tool, the column shows the name the row was sorted by.
                Some(_) if s.sort == Sort::Tool => {
                    age::group(app, r.sorted_by.as_ref(), repeat(r), tool_w)
                }
                Some(t) => cell(app, t, tool_w),
                None => Line::styled(filter::NO_TOOL, th.style(Role::Damaged)),
            };
            // The run's goal and the agent's reason are untrusted too (issue 15 item 1).
            let hostile_text = text::marks(&r.goal).any() || text::marks(&r.agent_reason).any();
            let summary = match &r.args {
                Some(a) => {
                    let mut w = *ws.last().unwrap_or(&8);
                    let mut l = Line::default();
                    if r.paused_again {
                        // Approved before; on resume the policy asked again (issue 15 item 5).
                        l.spans.push(ratatui::text::Span::styled(
                            AGAIN,
                            th.style(Role::StatusWaiting),
                        ));
                        w = w.saturating_sub(AGAIN.len() as u16);
                    }
                    // Warn in the list too: the cut cell may hide what the detail will show.
                    // A repeated key too (found from outside: `amount_cents` 1 then 9999999
                    // read as an ordinary row).
                    if hostile_text || text::marks(a).any() || r.args_repeat_a_key {
                        l.spans
                            .push(ratatui::text::Span::styled("⚠", th.style(Role::Badge)));
                        l.spans.push(ratatui::text::Span::raw(" "));
                        l.spans.extend(cell(app, a, w.saturating_sub(2)).spans);
                    } else {
                        l.spans.extend(cell(app, a, w).spans);
                    }
                    l
                }
                None if hostile_text => Line::from(vec![
                    ratatui::text::Span::styled("⚠", th.style(Role::Badge)),
                    ratatui::text::Span::styled(
                        format!(" {}", filter::NO_ARGS),
                        th.style(Role::Damaged),
                    ),
                ]),
                None => Line::styled(filter::NO_ARGS, th.style(Role::Damaged)),
            };
            // A marked row (issue 21) starts with `*` in the badge style before its age.
            let mut age = age::cell(app, &r.created_at);
            if app.marks.contains(&r.approval_id) {
                age.spans
                    .insert(0, ratatui::text::Span::styled("*", th.style(Role::Badge)));
            }
            let mut v = vec![age];
            if grouped.is_some() {
                v.push(age::group(app, r.sorted_by.as_ref(), repeat(r), ws[1]));
            }
            v.push(if r.expires_unreadable {
                Line::styled("?", th.style(Role::Danger))
            } else {
                Line::styled(time::countdown_short(&r.expires_at, now), exp_style)
            });
            if !narrow {
                v.push(cell(app, r.run_id.as_bytes(), 8));
                v.push(Line::from(
                    r.step_index.map_or_else(|| "?".into(), |i| i.to_string()),
                ));
            }
            v.push(tool);
            v.push(summary);
            v
        },
        if s.filter.is_empty() {
            "no pending approvals"
        } else {
            "no pending approval matches the filter"
        },
    );
}

/// The table's columns (fewer on a narrow terminal).
fn columns(narrow: bool) -> Vec<Col> {
    if narrow {
        vec![
            col("AGE", 5),
            col("EXPIRES", 9),
            col("TOOL", 17),
            col("SUMMARY", 0),
        ]
    } else {
        vec![
            col("AGE", 6),
            col("EXPIRES", 10),
            col("RUN", 8),
            col("STEP", 4),
            col("TOOL", 18),
            col("SUMMARY", 0),
        ]
    }
}
