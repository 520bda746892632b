//! A column read whatever SQLite stored in it: the stats scan and `watch` read damaged rows
//! too, so a column's bytes are taken from any type, never decoded as the schema says.

use rusqlite::types::ValueRef;

/// A column's bytes whatever its type (NULL is empty).
pub(super) fn bytes(v: ValueRef<'_>) -> Vec<u8> {
    match v {
        ValueRef::Null => Vec::new(),
        ValueRef::Integer(i) => i.to_string().into_bytes(),
        ValueRef::Real(f) => f.to_string().into_bytes(),
        ValueRef::Text(b) | ValueRef::Blob(b) => b.to_vec(),
    }
}

/// A column's bytes, `None` for NULL.
pub(super) fn opt_bytes(v: ValueRef<'_>) -> Option<Vec<u8>> {
    match v {
        ValueRef::Null => None,
        other => Some(bytes(other)),
    }
}

/// A column as text when it is text (lossless for UTF-8; `None` for NULL).
pub(super) fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Null => None,
        other => Some(String::from_utf8_lossy(&bytes(other)).into_owned()),
    }
}

/// SQL reading top-level member `key` of the JSON text `doc` as Go's decoder reads it: the
/// last of two members with that name (`json_extract(doc, '$.key')` takes the first, so a
/// decision repeating `tool` would name one tool here and another to the runtime). `doc` must
/// be valid JSON where this is evaluated (a `CASE WHEN json_valid(doc)` guard); `key` is a
/// literal of this crate.
pub(super) fn last_member(doc: &str, key: &str) -> String {
    format!("(SELECT value FROM json_each({doc}) WHERE key = '{key}' ORDER BY id DESC LIMIT 1)")
}
