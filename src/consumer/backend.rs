//! The store's backend: orders, the effect ledger, and the call keys of completed writes, in
//! one SQLite file of its own (never the run database). Every write is one transaction that
//! records the call key and the effect together, and re-checks ownership and state with a
//! compare-and-set update, so a crash can never leave an effect without its key.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde_json::{Value, json};
use thiserror::Error;

pub use crate::consumer::orders::{Order, OrderStatus};
use crate::consumer::tools::{EffectClass, ValidArgs};

/// What the backend can fail with. Each message says what to do.
#[derive(Debug, Error)]
pub enum BackendError {
    #[error("the backend database {path} already exists; pick a new path or remove it first")]
    Exists { path: String },
    #[error(
        "the backend database {path} is not a consumer backend (no orders table); point at the right file"
    )]
    NotABackend { path: String },
    #[error("the backend database failed: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("a stored call result is not valid JSON; the backend file was edited by hand")]
    BadStoredResult,
    #[error("the backend database {path}: {err}; check the directory's permissions")]
    Io {
        path: String,
        #[source]
        err: std::io::Error,
    },
    #[error("the backend lock was poisoned by a panic in another thread; restart the process")]
    Poisoned,
}

/// One ledger row: a state change that happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    pub seq: i64,
    pub session_id: String,
    pub call_key: String,
    pub tool: String,
    pub order_id: String,
    pub amount_cents: i64,
    /// The new address, or the recipient the email went to (read from the order record).
    pub detail: String,
}

/// A completed write, stored under its call key.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCall {
    pub key: String,
    pub tool: String,
    pub args_hash: String,
    pub result: Value,
}

/// What a session has spent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budgets {
    /// Writes executed (reversible and irreversible).
    pub writes: i64,
    /// Sum of the impact of irreversible writes, in cents.
    pub irreversible_cents: i64,
}

/// One write handed to [`Backend::apply`].
#[derive(Debug, Clone, Copy)]
pub struct WriteRequest<'a> {
    pub session_id: &'a str,
    pub step_id: &'a str,
    /// The call key (run id and step index).
    pub key: &'a str,
    pub tool: &'a str,
    /// Fingerprint of the normalised arguments, compared on replay.
    pub args_hash: &'a str,
    /// The caller; `None` only in the seeded-defect test that removes the ownership check.
    pub owner: Option<&'a str>,
    pub effect: EffectClass,
    pub args: &'a ValidArgs,
}

/// The outcome of [`Backend::apply`].
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The effect happened now; key and effect were recorded in the same transaction.
    Executed(Value),
    /// The key was already completed with the same request: the stored result, no effect.
    Replayed(Value),
    /// The key was completed with a different request.
    KeyReused,
    /// The order is missing or not the caller's.
    NotFound,
    /// The order's state no longer allows the call.
    InvalidState(Vec<String>),
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS orders (
  id TEXT PRIMARY KEY, customer TEXT NOT NULL, total_cents INTEGER NOT NULL,
  refunded_cents INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL, email TEXT NOT NULL,
  address TEXT NOT NULL, CHECK (refunded_cents >= 0 AND refunded_cents <= total_cents));
CREATE TABLE IF NOT EXISTS call_keys (
  key TEXT PRIMARY KEY, session_id TEXT NOT NULL, step_id TEXT NOT NULL, tool TEXT NOT NULL,
  args_hash TEXT NOT NULL, result_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS effects (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
  call_key TEXT NOT NULL UNIQUE REFERENCES call_keys(key), tool TEXT NOT NULL,
  effect_class TEXT NOT NULL, order_id TEXT NOT NULL, amount_cents INTEGER NOT NULL,
  detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
  id TEXT PRIMARY KEY, user_id TEXT NOT NULL, scopes_json TEXT NOT NULL, tools_json TEXT NOT NULL,
  scenario TEXT NOT NULL DEFAULT '');
";

/// The four seeded orders (id, customer, total, status).
pub const SEED: [(&str, &str, i64, &str); 4] = [
    ("ord_1001", "cu_ana", 4200, "delivered"),
    ("ord_1002", "cu_ben", 15900, "delivered"),
    ("ord_1003", "cu_ana", 12000, "processing"),
    ("ord_1004", "cu_ana", 15000, "delivered"),
];

/// The backend: one SQLite connection behind a mutex.
pub struct Backend {
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Backend")
    }
}

fn row_to_order(r: &rusqlite::Row<'_>) -> rusqlite::Result<Order> {
    let status: String = r.get(4)?;
    Ok(Order {
        id: r.get(0)?,
        customer: r.get(1)?,
        total_cents: r.get(2)?,
        refunded_cents: r.get(3)?,
        status: OrderStatus::parse(&status),
        email: r.get(5)?,
        address: r.get(6)?,
    })
}

const ORDER_COLS: &str = "id, customer, total_cents, refunded_cents, status, email, address";

impl Backend {
    /// Opens (creating and seeding when new) the backend at `path`.
    pub fn open(path: &Path) -> Result<Backend, BackendError> {
        // A new backend is its owner's only, like the run database (0600 whatever the umask).
        if let Ok(f) = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            f.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|err| BackendError::Io {
                    path: path.display().to_string(),
                    err,
                })?;
        }
        let conn = Connection::open(path)?;
        Backend::init(conn, path)
    }

    /// Opens an existing backend for reading only (`recheck`): nothing is created, migrated,
    /// seeded or written (`PRAGMA query_only`), so the file keeps every byte.
    pub fn open_read_only(path: &Path) -> Result<Backend, BackendError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch("PRAGMA query_only = ON;")?;
        let has_orders: i64 = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='orders'",
            [],
            |r| r.get(0),
        )?;
        if has_orders == 0 {
            return Err(BackendError::NotABackend {
                path: path.display().to_string(),
            });
        }
        Ok(Backend {
            conn: Mutex::new(conn),
        })
    }

    /// Creates a new backend at `path`, refusing a file that already exists.
    pub fn create_new(path: &Path) -> Result<Backend, BackendError> {
        let shown = path.display().to_string();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|_| BackendError::Exists {
                path: shown.clone(),
            })?;
        // Owner-only whatever the umask, like the run database beside it.
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|err| BackendError::Io { path: shown, err })?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        Backend::init(conn, path)
    }

    /// A private in-memory backend, seeded (tests and examples).
    pub fn in_memory() -> Result<Backend, BackendError> {
        Backend::init(Connection::open_in_memory()?, Path::new(":memory:"))
    }

    fn init(conn: Connection, path: &Path) -> Result<Backend, BackendError> {
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch("PRAGMA foreign_keys = ON;")?;
        let has_tables: i64 =
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
        let has_orders: i64 = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='orders'",
            [],
            |r| r.get(0),
        )?;
        if has_tables > 0 && has_orders == 0 {
            return Err(BackendError::NotABackend {
                path: path.display().to_string(),
            });
        }
        conn.execute_batch(SCHEMA)?;
        let n: i64 = conn.query_row("SELECT count(*) FROM orders", [], |r| r.get(0))?;
        if n == 0 {
            for (id, customer, total, status) in SEED {
                let email = format!("{}@example.test", customer.trim_start_matches("cu_"));
                conn.execute(
                    "INSERT INTO orders (id, customer, total_cents, refunded_cents, status, email, address)
                     VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6)",
                    params![id, customer, total, status, email, "1 Elm St, 94107"],
                )?;
            }
        }
        Ok(Backend {
            conn: Mutex::new(conn),
        })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Connection>, BackendError> {
        self.conn.lock().map_err(|_| BackendError::Poisoned)
    }

    /// The order `id`, if it exists (whoever owns it: the caller decides).
    pub fn order(&self, id: &str) -> Result<Option<Order>, BackendError> {
        let conn = self.lock()?;
        Ok(conn
            .query_row(
                &format!("SELECT {ORDER_COLS} FROM orders WHERE id = ?1"),
                [id],
                row_to_order,
            )
            .optional()?)
    }

    /// Every order id with its owner, in id order.
    pub fn owners(&self) -> Result<Vec<(String, String)>, BackendError> {
        let conn = self.lock()?;
        let mut st = conn.prepare("SELECT id, customer FROM orders ORDER BY id")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The whole effect ledger, oldest first.
    pub fn ledger(&self) -> Result<Vec<Effect>, BackendError> {
        let conn = self.lock()?;
        let mut st = conn.prepare(
            "SELECT seq, session_id, call_key, tool, order_id, amount_cents, detail FROM effects ORDER BY seq",
        )?;
        let rows = st.query_map([], |r| {
            Ok(Effect {
                seq: r.get(0)?,
                session_id: r.get(1)?,
                call_key: r.get(2)?,
                tool: r.get(3)?,
                order_id: r.get(4)?,
                amount_cents: r.get(5)?,
                detail: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The completed call stored under `key`, if any.
    pub fn completed_call(&self, key: &str) -> Result<Option<StoredCall>, BackendError> {
        let conn = self.lock()?;
        stored_call(&conn, key)
    }

    /// What `session_id` has spent so far.
    pub fn budgets(&self, session_id: &str) -> Result<Budgets, BackendError> {
        let conn = self.lock()?;
        Ok(conn.query_row(
            "SELECT count(*), COALESCE(SUM(CASE WHEN effect_class = 'irreversible_write'
                 THEN amount_cents ELSE 0 END), 0) FROM effects WHERE session_id = ?1",
            [session_id],
            |r| {
                Ok(Budgets {
                    writes: r.get(0)?,
                    irreversible_cents: r.get(1)?,
                })
            },
        )?)
    }

    /// Records the session a run acts for (identity lives here, never in tool arguments), and
    /// the scripted scenario that drives it (empty when none).
    pub fn put_session(
        &self,
        s: &crate::consumer::session::Session,
        scenario: &str,
    ) -> Result<(), BackendError> {
        let conn = self.lock()?;
        let scopes = serde_json::to_string(&s.scopes).unwrap_or_else(|_| "[]".into());
        let tools = serde_json::to_string(&s.tools).unwrap_or_else(|_| "[]".into());
        conn.execute(
            "INSERT OR REPLACE INTO sessions (id, user_id, scopes_json, tools_json, scenario)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![s.id, s.user_id, scopes, tools, scenario],
        )?;
        Ok(())
    }

    /// The session recorded for `id`, if any.
    pub fn session(
        &self,
        id: &str,
    ) -> Result<Option<crate::consumer::session::Session>, BackendError> {
        let conn = self.lock()?;
        let row: Option<(String, String, String)> = conn
            .query_row(
                "SELECT user_id, scopes_json, tools_json FROM sessions WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        Ok(row.map(
            |(user_id, scopes, tools)| crate::consumer::session::Session {
                id: id.to_string(),
                user_id,
                scopes: serde_json::from_str(&scopes).unwrap_or_default(),
                tools: serde_json::from_str(&tools).unwrap_or_default(),
            },
        ))
    }

    /// The scenario recorded with session `id` (empty when none).
    pub fn session_scenario(&self, id: &str) -> Result<Option<String>, BackendError> {
        let conn = self.lock()?;
        Ok(conn
            .query_row("SELECT scenario FROM sessions WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// The completed call recorded for a runtime step, whatever its key.
    pub fn completed_call_by_step(
        &self,
        session_id: &str,
        step_id: &str,
    ) -> Result<Option<StoredCall>, BackendError> {
        let conn = self.lock()?;
        let key: Option<String> = conn
            .query_row(
                "SELECT key FROM call_keys WHERE session_id = ?1 AND step_id = ?2 AND step_id != ''",
                [session_id, step_id],
                |r| r.get(0),
            )
            .optional()?;
        match key {
            Some(k) => stored_call(&conn, &k),
            None => Ok(None),
        }
    }

    /// Stages 5 to 7 again and stage 9, in ONE immediate transaction: replay or key reuse,
    /// ownership, state as a compare-and-set update, the effect row, and the call key.
    /// `owner` is `None` only for the seeded-defect test that removes the ownership check.
    pub fn apply(&self, w: &WriteRequest<'_>) -> Result<Applied, BackendError> {
        let WriteRequest {
            session_id,
            step_id,
            key,
            tool,
            args_hash,
            owner,
            effect,
            args,
        } = *w;
        let mut conn = self.lock()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some(done) = stored_call(&tx, key)? {
            return Ok(if done.args_hash == args_hash && done.tool == tool {
                Applied::Replayed(done.result)
            } else {
                Applied::KeyReused
            });
        }
        let order: Option<Order> = tx
            .query_row(
                &format!("SELECT {ORDER_COLS} FROM orders WHERE id = ?1"),
                [args.order_id()],
                row_to_order,
            )
            .optional()?;
        let Some(order) = order else {
            return Ok(Applied::NotFound);
        };
        if let Some(owner) = owner
            && order.customer != owner
        {
            return Ok(Applied::NotFound);
        }
        let (changed, amount, detail, result) = match args {
            ValidArgs::GetOrder { .. } => return Ok(Applied::Executed(read_result(&order))),
            ValidArgs::IssueRefund {
                order_id,
                amount_cents,
                ..
            } => {
                let n = tx.execute(
                    "UPDATE orders SET refunded_cents = refunded_cents + ?2
                     WHERE id = ?1 AND status = 'delivered' AND refunded_cents + ?2 <= total_cents",
                    params![order_id, amount_cents],
                )?;
                let refunded = order.refunded_cents + amount_cents;
                let result = json!({"order_id": order_id, "refund_cents": amount_cents, "refunded_cents": refunded});
                (n, *amount_cents, String::new(), result)
            }
            ValidArgs::UpdateShippingAddress {
                order_id,
                line1,
                postal_code,
            } => {
                let address = format!("{line1}, {postal_code}");
                let n = tx.execute(
                    "UPDATE orders SET address = ?2 WHERE id = ?1 AND status = 'processing'",
                    params![order_id, address],
                )?;
                let result = json!({"order_id": order_id, "address": address});
                (n, 0, address, result)
            }
            ValidArgs::SendStatusEmail { order_id } => {
                // The recipient comes from the order record, never from the arguments.
                (
                    1,
                    0,
                    order.email.clone(),
                    json!({"order_id": order_id, "sent": true}),
                )
            }
        };
        if changed != 1 {
            let contract_problems = match args {
                ValidArgs::UpdateShippingAddress { .. } => vec!["order has already shipped".into()],
                _ => {
                    let mut p = Vec::new();
                    if order.status != OrderStatus::Delivered {
                        p.push("order is not delivered".to_string());
                    }
                    p.push(format!(
                        "amount exceeds refundable {}",
                        order.refundable_cents()
                    ));
                    p
                }
            };
            return Ok(Applied::InvalidState(contract_problems));
        }
        let result_json = result.to_string();
        tx.execute(
            "INSERT INTO call_keys (key, session_id, step_id, tool, args_hash, result_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![key, session_id, step_id, tool, args_hash, result_json],
        )?;
        tx.execute(
            "INSERT INTO effects (session_id, call_key, tool, effect_class, order_id, amount_cents, detail)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![session_id, key, tool, effect.as_str(), args.order_id(), amount, detail],
        )?;
        tx.commit()?;
        Ok(Applied::Executed(result))
    }

    /// Runs raw SQL on the backend (demo set-up and tests only).
    pub fn execute_raw(&self, sql: &str) -> Result<(), BackendError> {
        self.lock()?.execute_batch(sql)?;
        Ok(())
    }
}

/// What `get_order` returns: status and totals, not the email or street address.
pub fn read_result(order: &Order) -> Value {
    json!({
        "order_id": order.id,
        "order_status": order.status.as_str(),
        "total_cents": order.total_cents,
        "refunded_cents": order.refunded_cents,
    })
}

fn stored_call(conn: &Connection, key: &str) -> Result<Option<StoredCall>, BackendError> {
    let row: Option<(String, String, String)> = conn
        .query_row(
            "SELECT tool, args_hash, result_json FROM call_keys WHERE key = ?1",
            [key],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    match row {
        None => Ok(None),
        Some((tool, args_hash, result_json)) => {
            let result =
                serde_json::from_str(&result_json).map_err(|_| BackendError::BadStoredResult)?;
            Ok(Some(StoredCall {
                key: key.to_string(),
                tool,
                args_hash,
                result,
            }))
        }
    }
}
