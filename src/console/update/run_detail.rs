//! Actions on the run detail: moving in the open tab, switching tabs, opening an approval,
//! cancel and resume.

use super::confirm::{cancel_confirm, resume_confirm};
use super::outcome::{Ctx, Outcome, READ_ONLY, is_move, move_list};
use crate::console::data::{Key, Tab};
use crate::console::keymap::Action;
use crate::console::layout;
use crate::console::state::RunDetailScreen;
use crate::console::text;

pub(super) fn on_action(s: &mut RunDetailScreen, a: Action, cx: &Ctx, out: &mut Outcome) {
    if is_move(a) {
        out.need = move_in_tab(s, a, layout::tab_rows(cx.size));
    }
    match a {
        Action::NextTab | Action::PrevTab => {
            let i = Tab::ALL.iter().position(|t| *t == s.tab).unwrap_or(0);
            let n = Tab::ALL.len();
            s.tab = Tab::ALL[if a == Action::NextTab {
                (i + 1) % n
            } else {
                (i + n - 1) % n
            }];
            out.need = true;
        }
        Action::Open if s.tab == Tab::Approvals => {
            out.push = s.approvals.selected().map(|r| (false, r.id.clone()))
        }
        Action::Copy => out.copy = Some(text::escaped(s.id.as_bytes())),
        Action::CancelRun => {
            let status = s.header.as_ref().map(|h| &h.status);
            out.confirm = Some(if cx.cfg.read_only {
                Err(READ_ONLY.into())
            } else if let Some(st) = status.filter(|st| st.is_terminal()) {
                Err(format!("run is already finished ({st})"))
            } else {
                Ok(cancel_confirm(&s.id, s.header.as_ref()))
            });
        }
        Action::ResumeRun => out.confirm = Some(resume_confirm(s, cx)),
        _ => {}
    }
}

fn move_in_tab(s: &mut RunDetailScreen, a: Action, rows: u16) -> bool {
    match s.tab {
        Tab::Steps => move_list(rows, &mut s.steps, a, |r| r.id.clone()),
        Tab::Events => move_list(rows, &mut s.events, a, |r| Key::from(r.seq.to_string())),
        Tab::Approvals => move_list(rows, &mut s.approvals, a, |r| r.id.clone()),
        Tab::ModelCalls => move_list(rows, &mut s.calls, a, |r| r.id.clone()),
    }
}
