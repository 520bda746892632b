//! The approve table (issue 21): several marked approvals approved only through a table of
//! exactly what each will run (approval id, tool, hash prefix, the consumer's facts, every
//! argument whole or the row visibly cut and not approved from here), read to its last line
//! before `enter` approves each with the hash the table read; `esc` approves nothing.

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::style::Style;
use ratatui::text::Line;

use super::bulk::{scrolled, start};
use crate::console::bulk::{Item, Verb, arguments, item};
use crate::console::data::{ApprovalRow, Choice, Key, Write};
use crate::console::layout;
use crate::console::msg::Effect;
use crate::console::state::{App, ApproveTable, Level, Overlay, TableRow, short};
use crate::console::text;
use crate::console::theme::Role;

/// Keys of the approve table.
pub(super) fn on_key(app: &mut App, mut t: Box<ApproveTable>, k: KeyEvent) -> Vec<Effect> {
    let action = app.keymap.action(&k);
    match k.code {
        KeyCode::Esc => {
            app.notice = Some((Level::Info, "left the table: nothing was approved".into()));
            vec![]
        }
        KeyCode::Enter => approve(app, t),
        _ => {
            t.scroll = scrolled(t.scroll, action, app).min(t.lines.len().saturating_sub(1));
            app.overlay = Some(Overlay::ApproveTable(t));
            vec![]
        }
    }
}

/// Lines of arguments the approve table shows of one row; a row with more is not approved
/// from the table (nothing cut is approved unseen).
pub const TABLE_ARG_LINES: usize = 12;

/// Opens the approve table over the marked rows as read now.
pub(super) fn open_table<'a>(app: &mut App, now_of: &impl Fn(&Key) -> Option<&'a ApprovalRow>) {
    let rows = app
        .marks
        .rows
        .iter()
        .map(|m| {
            let a = now_of(&m.approval);
            TableRow {
                item: item(m, a, Verb::Approve, app.now),
                hash: a.map(|a| a.hash.clone()).unwrap_or_default(),
                args: a.map(arguments).unwrap_or_default(),
                cut: false,
            }
        })
        .collect();
    app.notice = None;
    app.overlay = Some(Overlay::ApproveTable(Box::new(ApproveTable {
        rows,
        lines: Vec::new(),
        scroll: 0,
    })));
    app.relayout();
}

/// Enter on the approve table: refused until every line was on the screen; then one approve
/// per row the table shows whole, each with the hash the table read.
fn approve(app: &mut App, t: Box<ApproveTable>) -> Vec<Effect> {
    let shown = layout::table_rows(app.size);
    let below = t.lines.len().saturating_sub(t.scroll + shown);
    if below > 0 {
        app.notice = Some((
            Level::Error,
            format!("read the whole table first: {below} more line(s) below (j, pgdn)").into(),
        ));
        app.overlay = Some(Overlay::ApproveTable(t));
        return vec![];
    }
    let by = app.cfg.by.clone();
    let rows: Vec<(Item, Option<Write>)> = t
        .rows
        .iter()
        .map(|r| {
            let w = (r.item.skip.is_none() && !r.cut).then(|| Write::Decide {
                choice: Choice::Approve,
                run: r.item.marked.run.clone(),
                approval: r.item.marked.approval.clone(),
                shown_hash: r.hash.clone(),
                by: by.clone(),
                note: String::new(),
            });
            let mut item = r.item.clone();
            if r.cut && item.skip.is_none() {
                item.skip = Some(CUT.to_vec());
            }
            (item, w)
        })
        .collect();
    start(app, Verb::Approve, rows)
}

/// Why a row whose arguments the table cut is not approved from it.
pub(super) const CUT: &[u8] =
    b"its arguments are longer than the table shows: open it to read it whole and approve it";

/// Lays the approve table out at the terminal's width: for each row its approval id, tool,
/// hash prefix and the consumer's facts, its arguments whole (at most [`TABLE_ARG_LINES`]
/// lines; a row with more is cut visibly and not approved from here), and whether it will be
/// approved. Called from `App::relayout`.
pub(super) fn layout_table(app: &mut App) {
    let w = layout::table_width(app.size);
    let th = &app.theme;
    let st = th.text_styles();
    let sty = Styles {
        text: st,
        label: th.style(Role::Dim),
        title: th.style(Role::Title),
        danger: th.style(Role::Danger),
        ok: th.style(Role::Ok),
        cut: th.style(Role::Truncated),
    };
    let Some(Overlay::ApproveTable(t)) = &mut app.overlay else {
        return;
    };
    let n = t.rows.len();
    let mut lines = Vec::new();
    for (i, r) in t.rows.iter_mut().enumerate() {
        lines.extend(row_lines(
            r,
            &format!("{:>3}/{n} approval ", i + 1),
            w,
            &sty,
        ));
    }
    t.scroll = t.scroll.min(lines.len().saturating_sub(1));
    t.lines = lines;
}

/// One row of the table; marks the row cut when its arguments take more than
/// [`TABLE_ARG_LINES`] lines.
fn row_lines(r: &mut TableRow, head: &str, w: usize, sty: &Styles) -> Vec<Line<'static>> {
    let field =
        |label: &str, raw: &[u8], style: Style| text::labelled(label, raw, w, &sty.text, style);
    let mut lines = field(head, r.item.marked.approval.as_bytes(), sty.title);
    let tool = r.item.marked.tool.clone().unwrap_or_default();
    lines.extend(field("      tool ", &tool, sty.label));
    lines.extend(field("      hash ", short(&r.hash).as_bytes(), sty.label));
    for (k, v) in &r.item.facts {
        lines.extend(field(&format!("{k:>10} "), v, sty.label));
    }
    let mut args = Vec::new();
    for (label, value) in &r.args {
        args.extend(field(
            "      ",
            &[&label[..], b": ", value].concat(),
            sty.label,
        ));
    }
    // Warn as the approval detail does: the escapes are visible, the badge says why.
    let mut kinds: Vec<&str> = r
        .args
        .iter()
        .flat_map(|(l, v)| [text::marks(l), text::marks(v)])
        .flat_map(|m| m.labels())
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    if !kinds.is_empty() {
        lines.push(Line::styled(
            format!("      ⚠ its arguments hold {} text", kinds.join(", ")),
            sty.danger,
        ));
    }
    r.cut = args.len() > TABLE_ARG_LINES;
    if r.cut {
        let more = args.len() - TABLE_ARG_LINES;
        args.truncate(TABLE_ARG_LINES);
        args.push(Line::styled(
            format!("      …[+{more} more line(s) of arguments not shown here]…"),
            sty.cut,
        ));
    }
    lines.extend(args);
    match r.item.skip.clone().or_else(|| r.cut.then(|| CUT.to_vec())) {
        Some(why) => lines.extend(field("      ✗ not approved: ", &why, sty.danger)),
        None => lines.push(Line::styled(
            "      ✓ approved with this hash when you press enter",
            sty.ok,
        )),
    }
    lines.push(Line::from(""));
    lines
}

struct Styles {
    text: text::TextStyles,
    label: Style,
    title: Style,
    danger: Style,
    ok: Style,
    cut: Style,
}
