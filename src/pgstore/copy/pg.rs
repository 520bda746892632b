//! The PostgreSQL end of a copy: a repeatable-read, read-only snapshot to read from, or one
//! transaction that checks the database is empty, migrates it, takes every table's lock and
//! writes, to write to.

use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{FromSql, ToSql};
use postgres::{Client, Statement, Transaction};
use std::collections::HashMap;

use super::{CopyError, ProxyTarget, Row, Source, Target, Value};
use crate::pgstore::PgUrl;
use crate::pgstore::error::{PgCtx, detail};
use crate::pgstore::schema;
use crate::pgstore::tables::{Kind, PROXY_CALLS, TABLES, Table};

pub(crate) struct PgSide<'a> {
    tx: Transaction<'a>,
    url: PgUrl,
    /// Each table's prepared insert.
    inserts: HashMap<&'static str, Statement>,
}

/// The advisory lock the migrator takes, so a copy and a first open do not race.
const MIGRATE_LOCK: i64 = 0x636f_756e_7465_7273;

impl<'a> PgSide<'a> {
    /// A consistent snapshot of a database at this build's schema version.
    pub fn begin_source(client: &'a mut Client, url: &PgUrl) -> Result<PgSide<'a>, CopyError> {
        schema::check_version(client, url)?;
        // Row-level security would hide rows from the copy, which would say it copied all.
        schema::check_no_foreign_code(client, url)?;
        let tx = client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .ctx(url, "copy: begin")?;
        let mut side = PgSide {
            tx,
            url: url.clone(),
            inserts: HashMap::new(),
        };
        // Events committed but not chained yet would be left behind while their runs move.
        let waiting = side.unchained()?;
        if waiting > 0 {
            return Err(CopyError::Refused(format!(
                "{url} has {waiting} event(s) committed but not chained yet: let its sequencer chain them (or stop its writers) and copy again; nothing was written"
            )));
        }
        Ok(side)
    }

    /// Events in the inbox, not chained yet (decision 0081).
    fn unchained(&mut self) -> Result<i64, CopyError> {
        self.scalar(
            "SELECT count(*) FROM event_inbox",
            "copy: read the event inbox",
        )
    }

    /// The one value of a one-row, one-column read in the transaction.
    fn scalar<T: for<'r> FromSql<'r>>(
        &mut self,
        sql: &str,
        what: &'static str,
    ) -> Result<T, CopyError> {
        Ok(self.tx.query_one(sql, &[]).ctx(&self.url, what)?.get(0))
    }

    /// The target's transaction: an empty database (no relation at all, or this schema
    /// with no row), migrated, every table locked against writers until commit.
    pub fn begin_target(client: &'a mut Client, url: &PgUrl) -> Result<PgSide<'a>, CopyError> {
        let mut tx = client.transaction().ctx(url, "copy: begin")?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_LOCK])
            .ctx(url, "copy: lock")?;
        let ours: bool = tx
            .query_one("SELECT to_regclass('countersign_schema') IS NOT NULL", &[])
            .ctx(url, "copy: read the schema")?
            .get(0);
        if !ours {
            let others: i64 = tx
                .query_one(
                    "SELECT count(*) FROM pg_catalog.pg_class c \
                     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = current_schema() AND c.relkind IN ('r','v','m','p','f')",
                    &[],
                )
                .ctx(url, "copy: read the schema")?
                .get(0);
            if others > 0 {
                return Err(CopyError::Refused(format!(
                    "{url} is not empty: it holds {others} table(s) or view(s) that are not countersign's; copy writes into an empty database only; nothing was written"
                )));
            }
        }
        schema::migrate_in(&mut tx, url)?;
        let names: Vec<&str> = TABLES
            .iter()
            .chain([&PROXY_CALLS])
            .map(|t| t.name)
            .collect();
        // event_inbox's rows name runs, so an empty runs table means an empty inbox.
        tx.batch_execute(&format!(
            "LOCK TABLE {}, event_chain, event_inbox IN EXCLUSIVE MODE",
            names.join(", ")
        ))
        .ctx(url, "copy: lock the tables")?;
        let mut side = PgSide {
            tx,
            url: url.clone(),
            inserts: HashMap::new(),
        };
        side.refuse_rows()?;
        Ok(side)
    }

    fn refuse_rows(&mut self) -> Result<(), CopyError> {
        for t in TABLES.iter().chain([&PROXY_CALLS]) {
            let sql = format!("SELECT EXISTS (SELECT 1 FROM {})", t.name);
            let any: bool = self.scalar(&sql, "copy: check the target is empty")?;
            if any {
                return Err(CopyError::Refused(format!(
                    "{} is not empty (its {} table has rows): copy writes into an empty database only; nothing was written",
                    self.url, t.name
                )));
            }
        }
        if self.head_seq()? != 0 {
            return Err(CopyError::Refused(format!(
                "{} is not empty (it has given event seqs before): copy writes into an empty database only; nothing was written",
                self.url
            )));
        }
        Ok(())
    }

    /// Commits the target's transaction.
    pub fn commit(self) -> Result<(), CopyError> {
        self.tx.commit().ctx(&self.url, "copy: commit")?;
        Ok(())
    }
}

impl Source for PgSide<'_> {
    fn scan(
        &mut self,
        t: &Table,
        f: &mut dyn FnMut(Row) -> Result<(), CopyError>,
    ) -> Result<(), CopyError> {
        let ord = t.order_col();
        let sql = format!(
            "SELECT {ord}, {} FROM {} ORDER BY {ord}",
            t.col_list(),
            t.name
        );
        let url = self.url.clone();
        let none: [&(dyn ToSql + Sync); 0] = [];
        let mut rows = self
            .tx
            .query_raw(sql.as_str(), none)
            .ctx(&url, "copy: read")?;
        while let Some(r) = rows.next().ctx(&url, "copy: read")? {
            let ord: i64 = r.try_get(0).ctx(&url, "copy: read")?;
            let mut vals = Vec::with_capacity(t.cols.len());
            for (i, (_, kind)) in t.cols.iter().enumerate() {
                vals.push(match kind {
                    Kind::Int => Value::Int(r.try_get(i + 1).ctx(&url, "copy: read")?),
                    Kind::Text => Value::Text(r.try_get(i + 1).ctx(&url, "copy: read")?),
                });
            }
            f(Row { ord, vals })?;
        }
        Ok(())
    }

    fn proxy_calls(&mut self) -> Result<u64, CopyError> {
        let n: i64 = self.scalar("SELECT count(*) FROM proxy_calls", "proxy calls")?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn head_seq(&mut self) -> Result<i64, CopyError> {
        self.scalar("SELECT seq FROM event_chain", "chain head")
    }

    fn other_tables(&mut self) -> Result<Vec<String>, CopyError> {
        let url = self.url.clone();
        let rows = self
            .tx
            .query(
                "SELECT table_name::text FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' \
                 AND table_name NOT IN ('runs', 'steps', 'events', 'approvals', 'model_calls', \
                   'tool_specs', 'proxy_calls', 'event_chain', 'event_inbox', \
                   'countersign_schema') ORDER BY 1",
                &[],
            )
            .ctx(&url, "copy: read the schema")?;
        Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
    }
}

impl ProxyTarget for PgSide<'_> {
    /// Schema migration 3 made the table, and `begin_target` found it empty.
    fn prepare_proxy_calls(&mut self) -> Result<(), CopyError> {
        Ok(())
    }

    fn finish_proxy_calls(&mut self) -> Result<(), CopyError> {
        self.tx
            .query_one(
                "SELECT setval(pg_get_serial_sequence('proxy_calls', 'id'), COALESCE(MAX(id), 0) + 1, false) FROM proxy_calls",
                &[],
            )
            .ctx(&self.url, "copy: the call index's next id")?;
        Ok(())
    }
}

impl Target for PgSide<'_> {
    fn insert(&mut self, t: &Table, row: &Row) -> Result<(), CopyError> {
        let (cols, first) = if t.seq_keyed {
            (t.col_list(), 1)
        } else {
            (format!("ord, {}", t.col_list()), 2)
        };
        let marks: Vec<String> = (1..first + t.cols.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "INSERT INTO {} ({cols}) VALUES ({})",
            t.name,
            marks.join(", ")
        );
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(marks.len());
        if !t.seq_keyed {
            params.push(&row.ord);
        }
        for v in &row.vals {
            params.push(match v {
                Value::Text(s) => s,
                Value::Int(i) => i,
            });
        }
        let stmt = match self.inserts.get(t.name) {
            Some(s) => s.clone(),
            None => {
                let s = self.tx.prepare(&sql).ctx(&self.url, "copy: insert")?;
                self.inserts.insert(t.name, s.clone());
                s
            }
        };
        self.tx.execute(&stmt, &params).map_err(|e| {
            CopyError::Refused(format!(
                "the target: table {} row {}: {}; the copy is refused and nothing was written",
                t.name,
                row.shown_key(t),
                crate::safetext::plain_line(detail(&e).as_bytes(), 400)
            ))
        })?;
        Ok(())
    }

    fn finish(&mut self, head_seq: i64, head_hash: &str) -> Result<(), CopyError> {
        for t in TABLES.iter().filter(|t| !t.seq_keyed) {
            let sql = format!(
                "SELECT setval(pg_get_serial_sequence('{0}', 'ord'), COALESCE(MAX(ord), 0) + 1, false) FROM {0}",
                t.name
            );
            self.tx
                .query_one(sql.as_str(), &[])
                .ctx(&self.url, "copy: insertion order")?;
        }
        self.tx
            .execute(
                "UPDATE event_chain SET seq = $1, hash = $2",
                &[&head_seq, &head_hash],
            )
            .ctx(&self.url, "copy: chain head")?;
        // The rows arrive chained, as the sequencer's batches do: say so as it says so, at the
        // commit, so a `watch` or a worker already listening reads them (found from outside:
        // a running `watch` announced none of the pending approvals a copy brought).
        self.tx
            .execute(
                "SELECT pg_notify($1, $2)",
                &[&crate::pgstore::CHANNEL, &head_seq.to_string()],
            )
            .ctx(&self.url, "copy: notify")?;
        Ok(())
    }
}
