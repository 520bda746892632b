//! A run named by a unique prefix of its id (issue 15 item 8). Every command taking a run
//! accepts one: an exact id always wins; a prefix of exactly one run's id names that run; a
//! prefix of several is a usage error (exit 2) listing them, escaped, so the person types more;
//! a prefix of none is passed on, and the command says the run is not found.

use std::path::Path;

use super::CommandError;
use super::cli::Command;
use super::open::{fail, open};
use super::text::ident;
use crate::runtime::types::Key;

/// How many candidates an ambiguous prefix names.
pub const NAMED: usize = 20;

/// The run argument of `cmd`, when it takes one.
pub fn run_arg(cmd: &mut Command) -> Option<&mut Key> {
    match cmd {
        Command::Show(a) | Command::Events(a) => Some(&mut a.run),
        Command::Approve(a) => Some(&mut a.run),
        Command::Reject(a) | Command::Deny(a) => a.select.run.as_mut(),
        Command::Cancel(a) => a.select.run.as_mut(),
        Command::Resume(a) => Some(&mut a.run),
        Command::Recheck(a) => Some(&mut a.run),
        _ => None,
    }
}

/// The run `given` names in `db`: itself, or the one run whose id it starts.
pub fn resolve(db: &Path, given: &Key) -> Result<Key, CommandError> {
    #[cfg(feature = "postgres")]
    if let Some(url) = db.to_str().filter(|s| crate::pgstore::is_pg_url(s)) {
        let url = crate::pgstore::PgUrl::parse(url)
            .map_err(|e| CommandError::Usage(super::text::clean(&e.to_string(), 600)))?;
        let store = crate::pgstore::PgStore::open_existing(&url)
            .map_err(|e| CommandError::Failed(super::text::clean(&e.to_string(), 4000)))?;
        let found = store
            .runs_with_prefix(given.as_bytes(), (NAMED + 1) as u32)
            .map_err(fail)?;
        return pick(given, found);
    }
    let store = open(db, false)?;
    let found = store
        .runs_with_prefix(given.as_bytes(), (NAMED + 1) as u32)
        .map_err(fail)?;
    pick(given, found)
}

/// The run `given` names among the ids `found` that start with it (at most `NAMED + 1`).
fn pick(given: &Key, found: Vec<Key>) -> Result<Key, CommandError> {
    if found.iter().any(|k| k == given) {
        return Ok(given.clone());
    }
    match found.as_slice() {
        [] => Ok(given.clone()),
        [one] => Ok(one.clone()),
        many => {
            let named: Vec<String> = many
                .iter()
                .take(NAMED)
                .map(|k| ident(k.as_bytes(), 64))
                .collect();
            let count = if many.len() > NAMED {
                format!("more than {NAMED}")
            } else {
                many.len().to_string()
            };
            Err(CommandError::Usage(format!(
                "run {} is the start of {count} run ids: {}{}; type more of the id",
                ident(given.as_bytes(), 64),
                named.join(", "),
                if many.len() > NAMED { ", ..." } else { "" }
            )))
        }
    }
}
