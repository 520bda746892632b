//! Binding ids as TEXT with their stored bytes (see [`crate::runtime::types::Key`]): a lookup
//! by a key that is not UTF-8 finds exactly the row holding those bytes, and the index on the
//! column still serves it (the bound value is TEXT, as stored, not a BLOB).

use std::fmt;

use rusqlite::ToSql;
use rusqlite::types::{ToSqlOutput, ValueRef};

use crate::runtime::types::AsKey;

/// An id's bytes bound as TEXT. Displays lossily (Go's one U+FFFD per invalid byte): for
/// messages only.
#[derive(Clone, Copy)]
pub(crate) struct Text<'a>(pub &'a [u8]);

impl Text<'_> {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The id's bytes, to bind.
pub(crate) fn key<K: AsKey + ?Sized>(k: &K) -> Text<'_> {
    Text(k.key_bytes())
}

impl ToSql for Text<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(self.0)))
    }
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::runtime::types::lossy(self.0))
    }
}

impl AsKey for Text<'_> {
    fn key_bytes(&self) -> &[u8] {
        self.0
    }
}
