//! The SQLite end of a copy: rows read in rowid order with each value's storage class checked
//! against its column, and rows written with their rowid, inside one `BEGIN IMMEDIATE`.

use std::path::Path;

use rusqlite::Connection;
use rusqlite::types::ValueRef;

use super::{CopyError, CopyReport, ProxyTarget, Row, Source, Target, Value, transfer};
use crate::pgstore::tables::{Kind, TABLES, Table};
use crate::runtime::store::Store;

pub(crate) struct SqliteSide<'c> {
    conn: &'c Connection,
}

impl<'c> SqliteSide<'c> {
    pub fn new(conn: &'c Connection) -> SqliteSide<'c> {
        SqliteSide { conn }
    }
}

fn db_err(what: &str) -> impl Fn(rusqlite::Error) -> CopyError + '_ {
    move |e| CopyError::Refused(format!("SQLite: {what}: {e}"))
}

/// The value at `i` as its column's kind, or a refusal naming the row.
fn value(t: &Table, ord: i64, col: usize, v: ValueRef<'_>) -> Result<Value, String> {
    let (name, kind) = t.cols[col];
    match (kind, v) {
        (Kind::Int, ValueRef::Integer(n)) => Ok(Value::Int(n)),
        (Kind::Text, ValueRef::Text(b)) => match std::str::from_utf8(b) {
            Ok(s) if !s.contains('\0') => Ok(Value::Text(s.to_string())),
            Ok(_) => Err(format!("{name} holds a NUL character")),
            Err(_) => Err(format!("{name} is not UTF-8 text")),
        },
        (_, other) => Err(format!(
            "{name} holds {}, not {}",
            match other {
                ValueRef::Null => "NULL",
                ValueRef::Integer(_) => "an integer",
                ValueRef::Real(_) => "a real number",
                ValueRef::Text(_) => "text",
                ValueRef::Blob(_) => "a blob",
            },
            match kind {
                Kind::Int => "an integer",
                Kind::Text => "text",
            }
        )),
    }
    .map_err(|why| format!("table {} row at rowid {ord}: {why}", t.name))
}

impl Source for SqliteSide<'_> {
    fn scan(
        &mut self,
        t: &Table,
        f: &mut dyn FnMut(Row) -> Result<(), CopyError>,
    ) -> Result<(), CopyError> {
        let mut cols = t.col_list();
        if t.name == "proxy_calls" && !self.has_outcome()? {
            // An index at agentrt's version 1: its migration 2 gives every row outcome 0.
            cols = cols.replace("outcome", "0 AS outcome");
        }
        let sql = format!("SELECT rowid, {cols} FROM {} ORDER BY rowid", t.name);
        let mut stmt = self.conn.prepare(&sql).map_err(db_err("read"))?;
        let mut rows = stmt.query([]).map_err(db_err("read"))?;
        while let Some(r) = rows.next().map_err(db_err("read"))? {
            let ord: i64 = r.get(0).map_err(db_err("read"))?;
            let mut vals = Vec::with_capacity(t.cols.len());
            for i in 0..t.cols.len() {
                let v = r.get_ref(i + 1).map_err(db_err("read"))?;
                vals.push(value(t, ord, i, v).map_err(|why| {
                    CopyError::Refused(format!(
                        "SQLite {why}: a damaged row; the copy is refused and nothing was written"
                    ))
                })?);
            }
            f(Row { ord, vals })?;
        }
        Ok(())
    }

    fn proxy_calls(&mut self) -> Result<u64, CopyError> {
        if !self.has_table("proxy_calls")? {
            return Ok(0);
        }
        if self.has_table("proxy_schema_migrations")? {
            let version: i64 = self
                .conn
                .query_row(
                    "SELECT COALESCE(MAX(version), 0) FROM proxy_schema_migrations",
                    [],
                    |r| r.get(0),
                )
                .map_err(db_err("proxy calls"))?;
            if version > PROXY_INDEX_KNOWN {
                return Err(CopyError::Refused(format!(
                    "SQLite: the MCP proxy's call index is at version {version} and this build knows {PROXY_INDEX_KNOWN}: a newer proxy migrated it; use a newer countersign; nothing was written"
                )));
            }
        }
        let n: i64 = self
            .conn
            .query_row("SELECT count(*) FROM proxy_calls", [], |r| r.get(0))
            .map_err(db_err("proxy calls"))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn other_tables(&mut self) -> Result<Vec<String>, CopyError> {
        // agentrt's schema, its migrations' table and the MCP proxy's call index with its
        // migrations; `sqlite_*` are SQLite's own.
        let mut stmt = self
            .conn
            .prepare(
                "SELECT CAST(name AS BLOB) FROM sqlite_master WHERE type = 'table' \
                 AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT IN \
                 ('runs', 'steps', 'events', 'approvals', 'model_calls', 'tool_specs', \
                  'schema_migrations', 'proxy_calls', 'proxy_schema_migrations') ORDER BY name",
            )
            .map_err(db_err("read the schema"))?;
        let names = stmt
            .query_map([], |r| r.get::<_, Vec<u8>>(0))
            .map_err(db_err("read the schema"))?
            .map(|n| n.map(|b| String::from_utf8_lossy(&b).into_owned()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err("read the schema"))?;
        Ok(names)
    }

    fn head_seq(&mut self) -> Result<i64, CopyError> {
        self.conn
            .query_row(
                "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name='events'),0), \
                 COALESCE((SELECT MAX(seq) FROM events),0))",
                [],
                |r| r.get(0),
            )
            .map_err(db_err("chain head"))
    }
}

/// The call index versions this copy reads (agentrt mcp 2.7's two migrations).
const PROXY_INDEX_KNOWN: i64 = 2;
#[cfg(feature = "mcp")]
const _: () = assert!(PROXY_INDEX_KNOWN == crate::mcp::index::KNOWN_VERSION);

impl SqliteSide<'_> {
    fn has_table(&self, name: &str) -> Result<bool, CopyError> {
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
                [name],
                |r| r.get(0),
            )
            .map_err(db_err("read the schema"))
    }

    /// Whether the call index has agentrt's migration 2 (its `outcome` column).
    fn has_outcome(&self) -> Result<bool, CopyError> {
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM pragma_table_info('proxy_calls') WHERE name = 'outcome')",
                [],
                |r| r.get(0),
            )
            .map_err(db_err("read the schema"))
    }
}

impl ProxyTarget for SqliteSide<'_> {
    fn prepare_proxy_calls(&mut self) -> Result<(), CopyError> {
        create_proxy_index(self.conn)?;
        if self.proxy_calls()? > 0 {
            return Err(CopyError::Refused(
                "the target is not empty (its proxy_calls table has rows): copy writes into an empty database only; nothing was written".into(),
            ));
        }
        Ok(())
    }

    /// SQLite's AUTOINCREMENT moves `sqlite_sequence` past every id inserted.
    fn finish_proxy_calls(&mut self) -> Result<(), CopyError> {
        Ok(())
    }
}

/// agentrt's index migrations, in the copy's transaction.
#[cfg(feature = "mcp")]
fn create_proxy_index(conn: &Connection) -> Result<(), CopyError> {
    crate::mcp::index::migrate_in(conn)
        .map(drop)
        .map_err(|e| CopyError::Refused(format!("the target: {e}; nothing was written")))
}

#[cfg(not(feature = "mcp"))]
fn create_proxy_index(_conn: &Connection) -> Result<(), CopyError> {
    Err(CopyError::Refused(
        "the source holds an MCP proxy call index and this build has no MCP proxy (feature `mcp`) to create one in SQLite; nothing was written".into(),
    ))
}

impl Target for SqliteSide<'_> {
    fn insert(&mut self, t: &Table, row: &Row) -> Result<(), CopyError> {
        let (cols, n) = if t.seq_keyed {
            (t.col_list(), t.cols.len())
        } else {
            (format!("rowid, {}", t.col_list()), t.cols.len() + 1)
        };
        let marks = vec!["?"; n].join(", ");
        let sql = format!("INSERT INTO {} ({cols}) VALUES ({marks})", t.name);
        let mut stmt = self.conn.prepare_cached(&sql).map_err(db_err("insert"))?;
        let mut params: Vec<rusqlite::types::Value> = Vec::with_capacity(n);
        if !t.seq_keyed {
            params.push(row.ord.into());
        }
        for v in &row.vals {
            params.push(match v {
                Value::Text(s) => s.clone().into(),
                Value::Int(i) => (*i).into(),
            });
        }
        stmt.execute(rusqlite::params_from_iter(params))
            .map_err(|e| {
                CopyError::Refused(format!(
                    "the target: table {} row {}: {e}; the copy is refused and nothing was written",
                    t.name,
                    row.shown_key(t)
                ))
            })?;
        Ok(())
    }

    fn finish(&mut self, head_seq: i64, _head_hash: &str) -> Result<(), CopyError> {
        self.conn
            .execute(
                "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'events' AND seq < ?1",
                [head_seq],
            )
            .map_err(db_err("chain head"))?;
        Ok(())
    }
}

/// The SQLite target: an existing database (checked empty later) or a new one. The flag is
/// true when this call created the file.
pub(crate) fn open_target(path: &Path) -> Result<(Store, bool), CopyError> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok((Store::open_existing(path, false)?, false));
    }
    match Store::open(path) {
        Ok(s) => Ok((s, true)),
        Err(e) => {
            remove_created(path);
            Err(e.into())
        }
    }
}

/// Removes a database this copy created (and its WAL files).
pub(crate) fn remove_created(path: &Path) {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    for p in [path.as_os_str(), wal.as_os_str(), shm.as_os_str()] {
        let _ = std::fs::remove_file(p);
    }
}

/// Refuses a target holding any row, then copies into it.
pub(crate) fn copy_into(
    conn: &Connection,
    source: &mut dyn Source,
) -> Result<CopyReport, CopyError> {
    for t in &TABLES {
        let any: bool = conn
            .query_row(
                &format!("SELECT EXISTS (SELECT 1 FROM {})", t.name),
                [],
                |r| r.get(0),
            )
            .map_err(db_err("check the target is empty"))?;
        if any {
            return Err(CopyError::Refused(format!(
                "the target is not empty (its {} table has rows): copy writes into an empty database only; nothing was written",
                t.name
            )));
        }
    }
    let mut side = SqliteSide::new(conn);
    if side.proxy_calls()? > 0 {
        return Err(CopyError::Refused(
            "the target is not empty (its proxy_calls table has rows): copy writes into an empty database only; nothing was written".into(),
        ));
    }
    if side.head_seq()? != 0 {
        return Err(CopyError::Refused(
            "the target is not empty (it has given event seqs before): copy writes into an empty database only; nothing was written".into(),
        ));
    }
    transfer(source, &mut side)
}
