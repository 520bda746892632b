//! The interactive review console.
//!
//! Data moves one way: an input (a key, a reply from the database thread, the clock) becomes
//! a message (`msg`), `update` changes the state (`state`) and returns effects, and the
//! view draws the state. `update` never imports the view; the size arithmetic both need is in
//! `layout`. Database work runs on worker threads with their own read-only connections and
//! comes back as messages tagged with request ids. Every string from the database is drawn
//! through `text`. See docs/architecture.md, "Console".
//!
//! The public face is [`run`] with its [`ConsoleOptions`], the configuration loader and the
//! traits a binary implements ([`Decider`], [`ResumeHook`]); everything else is internal, and
//! the crate's own tests reach it through `testing` (feature `testing`).

pub(crate) mod bulk;
pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod data;
pub(crate) mod decider;
pub(crate) mod facts;
pub(crate) mod fate;
pub(crate) mod fields;
mod files;
pub(crate) mod filter;
pub(crate) mod keymap;
pub(crate) mod layout;
pub(crate) mod log;
pub(crate) mod msg;
pub(crate) mod nav;
pub(crate) mod notify;
pub(crate) mod options;
pub(crate) mod page;
#[cfg(feature = "postgres")]
pub(crate) mod pg;
pub(crate) mod reads;
pub(crate) mod run;
pub(crate) mod scan;
pub(crate) mod settings;
pub(crate) mod sort;
pub(crate) mod sqlite;
pub(crate) mod state;
pub(crate) mod terminal;
pub(crate) mod text;
pub(crate) mod theme;
pub(crate) mod time;
pub(crate) mod toml_at;
pub(crate) mod update;
pub(crate) mod view;
pub(crate) mod worker;

#[cfg(feature = "testing")]
pub mod testing;

pub use config::{load_config, load_settings};
pub use data::{DataError, DecideError, Decider, Key, ResumeHook, Write, WriteResult};
pub use decider::StoreDecider;
pub use keymap::KeymapError;
pub use options::{ConsoleError, ConsoleOptions, MakeDecider};
pub use run::{check_config, check_terminal, run};
pub use settings::{AgeBands, Notify, Settings};
pub use theme::{Depth, ThemeError};
