//! Every approval's hash recomputed from what is stored (spec 4.2): the kind, the capability,
//! the presentation and the request as the row holds them. The same check serves SQLite's
//! `verify`, PostgreSQL's and `copy`'s (rows as they stream past).

use super::error::Ctx as _;
use super::{Store, StoreError};
use crate::runtime::json::approval_hash;

/// Approval hashes recomputed from the stored kind, capability, presentation and request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalCheck {
    /// Approvals whose stored hash is the one their fields give.
    pub verified: i64,
    /// Approvals whose fields do not decode (a damaged row, listed as such): `(id, why)`.
    pub damaged: Vec<(String, String)>,
    /// Approvals whose fields decode to another hash than the stored one.
    pub mismatched: Vec<String>,
}

impl ApprovalCheck {
    /// Checks one approval row.
    pub fn push(&mut self, id: &str, kind: &str, cap: &str, pres: &str, req: &str, hash: &str) {
        match approval_hash(kind, cap.as_bytes(), pres.as_bytes(), req.as_bytes()) {
            Ok(h) if h == hash => self.verified += 1,
            Ok(_) => self.mismatched.push(id.to_string()),
            Err(e) => self.damaged.push((id.to_string(), e.to_string())),
        }
    }

    /// Checks one approval row as SQLite stores it (any column may be bytes that are not
    /// UTF-8, which agentrt never writes: such a row is damaged). The id is named lossily.
    pub fn push_bytes(&mut self, id: &[u8], fields: [&[u8]; 5]) {
        let id = String::from_utf8_lossy(id);
        let names = [
            "kind",
            "capability_json",
            "presentation_json",
            "request_json",
            "hash",
        ];
        let mut text = Vec::with_capacity(5);
        for (name, bytes) in names.iter().zip(fields) {
            match std::str::from_utf8(bytes) {
                Ok(t) => text.push(t),
                Err(_) => {
                    self.damaged
                        .push((id.into_owned(), format!("its {name} is not UTF-8")));
                    return;
                }
            }
        }
        self.push(&id, text[0], text[1], text[2], text[3], text[4]);
    }
}

/// Rows read a query at a time (each row is read and dropped before the next: a request may
/// be large).
const PAGE: i64 = 32;

impl Store {
    /// Every approval's hash, in insertion order, recomputed from its stored bytes.
    pub fn verify_approvals(&self) -> Result<ApprovalCheck, StoreError> {
        self.read(|c| {
            let mut check = ApprovalCheck::default();
            let mut cursor = i64::MIN;
            loop {
                let mut stmt = c
                    .prepare_cached(
                        "SELECT rowid, CAST(id AS BLOB), CAST(kind AS BLOB), \
                         CAST(capability_json AS BLOB), CAST(presentation_json AS BLOB), \
                         CAST(request_json AS BLOB), CAST(hash AS BLOB) \
                         FROM approvals WHERE rowid > ? ORDER BY rowid LIMIT ?",
                    )
                    .ctx("verify approvals")?;
                let mut rows = stmt.query([cursor, PAGE]).ctx("verify approvals")?;
                let mut read = 0;
                while let Some(r) = rows.next().ctx("verify approvals")? {
                    read += 1;
                    cursor = r.get(0).ctx("verify approvals")?;
                    let col = |i: usize| -> Result<Vec<u8>, StoreError> {
                        Ok(r.get::<_, Option<Vec<u8>>>(i)
                            .ctx("verify approvals")?
                            .unwrap_or_default())
                    };
                    let id = col(1)?;
                    let f = [col(2)?, col(3)?, col(4)?, col(5)?, col(6)?];
                    check.push_bytes(&id, [&f[0], &f[1], &f[2], &f[3], &f[4]]);
                }
                if read == 0 {
                    return Ok(check);
                }
            }
        })
    }
}
