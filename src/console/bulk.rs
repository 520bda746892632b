//! Marks and bulk decisions (issue 21): what the state keeps of marked queue rows and of bulk
//! decisions in flight, and the pure judgements on them (why a marked row would be skipped,
//! what its presentation says, what the approve table shows of its arguments). Nothing here
//! draws or reads; every byte kept is untrusted and drawn through `text`.

use super::data::{ApprovalRow, ApprovalStatus, Key, QueueRow, RunHeader, RunRow, RunStatus};
use super::facts::{self, Presented};
use super::fields;
use super::time;

/// How many rows may be marked at once (a bulk action reads each again before it is decided).
pub const MARKS_MAX: usize = 500;

/// A marked queue row as it was when marked.
#[derive(Debug, Clone, PartialEq)]
pub struct Marked {
    pub run: Key,
    pub approval: Key,
    /// The hash the row had when it was marked: a bulk decision is bound to it.
    pub hash: String,
    /// The tool it names (stored bytes), absent when its request does not decode.
    pub tool: Option<Vec<u8>>,
    /// A later read found another hash: its decision will be refused, and that is said.
    pub changed: bool,
}

impl Marked {
    pub fn of(r: &QueueRow) -> Marked {
        Marked {
            run: r.run_id.clone(),
            approval: r.approval_id.clone(),
            hash: r.hash.clone(),
            tool: r.tool.clone(),
            changed: false,
        }
    }
}

/// A marked run of the runs list (for a bulk cancel) as it was when marked.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkedRun {
    pub run: Key,
    pub status: RunStatus,
    pub goal: Vec<u8>,
}

impl MarkedRun {
    pub fn of(r: &RunRow) -> MarkedRun {
        MarkedRun {
            run: r.id.clone(),
            status: r.status.clone(),
            goal: r.goal.clone(),
        }
    }
}

/// What a read of the marked rows is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Drop the marks that left the queue (after the database changed).
    Check,
    /// Open the confirmation of a reject, deny or cancel.
    Confirm(Verb),
    /// Say what the confirmation would do, changing nothing.
    DryRun,
    /// Open the approve table.
    Table,
}

/// The marks of the queue, in the order they were made, and the reads about them in flight.
#[derive(Debug, Clone, Default)]
pub struct Marks {
    pub rows: Vec<Marked>,
    /// A read of the marked rows in flight, and what it is for.
    pub reading: Option<(u64, Purpose)>,
    /// A read of every row in the filter in flight (`mark_all`).
    pub marking_all: Option<u64>,
    /// The runs list's marked runs (a bulk cancel), in the order they were marked.
    pub runs: Vec<MarkedRun>,
    /// A read of the marked runs in flight, and what it is for.
    pub reading_runs: Option<(u64, Purpose)>,
}

impl Marks {
    pub fn contains(&self, approval: &Key) -> bool {
        self.rows.iter().any(|m| m.approval == *approval)
    }

    /// The marked approvals' ids, in order.
    pub fn ids(&self) -> Vec<Key> {
        self.rows.iter().map(|m| m.approval.clone()).collect()
    }
}

/// What a bulk action does to each row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Reject,
    Deny,
    Cancel,
    Approve,
    /// Cancel the runs marked on the runs list.
    CancelRuns,
}

impl Verb {
    pub fn name(self) -> &'static str {
        match self {
            Verb::Reject => "reject",
            Verb::Deny => "deny",
            Verb::Cancel | Verb::CancelRuns => "cancel",
            Verb::Approve => "approve",
        }
    }

    /// The verb as the footer's `enter rejects 3` says it.
    pub fn third_person(self) -> &'static str {
        match self {
            Verb::Reject => "rejects",
            Verb::Deny => "denies",
            Verb::Cancel | Verb::CancelRuns => "cancels",
            Verb::Approve => "approves",
        }
    }

    pub fn done(self) -> &'static str {
        match self {
            Verb::Reject => "rejected",
            Verb::Deny => "denied",
            Verb::Cancel | Verb::CancelRuns => "cancelled",
            Verb::Approve => "approved",
        }
    }

    /// What happens to each row, in the console's own words.
    pub fn effect(self) -> &'static str {
        match self {
            Verb::Reject => "each approval is rejected and its run ends as CANCELLED",
            Verb::Deny => {
                "each call is denied: it does not run, its agent is told your note, its run goes INTERRUPTED (an MCP proxy's call is rejected with the note, which its host is told)"
            }
            Verb::Cancel => "each row's run is cancelled (operator_cancelled)",
            Verb::Approve => "each call is approved and runs when its run resumes",
            Verb::CancelRuns => {
                "each run ends as CANCELLED (operator_cancelled); its pending approvals stay as they are"
            }
        }
    }
}

/// One marked row as a bulk action lists it: the mark, the consumer's facts, and why it would
/// be skipped when a read of it now says so.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub marked: Marked,
    /// `what`, `amount`, `target` where the presentation gives them (decision 0050).
    pub facts: Vec<(String, Vec<u8>)>,
    /// Why it would be skipped (untrusted bytes inside: drawn escaped); `None`: it would be
    /// decided.
    pub skip: Option<Vec<u8>>,
}

/// A bulk decision in flight: each row's write id, and the outcomes so far.
#[derive(Debug, Clone)]
pub struct BulkRun {
    pub verb: Verb,
    pub waiting: Vec<(u64, Item)>,
    pub done: Vec<Item>,
    pub skipped: Vec<(Item, Vec<u8>)>,
}

/// The row as a bulk action lists it, judged on `now_row` (the approval read again).
pub fn item(m: &Marked, now_row: Option<&ApprovalRow>, verb: Verb, now: i64) -> Item {
    let mut m = m.clone();
    if let Some(a) = now_row
        && a.hash != m.hash
    {
        m.changed = true;
    }
    Item {
        facts: now_row.map(in_their_words).unwrap_or_default(),
        skip: judge(&m, now_row, verb, now),
        marked: m,
    }
}

/// Why the row would be skipped, judged as the shown-hash call judges it; `None`: decided.
pub fn judge(m: &Marked, now_row: Option<&ApprovalRow>, verb: Verb, now: i64) -> Option<Vec<u8>> {
    let Some(a) = now_row else {
        return Some(b"it is no longer in the database".to_vec());
    };
    if a.status != ApprovalStatus::Pending {
        let mut why = format!("already {}", a.status).into_bytes();
        if !a.decided_by.is_empty() {
            why.extend_from_slice(b" by ");
            why.extend_from_slice(&a.decided_by);
        }
        if !a.decided_at.is_zero() {
            why.extend_from_slice(format!(" {} ago", time::age(&a.decided_at, now)).as_bytes());
        }
        return Some(why);
    }
    if m.changed || a.hash != m.hash {
        return Some(
            b"it changed since you marked it (unmark and mark it again to read it)".to_vec(),
        );
    }
    if a.run_status != RunStatus::WaitingForApproval {
        return Some(format!("its run is {}", a.run_status).into_bytes());
    }
    if a.decode_error.is_some() {
        return Some(b"it does not decode (cancel its run by name)".to_vec());
    }
    if let Some((n, _)) = a.request_not_shown {
        return Some(format!("its request is {n} long, too large to read here").into_bytes());
    }
    if verb != Verb::Cancel && time::expired(&a.expires_at, now) {
        return Some(
            b"it expired: deciding it would only record the expiry and cancel its run".to_vec(),
        );
    }
    None
}

/// A marked run as the bulk cancel lists it, judged on `now_run` (the run read again): a run
/// that ended meanwhile is skipped.
pub fn run_item(m: &MarkedRun, now_run: Option<&RunHeader>) -> Item {
    let status = now_run.map_or(m.status.clone(), |h| h.status.clone());
    let skip = match now_run {
        None => Some(b"the run is no longer in the database".to_vec()),
        Some(h) if h.status.is_terminal() => {
            Some(format!("it ended meanwhile: it is {}", h.status).into_bytes())
        }
        Some(_) => None,
    };
    Item {
        marked: Marked {
            run: m.run.clone(),
            approval: Key::from(String::new()),
            hash: String::new(),
            tool: None,
            changed: false,
        },
        facts: vec![
            ("status".into(), status.as_str().as_bytes().to_vec()),
            ("goal".into(), m.goal.clone()),
        ],
        skip,
    }
}

/// What the request does in the consumer's words (decision 0050): its title, amount and
/// target, each labelled, and each only when the presentation gives it. Untrusted: drawn
/// through the escaper.
pub struct TheirWords {
    pub what: Option<(String, Vec<u8>)>,
    pub amount: Option<(String, Vec<u8>)>,
    pub target: Option<(String, Vec<u8>)>,
}

impl TheirWords {
    pub fn of(a: &ApprovalRow) -> TheirWords {
        let p = Presented::parse(&a.presentation);
        let p = p.as_ref();
        TheirWords {
            what: p
                .and_then(|p| p.title())
                .map(|t| ("what".into(), t.to_vec())),
            amount: p.and_then(|p| p.amount()).map(|(k, n)| {
                let v = [&k[..], format!(" {n}").as_bytes()].concat();
                ("amount".into(), v)
            }),
            target: p
                .and_then(|p| p.target())
                .map(|(k, v)| ("target".into(), [&k[..], b" ", &facts::scalar(&v)].concat())),
        }
    }
}

/// [`TheirWords`] as the bulk confirmation lists them: title, target, amount.
pub fn in_their_words(a: &ApprovalRow) -> Vec<(String, Vec<u8>)> {
    let w = TheirWords::of(a);
    [w.what, w.target, w.amount].into_iter().flatten().collect()
}

/// The arguments the call will run with, as the approval detail lays them out: each
/// `(label, value)` whole (a string in quotes), duplicate keys named.
pub fn arguments(a: &ApprovalRow) -> Vec<(Vec<u8>, Vec<u8>)> {
    let all = fields::fields(a);
    let start = all
        .iter()
        .position(|f| f.label.starts_with(b"args") || f.label.starts_with(b"request"));
    let Some(start) = start else {
        return Vec::new();
    };
    all[start..]
        .iter()
        .take_while(|f| !f.label.starts_with(b"presentation"))
        .map(|f| {
            let value = if f.is_string {
                [&b"\""[..], &f.value, b"\""].concat()
            } else {
                f.value.clone()
            };
            (f.label.clone(), value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(presentation: &str) -> ApprovalRow {
        ApprovalRow {
            presentation: presentation.as_bytes().to_vec(),
            ..ApprovalRow::default()
        }
    }

    #[test]
    fn the_bulk_list_names_title_target_then_amount() {
        let a = row(r#"{"amount_cents":4000,"order":"ord_1004","title":"Refund 40.00 USD"}"#);
        let got: Vec<(String, Vec<u8>)> = in_their_words(&a);
        let want: Vec<(String, Vec<u8>)> = vec![
            ("what".into(), b"Refund 40.00 USD".to_vec()),
            ("target".into(), b"order ord_1004".to_vec()),
            ("amount".into(), b"amount_cents 4000".to_vec()),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_presentation_that_does_not_read_gives_no_words() {
        assert!(in_their_words(&row("not json")).is_empty());
        assert!(in_their_words(&row(r#"{"other":1}"#)).is_empty());
    }
}
