//! Commands printed for a person to copy: the shell words are `safetext::shell`'s (shared
//! with the MCP proxy's operator lines); this adds the stored bytes of a row's column.

pub use crate::safetext::shell::*;

use crate::runtime::types::RawInvalid;

/// The stored bytes of a column: the raw bytes when the stored text was not UTF-8.
pub fn stored<'a>(raw_invalid: &'a RawInvalid, column: &str, text: &'a str) -> &'a [u8] {
    crate::runtime::types::stored(raw_invalid, column, text)
}
