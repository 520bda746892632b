//! Actions on the approval detail: moving between fields, paging, expanding, strict mode, the
//! code-point inspector and its pages, copy, and the decisions.

use super::confirm::{cancel_confirm, confirm_decision, resume_from_approval};
use super::outcome::{Ctx, Outcome, READ_ONLY};
use crate::console::data::Choice;
use crate::console::keymap::Action;
use crate::console::layout;
use crate::console::state::ApprovalScreen;
use crate::console::text;

pub(super) fn on_action(s: &mut ApprovalScreen, a: Action, cx: &Ctx, out: &mut Outcome) {
    match a {
        Action::NextTab | Action::PrevTab if s.inspect => inspector_page(s, a, cx.size),
        Action::Up | Action::Down | Action::Top | Action::Bottom => {
            move_cursor(s, a, layout::approval_rows(cx.size))
        }
        Action::PageDown | Action::HalfDown | Action::PageUp | Action::HalfUp => {
            page(s, a, layout::approval_rows(cx.size))
        }
        Action::Expand | Action::Mark => {
            if !s.expanded.remove(&s.cursor) {
                s.expanded.insert(s.cursor);
            }
            out.relayout = true;
        }
        Action::Strict => {
            s.strict = !s.strict;
            out.relayout = true;
        }
        Action::Inspect => {
            s.inspect = !s.inspect;
            s.inspect_page = 0;
        }
        // The bare value, escaped; never its label (issue 15 item 8).
        Action::Copy => out.copy = s.fields.get(s.cursor).map(|f| text::escaped(&f.value)),
        Action::ResumeRun => out.confirm = Some(resume_from_approval(s, cx)),
        Action::Approve | Action::Reject | Action::Deny => {
            let choice = match a {
                Action::Approve => Choice::Approve,
                Action::Reject => Choice::Reject,
                _ => Choice::Deny,
            };
            out.confirm = Some(confirm_decision(&cx.cfg, s, choice, cx.now));
        }
        Action::CancelRun => {
            out.confirm = Some(match &s.row {
                _ if cx.cfg.read_only => Err(READ_ONLY.into()),
                Some(r) => Ok(cancel_confirm(&r.run_id, None)),
                None => Err("the approval is not loaded yet".into()),
            })
        }
        _ => {}
    }
}

/// The first line of each field in the laid-out detail.
fn starts(s: &ApprovalScreen) -> Vec<usize> {
    s.view
        .iter()
        .scan(0, |acc, v| {
            let st = *acc;
            *acc += v.lines.len();
            Some(st)
        })
        .collect()
}

fn inspector_page(s: &mut ApprovalScreen, a: Action, size: (u16, u16)) {
    let pages = s
        .fields
        .get(s.cursor)
        .map_or(1, |f| layout::inspector_pages(size, &f.value));
    let last = pages.saturating_sub(1);
    s.inspect_page = if a == Action::NextTab {
        (s.inspect_page + 1).min(last)
    } else {
        s.inspect_page.min(last).saturating_sub(1)
    };
}

/// Up, down, top, bottom: the cursor moves by field and the field is scrolled into view.
fn move_cursor(s: &mut ApprovalScreen, a: Action, body: usize) {
    let n = s.view.len();
    s.inspect_page = 0;
    s.cursor = match a {
        Action::Up => s.cursor.saturating_sub(1),
        Action::Down => (s.cursor + 1).min(n.saturating_sub(1)),
        Action::Top => 0,
        _ => n.saturating_sub(1),
    };
    if let Some(st) = starts(s).get(s.cursor) {
        let end = st + s.view[s.cursor].lines.len();
        if *st < s.scroll {
            s.scroll = *st;
        } else if end > s.scroll + body {
            s.scroll = (end.saturating_sub(body)).min(*st);
        }
    }
}

/// Page and half-page moves scroll by lines; the cursor follows to the first field visible.
fn page(s: &mut ApprovalScreen, a: Action, body: usize) {
    let total: usize = s.view.iter().map(|v| v.lines.len()).sum();
    let max_scroll = total.saturating_sub(body);
    let step = if matches!(a, Action::PageDown | Action::PageUp) {
        body
    } else {
        body / 2
    };
    s.scroll = if matches!(a, Action::PageDown | Action::HalfDown) {
        (s.scroll + step.max(1)).min(max_scroll)
    } else {
        s.scroll.saturating_sub(step.max(1))
    };
    if let Some(i) = starts(s).iter().rposition(|st| *st <= s.scroll) {
        if i != s.cursor {
            s.inspect_page = 0;
        }
        s.cursor = i;
    }
}
