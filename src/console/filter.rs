//! What the `/` filter matches: the text a list shows of a row, as the sanitiser draws it
//! (escaped, before any cut), never the stored bytes. A row cannot hide from a filter the
//! reviewer types from what they read (words past the 4096 characters SQL looked at, a case
//! only Unicode folds), is not found by bytes no reviewer sees (the first of a repeated JSON
//! key, which SQLite's `json_extract` reads), and a filter for an escape the reviewer sees
//! (`\u{202e}`) finds the rows that hold that character.
//!
//! A row matches when one of its shown values contains the filter, both lower-cased (Unicode
//! lower case); the values of a list are:
//! - the queue: run id, tool and arguments (as read: their first 4096 bytes), or the words
//!   drawn in their place when the request does not decode;
//! - the runs: run id, status (as the list words it), reason, goal, and the fate's text;
//! - the damaged rows: run id, `table/row id/column`, the decode error and the raw bytes.

use super::data::{DamagedRow, Fate, QueueRow, RunRow, RunStatus};
use super::text;

/// A typed filter, ready to match: lower-cased once.
#[derive(Debug, Clone, PartialEq)]
pub struct Needle(String);

impl Needle {
    pub fn new(typed: &str) -> Needle {
        Needle(typed.to_lowercase())
    }

    /// Whether any of `shown` (texts as drawn) contains the filter.
    pub fn any(&self, shown: &[String]) -> bool {
        shown.iter().any(|s| s.to_lowercase().contains(&self.0))
    }

    pub fn queue(&self, r: &QueueRow) -> bool {
        self.any(&queue_shown(r))
    }

    pub fn run(&self, r: &RunRow) -> bool {
        self.any(&run_shown(r))
    }

    pub fn damaged(&self, r: &DamagedRow) -> bool {
        self.any(&damaged_shown(r))
    }
}

/// What the queue draws for the tool of a request that does not decode.
pub const NO_TOOL: &str = "(damaged)";
/// What the queue draws for its arguments.
pub const NO_ARGS: &str = "unread: request does not decode";

/// A queue row's shown values (the words drawn in place of a request that does not decode
/// among them).
pub fn queue_shown(r: &QueueRow) -> Vec<String> {
    vec![
        text::escaped(r.run_id.as_bytes()),
        r.tool.as_deref().map_or(NO_TOOL.into(), text::escaped),
        r.args.as_deref().map_or(NO_ARGS.into(), text::escaped),
    ]
}

/// The status as the runs list words it (`WAITING`, `INTERRUPT`, ...), escaped.
pub fn status_shown(s: &RunStatus) -> String {
    let short = match s {
        RunStatus::WaitingForApproval => "WAITING",
        RunStatus::Interrupted => "INTERRUPT",
        other => other.as_str(),
    };
    text::escaped(short.as_bytes())
}

/// A run row's shown values.
pub fn run_shown(r: &RunRow) -> Vec<String> {
    let mut v = vec![
        text::escaped(r.id.as_bytes()),
        status_shown(&r.status),
        text::escaped(&r.reason),
        text::escaped(&r.goal),
    ];
    match &r.fate {
        Some(Fate::Executed { summary, .. }) => v.push(text::escaped(summary)),
        Some(Fate::DeniedOnResume { reason }) => v.push(text::escaped(reason)),
        Some(Fate::PausedAgain { approval }) => v.push(text::escaped(approval.as_bytes())),
        Some(Fate::DeniedWithFeedback { note }) => v.push(text::escaped(note)),
        Some(Fate::AwaitingResume { .. } | Fate::Resumed) | None => {}
    }
    v
}

/// A damaged row's shown values (its raw bytes as the damaged view escapes them).
pub fn damaged_shown(r: &DamagedRow) -> Vec<String> {
    let mut row = format!("{}/", r.damage.table);
    row.push_str(&text::escaped(r.damage.row_id.as_bytes()));
    row.push('/');
    row.push_str(r.damage.column);
    vec![
        text::escaped(r.damage.run_id.as_bytes()),
        row,
        text::escaped(r.damage.error.as_bytes()),
        text::bytes_escaped(&r.damage.raw),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_escaped_form_case_folded_by_unicode() {
        let n = Needle::new("ÉCHEC");
        assert!(n.any(&["un échec".into()]));
        let shown = text::escaped("a\u{202e}b".as_bytes());
        assert!(
            Needle::new("\\u{202E}").any(std::slice::from_ref(&shown)),
            "{shown}"
        );
        assert!(!Needle::new("ab").any(&[shown]));
    }
}
