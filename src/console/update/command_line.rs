//! The `:` command line.

use crossterm::event::{KeyCode, KeyEvent};

use super::actions::on_action;
use crate::console::data::Reply;
use crate::console::data::{Key, Query, Said};
use crate::console::keymap::Action;
use crate::console::msg::Effect;
use crate::console::state::{App, Level, Overlay, Screen, TextInput};

/// How many candidates an ambiguous `:run PREFIX` names.
pub(crate) const NAMED: usize = 8;

/// The candidates of a `:run PREFIX` came back: an exact id or the one run it starts opens;
/// several are named (escaped) so the person types more; none opens the run as typed, whose
/// screen then says it is not found.
pub(super) fn on_prefix(app: &mut App, given: Key, r: Reply) -> Vec<Effect> {
    let found = match r {
        Reply::RunPrefix(found) => found,
        Reply::Failed(e) => {
            app.notice = Some((Level::Error, e.to_string().into()));
            return vec![];
        }
        _ => return vec![],
    };
    if found.contains(&given) {
        return app.push_run(given);
    }
    match found.as_slice() {
        [] => app.push_run(given),
        [one] => app.push_run(one.clone()),
        many => {
            let count = if many.len() > NAMED {
                format!("more than {NAMED}")
            } else {
                many.len().to_string()
            };
            // A notice holds bytes the view escapes when it draws it: each id goes in as
            // stored, so one that is not UTF-8 is drawn as `\xNN`, never as a lossy U+FFFD
            // that could name another run.
            let mut m = Said::new()
                .id(&given)
                .text(format!(" is the start of {count} run ids: "));
            for (i, id) in many.iter().take(NAMED).enumerate() {
                if i > 0 {
                    m = m.text(", ");
                }
                m = m.id(id);
            }
            if many.len() > NAMED {
                m = m.text(", ...");
            }
            app.notice = Some((Level::Error, m.text("; type more of the id").bytes()));
            vec![]
        }
    }
}

pub(crate) fn run_command(app: &mut App, cmd: &str) -> Vec<Effect> {
    let mut parts = cmd.split_whitespace();
    let head = parts.next().unwrap_or("");
    let arg = parts.next();
    match (head, arg) {
        ("q" | "quit" | "q!", _) => {
            app.quit = true;
            vec![Effect::Quit]
        }
        ("queue", _) => {
            app.stack.truncate(1);
            app.start()
        }
        ("runs", _) => {
            app.stack.truncate(1);
            on_action(app, Action::Runs)
        }
        ("damaged", _) => {
            app.stack.truncate(1);
            on_action(app, Action::Damaged)
        }
        ("help", _) => on_action(app, Action::Help),
        ("stats", _) => on_action(app, Action::Stats),
        ("messages" | "mes" | "messages!", _) => {
            if !matches!(app.top(), Screen::Messages { .. }) {
                app.stack.push(Screen::Messages { scroll: 0 });
            }
            vec![]
        }
        ("run", Some(id)) => {
            // A unique prefix names its run (issue 15 item 8): read the candidates first.
            let rid = app.id();
            app.resolving = Some((rid, Key::from(id)));
            vec![Effect::Query(
                rid,
                Query::RunPrefix {
                    prefix: Key::from(id),
                    limit: (NAMED + 1) as u32,
                },
            )]
        }
        ("approval", Some(id)) => app.push_approval(Key::from(id)),
        ("verify", _) => {
            let id = app.next_id + 1;
            app.next_id = id;
            app.running.push((id, "verify".into()));
            app.notice = Some((Level::Info, "verifying the event chain…".into()));
            vec![Effect::Query(id, Query::Verify)]
        }
        ("", _) => vec![],
        _ => {
            app.notice = Some((
                Level::Error,
                format!(
                    "unknown command; try :queue :runs :run ID :damaged :messages :verify :q (tab completes; {} chars ignored)",
                    cmd.len()
                ).into(),
            ));
            vec![]
        }
    }
}

/// A key while the command line is open: `enter` runs it (and keeps it in the history),
/// `tab` completes the command's name, `up`/`down` walk the history, `esc` closes it.
pub(crate) fn on_command_key(app: &mut App, mut t: TextInput, k: KeyEvent) -> Vec<Effect> {
    match k.code {
        KeyCode::Esc => {
            app.history.at = None;
            vec![]
        }
        KeyCode::Enter => {
            let line = t.text.trim().to_string();
            super::complete::remember(&mut app.history, &line);
            run_command(app, &line)
        }
        KeyCode::Tab => {
            app.notice = super::complete::complete(&mut t.text);
            app.overlay = Some(Overlay::CommandLine(t));
            vec![]
        }
        KeyCode::Up | KeyCode::Down => {
            super::complete::walk(&mut app.history, &mut t.text, k.code == KeyCode::Up);
            app.overlay = Some(Overlay::CommandLine(t));
            vec![]
        }
        _ => {
            t.edit_key(&k);
            app.notice = None;
            app.overlay = Some(Overlay::CommandLine(t));
            vec![]
        }
    }
}
