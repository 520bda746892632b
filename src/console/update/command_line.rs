//! The `:` command line.

use super::actions::on_action;
use crate::console::data::{Key, Query};
use crate::console::keymap::Action;
use crate::console::msg::Effect;
use crate::console::state::{App, Level, Screen};

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
        ("messages" | "mes" | "messages!", _) => {
            if !matches!(app.top(), Screen::Messages { .. }) {
                app.stack.push(Screen::Messages { scroll: 0 });
            }
            vec![]
        }
        ("run", Some(id)) => app.push_run(Key::from(id)),
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
                    "unknown command; try :queue :runs :run ID :damaged :messages :verify :q ({} chars ignored)",
                    cmd.len()
                ),
            ));
            vec![]
        }
    }
}
