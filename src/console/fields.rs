//! The approval detail's fields: metadata, then every leaf of the arguments and of the
//! presentation, each rendered in full through the escaper and folded past a few lines
//! (expandable), so nothing is approved unseen and the confirmation can say what was cut.

use std::collections::BTreeSet;

use ratatui::text::Line;
use serde_json::Value;

use super::data::ApprovalRow;
use super::text::{self, Marks, TextStyles};
use crate::safetext::{JsonNode, parse_json};
use ratatui::text::Span;

/// Lines of a value shown before it is folded.
pub const FOLD_LINES: usize = 6;

/// How a field is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// `label: value` on one line (wrapping), no badges: the row's own columns.
    Meta,
    /// The label on a line of its own with badges, the value indented below, folded.
    Value,
    /// The decision page's title: the value alone, in the title style, with badges.
    Headline,
    /// A fact of the decision page: `label: value` with badges.
    Fact,
    /// A fact that warns (today's policy differs, related work at stake): drawn in danger.
    Alert,
    /// A fact that reassures (today's policy agrees): drawn in the ok style.
    Good,
    /// A section heading (the value is empty), dim.
    Heading,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalField {
    /// Label bytes (keys are untrusted too).
    pub label: Vec<u8>,
    pub value: Vec<u8>,
    /// How the field is drawn.
    pub look: Look,
    /// A JSON string: drawn in quotes, so `"8000"` is told from `8000` and `"null"` from `null`.
    pub is_string: bool,
}

#[derive(Debug, Clone, Default)]
pub struct FieldView {
    pub lines: Vec<Line<'static>>,
    pub folded: bool,
    pub marks: Marks,
}

fn meta(label: &str, value: impl Into<Vec<u8>>) -> ApprovalField {
    ApprovalField {
        label: label.as_bytes().to_vec(),
        value: value.into(),
        look: Look::Meta,
        is_string: false,
    }
}

fn leaf(label: Vec<u8>, value: Vec<u8>, out: &mut Vec<ApprovalField>) {
    out.push(ApprovalField {
        label,
        value,
        look: Look::Value,
        is_string: false,
    });
}

/// A key as a path step: `.key` for `[A-Za-z0-9_-]+`, else `."key"` with `"` and `\` escaped
/// JSON-style, so `refund.amount_cents` (one key) and `refund` then `amount_cents` differ, and
/// a trailing space is inside quotes. The bytes are then escaped for display like any label.
fn key_step(key: &[u8]) -> Vec<u8> {
    let simple = !key.is_empty()
        && key
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-');
    let mut out = b".".to_vec();
    if simple {
        out.extend_from_slice(key);
        return out;
    }
    out.push(b'"');
    for &b in key {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
    out
}

/// Whether JSON `bytes` repeat a key in any object (false when they are not JSON, such as a
/// preview cut short): the queue marks such a row, since a decoder keeps one of the values.
pub fn repeats_a_key(bytes: &[u8]) -> bool {
    fn walk(n: &JsonNode) -> bool {
        match n {
            JsonNode::Object(m) => m
                .iter()
                .enumerate()
                .any(|(i, (k, v))| m[..i].iter().any(|(seen, _)| seen == k) || walk(v)),
            JsonNode::Array(a) => a.iter().any(walk),
            _ => false,
        }
    }
    parse_json(bytes).is_ok_and(|n| walk(&n))
}

/// Every leaf of a JSON value in stored order, duplicate keys kept and flagged.
fn flatten(prefix: &[u8], v: &JsonNode, out: &mut Vec<ApprovalField>) {
    let join = |sep: &[u8], k: &[u8]| {
        let mut l = prefix.to_vec();
        l.extend_from_slice(sep);
        l.extend_from_slice(k);
        l
    };
    match v {
        JsonNode::Object(m) if !m.is_empty() => {
            let mut seen: Vec<&[u8]> = Vec::new();
            for (k, v) in m {
                if seen.contains(&k.as_slice()) {
                    out.push(ApprovalField {
                        label: b"DUPLICATE KEY".to_vec(),
                        value: join(b"", &key_step(k)),
                        look: Look::Meta,
                        is_string: false,
                    });
                }
                seen.push(k);
                flatten(&join(b"", &key_step(k)), v, out);
            }
        }
        JsonNode::Array(a) if !a.is_empty() => {
            for (i, v) in a.iter().enumerate() {
                flatten(&join(b"", format!("[{i}]").as_bytes()), v, out);
            }
        }
        JsonNode::Object(_) => leaf(prefix.to_vec(), b"{}".to_vec(), out),
        JsonNode::Array(_) => leaf(prefix.to_vec(), b"[]".to_vec(), out),
        JsonNode::String(s) => out.push(ApprovalField {
            label: prefix.to_vec(),
            value: s.clone(),
            look: Look::Value,
            is_string: true,
        }),
        JsonNode::Number(n) => leaf(prefix.to_vec(), n.clone().into_bytes(), out),
        JsonNode::Bool(b) => leaf(prefix.to_vec(), b.to_string().into_bytes(), out),
        JsonNode::Null => leaf(prefix.to_vec(), b"null".to_vec(), out),
    }
}

fn json_section(name: &str, raw: &[u8], out: &mut Vec<ApprovalField>) {
    match parse_json(raw) {
        Ok(v) => flatten(name.as_bytes(), &v, out),
        Err(e) => {
            out.push(ApprovalField {
                label: format!("{name} (does not decode: {e})").into_bytes(),
                value: raw.to_vec(),
                look: Look::Value,
                is_string: false,
            });
        }
    }
}

/// The tool name the request names, if it decodes.
pub fn tool_of(a: &ApprovalRow) -> Option<Vec<u8>> {
    let v: Value = serde_json::from_slice(&a.request).ok()?;
    Some(v.get("spec")?.get("name")?.as_str()?.as_bytes().to_vec())
}

/// A stored time as the fields show it: `?` when the column does not read as a time (its
/// DAMAGED line says why; the zero time standing for it is not `zero`'s meaning), `zero`
/// for the zero time, else RFC 3339.
fn time_field(
    a: &ApprovalRow,
    column: &str,
    t: &crate::runtime::types::Timestamp,
    zero: &str,
) -> String {
    let unreadable = a
        .decode_error
        .as_deref()
        .is_some_and(|d| super::time::names_column(d, column));
    if unreadable {
        "? (does not read as a time: see DAMAGED)".into()
    } else if t.is_zero() {
        zero.into()
    } else {
        t.to_rfc3339()
    }
}

/// Every field of an approval, in reading order.
pub fn fields(a: &ApprovalRow) -> Vec<ApprovalField> {
    let mut out = vec![
        meta(
            "tool",
            tool_of(a).unwrap_or_else(|| b"(request does not decode)".to_vec()),
        ),
        meta("kind", a.kind.clone()),
        meta("status", a.status.as_str()),
        meta("run", a.run_id.as_bytes().to_vec()),
        meta("step", a.step_id.as_bytes().to_vec()),
        meta(
            "asked",
            time_field(a, "created_at", &a.created_at, "(not set)"),
        ),
        meta(
            "expires",
            time_field(a, "expires_at", &a.expires_at, "never"),
        ),
        meta("hash", a.hash.clone()),
    ];
    if !a.reason.is_empty() {
        out.push(meta("reason", a.reason.clone()));
    }
    if !a.decided_at.is_zero() || !a.decided_by.is_empty() {
        let mut d = a.decided_by.clone();
        d.extend_from_slice(format!(" at {}", a.decided_at.to_rfc3339()).as_bytes());
        out.push(meta("decided", d));
        out.push(meta("note", a.note.clone()));
    }
    if let Some(e) = &a.decode_error {
        out.push(meta("DAMAGED", e.clone()));
    }
    match parse_json(&a.request) {
        // The store's stand-in for a request too large to read: never shown as arguments.
        _ if a.request_not_shown.is_some() => {
            let (n, bytes) = a.request_not_shown.unwrap_or_default();
            out.push(ApprovalField {
                label: b"args".to_vec(),
                value: format!(
                    "NOT SHOWN: the request is {n} {}, more than the console reads; none of its arguments were read or shown",
                    if bytes { "bytes" } else { "characters" }
                )
                .into_bytes(),
                look: Look::Meta,
                is_string: false,
            });
        }
        Ok(JsonNode::Object(m)) => match m.iter().rev().find(|(k, _)| k == b"args") {
            Some((_, args)) => flatten(b"args", args, &mut out),
            None => out.push(ApprovalField {
                label: b"args".to_vec(),
                value: b"(none)".to_vec(),
                look: Look::Value,
                is_string: false,
            }),
        },
        Ok(_) => out.push(ApprovalField {
            label: b"request (not an object)".to_vec(),
            value: a.request.clone(),
            look: Look::Value,
            is_string: false,
        }),
        Err(e) => out.push(ApprovalField {
            label: format!("request (does not decode: {e})").into_bytes(),
            value: a.request.clone(),
            look: Look::Value,
            is_string: false,
        }),
    }
    json_section("presentation", &a.presentation, &mut out);
    out
}

/// How fields are laid out: width, expanded fields, strict mode and styles.
pub struct LayoutOpts<'a> {
    pub width: usize,
    pub expanded: &'a BTreeSet<usize>,
    pub strict: bool,
    pub st: &'a TextStyles,
    pub label_style: ratatui::style::Style,
    pub badge_style: ratatui::style::Style,
    pub danger_style: ratatui::style::Style,
    pub ok_style: ratatui::style::Style,
    pub dim_style: ratatui::style::Style,
}

/// Renders every field at `o.width` (at least 20); fields not in `expanded` fold after
/// `FOLD_LINES` lines.
pub fn layout(fields: &[ApprovalField], o: &LayoutOpts) -> Vec<FieldView> {
    let o = LayoutOpts {
        width: o.width.max(20),
        ..*o
    };
    fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let label_st = TextStyles {
                text: o.label_style,
                ..*o.st
            };
            let room = 24.min(o.width / 3);
            let label = text::line_mode(&f.label, room, &label_st, o.strict);
            // A label is never cut (issue 14 item 4: two keys that differ past the cut would
            // look alike): one too long to sit beside its value (a presentation's key on the
            // decision page) is drawn as a raw field's is, wrapped on lines of its own.
            let whole = text::line_mode(&f.label, usize::MAX, &label_st, o.strict).width <= room;
            match f.look {
                Look::Value => layout_value(i, f, &o),
                Look::Meta | Look::Fact | Look::Alert | Look::Good if !whole => {
                    layout_value(i, f, &o)
                }
                Look::Heading => FieldView {
                    lines: vec![Line::styled(
                        text::escaped(&f.label),
                        o.dim_style.add_modifier(ratatui::style::Modifier::BOLD),
                    )],
                    ..FieldView::default()
                },
                _ => layout_meta(i, f, label, &o),
            }
        })
        .collect()
}

/// The badges and escape count of a value, as spans to put after it.
fn notes(b: &Marks, badge_style: ratatui::style::Style, st: &TextStyles) -> Vec<Span<'static>> {
    let mut notes = Vec::new();
    for l in b.labels() {
        notes.push(Span::raw(" "));
        notes.push(Span::styled(format!("[{}]", l.to_uppercase()), badge_style));
    }
    if b.escapes > 0 {
        notes.push(Span::styled(format!(" {} escapes", b.escapes), st.escaped));
    }
    notes
}

/// A compact field: label, `: `, the value beside it (the headline has no label). Facts carry
/// their badges after the value; the row's own metadata does not.
fn layout_meta(i: usize, f: &ApprovalField, label: text::Rendered, o: &LayoutOpts) -> FieldView {
    let (width, expanded, strict) = (o.width, o.expanded, o.strict);
    let text_style = match f.look {
        Look::Headline => o.label_style.add_modifier(ratatui::style::Modifier::BOLD),
        Look::Alert => o.danger_style,
        Look::Good => o.ok_style,
        _ => o.st.text,
    };
    let st = &TextStyles {
        text: text_style,
        ..*o.st
    };
    let headline = f.look == Look::Headline;
    let indent = if headline { 0 } else { label.width + 2 };
    let w = width.saturating_sub(indent);
    let (mut vl, b) = text::block(&f.value, w, st, strict);
    let mut first = if headline {
        Line::default()
    } else {
        let mut l = label.line.clone();
        l.spans.push(Span::raw(": "));
        l
    };
    let folded = vl.len() > FOLD_LINES && !expanded.contains(&i);
    let n = vl.len();
    if folded {
        vl.truncate(FOLD_LINES);
    }
    let mut lines = Vec::new();
    for (j, l) in vl.into_iter().enumerate() {
        if j == 0 {
            first.spans.extend(l.spans);
            lines.push(std::mem::take(&mut first));
        } else {
            let mut l2 = Line::from(" ".repeat(indent));
            l2.spans.extend(l.spans);
            lines.push(l2);
        }
    }
    if f.look != Look::Meta {
        let notes = notes(&b, o.badge_style, o.st);
        let nw: usize = notes.iter().map(Span::width).sum();
        match lines.last_mut() {
            Some(last) if last.width() + nw <= width => last.spans.extend(notes),
            _ if nw > 0 => lines.push(Line::from(notes)),
            _ => {}
        }
    }
    if folded {
        lines.push(Line::styled(
            format!("  …[+{} lines folded; e expands]", n - FOLD_LINES),
            o.st.truncated,
        ));
    }
    FieldView {
        lines,
        folded,
        marks: b,
    }
}

/// A value field: its label on lines of its own with badges, the value indented below.
fn layout_value(i: usize, f: &ApprovalField, o: &LayoutOpts) -> FieldView {
    let (width, expanded, strict, st) = (o.width, o.expanded, o.strict, o.st);
    let (label_style, badge_style) = (o.label_style, o.badge_style);
    // The label is never cut: it wraps over as many lines as it needs.
    let (mut label_lines, _) = text::block(
        &f.label,
        width,
        &TextStyles {
            text: label_style,
            ..*st
        },
        strict,
    );
    // Two columns of indent, and two for the quotes of a string.
    let quotes = if f.is_string { 2 } else { 0 };
    let (mut vl, b) = text::block(&f.value, width.saturating_sub(2 + quotes), st, strict);
    if f.is_string {
        if let Some(first) = vl.first_mut() {
            first
                .spans
                .insert(0, ratatui::text::Span::styled("\"", st.text));
        }
        if let Some(last) = vl.last_mut() {
            last.spans.push(ratatui::text::Span::styled("\"", st.text));
        }
    }
    let n = vl.len();
    let mut head = label_lines.pop().unwrap_or_default();
    let mut notes: Vec<ratatui::text::Span<'static>> = Vec::new();
    for l in b.labels() {
        notes.push(ratatui::text::Span::raw(" "));
        notes.push(ratatui::text::Span::styled(
            format!("[{}]", l.to_uppercase()),
            badge_style,
        ));
    }
    if b.escapes > 0 {
        notes.push(ratatui::text::Span::styled(
            format!(" {} escapes", b.escapes),
            st.escaped,
        ));
    }
    if n > 1 {
        notes.push(ratatui::text::Span::raw(format!(" ({n} lines)")));
    }
    let mut lines = label_lines;
    let notes_width: usize = notes.iter().map(ratatui::text::Span::width).sum();
    if head.width() + notes_width > width && head.width() > 0 {
        // Badges and counts that do not fit go on a line of their own, never over the
        // label's end.
        lines.push(head);
        head = Line::from(notes);
    } else {
        head.spans.extend(notes);
    }
    let folded = n > FOLD_LINES && !expanded.contains(&i);
    lines.push(head);
    for l in vl
        .into_iter()
        .take(if folded { FOLD_LINES } else { usize::MAX })
    {
        let mut l2 = Line::from("  ");
        l2.spans.extend(l.spans);
        lines.push(l2);
    }
    if folded {
        lines.push(Line::styled(
            format!("  …[+{} lines folded; e expands]", n - FOLD_LINES),
            st.truncated,
        ));
    }
    FieldView {
        lines,
        folded,
        marks: b,
    }
}
