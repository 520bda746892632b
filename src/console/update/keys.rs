//! Keys: ctrl-c and ctrl-z always, then an open overlay's keys, else the keymap's action on
//! the top screen (`actions`).

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::actions::on_action;
use super::command_line::on_command_key;
use super::outcome::reason_required;
use crate::console::data::{Choice, Write};
use crate::console::msg::Effect;
use crate::console::state::{App, Confirm, Level, Overlay, Pending, TextInput};

pub(super) fn on_key(app: &mut App, k: KeyEvent) -> Vec<Effect> {
    if k.kind == KeyEventKind::Release {
        app.dirty = false;
        return vec![];
    }
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && k.code == KeyCode::Char('c') {
        app.quit = true;
        return vec![Effect::Quit];
    }
    if ctrl && k.code == KeyCode::Char('z') {
        return vec![Effect::Suspend];
    }
    if app.overlay.is_some() {
        return on_overlay_key(app, k);
    }
    app.notice = None;
    let Some(a) = app.keymap.action(&k) else {
        return vec![];
    };
    on_action(app, a)
}

fn on_overlay_key(app: &mut App, k: KeyEvent) -> Vec<Effect> {
    let Some(ov) = app.overlay.take() else {
        return vec![];
    };
    match ov {
        Overlay::Filter(e) => super::filter::on_key(app, e, k),
        Overlay::Picker(p) => super::picker::on_key(app, p, k),
        Overlay::CommandLine(t) => on_command_key(app, t, k),
        Overlay::Confirm(mut c) => match k.code {
            KeyCode::Esc => {
                app.notice = Some((Level::Info, "nothing was changed".into()));
                vec![]
            }
            KeyCode::Enter => accept(app, c),
            _ => {
                if let Some(r) = &mut c.reason {
                    r.edit_key(&k);
                }
                app.overlay = Some(Overlay::Confirm(c));
                vec![]
            }
        },
        Overlay::ApproveTable(t) => super::table::on_key(app, t, k),
        ov @ (Overlay::Bulk(_) | Overlay::BulkResult(_)) => super::bulk::on_overlay_key(app, ov, k),
    }
}

/// Enter on a confirmation: the write it names (a reason is required where one is asked).
fn accept(app: &mut App, c: Box<Confirm>) -> Vec<Effect> {
    let reason = c.reason.as_ref().map(|r| r.text.trim().to_string());
    if reason.as_deref() == Some("") {
        let deny = c.what.is_deny().then_some(
            "a note for the agent is required: it is told the note instead of the call's result",
        );
        return reason_required(app, deny, Overlay::Confirm(c));
    }
    let by = app.cfg.by.clone();
    let note = reason.unwrap_or_default();
    let (write, label) = match c.what.clone() {
        Pending::Decide {
            choice,
            run,
            approval,
            hash,
        } => (
            Write::Decide {
                choice,
                run,
                approval,
                shown_hash: hash,
                by,
                note,
            },
            match choice {
                Choice::Approve => "approving",
                Choice::Reject => "rejecting",
                Choice::Deny => "denying",
            },
        ),
        Pending::Cancel { run } => (
            Write::Cancel {
                run,
                by,
                reason: note,
            },
            "cancelling",
        ),
        Pending::Resume { run } => (Write::Resume { run }, "resuming"),
    };
    let id = app.next_id + 1;
    app.next_id = id;
    app.running.push((id, label.into()));
    app.notice = Some((Level::Info, format!("{label}…").into()));
    vec![Effect::Write(id, write)]
}

impl TextInput {
    pub(crate) fn edit_key(&mut self, k: &KeyEvent) {
        match k.code {
            KeyCode::Char('u') if k.modifiers.contains(KeyModifiers::CONTROL) => self.text.clear(),
            KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => self.text.push(c),
            KeyCode::Backspace => {
                self.text.pop();
            }
            _ => {}
        }
    }

    /// Pasted text goes in as one line (line breaks become spaces; controls dropped from our
    /// own input, which is the operator's, not the database's).
    pub(crate) fn paste(&mut self, s: &str) {
        for c in s.chars() {
            if c == '\n' || c == '\r' || c == '\t' {
                self.text.push(' ');
            } else if !c.is_control() {
                self.text.push(c);
            }
        }
    }
}
