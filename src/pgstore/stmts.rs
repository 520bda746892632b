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
///
/// A statement the server no longer takes as prepared is let go, so that its next call
/// prepares it again: one whose result type a migration changed ("cached plan must not change
/// result type", SQLSTATE 0A000), or one the session lost (26000, after a pooler's `DISCARD
/// ALL`). On a connection the call is then made once more, the statement prepared anew; in a
/// transaction the server has aborted it, so the error is the caller's and the next
/// transaction prepares afresh.
pub(crate) trait Cached: Sized {
    /// Whether a call that failed on a stale statement may be made again (outside a
    /// transaction only).
    const MAY_RETRY: bool;

    /// The client or transaction it runs on, and the statements its connection keeps (none:
    /// nothing is kept).
    fn parts(&mut self) -> (&mut impl GenericClient, Option<&mut Stmts>);

    /// The statement `sql`, prepared on this connection once.
    fn statement(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        match self.parts() {
            (c, Some(kept)) => kept.get(c, sql),
            (c, None) => c.prepare(sql),
        }
    }

    /// Lets `sql`'s statement go.
    fn forget(&mut self, sql: &str) {
        if let (_, Some(kept)) = self.parts() {
            kept.map.remove(sql);
        }
    }

    /// Runs `call` on `sql`'s statement, letting a stale statement go (see the trait).
    fn run<T>(
        &mut self,
        sql: &str,
        call: impl Fn(&mut Self, &Statement) -> Result<T, postgres::Error>,
    ) -> Result<T, postgres::Error> {
        let s = self.statement(sql)?;
        match call(self, &s) {
            Err(e) if stale(&e) => {
                self.forget(sql);
                if !Self::MAY_RETRY {
                    return Err(e);
                }
                let s = self.statement(sql)?;
                call(self, &s)
            }
            done => done,
        }
    }

    fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, postgres::Error> {
        self.run(sql, |c, s| c.parts().0.execute(s, params))
    }

    fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, postgres::Error> {
        self.run(sql, |c, s| c.parts().0.query(s, params))
    }

    fn query_one(&mut self, sql: &str, params: Params<'_>) -> Result<Row, postgres::Error> {
        self.run(sql, |c, s| c.parts().0.query_one(s, params))
    }

    fn query_opt(&mut self, sql: &str, params: Params<'_>) -> Result<Option<Row>, postgres::Error> {
        self.run(sql, |c, s| c.parts().0.query_opt(s, params))
    }
}

/// Whether the server refused a prepared statement as such: its result type changed since it
/// was prepared, or the session no longer has it.
fn stale(e: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    e.code().is_some_and(|c| {
        *c == SqlState::FEATURE_NOT_SUPPORTED || *c == SqlState::INVALID_SQL_STATEMENT_NAME
    })
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
    const MAY_RETRY: bool = true;
    fn parts(&mut self) -> (&mut impl GenericClient, Option<&mut Stmts>) {
        (&mut self.client, Some(&mut self.stmts))
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
    const MAY_RETRY: bool = false;
    fn parts(&mut self) -> (&mut impl GenericClient, Option<&mut Stmts>) {
        (&mut self.tx, Some(&mut *self.stmts))
    }
}

/// A transaction of the client crate's own (the console's snapshots, `copy`): nothing is
/// kept, each call prepares its text as the client crate does.
impl Cached for Transaction<'_> {
    const MAY_RETRY: bool = false;
    fn parts(&mut self) -> (&mut impl GenericClient, Option<&mut Stmts>) {
        (self, None)
    }
}
