//! Statements prepared once a connection (docs/decisions/0103): the client crate prepares a
//! statement given as text again at every call (a round trip, and the server's parse and
//! analysis) and closes it after. A [`Conn`] keeps each text it has run prepared, so a
//! statement's next call is one round trip on a statement the server has parsed already.
//!
//! A prepared statement belongs to the server's session, not to a transaction: one prepared
//! in a transaction that rolls back stays usable. The server replans it when a table it reads
//! changes. The cache is bounded ([`MAX`]): a connection whose texts are built at run time
//! (the console's filters) cannot grow it without end.

use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Client, GenericClient, IsolationLevel, Row, Statement, Transaction};

/// Statements one connection keeps prepared at the most; at the bound, the cache starts over.
pub(crate) const MAX: usize = 256;

/// A statement's parameters.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// The statements prepared on one connection, by their text.
#[derive(Default)]
pub(crate) struct Stmts {
    map: HashMap<String, Statement>,
}

impl Stmts {
    /// `sql` prepared on `c` (the connection these statements belong to, or a transaction
    /// of it): from the cache, or prepared now and kept.
    fn get(&mut self, c: &mut impl GenericClient, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.map.get(sql) {
            return Ok(s.clone());
        }
        let s = c.prepare(sql)?;
        if self.map.len() >= MAX {
            self.map.clear();
        }
        self.map.insert(sql.to_string(), s.clone());
        Ok(s)
    }
}

/// Runs statements given as text through a statement cache: a connection ([`Conn`]) or a
/// transaction on one ([`Tx`]).
pub(crate) trait Cached {
    /// The statement `sql`, prepared on this connection once.
    fn statement(&mut self, sql: &str) -> Result<Statement, postgres::Error>;
    /// The client or transaction it runs on.
    fn raw(&mut self) -> &mut impl GenericClient;

    fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, postgres::Error> {
        let s = self.statement(sql)?;
        self.raw().execute(&s, params)
    }

    fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, postgres::Error> {
        let s = self.statement(sql)?;
        self.raw().query(&s, params)
    }

    fn query_one(&mut self, sql: &str, params: Params<'_>) -> Result<Row, postgres::Error> {
        let s = self.statement(sql)?;
        self.raw().query_one(&s, params)
    }

    fn query_opt(&mut self, sql: &str, params: Params<'_>) -> Result<Option<Row>, postgres::Error> {
        let s = self.statement(sql)?;
        self.raw().query_opt(&s, params)
    }
}

/// A connection and the statements prepared on it. It derefs to the client for what is not
/// a statement (transactions of the crate's own, `batch_execute`, cancel tokens).
pub(crate) struct Conn {
    client: Client,
    stmts: Stmts,
}

impl Conn {
    pub(crate) fn new(client: Client) -> Conn {
        Conn {
            client,
            stmts: Stmts::default(),
        }
    }

    /// A transaction whose statements go through this connection's cache: READ COMMITTED,
    /// or a read-only repeatable-read snapshot.
    pub(crate) fn begin(&mut self, snapshot: bool) -> Result<Tx<'_>, postgres::Error> {
        let (level, read_only) = if snapshot {
            (IsolationLevel::RepeatableRead, true)
        } else {
            (IsolationLevel::ReadCommitted, false)
        };
        let tx = self
            .client
            .build_transaction()
            .isolation_level(level)
            .read_only(read_only)
            .start()?;
        Ok(Tx {
            tx,
            stmts: &mut self.stmts,
        })
    }

    /// How many statements are kept.
    #[cfg(feature = "testing")]
    pub(crate) fn kept(&self) -> usize {
        self.stmts.map.len()
    }
}

impl std::ops::Deref for Conn {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.client
    }
}

impl Cached for Conn {
    fn statement(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        self.stmts.get(&mut self.client, sql)
    }
    fn raw(&mut self) -> &mut impl GenericClient {
        &mut self.client
    }
}

/// A transaction on a [`Conn`], its statements through the connection's cache.
pub(crate) struct Tx<'c> {
    tx: Transaction<'c>,
    stmts: &'c mut Stmts,
}

impl Tx<'_> {
    /// Commits.
    pub(crate) fn commit(self) -> Result<(), postgres::Error> {
        self.tx.commit()
    }
}

impl Cached for Tx<'_> {
    fn statement(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        self.stmts.get(&mut self.tx, sql)
    }
    fn raw(&mut self) -> &mut impl GenericClient {
        &mut self.tx
    }
}

/// A transaction of the client crate's own (the console's snapshots, `copy`): nothing is
/// kept, each call prepares its text as the client crate does.
impl Cached for Transaction<'_> {
    fn statement(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        self.prepare(sql)
    }
    fn raw(&mut self) -> &mut impl GenericClient {
        self
    }
}
