//! `events <run>`: the audit trail, as text lines or JSON Lines, one bounded page at a time.

use serde_json::{Value, json};

use super::CommandError;
use super::cli::PageArgsWithRun;
use super::open::{fail, open};
use super::out::{Out, Raws};
use super::text::{clean, stamp_ms};
use crate::runtime::types::Event;

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
    // Pages by seq: each continues after the last seq printed, so the whole log streams in
    // time linear in its size; a page says whether more follow instead of counting.
    let mut after = None;
    let mut skip = a.offset as i64;
    let mut printed = a.offset as i64;
    loop {
        let page = store
            .events_page_by_key(&r.id, after, skip, limit)
            .map_err(fail)?;
        skip = 0;
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
        printed += shown;
        after = page.last_key;
        if all && page.more {
            continue;
        }
        if page.more {
            if json_out {
                // The JSON contract carries the total: counted once, only here.
                let total = store.count_events(&r.id).map_err(fail)?;
                let meta = json!({"meta": true, "truncated": true, "total": total, "returned": shown, "offset": a.offset});
                out.jsonl(&meta, &Raws::default())?;
            } else {
                out.line(&format!(
                    "... more events follow; rerun with --offset {printed} to see them (showing {shown})"
                ))?;
            }
        }
        return Ok(());
    }
}

/// `<local time>  <type padded to 22> <payload, escaped>`.
pub fn event_line(e: &Event) -> String {
    let kind = plain_or_clean(&e.kind, 60);
    let pad = 22usize.saturating_sub(unicode_width::UnicodeWidthStr::width(kind.as_str()));
    format!(
        "{}  {kind}{} {}",
        stamp_ms(&e.at),
        " ".repeat(pad),
        payload_text(&e.payload)
    )
}

/// The payload as the line shows it. Printable ASCII without a backslash, within the cap, is
/// what the escaper returns unchanged (checked by `plain_payloads_skip_the_escaper_unchanged`),
/// so it is copied as it is: the escaper's grapheme walk was most of a whole-log listing's
/// time (issue 14 item 8).
fn payload_text(payload: &str) -> String {
    plain_or_clean(payload, PAYLOAD_TEXT)
}

/// `text` as it is when it is printable ASCII without a backslash within `max` columns (what
/// the escaper returns unchanged), else escaped and cut by it.
fn plain_or_clean(text: &str, max: usize) -> String {
    let plain = text.len() <= max
        && text
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'\\');
    if plain {
        text.to_string()
    } else {
        clean(text, max)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_payloads_skip_the_escaper_unchanged() {
        let mut samples: Vec<String> = vec![
            String::new(),
            "{}".into(),
            "{\"index\":0,\"summary\":\"looked up order ord_1004\"}".into(),
            (0x20u8..0x7f)
                .filter(|&b| b != b'\\')
                .map(char::from)
                .collect(),
            "x".repeat(PAYLOAD_TEXT),
            "a  b   c".into(),
        ];
        // Every printable ASCII byte in every position of a short string.
        for b in (0x20u8..0x7f).filter(|&b| b != b'\\') {
            samples.push(format!("{}{{\"k\":\"v\"}}{}", b as char, b as char));
        }
        for s in &samples {
            assert_eq!(payload_text(s), clean(s, PAYLOAD_TEXT), "{s:?}");
            for max in [1, 5, 60] {
                assert_eq!(plain_or_clean(s, max), clean(s, max), "{s:?} at {max}");
            }
        }
        // Anything else goes through the escaper.
        for s in [
            "\u{1b}[31m",
            "a\\x41",
            "caf\u{e9}",
            &"y".repeat(PAYLOAD_TEXT + 1),
        ] {
            assert_eq!(payload_text(s), clean(s, PAYLOAD_TEXT), "{s:?}");
        }
    }
}
