//! The messages data moves in: what the loop feeds `update` ([`Input`]), what `update` asks the
//! loop to do ([`Effect`]) and what the loop hands the database threads ([`Job`]).

use crossterm::event::{KeyEvent, MouseEvent};

use super::data::{Query, Reply, Write, WriteResult};

/// What the loop feeds `update`.
#[derive(Debug, Clone)]
pub enum Input {
    Key(KeyEvent),
    /// A mouse report (only when the mouse is on: `--mouse` or `mouse = true`).
    Mouse(MouseEvent),
    Paste(String),
    Resize(u16, u16),
    /// The clock, in Unix seconds.
    Tick(i64),
    Reply(u64, Reply),
    /// The database changed (data_version moved).
    DataChanged,
    /// The database stopped answering the change checks (a server gone away): what the
    /// screen shows is as of the last read until it answers again. Sent once per outage.
    DataUnreachable(String),
    Done(u64, WriteResult),
    Progress(u64, String),
    /// The database thread died (a panic); the console cannot go on.
    WorkerStopped,
}

/// What `update` asks the loop to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Query(u64, Query),
    Write(u64, Write),
    /// Put this (already escaped) text on the clipboard (OSC 52).
    Copy(String),
    Suspend,
    Quit,
    /// Tell the terminal a new approval arrived (issue 21; `[queue] notify`): how, and how
    /// many are pending.
    Notify(super::settings::Notify, u64),
}

/// What a database thread is asked to do.
pub enum Job {
    Query(u64, Query),
    Write(u64, Write),
}
