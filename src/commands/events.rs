//! `events <run>`: the audit trail, as text lines or JSON Lines, one bounded page at a time.

use serde_json::{Value, json};

use super::CommandError;
use super::cli::PageArgsWithRun;
use super::open::{fail, open};
use super::out::{Out, Raws};
use super::shell;
use super::text::{clean_bytes, col, stamp_ms};
use crate::runtime::types::Event;
use crate::safetext::{JsonOptions, Options, parse_json, render_json};

const PAGE: i64 = 500;
/// Payload text cap in text mode (bytes of escaped text, cut head-and-tail).
const PAYLOAD_TEXT: usize = 8000;

pub fn run(
    db: &std::path::Path,
    json_out: bool,
    a: &PageArgsWithRun,
    out: &mut Out,
) -> Result<(), CommandError> {
    let store = open(db, false)?;
    let r = store.get_run_capped(&a.run).map_err(fail)?;
    let all = a.limit == 0;
    let limit = if all { PAGE } else { a.limit as i64 };
    let mut offset = a.offset as i64;
    loop {
        let page = store.list_events_page(&r.id, limit, offset).map_err(fail)?;
        let shown = page.items.len() as i64;
        for e in &page.items {
            if json_out {
                let mut raws = Raws::default();
                let v = event_json(e, &mut raws);
                out.jsonl(&v, &raws)?;
            } else {
                out.line(&event_line(e))?;
            }
        }
        offset += shown;
        let more = offset < page.total;
        if all && shown > 0 && more {
            continue;
        }
        if more {
            if json_out {
                let meta = json!({"meta": true, "truncated": true, "total": page.total, "returned": shown, "offset": a.offset});
                out.jsonl(&meta, &Raws::default())?;
            } else {
                out.line(&format!(
                    "... {} more event(s); rerun with --offset {offset} to see them (showing {shown} of {})",
                    page.total - offset,
                    page.total
                ))?;
            }
        }
        return Ok(());
    }
}

/// `<local time>  <type padded to 22> <payload, escaped>`. A JSON payload is shown decoded
/// (its `\u001b` is the ESC it stands for, shown `\x1b` like a raw one), so one notation
/// holds on every line; a payload that is not JSON is shown as escaped text.
pub fn event_line(e: &Event) -> String {
    let kind = col(&e.raw_invalid, "type", &e.kind, 60);
    let pad = 22usize.saturating_sub(unicode_width::UnicodeWidthStr::width(kind.as_str()));
    format!(
        "{}  {kind}{} {}",
        stamp_ms(&e.at),
        " ".repeat(pad),
        payload_text(shell::stored(&e.raw_invalid, "payload", &e.payload))
    )
}

/// A payload on one line: JSON rendered by the safe-text module (keys sorted, strings
/// decoded and escaped), else the escaped bytes; cut head-and-tail to [`PAYLOAD_TEXT`].
fn payload_text(payload: &[u8]) -> String {
    let Ok(node) = parse_json(payload) else {
        return clean_bytes(payload, PAYLOAD_TEXT);
    };
    let opts = JsonOptions {
        text: Options::security(),
        string_width: PAYLOAD_TEXT / 2,
        indent: 0,
    };
    let mut s = String::new();
    for line in render_json(&node, &opts) {
        let t = line.to_string();
        s.push_str(&t);
        if t.ends_with(',') {
            s.push(' ');
        }
    }
    s
}

/// One JSON Lines record: the stored values, unsanitised; a payload that is not JSON is
/// emitted as a string with `invalid_payload: true`, never dropped.
pub fn event_json(e: &Event, raws: &mut Raws) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("seq".into(), json!(e.seq));
    m.insert("run_id".into(), json!(e.run_id));
    if !e.step_id.is_empty() {
        m.insert("step_id".into(), json!(e.step_id));
    }
    m.insert("at".into(), json!(e.at_text));
    m.insert("type".into(), json!(e.kind));
    let payload = raws.slot(&e.payload);
    let invalid = matches!(&payload, Value::String(s) if !s.starts_with('\u{0}'));
    m.insert("payload".into(), payload);
    if invalid {
        m.insert("invalid_payload".into(), json!(true));
    }
    Value::Object(m)
}
