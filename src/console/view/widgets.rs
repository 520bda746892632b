//! The widgets the screens share: themed blocks, cells of untrusted bytes, and tables of a
//! list's visible rows.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use crate::console::data::{Fate, RunStatus};
use crate::console::nav::ListView;
use crate::console::state::App;
use crate::console::text;
use crate::console::theme::Role;
use crate::console::time;

/// A column: title and width (0 = takes the rest).
pub struct Col {
    pub title: &'static str,
    pub width: u16,
}

/// A column of `width` cells under `title` (0 = takes the rest).
pub const fn col(title: &'static str, width: u16) -> Col {
    Col { title, width }
}

/// Resolves widths: fixed columns first, the flexible one gets the rest (at least 8).
pub fn widths(cols: &[Col], total: u16) -> Vec<u16> {
    let gaps = cols.len().saturating_sub(1) as u16;
    let fixed: u16 = cols.iter().map(|c| c.width).sum::<u16>() + gaps;
    cols.iter()
        .map(|c| {
            if c.width == 0 {
                total.saturating_sub(fixed).max(8)
            } else {
                c.width
            }
        })
        .collect()
}

/// Pads a line to exactly `w` columns (the line is already at most `w` wide).
pub fn pad(mut l: Line<'static>, w: u16) -> Vec<Span<'static>> {
    let w = usize::from(w);
    if l.width() > w {
        l = cut(l, w);
    }
    let have = l.width();
    if have < w {
        l.spans.push(Span::raw(" ".repeat(w - have)));
    }
    // A line's own style (Line::styled) is folded into its spans, which are all we keep.
    let base = l.style;
    l.spans
        .into_iter()
        .map(|s| Span::styled(s.content, base.patch(s.style)))
        .collect()
}

/// Cuts a line of already-safe spans to `w` columns (by grapheme), ending in `…`.
fn cut(l: Line<'static>, w: usize) -> Line<'static> {
    use unicode_segmentation::UnicodeSegmentation;
    let base = l.style;
    let mut out = Vec::new();
    let mut used = 0;
    let budget = w.saturating_sub(1);
    'outer: for sp in l.spans {
        let mut t = String::new();
        for g in sp.content.graphemes(true) {
            let gw = unicode_width::UnicodeWidthStr::width(g);
            if used + gw > budget {
                if !t.is_empty() {
                    out.push(Span::styled(t, sp.style));
                }
                break 'outer;
            }
            used += gw;
            t.push_str(g);
        }
        out.push(Span::styled(t, sp.style));
    }
    if w > 0 {
        out.push(Span::raw("…"));
    }
    Line::from(out).style(base)
}

/// Draws a header row and the visible rows of a list; `row` renders one row's cells.
pub fn table<T>(
    f: &mut Frame,
    area: Rect,
    app: &App,
    cols: &[Col],
    list: &ListView<T>,
    row: impl Fn(&T, &[u16]) -> Vec<Line<'static>>,
    empty: &str,
) {
    let th = &app.theme;
    let ws = widths(cols, area.width);
    let mut lines = Vec::new();
    let mut head = Vec::new();
    for (c, w) in cols.iter().zip(&ws) {
        head.extend(pad(
            Line::styled(
                c.title.chars().take(usize::from(*w)).collect::<String>(),
                th.style(Role::Header),
            ),
            *w,
        ));
        head.push(Span::raw(" "));
    }
    lines.push(Line::from(head));
    let rows = area.height.saturating_sub(1);
    if list.page.total == 0 {
        let msg = if list.loaded { empty } else { "reading…" };
        lines.push(Line::styled(format!(" {msg}"), th.style(Role::Dim)));
    }
    let sel = th.style(Role::Selection);
    let top = list.drawn_top(rows);
    for i in 0..u64::from(rows) {
        let n = top + i;
        if n >= list.page.total {
            break;
        }
        let Some(r) = n
            .checked_sub(list.page.offset)
            .and_then(|k| list.page.rows.get(k as usize))
        else {
            lines.push(Line::styled(" …", th.style(Role::Dim)));
            continue;
        };
        let cells = row(r, &ws);
        let mut spans = Vec::new();
        for (c, w) in cells.into_iter().zip(&ws) {
            spans.extend(pad(c, *w));
            spans.push(Span::raw(" "));
        }
        let mut l = Line::from(spans);
        if n == list.cursor {
            l = selected(l, sel);
            let w = l.width();
            if w < usize::from(area.width) {
                l.spans
                    .push(Span::styled(" ".repeat(usize::from(area.width) - w), sel));
            }
        }
        lines.push(l);
    }
    f.render_widget(Paragraph::new(lines), area);
}

/// The selected row: the selection under every cell. A cell with a background of its own (an
/// escape, a danger mark, a badge) keeps it; a cell whose text colour is the selection's
/// background, or has none, takes the selection's text colour, so no cell is drawn in the
/// colour it sits on (high-contrast drew EXPIRES, RUN and TOOL white on white).
fn selected(mut l: Line<'static>, sel: Style) -> Line<'static> {
    for sp in &mut l.spans {
        if sp.style.bg.is_none() && (sp.style.fg.is_none() || sp.style.fg == sel.bg) {
            sp.style.fg = sel.fg;
        }
    }
    l.patch_style(sel)
}

/// Position text for a list: `12/340`, or `12/106+` while the count is still coming.
pub fn position<T>(l: &ListView<T>) -> String {
    let more = if l.page.exact { "" } else { "+" };
    if l.page.total == 0 {
        format!("0/0{more}")
    } else {
        format!("{}/{}{more}", l.cursor + 1, l.page.total)
    }
}

/// A list screen's title: its name and the cursor's place in the list.
pub fn list_title<T>(app: &App, name: &str, l: &ListView<T>) -> Span<'static> {
    styled(
        format!(" {name} {}", position(l)),
        app.theme.style(Role::Title),
    )
}

pub fn dim(app: &App, s: impl Into<String>) -> Span<'static> {
    Span::styled(s.into(), app.theme.style(Role::Dim))
}

pub fn styled(s: impl Into<String>, st: Style) -> Span<'static> {
    Span::styled(s.into(), st)
}

/// A list title's filter words, escaped (the filter is typed, and may be pasted).
pub fn filter_spans(app: &App, filter: &str) -> [Span<'static>; 2] {
    [
        dim(app, "  filter /"),
        styled(
            text::escaped(filter.as_bytes()),
            app.theme.style(Role::FilterMatch),
        ),
    ]
}

/// A bordered block with a title, themed.
pub fn block<'a>(app: &App, title: impl Into<Line<'a>>) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(app.theme.style(Role::Border))
        .title(title.into().style(app.theme.style(Role::Title)))
}

/// Clears an area and returns it (for overlays).
pub fn clear(f: &mut Frame, r: Rect) -> Rect {
    f.render_widget(Clear, r);
    r
}

/// A box of `w` by `h` cells (each at most the body's) centred on `body`, with the body's
/// whole rows under it cleared: no untrusted text is left beside the box, where it could pass
/// for one of its rows.
pub fn centred_box(f: &mut Frame, body: Rect, w: u16, h: u16) -> Rect {
    let (w, h) = (w.min(body.width), h.min(body.height));
    let a = Rect {
        x: body.x + (body.width - w) / 2,
        y: body.y + body.height.saturating_sub(h) / 2,
        width: w,
        height: h,
    };
    clear(
        f,
        Rect {
            x: body.x,
            width: body.width,
            ..a
        },
    );
    a
}

/// A one-line cell of untrusted bytes at `w` columns.
pub fn cell(app: &App, raw: &[u8], w: u16) -> Line<'static> {
    text::line(raw, usize::from(w), &app.theme.text_styles()).line
}

/// A cell of untrusted bytes at `w` columns whose plain text is drawn in `st` (a status in its
/// colour); escapes and cut markers keep their own styles.
pub fn cell_in(app: &App, raw: &[u8], w: u16, st: Style) -> Line<'static> {
    let styles = text::TextStyles {
        text: st,
        ..app.theme.text_styles()
    };
    text::line(raw, usize::from(w), &styles).line
}

/// A run status as a narrow table shows it, through the sanitiser (an unknown status is the
/// database's text).
pub fn run_status_cell(app: &App, s: &RunStatus, w: u16) -> Line<'static> {
    let short = match s {
        RunStatus::WaitingForApproval => "WAITING",
        RunStatus::Interrupted => "INTERRUPT",
        other => other.as_str(),
    };
    cell_in(app, short.as_bytes(), w, app.theme.status(s))
}

/// What became of a run's latest approved call, in `w` columns: a label in the fate's colour
/// and the untrusted part (summary, reason, note, id) through the sanitiser, cut visibly.
/// `short` words it for a table cell.
pub fn fate_cell(app: &App, fate: &Fate, w: u16, short: bool) -> Line<'static> {
    let th = &app.theme;
    let (label, role, rest) = fate_words(app, fate, short);
    let lw = label.chars().count();
    if lw >= usize::from(w) {
        // The label alone does not fit: cut it visibly too.
        return cell_in(app, label.as_bytes(), w, th.style(role));
    }
    let mut l = Line::from(vec![Span::styled(label, th.style(role))]);
    if !rest.is_empty() {
        l.spans
            .extend(cell(app, rest, w.saturating_sub(lw as u16)).spans);
    }
    l
}

/// A fate's label, its colour and the stored bytes that follow the label.
fn fate_words<'a>(app: &App, fate: &'a Fate, short: bool) -> (String, Role, &'a [u8]) {
    let pick = |long: &str, brief: &str| if short { brief } else { long }.to_string();
    match fate {
        Fate::AwaitingResume { decided_at } => {
            let label = if short {
                format!("approved {}, waits", time::age(decided_at, app.now))
            } else {
                format!(
                    "approved {}, not yet resumed",
                    time::ago_at(decided_at, app.now)
                )
            };
            (label, Role::StatusWaiting, b"")
        }
        Fate::Resumed => (
            pick("approved, resumed", "resumed"),
            Role::StatusRunning,
            b"",
        ),
        Fate::Executed {
            failed: true,
            summary,
        } => (pick("ran, failed: ", "failed: "), Role::Error, summary),
        Fate::Executed {
            failed: false,
            summary,
        } => (pick("executed: ", "ran: "), Role::Ok, summary),
        Fate::DeniedOnResume { reason } => (
            pick("denied on resume: ", "denied on resume"),
            Role::Danger,
            if short { b"" } else { reason },
        ),
        Fate::PausedAgain { approval } => (
            pick("paused again, new approval ", "paused again"),
            Role::StatusWaiting,
            if short { b"" } else { approval.as_bytes() },
        ),
        Fate::DeniedWithFeedback { note } => (
            pick("denied with feedback: ", "denied: "),
            Role::Error,
            note,
        ),
    }
}
