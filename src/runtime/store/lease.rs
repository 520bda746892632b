//! The dedicated lease connection (spec 7): renew and release, writing no events.

use rusqlite::{Connection, params};

use super::error::{Ctx, StoreError};
use crate::runtime::types::Timestamp;

/// The dedicated lease connection (renew/release; writes no events).
pub struct LeaseHandle {
    conn: std::sync::Mutex<Connection>,
}

impl LeaseHandle {
    pub(crate) fn new(conn: Connection) -> LeaseHandle {
        LeaseHandle {
            conn: std::sync::Mutex::new(conn),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `UPDATE runs SET lease_expires_at=? WHERE id=? AND lease_owner=?`; false = lease lost.
    pub fn renew(
        &self,
        run_id: &str,
        owner: &str,
        expires_at: Timestamp,
    ) -> Result<bool, StoreError> {
        let n = self
            .lock()
            .execute(
                "UPDATE runs SET lease_expires_at=? WHERE id=? AND lease_owner=?",
                params![expires_at.to_rfc3339(), run_id, owner],
            )
            .ctx("renew lease")?;
        Ok(n == 1)
    }

    /// `UPDATE runs SET lease_owner='', lease_expires_at='' WHERE id=? AND lease_owner=?`.
    pub fn release(&self, run_id: &str, owner: &str) -> Result<bool, StoreError> {
        let n = self
            .lock()
            .execute(
                "UPDATE runs SET lease_owner='', lease_expires_at='' WHERE id=? AND lease_owner=?",
                params![run_id, owner],
            )
            .ctx("release lease")?;
        Ok(n == 1)
    }
}
