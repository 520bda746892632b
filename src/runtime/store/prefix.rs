//! Runs named by a prefix of their id (issue 15 item 8): ids a person can type. The prefix is
//! matched on the stored bytes through the primary key's index (BINARY collation compares
//! bytes, so `prefix <= id < prefix+1` is exactly the ids starting with those bytes).

use rusqlite::params;

use super::Store;
use super::bind::key;
use super::error::{Ctx, StoreError};
use crate::runtime::types::Key;

/// The smallest byte string greater than every string starting with `p`, or `None` when
/// there is none (`p` is all 0xFF bytes).
fn after_prefix(p: &[u8]) -> Option<Vec<u8>> {
    let mut v = p.to_vec();
    while let Some(last) = v.pop() {
        if last < 0xFF {
            v.push(last + 1);
            return Some(v);
        }
    }
    None
}

impl Store {
    /// At most `limit` run ids starting with `prefix`, in id order (an exact id included).
    pub fn runs_with_prefix(&self, prefix: &[u8], limit: u32) -> Result<Vec<Key>, StoreError> {
        let prefix = Key::new(prefix.to_vec());
        let upper = after_prefix(prefix.as_bytes()).map(Key::new);
        self.read(|conn| {
            let read = |r: &rusqlite::Row<'_>| -> rusqlite::Result<Key> {
                Ok(Key::new(match r.get_ref(0)? {
                    rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => {
                        b.to_vec()
                    }
                    _ => Vec::new(),
                }))
            };
            let mut out = Vec::new();
            match &upper {
                Some(u) => {
                    let mut st = conn
                        .prepare_cached(
                            "SELECT id FROM runs WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
                        )
                        .ctx("runs by prefix")?;
                    for row in st
                        .query_map(params![key(&prefix), key(u), limit], read)
                        .ctx("runs by prefix")?
                    {
                        out.push(row.ctx("runs by prefix")?);
                    }
                }
                None => {
                    let mut st = conn
                        .prepare_cached("SELECT id FROM runs WHERE id >= ? ORDER BY id LIMIT ?")
                        .ctx("runs by prefix")?;
                    for row in st
                        .query_map(params![key(&prefix), limit], read)
                        .ctx("runs by prefix")?
                    {
                        out.push(row.ctx("runs by prefix")?);
                    }
                }
            }
            // A row stored as a BLOB or with another type sorts elsewhere; keep only true
            // prefixes.
            out.retain(|k| k.as_bytes().starts_with(prefix.as_bytes()));
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::after_prefix;

    #[test]
    fn the_upper_bound_is_the_next_byte_string() {
        assert_eq!(after_prefix(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(after_prefix(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(after_prefix(b"\xff\xff"), None);
        assert_eq!(after_prefix(b""), None);
    }
}
