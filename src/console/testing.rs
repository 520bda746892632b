//! The console's internals for the crate's own tests and benches, behind the `testing`
//! feature (a consumer building countersign does not get them): the state and `update`, the
//! view's `draw`, the reader, the worker's synchronous answer, keymap and theme. The one door
//! tests use; the modules themselves stay private.

pub use super::bulk::{Item, Marked, Verb};
pub use super::config::load_mouse;
pub use super::data::*;
pub use super::decider::StoreDecider;
pub use super::fields::{ApprovalField, FieldView};
pub use super::keymap::{Action, Chord, Keymap};
pub use super::msg::{Effect, Input, Job};
pub use super::nav::ListView;
pub use super::notify::{bytes as notify_bytes, send as notify_send, wording as notify_wording};
#[cfg(feature = "postgres")]
pub use super::pg::{PgData, PgReads, pg_decider};
pub use super::settings::{AgeBands, Band, Notify, Settings};
pub use super::sqlite::SqliteData;
pub use super::sqlite::StoreData;
pub use super::state::*;
pub use super::text::{Marks, TextStyles};
pub use super::theme::{Depth, Role, Theme};
pub use super::time::{age, countdown, countdown_short, expired, span};
pub use super::update::update;
pub use super::view::draw;
pub use super::worker::{Worker, answer, handle, is_count, mark_resumable};
