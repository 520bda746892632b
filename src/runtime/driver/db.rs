//! The driver's access to the run database: one write transaction per state change (BEGIN
//! IMMEDIATE), events appended with their seq and chain hash inside it (spec 1.5) and handed
//! to observers after commit, and the reads the loop needs.
//!
//! TEMPORARY ADAPTER: written before branch `store` landed; it keeps the driver's needs in one
//! file so the switch to the store's own transactions and readers is local.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use crate::runtime::json;
use crate::runtime::store::StoreError;
use crate::runtime::types::{
    Approval, ApprovalStatus, Decision, Event, Limits, Observation, PolicyDecision, Run, RunStatus,
    Step, StepStatus, Timestamp, ToolRequest,
};

fn sq(context: &str) -> impl FnOnce(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError::sqlite(context, e)
}

/// A handle on one run database file. Cheap to clone (one shared writer connection).
#[derive(Clone)]
pub struct Store {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.path.display())
    }
}

/// Opens a writer connection (WAL, synchronous FULL, busy timeout 5 s).
pub fn connect(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(sq("open store"))?;
    conn.busy_timeout(Duration::from_millis(5000))
        .map_err(sq("open store: busy_timeout"))?;
    conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
        .map_err(sq("open store: pragmas"))?;
    Ok(conn)
}

/// A write transaction: events appended in it are returned by [`Store::write`] after commit.
pub struct Tx<'a> {
    conn: &'a Connection,
    head: Option<(i64, String)>,
    events: Vec<Event>,
}

impl<'a> Tx<'a> {
    pub fn conn(&self) -> &Connection {
        self.conn
    }

    /// Appends an event: seq = chain head + 1, hash chained to the previous event (spec 1.5).
    pub fn event(
        &mut self,
        run_id: &str,
        step_id: &str,
        at: Timestamp,
        kind: &str,
        payload: &[u8],
    ) -> Result<(), StoreError> {
        let (seq, prev) = match self.head.take() {
            Some(h) => h,
            None => {
                let seq: i64 = self
                    .conn
                    .query_row(
                        "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name='events'),0), COALESCE((SELECT MAX(seq) FROM events),0))",
                        [],
                        |r| r.get(0),
                    )
                    .map_err(sq("append event: chain head"))?;
                let prev: String = self
                    .conn
                    .query_row("SELECT hash FROM events WHERE seq = ?", [seq], |r| r.get(0))
                    .optional()
                    .map_err(sq("append event: previous hash"))?
                    .unwrap_or_default();
                (seq, prev)
            }
        };
        let payload = if payload.is_empty() { b"{}".as_slice() } else { payload };
        let payload = std::str::from_utf8(payload)
            .map_err(|_| StoreError::Invalid(format!("event {kind} payload is not UTF-8")))?;
        let at_text = at.to_rfc3339();
        let seq = seq + 1;
        let hash = json::event_hash(&prev, seq, run_id, step_id, &at_text, kind, payload);
        self.conn
            .execute(
                "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?,?,?,?,?,?,?)",
                params![seq, run_id, step_id, at_text, kind, payload, hash],
            )
            .map_err(sq("append event"))?;
        self.head = Some((seq, hash.clone()));
        self.events.push(Event {
            seq,
            run_id: run_id.to_string(),
            step_id: step_id.to_string(),
            at_text,
            at,
            kind: kind.to_string(),
            payload: payload.to_string(),
            hash,
            ..Event::default()
        });
        Ok(())
    }

    /// The run's status, refused unless it is one of `from`; with `owner`, a RUNNING run must
    /// be leased by it (spec 3.4).
    pub fn require_status(
        &self,
        run_id: &str,
        from: &[RunStatus],
        owner: Option<&str>,
    ) -> Result<RunStatus, StoreError> {
        let row: Option<(String, String, String)> = self
            .conn
            .query_row(
                "SELECT status, lease_owner, lease_expires_at FROM runs WHERE id = ?",
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(sq("read run status"))?;
        let Some((status, lease_owner, expires)) = row else {
            return Err(StoreError::NotFound {
                what: format!("run {run_id}"),
            });
        };
        let st = RunStatus::parse(&status);
        if !from.contains(&st) {
            let want: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
            return Err(StoreError::RunState {
                detail: format!("run {run_id} is {status}, not {}", want.join(" or ")),
            });
        }
        if let Some(owner) = owner
            && st == RunStatus::Running
            && lease_owner != owner
        {
            return Err(StoreError::RunLeased {
                run_id: run_id.to_string(),
                owner: lease_owner,
                expires_at: Timestamp::parse(&expires).unwrap_or_default(),
            });
        }
        Ok(st)
    }
}

impl Store {
    /// Opens an existing run database (schema 6) for writing.
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        let path = path.as_ref().to_path_buf();
        let conn = connect(&path)?;
        Ok(Store {
            path,
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` in one BEGIN IMMEDIATE transaction; commits when it returns Ok and returns the
    /// events it appended (for delivery after commit); rolls back otherwise.
    pub fn write<T, E>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<T, E>) -> Result<(T, Vec<Event>), E>
    where
        E: From<StoreError>,
    {
        let conn = self.lock();
        conn.execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| E::from(StoreError::sqlite("begin write", e)))?;
        let mut tx = Tx {
            conn: &conn,
            head: None,
            events: Vec::new(),
        };
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut tx)));
        let events = std::mem::take(&mut tx.events);
        match res {
            Ok(Ok(v)) => match conn.execute_batch("COMMIT") {
                Ok(()) => Ok((v, events)),
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    Err(E::from(StoreError::sqlite("commit", e)))
                }
            },
            Ok(Err(e)) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(e)
            }
            Err(p) => {
                let _ = conn.execute_batch("ROLLBACK");
                std::panic::resume_unwind(p)
            }
        }
    }

    /// The run row.
    pub fn run(&self, id: &str) -> Result<Run, StoreError> {
        let conn = self.lock();
        read_run(&conn, id)
    }

    /// Every step of the run, in insertion order.
    pub fn steps(&self, run_id: &str) -> Result<Vec<Step>, StoreError> {
        let conn = self.lock();
        read_steps(&conn, run_id)
    }

    /// Every approval of the run, in insertion order.
    pub fn approvals(&self, run_id: &str) -> Result<Vec<Approval>, StoreError> {
        let conn = self.lock();
        read_approvals(&conn, run_id)
    }

    /// Every event of the run, in seq order.
    pub fn events(&self, run_id: &str) -> Result<Vec<Event>, StoreError> {
        let conn = self.lock();
        let mut st = conn
            .prepare("SELECT seq, run_id, step_id, at, type, payload_json, hash FROM events WHERE run_id = ? ORDER BY seq")
            .map_err(sq("list events"))?;
        let rows = st
            .query_map([run_id], |r| {
                let at_text: String = r.get(3)?;
                Ok(Event {
                    seq: r.get(0)?,
                    run_id: r.get(1)?,
                    step_id: r.get(2)?,
                    at: Timestamp::parse(&at_text).unwrap_or_default(),
                    at_text,
                    kind: r.get(4)?,
                    payload: r.get(5)?,
                    hash: r.get(6)?,
                    ..Event::default()
                })
            })
            .map_err(sq("list events"))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(sq("list events"))
    }
}

fn ts(col: &str, text: &str, err: &mut String) -> Timestamp {
    match Timestamp::parse(text) {
        Ok(t) => t,
        Err(e) => {
            push_err(err, col, &e);
            Timestamp::ZERO
        }
    }
}

fn push_err(acc: &mut String, col: &str, e: &dyn std::fmt::Display) {
    if !acc.is_empty() {
        acc.push_str("; ");
    }
    acc.push_str(col);
    acc.push_str(": ");
    acc.push_str(&e.to_string());
}

pub fn read_run(conn: &Connection, id: &str) -> Result<Run, StoreError> {
    let r = conn
        .query_row(
            "SELECT id, goal, status, reason, reason_detail, limits_json, step_count, created_at, started_at, finished_at, result_json, model_calls, input_tokens, output_tokens, cached_input_tokens, estimated_cost_micros, active_ms, lease_owner, lease_expires_at FROM runs WHERE id = ?",
            [id],
            |r| {
                let mut err = String::new();
                let limits_json: String = r.get(5)?;
                let limits = match Limits::from_json(limits_json.as_bytes()) {
                    Ok(l) => l,
                    Err(e) => {
                        push_err(&mut err, "limits", &e);
                        Limits::default()
                    }
                };
                let status: String = r.get(2)?;
                Ok(Run {
                    id: r.get(0)?,
                    goal: r.get(1)?,
                    status: RunStatus::parse(&status),
                    reason: r.get(3)?,
                    reason_detail: r.get(4)?,
                    limits,
                    limits_json,
                    step_count: r.get(6)?,
                    created_at: ts("created_at", &r.get::<_, String>(7)?, &mut err),
                    started_at: ts("started_at", &r.get::<_, String>(8)?, &mut err),
                    finished_at: ts("finished_at", &r.get::<_, String>(9)?, &mut err),
                    result_json: r.get(10)?,
                    model_calls: r.get(11)?,
                    input_tokens: r.get(12)?,
                    output_tokens: r.get(13)?,
                    cached_input_tokens: r.get(14)?,
                    estimated_cost_micros: r.get(15)?,
                    active_ms: r.get(16)?,
                    lease_owner: r.get(17)?,
                    lease_expires_at: ts("lease_expires_at", &r.get::<_, String>(18)?, &mut err),
                    decode_error: err,
                    raw_invalid: Vec::new(),
                })
            },
        )
        .optional()
        .map_err(sq("read run"))?;
    r.ok_or_else(|| StoreError::NotFound {
        what: format!("run {id}"),
    })
}

pub fn read_steps(conn: &Connection, run_id: &str) -> Result<Vec<Step>, StoreError> {
    let mut st = conn
        .prepare("SELECT id, run_id, idx, status, decision_json, policy_json, observation_json, observation_hash, started_at, finished_at, spec_hash, policy_id FROM steps WHERE run_id = ? ORDER BY rowid")
        .map_err(sq("list steps"))?;
    let rows = st
        .query_map([run_id], |r| {
            let mut err = String::new();
            let decision_json: String = r.get(4)?;
            let policy_json: String = r.get(5)?;
            let observation_json: String = r.get(6)?;
            let decision = if decision_json.is_empty() {
                None
            } else {
                match Decision::from_json(decision_json.as_bytes()) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        push_err(&mut err, "decision", &e);
                        None
                    }
                }
            };
            let policy = if policy_json.is_empty() {
                None
            } else {
                match PolicyDecision::from_json(policy_json.as_bytes()) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        push_err(&mut err, "policy", &e);
                        None
                    }
                }
            };
            let observation = if observation_json.is_empty() {
                None
            } else {
                match Observation::from_json(observation_json.as_bytes()) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        push_err(&mut err, "observation", &e);
                        None
                    }
                }
            };
            let status: String = r.get(3)?;
            Ok(Step {
                id: r.get(0)?,
                run_id: r.get(1)?,
                index: r.get(2)?,
                status: StepStatus::parse(&status),
                decision,
                decision_json,
                policy,
                policy_json,
                observation,
                observation_json,
                observation_hash: r.get(7)?,
                started_at: ts("started_at", &r.get::<_, String>(8)?, &mut err),
                finished_at: ts("finished_at", &r.get::<_, String>(9)?, &mut err),
                spec_hash: r.get(10)?,
                policy_id: r.get(11)?,
                decode_error: err,
                raw_invalid: Vec::new(),
            })
        })
        .map_err(sq("list steps"))?;
    rows.collect::<Result<Vec<_>, _>>().map_err(sq("list steps"))
}

pub fn read_approvals(conn: &Connection, run_id: &str) -> Result<Vec<Approval>, StoreError> {
    let mut st = conn
        .prepare("SELECT id, run_id, step_id, kind, capability_json, presentation_json, request_json, hash, status, created_at, expires_at, decided_at, decided_by, note FROM approvals WHERE run_id = ? ORDER BY rowid")
        .map_err(sq("list approvals"))?;
    let rows = st
        .query_map([run_id], |r| {
            let mut err = String::new();
            let request_json: String = r.get(6)?;
            let request = match ToolRequest::from_json(request_json.as_bytes()) {
                Ok(q) => Some(q),
                Err(e) => {
                    push_err(&mut err, "request", &e);
                    None
                }
            };
            let status: String = r.get(8)?;
            Ok(Approval {
                id: r.get(0)?,
                run_id: r.get(1)?,
                step_id: r.get(2)?,
                kind: r.get(3)?,
                capability: r.get(4)?,
                presentation: r.get(5)?,
                request,
                request_json,
                hash: r.get(7)?,
                status: ApprovalStatus::parse(&status),
                created_at: ts("created_at", &r.get::<_, String>(9)?, &mut err),
                expires_at: ts("expires_at", &r.get::<_, String>(10)?, &mut err),
                decided_at: ts("decided_at", &r.get::<_, String>(11)?, &mut err),
                decided_by: r.get(12)?,
                note: r.get(13)?,
                decode_error: err,
                raw_invalid: Vec::new(),
            })
        })
        .map_err(sq("list approvals"))?;
    rows.collect::<Result<Vec<_>, _>>().map_err(sq("list approvals"))
}
