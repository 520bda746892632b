//! When the terminal is told of a new approval (issue 21): a header count that shows an
//! approval added since the last one, while the console is open. Never for the first counts
//! (the initial load), never when `[queue] notify` is off.

use crate::console::data::Counts;
use crate::console::msg::Effect;
use crate::console::settings::Notify;
use crate::console::state::App;

/// The notification the counts that came back call for, compared with the counts shown.
pub(super) fn on_counts(app: &App, new: &Counts) -> Vec<Effect> {
    let how = app.settings.notify;
    match &app.counts {
        Some(old) if how != Notify::Off && new.newest > old.newest && new.pending > 0 => {
            vec![Effect::Notify(how, new.pending)]
        }
        _ => vec![],
    }
}
