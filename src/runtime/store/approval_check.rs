//! Every approval's hash recomputed from what is stored (spec 4.2): the kind, the capability,
//! the presentation and the request as the row holds them. The same check serves SQLite's
//! `verify`, PostgreSQL's and `copy`'s (rows as they stream past).

use std::collections::HashMap;

use super::error::Ctx as _;
use super::{Store, StoreError};
use crate::runtime::json::approval_hash;

/// The last `approval.decided` event of each approval, by `(run id, approval id)`: its status
/// and, for a person's decision, its approver. Fed in seq order, so the last one stays.
#[derive(Debug, Clone, Default)]
pub struct Decisions(HashMap<(Vec<u8>, String), (String, Option<String>)>);

impl Decisions {
    /// Reads one `approval.decided` event's payload (one that does not decode is no decision).
    pub fn push(&mut self, run_id: &[u8], payload: &[u8]) {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(payload) else {
            return;
        };
        let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
        if let (Some(id), Some(status)) = (text("approval_id"), text("status")) {
            self.0.insert((run_id.to_vec(), id), (status, text("by")));
        }
    }
}

/// Approval hashes recomputed from the stored kind, capability, presentation and request, and
/// each approval's status compared with the decision its events record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalCheck {
    /// Approvals whose stored hash is the one their fields give.
    pub verified: i64,
    /// Approvals whose fields do not decode (a damaged row, listed as such): `(id, why)`.
    pub damaged: Vec<(String, String)>,
    /// Approvals whose fields decode to another hash than the stored one.
    pub mismatched: Vec<String>,
    /// Approvals whose stored status (or approver) is not what their last `approval.decided`
    /// event records: a pending one with a decision, a decided one with none or another, an
    /// approver another than the event's (changed behind the runtime's back: by hand, by a
    /// trigger; found from outside). `(id, why)`. Not filled by `copy`.
    pub unrecorded: Vec<(String, String)>,
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

impl ApprovalCheck {
    /// Compares one approval's stored status and approver with its last decision in `d`. A
    /// row whose fields are not UTF-8 is left to the hash check, which lists it as damaged.
    pub fn push_decision(
        &mut self,
        d: &Decisions,
        run_id: &[u8],
        id: &[u8],
        status: &[u8],
        decided_by: &[u8],
    ) {
        let (Ok(id), Ok(status), Ok(by)) = (
            std::str::from_utf8(id),
            std::str::from_utf8(status),
            std::str::from_utf8(decided_by),
        ) else {
            return;
        };
        let why = match (status, d.0.get(&(run_id.to_vec(), id.to_string()))) {
            ("pending", None) => return,
            ("pending", Some((s, _))) => {
                format!("stored as pending, but its approval.decided event says {s}")
            }
            (st, None) => {
                format!("stored as {st}, but no approval.decided event records a decision of it")
            }
            (st, Some((s, _))) if s != st => {
                format!("stored as {st}, but its last approval.decided event says {s}")
            }
            (_, Some((_, Some(named)))) if named != by => {
                "its approver is not the one its approval.decided event names".to_string()
            }
            _ => return,
        };
        self.unrecorded.push((id.to_string(), why));
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
                    break;
                }
            }
            let mut decisions = Decisions::default();
            let mut stmt = c
                .prepare(
                    "SELECT CAST(run_id AS BLOB), CAST(payload_json AS BLOB) FROM events \
                     WHERE type = 'approval.decided' ORDER BY seq",
                )
                .ctx("verify decisions")?;
            let mut rows = stmt.query([]).ctx("verify decisions")?;
            while let Some(r) = rows.next().ctx("verify decisions")? {
                let col = |i: usize| -> Result<Vec<u8>, StoreError> {
                    Ok(r.get::<_, Option<Vec<u8>>>(i)
                        .ctx("verify decisions")?
                        .unwrap_or_default())
                };
                decisions.push(&col(0)?, &col(1)?);
            }
            let mut stmt = c
                .prepare(
                    "SELECT CAST(run_id AS BLOB), CAST(id AS BLOB), CAST(status AS BLOB), \
                     CAST(decided_by AS BLOB) FROM approvals ORDER BY rowid",
                )
                .ctx("verify decisions")?;
            let mut rows = stmt.query([]).ctx("verify decisions")?;
            while let Some(r) = rows.next().ctx("verify decisions")? {
                let col = |i: usize| -> Result<Vec<u8>, StoreError> {
                    Ok(r.get::<_, Option<Vec<u8>>>(i)
                        .ctx("verify decisions")?
                        .unwrap_or_default())
                };
                check.push_decision(&decisions, &col(0)?, &col(1)?, &col(2)?, &col(3)?);
            }
            Ok(check)
        })
    }
}
