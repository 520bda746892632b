//! Which stored values do not decode (spec section 9), the damaged-rows page, and event-chain
//! marks (spec 5.3) computed over the stored bytes.

use rusqlite::{Connection, params};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::data::*;
use super::sqlite::{MAX_PAGE_TEXT, bytes, text};
use super::time;

/// A step row with a column SQLite itself sees as undecodable.
pub const STEP_BAD_SQL: &str = "(s.decision_json != '' AND NOT json_valid(s.decision_json)) OR \
    (s.policy_json != '' AND NOT json_valid(s.policy_json)) OR \
    (s.observation_json != '' AND NOT json_valid(s.observation_json)) OR \
    julianday(s.started_at) IS NULL OR (s.finished_at != '' AND julianday(s.finished_at) IS NULL)";

/// An approval row with a column SQLite itself sees as undecodable.
pub const APPROVAL_BAD_SQL: &str = "NOT json_valid(a.request_json) OR \
    julianday(a.created_at) IS NULL OR (a.expires_at != '' AND julianday(a.expires_at) IS NULL) OR \
    (a.decided_at != '' AND julianday(a.decided_at) IS NULL)";

pub struct StepRaw {
    pub decision: Vec<u8>,
    pub policy: Vec<u8>,
    pub observation: Vec<u8>,
    pub started_at: Vec<u8>,
    pub finished_at: Vec<u8>,
    /// Stored lengths (characters) of decision, policy, observation.
    pub lens: [i64; 3],
}

fn json(raw: &[u8]) -> Result<Option<Value>, String> {
    if raw.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(raw)
        .map(Some)
        .map_err(|e| e.to_string())
}

fn time_err(raw: &[u8], required: bool) -> Option<String> {
    if raw.is_empty() {
        return if required {
            Some("empty time".into())
        } else {
            None
        };
    }
    match std::str::from_utf8(raw) {
        Ok(s) if time::parse_rfc3339(s).is_some() => None,
        Ok(_) => Some("not an RFC 3339 time".into()),
        Err(e) => Some(format!("invalid UTF-8: {e}")),
    }
}

fn str_of(v: &Option<Value>, key: &str) -> Option<String> {
    v.as_ref()?.get(key)?.as_str().map(str::to_owned)
}

/// Decodes a step page row: what the steps tab shows, and `decode_error` as section 9 names it.
pub fn step_row(id: String, idx: i64, status: String, raw: &StepRaw) -> StepRow {
    let mut errs = Vec::new();
    let mut col = |name: &str, v: &[u8], len: i64| -> Option<Value> {
        if len > MAX_PAGE_TEXT {
            errs.push(format!(
                "{name}: {len} characters, over MaxPageText, not read whole"
            ));
            return None;
        }
        match json(v) {
            Ok(v) => v,
            Err(e) => {
                errs.push(format!("{name}: {e}"));
                None
            }
        }
    };
    let d = col("decision", &raw.decision, raw.lens[0]);
    let p = col("policy", &raw.policy, raw.lens[1]);
    let o = col("observation", &raw.observation, raw.lens[2]);
    if let Some(e) = time_err(&raw.started_at, true) {
        errs.push(format!("started_at: {e}"));
    }
    if let Some(e) = time_err(&raw.finished_at, false) {
        errs.push(format!("finished_at: {e}"));
    }
    let summary = o
        .as_ref()
        .and_then(|o| o.get("summary"))
        .and_then(Value::as_str)
        .map(|s| s.as_bytes().to_vec());
    StepRow {
        id,
        idx,
        status,
        tool: str_of(&d, "tool").map(String::into_bytes),
        decision_kind: str_of(&d, "kind"),
        policy_outcome: str_of(&p, "outcome"),
        observation_kind: str_of(&o, "kind"),
        summary,
        decode_error: (!errs.is_empty()).then(|| errs.join("; ")),
    }
}

/// Section 9's decode error of an approval row (request and times; capability and presentation
/// are kept raw).
pub fn approval_error(a: &ApprovalRow) -> Option<String> {
    let mut errs = Vec::new();
    if let Some(e) = time_err(a.expires_at.as_bytes(), false) {
        errs.push(format!("expires_at: {e}"));
    }
    match json(&a.request) {
        Ok(Some(Value::Object(m))) => {
            if m.get("truncated").and_then(Value::as_bool) == Some(true) {
                errs.push("request: over MaxPageText; its arguments were not read".into());
            } else if !m.get("spec").is_some_and(Value::is_object) {
                errs.push("request: no tool spec".into());
            }
        }
        Ok(_) => errs.push("request: not a JSON object".into()),
        Err(e) => errs.push(format!("request: {e}")),
    }
    if let Some(e) = time_err(a.created_at.as_bytes(), true) {
        errs.push(format!("created_at: {e}"));
    }
    if let Some(e) = time_err(a.decided_at.as_bytes(), false) {
        errs.push(format!("decided_at: {e}"));
    }
    (!errs.is_empty()).then(|| errs.join("; "))
}

/// The chain hash of spec 5.3 over stored bytes: netstrings of prev, seq, run, step, at, type,
/// payload.
pub fn event_hash_bytes(prev: &[u8], seq: i64, fields: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    let mut ns = |b: &[u8]| {
        h.update(b.len().to_string().as_bytes());
        h.update(b":");
        h.update(b);
        h.update(b",");
    };
    ns(prev);
    ns(seq.to_string().as_bytes());
    for f in fields {
        ns(f);
    }
    hex::encode(h.finalize())
}

/// Mark of one event given the previous event (lowest seq below it, any run).
pub fn chain_mark(
    seq: i64,
    prev_seq: Option<i64>,
    prev_hash: Option<&[u8]>,
    fields: &[&[u8]; 5],
    stored: &[u8],
) -> ChainMark {
    let prev: &[u8] = match (prev_seq, prev_hash) {
        (None, _) if seq == 1 => b"",
        (Some(p), Some(h)) if p == seq - 1 => h,
        _ => return ChainMark::Unknown,
    };
    if event_hash_bytes(prev, seq, fields).as_bytes() == stored {
        ChainMark::Ok
    } else {
        ChainMark::Broken
    }
}

/// Walks the whole chain 128 events at a time (spec 5.3), holding one page at once.
pub fn verify_chain(conn: &Connection) -> rusqlite::Result<ChainReport> {
    let mut st = conn.prepare_cached(
        "SELECT seq, run_id, step_id, at, type, payload_json, hash FROM events \
         WHERE seq > ?1 ORDER BY seq LIMIT 128",
    )?;
    let (mut last, mut prev, mut checked) = (0i64, Vec::new(), 0u64);
    loop {
        let rows = st
            .query_map(params![last], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    [
                        bytes(r, 1)?,
                        bytes(r, 2)?,
                        bytes(r, 3)?,
                        bytes(r, 4)?,
                        bytes(r, 5)?,
                    ],
                    bytes(r, 6)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        if rows.is_empty() {
            break;
        }
        for (seq, f, stored) in rows {
            let head = String::from_utf8_lossy(&stored).into_owned();
            if seq != last + 1 {
                let d = if last == 0 {
                    format!("the first event is seq {seq}: an event is missing")
                } else {
                    format!("seq {seq} follows {last}: an event is missing")
                };
                return Ok(ChainReport {
                    checked,
                    head,
                    broken_at: Some((seq, d)),
                });
            }
            let fs: [&[u8]; 5] = [&f[0], &f[1], &f[2], &f[3], &f[4]];
            if event_hash_bytes(&prev, seq, &fs).as_bytes() != stored.as_slice() {
                let d = "the stored hash is not the one the event's fields and the previous event's hash give".to_string();
                return Ok(ChainReport {
                    checked,
                    head,
                    broken_at: Some((seq, d)),
                });
            }
            checked += 1;
            last = seq;
            prev = stored;
        }
    }
    Ok(ChainReport {
        checked,
        head: String::from_utf8_lossy(&prev).into_owned(),
        broken_at: None,
    })
}

/// Damaged columns of steps and approvals, as a page (one row per damaged column).
pub fn damaged_page(
    conn: &Connection,
    offset: u64,
    limit: u64,
) -> rusqlite::Result<Page<DamagedRow>> {
    // One line per (row, column) candidate, chosen in SQL so nothing but the page is read.
    let union = String::from(
        "SELECT s.run_id AS run, 'steps' AS tbl, s.id AS rid, c.col AS col, s.rowid AS k, c.n AS n FROM steps s \
         JOIN (SELECT 'decision' AS col, 1 AS n UNION ALL SELECT 'policy', 2 UNION ALL SELECT 'observation', 3 \
               UNION ALL SELECT 'started_at', 4 UNION ALL SELECT 'finished_at', 5) c ON \
         (c.n = 1 AND s.decision_json != '' AND NOT json_valid(s.decision_json)) OR \
         (c.n = 2 AND s.policy_json != '' AND NOT json_valid(s.policy_json)) OR \
         (c.n = 3 AND s.observation_json != '' AND NOT json_valid(s.observation_json)) OR \
         (c.n = 4 AND julianday(s.started_at) IS NULL) OR \
         (c.n = 5 AND s.finished_at != '' AND julianday(s.finished_at) IS NULL) \
         UNION ALL \
         SELECT a.run_id, 'approvals', a.id, c.col, a.rowid, c.n FROM approvals a \
         JOIN (SELECT 'request' AS col, 6 AS n UNION ALL SELECT 'created_at', 7 UNION ALL \
               SELECT 'expires_at', 8 UNION ALL SELECT 'decided_at', 9) c ON \
         (c.n = 6 AND NOT json_valid(a.request_json)) OR \
         (c.n = 7 AND julianday(a.created_at) IS NULL) OR \
         (c.n = 8 AND a.expires_at != '' AND julianday(a.expires_at) IS NULL) OR \
         (c.n = 9 AND a.decided_at != '' AND julianday(a.decided_at) IS NULL)",
    );
    let total: i64 =
        conn.query_row(&format!("SELECT COUNT(*) FROM ({union})"), [], |r| r.get(0))?;
    let mut st = conn.prepare_cached(&format!(
        "SELECT run, tbl, rid, col, n FROM ({union}) ORDER BY tbl DESC, k, n LIMIT ?1 OFFSET ?2"
    ))?;
    let keys = st
        .query_map(params![limit as i64, offset as i64], |r| {
            Ok((text(r, 0)?, text(r, 2)?, r.get::<_, i64>(4)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut rows = Vec::with_capacity(keys.len());
    for (run_id, row_id, n) in keys {
        let (table, column, sqlcol): (&'static str, &'static str, &str) = match n {
            1 => ("steps", "decision", "decision_json"),
            2 => ("steps", "policy", "policy_json"),
            3 => ("steps", "observation", "observation_json"),
            4 => ("steps", "started_at", "started_at"),
            5 => ("steps", "finished_at", "finished_at"),
            6 => ("approvals", "request", "request_json"),
            7 => ("approvals", "created_at", "created_at"),
            8 => ("approvals", "expires_at", "expires_at"),
            _ => ("approvals", "decided_at", "decided_at"),
        };
        let (raw, raw_len): (Vec<u8>, i64) = conn.query_row(
            &format!(
                "SELECT substr(CAST({sqlcol} AS BLOB), 1, 4096), length(CAST({sqlcol} AS BLOB)) FROM {table} WHERE id = ?1"
            ),
            params![row_id],
            |r| Ok((bytes(r, 0)?, r.get::<_, Option<i64>>(1)?.unwrap_or(0))),
        )?;
        let error = if n <= 3 || n == 6 {
            match serde_json::from_slice::<Value>(&raw) {
                Err(e) if raw_len as usize == raw.len() => e.to_string(),
                Err(e) => format!("{e} (in the first 4096 bytes)"),
                Ok(_) => "does not decode".into(),
            }
        } else {
            time_err(&raw, n == 4 || n == 7).unwrap_or_else(|| "does not decode".into())
        };
        rows.push(DamagedRow {
            run_id,
            table,
            row_id,
            column,
            error,
            raw,
            raw_len: raw_len.max(0) as u64,
        });
    }
    Ok(Page {
        offset,
        total: total.max(0) as u64,
        rows,
    })
}
