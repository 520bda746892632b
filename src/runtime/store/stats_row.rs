//! What `stats` needs from one step or approval row, read from the columns in Rust
//! ([`json::members`](crate::runtime::json::members)) with one pass over each document, and
//! asked of SQLite's own JSON functions, one row at a time, only when that read is not sure
//! (a document that is not strictly valid JSON, a BLOB, an escape where a member is read, a
//! non-string tool, ...). The SQL below is what the counts are defined by: the fast read
//! answers only where it is certain to agree with it.

use std::borrow::Cow;
use std::sync::LazyLock;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};

use super::column::{last_member, opt_bytes, text};
use super::error::{Ctx, StoreError};
use crate::runtime::json::members::{Member, top_members};
use crate::runtime::stats::{NAME_MAX, reason_code};

/// One step, as the steps scan counts it.
#[derive(Debug, PartialEq)]
pub(super) enum StepFacts<'a> {
    /// Not a tool call (or no decision): not counted.
    Skip,
    /// A decision that is there but not JSON: counted as damaged, not looked into.
    Damaged,
    /// A tool call.
    Call {
        /// The tool, cut to [`NAME_MAX`] bytes; `None` when the decision names none.
        tool: Option<Cow<'a, [u8]>>,
        /// Whether the name was longer and was cut.
        cut: bool,
        /// What the recorded policy said.
        outcome: Outcome<'a>,
    },
}

/// A step's recorded policy outcome, as far as the counts go.
#[derive(Debug, PartialEq)]
pub(super) enum Outcome<'a> {
    /// `allow`.
    Allow,
    /// `deny` or `abort`, with the code its reason starts with.
    Denied(Cow<'a, str>),
    /// Anything else (no policy, a policy that is not JSON, another outcome).
    Neither,
}

/// The fast read of a step's decision and policy; `None` when SQLite must answer.
pub(super) fn step_fast<'a>(decision: ValueRef<'a>, policy: ValueRef<'a>) -> Option<StepFacts<'a>> {
    let d = match decision {
        ValueRef::Null => return Some(StepFacts::Skip),
        ValueRef::Text(b"") => return Some(StepFacts::Skip),
        ValueRef::Text(d) => d,
        _ => return None,
    };
    let [kind, tool] = top_members(d, [b"kind", b"tool"])?;
    match Member::of(kind) {
        Member::Plain(b"tool_call") => {}
        Member::Escaped(_) => return None,
        _ => return Some(StepFacts::Skip),
    }
    let (tool, cut) = plain_name(Member::of(tool))?;
    Some(StepFacts::Call {
        tool,
        cut,
        outcome: outcome_fast(policy, true)?,
    })
}

/// What the approvals scan needs from an approval's step.
#[derive(Debug, PartialEq)]
pub(super) struct HeldStep<'a> {
    /// The step's tool, cut to [`NAME_MAX`] bytes (`None`: no step, or it names none).
    pub tool: Option<Cow<'a, [u8]>>,
    /// Whether the name was longer and was cut.
    pub cut: bool,
    /// Whether the step's recorded policy outcome is `allow`.
    pub allowed: bool,
}

/// The fast read of an approval's step (NULL columns when the join found none); `None` when
/// SQLite must answer.
pub(super) fn approval_fast<'a>(
    decision: ValueRef<'a>,
    policy: ValueRef<'a>,
) -> Option<HeldStep<'a>> {
    let (tool, cut) = match decision {
        ValueRef::Null | ValueRef::Text(b"") => (None, false),
        ValueRef::Text(d) => {
            let [tool] = top_members(d, [b"tool"])?;
            plain_name(Member::of(tool))?
        }
        _ => return None,
    };
    let allowed = outcome_fast(policy, false)? == Outcome::Allow;
    Some(HeldStep { tool, cut, allowed })
}

/// A name member as `substr(CAST(t AS BLOB), 1, NAME_MAX)` and whether it was longer; `None`
/// for what only SQLite renders exactly (escapes, numbers, objects, ...).
fn plain_name(m: Member<'_>) -> Option<(Option<Cow<'_, [u8]>>, bool)> {
    match m {
        Member::Null => Some((None, false)),
        Member::Plain(s) => Some((Some(Cow::Borrowed(cut_name(s))), s.len() > NAME_MAX)),
        Member::Escaped(_) | Member::Other => None,
    }
}

fn cut_name(s: &[u8]) -> &[u8] {
    s.get(..NAME_MAX).unwrap_or(s)
}

/// The outcome of a policy column (`with_code`: read the denial's reason too).
fn outcome_fast(policy: ValueRef<'_>, with_code: bool) -> Option<Outcome<'_>> {
    let p = match policy {
        ValueRef::Null | ValueRef::Text(b"") => return Some(Outcome::Neither),
        ValueRef::Text(p) => p,
        _ => return None,
    };
    let [outcome, reason] = top_members(p, [b"outcome", b"reason"])?;
    Some(match Member::of(outcome) {
        Member::Plain(b"allow") => Outcome::Allow,
        Member::Plain(b"deny" | b"abort") if with_code => Outcome::Denied(code_fast(reason)?),
        Member::Plain(b"deny" | b"abort") => Outcome::Denied(Cow::Borrowed("")),
        Member::Escaped(_) => return None,
        // A number, boolean, object or array is never one of the words above.
        Member::Plain(_) | Member::Null | Member::Other => Outcome::Neither,
    })
}

/// The reason's code. Only the text before the first `:` decides it, so an escape after that
/// colon changes nothing; an escape before it is left to SQLite. A reason that is not a
/// string has no code (its text never starts with a plain identifier and a colon).
fn code_fast(reason: Option<&[u8]>) -> Option<Cow<'_, str>> {
    let s = match Member::of(reason) {
        Member::Plain(s) | Member::Escaped(s) => s,
        Member::Null | Member::Other => return Some(Cow::Borrowed("other")),
    };
    let head = match s.iter().position(|&b| b == b':' || b == b'\\') {
        Some(i) if s.get(i) == Some(&b'\\') => return None,
        Some(i) => s.get(..=i)?,
        None => s,
    };
    Some(Cow::Borrowed(reason_code(std::str::from_utf8(head).ok()?)))
}

/// One step row as SQLite's JSON functions read it (the definition the fast read follows);
/// a member named twice is read as Go reads it, the last one ([`last_member`]). Written once.
static STEP_SQL: LazyLock<String> = LazyLock::new(|| {
    let m = last_member;
    format!(
        "
SELECT v = 0 AND ne, dk = 'tool_call', substr(CAST(t AS BLOB), 1, ?2),
       length(CAST(t AS BLOB)) > ?2, o, r
FROM (
  SELECT
    json_valid(decision_json) AS v,
    decision_json != '' AS ne,
    CASE WHEN json_valid(decision_json) THEN {dk} END AS dk,
    CASE WHEN json_valid(decision_json) THEN {t} END AS t,
    CASE WHEN json_valid(policy_json) THEN {o} END AS o,
    CASE WHEN json_valid(policy_json) AND {o} IN ('deny', 'abort')
         THEN substr(CAST({r} AS TEXT), 1, 48) END AS r
  FROM steps WHERE rowid = ?1
)",
        dk = m("decision_json", "kind"),
        t = m("decision_json", "tool"),
        o = m("policy_json", "outcome"),
        r = m("policy_json", "reason"),
    )
});

/// A step the fast read left to SQLite (`Skip` when the row is gone).
pub(super) fn step_by_sql(conn: &Connection, rowid: i64) -> Result<StepFacts<'static>, StoreError> {
    let mut stmt = conn.prepare_cached(&STEP_SQL).ctx("stats: step")?;
    let row = stmt
        .query_row(rusqlite::params![rowid, NAME_MAX as i64], |r| {
            let damaged: Option<bool> = r.get(0)?;
            let call: Option<bool> = r.get(1)?;
            if damaged == Some(true) {
                return Ok(StepFacts::Damaged);
            }
            if call != Some(true) {
                return Ok(StepFacts::Skip);
            }
            let outcome = match text(r.get_ref(4)?).as_deref() {
                Some("allow") => Outcome::Allow,
                Some("deny") | Some("abort") => {
                    let reason = text(r.get_ref(5)?).unwrap_or_default();
                    Outcome::Denied(Cow::Owned(reason_code(&reason).to_string()))
                }
                _ => Outcome::Neither,
            };
            Ok(StepFacts::Call {
                tool: opt_bytes(r.get_ref(2)?).map(Cow::Owned),
                cut: r.get::<_, Option<bool>>(3)?.unwrap_or(false),
                outcome,
            })
        })
        .optional()
        .ctx("stats: step")?;
    Ok(row.unwrap_or(StepFacts::Skip))
}

/// One approval's step as SQLite's JSON functions read it (members as [`STEP_SQL`] reads them).
static APPROVAL_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "
SELECT substr(CAST(t AS BLOB), 1, ?3), length(CAST(t AS BLOB)) > ?3, o
FROM (
  SELECT
    CASE WHEN json_valid(s.decision_json) THEN {t} END AS t,
    CASE WHEN json_valid(s.policy_json) THEN {o} END AS o
  FROM approvals a LEFT JOIN steps s ON s.id = a.step_id
  WHERE a.rowid = ?1 AND s.rowid IS ?2
)",
        t = last_member("s.decision_json", "tool"),
        o = last_member("s.policy_json", "outcome"),
    )
});

/// An approval's step the fast read left to SQLite.
pub(super) fn approval_by_sql(
    conn: &Connection,
    rowid: i64,
    step_rowid: Option<i64>,
) -> Result<HeldStep<'static>, StoreError> {
    let mut stmt = conn.prepare_cached(&APPROVAL_SQL).ctx("stats: approval")?;
    let row = stmt
        .query_row(rusqlite::params![rowid, step_rowid, NAME_MAX as i64], |r| {
            Ok(HeldStep {
                tool: opt_bytes(r.get_ref(0)?).map(Cow::Owned),
                cut: r.get::<_, Option<bool>>(1)?.unwrap_or(false),
                allowed: text(r.get_ref(2)?).as_deref() == Some("allow"),
            })
        })
        .optional()
        .ctx("stats: approval")?;
    Ok(row.unwrap_or(HeldStep {
        tool: None,
        cut: false,
        allowed: false,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtimes_own_rows_are_read_without_sqlite() {
        let call = br#"{"kind":"tool_call","tool":"get_order","args":{"order_id":"o\"1"}}"#;
        let deny = br#"{"outcome":"deny","reason":"not_found: order \"o1\""}"#;
        assert_eq!(
            step_fast(ValueRef::Text(call), ValueRef::Text(deny)),
            Some(StepFacts::Call {
                tool: Some(Cow::Borrowed(b"get_order")),
                cut: false,
                outcome: Outcome::Denied(Cow::Borrowed("not_found")),
            })
        );
        let done = br#"{"kind":"complete","result":{"checked":9}}"#;
        assert_eq!(
            step_fast(ValueRef::Text(done), ValueRef::Text(b"")),
            Some(StepFacts::Skip)
        );
        let allow = br#"{"outcome":"allow","reason":"side effect read_only is allow"}"#;
        let held = approval_fast(ValueRef::Text(call), ValueRef::Text(allow)).unwrap();
        assert!(held.allowed && held.tool.as_deref() == Some(&b"get_order"[..]));
        // What only SQLite renders exactly is left to it.
        let esc = br#"{"kind":"tool_call","tool":"get\u005forder"}"#;
        assert_eq!(step_fast(ValueRef::Text(esc), ValueRef::Text(deny)), None);
        assert_eq!(step_fast(ValueRef::Blob(call), ValueRef::Text(deny)), None);
        assert_eq!(
            step_fast(ValueRef::Text(b"{bad"), ValueRef::Text(deny)),
            None
        );
    }
}
