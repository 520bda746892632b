//! A whole-database write for `countersign copy` (crate-internal): one `BEGIN IMMEDIATE`
//! transaction on the store's hardened connection, handed over raw because a copy writes rows
//! as they were stored elsewhere, rowids included, and checks them before it commits.

use super::Store;
use super::error::{Ctx, StoreError};

impl Store {
    /// Runs `f` in one `BEGIN IMMEDIATE` transaction; commits when it returns `Ok(Ok(_))`,
    /// rolls back otherwise.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn raw_write<T, E>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, E>,
    ) -> Result<Result<T, E>, StoreError> {
        if self.read_only {
            return Err(StoreError::Invalid(format!(
                "{} was opened read-only; open it for writing to change it",
                self.path.display()
            )));
        }
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .ctx("copy: begin")?;
        let out = f(&tx);
        if out.is_ok() {
            tx.commit().ctx("copy: commit")?;
        }
        Ok(out)
    }
}
