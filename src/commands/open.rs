//! Opening the run database for a command: never creates or migrates; read-only for reading
//! commands. Store errors are already one sentence naming the path and the fix.

use std::path::Path;

use super::CommandError;
use crate::runtime::store::{Store, StoreError};

/// Opens an existing database (read-only unless `write`).
pub fn open(path: &Path, write: bool) -> Result<Store, CommandError> {
    Store::open_existing(path, !write).map_err(fail)
}

/// A store error as a command failure (exit 1).
pub fn fail(e: StoreError) -> CommandError {
    CommandError::Failed(crate::commands::text::clean(&e.to_string(), 4000))
}
