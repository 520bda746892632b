//! The one transition function, `update(state, input) -> effects`, and everything it uses:
//! key handling (`keys`, `actions`, `lists`, `run_detail`, `approval`, `command_line`), the
//! confirmations (`confirm`), the worker's replies (`replies`) and the reads a screen asks for
//! (`load`). Pure: no I/O, no clock; the loop in `console/mod.rs` feeds inputs and performs
//! effects. Nothing here imports the view.

mod actions;
mod approval;
mod bulk;
mod command_line;
mod complete;
mod confirm;
mod filter;
mod keys;
mod lists;
mod load;
mod marks;
mod mouse;
mod notify;
mod outcome;
mod picker;
mod replies;
mod run_detail;
mod sort;
mod table;

use super::msg::{Effect, Input};
use super::state::{App, Level, Overlay};

/// The transition function.
pub fn update(app: &mut App, input: Input) -> Vec<Effect> {
    let before = app.notice.clone();
    let fx = step(app, input);
    // Every notice goes to the message log whole, whoever set it (issue 15 item 9).
    app.log_notice(before.as_ref());
    fx
}

fn step(app: &mut App, input: Input) -> Vec<Effect> {
    app.dirty = true;
    match input {
        Input::Key(k) => keys::on_key(app, k),
        Input::Paste(s) => {
            match &mut app.overlay {
                Some(Overlay::Filter(_)) => {
                    if let Some(Overlay::Filter(e)) = app.overlay.take() {
                        return filter::on_paste(app, e, &s);
                    }
                }
                Some(Overlay::CommandLine(t)) => t.paste(&s),
                Some(Overlay::Confirm(c)) => {
                    if let Some(r) = &mut c.reason {
                        r.paste(&s)
                    }
                }
                Some(Overlay::Bulk(c)) => c.reason.paste(&s),
                // bracketed paste goes only into inputs
                Some(Overlay::Picker(_) | Overlay::BulkResult(_) | Overlay::ApproveTable(_))
                | None => app.dirty = false,
            }
            vec![]
        }
        Input::Mouse(m) => mouse::on_mouse(app, m),
        Input::Resize(w, h) => {
            app.size = (w, h);
            app.relayout();
            vec![]
        }
        Input::Tick(now) => {
            app.now = now;
            vec![]
        }
        Input::DataUnreachable(why) => {
            app.counts_stale = true;
            app.notice = Some((
                Level::Error,
                format!(
                    "the database does not answer ({why}); what is shown is as of the last read"
                )
                .into(),
            ));
            vec![]
        }
        Input::DataChanged => {
            // The screen's rows first: the counts can take a full scan on a large database.
            let mut fx = app.load_top(true);
            fx.extend(app.load_counts());
            // Marked rows that left the queue are unmarked, and said (issue 21).
            fx.extend(marks::check(app));
            fx
        }
        Input::Reply(id, r) => {
            let mut fx = replies::on_reply(app, id, r);
            fx.extend(filter::after_reply(app, id));
            fx
        }
        Input::Done(id, r) => replies::on_done(app, id, r),
        Input::Progress(id, msg) => {
            if app.running.iter().any(|(i, _)| *i == id) {
                app.notice = Some((Level::Info, msg.into()));
            }
            vec![]
        }
        Input::WorkerStopped => {
            app.quit = true;
            vec![]
        }
    }
}
