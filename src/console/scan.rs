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
        Query::Queue {
            offset,
            limit,
            sort,
            ..
        } => {
            // In the order on screen: a sorted queue is scanned sorted.
            let ask = |offset, anchor| Query::Queue {
                filter: String::new(),
                sort: *sort,
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
            let key = DamagedRow::anchor;
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

/// Most batches one scan reads (a reader that never ends its list cannot hold the worker).
const MAX_BATCHES: u64 = 1 << 14;

/// Reads the whole list by key, `BATCH` rows at a time (each batch anchored on the last row
/// of the one before), keeping the rows `keep` accepts that fall in `window` (offset, limit)
/// of the narrowed list, and counting them all. A batch may come back at another index than
/// asked (rows came or left before its anchor meanwhile: the store keeps the window on the
/// anchor's row); the scan goes on from the store's index. It ends at a short or empty batch,
/// or one whose last row is the last row of the batch before (nothing new was read).
fn scan<T, K: PartialEq + Clone>(
    data: &mut dyn ConsoleData,
    ask: impl Fn(u64, Option<(u64, K)>) -> Query,
    take: impl Fn(Reply) -> Result<Page<T>, DataError>,
    keep: impl Fn(&T) -> bool,
    key: impl Fn(&T) -> Option<K>,
    window: (u64, u64),
) -> Result<Page<T>, DataError> {
    let (offset, limit) = window;
    let (mut rows, mut total, mut at) = (Vec::new(), 0u64, 0u64);
    let mut anchor: Option<(u64, K)> = None;
    for _ in 0..MAX_BATCHES {
        let page = take(data.query(&ask(at, anchor.clone()))?)?;
        let n = page.rows.len() as u64;
        let last = page.rows.last().and_then(&key);
        if n == 0 || (last.is_some() && last == anchor.as_ref().map(|(_, k)| k.clone())) {
            break;
        }
        at = page.offset.saturating_add(n);
        anchor = last.map(|k| (at - 1, k));
        for r in page.rows {
            if keep(&r) {
                if total >= offset && total - offset < limit {
                    rows.push(r);
                }
                total += 1;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue of `n` rows whose tool is `a` for even rows and `b` for odd ones.
    struct Fake {
        n: u64,
        reads: usize,
        stuck: bool,
    }

    fn row(i: u64) -> QueueRow {
        QueueRow {
            approval_id: Key::from(format!("p{i}").as_str()),
            run_id: Key::from("r"),
            step_id: Key::from("s"),
            step_index: Some(1),
            kind: b"tool_call".to_vec(),
            created_at: Default::default(),
            expires_at: Default::default(),
            expires_unreadable: false,
            tool: Some(
                if i.is_multiple_of(2) {
                    b"tool_a"
                } else {
                    b"tool_b"
                }
                .to_vec(),
            ),
            args: Some(b"{}".to_vec()),
            args_repeat_a_key: false,
            hash: String::new(),
            sorted_by: None,
            paused_again: false,
            goal: vec![],
            agent_reason: vec![],
        }
    }

    impl ConsoleData for Fake {
        fn data_version(&mut self) -> Result<i64, DataError> {
            Ok(0)
        }
        fn query(&mut self, q: &Query) -> Result<Reply, DataError> {
            self.reads += 1;
            let Query::Queue { offset, limit, .. } = q else {
                return Err(DataError::Read("only the queue".into()));
            };
            // `stuck`: a reader that answers every read past the end with its last window.
            let from = if self.stuck && *offset >= self.n {
                self.n.saturating_sub(*limit)
            } else {
                *offset
            };
            let to = (from + limit).min(self.n);
            Ok(Reply::Queue(Page {
                offset: from,
                total: self.n,
                rows: (from..to).map(row).collect(),
                exact: true,
            }))
        }
    }

    fn window(n: u64, offset: u64, limit: u64, stuck: bool) -> (Page<QueueRow>, usize) {
        let mut f = Fake { n, reads: 0, stuck };
        let q = Query::Queue {
            filter: String::new(),
            sort: crate::console::sort::Sort::Age,
            offset,
            limit,
            anchor: None,
            end: None,
        };
        match filtered(&mut f, "TOOL_B", &q) {
            Ok(Reply::Queue(p)) => (p, f.reads),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_window_of_the_narrowed_list_with_its_exact_length() {
        let (p, _) = window(600, 250, 10, false);
        assert_eq!((p.offset, p.total, p.exact), (250, 300, true));
        let ids: Vec<_> = p.rows.iter().map(|r| r.approval_id.clone()).collect();
        let want: Vec<Key> = (250..260)
            .map(|i| Key::from(format!("p{}", 2 * i + 1).as_str()))
            .collect();
        assert_eq!(ids, want);
    }

    #[test]
    fn a_list_of_whole_batches_or_a_clamping_reader_ends_the_scan() {
        // 512 rows: two full batches, then an empty read.
        let (p, reads) = window(2 * BATCH, 0, 5, false);
        assert_eq!((p.total, reads), (BATCH, 3));
        // The same from a reader that answers past the end with its last window again.
        let (p, reads) = window(2 * BATCH, 0, 5, true);
        assert_eq!((p.total, reads), (BATCH, 3));
        let (p, _) = window(0, 0, 5, false);
        assert_eq!((p.total, p.rows.len()), (0, 0));
        // A window past the narrowed list's end is empty, at its end.
        let (p, _) = window(10, 40, 5, false);
        assert_eq!((p.offset, p.total, p.rows.len()), (5, 5, 0));
    }
}
