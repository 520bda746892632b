//! Messages that name ids. A run, approval or step id is its stored bytes ([`Key`]), which need
//! not be UTF-8; an error message built inside the runtime is text around such ids. [`Said`]
//! keeps the two apart: its `Display` is the message as agentrt prints it (one U+FFFD per
//! invalid byte of an id, [`lossy`]), and [`Said::bytes`] is the message with each id's stored
//! bytes, for a caller that shows bytes through a sanitiser (`\xNN`) so that a person reads the
//! id that is stored, never its lossy form (which may be another run's id). The runtime never
//! renders the bytes itself: it does not depend on the sanitiser.

use std::fmt;

use super::key::{AsKey, Key, lossy};

/// A message of text pieces and ids as stored. Build it with [`Said::from`] and
/// [`Said::id`] / [`Said::text`] / [`Said::and`].
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Said(Vec<Piece>);

#[derive(Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Id(Key),
    /// A command for a person to paste: shell words, printable ASCII only, shown as they are
    /// (an escaper would double their backslashes and make the paste run something else).
    Command(String),
}

impl Said {
    /// An empty message.
    pub fn new() -> Said {
        Said(Vec::new())
    }

    /// This message followed by `text`.
    pub fn text(mut self, text: impl AsRef<str>) -> Said {
        let text = text.as_ref();
        if text.is_empty() {
            return self;
        }
        match self.0.last_mut() {
            Some(Piece::Text(t)) => t.push_str(text),
            _ => self.0.push(Piece::Text(text.to_string())),
        }
        self
    }

    /// This message followed by an id, kept as its stored bytes.
    pub fn id(mut self, id: impl AsKey) -> Said {
        self.0.push(Piece::Id(Key::new(id.key_bytes())));
        self
    }

    /// This message followed by a command a person may paste (shell words that read back the
    /// bytes they name, e.g. `safetext::shell::word`'s): kept apart so that a renderer shows it
    /// as it is, never through the terminal escaper. Anything but printable ASCII in it is kept
    /// as text instead (and so escaped).
    pub fn command(mut self, cmd: impl AsRef<str>) -> Said {
        let cmd = cmd.as_ref();
        if cmd.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            self.0.push(Piece::Command(cmd.to_string()));
            self
        } else {
            self.text(cmd)
        }
    }

    /// This message followed by another (its ids kept as bytes).
    pub fn and(mut self, more: &Said) -> Said {
        for p in &more.0 {
            self = match p {
                Piece::Text(t) => self.text(t),
                Piece::Id(k) => self.id(k),
                Piece::Command(c) => self.command(c),
            };
        }
        self
    }

    /// `message` with each of `paths` that is not UTF-8 put back as its bytes where its lossy
    /// form (`Path::display`: U+FFFD per bad sequence) stands, so that a sanitiser shows the
    /// name's bytes (`\xff`) rather than a character no file is called (and two names alike).
    pub fn with_paths(message: &str, paths: &[&std::path::Path]) -> Said {
        use std::os::unix::ffi::OsStrExt;
        let Some(p) = paths.iter().find(|p| p.to_str().is_none()) else {
            return Said::from(message);
        };
        let lossy = p.to_string_lossy();
        let rest: Vec<&std::path::Path> = paths.iter().copied().filter(|q| q != p).collect();
        let mut out = Said::new();
        for (i, part) in message.split(lossy.as_ref()).enumerate() {
            if i > 0 {
                out = out.id(p.as_os_str().as_bytes());
            }
            out = out.and(&Said::with_paths(part, &rest));
        }
        out
    }

    /// [`Said::with_paths`] over each text piece of this message (ids and commands kept).
    pub fn naming(&self, paths: &[&std::path::Path]) -> Said {
        let mut out = Said::new();
        for p in &self.0 {
            out = match p {
                Piece::Text(t) => out.and(&Said::with_paths(t, paths)),
                Piece::Id(k) => out.id(k),
                Piece::Command(c) => out.command(c),
            };
        }
        out
    }

    /// Whether the message says nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether every id in it is UTF-8 (the message then is exactly its `Display`).
    pub fn is_utf8(&self) -> bool {
        self.0.iter().all(|p| match p {
            Piece::Text(_) => true,
            Piece::Id(k) => k.as_str().is_some(),
            Piece::Command(_) => true,
        })
    }

    /// The message with each id's stored bytes in place: for a sanitiser that shows invalid
    /// bytes as `\xNN`. Equal to the `Display` text when every id is UTF-8. (Text pieces are
    /// UTF-8 and begin on a character boundary, so an id's stray bytes never join the text
    /// beside it into another character.)
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for p in &self.0 {
            match p {
                Piece::Text(t) | Piece::Command(t) => out.extend_from_slice(t.as_bytes()),
                Piece::Id(k) => out.extend_from_slice(k.as_bytes()),
            }
        }
        out
    }

    /// The message for a terminal: each run of text and ids (as their stored bytes) through
    /// `escape`, each command as it is.
    pub fn render_escaped(&self, mut escape: impl FnMut(&[u8]) -> String) -> String {
        let mut out = String::new();
        let mut run: Vec<u8> = Vec::new();
        for p in &self.0 {
            match p {
                Piece::Text(t) => run.extend_from_slice(t.as_bytes()),
                Piece::Id(k) => run.extend_from_slice(k.as_bytes()),
                Piece::Command(c) => {
                    if !run.is_empty() {
                        out.push_str(&escape(&run));
                        run.clear();
                    }
                    out.push_str(c);
                }
            }
        }
        if !run.is_empty() {
            out.push_str(&escape(&run));
        }
        out
    }

    /// The message with each piece rendered by the caller: text through `text`, ids (their
    /// stored bytes) through `id`.
    pub fn render(
        &self,
        mut text: impl FnMut(&str) -> String,
        mut id: impl FnMut(&[u8]) -> String,
    ) -> String {
        let mut out = String::new();
        for p in &self.0 {
            match p {
                Piece::Text(t) | Piece::Command(t) => out.push_str(&text(t)),
                Piece::Id(k) => out.push_str(&id(k.as_bytes())),
            }
        }
        out
    }
}

impl fmt::Display for Said {
    /// The message as agentrt prints it: an id that is not UTF-8 with one U+FFFD per invalid
    /// byte.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.0 {
            match p {
                Piece::Text(t) | Piece::Command(t) => f.write_str(t)?,
                Piece::Id(k) => f.write_str(&lossy(k.as_bytes()))?,
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Said {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Said(\"{}\")", self.bytes().escape_ascii())
    }
}

impl From<&str> for Said {
    fn from(s: &str) -> Said {
        Said::new().text(s)
    }
}

impl From<String> for Said {
    fn from(s: String) -> Said {
        Said::new().text(s)
    }
}

impl From<&String> for Said {
    fn from(s: &String) -> Said {
        Said::new().text(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_lossy_and_bytes_keep_each_id_as_stored() {
        let s = Said::from("run ")
            .id(b"t-\xff\\x".as_slice())
            .text(" is ")
            .text("CANCELLED");
        assert_eq!(s.to_string(), "run t-\u{fffd}\\x is CANCELLED");
        assert_eq!(s.bytes(), b"run t-\xff\\x is CANCELLED");
        assert!(!s.is_utf8());
        assert_eq!(
            s.render(|t| t.to_uppercase(), |b| format!("<{}>", b.escape_ascii())),
            "RUN <t-\\xff\\\\x> IS CANCELLED"
        );
        // A UTF-8 id: the bytes are the text.
        let u = Said::from("approval ").id("a-é").text(" of run ").id("r");
        assert!(u.is_utf8());
        assert_eq!(u.bytes(), u.to_string().as_bytes());
        // Appending keeps the ids' bytes.
        let both = Said::from("agentrt: not found: ").and(&s);
        assert_eq!(
            both.bytes(),
            b"agentrt: not found: run t-\xff\\x is CANCELLED"
        );
        assert_eq!(Said::from(String::new()), Said::new());
        assert!(Said::new().is_empty());
    }
}
