//! `countersign copy`: a whole agentrt database between SQLite and PostgreSQL, in one
//! transaction on each side, into an empty target only. Every row passes two checks on the
//! way: the event chain and every approval hash are recomputed from the source rows, and the
//! rows are read back from the target inside its transaction, chained and hashed again and
//! compared (a digest per table over every value and its insertion order) before it commits.
//!
//! A damaged row is never dropped: a value of the wrong kind, a broken chain, an approval
//! whose fields give another hash, a reference to a missing row refuse the whole copy, naming
//! the row, and the target is left as it was. An approval whose fields do not decode at all
//! (agentrt's "damaged" row, which the runtime lists and never wedges on) is copied as it is
//! and listed in the report.
//!
//! The MCP proxy's call index (`proxy_calls`) travels too when the source holds any of its
//! rows (decision 0087): after the run tables, checked the same way by a digest read back.

mod pg;
mod sqlite;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::chain::{ApprovalCheck, ChainCheck, EventRow};
use super::tables::{PROXY_CALLS, TABLES, Table};
use super::{PgError, PgUrl};
use crate::runtime::store::StoreError;

/// One end of a copy.
#[derive(Debug, Clone)]
pub enum Endpoint {
    Sqlite(PathBuf),
    Pg(PgUrl),
}

impl Endpoint {
    /// A `postgres://` or `postgresql://` URL, else a SQLite path.
    pub fn parse(s: &std::ffi::OsStr) -> Result<Endpoint, PgError> {
        match s.to_str() {
            Some(t) if super::is_pg_url(t) => Ok(Endpoint::Pg(PgUrl::parse(t)?)),
            Some(t) if let Some(why) = crate::runtime::store::not_a_path(t) => {
                Err(PgError::Url(why))
            }
            _ => Ok(Endpoint::Sqlite(PathBuf::from(s))),
        }
    }

    /// How a message names it (a URL redacted, a path escaped).
    pub fn shown(&self) -> String {
        match self {
            Endpoint::Sqlite(p) => {
                crate::safetext::plain_line(p.as_os_str().as_encoded_bytes(), 300)
            }
            Endpoint::Pg(u) => crate::safetext::plain_line(u.redacted().as_bytes(), 300),
        }
    }
}

/// Why a copy did not happen. The target is as it was.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("{0}")]
    Pg(#[from] PgError),
    #[error("{0}")]
    Store(#[from] StoreError),
    /// Refused: a damaged source, a non-empty target, a check that does not hold.
    #[error("{0}")]
    Refused(String),
}

/// A stored value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Text(String),
    Int(i64),
}

/// One row: its insertion order (SQLite's rowid; an event's seq) and its values in the
/// table's column order.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub ord: i64,
    pub vals: Vec<Value>,
}

impl Row {
    fn text(&self, t: &Table, col: &str) -> &str {
        match t.index(col).and_then(|i| self.vals.get(i)) {
            Some(Value::Text(s)) => s,
            _ => "",
        }
    }

    /// The row's key, escaped, for a message.
    pub fn shown_key(&self, t: &Table) -> String {
        match t.index(t.key).and_then(|i| self.vals.get(i)) {
            Some(Value::Text(s)) => crate::safetext::plain_line(s.as_bytes(), 80),
            Some(Value::Int(n)) => n.to_string(),
            None => format!("at rowid {}", self.ord),
        }
    }
}

/// What a copy did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Rows copied per table, in copy order.
    pub rows: Vec<(&'static str, u64)>,
    /// The chain head: the highest seq and its hash.
    pub head_seq: i64,
    pub head_hash: String,
    /// Approvals whose hash was recomputed and matched (on both sides).
    pub approvals_verified: i64,
    /// Approvals copied as they are because their fields do not decode: `(id, why)`.
    pub damaged: Vec<(String, String)>,
    /// Tables of the source that are not agentrt's or countersign's (a table someone added),
    /// which no copy carries: named, so that nothing is left behind unsaid.
    pub left_behind: Vec<String>,
}

/// A database a copy reads from: rows of a table in insertion order, and the highest event
/// seq it ever gave.
pub(crate) trait Source {
    fn scan(
        &mut self,
        t: &Table,
        f: &mut dyn FnMut(Row) -> Result<(), CopyError>,
    ) -> Result<(), CopyError>;
    fn head_seq(&mut self) -> Result<i64, CopyError>;
    /// How many rows its MCP proxy call index holds (0 when it has none).
    fn proxy_calls(&mut self) -> Result<u64, CopyError>;
    /// Its tables that are not agentrt's or countersign's, by name.
    fn other_tables(&mut self) -> Result<Vec<String>, CopyError>;
}

/// The MCP proxy call index's end on a target.
pub(crate) trait ProxyTarget {
    /// Makes sure the target has the index (SQLite: agentrt's index migrations, in the copy's
    /// transaction) and refuses one that holds rows.
    fn prepare_proxy_calls(&mut self) -> Result<(), CopyError>;
    /// Once its rows are in: the next id continues after the highest copied.
    fn finish_proxy_calls(&mut self) -> Result<(), CopyError>;
}

/// A database a copy writes to, inside its one transaction.
pub(crate) trait Target: Source + ProxyTarget {
    fn insert(&mut self, t: &Table, row: &Row) -> Result<(), CopyError>;
    /// Records the chain head once every row is in.
    fn finish(&mut self, head_seq: i64, head_hash: &str) -> Result<(), CopyError>;
}

/// What one pass over a database found: per-table digests and counts, the chain, the
/// approvals.
struct Pass {
    digests: Vec<[u8; 32]>,
    counts: Vec<u64>,
    chain: ChainCheck,
    approvals: ApprovalCheck,
}

impl Pass {
    /// Nothing read yet: the chain starts at seq 1 from the empty hash.
    fn new() -> Pass {
        Pass {
            digests: Vec::new(),
            counts: Vec::new(),
            chain: ChainCheck::new(1, 0, String::new(), None),
            approvals: ApprovalCheck::default(),
        }
    }
}

fn digest_row(h: &mut Sha256, row: &Row) {
    h.update(row.ord.to_string().as_bytes());
    for v in &row.vals {
        match v {
            Value::Text(s) => {
                h.update(format!("t{}:", s.len()).as_bytes());
                h.update(s.as_bytes());
            }
            Value::Int(n) => h.update(format!("i{n};").as_bytes()),
        }
    }
    h.update(b"\n");
}

fn event_of(t: &Table, row: &Row) -> EventRow {
    EventRow {
        seq: row.ord,
        run_id: row.text(t, "run_id").to_string(),
        step_id: row.text(t, "step_id").to_string(),
        at: row.text(t, "at").to_string(),
        kind: row.text(t, "type").to_string(),
        payload: row.text(t, "payload_json").to_string(),
        hash: row.text(t, "hash").to_string(),
    }
}

/// Reads every table of `db`, checking as it goes; `sink` gets each row (the copy's insert).
fn pass(
    db: &mut dyn Source,
    side: &str,
    sink: &mut dyn FnMut(&Table, &Row) -> Result<(), CopyError>,
) -> Result<Pass, CopyError> {
    let mut p = Pass::new();
    for t in &TABLES {
        let (digest, n) = scan_checked(db, t, side, &mut p, sink)?;
        p.digests.push(digest);
        p.counts.push(n);
    }
    let head = db.head_seq()?;
    p.chain.reaches(head);
    let last = p.chain.last_seq();
    p.chain.within(last, head);
    if p.chain.report().chain_break.is_some() {
        return Err(chain_refusal(side, &p.chain));
    }
    Ok(p)
}

/// One table of a pass: its digest and row count; approvals hashed and events chained into `p`
/// as they go by.
fn scan_checked(
    db: &mut dyn Source,
    t: &Table,
    side: &str,
    p: &mut Pass,
    sink: &mut dyn FnMut(&Table, &Row) -> Result<(), CopyError>,
) -> Result<([u8; 32], u64), CopyError> {
    let mut h = Sha256::new();
    h.update(t.name.as_bytes());
    let mut n = 0u64;
    db.scan(t, &mut |row| {
        digest_row(&mut h, &row);
        n += 1;
        if t.name == "approvals" {
            let g = |c| row.text(t, c);
            p.approvals.push(
                g("id"), g("kind"), g("capability_json"), g("presentation_json"),
                g("request_json"), g("hash"),
            );
            if let Some(id) = p.approvals.mismatched.last() {
                return Err(CopyError::Refused(format!(
                    "{side}: approval {} does not hash to its stored hash: a changed approval; the copy is refused and nothing was written",
                    crate::safetext::plain_line(id.as_bytes(), 80)
                )));
            }
        }
        if t.is_events() && !p.chain.push(&event_of(t, &row)) {
            return Err(chain_refusal(side, &p.chain));
        }
        sink(t, &row)
    })?;
    Ok((h.finalize().into(), n))
}

/// The call index's rows, copied after the run tables and read back: its digest must match.
fn transfer_proxy_calls(src: &mut dyn Source, dst: &mut dyn Target) -> Result<u64, CopyError> {
    // The index holds neither approvals nor events: the pass's checks see none of its rows.
    let mut checks = Pass::new();
    dst.prepare_proxy_calls()?;
    let t = &PROXY_CALLS;
    let (read, n) = scan_checked(src, t, "the source", &mut checks, &mut |t, row| {
        dst.insert(t, row)
    })?;
    dst.finish_proxy_calls()?;
    let (back, m) = scan_checked(dst, t, "the target, read back", &mut checks, &mut |_, _| {
        Ok(())
    })?;
    if (back, m) != (read, n) {
        return Err(CopyError::Refused(
            "the target, read back, does not hold exactly the MCP proxy call index's rows read: the copy is rolled back"
                .into(),
        ));
    }
    Ok(n)
}

fn chain_refusal(side: &str, chain: &ChainCheck) -> CopyError {
    let detail = chain
        .report()
        .chain_break
        .as_ref()
        .map(|b| format!("at seq {}: {}", b.seq, b.detail))
        .unwrap_or_default();
    CopyError::Refused(format!(
        "{side}: the event chain is broken {}; the copy is refused and nothing was written",
        crate::safetext::plain_line(detail.as_bytes(), 400)
    ))
}

/// Copies every row of `src` into `dst` and checks `dst` read back against what was read.
fn transfer(src: &mut dyn Source, dst: &mut dyn Target) -> Result<CopyReport, CopyError> {
    let read = pass(src, "the source", &mut |t, row| dst.insert(t, row))?;
    let (seq, hash) = (read.chain.last_seq(), read.chain.last_hash().to_string());
    dst.finish(seq, &hash)?;
    let back = pass(dst, "the target, read back", &mut |_, _| Ok(()))?;
    if back.digests != read.digests
        || back.counts != read.counts
        || back.chain.last_hash() != hash
        || back.approvals != read.approvals
    {
        return Err(CopyError::Refused(
            "the target, read back, does not hold exactly the rows read: the copy is rolled back"
                .into(),
        ));
    }
    let mut rows: Vec<(&'static str, u64)> =
        TABLES.iter().map(|t| t.name).zip(read.counts).collect();
    if src.proxy_calls()? > 0 {
        rows.push((PROXY_CALLS.name, transfer_proxy_calls(src, dst)?));
    }
    Ok(CopyReport {
        rows,
        head_seq: seq,
        head_hash: hash,
        approvals_verified: read.approvals.verified,
        damaged: read.approvals.damaged,
        left_behind: src.other_tables()?,
    })
}

/// Copies the whole database `from` into the empty database `to`.
pub fn copy(from: &Endpoint, to: &Endpoint) -> Result<CopyReport, CopyError> {
    match (from, to) {
        (Endpoint::Sqlite(src), Endpoint::Pg(dst)) => sqlite_to_pg(src, dst),
        (Endpoint::Pg(src), Endpoint::Sqlite(dst)) => pg_to_sqlite(src, dst),
        _ => Err(CopyError::Refused(
            "copy goes from SQLite to PostgreSQL or from PostgreSQL to SQLite".into(),
        )),
    }
}

fn sqlite_to_pg(src: &Path, dst: &PgUrl) -> Result<CopyReport, CopyError> {
    let store = crate::runtime::store::Store::open_existing(src, true)?;
    let mut client = super::connect(dst)?;
    let mut target = pg::PgSide::begin_target(&mut client, dst)?;
    let report =
        store.read(|conn| Ok(transfer(&mut sqlite::SqliteSide::new(conn), &mut target)))??;
    target.commit()?;
    Ok(report)
}

fn pg_to_sqlite(src: &PgUrl, dst: &Path) -> Result<CopyReport, CopyError> {
    let mut client = super::connect(src)?;
    let mut source = pg::PgSide::begin_source(&mut client, src)?;
    let (store, created) = sqlite::open_target(dst)?;
    let out = match store.raw_write(|tx| sqlite::copy_into(tx, &mut source)) {
        Ok(r) => r,
        Err(e) => Err(CopyError::Store(e)),
    };
    drop(store);
    if out.is_err() && created {
        sqlite::remove_created(dst);
    }
    out
}
