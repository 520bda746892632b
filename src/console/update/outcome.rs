//! What a screen's key handler decides, gathered while the screen is borrowed and applied to
//! the app afterwards (`actions::apply`), and the list movement the list screens share.

use crate::console::data::Key;
use crate::console::keymap::Action;
use crate::console::msg::Effect;
use crate::console::nav::ListView;
use crate::console::state::{App, AppConfig, Confirm, Level, Overlay};

/// What a screen's handler reads of the app besides its own screen.
pub(super) struct Ctx {
    pub rows: u16,
    pub size: (u16, u16),
    pub now: i64,
    pub cfg: AppConfig,
}

impl Ctx {
    pub fn of(app: &App) -> Ctx {
        Ctx {
            rows: app.list_rows(),
            size: app.size,
            now: app.now,
            cfg: app.cfg.clone(),
        }
    }
}

/// What a screen's handler asks for.
#[derive(Default)]
pub(super) struct Outcome {
    /// The window around the cursor must be read.
    pub need: bool,
    pub copy: Option<String>,
    /// Open a run (`true`) or an approval.
    pub push: Option<(bool, Key)>,
    pub confirm: Option<Result<Confirm, String>>,
    pub overlay: Option<Overlay>,
    pub notice: Option<(Level, Vec<u8>)>,
    pub relayout: bool,
}

/// Moves a list's cursor for a movement action; returns whether its window must be read.
pub(super) fn move_list<T>(
    rows: u16,
    l: &mut ListView<T>,
    a: Action,
    id_of: impl Fn(&T) -> Key,
) -> bool {
    let page = i64::from(rows.max(1));
    let need = match a {
        Action::Up => l.move_by(-1),
        Action::Down => l.move_by(1),
        Action::Top => l.set_cursor(0),
        Action::Bottom => l.jump_to_end(),
        Action::PageDown => l.move_by(page),
        Action::PageUp => l.move_by(-page),
        Action::HalfDown => l.move_by(page / 2),
        Action::HalfUp => l.move_by(-page / 2),
        _ => return false,
    };
    l.scroll_into_view(rows);
    l.remember(id_of);
    need
}

pub(super) fn is_move(a: Action) -> bool {
    matches!(
        a,
        Action::Up
            | Action::Down
            | Action::Top
            | Action::Bottom
            | Action::PageDown
            | Action::PageUp
            | Action::HalfDown
            | Action::HalfUp
    )
}

/// The refusal every write gives in a read-only console.
pub(super) const READ_ONLY: &str = "read-only: actions are off (started with --read-only)";

/// A confirmation given without the reason it asks for, kept open (`keep`) with the error:
/// `deny_note` where the reason is a denial's note for the agent, else "a reason is required".
pub(super) fn reason_required(
    app: &mut App,
    deny_note: Option<&'static str>,
    keep: Overlay,
) -> Vec<Effect> {
    let what = deny_note.unwrap_or("a reason is required");
    app.notice = Some((Level::Error, what.into()));
    app.overlay = Some(keep);
    vec![]
}
