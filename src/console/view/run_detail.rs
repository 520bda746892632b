//! Run detail: header (status, reason, limits and their use, model calls, tokens, cost, lease)
//! and tabs for steps, events (with chain marks), approvals and model calls.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use serde_json::Value;

use ratatui::style::Style;

use super::widgets::{cell, cell_in, col, fate_cell, position, table};
use crate::console::data::{ApprovalStatus, ChainMark, EventRow, Fate, RunHeader, Tab};
use crate::console::state::{App, RunDetailScreen, short};

/// The header's word on a run this build cannot resume (issue 15 item 6).
const BY_ITS_PROGRAM: &str = "by its own program (this build lacks its tools)";
use crate::console::theme::Role;
use crate::console::time;
use crate::runtime::types::dollars;

fn limit(l: &Value, key: &str) -> i64 {
    l.get(key).and_then(Value::as_i64).unwrap_or(0)
}

fn of(used: i64, max: i64) -> String {
    if max > 0 {
        format!("{used}/{max}")
    } else {
        format!("{used}")
    }
}

fn header_lines(app: &App, h: &RunHeader, w: u16) -> Vec<Line<'static>> {
    let th = &app.theme;
    let limits: Value = serde_json::from_slice(&h.limits_json).unwrap_or(Value::Null);
    let mut l1 = vec![Span::styled("run ", th.style(Role::Dim))];
    l1.extend(cell(app, h.id.as_bytes(), 32).spans);
    l1.push(Span::raw("  "));
    l1.extend(cell_in(app, h.status.as_str().as_bytes(), 40, th.status(&h.status)).spans);
    if !h.reason.is_empty() {
        l1.push(Span::raw("  "));
        l1.extend(cell(app, &h.reason, 24).spans);
    }
    let mut l2 = vec![Span::styled("goal ", th.style(Role::Dim))];
    l2.extend(cell(app, &h.goal, w.saturating_sub(5)).spans);
    let tokens = h.input_tokens.saturating_add(h.output_tokens);
    let dim = th.style(Role::Dim);
    let mut l3 = vec![
        Span::styled("steps ", dim),
        Span::raw(of(h.step_count, limit(&limits, "max_steps"))),
        Span::styled("  calls ", dim),
        Span::raw(of(h.model_calls, limit(&limits, "max_model_calls"))),
        Span::styled("  tokens ", dim),
        Span::raw(of(tokens, limit(&limits, "max_total_tokens"))),
    ];
    if w >= 110 {
        l3.push(Span::styled(
            format!(
                " (in {} out {} cached {})",
                h.input_tokens, h.output_tokens, h.cached_input_tokens
            ),
            dim,
        ));
    }
    l3.push(Span::styled("  cost ", dim));
    l3.push(Span::raw(dollars(h.cost_micros)));
    if w >= 76 {
        l3.push(Span::styled("  active ", dim));
        l3.push(Span::raw(time::span(h.active_ms / 1000)));
    }
    let l3 = Line::from(l3);
    let mut l4 = vec![Span::styled("lease ", th.style(Role::Dim))];
    if h.lease_owner.is_empty() {
        l4.push(Span::raw("none"));
    } else {
        l4.extend(cell(app, &h.lease_owner, 32).spans);
        l4.push(Span::raw(format!(
            " until {} ({})",
            h.lease_expires_at.to_rfc3339(),
            time::countdown(&h.lease_expires_at, app.now)
        )));
    }
    let mut lines = vec![Line::from(l1), Line::from(l2), l3, Line::from(l4)];
    if !h.reason_detail.is_empty() {
        let mut l5 = vec![Span::styled("detail ", th.style(Role::Dim))];
        l5.extend(cell(app, &h.reason_detail, w.saturating_sub(7)).spans);
        lines.push(Line::from(l5));
    }
    if let Some(fate) = &h.fate {
        let mut l = vec![Span::styled("call ", th.style(Role::Dim))];
        l.extend(fate_cell(app, fate, w.saturating_sub(5), false).spans);
        lines.push(Line::from(l));
        // Issue 15 item 5: a run that ended after its approved call was denied says so.
        if h.status.is_terminal() && matches!(fate, Fate::DeniedOnResume { .. }) {
            let said = format!("the run ended {} after this denial", h.status.as_str());
            let mut l = vec![Span::raw("     ")];
            l.extend(
                cell_in(
                    app,
                    said.as_bytes(),
                    w.saturating_sub(5),
                    th.style(Role::Danger),
                )
                .spans,
            );
            lines.push(Line::from(l));
        }
    }
    // Issue 18: an MCP proxy's run is collected by the host's next identical call.
    if let Some(session) = h.proxy_session.as_ref().filter(|_| !h.status.is_terminal()) {
        let mut said = b"by the MCP host's next identical call (proxy session ".to_vec();
        said.extend_from_slice(session);
        said.extend_from_slice(b"); nothing to resume here");
        let mut l = vec![Span::styled("collect ", th.style(Role::Dim))];
        l.extend(cell(app, &said, w.saturating_sub(8)).spans);
        lines.push(Line::from(l));
    } else if !h.status.is_terminal() && !h.resumable {
        // Issue 15 item 6: a run this build cannot resume is resumed by its own program.
        let mut l = vec![Span::styled("resume ", th.style(Role::Dim))];
        l.extend(cell(app, BY_ITS_PROGRAM.as_bytes(), w.saturating_sub(7)).spans);
        lines.push(Line::from(l));
    }
    lines
}

pub(super) fn draw(f: &mut Frame, area: Rect, app: &App, s: &RunDetailScreen) {
    let th = &app.theme;
    let head: Vec<Line> = match &s.header {
        Some(h) => header_lines(app, h, area.width),
        None if s.missing => vec![Line::styled(" no such run", th.style(Role::Error))],
        None => vec![Line::styled(" reading…", th.style(Role::Dim))],
    };
    let [hd, tabs, rest] = Layout::vertical([
        Constraint::Length((head.len() as u16).max(5)),
        Constraint::Length(1),
        Constraint::Min(1),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(head), hd);
    let mut ts = Vec::new();
    for t in Tab::ALL {
        let st = if t == s.tab {
            th.style(Role::Selection)
        } else {
            th.style(Role::Dim)
        };
        ts.push(Span::styled(format!(" {} ", t.title()), st));
        ts.push(Span::raw(" "));
    }
    let pos = match s.tab {
        Tab::Steps => position(&s.steps),
        Tab::Events => position(&s.events),
        Tab::Approvals => position(&s.approvals),
        Tab::ModelCalls => position(&s.calls),
    };
    ts.push(Span::styled(pos, th.style(Role::Dim)));
    f.render_widget(Paragraph::new(Line::from(ts)), tabs);
    match s.tab {
        Tab::Steps => steps_tab(f, rest, app, s),
        Tab::Events => events_tab(f, rest, app, s),
        Tab::Approvals => approvals_tab(f, rest, app, s),
        Tab::ModelCalls => model_calls_tab(f, rest, app, s),
    }
}

fn steps_tab(f: &mut Frame, rest: Rect, app: &App, s: &RunDetailScreen) {
    let th = &app.theme;
    table(
        f,
        rest,
        app,
        &[
            col("#", 3),
            col("STATUS", 17),
            col("TOOL", 14),
            col("POLICY", 16),
            col("OBSERVATION / DAMAGE", 0),
        ],
        &s.steps,
        |r, ws| {
            let last = match (&r.decode_error, &r.summary) {
                (Some(e), _) => Line::styled(format!("DAMAGED {e}"), th.style(Role::Damaged)),
                (None, Some(sm)) => cell(app, sm, ws[4]),
                (None, None) => Line::from(r.observation_kind.clone().unwrap_or_default()),
            };
            vec![
                Line::from(r.idx.to_string()),
                cell_in(app, r.status.as_str().as_bytes(), ws[1], Style::default()),
                r.tool.as_ref().map_or_else(
                    || Line::from(r.decision_kind.clone().unwrap_or_default()),
                    |t| cell(app, t, ws[2]),
                ),
                Line::from(r.policy_outcome.clone().unwrap_or_default()),
                last,
            ]
        },
        "no steps",
    );
}

fn events_tab(f: &mut Frame, rest: Rect, app: &App, s: &RunDetailScreen) {
    let th = &app.theme;
    let now = app.now;
    table(
        f,
        rest,
        app,
        &[
            col("SEQ", seq_width(&s.events.page.rows)),
            col("CHAIN", 6),
            col("AGE", 6),
            col("TYPE", 19),
            col("PAYLOAD", 0),
        ],
        &s.events,
        |r, ws| {
            let chain = match r.chain {
                ChainMark::Ok => Line::styled("ok", th.style(Role::Ok)),
                ChainMark::Broken => Line::styled("BROKEN", th.style(Role::Danger)),
                ChainMark::Unknown => Line::styled("?", th.style(Role::Dim)),
            };
            vec![
                Line::from(r.seq.to_string()),
                chain,
                Line::from(time::age_of_text(&r.at, now)),
                cell(app, &r.kind, ws[3]),
                cell(app, &r.payload, ws[4]),
            ]
        },
        "no events",
    );
}

fn approvals_tab(f: &mut Frame, rest: Rect, app: &App, s: &RunDetailScreen) {
    let th = &app.theme;
    let now = app.now;
    table(
        f,
        rest,
        app,
        &[
            col("STATUS", 9),
            col("AGE", 6),
            col("HASH", 12),
            col("BY", 10),
            col("PRESENTATION", 0),
        ],
        &s.approvals,
        |r, ws| {
            let st = match r.status {
                ApprovalStatus::Pending => th.style(Role::StatusWaiting),
                ApprovalStatus::Approved => th.style(Role::Ok),
                _ => th.style(Role::Dim),
            };
            let last = match &r.decode_error {
                Some(e) => Line::styled(format!("DAMAGED {e}"), th.style(Role::Damaged)),
                None => cell(app, &r.presentation, ws[4]),
            };
            vec![
                cell_in(app, r.status.as_str().as_bytes(), ws[0], st),
                Line::from(time::age(&r.created_at, now)),
                cell(app, short(&r.hash).as_bytes(), 12),
                cell(app, &r.decided_by, ws[3]),
                last,
            ]
        },
        "no approvals",
    );
}

fn model_calls_tab(f: &mut Frame, rest: Rect, app: &App, s: &RunDetailScreen) {
    table(
        f,
        rest,
        app,
        &[
            col("TRY", 3),
            col("STATUS", 10),
            col("MODEL", 18),
            col("IN", 7),
            col("OUT", 6),
            col("COST", 8),
            col("ERROR", 0),
        ],
        &s.calls,
        |r, ws| {
            vec![
                Line::from(r.attempt.to_string()),
                cell_in(app, r.status.as_bytes(), ws[1], Style::default()),
                cell(app, &r.model, ws[2]),
                Line::from(r.input_tokens.to_string()),
                Line::from(r.output_tokens.to_string()),
                Line::from(dollars(r.cost_micros)),
                cell(app, &r.error, ws[6]),
            ]
        },
        "no model calls",
    );
}

/// The SEQ column is as wide as the widest sequence number on the page (at least 5), so a
/// number is never cut (issue 14 item 9).
fn seq_width(events: &[EventRow]) -> u16 {
    events
        .iter()
        .map(|e| e.seq.to_string().len())
        .max()
        .unwrap_or(0)
        .clamp(5, 20) as u16
}

#[cfg(test)]
mod seq_width_tests {
    use super::*;
    use crate::console::data::{ChainMark, EventRow, Key};

    #[test]
    fn the_seq_column_fits_the_widest_number() {
        let row = |seq| EventRow {
            seq,
            step_id: Key::default(),
            at: String::new(),
            kind: Vec::new(),
            payload: Vec::new(),
            chain: ChainMark::Ok,
        };
        assert_eq!(seq_width(&[]), 5);
        assert_eq!(seq_width(&[row(7), row(99_999)]), 5);
        assert_eq!(seq_width(&[row(1), row(1_000_015)]), 7);
        assert_eq!(seq_width(&[row(i64::MIN)]), 20);
        assert_eq!(seq_width(&[row(i64::MAX)]), 19);
    }
}
