//! Ids as stored. SQLite TEXT holds whatever bytes a writer gave it, and agentrt's callers
//! choose run ids (a Go string may hold any bytes), so a run id, approval id or step id may
//! not be UTF-8. Such an id is a lookup key: it is kept as its stored bytes ([`Key`]) and bound
//! back as TEXT with exactly those bytes, never through a lossy `String` (two ids differing
//! only in their invalid bytes would become one).

use std::borrow::Cow;
use std::fmt;

/// The stored bytes of an id column (run, approval or step id).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Key(Vec<u8>);

impl Key {
    /// A key of these bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Key {
        Key(bytes.into())
    }

    /// The stored bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The stored bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    /// The id as text when it is UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// Whether the id has no bytes (a column stored as '').
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The id as Go's `encoding/json` writes it: one U+FFFD per byte that is not part of a
    /// valid UTF-8 sequence. For messages and JSON only, never for a lookup.
    pub fn lossy(&self) -> Cow<'_, str> {
        lossy(&self.0)
    }
}

/// `bytes` as text with one U+FFFD per invalid byte (Go's replacement, which
/// `String::from_utf8_lossy` is not: it replaces a maximal invalid subpart once).
pub fn lossy(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(s);
    }
    let mut s = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        s.push_str(chunk.valid());
        for _ in chunk.invalid() {
            s.push('\u{fffd}');
        }
    }
    Cow::Owned(s)
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key(\"{}\")", self.0.escape_ascii())
    }
}

impl From<&str> for Key {
    fn from(s: &str) -> Key {
        Key(s.as_bytes().to_vec())
    }
}

impl From<String> for Key {
    fn from(s: String) -> Key {
        Key(s.into_bytes())
    }
}

impl From<Vec<u8>> for Key {
    fn from(b: Vec<u8>) -> Key {
        Key(b)
    }
}

impl From<&[u8]> for Key {
    fn from(b: &[u8]) -> Key {
        Key(b.to_vec())
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl std::borrow::Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

impl PartialEq<str> for Key {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for Key {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

/// What a store lookup takes as an id: its bytes, bound as TEXT. Text ids (`&str`, `String`)
/// and stored ids ([`Key`], bytes) alike.
pub trait AsKey {
    /// The id's bytes exactly as they are bound.
    fn key_bytes(&self) -> &[u8];
}

impl AsKey for str {
    fn key_bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsKey for String {
    fn key_bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsKey for [u8] {
    fn key_bytes(&self) -> &[u8] {
        self
    }
}

impl AsKey for Vec<u8> {
    fn key_bytes(&self) -> &[u8] {
        self
    }
}

impl AsKey for Key {
    fn key_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl<T: AsKey + ?Sized> AsKey for &T {
    fn key_bytes(&self) -> &[u8] {
        (**self).key_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lossy_replaces_each_invalid_byte_as_go_does() {
        assert_eq!(lossy(b"t-\xe6\x97x"), "t-\u{fffd}\u{fffd}x");
        assert_eq!(lossy(b"t-\xff"), "t-\u{fffd}");
        assert_eq!(lossy("é".as_bytes()), "é");
        assert_ne!(Key::new(b"t-\xff".to_vec()), Key::new(b"t-\xfe".to_vec()));
    }
}
