//! The keymap's actions: the ones every screen shares here, the rest by screen (`lists`,
//! `run_detail`, `approval`), whose outcome is applied here.

use super::outcome::{Ctx, Outcome};
use super::{approval, lists, run_detail};
use crate::console::keymap::Action;
use crate::console::msg::Effect;
use crate::console::state::{App, DamagedScreen, Level, Overlay, RunsScreen, Screen, TextInput};

pub(crate) fn on_action(app: &mut App, a: Action) -> Vec<Effect> {
    if let Some(fx) = on_global(app, a) {
        return fx;
    }
    if let Some(fx) = super::marks::on_action(app, a) {
        return fx;
    }
    let cx = Ctx::of(app);
    let Some(top) = app.stack.last_mut() else {
        return vec![];
    };
    let mut out = Outcome::default();
    match top {
        Screen::Queue(s) => lists::queue(s, a, &cx, &mut out),
        Screen::Runs(s) => lists::runs(s, a, &cx, &mut out),
        Screen::Damaged(s) => lists::damaged(s, a, &cx, &mut out),
        Screen::RunDetail(s) => run_detail::on_action(s, a, &cx, &mut out),
        Screen::Approval(s) => approval::on_action(s, a, &cx, &mut out),
        Screen::Stats(s) => help(&mut s.scroll, a, cx.rows),
        Screen::Help { scroll } | Screen::Messages { scroll } => help(scroll, a, cx.rows),
    }
    apply(app, out)
}

/// The actions that mean the same on every screen; `None` for the others.
fn on_global(app: &mut App, a: Action) -> Option<Vec<Effect>> {
    Some(match a {
        Action::Quit if app.stack.len() <= 1 => {
            app.quit = true;
            vec![Effect::Quit]
        }
        Action::Quit | Action::Back => {
            if app.stack.len() > 1 {
                app.stack.pop();
                app.relayout();
                app.start()
            } else {
                vec![]
            }
        }
        Action::Sort if matches!(app.top(), Screen::Queue(_)) => super::sort::resort(app),
        Action::Help => {
            app.stack.push(Screen::Help { scroll: 0 });
            vec![]
        }
        Action::CommandLine => {
            app.overlay = Some(Overlay::CommandLine(TextInput::default()));
            vec![]
        }
        Action::Queue => {
            app.stack.truncate(1);
            app.start()
        }
        Action::Runs => {
            if matches!(app.top(), Screen::Runs(_)) {
                vec![]
            } else {
                app.stack.truncate(1);
                app.stack.push(Screen::Runs(RunsScreen {
                    list: Default::default(),
                    filter: String::new(),
                    status: None,
                }));
                app.start()
            }
        }
        Action::Damaged => {
            app.stack.truncate(1);
            app.stack.push(Screen::Damaged(DamagedScreen::default()));
            app.start()
        }
        Action::Stats => {
            app.stack.truncate(1);
            app.stack.push(Screen::Stats(Box::default()));
            app.start()
        }
        Action::Refresh => {
            let mut fx = app.reload_all();
            fx.dedup();
            fx
        }
        _ => return None,
    })
}

fn help(scroll: &mut usize, a: Action, rows: u16) {
    match a {
        Action::Down => *scroll += 1,
        Action::Up => *scroll = scroll.saturating_sub(1),
        Action::PageDown | Action::HalfDown => *scroll += usize::from(rows / 2),
        Action::PageUp | Action::HalfUp => *scroll = scroll.saturating_sub(usize::from(rows / 2)),
        Action::Top => *scroll = 0,
        _ => {}
    }
}

/// Applies what a screen's handler asked for, in a fixed order: its overlay and notice, the
/// relayout, the copy, the confirmation, then opening a screen or reading the window.
fn apply(app: &mut App, out: Outcome) -> Vec<Effect> {
    let mut fx = Vec::new();
    if let Some(o) = out.overlay {
        app.overlay = Some(o);
    }
    if let Some(n) = out.notice {
        app.notice = Some(n);
    }
    if out.relayout {
        app.relayout();
    }
    if let Some(c) = out.copy {
        app.notice = Some((Level::Ok, "copied (escaped form)".into()));
        fx.push(Effect::Copy(c));
    }
    if let Some(c) = out.confirm {
        match c {
            Ok(c) => app.overlay = Some(Overlay::Confirm(Box::new(c))),
            Err(m) => app.notice = Some((Level::Error, m.into())),
        }
    }
    if let Some((is_run, id)) = out.push {
        fx.extend(if is_run {
            app.push_run(id)
        } else {
            app.push_approval(id)
        });
        return fx;
    }
    if out.need {
        fx.extend(app.load_window());
    }
    fx
}
