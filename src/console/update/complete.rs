//! The `:` command line's completion (`tab`) and history (`up`/`down`).
//!
//! The history lives for the session only, in memory: a line can carry run and approval ids
//! read from an untrusted database, and a file of them in the configuration directory would be
//! one more place such text is kept and later shown. Consecutive repeats are kept once, at
//! most [`KEPT`] lines.

use crate::console::state::{CommandHistory, Level};

/// The commands `tab` completes, and whether each takes an argument.
pub(crate) const COMMANDS: &[(&str, bool)] = &[
    ("approval", true),
    ("damaged", false),
    ("help", false),
    ("messages", false),
    ("q", false),
    ("queue", false),
    ("quit", false),
    ("run", true),
    ("runs", false),
    ("stats", false),
    ("verify", false),
];

/// Most lines the history keeps (the oldest go first).
pub(crate) const KEPT: usize = 100;

/// Completes the command's name in `text` (before any argument): the one command it starts
/// (with a space after a command that takes an argument), else as far as the candidates
/// agree. Returns a notice listing the candidates when more than one is left or none is.
pub(super) fn complete(text: &mut String) -> Option<(Level, Vec<u8>)> {
    let typed = text.trim_start();
    if typed.contains(' ') {
        return Some((
            Level::Info,
            "tab completes a command's name; a run id is typed (a unique prefix of it is enough)"
                .into(),
        ));
    }
    let found: Vec<&(&str, bool)> = COMMANDS
        .iter()
        .filter(|(c, _)| c.starts_with(typed))
        .collect();
    match found.as_slice() {
        [] => Some((Level::Error, "no command starts so".into())),
        [(c, arg)] => {
            *text = format!("{c}{}", if *arg { " " } else { "" });
            None
        }
        many => {
            let first = many.first().map_or("", |(c, _)| *c);
            let common = many.iter().map(|(c, _)| *c).fold(first, |p, c| {
                // The byte where the two first differ (or the shorter one ends).
                let end = p
                    .char_indices()
                    .zip(c.chars())
                    .find(|((_, a), b)| a != b)
                    .map_or(p.len().min(c.len()), |((i, _), _)| i);
                &p[..end]
            });
            *text = common.to_string();
            let names: Vec<String> = many.iter().map(|(c, _)| format!(":{c}")).collect();
            Some((Level::Info, names.join("  ").into()))
        }
    }
}

/// Keeps a line that was run (not an empty one, not the same as the line before).
pub(super) fn remember(h: &mut CommandHistory, line: &str) {
    h.at = None;
    h.draft.clear();
    if line.is_empty() || h.entries.last().is_some_and(|l| l == line) {
        return;
    }
    h.entries.push(line.to_string());
    if h.entries.len() > KEPT {
        h.entries.remove(0);
    }
}

/// Up (`older`) or down through the history; past the newest line the draft comes back.
pub(super) fn walk(h: &mut CommandHistory, text: &mut String, older: bool) {
    let n = h.entries.len();
    if n == 0 {
        return;
    }
    let next = match (h.at, older) {
        (None, true) => {
            h.draft = text.clone();
            Some(n - 1)
        }
        (None, false) => None,
        (Some(i), true) => Some(i.saturating_sub(1)),
        (Some(i), false) if i + 1 < n => Some(i + 1),
        (Some(_), false) => None,
    };
    h.at = next;
    *text = match next {
        Some(i) => h.entries[i].clone(),
        None => std::mem::take(&mut h.draft),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completes_one_command_and_as_far_as_several_agree() {
        let mut t = "ve".to_string();
        assert_eq!(complete(&mut t), None);
        assert_eq!(t, "verify");
        let mut t = "ap".to_string();
        complete(&mut t);
        assert_eq!(t, "approval ", "a command with an argument gets its space");
        let mut t = "r".to_string();
        let n = complete(&mut t);
        assert_eq!(t, "run");
        assert_eq!(n.map(|n| n.1), Some(":run  :runs".into()));
        let mut t = "zz".to_string();
        assert_eq!(complete(&mut t).map(|n| n.0), Some(Level::Error));
        assert_eq!(t, "zz");
    }

    #[test]
    fn history_walks_back_and_forth_and_gives_the_draft_back() {
        let mut h = CommandHistory::default();
        remember(&mut h, "runs");
        remember(&mut h, "runs");
        remember(&mut h, "verify");
        assert_eq!(h.entries, ["runs", "verify"]);
        let mut t = "ru".to_string();
        walk(&mut h, &mut t, true);
        assert_eq!(t, "verify");
        walk(&mut h, &mut t, true);
        walk(&mut h, &mut t, true);
        assert_eq!(t, "runs", "stops at the oldest");
        walk(&mut h, &mut t, false);
        walk(&mut h, &mut t, false);
        assert_eq!(t, "ru", "the draft comes back past the newest");
    }
}
