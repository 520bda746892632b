//! The queue (home): pending approvals oldest first, with age, expiry countdown, run, step,
//! tool and a one-line escaped summary of the arguments.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::widgets::{self, Col, cell, position, table};
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
        widgets::styled(
            format!(" Pending approvals {}", position(&s.list)),
            th.style(Role::Title),
        ),
        widgets::dim(app, "  oldest first"),
    ];
    if !s.filter.is_empty() {
        t.push(widgets::dim(app, "  filter /"));
        t.push(widgets::styled(
            text::escaped(s.filter.as_bytes()),
            th.style(Role::FilterMatch),
        ));
    }
    f.render_widget(Paragraph::new(Line::from(t)), title);
    let narrow = area.width < 76;
    let cols = columns(narrow);
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
            let tool = match &r.tool {
                Some(t) => cell(app, t, ws[if narrow { 2 } else { 4 }]),
                None => Line::styled("(damaged)", th.style(Role::Damaged)),
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
                    if hostile_text || text::marks(a).any() {
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
                        " unread: request does not decode",
                        th.style(Role::Damaged),
                    ),
                ]),
                None => Line::styled("unread: request does not decode", th.style(Role::Damaged)),
            };
            // A marked row (issue 21) starts with `*` in the badge style before its age.
            let age = time::age(&r.created_at, now);
            let age = if app.marks.contains(&r.approval_id) {
                Line::from(vec![
                    ratatui::text::Span::styled("*", th.style(Role::Badge)),
                    ratatui::text::Span::raw(age),
                ])
            } else {
                Line::from(age)
            };
            let mut v = vec![
                age,
                Line::styled(time::countdown_short(&r.expires_at, now), exp_style),
            ];
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
            Col {
                title: "AGE",
                width: 5,
            },
            Col {
                title: "EXPIRES",
                width: 9,
            },
            Col {
                title: "TOOL",
                width: 17,
            },
            Col {
                title: "SUMMARY",
                width: 0,
            },
        ]
    } else {
        vec![
            Col {
                title: "AGE",
                width: 6,
            },
            Col {
                title: "EXPIRES",
                width: 10,
            },
            Col {
                title: "RUN",
                width: 8,
            },
            Col {
                title: "STEP",
                width: 4,
            },
            Col {
                title: "TOOL",
                width: 18,
            },
            Col {
                title: "SUMMARY",
                width: 0,
            },
        ]
    }
}
