//! The PostgreSQL store's errors. Each names the database by its redacted URL only.

/// What went wrong; every message is one sentence and never holds a password.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// The URL (or its options) is not usable.
    #[error("{0}")]
    Url(String),
    /// The server could not be reached or refused the connection.
    #[error("{db}: cannot connect: {detail}")]
    Connect { db: String, detail: String },
    /// A statement failed.
    #[error("{db}: {what}: {detail}")]
    Query {
        db: String,
        what: &'static str,
        detail: String,
    },
    /// The schema was written by a newer build.
    #[error(
        "{db} is at countersign PostgreSQL schema version {found}, this build knows {known}: use a newer countersign"
    )]
    SchemaNewer { db: String, found: i64, known: i64 },
    /// At an older schema version than this build's: its owner must migrate it.
    #[error(
        "{db} is at countersign PostgreSQL schema version {found}, this build reads {known}: have the database's owner run `countersign --db URL migrate`"
    )]
    SchemaOlder { db: String, found: i64, known: i64 },
    /// Not a countersign database (no version table), or not migrated.
    #[error("{db} holds no countersign schema: {detail}")]
    NotOurs { db: String, detail: String },
    /// The database cannot hold agentrt's text exactly.
    #[error("{db}: {detail}")]
    Unusable { db: String, detail: String },
}

/// The text of a client error: the server's message and detail when it sent one, else the
/// client's message followed by its causes (a TLS handshake's says which certificate check
/// failed only in its source).
pub(crate) fn detail(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(d) => format!("{} ({d})", db.message()),
            None => db.message().to_string(),
        },
        None => {
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                let more = c.to_string();
                if !text.contains(&more) {
                    text.push_str(": ");
                    text.push_str(&more);
                }
                cause = c.source();
            }
            text
        }
    }
}

/// Maps a client error to [`PgError::Query`].
pub(crate) trait PgCtx<T> {
    fn ctx(self, db: &super::PgUrl, what: &'static str) -> Result<T, PgError>;
}

impl<T> PgCtx<T> for Result<T, postgres::Error> {
    fn ctx(self, db: &super::PgUrl, what: &'static str) -> Result<T, PgError> {
        self.map_err(|e| PgError::Query {
            db: db.to_string(),
            what,
            detail: detail(&e),
        })
    }
}
