//! Sizes of fields before they are read (issue 14 item 6): a request of hundreds of megabytes
//! is named by its size and never read whole to be shown. `octet_length` gives a stored
//! value's size in bytes from its record header, without loading the value.

use rusqlite::{OptionalExtension, params};

use super::Store;
use super::bind::key;
use super::error::{Ctx, StoreError};
use super::pages::{MAX_PAGE_TEXT, approval_select, capped_approval};
use super::reads::query_opt;
use crate::runtime::types::{Approval, AsKey, Key};

/// When a page read replaced this approval's request by its stand-in (the request is over
/// [`MAX_PAGE_TEXT`] characters): the request's length, in characters, or in bytes when it
/// is over [`SHOWN_REQUEST_MAX`](super::SHOWN_REQUEST_MAX) bytes. Its `request.args`
/// are then the store's `{"truncated":true,"length":N}`, not the tool call's arguments.
pub fn capped_request(a: &Approval) -> Option<i64> {
    const TAIL: &str = ", over MaxPageText; its arguments were not read";
    // Decode errors are joined with "; ", which the note itself contains: find it whole.
    let end = a.decode_error.find(TAIL)?;
    let head = &a.decode_error[..end];
    let start = head.rfind("request: ")? + "request: ".len();
    let rest = &head[start..];
    let n: i64 = rest
        .strip_suffix(" characters")
        .or_else(|| rest.strip_suffix(" bytes"))?
        .parse()
        .ok()?;
    (n > MAX_PAGE_TEXT).then_some(n)
}

impl Store {
    /// One approval read as a page reads it (its request replaced by a stand-in when over
    /// [`MAX_PAGE_TEXT`]), for showing; `None` if absent.
    pub fn approval_capped(
        &self,
        run_id: impl AsKey,
        approval_id: impl AsKey,
    ) -> Result<Option<Approval>, StoreError> {
        let (run_id, approval_id) = (key(&run_id), key(&approval_id));
        self.read(|c| {
            let sql = format!("{} WHERE id = ? AND run_id = ?", approval_select());
            let args = params![approval_id, run_id];
            query_opt(c, &sql, args, "get approval", capped_approval)
        })
    }

    /// The stored size in bytes of an approval's request; `None` if there is no such approval.
    pub fn request_bytes(
        &self,
        run_id: impl AsKey,
        approval_id: impl AsKey,
    ) -> Result<Option<i64>, StoreError> {
        let (run_id, approval_id) = (key(&run_id), key(&approval_id));
        self.read(|c| {
            c.prepare_cached(
                "SELECT octet_length(request_json) FROM approvals WHERE id = ? AND run_id = ?",
            )
            .ctx("request size")?
            .query_row(params![approval_id, run_id], |r| r.get::<_, Option<i64>>(0))
            .optional()
            .ctx("request size")
            .map(|o| o.map(|n| n.unwrap_or(0)))
        })
    }

    /// A run's pending approvals in creation order (at most `max`) with their request sizes in
    /// bytes.
    pub fn pending_request_bytes(
        &self,
        run_id: impl AsKey,
        max: i64,
    ) -> Result<Vec<(Key, i64)>, StoreError> {
        let run_id = key(&run_id);
        self.read(|c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT CAST(id AS BLOB), octet_length(request_json) FROM approvals \
                     WHERE run_id = ? AND status = 'pending' ORDER BY rowid LIMIT ?",
                )
                .ctx("request sizes")?;
            let rows = stmt
                .query_map(params![run_id, max], |r| {
                    let id: Option<Vec<u8>> = r.get(0)?;
                    Ok((
                        Key::new(id.unwrap_or_default()),
                        r.get::<_, Option<i64>>(1)?.unwrap_or(0),
                    ))
                })
                .ctx("request sizes")?;
            rows.collect::<Result<Vec<_>, _>>().ctx("request sizes")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::store::pages::capped_note;

    #[test]
    fn the_capped_note_is_found_among_other_decode_errors() {
        let mut a = Approval::default();
        for (n, note) in [
            (70_000, capped_note(70_000)),
            (5_000_000, capped_note(5_000_000)),
        ] {
            a.decode_error = format!("kind: not valid UTF-8; {note}; note: bad");
            assert_eq!(capped_request(&a), Some(n));
        }
        a.decode_error =
            "request: 12 characters, over MaxPageText; its arguments were not read".into();
        assert_eq!(
            capped_request(&a),
            None,
            "not over the cap: not the store's stand-in"
        );
        a.decode_error = String::new();
        assert_eq!(capped_request(&a), None);
    }
}
