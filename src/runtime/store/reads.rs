//! Whole-row reads the runtime uses (one run's rows, never a whole table). Each is a free
//! function over a connection so a write transaction can read the same way.

use rusqlite::{Connection, OptionalExtension, params};

use super::Store;
use super::bind::{Text, key};
use super::error::{Ctx, StoreError};
use super::rows::{
    APPROVAL_COLUMNS, Cols, RUN_COLUMNS, STEP_COLUMNS, approval_from, run_from, step_from,
};
use crate::runtime::json::{canonical_json, sha256_hex};
use crate::runtime::types::{Approval, AsKey, Lease, Run, Said, Step, Timestamp, ToolSpec};

pub(crate) fn get_run(conn: &Connection, id: impl AsKey) -> Result<Run, StoreError> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?");
    by_id(conn, &sql, "run", key(&id), |r| run_from(&mut Cols::new(r)))
}

/// The row `sql` (a `SELECT … WHERE id = ?`) finds by `id`, decoded by `row`; a row that is not
/// there is [`StoreError::NotFound`] (`<what> <id>`), a failed read says `get <what>`.
pub(super) fn by_id<T>(
    conn: &Connection,
    sql: &str,
    what: &str,
    id: Text<'_>,
    row: impl FnOnce(&rusqlite::Row<'_>) -> T,
) -> Result<T, StoreError> {
    let failed = |e| StoreError::sqlite(format!("get {what}"), e);
    conn.prepare_cached(sql)
        .map_err(failed)?
        .query_row([id], |r| Ok(row(r)))
        .optional()
        .map_err(failed)?
        .ok_or_else(|| StoreError::NotFound {
            what: Said::from(format!("{what} ")).id(id),
        })
}

/// The MCP proxy call a run answers, from agentrt's `proxy_calls` index when the database has
/// one (a proxy's database; `None` otherwise, and for a run no proxy began).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyCall {
    /// The proxy session (stored bytes).
    pub session: Vec<u8>,
    /// The model-visible tool name (stored bytes).
    pub tool: Vec<u8>,
}

pub(crate) fn proxy_call(
    conn: &Connection,
    run_id: impl AsKey,
) -> Result<Option<ProxyCall>, StoreError> {
    let has: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'proxy_calls')",
            [],
            |r| r.get(0),
        )
        .ctx("proxy call")?;
    if !has {
        return Ok(None);
    }
    let run_id = key(&run_id);
    conn.prepare_cached(
        "SELECT CAST(session AS BLOB), CAST(tool AS BLOB) FROM proxy_calls WHERE run_id = ? ORDER BY id DESC LIMIT 1",
    )
    .ctx("proxy call")?
    .query_row([run_id], |r| {
        Ok(ProxyCall {
            session: r.get::<_, Option<Vec<u8>>>(0)?.unwrap_or_default(),
            tool: r.get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default(),
        })
    })
    .optional()
    .ctx("proxy call")
}

pub(crate) fn list_steps(conn: &Connection, run_id: impl AsKey) -> Result<Vec<Step>, StoreError> {
    let sql = format!("SELECT {STEP_COLUMNS} FROM steps WHERE run_id = ? ORDER BY rowid");
    of_run(conn, &sql, "list steps", key(&run_id), |r| {
        step_from(&mut Cols::new(r))
    })
}

/// Every row `sql` (a `SELECT … WHERE run_id = ? ORDER BY …`) finds for the run, decoded by
/// `row`; a failed read says `what`.
fn of_run<T>(
    conn: &Connection,
    sql: &str,
    what: &str,
    run_id: Text<'_>,
    row: impl Fn(&rusqlite::Row<'_>) -> T,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).ctx(what)?;
    let rows = stmt.query_map([run_id], |r| Ok(row(r))).ctx(what)?;
    rows.collect::<Result<Vec<_>, _>>().ctx(what)
}

/// The first row `sql` gives, decoded by `f`; `None` when it gives none.
pub(crate) fn query_opt<T>(
    conn: &Connection,
    sql: &str,
    args: &[&dyn rusqlite::ToSql],
    what: &str,
    f: impl FnOnce(&rusqlite::Row<'_>) -> T,
) -> Result<Option<T>, StoreError> {
    conn.prepare_cached(sql)
        .ctx(what)?
        .query_row(args, |r| Ok(f(r)))
        .optional()
        .ctx(what)
}

pub(crate) fn get_step(conn: &Connection, id: impl AsKey) -> Result<Step, StoreError> {
    let sql = format!("SELECT {STEP_COLUMNS} FROM steps WHERE id = ?");
    by_id(conn, &sql, "step", key(&id), |r| {
        step_from(&mut Cols::new(r))
    })
}

pub(crate) fn list_approvals(
    conn: &Connection,
    run_id: impl AsKey,
) -> Result<Vec<Approval>, StoreError> {
    let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE run_id = ? ORDER BY rowid");
    of_run(conn, &sql, "list approvals", key(&run_id), |r| {
        approval_from(&mut Cols::new(r))
    })
}

pub(crate) fn get_approval(
    conn: &Connection,
    run_id: impl AsKey,
    id: impl AsKey,
) -> Result<Approval, StoreError> {
    let (run_id, id) = (key(&run_id), key(&id));
    let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ? AND run_id = ?");
    query_opt(conn, &sql, params![id, run_id], "get approval", |r| {
        approval_from(&mut Cols::new(r))
    })?
    .ok_or_else(|| StoreError::NotFound {
        what: Said::from("approval ").id(id).text(" of run ").id(run_id),
    })
}

/// The last-inserted approval of a step (by rowid), if any (spec 4.9).
pub(crate) fn latest_approval_of_step(
    conn: &Connection,
    run_id: impl AsKey,
    step_id: impl AsKey,
) -> Result<Option<Approval>, StoreError> {
    let (run_id, step_id) = (key(&run_id), key(&step_id));
    let sql = format!(
        "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE run_id = ? AND step_id = ? ORDER BY rowid DESC LIMIT 1"
    );
    query_opt(
        conn,
        &sql,
        params![run_id, step_id],
        "latest approval",
        |r| approval_from(&mut Cols::new(r)),
    )
}

pub(crate) fn lease(conn: &Connection, run_id: impl AsKey) -> Result<Lease, StoreError> {
    let run_id = key(&run_id);
    let row: Option<(Vec<u8>, Vec<u8>)> = conn
        .prepare_cached(
            "SELECT CAST(lease_owner AS BLOB), CAST(lease_expires_at AS BLOB) FROM runs WHERE id = ?",
        )
        .ctx("lease")?
        .query_row([run_id], |r| {
            Ok((
                r.get::<_, Option<Vec<u8>>>(0)?.unwrap_or_default(),
                r.get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default(),
            ))
        })
        .optional()
        .ctx("lease")?;
    let (owner, exp) = row.ok_or_else(|| StoreError::NotFound {
        what: Said::from("run ").id(run_id),
    })?;
    Ok(Lease {
        owner: String::from_utf8_lossy(&owner).into_owned(),
        expires_at: Timestamp::parse(&String::from_utf8_lossy(&exp)).unwrap_or(Timestamp::ZERO),
    })
}

/// The run's status (as stored, lossily decoded) and its lease, in one read of its row.
pub(crate) fn state(conn: &Connection, run_id: impl AsKey) -> Result<(String, Lease), StoreError> {
    let run_id = key(&run_id);
    type Row = (Option<Vec<u8>>, Option<Vec<u8>>, Option<Vec<u8>>);
    let row: Option<Row> = conn
        .prepare_cached(
            "SELECT CAST(status AS BLOB), CAST(lease_owner AS BLOB), CAST(lease_expires_at AS BLOB) \
             FROM runs WHERE id = ?",
        )
        .ctx("require status")?
        .query_row([run_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()
        .ctx("require status")?;
    let (status, owner, exp) = row.ok_or_else(|| StoreError::NotFound {
        what: Said::from("run ").id(run_id),
    })?;
    let text = |b: Option<Vec<u8>>| String::from_utf8_lossy(&b.unwrap_or_default()).into_owned();
    let lease = Lease {
        owner: text(owner),
        expires_at: Timestamp::parse(&text(exp)).unwrap_or(Timestamp::ZERO),
    };
    Ok((text(status), lease))
}

pub(crate) fn tool_spec(conn: &Connection, hash: &str) -> Result<ToolSpec, StoreError> {
    let json: Option<Vec<u8>> = conn
        .prepare_cached("SELECT CAST(spec_json AS BLOB) FROM tool_specs WHERE hash = ?")
        .ctx("tool spec")?
        .query_row([hash], |r| r.get(0))
        .optional()
        .ctx("tool spec")?;
    let json = json.ok_or_else(|| StoreError::NotFound {
        what: format!("tool spec {hash}").into(),
    })?;
    spec_of(hash, &json)
}

/// The tool spec stored under `hash` as `json`, checked against its hash (either backend).
pub(crate) fn spec_of(hash: &str, json: &[u8]) -> Result<ToolSpec, StoreError> {
    if sha256_hex(&canonical_json(json)) != hash {
        return Err(StoreError::SpecHash {
            hash: hash.to_string(),
        });
    }
    ToolSpec::from_json(json).map_err(|e| StoreError::Invalid(format!("tool spec {hash}: {e}")))
}

/// One `approval.decided` event of a run, for a resume that checks a grant's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionEvent {
    /// The step it names, as stored.
    pub step_id: Vec<u8>,
    /// Its payload (lossily, when not UTF-8: it then matches no decision).
    pub payload: String,
    /// Whether its hash is its link in the chain: `None` for an event not chained yet
    /// (PostgreSQL's inbox, which the sequencer hashes).
    pub linked: Option<bool>,
    /// Its time as stored (the decision's, which the approval row repeats as `decided_at`).
    pub at: String,
}

impl Store {
    /// One run, whole ([`StoreError::NotFound`] if absent). One statement, which SQLite runs
    /// in a read transaction of its own, so no `BEGIN`/`COMMIT` around it (the driver reads
    /// the run before every step).
    pub fn get_run(&self, id: impl AsKey) -> Result<Run, StoreError> {
        get_run(&self.lock(), id)
    }

    /// The MCP proxy call a run answers (see [`ProxyCall`]); `None` when the database has no
    /// `proxy_calls` index or no row names the run.
    pub fn proxy_call(&self, run_id: impl AsKey) -> Result<Option<ProxyCall>, StoreError> {
        self.read(|c| proxy_call(c, run_id))
    }

    /// Every step of a run, in insertion order (whole rows; damaged rows carry `decode_error`).
    pub fn list_steps(&self, run_id: impl AsKey) -> Result<Vec<Step>, StoreError> {
        self.read(|c| list_steps(c, run_id))
    }

    /// One step, whole.
    pub fn get_step(&self, id: impl AsKey) -> Result<Step, StoreError> {
        self.read(|c| get_step(c, id))
    }

    /// Every approval of a run, in insertion order (whole rows).
    pub fn list_approvals(&self, run_id: impl AsKey) -> Result<Vec<Approval>, StoreError> {
        self.read(|c| list_approvals(c, run_id))
    }

    /// One approval of a run, whole (what deciding uses).
    pub fn get_approval(&self, run_id: impl AsKey, id: impl AsKey) -> Result<Approval, StoreError> {
        self.read(|c| get_approval(c, run_id, id))
    }

    /// The last-inserted approval of a step.
    pub fn latest_approval_of_step(
        &self,
        run_id: impl AsKey,
        step_id: impl AsKey,
    ) -> Result<Option<Approval>, StoreError> {
        self.read(|c| latest_approval_of_step(c, run_id, step_id))
    }

    /// The run's lease as stored (unheld = empty owner, zero time).
    pub fn lease(&self, run_id: impl AsKey) -> Result<Lease, StoreError> {
        self.read(|c| lease(c, run_id))
    }

    /// A stored tool spec; refuses a row whose JSON no longer hashes to its key.
    pub fn tool_spec(&self, hash: &str) -> Result<ToolSpec, StoreError> {
        self.read(|c| tool_spec(c, hash))
    }

    /// A run's `approval.decided` events in seq order, each with whether its stored hash is
    /// the one its fields and the previous event's hash give (its link in the chain).
    pub fn decision_events(&self, run_id: impl AsKey) -> Result<Vec<DecisionEvent>, StoreError> {
        let run_id = key(&run_id);
        self.read(|c| {
            let mut st = c
                .prepare_cached(
                    "SELECT CAST(e.step_id AS BLOB), CAST(e.payload_json AS BLOB), e.seq, \
                     CAST(e.at AS BLOB), CAST(e.hash AS BLOB), \
                     (SELECT CAST(p.hash AS BLOB) FROM events p WHERE p.seq < e.seq \
                      ORDER BY p.seq DESC LIMIT 1), CAST(e.run_id AS BLOB) \
                     FROM events e WHERE e.run_id = ?1 AND e.type = 'approval.decided' \
                     ORDER BY e.seq",
                )
                .ctx("decision events")?;
            let rows = st
                .query_map(params![run_id], |r| {
                    let b = |i: usize| -> rusqlite::Result<Vec<u8>> {
                        Ok(r.get::<_, Option<Vec<u8>>>(i)?.unwrap_or_default())
                    };
                    let text = |v: Vec<u8>| String::from_utf8_lossy(&v).into_owned();
                    let (step, payload, seq) = (b(0)?, text(b(1)?), r.get::<_, i64>(2)?);
                    let (at, hash, prev) = (text(b(3)?), text(b(4)?), text(b(5)?));
                    let linked = crate::runtime::json::event_hash_bytes(
                        &prev,
                        seq,
                        &b(6)?,
                        &step,
                        &at,
                        "approval.decided",
                        &payload,
                    ) == hash;
                    Ok(DecisionEvent {
                        step_id: step,
                        payload,
                        linked: Some(linked),
                        at,
                    })
                })
                .ctx("decision events")?;
            rows.map(|r| r.ctx("decision events")).collect()
        })
    }
}
