//! Helpers shared by the reliability harnesses: damaging a database the way a bad disk, a
//! buggy writer or a hand edit would, and the invariants every crash or stress trial must keep
//! (see `invariants.rs`). Test crates that use it also declare `mod support;` (the store's
//! helpers: `shared_dir`, the Python fixture writer and verifier).
#![allow(dead_code)]

pub mod damage;
pub mod invariants;
pub mod world;

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

/// Opens a database for damaging: foreign keys off (so missing referenced rows can be
/// written), no hardening, WAL checkpointed and the file switched to a rollback journal on
/// drop so every byte lives in the main file.
pub struct Raw {
    pub conn: Connection,
}

impl Raw {
    pub fn open(db: &Path) -> Raw {
        let conn = Connection::open_with_flags(
            db,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .expect("open the database for damaging");
        conn.execute_batch("PRAGMA foreign_keys=OFF;")
            .expect("foreign keys off");
        Raw { conn }
    }

    /// Runs statements as written.
    pub fn exec(&self, sql: &str) {
        self.conn
            .execute_batch(sql)
            .unwrap_or_else(|e| panic!("damage {sql:?}: {e}"));
    }

    /// Sets one column of the rows `filter` selects to `value` (bound as given: a `Vec<u8>`
    /// binds as a BLOB, so wrap it in `CAST(? AS TEXT)` through [`Raw::set_text_bytes`]).
    pub fn set<T: rusqlite::ToSql>(&self, table: &str, column: &str, filter: &str, value: T) {
        let n = self
            .conn
            .execute(
                &format!("UPDATE {table} SET {column} = ? WHERE {filter}"),
                [value],
            )
            .unwrap_or_else(|e| panic!("damage {table}.{column}: {e}"));
        assert!(n > 0, "damage {table}.{column} WHERE {filter}: no row");
    }

    /// Stores arbitrary bytes in a TEXT column as TEXT (invalid UTF-8 included).
    pub fn set_text_bytes(&self, table: &str, column: &str, filter: &str, bytes: &[u8]) {
        let n = self
            .conn
            .execute(
                &format!("UPDATE {table} SET {column} = CAST(? AS TEXT) WHERE {filter}"),
                [bytes],
            )
            .unwrap_or_else(|e| panic!("damage {table}.{column}: {e}"));
        assert!(n > 0, "damage {table}.{column} WHERE {filter}: no row");
    }

    /// One text value of a query.
    pub fn text(&self, sql: &str) -> String {
        self.conn
            .query_row(sql, [], |r| r.get(0))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Moves everything into the main file and leaves no `-wal` behind.
    pub fn flatten(self) {
        self.conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;")
            .expect("checkpoint");
        drop(self.conn);
    }
}

/// The database's page size (header bytes 16..18; 1 means 65536).
pub fn page_size(db: &Path) -> usize {
    let bytes = std::fs::read(db).expect("read database");
    match u16::from_be_bytes([bytes[16], bytes[17]]) {
        1 => 65536,
        n => n as usize,
    }
}

/// Overwrites `len` bytes at `offset` of the file with a pattern that is not a valid b-tree
/// page (what a torn write or a bad sector leaves).
pub fn overwrite(db: &Path, offset: usize, len: usize) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(db)
        .expect("open file to corrupt");
    f.seek(SeekFrom::Start(offset as u64)).expect("seek");
    let junk: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(151) ^ 0xA5)
        .collect();
    f.write_all(&junk).expect("write junk");
    f.sync_all().expect("sync");
}

/// The root page number of a table (1-based).
pub fn root_page(db: &Path, table: &str) -> usize {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
    conn.query_row(
        "SELECT rootpage FROM sqlite_master WHERE type='table' AND name=?",
        [table],
        |r| r.get::<_, i64>(0),
    )
    .expect("root page") as usize
}
