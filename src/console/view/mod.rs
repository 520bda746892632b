//! The view: the frame (header, the top screen's body, the notice line, the key-hint bar, an
//! overlay), one file per screen, and the widgets they share. Reads the state, never changes
//! it, and imports nothing of `update`. Every untrusted string goes through `text`.

mod age;
mod approval;
mod bulk;
mod damaged;
mod help;
mod messages;
mod overlays;
mod picker;
mod queue;
mod run_detail;
mod runs;
mod stats;
mod widgets;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::console::data::{Counts, RunStatus};
use crate::console::keymap::Action;
use crate::console::state::{App, Level, Overlay, Screen};
use crate::console::text;
use crate::console::theme::Role;

pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    if area.width < 20 || area.height < 6 {
        f.render_widget(Paragraph::new("window too small"), area);
        return;
    }
    let [head, body, notice, hints] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(f, head, app);
    match app.top() {
        Screen::Queue(s) => queue::draw(f, body, app, s),
        Screen::Runs(s) => runs::draw(f, body, app, s),
        Screen::RunDetail(s) => run_detail::draw(f, body, app, s),
        Screen::Approval(s) => approval::draw(f, body, app, s),
        Screen::Damaged(s) => damaged::draw(f, body, app, s),
        Screen::Help { scroll } => help::draw(f, body, app, *scroll),
        Screen::Messages { scroll } => messages::draw(f, body, app, *scroll),
        Screen::Stats(s) => stats::draw(f, body, app, s),
    }
    draw_notice(f, notice, app);
    draw_hints(f, hints, app);
    match &app.overlay {
        Some(Overlay::Confirm(c)) => overlays::draw_confirm(f, body, app, c),
        Some(Overlay::Picker(p)) => picker::draw(f, body, app, p),
        Some(Overlay::Bulk(c)) => bulk::draw_confirm(f, body, app, c),
        Some(Overlay::BulkResult(r)) => bulk::draw_result(f, body, app, r),
        Some(Overlay::ApproveTable(t)) => bulk::draw_table(f, body, app, t),
        _ => {}
    }
}

fn draw_header(f: &mut Frame, area: Rect, app: &App) {
    let th = &app.theme;
    let bar = th.style(Role::StatusBar);
    let path: Vec<&str> = app.stack.iter().map(Screen::title).collect();
    // Until the counts come back (a scan on a large database) the header says so rather
    // than showing zeros.
    let n = |f: fn(&Counts) -> u64| {
        app.counts
            .as_ref()
            .map_or("…".to_string(), |c| f(c).to_string())
    };
    let mut spans = vec![
        Span::styled(" countersign ", th.style(Role::Title)),
        Span::styled(path.join(" › "), bar),
        Span::styled("  ", bar),
        Span::styled(
            format!("pending {}", n(|c| c.pending)),
            th.style(Role::StatusWaiting),
        ),
    ];
    // Counts as of a read that is no longer current (the database stopped answering): said
    // next to the first of them, where a narrow header still shows it.
    if app.counts_stale && app.counts.is_some() {
        spans.push(Span::styled(" STALE", th.style(Role::Danger)));
    }
    // The oldest pending approval's age, in its band (issue 21).
    let oldest = age::oldest(app);
    let kept = spans.len() + oldest.len();
    spans.extend(oldest);
    spans.extend([Span::styled(
        format!(
            " · runs {} · waiting {} · running {} · failed {}",
            n(|c| c.runs),
            n(|c| c.waiting),
            n(|c| c.running),
            n(|c| c.failed)
        ),
        bar,
    )]);
    if area.width < 90 {
        spans.truncate(kept);
        spans.push(Span::styled(format!(" · runs {}", n(|c| c.runs)), bar));
    }

    if !app.marks.rows.is_empty() {
        spans.push(Span::styled(
            format!("  marked {}", app.marks.rows.len()),
            th.style(Role::Badge),
        ));
    }
    if !app.marks.runs.is_empty() {
        spans.push(Span::styled(
            format!("  runs marked {}", app.marks.runs.len()),
            th.style(Role::Badge),
        ));
    }
    if app.cfg.read_only {
        spans.push(Span::styled("  READ-ONLY", th.style(Role::Danger)));
    }
    f.render_widget(Paragraph::new(Line::from(spans)).style(bar), area);
}

fn draw_notice(f: &mut Frame, area: Rect, app: &App) {
    let th = &app.theme;
    let line = match &app.overlay {
        Some(Overlay::Filter(e)) => Line::from(vec![
            Span::styled("/", th.style(Role::KeyHint)),
            Span::raw(text::escaped(e.input.text.as_bytes())),
            Span::styled("▏", th.style(Role::KeyHint)),
            Span::styled(format!("  {}", overlays::matches(app)), th.style(Role::Dim)),
        ]),
        Some(Overlay::CommandLine(t)) => {
            let mut l = vec![
                Span::styled(":", th.style(Role::KeyHint)),
                Span::raw(text::escaped(t.text.as_bytes())),
                Span::styled("▏", th.style(Role::KeyHint)),
            ];
            // What `tab` found (the candidates, or why it could not complete).
            if let Some((_, m)) = &app.notice {
                l.push(Span::styled(
                    format!("  {}", text::escaped(m)),
                    th.style(Role::Dim),
                ));
            }
            Line::from(l)
        }
        _ => match &app.notice {
            Some((lvl, m)) => {
                let st = match lvl {
                    Level::Info => th.style(Role::Text),
                    Level::Ok => th.style(Role::Ok),
                    Level::Error => th.style(Role::Error),
                };
                // Notices may quote database text (who decided): escape them too. One that
                // does not fit is cut visibly and says where it is whole (issue 15 item 9).
                // Plain text in the level's style (an error reads as one), escapes as escapes.
                let width = usize::from(area.width);
                let styles = text::TextStyles {
                    text: st,
                    ..th.text_styles()
                };
                let whole = text::line(m, usize::MAX, &styles);
                if whole.width <= width {
                    whole.line
                } else {
                    let room = width.saturating_sub(MORE.chars().count());
                    let mut l = text::line(m, room, &styles).line;
                    l.spans.push(Span::styled(MORE, th.style(Role::KeyHint)));
                    l
                }
            }
            None => Line::from(""),
        },
    };
    f.render_widget(Paragraph::new(line), area);
}

/// What a cut notice ends with: where to read it whole.
const MORE: &str = " · :messages";

/// Context hints from the keymap (so rebinding shows up here too).
pub(crate) fn hints(app: &App) -> Vec<(String, &'static str)> {
    let k = |a: Action| app.keymap.key(a);
    let mut v: Vec<(String, &'static str)> = Vec::new();
    // An overlay's hints stand alone; most name fixed keys (none: no overlay is up).
    let fixed: &[(&str, &'static str)] = match app.overlay {
        Some(Overlay::Confirm(_)) => &[("enter", "confirm"), ("esc", "back, nothing changes")],
        Some(Overlay::Filter(_)) => &[("enter", "keep"), ("esc", "put back"), ("↑↓", "move")],
        Some(Overlay::Picker(_)) => &[("↑↓", "move"), ("enter", "choose"), ("esc", "keep")],
        Some(Overlay::CommandLine(_)) => &[
            ("enter", "run"),
            ("tab", "complete"),
            ("↑↓", "history"),
            ("esc", "close"),
        ],
        Some(Overlay::Bulk(_)) => {
            return vec![
                ("enter".into(), "decide the marked rows"),
                (k(Action::DryRun), "dry run"),
                ("esc".into(), "back, nothing changes"),
            ];
        }
        Some(Overlay::BulkResult(_)) => &[("enter", "close")],
        Some(Overlay::ApproveTable(_)) => {
            return vec![
                (k(Action::Down), "scroll"),
                ("enter".into(), "approve"),
                ("esc".into(), "leave, nothing approved"),
            ];
        }
        None => &[],
    };
    if !fixed.is_empty() {
        return fixed
            .iter()
            .map(|&(key, what)| (key.into(), what))
            .collect();
    }
    match app.top() {
        Screen::Queue(_) if !app.marks.rows.is_empty() => {
            // With marks the decision keys act on them (issue 21).
            v.push((k(Action::Reject), "reject marked"));
            v.push((k(Action::Deny), "deny"));
            v.push((k(Action::CancelRun), "cancel"));
            v.push((k(Action::Approve), "approve table"));
            v.push((k(Action::Mark), "mark"));
            v.push((k(Action::ClearMarks), "clear"));
        }
        Screen::Queue(s) => {
            v.push((k(Action::Open), "open"));
            v.push((k(Action::Filter), "filter"));
            match_hint(&mut v, app, &s.filter);
            v.push((k(Action::Runs), "runs"));
            v.push((k(Action::Damaged), "damaged"));
        }
        Screen::Runs(_) if !app.marks.runs.is_empty() => {
            v.push((k(Action::CancelRun), "cancel marked"));
            v.push((k(Action::Mark), "mark"));
            v.push((k(Action::ClearMarks), "clear"));
            v.push((k(Action::Open), "open"));
        }
        Screen::Runs(s) => {
            v.push((k(Action::Open), "open"));
            v.push((k(Action::Filter), "filter"));
            match_hint(&mut v, app, &s.filter);
            v.push((k(Action::StatusFilter), "status"));
        }
        Screen::RunDetail(s) => {
            v.push((k(Action::NextTab), "tab"));
            // Only what applies to the run as read: no cancel of a finished run, no resume of
            // one this build cannot resume or that does not resume from its status.
            let status = s.header.as_ref().map(|h| &h.status);
            let open = status.is_some_and(|st| !st.is_terminal());
            if !app.cfg.read_only && open {
                v.push((k(Action::CancelRun), "cancel run"));
                let resumable = s.header.as_ref().is_some_and(|h| h.resumable)
                    && !matches!(status, Some(RunStatus::Unknown(_)));
                if app.cfg.can_resume && resumable {
                    v.push((k(Action::ResumeRun), "resume"));
                }
            }
        }
        Screen::Approval(s) => {
            // Only what applies: nothing to decide once decided (or unreadable), and an
            // expired approval's decision only expires it, which cancels the run.
            match s.row.as_ref().filter(|_| !app.cfg.read_only) {
                Some(a) if !decidable(a) => {}
                Some(a) if crate::console::time::expired(&a.expires_at, app.now) => {
                    v.push((
                        format!("{}/{}", k(Action::Approve), k(Action::Reject)),
                        "expire: cancels the run",
                    ));
                }
                Some(_) => {
                    v.push((k(Action::Approve), "approve"));
                    v.push((k(Action::Reject), "reject"));
                    v.push((k(Action::Deny), "deny"));
                }
                None => {}
            }
            // `mark` expands on this page too (`space`, where lists mark a row).
            v.push((app.keymap.key_of(&[Action::Mark, Action::Expand]), "expand"));
            v.push((k(Action::Strict), "strict"));
            v.push((k(Action::Inspect), "inspect"));
            if let Screen::Approval(s) = app.top()
                && s.inspect
            {
                v.push((k(Action::NextTab), "code points »"));
                v.push((k(Action::PrevTab), "«"));
            }
            v.push((k(Action::Copy), "copy"));
        }
        Screen::Damaged(s) => {
            v.push((k(Action::Open), "run"));
            v.push((k(Action::Filter), "filter"));
            match_hint(&mut v, app, &s.filter);
            v.push((k(Action::Copy), "copy bytes"));
            let open = s
                .list
                .selected()
                .is_some_and(|r| r.run_status.as_ref().is_some_and(|st| !st.is_terminal()));
            if !app.cfg.read_only && open {
                v.push((k(Action::CancelRun), "cancel run"));
            }
        }
        Screen::Help { .. } => {}
        Screen::Messages { .. } | Screen::Stats(_) => {
            v.push((k(Action::Down), "scroll"));
        }
    }
    if app.stack.len() > 1 {
        v.push((k(Action::Back), "back"));
    }
    v.push((k(Action::Help), "help"));
    if app.stack.len() <= 1 {
        v.push((k(Action::Quit), "quit"));
    }
    if app.cfg.read_only {
        v.push(("RO".into(), "actions off"));
    }
    v
}

/// `n`/`N` while a filter narrows the list.
fn match_hint(v: &mut Vec<(String, &'static str)>, app: &App, filter: &str) {
    if !filter.is_empty() {
        let k = |a: Action| app.keymap.key(a);
        v.push((
            format!("{}/{}", k(Action::NextMatch), k(Action::PrevMatch)),
            "match",
        ));
    }
}

/// Whether a decision on the approval can be asked for (the confirmation says why not).
fn decidable(a: &crate::console::data::ApprovalRow) -> bool {
    use crate::console::data::{ApprovalStatus, RunStatus};
    a.status == ApprovalStatus::Pending
        && a.run_status == RunStatus::WaitingForApproval
        && a.decode_error.is_none()
        && a.request_not_shown.is_none()
}

fn draw_hints(f: &mut Frame, area: Rect, app: &App) {
    let th = &app.theme;
    let mut spans = Vec::new();
    let mut w = 0usize;
    for (key, what) in hints(app) {
        let len = key.chars().count() + what.chars().count() + 3;
        if w + len > usize::from(area.width) {
            break;
        }
        w += len;
        spans.push(Span::styled(key, th.style(Role::KeyHint)));
        spans.push(Span::styled(format!(" {what}  "), th.style(Role::Dim)));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}
