//! The bulk overlays (issue 21): the confirmation of a reject, deny or cancel of the marked
//! rows, the result that names every row decided or skipped (or, for a dry run, would be),
//! and the approve table. Every id, tool, fact and reason is drawn through `text`, whole
//! (wrapped), never cut.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::widgets::{block, centred_box, clear};
use crate::console::bulk::{Item, Verb};
use crate::console::keymap::Action;
use crate::console::layout;
use crate::console::state::{App, ApproveTable, BulkConfirm, BulkResult};
use crate::console::text;
use crate::console::theme::Role;

/// `label` then untrusted bytes wrapped whole at `w`, later lines indented under the first.
fn labelled(app: &App, label: &str, raw: &[u8], w: usize, style: Style) -> Vec<Line<'static>> {
    text::labelled(label, raw, w, &app.theme.text_styles(), style)
}

/// The console's own words wrapped at `w` in `role`'s style.
fn prose(app: &App, words: &str, w: usize, role: Role) -> Vec<Line<'static>> {
    let st = crate::console::text::TextStyles {
        text: app.theme.style(role),
        ..app.theme.text_styles()
    };
    text::block(words.as_bytes(), w, &st, false).0
}

/// One marked row: its number and approval id, its run, tool and facts, and why it is (or
/// would be) skipped.
fn item_lines(app: &App, n: usize, i: &Item, w: usize, skip: Option<&[u8]>) -> Vec<Line<'static>> {
    let th = &app.theme;
    let dim = th.style(Role::Dim);
    let title = th.style(Role::Title);
    let mut out;
    if i.marked.approval.as_bytes().is_empty() {
        // A run marked on the runs list: its id, then its status and goal (the facts).
        out = labelled(
            app,
            &format!("{n:>3} run "),
            i.marked.run.as_bytes(),
            w,
            title,
        );
    } else {
        out = labelled(
            app,
            &format!("{n:>3} approval "),
            i.marked.approval.as_bytes(),
            w,
            title,
        );
        out.extend(labelled(
            app,
            "       run ",
            i.marked.run.as_bytes(),
            w,
            dim,
        ));
        let tool = i.marked.tool.clone().unwrap_or_default();
        out.extend(labelled(app, "      tool ", &tool, w, dim));
    }
    for (k, v) in &i.facts {
        out.extend(labelled(app, &format!("{k:>10} "), v, w, dim));
    }
    if let Some(why) = skip {
        out.extend(labelled(app, "   ✗ skip: ", why, w, th.style(Role::Danger)));
    }
    out
}

/// A centred box over the body, whole rows cleared (no untrusted text beside it).
fn area(f: &mut Frame, body: Rect, h: usize) -> Rect {
    let w = body.width.saturating_sub(2).min(78);
    centred_box(f, body, w, h as u16)
}

/// Fits `fixed` lines above and `tail` below a scrolled list of `rows` into `room` lines.
fn fit(
    mut head: Vec<Line<'static>>,
    rows: &[Line<'static>],
    scroll: usize,
    tail: Vec<Line<'static>>,
    room: usize,
    dim: Style,
) -> Vec<Line<'static>> {
    let space = room.saturating_sub(head.len() + tail.len() + 1).max(1);
    let scroll = scroll.min(rows.len().saturating_sub(space));
    let shown: Vec<Line<'static>> = rows.iter().skip(scroll).take(space).cloned().collect();
    let below = rows.len().saturating_sub(scroll + shown.len());
    head.extend(shown);
    head.push(if below > 0 || scroll > 0 {
        Line::styled(
            format!("  ↑↓ scroll: {scroll} line(s) above, {below} below"),
            dim,
        )
    } else {
        Line::from("")
    });
    head.extend(tail);
    head
}

pub(super) fn draw_confirm(f: &mut Frame, body: Rect, app: &App, c: &BulkConfirm) {
    let th = &app.theme;
    let inner = usize::from(body.width.saturating_sub(2).min(78).saturating_sub(2));
    let n = c.items.len();
    let skipped = c.items.iter().filter(|i| i.skip.is_some()).count();
    let what = format!("{} {n} marked row(s): {}", c.verb.name(), c.verb.effect());
    let mut head = prose(app, &what, inner, Role::Text);
    let how = if c.verb == Verb::CancelRuns {
        "each is cancelled only while it has not ended; a run that ended meanwhile is skipped and named"
    } else {
        "each is decided with the hash it was marked with; a row changed or decided meanwhile is skipped and named"
    };
    head.extend(prose(app, how, inner, Role::Dim));
    let mut rows = Vec::new();
    for (k, i) in c.items.iter().enumerate() {
        rows.extend(item_lines(app, k + 1, i, inner, i.skip.as_deref()));
    }
    let mut tail = Vec::new();
    if skipped > 0 {
        tail.push(Line::from(vec![
            Span::styled(" ⚠ ", th.style(Role::Badge)),
            Span::styled(
                format!(" {skipped} of {n} will be skipped (marked ✗ above)"),
                th.style(Role::Error),
            ),
        ]));
    }
    let label = if c.verb == Verb::Deny {
        "  note for the agents "
    } else {
        "    reason "
    };
    tail.push(Line::from(vec![
        Span::styled(label, th.style(Role::Dim)),
        Span::raw(text::escaped(c.reason.text.as_bytes())),
        Span::styled("▏", th.style(Role::KeyHint)),
    ]));
    tail.push(Line::from(vec![
        Span::styled("enter", th.style(Role::KeyHint)),
        Span::raw(format!(" {} {}  ", c.verb.third_person(), n - skipped)),
        Span::styled(app.keymap.key(Action::DryRun), th.style(Role::KeyHint)),
        Span::raw(" dry run  "),
        Span::styled("esc", th.style(Role::KeyHint)),
        Span::raw(" back, nothing changes"),
    ]));
    let room = usize::from(body.height).saturating_sub(2);
    let lines = fit(head, &rows, c.scroll, tail, room, th.style(Role::Dim));
    let a = area(f, body, lines.len() + 2);
    let title = format!(" {} {n} MARKED ", c.verb.name().to_uppercase());
    let blk = block(app, Span::styled(title, th.style(Role::Danger)));
    f.render_widget(Paragraph::new(lines).block(blk), a);
}

pub(super) fn draw_result(f: &mut Frame, body: Rect, app: &App, r: &BulkResult) {
    let th = &app.theme;
    let inner = usize::from(body.width.saturating_sub(2).min(78).saturating_sub(2));
    let (done, skipped) = (r.done.len(), r.skipped.len());
    let said = if r.dry {
        format!(
            "dry run, nothing changed: would {} {done}, would skip {skipped}",
            r.verb.name()
        )
    } else {
        format!("{} {done}, skipped {skipped}", r.verb.done())
    };
    let mut head = prose(
        app,
        &said,
        inner,
        if skipped > 0 { Role::Error } else { Role::Ok },
    );
    head.push(Line::from(""));
    let mut rows = Vec::new();
    let word = if r.dry { "would be " } else { "" };
    for (k, i) in r.done.iter().enumerate() {
        rows.push(Line::styled(
            format!("  ✓ {word}{}", r.verb.done()),
            th.style(Role::Ok),
        ));
        rows.extend(item_lines(app, k + 1, i, inner, None));
    }
    for (k, (i, why)) in r.skipped.iter().enumerate() {
        rows.push(Line::styled(
            format!("  ✗ {word}skipped"),
            th.style(Role::Danger),
        ));
        rows.extend(item_lines(app, done + k + 1, i, inner, Some(why)));
    }
    let back = if r.back.is_some() {
        " back to the confirmation"
    } else {
        " close"
    };
    let tail = vec![Line::from(vec![
        Span::styled("enter/esc", th.style(Role::KeyHint)),
        Span::raw(back),
    ])];
    let room = usize::from(body.height).saturating_sub(2);
    let lines = fit(head, &rows, r.scroll, tail, room, th.style(Role::Dim));
    let a = area(f, body, lines.len() + 2);
    let title = if r.dry { " DRY RUN " } else { " BULK RESULT " };
    let blk = block(app, Span::styled(title, th.style(Role::Title)));
    f.render_widget(Paragraph::new(lines).block(blk), a);
}

pub(super) fn draw_table(f: &mut Frame, body: Rect, app: &App, t: &ApproveTable) {
    let th = &app.theme;
    let shown = layout::table_rows(app.size);
    let approvable = t
        .rows
        .iter()
        .filter(|r| r.item.skip.is_none() && !r.cut)
        .count();
    let below = t.lines.len().saturating_sub(t.scroll + shown);
    let mut lines = vec![
        Line::styled(
            format!(
                "what each will run; enter approves the {approvable} ✓ row(s), each by its hash"
            ),
            th.style(Role::Text),
        ),
        Line::styled(
            if below > 0 {
                format!("{below} line(s) below: read them first (j, pgdn) · esc: nothing approved")
            } else {
                "every line read · esc leaves: nothing approved".to_string()
            },
            th.style(if below > 0 { Role::Error } else { Role::Dim }),
        ),
    ];
    lines.extend(t.lines.iter().skip(t.scroll).take(shown).cloned());
    let a = clear(f, body);
    let title = format!(" APPROVE {} MARKED ", t.rows.len());
    let blk = block(app, Span::styled(title, th.style(Role::Danger)));
    f.render_widget(Paragraph::new(lines).block(blk), a);
}
