//! The stats screen (issue 21): what `countersign stats` computes, read on the counting lane.
//! Per tool: calls, what the policy did, what the reviewers did, median and 90th percentile
//! time to decision, oldest pending; per reviewer, the decisions made; the estimate of p (the
//! share of reviewed calls refused) with its sample size and 95% interval, and the article's
//! L* = c / (q·p) for the configured c and q, with the caveat that it is a model.
//! Tool and reviewer names are stored text: drawn through the sanitiser, cut visibly.

use std::time::Duration;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::widgets::pad;
use crate::console::state::{App, StatsScreen};
use crate::console::text;
use crate::console::theme::Role;
use crate::console::time;
use crate::runtime::stats::{CAVEAT, Stats, ToolStats, threshold};

/// One table column: its title and width; the first column of each table is a name.
type Cols = &'static [(&'static str, u16)];

const TOOLS_NARROW: Cols = &[
    ("TOOL", 18),
    ("CALLS", 5),
    ("ALLOW", 5),
    ("DENY", 5),
    ("INVAL", 5),
    ("HELD", 5),
    ("APPR", 5),
    ("REJ", 5),
    ("MEDIAN", 6),
    ("P90", 6),
];
const TOOLS_WIDE: Cols = &[
    ("TOOL", 24),
    ("CALLS", 6),
    ("ALLOWED", 7),
    ("DENIED", 6),
    ("INVALID", 7),
    ("HELD", 6),
    ("APPROVED", 8),
    ("REJECTED", 8),
    ("EXPIRED", 7),
    ("PENDING", 7),
    ("MEDIAN", 6),
    ("P90", 6),
    ("OLDEST", 6),
];
const REVIEWERS: Cols = &[("REVIEWER", 24), ("APPROVED", 8), ("REJECTED", 8)];
const THRESHOLDS: Cols = &[
    ("TOOL", 18),
    ("REVIEWED", 8),
    ("REFUSED", 7),
    ("p", 5),
    ("p 95%", 11),
    ("L*", 8),
    ("L* for p 95%", 15),
];

pub(super) fn draw(f: &mut Frame, area: Rect, app: &App, s: &StatsScreen) {
    let lines: Vec<Line> = lines(app, s, area.width).into_iter().collect();
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((u16::try_from(s.scroll).unwrap_or(u16::MAX), 0)),
        area,
    );
}

fn lines(app: &App, s: &StatsScreen, width: u16) -> Vec<Line<'static>> {
    let th = &app.theme;
    let mut v = vec![Line::from(vec![
        Span::styled(" The queue's numbers", th.style(Role::Title)),
        Span::styled(
            "  read when opened; refresh reads again",
            th.style(Role::Dim),
        ),
    ])];
    let Some(st) = &s.stats else {
        let msg = match &s.error {
            Some(e) => text::line(e.as_bytes(), usize::MAX, &th.text_styles())
                .line
                .style(th.style(Role::Error)),
            None => Line::styled(
                " reading… (a scan of every step and approval)",
                th.style(Role::Dim),
            ),
        };
        v.push(msg);
        return v;
    };
    let oldest = time::oldest_ago(st.pending(), st.oldest_pending(), app.now);
    v.push(Line::from(format!(
        " all steps and approvals · oldest pending: {oldest}"
    )));
    v.push(Line::from(""));
    v.extend(tools(app, st, width));
    v.extend(reviewers(app, st));
    v.extend(model(app, st));
    v
}

/// A table's header and rows: the first cell of a row is drawn, the rest are numbers.
fn table(app: &App, cols: Cols, rows: Vec<(Line<'static>, Vec<String>)>) -> Vec<Line<'static>> {
    let th = &app.theme;
    let mut head = vec![Span::raw(" ")];
    for (i, (t, w)) in cols.iter().enumerate() {
        // Names on the left, numbers (and their titles) on the right.
        let t = if i == 0 {
            t.to_string()
        } else {
            format!("{t:>w$}", w = usize::from(*w))
        };
        head.extend(pad(Line::styled(t, th.style(Role::Header)), *w));
        head.push(Span::raw(" "));
    }
    let mut out = vec![Line::from(head)];
    for (name, cells) in rows {
        let mut l = vec![Span::raw(" ")];
        l.extend(pad(name, cols[0].1));
        for (c, (_, w)) in cells.iter().zip(&cols[1..]) {
            l.push(Span::raw(" "));
            l.push(Span::raw(format!("{c:>w$}", w = usize::from(*w))));
        }
        out.push(Line::from(l));
    }
    out
}

/// A stored name in `w` columns, through the sanitiser (`…[cut]` when the store cut it).
fn name(app: &App, bytes: Option<&[u8]>, cut: bool, w: u16) -> Line<'static> {
    let th = &app.theme;
    let Some(b) = bytes else {
        return Line::styled("(no readable tool)", th.style(Role::Dim));
    };
    let room = usize::from(w).saturating_sub(if cut { 6 } else { 0 });
    let mut l = text::line(b, room, &th.text_styles()).line;
    if cut {
        l.spans
            .push(Span::styled("…[cut]", th.style(Role::Truncated)));
    }
    l
}

fn span(d: Option<Duration>) -> String {
    d.map_or("-".into(), |d| {
        time::span(i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
    })
}

fn tools(app: &App, st: &Stats, width: u16) -> Vec<Line<'static>> {
    if st.tools.is_empty() {
        return vec![Line::from(" no tool calls"), Line::from("")];
    }
    let wide = width >= 120;
    let cols = if wide { TOOLS_WIDE } else { TOOLS_NARROW };
    let rows = st
        .tools
        .iter()
        .map(|t| {
            let mut c = vec![
                t.calls,
                t.allowed,
                t.denied_total(),
                t.invalid,
                t.needs_approval,
                t.approved,
                t.rejected,
            ]
            .into_iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>();
            if wide {
                c.push(t.expired.to_string());
                c.push(t.pending.to_string());
            }
            c.push(span(t.median()));
            c.push(span(t.p90()));
            if wide {
                c.push(time::oldest(t.pending, t.oldest_pending, app.now));
            }
            (name(app, t.tool.as_deref(), t.tool_cut, cols[0].1), c)
        })
        .collect();
    let mut v = table(app, cols, rows);
    v.push(Line::from(""));
    v
}

fn reviewers(app: &App, st: &Stats) -> Vec<Line<'static>> {
    if st.reviewers.is_empty() {
        return vec![
            Line::from(" no decisions by a reviewer yet"),
            Line::from(""),
        ];
    }
    let rows = st
        .reviewers
        .iter()
        .map(|r| {
            let n = if r.by.is_empty() { &b"-"[..] } else { &r.by };
            (
                name(app, Some(n), r.by_cut, REVIEWERS[0].1),
                vec![r.approved.to_string(), r.rejected.to_string()],
            )
        })
        .collect();
    let mut v = table(app, REVIEWERS, rows);
    v.push(Line::from(""));
    v
}

fn money(x: Option<f64>) -> String {
    x.map_or("∞".into(), |v| format!("{v:.2}"))
}

/// The threshold row of one reviewed tool: n, refused, p, its interval, L* and its range.
fn threshold_cells(t: &ToolStats, c: f64, q: f64) -> Vec<String> {
    match t.wrong_share() {
        Some(sh) => vec![
            sh.n.to_string(),
            sh.k.to_string(),
            format!("{:.3}", sh.estimate),
            format!("{:.3}-{:.3}", sh.low, sh.high),
            money(threshold(c, q, sh.estimate)),
            format!(
                "{}-{}",
                money(threshold(c, q, sh.high)),
                money(threshold(c, q, sh.low))
            ),
        ],
        None => vec![
            "0".into(),
            "0".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ],
    }
}

fn model(app: &App, st: &Stats) -> Vec<Line<'static>> {
    let th = &app.theme;
    let (c, q) = (app.settings.review_cost, app.settings.catch);
    let mut v = vec![Line::from(vec![
        Span::styled(" L* = c / (q·p)", th.style(Role::Title)),
        Span::raw(format!(
            "  c = {c} and q = {q} (assumed: [stats] in config.toml); p = refused / reviewed"
        )),
    ])];
    let rows: Vec<(Line<'static>, Vec<String>)> = st
        .tools
        .iter()
        .filter(|t| t.reviewed() > 0)
        .map(|t| {
            (
                name(app, t.tool.as_deref(), t.tool_cut, THRESHOLDS[0].1),
                threshold_cells(t, c, q),
            )
        })
        .collect();
    if rows.is_empty() {
        v.push(Line::from(" no reviewed calls yet: p cannot be estimated"));
    } else {
        v.extend(table(app, THRESHOLDS, rows));
    }
    v.push(Line::styled(format!(" {CAVEAT}"), th.style(Role::Dim)));
    if st.damaged_steps > 0 || st.unreadable_times > 0 {
        v.push(Line::styled(
            format!(
                " not counted: {} damaged step(s), {} approval time(s) not set or that do not parse",
                st.damaged_steps, st.unreadable_times
            ),
            th.style(Role::Damaged),
        ));
    }
    v
}
