//! The event chain (spec 1.5, 5.3): the head a write transaction appends after, the insert, and
//! verification that never holds an event whole (128 events per query, fields over 4096 bytes
//! read in 65536-byte chunks).

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use super::Store;
use super::error::{Ctx, StoreError};

/// Events per verification query.
const VERIFY_PAGE: i64 = 128;
/// Bytes of each field read inline.
const INLINE: i64 = 4096;
/// Chunk size for the rest of a long field.
const CHUNK: i64 = 65536;
/// Stored hashes are shown cut at this many characters.
const HASH_CUT: usize = 128;

/// Where a chain stops holding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainBreak {
    /// The first event that does not hold (or the one found where a missing event should be).
    pub seq: i64,
    /// The hash the fields give (empty for a missing event).
    pub expected: String,
    /// The stored hash, cut at 128 characters (empty for a missing event).
    pub found: String,
    /// What is wrong, in a sentence: a changed hash, or an event missing before `seq`.
    pub detail: String,
}

/// What `verify_events` checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChainReport {
    /// The first seq asked about (at least 1).
    pub from: i64,
    /// The last seq asked about (the head when none was given).
    pub to: i64,
    /// How many events were checked; checking stops at the first break (an event whose hash
    /// differs counts as checked, a gap before one does not).
    pub checked: i64,
    /// The stored hash of the last event checked (cut at 128 characters).
    pub hash: String,
    /// The first place the chain stops holding; checking stops there. `None` = it holds.
    pub chain_break: Option<ChainBreak>,
}

impl ChainReport {
    /// True when every event checked holds.
    pub fn ok(&self) -> bool {
        self.chain_break.is_none()
    }
}

/// An event's payload as stored, on either backend: an empty one is `{}`; it must be UTF-8.
pub(crate) fn event_payload<'p>(kind: &str, payload: &'p [u8]) -> Result<&'p str, StoreError> {
    let payload = if payload.is_empty() {
        b"{}".as_slice()
    } else {
        payload
    };
    std::str::from_utf8(payload)
        .map_err(|_| StoreError::Invalid(format!("event {kind} payload is not valid UTF-8")))
}

/// `(head seq, hash of the event with the highest seq)` as a write transaction reads it: the
/// higher of `sqlite_sequence`'s entry and the highest seq, and that event's hash, in one
/// statement (each transaction that appends reads it once).
pub(crate) fn head(conn: &Connection) -> Result<(i64, String), StoreError> {
    let (seq, hash): (i64, Option<Vec<u8>>) = conn
        .prepare_cached(
            "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name='events'),0), \
             COALESCE((SELECT MAX(seq) FROM events),0)), \
             (SELECT CAST(hash AS BLOB) FROM events ORDER BY seq DESC LIMIT 1)",
        )
        .ctx("chain head")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .ctx("chain head")?;
    Ok((
        seq,
        String::from_utf8_lossy(&hash.unwrap_or_default()).into_owned(),
    ))
}

/// A stored hash as a report shows it: cut at [`HASH_CUT`] characters.
pub(crate) fn cut(s: &str) -> String {
    s.chars().take(HASH_CUT).collect()
}

/// What is missing when event `seq` follows `last` (`None`: it is the first read of a check
/// that starts at `from`): an event before it, said in a sentence, or nothing.
pub(crate) fn gap(from: i64, last: Option<i64>, seq: i64) -> Option<String> {
    match last {
        None if from <= 1 && seq != 1 => {
            Some(format!("the first event is seq {seq}: an event is missing"))
        }
        Some(l) if l.checked_add(1) != Some(seq) => {
            Some(format!("seq {seq} follows {l}: an event is missing"))
        }
        _ => None,
    }
}

/// The break an event below seq 1 is, wherever a check starts: the chain starts at seq 1, so
/// such an event was put there outside it (found from outside: a planted `seq 0` approval was
/// listed first by `events` while `verify`, which starts at 1, said intact). Checked whatever
/// range was asked, since an incremental check would never reach it.
pub(crate) fn below_one(seq: i64) -> ChainBreak {
    ChainBreak {
        seq,
        expected: String::new(),
        found: String::new(),
        detail: format!(
            "event seq {seq} is below 1, where no event can be (the chain starts at seq 1): it was put there outside the chain"
        ),
    }
}

/// Feeds one netstring field to the hasher: `len:bytes,`.
fn ns(h: &mut Sha256, len: i64, bytes: &[u8]) {
    h.update(len.to_string().as_bytes());
    h.update(b":");
    h.update(bytes);
    h.update(b",");
}

const FIELDS: [&str; 5] = ["run_id", "step_id", "at", "type", "payload_json"];

pub(crate) fn verify(conn: &Connection, from: i64, to: i64) -> Result<ChainReport, StoreError> {
    let from = from.max(1);
    let to = if to < 1 {
        conn.query_row("SELECT COALESCE(MAX(seq),0) FROM events", [], |r| r.get(0))
            .ctx("verify events")?
    } else {
        to
    };
    let mut report = ChainReport {
        from,
        to,
        ..ChainReport::default()
    };
    let planted: Option<i64> = conn
        .query_row(
            "SELECT seq FROM events WHERE seq < 1 ORDER BY seq LIMIT 1",
            [],
            |r| r.get(0),
        )
        .optional()
        .ctx("verify events")?;
    if let Some(seq) = planted {
        report.chain_break = Some(below_one(seq));
        return Ok(report);
    }
    // A range not starting at 1 chains from the stored hash of the previous event.
    let (mut last_seq, mut prev): (Option<i64>, String) = if from > 1 {
        match conn
            .query_row(
                "SELECT seq, CAST(hash AS BLOB) FROM events WHERE seq < ? ORDER BY seq DESC LIMIT 1",
                [from],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default())),
            )
            .optional()
            .ctx("verify events")?
        {
            Some((s, h)) => (Some(s), String::from_utf8_lossy(&h).into_owned()),
            None => (None, String::new()),
        }
    } else {
        (None, String::new())
    };
    let cols: Vec<String> = FIELDS
        .iter()
        .map(|c| format!("length(CAST({c} AS BLOB)), substr(CAST({c} AS BLOB), 1, {INLINE})"))
        .collect();
    let sql = format!(
        "SELECT seq, {}, length(CAST(hash AS BLOB)), substr(CAST(hash AS BLOB), 1, 129) \
         FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT {VERIFY_PAGE}",
        cols.join(", ")
    );
    let mut cursor = from;
    loop {
        type Field = (i64, Vec<u8>);
        let mut page: Vec<(i64, Vec<Field>, String)> = Vec::new();
        {
            let mut stmt = conn.prepare_cached(&sql).ctx("verify events")?;
            let mut rows = stmt.query(params![cursor, to]).ctx("verify events")?;
            while let Some(r) = rows.next().ctx("verify events")? {
                let mut fields = Vec::with_capacity(5);
                for i in 0..5 {
                    let len: Option<i64> = r.get(1 + 2 * i).ctx("verify events")?;
                    let head: Option<Vec<u8>> = r.get(2 + 2 * i).ctx("verify events")?;
                    fields.push((len.unwrap_or(0), head.unwrap_or_default()));
                }
                let hash: Option<Vec<u8>> = r.get(12).ctx("verify events")?;
                page.push((
                    r.get(0).ctx("verify events")?,
                    fields,
                    String::from_utf8_lossy(&hash.unwrap_or_default()).into_owned(),
                ));
            }
        }
        if page.is_empty() {
            return Ok(report);
        }
        for (seq, fields, stored) in page {
            // The last possible seq: nothing can follow it.
            let last = seq == i64::MAX;
            cursor = seq.saturating_add(1);
            if let Some(detail) = gap(from, last_seq, seq) {
                report.chain_break = Some(ChainBreak {
                    seq,
                    expected: String::new(),
                    found: String::new(),
                    detail,
                });
                return Ok(report);
            }
            let mut h = Sha256::new();
            ns(&mut h, prev.len() as i64, prev.as_bytes());
            let s = seq.to_string();
            ns(&mut h, s.len() as i64, s.as_bytes());
            for (i, (len, head)) in fields.iter().enumerate() {
                h.update(len.to_string().as_bytes());
                h.update(b":");
                h.update(head);
                let mut off = head.len() as i64;
                if off < *len {
                    off = read_rest_incrementally(conn, FIELDS[i], seq, off, *len, &mut h)
                        .unwrap_or(off);
                }
                while off < *len {
                    let chunk: Vec<u8> = conn
                        .prepare_cached(&format!(
                            "SELECT substr(CAST({} AS BLOB), ?, {CHUNK}) FROM events WHERE seq = ?",
                            FIELDS[i]
                        ))
                        .ctx("verify events")?
                        .query_row(params![off + 1, seq], |r| {
                            Ok(r.get::<_, Option<Vec<u8>>>(0)?.unwrap_or_default())
                        })
                        .ctx("verify events")?;
                    if chunk.is_empty() {
                        break;
                    }
                    off += chunk.len() as i64;
                    h.update(&chunk);
                }
                h.update(b",");
            }
            let expected = hex::encode(h.finalize());
            report.checked += 1;
            report.hash = cut(&stored);
            if expected != stored {
                report.chain_break = Some(ChainBreak {
                    seq,
                    expected,
                    found: cut(&stored),
                    detail: "the stored hash is not the one the event's fields and the previous event's hash give"
                        .into(),
                });
                return Ok(report);
            }
            prev = stored;
            last_seq = Some(seq);
            if last {
                return Ok(report);
            }
        }
    }
}

impl Store {
    /// Verifies the hash chain over `from..=to` (spec 5.3; from < 1 = 1, to < 1 = head).
    pub fn verify_events(&self, from: i64, to: i64) -> Result<ChainReport, StoreError> {
        self.read(|c| verify(c, from, to))
    }

    /// The head as kept: the highest seq and its stored hash cut at 128 characters
    /// (`(0, "")` for an empty chain).
    pub fn chain_head(&self) -> Result<(i64, String), StoreError> {
        self.read(|c| {
            let row: Option<(i64, Vec<u8>)> = c
                .query_row(
                    "SELECT seq, substr(CAST(hash AS BLOB), 1, 128) FROM events ORDER BY seq DESC LIMIT 1",
                    [],
                    |r| Ok((r.get(0)?, r.get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default())),
                )
                .optional()
                .ctx("chain head")?;
            Ok(row
                .map(|(s, h)| (s, String::from_utf8_lossy(&h).into_owned()))
                .unwrap_or_default())
        })
    }

    /// The stored hash of one event, cut at 128 characters.
    pub fn event_hash(&self, seq: i64) -> Result<String, StoreError> {
        self.read(|c| {
            let h: Option<Vec<u8>> = c
                .query_row(
                    "SELECT substr(CAST(hash AS BLOB), 1, 128) FROM events WHERE seq = ?",
                    [seq],
                    |r| Ok(r.get::<_, Option<Vec<u8>>>(0)?.unwrap_or_default()),
                )
                .optional()
                .ctx("event hash")?;
            h.map(|h| String::from_utf8_lossy(&h).into_owned())
                .ok_or_else(|| StoreError::NotFound {
                    what: format!("event {seq}").into(),
                })
        })
    }
}

/// Hashes the rest of a long field from byte `off` to `len` through SQLite's incremental blob
/// I/O, so a 50 MB field is read once in chunks (reading it with `substr` made SQLite load the
/// whole value for every chunk: quadratic). Returns how far it got; the caller falls back to
/// `substr` chunks from there if the blob could not be opened.
fn read_rest_incrementally(
    conn: &Connection,
    column: &str,
    seq: i64,
    mut off: i64,
    len: i64,
    h: &mut Sha256,
) -> Option<i64> {
    use std::io::{Read, Seek, SeekFrom};
    // `seq` is the INTEGER PRIMARY KEY, so it is the rowid.
    let mut blob = conn
        .blob_open(rusqlite::MAIN_DB, "events", column, seq, true)
        .ok()?;
    blob.seek(SeekFrom::Start(off as u64)).ok()?;
    let mut buf = vec![0u8; CHUNK as usize];
    while off < len {
        let n = match blob.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        h.update(&buf[..n]);
        off += n as i64;
    }
    Some(off)
}
