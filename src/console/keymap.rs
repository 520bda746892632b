//! Actions (the keymap's vocabulary), default bindings, rebinding from TOML, and conflicts:
//! the user wins; a default key taken by a user binding is reported, two user bindings of one
//! key are an error naming the file and the key.

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

macro_rules! actions {
    ($($v:ident => $n:literal, $help:literal, [$($k:literal),*]);* $(;)?) => {
        /// Something a key can do.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Action { $($v),* }
        impl Action {
            pub const ALL: &'static [Action] = &[$(Action::$v),*];
            pub fn name(self) -> &'static str { match self { $(Action::$v => $n),* } }
            pub fn help(self) -> &'static str { match self { $(Action::$v => $help),* } }
            fn defaults(self) -> &'static [&'static str] { match self { $(Action::$v => &[$($k),*]),* } }
        }
    };
}

actions! {
    Up => "up", "move up", ["k", "up"];
    Down => "down", "move down", ["j", "down"];
    Top => "top", "go to the first row", ["g", "home"];
    Bottom => "bottom", "go to the last row", ["G", "end"];
    PageDown => "page_down", "one screen down", ["pagedown", "ctrl-f"];
    PageUp => "page_up", "one screen up", ["pageup", "ctrl-b"];
    HalfDown => "half_down", "half a screen down", ["ctrl-d"];
    HalfUp => "half_up", "half a screen up", ["ctrl-u"];
    Open => "open", "open the selected row", ["enter", "l"];
    Back => "back", "back to the previous screen", ["esc", "h"];
    Quit => "quit", "quit (at the first screen)", ["q"];
    Filter => "filter", "filter the list as you type", ["/"];
    NextMatch => "next_match", "next row of the filtered list (wraps)", ["n"];
    PrevMatch => "prev_match", "previous row of the filtered list (wraps)", ["N"];
    CommandLine => "command", "command line (:queue :runs :run ID :messages :verify :q)", [":"];
    Help => "help", "this help", ["?"];
    Approve => "approve", "approve the shown approval (asks to confirm)", ["a"];
    Reject => "reject", "reject the shown approval (asks for a reason)", ["r"];
    Deny => "deny", "deny: the call does not run, the agent is told your note", ["d"];
    CancelRun => "cancel_run", "cancel the run (asks for a reason)", ["x"];
    ResumeRun => "resume_run", "resume the run (asks to confirm)", ["R"];
    Copy => "copy", "copy the selected id or field (escaped)", ["y"];
    NextTab => "next_tab", "next tab", ["tab", "]"];
    PrevTab => "prev_tab", "previous tab", ["backtab", "["];
    Expand => "expand", "expand or fold the selected field", ["e"];
    Strict => "strict", "strict view: every non-ASCII code point escaped", ["s"];
    Inspect => "inspect", "code-point inspector for the selected field", ["i"];
    StatusFilter => "status_filter", "pick the run status filter", ["f"];
    Queue => "queue", "go to the approval queue", ["1"];
    Runs => "runs", "go to the runs", ["2"];
    Damaged => "damaged", "go to the damaged rows", ["3"];
    Refresh => "refresh", "read again now", ["ctrl-r"];
    Stats => "stats", "the queue's numbers: per tool, per reviewer, L* = c/(q·p)", ["4"];
    Sort => "sort", "sort the queue by its next order: age, tool, target, amount", ["o"];
    Mark => "mark", "mark or unmark the selected row (on the approval page: expand)", ["space"];
    MarkAll => "mark_all", "mark every row in the current filter (at most 500)", ["*"];
    ClearMarks => "clear_marks", "clear every mark", ["u"];
    DryRun => "dry_run", "in a bulk confirmation: say what would happen, change nothing", ["ctrl-t"];
}

/// A key with modifiers, comparable and printable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Chord {
    pub code: KeyCodeOrd,
    pub ctrl: bool,
    pub alt: bool,
}

/// The subset of key codes the keymap binds, orderable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyCodeOrd {
    Char(char),
    F(u8),
    Enter,
    Esc,
    Tab,
    BackTab,
    Backspace,
    Up,
    Down,
    Left,
    Right,
    Home,
    End,
    PageUp,
    PageDown,
    Delete,
    Insert,
}

impl Chord {
    pub fn from_event(k: &KeyEvent) -> Option<Chord> {
        use KeyCodeOrd as C;
        let code = match k.code {
            KeyCode::Char(c) => C::Char(c),
            KeyCode::F(n) => C::F(n),
            KeyCode::Enter => C::Enter,
            KeyCode::Esc => C::Esc,
            KeyCode::Tab => C::Tab,
            KeyCode::BackTab => C::BackTab,
            KeyCode::Backspace => C::Backspace,
            KeyCode::Up => C::Up,
            KeyCode::Down => C::Down,
            KeyCode::Left => C::Left,
            KeyCode::Right => C::Right,
            KeyCode::Home => C::Home,
            KeyCode::End => C::End,
            KeyCode::PageUp => C::PageUp,
            KeyCode::PageDown => C::PageDown,
            KeyCode::Delete => C::Delete,
            KeyCode::Insert => C::Insert,
            _ => return None,
        };
        Some(Chord {
            code,
            ctrl: k.modifiers.contains(KeyModifiers::CONTROL),
            alt: k.modifiers.contains(KeyModifiers::ALT),
        })
    }

    /// `a`, `G`, `ctrl-d`, `alt-x`, `enter`, `pagedown`, `f1`, `space`.
    pub fn parse(s: &str) -> Result<Chord, String> {
        use KeyCodeOrd as C;
        let (mut ctrl, mut alt, mut rest) = (false, false, s);
        loop {
            if let Some(r) = rest.strip_prefix("ctrl-") {
                ctrl = true;
                rest = r;
            } else if let Some(r) = rest.strip_prefix("alt-") {
                alt = true;
                rest = r;
            } else {
                break;
            }
        }
        let code = match rest {
            "enter" => C::Enter,
            "esc" => C::Esc,
            "tab" => C::Tab,
            "backtab" => C::BackTab,
            "backspace" => C::Backspace,
            "up" => C::Up,
            "down" => C::Down,
            "left" => C::Left,
            "right" => C::Right,
            "home" => C::Home,
            "end" => C::End,
            "pageup" | "pgup" => C::PageUp,
            "pagedown" | "pgdn" => C::PageDown,
            "delete" => C::Delete,
            "insert" => C::Insert,
            "space" => C::Char(' '),
            f if f.len() >= 2
                && f.starts_with('f')
                && f[1..].parse::<u8>().is_ok_and(|n| (1..=12).contains(&n)) =>
            {
                C::F(f[1..].parse().unwrap_or(1))
            }
            // A character the screens show escaped (a control, a bidi or invisible one) would
            // be drawn as nothing in the footer and the help.
            c if c.chars().count() == 1 && crate::safetext::shows_as_is(c) => {
                C::Char(c.chars().next().unwrap_or(' '))
            }
            _ => {
                return Err(format!(
                    "{} is not a key: use a character, ctrl-x, alt-x, enter, esc, tab, up, pagedown, f1...",
                    crate::safetext::quoted_line(s, 80)
                ));
            }
        };
        if ctrl && code == C::Char('c') {
            return Err("ctrl-c always quits and cannot be bound".into());
        }
        Ok(Chord { code, ctrl, alt })
    }
}

impl std::fmt::Display for Chord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use KeyCodeOrd as C;
        if self.ctrl {
            f.write_str("ctrl-")?;
        }
        if self.alt {
            f.write_str("alt-")?;
        }
        match self.code {
            C::Char(' ') => f.write_str("space"),
            C::Char(c) => write!(f, "{c}"),
            C::F(n) => write!(f, "f{n}"),
            C::Enter => f.write_str("enter"),
            C::Esc => f.write_str("esc"),
            C::Tab => f.write_str("tab"),
            C::BackTab => f.write_str("shift-tab"),
            C::Backspace => f.write_str("backspace"),
            C::Up => f.write_str("↑"),
            C::Down => f.write_str("↓"),
            C::Left => f.write_str("←"),
            C::Right => f.write_str("→"),
            C::Home => f.write_str("home"),
            C::End => f.write_str("end"),
            C::PageUp => f.write_str("pgup"),
            C::PageDown => f.write_str("pgdn"),
            C::Delete => f.write_str("del"),
            C::Insert => f.write_str("ins"),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("config file {file}: key `{key}`: {problem}")]
pub struct KeymapError {
    pub file: String,
    pub key: String,
    pub problem: String,
}

#[derive(Debug, Clone)]
pub struct Keymap {
    by_key: BTreeMap<Chord, Action>,
    /// Conflicts resolved in the user's favour, one sentence each, shown at start.
    pub warnings: Vec<String>,
}

impl Default for Keymap {
    fn default() -> Self {
        let mut by_key = BTreeMap::new();
        for a in Action::ALL {
            for k in a.defaults() {
                if let Ok(c) = Chord::parse(k) {
                    by_key.insert(c, *a);
                }
            }
        }
        Keymap {
            by_key,
            warnings: Vec::new(),
        }
    }
}

impl Keymap {
    pub fn action(&self, k: &KeyEvent) -> Option<Action> {
        let mut c = Chord::from_event(k)?;
        // Shifted letters arrive as the capital with SHIFT; the capital is the binding.
        if let KeyCodeOrd::Char(ch) = c.code {
            c.code = KeyCodeOrd::Char(ch);
        }
        self.by_key.get(&c).copied()
    }

    /// Keys bound to an action, in order.
    pub fn keys(&self, a: Action) -> Vec<Chord> {
        self.by_key
            .iter()
            .filter(|(_, v)| **v == a)
            .map(|(k, _)| *k)
            .collect()
    }

    /// The first key of an action as text, for hints (`?` when unbound).
    pub fn key(&self, a: Action) -> String {
        self.key_of(&[a])
    }

    /// The first key of any of `actions` as text, for a hint of keys that do one thing on a
    /// screen (on the approval page `mark` expands, as `expand` does).
    pub fn key_of(&self, actions: &[Action]) -> String {
        let ks: Vec<Chord> = self
            .by_key
            .iter()
            .filter(|(_, v)| actions.contains(v))
            .map(|(k, _)| *k)
            .collect();
        // Prefer enter/esc/tab, then a plain character, for hints.
        ks.iter()
            .find(|k| {
                matches!(
                    k.code,
                    KeyCodeOrd::Enter | KeyCodeOrd::Esc | KeyCodeOrd::Tab
                ) && !k.ctrl
            })
            .or_else(|| {
                ks.iter()
                    .find(|k| matches!(k.code, KeyCodeOrd::Char(_)) && !k.ctrl)
            })
            .or(ks.first())
            .map_or_else(|| "unbound".into(), |k| k.to_string())
    }

    /// Applies a `[keys]` table: `action = ["key", ...]` (or one string). The user's keys
    /// replace that action's defaults.
    pub fn with_overrides(file: &str, keys: &toml::Table) -> Result<Keymap, KeymapError> {
        let err = |key: String, problem: String| KeymapError {
            file: file.into(),
            key,
            problem,
        };
        let mut km = Keymap::default();
        let mut user: BTreeMap<Chord, Action> = BTreeMap::new();
        for (name, v) in keys {
            let key = format!("keys.{name}");
            let a = Action::ALL
                .iter()
                .copied()
                .find(|a| a.name() == name)
                .ok_or_else(|| {
                    err(
                        key.clone(),
                        "unknown action; `countersign` help (?) lists them".into(),
                    )
                })?;
            let list: Vec<&str> = match v {
                toml::Value::String(s) => vec![s.as_str()],
                toml::Value::Array(xs) => xs
                    .iter()
                    .map(|x| {
                        x.as_str().ok_or_else(|| {
                            err(key.clone(), "must be a key or a list of keys".into())
                        })
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err(err(key, "must be a key or a list of keys".into())),
            };
            km.by_key.retain(|_, v| *v != a);
            if list.is_empty() {
                km.warnings.push(format!(
                    "{file}: {key} = [] leaves {} with no key{}",
                    a.name(),
                    if a == Action::Quit {
                        " (ctrl-c still quits)"
                    } else {
                        ""
                    }
                ));
            }
            for s in list {
                let c = Chord::parse(s).map_err(|p| err(key.clone(), p))?;
                match user.get(&c) {
                    Some(other) if *other == a => {
                        return Err(err(key, format!("{c} is listed twice")));
                    }
                    Some(other) => {
                        return Err(err(key, format!("{c} is also bound to {}", other.name())));
                    }
                    None => {}
                }
                user.insert(c, a);
            }
        }
        let mut taken = Vec::new();
        for (c, a) in user {
            if let Some(prev) = km.by_key.insert(c, a)
                && prev != a
            {
                taken.push((c, prev, a));
            }
        }
        for (c, prev, a) in taken {
            // An action whose every key another took is left with none: refused unless the
            // file gives it keys of its own (or none, on purpose, by naming it).
            if !km.by_key.values().any(|v| *v == prev) && !keys.contains_key(prev.name()) {
                return Err(err(
                    format!("keys.{}", a.name()),
                    format!(
                        "{c} is {}'s only key; give {} another key in [keys] too",
                        prev.name(),
                        prev.name()
                    ),
                ));
            }
            km.warnings.push(format!(
                "{file}: key {c} now does {} (it did {}); {} keeps its other keys",
                a.name(),
                prev.name(),
                prev.name()
            ));
        }
        Ok(km)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    #[test]
    fn defaults_have_no_clashes() {
        let mut seen = BTreeMap::new();
        for a in Action::ALL {
            for k in a.defaults() {
                let c = Chord::parse(k).unwrap();
                assert!(seen.insert(c, *a).is_none(), "{k} bound twice");
            }
        }
        assert_eq!(Keymap::default().action(&key('j')), Some(Action::Down));
    }

    #[test]
    fn user_binding_wins_and_the_conflict_is_reported() {
        let t: toml::Table = "[keys]\napprove = [\"A\"]\nreject = \"j\"\n"
            .parse()
            .unwrap();
        let km = Keymap::with_overrides("c.toml", t["keys"].as_table().unwrap()).unwrap();
        assert_eq!(km.action(&key('A')), Some(Action::Approve));
        assert_eq!(
            km.action(&key('a')),
            None,
            "defaults of a rebound action are dropped"
        );
        assert_eq!(km.action(&key('j')), Some(Action::Reject));
        assert_eq!(km.warnings.len(), 1);
        assert!(
            km.warnings[0].contains("key j now does reject (it did down)"),
            "{:?}",
            km.warnings
        );
    }

    #[test]
    fn two_user_bindings_of_one_key_are_an_error_naming_file_and_key() {
        let t: toml::Table = "[keys]\napprove = \"z\"\nreject = \"z\"\n".parse().unwrap();
        let e = Keymap::with_overrides("c.toml", t["keys"].as_table().unwrap()).unwrap_err();
        assert_eq!(e.file, "c.toml");
        assert_eq!(e.key, "keys.reject");
        assert!(e.problem.contains("also bound to approve"));
        let t: toml::Table = "[keys]\nfly = \"z\"\n".parse().unwrap();
        let e = Keymap::with_overrides("c.toml", t["keys"].as_table().unwrap()).unwrap_err();
        assert_eq!(e.key, "keys.fly");
        let t: toml::Table = "[keys]\nquit = \"ctrl-c\"\n".parse().unwrap();
        assert!(Keymap::with_overrides("c.toml", t["keys"].as_table().unwrap()).is_err());
    }
}
