//! Actions on the list screens: the queue, the runs and the damaged rows.

use super::confirm::cancel_confirm;
use super::filter::{edit, next_match};
use super::outcome::{Ctx, Outcome, READ_ONLY, is_move, move_list};
use crate::console::data::DamagedRow;
use crate::console::keymap::Action;
use crate::console::state::{
    DamagedScreen, Level, Overlay, QueueScreen, RUN_STATUSES, RunsScreen, StatusPicker,
};
use crate::console::text;

pub(super) fn queue(s: &mut QueueScreen, a: Action, cx: &Ctx, out: &mut Outcome) {
    if is_move(a) {
        out.need = move_list(cx.rows, &mut s.list, a, |r| r.approval_id.clone());
    }
    next_match(cx.rows, &mut s.list, &s.filter, a, out, |r| {
        r.approval_id.clone()
    });
    match a {
        Action::Open => out.push = s.list.selected().map(|r| (false, r.approval_id.clone())),
        Action::Filter => out.overlay = Some(edit(&s.filter)),
        Action::Copy => {
            out.copy = s
                .list
                .selected()
                .map(|r| text::escaped(r.approval_id.as_bytes()))
        }
        Action::Approve | Action::Reject | Action::Deny => {
            out.notice = Some((
                Level::Info,
                "open the approval (enter) and read it to decide".into(),
            ))
        }
        _ => {}
    }
}

pub(super) fn runs(s: &mut RunsScreen, a: Action, cx: &Ctx, out: &mut Outcome) {
    if is_move(a) {
        out.need = move_list(cx.rows, &mut s.list, a, |r| r.id.clone());
    }
    next_match(cx.rows, &mut s.list, &s.filter, a, out, |r| r.id.clone());
    match a {
        Action::Open => out.push = s.list.selected().map(|r| (true, r.id.clone())),
        Action::Filter => out.overlay = Some(edit(&s.filter)),
        Action::Copy => out.copy = s.list.selected().map(|r| text::escaped(r.id.as_bytes())),
        Action::StatusFilter => {
            // The picker opens on the status in force ("all" is row 0).
            let at = s
                .status
                .as_ref()
                .and_then(|x| RUN_STATUSES.iter().position(|y| y == x))
                .map_or(0, |i| i + 1);
            out.overlay = Some(Overlay::Picker(StatusPicker { cursor: at }));
        }
        _ => {}
    }
}

pub(super) fn damaged(s: &mut DamagedScreen, a: Action, cx: &Ctx, out: &mut Outcome) {
    if is_move(a) {
        out.need = move_list(cx.rows, &mut s.list, a, DamagedRow::key);
    }
    next_match(cx.rows, &mut s.list, &s.filter, a, out, DamagedRow::key);
    match a {
        Action::Open => out.push = s.list.selected().map(|r| (true, r.damage.run_id.clone())),
        Action::Filter => out.overlay = Some(edit(&s.filter)),
        Action::Copy => {
            out.copy = s
                .list
                .selected()
                .map(|r| text::bytes_escaped(&r.damage.raw))
        }
        Action::CancelRun => {
            out.confirm = Some(match s.list.selected() {
                Some(_) if cx.cfg.read_only => Err(READ_ONLY.into()),
                Some(DamagedRow {
                    run_status: Some(st),
                    ..
                }) if st.is_terminal() => Err(format!("run is already finished ({st})")),
                Some(r) => Ok(cancel_confirm(&r.damage.run_id, None)),
                None => Err("no row selected".into()),
            })
        }
        _ => {}
    }
}
