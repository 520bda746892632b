//! The `/` filter's reads (`Query::Filtered`): the list is read by key, a batch at a time,
//! with no SQL filter, through the same reads and row conversions that fill the screen, and
//! each row is kept when its shown text matches (`console::filter`). The reply is the window
//! of the narrowed list the inner query asks for, with the narrowed list's exact length.
//!
//! Why not SQL: an `instr` over stored bytes matches what SQLite's JSON functions, its
//! ASCII-only `lower()` and a 4096-character `substr` make of a column, not what the reviewer
//! reads (escapes are drawn as `\u{...}`; a request with a repeated key does not decode here
//! while `json_extract` reads its first), so a row could hide from the filter or be found by
//! bytes nobody sees. The cost is a scan of the list per filter read: the
//! console keeps at most one in flight while the reviewer types (`update/filter.rs`).

use super::data::*;
use super::filter::Needle;

/// Rows read per step of the scan.
pub const BATCH: u64 = 256;

/// Answers `Query::Filtered { filter, list }`.
pub fn filtered(
    data: &mut dyn ConsoleData,
    filter: &str,
    list: &Query,
) -> Result<Reply, DataError> {
    let n = Needle::new(filter);
    Ok(match list {
        Query::Queue { offset, limit, .. } => {
            let ask = |offset, anchor| Query::Queue {
                filter: String::new(),
                offset,
                limit: BATCH,
                anchor,
                end: None,
            };
            let take = |r| match r {
                Reply::Queue(p) => Ok(p),
                other => unexpected(other),
            };
            let key = |r: &QueueRow| r.approval_id.as_str().map(str::to_string);
            let keep = |r: &QueueRow| n.queue(r);
            Reply::Queue(scan(data, ask, take, keep, key, (*offset, *limit))?)
        }
        Query::Runs {
            status,
            offset,
            limit,
            ..
        } => {
            let ask = |offset, anchor| Query::Runs {
                status: status.clone(),
                filter: String::new(),
                offset,
                limit: BATCH,
                anchor,
                end: None,
            };
            let take = |r| match r {
                Reply::Runs(p) => Ok(p),
                other => unexpected(other),
            };
            let key = |r: &RunRow| r.id.as_str().map(str::to_string);
            let keep = |r: &RunRow| n.run(r);
            Reply::Runs(scan(data, ask, take, keep, key, (*offset, *limit))?)
        }
        Query::Damaged { offset, limit, .. } => {
            let ask = |offset, anchor| Query::Damaged {
                offset,
                limit: BATCH,
                anchor,
                end: None,
            };
            let take = |r| match r {
                Reply::Damaged(p) => Ok(p),
                other => unexpected(other),
            };
            let key = |r: &DamagedRow| {
                r.row_id
                    .as_str()
                    .map(|id| (r.table, id.to_string(), r.column))
            };
            let keep = |r: &DamagedRow| n.damaged(r);
            Reply::Damaged(scan(data, ask, take, keep, key, (*offset, *limit))?)
        }
        _ => {
            return Err(DataError::Read(
                "a filter applies only to the queue, the runs and the damaged rows".into(),
            ));
        }
    })
}

fn unexpected<T>(r: Reply) -> Result<T, DataError> {
    match r {
        Reply::Failed(e) => Err(e),
        _ => Err(DataError::Read(
            "the list's read answered another list".into(),
        )),
    }
}

/// Reads the whole list by key, `BATCH` rows at a time (each batch anchored on the last row
/// of the one before), keeping the rows `keep` accepts that fall in `window` (offset, limit)
/// of the narrowed list, and counting them all.
fn scan<T, K>(
    data: &mut dyn ConsoleData,
    ask: impl Fn(u64, Option<(u64, K)>) -> Query,
    take: impl Fn(Reply) -> Result<Page<T>, DataError>,
    keep: impl Fn(&T) -> bool,
    key: impl Fn(&T) -> Option<K>,
    window: (u64, u64),
) -> Result<Page<T>, DataError> {
    let (offset, limit) = window;
    let (mut rows, mut total, mut at, mut anchor) = (Vec::new(), 0u64, 0u64, None);
    loop {
        let page = take(data.query(&ask(at, anchor.take()))?)?;
        // A window that did not start where asked means the list ended (or moved) here.
        if page.rows.is_empty() || page.offset != at {
            break;
        }
        let n = page.rows.len() as u64;
        anchor = page.rows.last().and_then(&key).map(|k| (at + n - 1, k));
        for r in page.rows {
            if keep(&r) {
                if total >= offset && total - offset < limit {
                    rows.push(r);
                }
                total += 1;
            }
        }
        at += n;
        if n < BATCH {
            break;
        }
    }
    Ok(Page {
        offset: offset.min(total),
        total,
        rows,
        exact: true,
    })
}
