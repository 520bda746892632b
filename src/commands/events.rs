//! `events <run>`: the audit trail, as text lines or JSON Lines, one bounded page at a time.

use serde_json::{Value, json};

use super::CommandError;
use super::cli::PageArgsWithRun;
use super::open::{Reading, fail};
use super::out::Raws;
use super::run_reads::RunReads;
use super::shell;
use super::text::{clean_bytes, stamp_ms};
use crate::runtime::types::{Event, Timestamp};
use crate::safetext::{JsonOptions, Options, parse_json, render_json};

const PAGE: i64 = 500;
/// Payload text cap in text mode (bytes of escaped text, cut head-and-tail).
const PAYLOAD_TEXT: usize = 8000;

pub fn run(r: Reading<'_>, a: &PageArgsWithRun) -> Result<(), CommandError> {
    let (_, store, json_out, out) = r.parts();
    events(&store, json_out, out, a)
}

/// `events` on the run database `store` reads (on PostgreSQL, the chained events).
pub fn events(
    store: &dyn RunReads,
    json_out: bool,
    out: &mut super::out::Out,
    a: &PageArgsWithRun,
) -> Result<(), CommandError> {
    let r = store.get_run_capped(a.run.as_bytes()).map_err(fail)?;
    let all = a.limit == 0;
    let limit = if all { PAGE } else { a.limit as i64 };
    // Pages by seq: each continues after the last seq printed, so the whole log streams in
    // time linear in its size; a page says whether more follow instead of counting.
    let mut after = None;
    let mut skip = a.offset as i64;
    let mut printed = a.offset as i64;
    loop {
        let page = store
            .events_page_by_key(r.id_bytes(), after, skip, limit)
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
                let total = store.count_events(r.id_bytes()).map_err(fail)?;
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

/// `<local time>  <type padded to 22> <payload, escaped>`. A JSON payload is shown decoded
/// (its `\u001b` is the ESC it stands for, shown `\x1b` like a raw one), so one notation
/// holds on every line; a payload that is not JSON is shown as escaped text.
pub fn event_line(e: &Event) -> String {
    let kind = plain_or(shell::stored(&e.raw_invalid, "type", &e.kind), 60, |b| {
        clean_bytes(b, 60)
    });
    let pad = 22usize.saturating_sub(unicode_width::UnicodeWidthStr::width(kind.as_str()));
    // An `at` that does not parse is shown as stored (escaped), not as the `-` of an empty one.
    let at = if e.at.is_zero() && Timestamp::parse(&e.at_text).is_err() && !e.at_text.is_empty() {
        format!("(unread at: {})", clean_bytes(e.at_text.as_bytes(), 40))
    } else {
        stamp_ms(&e.at)
    };
    format!(
        "{at}  {kind}{} {}",
        " ".repeat(pad),
        payload_text(shell::stored(&e.raw_invalid, "payload", &e.payload))
    )
}

/// A payload on one line: as stored when it is plain (see [`plain_or`]); else JSON rendered by
/// the safe-text module (keys sorted, strings decoded and escaped), else the escaped bytes; cut
/// head-and-tail to [`PAYLOAD_TEXT`].
fn payload_text(payload: &[u8]) -> String {
    plain_or(payload, PAYLOAD_TEXT, rendered_payload)
}

/// A payload that is not plain: JSON decoded and re-escaped, else the escaped bytes.
fn rendered_payload(payload: &[u8]) -> String {
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

/// `bytes` as they are when they are printable ASCII within `max` columns with no backslash
/// (so no JSON or terminal escape can occur in them) and no `[+` (which the escaper shows as
/// `\x5b+` so that only a real cut marker reads `[+`), else what `slow` makes of them. The escaper's grapheme walk was most of a whole-log
/// listing's time (issue 14 item 8); `plain_payloads_skip_the_escaper_unchanged` checks the
/// equivalence for the escaper.
fn plain_or(bytes: &[u8], max: usize, slow: impl Fn(&[u8]) -> String) -> String {
    let plain = bytes.len() <= max
        && bytes
            .iter()
            .all(|b| (0x20..0x7f).contains(b) && *b != b'\\')
        && !bytes.windows(2).any(|w| w == b"[+");
    if plain {
        String::from_utf8_lossy(bytes).into_owned()
    } else {
        slow(bytes)
    }
}

/// One JSON Lines record: the stored values, unsanitised; a payload that is not JSON is
/// emitted as a string with `invalid_payload: true`, never dropped.
pub fn event_json(e: &Event, raws: &mut Raws) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("seq".into(), json!(e.seq));
    super::out::id_field(&mut m, "run_id", e.run_id_bytes());
    if !e.step_id.is_empty() {
        super::out::id_field(&mut m, "step_id", e.step_id_bytes());
    }
    m.insert("at".into(), json!(e.at_text));
    super::out::id_field(&mut m, "type", e.kind_bytes());
    raws.put(&mut m, "payload", &e.payload);
    // A payload that is not UTF-8 was read lossily: its stored bytes too, as ids get.
    if let Some((_, stored)) = e.raw_invalid.iter().find(|(k, _)| *k == "payload") {
        m.insert("payload_hex".into(), json!(hex::encode(stored)));
    }
    super::out::text_field(&mut m, "decode_error", &e.decode_error);
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
        // The fast path shows exactly what the escaper would.
        let esc = |max: usize| move |b: &[u8]| clean_bytes(b, max);
        for s in &samples {
            for max in [1, 5, 60, PAYLOAD_TEXT] {
                assert_eq!(
                    plain_or(s.as_bytes(), max, esc(max)),
                    clean_bytes(s.as_bytes(), max),
                    "{s:?} at {max}"
                );
            }
        }
        // Anything else takes the slow path.
        for s in [
            "\u{1b}[31m",
            "a\\x41",
            "caf\u{e9}",
            "a literal [+9 bytes] marker",
            &"y".repeat(PAYLOAD_TEXT + 1),
        ] {
            assert_eq!(
                plain_or(s.as_bytes(), PAYLOAD_TEXT, |_| "slow".into()),
                "slow",
                "{s:?}"
            );
        }
    }
}
