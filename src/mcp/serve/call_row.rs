//! The rows of the proxy's call index (`proxy_calls`) as both backends read and write them
//! (`calls.rs` for SQLite, `calls_pg.rs` for PostgreSQL).

/// `outcome` codes (0 unseen, 1 none, 2 known, 3 unknown).
pub const OUTCOME_NONE: i64 = 1;
pub const OUTCOME_KNOWN: i64 = 2;
pub const OUTCOME_UNKNOWN: i64 = 3;

/// One row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: i64,
    pub request_key: String,
    pub tool: String,
    pub side_effect: String,
    pub run_id: String,
    pub created_at: i64,
    pub open: bool,
    pub closed_at: i64,
    pub settled_at: i64,
    pub outcome: i64,
}

/// What a claim found.
#[derive(Debug)]
pub enum Claim {
    Claimed,
    /// Another caller claimed or closed the key's open row in between: decide again.
    Race,
}

/// The columns every read selects, in [`Row`]'s order.
pub(crate) const COLS: &str =
    "id, request_key, tool, side_effect, run_id, created_at, open, closed_at, settled_at, outcome";

/// The row a claim inserts.
pub(crate) struct NewCall<'a> {
    pub session: &'a str,
    pub key: &'a str,
    pub tool: &'a str,
    pub side_effect: &'a str,
    pub run_id: &'a str,
    pub now: i64,
}

/// An argument of a read of the index, bound by each backend as its own parameter type.
pub(crate) enum Arg<'a> {
    Text(&'a str),
    Int(i64),
}

/// The index's reads, written once for both backends: each binds the arguments and decodes
/// the rows (`rows`) and names its placeholder sign (`MARK`: `?` on SQLite, `$` on
/// PostgreSQL), so a read cannot say one thing on one database and another on the other.
pub(crate) trait CallReads {
    /// The placeholder sign before a parameter's number.
    const MARK: char;

    /// The rows `sql` selects (the columns [`COLS`]) with `args` bound in order.
    fn rows(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, String>;

    /// The key's open row and its rows closed since `since`, newest first.
    fn for_key(&mut self, session: &str, key: &str, since: i64) -> Result<Vec<Row>, String> {
        let m = Self::MARK;
        self.rows(
            &format!("SELECT {COLS} FROM proxy_calls WHERE session={m}1 AND request_key={m}2 AND (open=1 OR closed_at >= {m}3) ORDER BY id DESC"),
            &[Arg::Text(session), Arg::Text(key), Arg::Int(since)],
        )
    }

    /// For each other request of `tool` (not `except`), its newest row with an attempt when
    /// its outcome is unseen or unknown; oldest first.
    fn unresolved_of_tool(
        &mut self,
        session: &str,
        tool: &str,
        except: &str,
    ) -> Result<Vec<Row>, String> {
        let m = Self::MARK;
        self.rows(
            &format!(
                "SELECT {COLS} FROM proxy_calls p WHERE session={m}1 AND tool={m}2 AND request_key<>{m}3 AND outcome IN (0, {m}4) AND id = (SELECT MAX(id) FROM proxy_calls q WHERE q.session=p.session AND q.request_key=p.request_key AND q.outcome<>{m}5) ORDER BY id"
            ),
            &[
                Arg::Text(session),
                Arg::Text(tool),
                Arg::Text(except),
                Arg::Int(OUTCOME_UNKNOWN),
                Arg::Int(OUTCOME_NONE),
            ],
        )
    }

    /// Rows not yet settled, oldest first.
    fn unsettled(&mut self, session: &str) -> Result<Vec<Row>, String> {
        let m = Self::MARK;
        self.rows(
            &format!(
                "SELECT {COLS} FROM proxy_calls WHERE session={m}1 AND settled_at=0 ORDER BY id"
            ),
            &[Arg::Text(session)],
        )
    }

    /// The rows unsettled or settled since `since`, newest first (at most 200).
    fn recent(&mut self, session: &str, since: i64) -> Result<Vec<Row>, String> {
        let m = Self::MARK;
        self.rows(
            &format!("SELECT {COLS} FROM proxy_calls WHERE session={m}1 AND (settled_at=0 OR settled_at >= {m}2) ORDER BY id DESC LIMIT 200"),
            &[Arg::Text(session), Arg::Int(since)],
        )
    }
}
