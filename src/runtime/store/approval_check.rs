//! Every approval's hash recomputed from what is stored (spec 4.2): the kind, the capability,
//! the presentation and the request as the row holds them. The same check serves SQLite's
//! `verify`, PostgreSQL's and `copy`'s (rows as they stream past).

use std::collections::HashMap;

use super::error::Ctx as _;
use super::{Store, StoreError};
use crate::runtime::json::approval_hash;

/// What one `approval.decided` event records: its status, its step and, for a person's
/// decision, the approver and the note.
#[derive(Debug, Clone)]
struct Decided {
    status: String,
    step_id: Vec<u8>,
    by: Option<String>,
    note: Option<String>,
    at: Vec<u8>,
}

/// The last `approval.decided` event of each approval, by `(run id, approval id)`. Fed in seq
/// order, so the last one stays.
#[derive(Debug, Clone, Default)]
pub struct Decisions(HashMap<(Vec<u8>, String), Decided>);

impl Decisions {
    /// Reads one `approval.decided` event (a payload that does not decode is no decision).
    pub fn push(&mut self, run_id: &[u8], step_id: &[u8], at: &[u8], payload: &[u8]) {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(payload) else {
            return;
        };
        let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
        if let (Some(id), Some(status)) = (text("approval_id"), text("status")) {
            let d = Decided {
                status,
                step_id: step_id.to_vec(),
                by: text("by"),
                note: text("note"),
                at: at.to_vec(),
            };
            self.0.insert((run_id.to_vec(), id), d);
        }
    }
}

/// One approval row as `verify` compares it with its decision: all as stored.
pub struct ApprovalRow<'a> {
    /// Its run.
    pub run_id: &'a [u8],
    /// Its id.
    pub id: &'a [u8],
    /// Its step.
    pub step_id: &'a [u8],
    /// Its status.
    pub status: &'a [u8],
    /// Who decided it.
    pub decided_by: &'a [u8],
    /// The decision's note.
    pub note: &'a [u8],
    /// When it was decided.
    pub decided_at: &'a [u8],
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

impl<'a> ApprovalRow<'a> {
    /// The row from its columns in this order: run, id, step, status, approver, note,
    /// decided at.
    pub fn of(f: &'a [Vec<u8>; 7]) -> ApprovalRow<'a> {
        ApprovalRow {
            run_id: &f[0],
            id: &f[1],
            step_id: &f[2],
            status: &f[3],
            decided_by: &f[4],
            note: &f[5],
            decided_at: &f[6],
        }
    }
}

impl ApprovalCheck {
    /// Compares one approval's stored status, step, approver and note with its last decision
    /// in `d`. A row whose fields are not UTF-8 is left to the hash check, which lists it as
    /// damaged.
    pub fn push_decision(&mut self, d: &Decisions, row: &ApprovalRow<'_>) {
        let text = |b: &[u8]| std::str::from_utf8(b).map(str::to_string);
        let (Ok(id), Ok(status), Ok(by), Ok(note)) = (
            text(row.id),
            text(row.status),
            text(row.decided_by),
            text(row.note),
        ) else {
            return;
        };
        let why = match (status.as_str(), d.0.get(&(row.run_id.to_vec(), id.clone()))) {
            ("pending", None) => return,
            ("pending", Some(e)) => {
                format!(
                    "stored as pending, but its approval.decided event says {}",
                    e.status
                )
            }
            (st, None) => {
                format!("stored as {st}, but no approval.decided event records a decision of it")
            }
            (st, Some(e)) if e.status != st => {
                format!(
                    "stored as {st}, but its last approval.decided event says {}",
                    e.status
                )
            }
            (_, Some(e)) if e.step_id != row.step_id => {
                "its approval.decided event names another step".to_string()
            }
            (_, Some(e)) if e.by.as_ref().is_some_and(|named| *named != by) => {
                "its approver is not the one its approval.decided event names".to_string()
            }
            (_, Some(e)) if e.note.as_ref().is_some_and(|said| *said != note) => {
                "its note is not the one its approval.decided event records".to_string()
            }
            // A person's decision: its time is the row's (a grant's time to live runs from it).
            (_, Some(e)) if e.by.is_some() && same_time(&e.at, row.decided_at) == Some(false) => {
                "its decision time is not the one its approval.decided event records".to_string()
            }
            _ => return,
        };
        self.unrecorded.push((id, why));
    }
}

/// Whether two stored times are the same instant (`None` when either does not parse).
fn same_time(a: &[u8], b: &[u8]) -> Option<bool> {
    let t = |x: &[u8]| {
        std::str::from_utf8(x)
            .ok()
            .and_then(|x| crate::runtime::types::Timestamp::parse(x).ok())
    };
    Some(t(a)? == t(b)?)
}

/// Column `i` of a row as its stored bytes (NULL: none).
fn blob(r: &rusqlite::Row<'_>, i: usize, what: &str) -> Result<Vec<u8>, StoreError> {
    Ok(r.get::<_, Option<Vec<u8>>>(i)
        .ctx(what)?
        .unwrap_or_default())
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
                    let col = |i: usize| blob(r, i, "verify approvals");
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
                    "SELECT CAST(run_id AS BLOB), CAST(step_id AS BLOB), CAST(at AS BLOB), \
                     CAST(payload_json AS BLOB) FROM events \
                     WHERE type = 'approval.decided' ORDER BY seq",
                )
                .ctx("verify decisions")?;
            let mut rows = stmt.query([]).ctx("verify decisions")?;
            while let Some(r) = rows.next().ctx("verify decisions")? {
                let col = |i: usize| blob(r, i, "verify decisions");
                decisions.push(&col(0)?, &col(1)?, &col(2)?, &col(3)?);
            }
            let mut stmt = c
                .prepare(
                    "SELECT CAST(run_id AS BLOB), CAST(id AS BLOB), CAST(step_id AS BLOB), \
                     CAST(status AS BLOB), CAST(decided_by AS BLOB), CAST(note AS BLOB), \
                     CAST(decided_at AS BLOB) FROM approvals ORDER BY rowid",
                )
                .ctx("verify decisions")?;
            let mut rows = stmt.query([]).ctx("verify decisions")?;
            while let Some(r) = rows.next().ctx("verify decisions")? {
                let col = |i: usize| blob(r, i, "verify decisions");
                let f = [
                    col(0)?,
                    col(1)?,
                    col(2)?,
                    col(3)?,
                    col(4)?,
                    col(5)?,
                    col(6)?,
                ];
                check.push_decision(&decisions, &ApprovalRow::of(&f));
            }
            Ok(check)
        })
    }
}
