//! The decision page (issue 15 items 1-3): what the approval detail shows before any raw
//! field. The consumer's title, the facts its policy computed (target, amount, customer and
//! the presentation's other members, by their own names), what the policy said, what it says
//! now, the related pending work with the total at stake, then the run's goal and the agent's
//! stated reason, labelled as untrusted text. The raw fields follow, whole (`fields`).
//!
//! Fields only: every value stays bytes and is drawn through the sanitiser with its badges.

use super::data::{ApprovalRow, PageContext, Recheck, RelatedRow};
use super::facts::{self, AMOUNT_KEYS, CUSTOMER_KEYS, Presented, TARGET_KEYS, TITLE_KEYS};
use super::fields::{self, ApprovalField, Look};
use super::text;

/// What the page knows besides the row: its context and today's policy answer, each `None`
/// while being read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Known<'a> {
    pub context: Option<&'a PageContext>,
    pub recheck: Option<&'a Recheck>,
}

fn fact(label: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>, look: Look) -> ApprovalField {
    ApprovalField {
        label: label.into(),
        value: value.into(),
        look,
        is_string: false,
    }
}

fn join(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Every field of the approval detail: the decision page, then the raw fields.
pub fn fields(a: &ApprovalRow, k: Known) -> Vec<ApprovalField> {
    let mut out = page(a, k);
    out.push(fact(
        "── the request as stored: every field, whole ──",
        Vec::new(),
        Look::Heading,
    ));
    out.extend(fields::fields(a));
    out
}

/// The decision page's fields.
pub fn page(a: &ApprovalRow, k: Known) -> Vec<ApprovalField> {
    let p = Presented::parse(&a.presentation).unwrap_or_default();
    let mut out = Vec::new();
    out.push(headline(a, &p));
    facts_of(&p, &mut out);
    let mut said = a.kind.clone();
    if !a.reason.is_empty() {
        said.extend_from_slice(b": ");
        said.extend_from_slice(&a.reason);
    }
    out.push(fact("policy said", said, Look::Fact));
    recheck(k.recheck, &mut out);
    related(&p, k.context, &mut out);
    if let Some(c) = k.context {
        out.push(untrusted("goal of the run (untrusted text)", &c.goal));
        let label = "agent's reason for this call (untrusted, from the model)";
        match &c.decision_unread {
            Some(why) => out.push(ApprovalField {
                label: label.as_bytes().to_vec(),
                value: format!("(not read: {why})").into_bytes(),
                look: Look::Value,
                is_string: false,
            }),
            None => out.push(untrusted(label, &c.agent_reason)),
        }
    }
    others(&p, &mut out);
    out
}

fn untrusted(label: &str, v: &[u8]) -> ApprovalField {
    ApprovalField {
        label: label.as_bytes().to_vec(),
        value: if v.is_empty() {
            b"(none recorded)".to_vec()
        } else {
            v.to_vec()
        },
        look: Look::Value,
        is_string: !v.is_empty(),
    }
}

/// The consumer's title, else the tool's name and a note that there is none.
fn headline(a: &ApprovalRow, p: &Presented) -> ApprovalField {
    let mut f = match p.title() {
        Some(t) => fact("", t.to_vec(), Look::Headline),
        None => {
            let tool = fields::tool_of(a)
                .unwrap_or_else(|| b"(tool unknown: the request does not decode)".to_vec());
            fact(
                "",
                join(&[&tool, b" (the presentation gives no title)"]),
                Look::Headline,
            )
        }
    };
    if TITLE_KEYS.iter().any(|k| p.duplicated(k)) {
        f.value
            .extend_from_slice(b"  [title named twice: the last is shown]");
    }
    f
}

/// Target, amount and customer, by their own names; a member named twice is an alert.
fn facts_of(p: &Presented, out: &mut Vec<ApprovalField>) {
    for (role, keys) in [
        ("target", &TARGET_KEYS[..]),
        ("amount", &AMOUNT_KEYS[..]),
        ("customer", &CUSTOMER_KEYS[..]),
    ] {
        match p.first_of(keys) {
            Some((key, v)) => {
                let twice = p.duplicated(key);
                let mut label = key.to_vec();
                if role == "target" {
                    label.extend_from_slice(b" (target)");
                }
                let mut value = facts::scalar(v);
                if twice {
                    value.extend_from_slice(b"  [named twice: the last is shown]");
                }
                out.push(fact(
                    label,
                    value,
                    if twice { Look::Alert } else { Look::Fact },
                ));
            }
            None if role != "customer" => {
                let names: Vec<String> = keys.iter().map(|k| text::escaped(k)).collect();
                out.push(fact(
                    role,
                    format!("(the presentation names no {})", names.join(" or ")),
                    Look::Fact,
                ));
            }
            None => {}
        }
    }
}

/// The presentation's other top-level members, each by its name.
fn others(p: &Presented, out: &mut Vec<ApprovalField>) {
    let shown = |k: &[u8]| {
        TITLE_KEYS
            .iter()
            .chain(&TARGET_KEYS)
            .chain(&AMOUNT_KEYS)
            .chain(&CUSTOMER_KEYS)
            .any(|s| *s == k)
    };
    let mut seen: Vec<&[u8]> = Vec::new();
    for (k, _) in &p.members {
        if shown(k) || seen.contains(&k.as_slice()) {
            continue;
        }
        seen.push(k);
        if let Some(v) = p.get(k) {
            let look = if p.duplicated(k) {
                Look::Alert
            } else {
                Look::Fact
            };
            out.push(fact(k.clone(), facts::scalar(v), look));
        }
    }
}

/// Today's answer of the policy.
fn recheck(r: Option<&Recheck>, out: &mut Vec<ApprovalField>) {
    match r {
        None => out.push(fact(
            "policy now",
            "asking it again against today's state…",
            Look::Fact,
        )),
        Some(Recheck::Unavailable(why)) => out.push(fact(
            "policy now",
            format!("cannot re-check: {why}"),
            Look::Fact,
        )),
        Some(Recheck::Same(answer)) => out.push(fact(
            "policy now",
            format!("same as recorded ({answer})"),
            Look::Good,
        )),
        Some(Recheck::Differs(diffs)) => {
            out.push(fact(
                "policy now",
                "DIFFERS from what it said when it asked: the facts above may be stale",
                Look::Alert,
            ));
            for d in diffs {
                out.push(fact("  ↳", d.clone(), Look::Alert));
            }
        }
    }
}

/// Other pending work of the run and on the same target, with the total at stake.
fn related(p: &Presented, c: Option<&PageContext>, out: &mut Vec<ApprovalField>) {
    let Some(c) = c else {
        out.push(fact("related", "reading…", Look::Fact));
        return;
    };
    let target = p.target();
    let on = target
        .as_ref()
        .map(|(k, v)| join(&[k, b" ", &facts::scalar(v)]));
    if c.related.is_empty() {
        let mut v = b"no other pending approval of this run".to_vec();
        if let Some(on) = &on {
            v.extend_from_slice(b" or on ");
            v.extend_from_slice(on);
        }
        out.push(fact("related", v, Look::Fact));
    } else {
        let same_target = c.related.iter().filter(|r| r.same_target).count();
        let mut v = format!(
            "{} other pending approval(s): {} of this run, {} on ",
            c.related.len(),
            c.related.iter().filter(|r| r.same_run).count(),
            same_target
        )
        .into_bytes();
        v.extend_from_slice(on.as_deref().unwrap_or(b"(no target named)"));
        if let Some(total) = at_stake(p, &c.related) {
            v.extend_from_slice(&total);
        }
        let look = if same_target > 0 {
            Look::Alert
        } else {
            Look::Fact
        };
        out.push(fact("related", v, look));
        for r in &c.related {
            out.push(related_row(r));
        }
    }
    if c.more {
        out.push(fact(
            "related",
            format!(
                "only the first {} pending approvals were compared",
                c.compared
            ),
            Look::Fact,
        ));
    }
}

/// `; amount_cents at stake on it with this one: 12500`, summed over this approval and the
/// related ones on the same target whose amount has the same name.
fn at_stake(p: &Presented, related: &[RelatedRow]) -> Option<Vec<u8>> {
    let (key, mine) = p.amount()?;
    let mut total = mine;
    for r in related.iter().filter(|r| r.same_target) {
        if let Some((k, n)) = &r.amount
            && *k == key
        {
            total = total.saturating_add(*n);
        }
    }
    Some(join(&[
        b"; ",
        &key,
        format!(" at stake with this one: {total}").as_bytes(),
    ]))
}

fn related_row(r: &RelatedRow) -> ApprovalField {
    let label = match (r.same_run, r.same_target) {
        (true, true) => "  run+target",
        (true, false) => "  same run",
        _ => "  same target",
    };
    // The ids first, cut visibly to 12 bytes, so they stay on the row's first line.
    let mut v = b"run ".to_vec();
    v.extend_from_slice(&short_id(r.run_id.as_bytes()));
    v.extend_from_slice(b" approval ");
    v.extend_from_slice(&short_id(r.approval_id.as_bytes()));
    v.extend_from_slice(" · ".as_bytes());
    if r.title.is_empty() {
        v.extend_from_slice(b"(untitled)");
    } else {
        v.extend_from_slice(&r.title);
    }
    if let Some((k, n)) = &r.amount {
        v.extend_from_slice(" · ".as_bytes());
        v.extend_from_slice(k);
        v.extend_from_slice(format!(" {n}").as_bytes());
    }
    fact(label, v, Look::Fact)
}

/// The first 12 bytes of an id and `…` when there are more.
fn short_id(id: &[u8]) -> Vec<u8> {
    if id.len() <= 12 {
        return id.to_vec();
    }
    let mut v = id[..12].to_vec();
    v.extend_from_slice("…".as_bytes());
    v
}

/// Which untrusted texts of the page carry a warning badge (bidi, hidden, control, mixed
/// scripts...): `goal`, `reason` (the agent's), `args` (a key or value of the arguments), and
/// `duplicate-key` when the arguments repeat a key.
pub fn hostile(fields: &[ApprovalField], c: Option<&PageContext>) -> Vec<&'static str> {
    let mut out = Vec::new();
    if let Some(c) = c {
        if text::marks(&c.goal).any() {
            out.push("goal");
        }
        if text::marks(&c.agent_reason).any() {
            out.push("reason");
        }
    }
    let args = fields
        .iter()
        .filter(|f| f.label.starts_with(b"args"))
        .any(|f| text::marks(&f.label).any() || text::marks(&f.value).any());
    if args {
        out.push("args");
    }
    // A key the arguments repeat: a decoder keeps one of its values (Go's the last), so what
    // a reviewer reads first may not be what runs (found from outside: `amount_cents` 1, then
    // 9999999, with no mark in the title).
    if fields
        .iter()
        .any(|f| f.label == b"DUPLICATE KEY" && f.value.starts_with(b"args"))
    {
        out.push("duplicate-key");
    }
    out
}
