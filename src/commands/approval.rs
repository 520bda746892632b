//! The approval as a person reads it before deciding (agentrt's printWaiting, escaped with the
//! safe-text module): every field of the arguments and of the presentation, long values cut
//! head-and-tail with counts, and a closing line written by countersign itself, never by the
//! data, so the last thing a reviewer reads is ours.

use std::path::Path;

use super::text::{clean, stamp};
use crate::runtime::types::Approval;
use crate::safetext::{JsonOptions, Options, parse_json, render_json};

/// Widest a string value is printed before it is cut head-and-tail (display columns).
pub const FIELD_WIDTH: usize = 2000;

/// What a printed approval contained that a reviewer should know about.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Shown {
    /// Fields cut head-and-tail in what was printed.
    pub cut: usize,
    /// Escapes in what was printed.
    pub escapes: usize,
    /// The arguments were not shown at all (the request is too large to read).
    pub not_shown: bool,
}

/// The text of a pending approval, ending with countersign's own closing line.
pub fn render(a: &Approval, db: &Path, reason: &str) -> (String, Shown) {
    let mut shown = Shown::default();
    let mut s = String::new();
    let id = clean(&a.id, 80);
    let tool = a
        .request
        .as_ref()
        .map(|r| r.spec.name.clone())
        .unwrap_or_default();
    let tool = if tool.is_empty() {
        "-".to_string()
    } else {
        clean(&tool, 80)
    };
    s.push_str(&format!("\nAPPROVAL WAITING  {id}\n"));
    s.push_str(&format!("kind    {}\n", clean(&a.kind, 80)));
    s.push_str(&format!("tool    {tool}\n"));
    if !reason.is_empty() {
        s.push_str(&format!("reason  {}\n", clean(reason, 400)));
    }
    s.push_str(&format!("asked   {}\n", stamp(&a.created_at)));
    if !a.expires_at.is_zero() {
        s.push_str(&format!("expires {}\n", stamp(&a.expires_at)));
    }
    if !a.decode_error.is_empty() {
        s.push_str(&format!("unread  {}\n", clean(&a.decode_error, 4000)));
    }
    let args = a
        .request
        .as_ref()
        .map(|r| r.args.clone())
        .unwrap_or_default();
    s.push_str(
        "arguments (the tool call the model made; one field per line, byte count is the field's own size)\n",
    );
    match crate::runtime::store::capped_request(a) {
        // A page read's stand-in, never shown as if it were the arguments.
        Some(n) => {
            shown.not_shown = true;
            s.push_str(&format!(
                "  NOT SHOWN: the request is {n} {}, more than a page reads; none of its arguments were read\n",
                if n > crate::runtime::store::SHOWN_REQUEST_MAX { "bytes" } else { "characters" }
            ));
        }
        None => fields(&mut s, &args, &mut shown),
    }
    s.push_str(
        "presentation (supplied by the consumer's policy; it may contain model-chosen text)\n",
    );
    fields(&mut s, a.presentation.as_bytes(), &mut shown);
    s.push_str(&format!("hash    {}\n", clean(&a.hash, 128)));
    s.push_str(&format!(
        "decide with: countersign --db {} approve {} --approval {}\n",
        shell_quote(&db.to_string_lossy()),
        shell_quote(&a.run_id),
        shell_quote(&a.id)
    ));
    s.push_str(&format!(
        "----- end of approval {id} for tool {tool} -----\n"
    ));
    (s, shown)
}

/// One line per top-level field: `  <key> (<n> bytes)` then the value, indented.
fn fields(s: &mut String, raw: &[u8], shown: &mut Shown) {
    if raw.iter().all(u8::is_ascii_whitespace) {
        s.push_str("  (none)\n");
        return;
    }
    let opts = JsonOptions {
        text: Options::security(),
        string_width: FIELD_WIDTH,
        indent: 2,
    };
    let node = match parse_json(raw) {
        Ok(n) => n,
        Err(_) => {
            s.push_str(&format!("  value ({} bytes, not JSON)\n", raw.len()));
            let t = crate::safetext::escape_cut(raw, Options::security(), FIELD_WIDTH);
            count(&t, shown);
            s.push_str(&format!("    {t}\n"));
            return;
        }
    };
    match &node {
        crate::safetext::JsonNode::Object(members) if members.is_empty() => {
            s.push_str("  (no fields)\n");
        }
        crate::safetext::JsonNode::Object(members) => {
            let sizes = field_sizes(raw);
            let mut order: Vec<usize> = (0..members.len()).collect();
            order.sort_by(|&x, &y| members[x].0.cmp(&members[y].0));
            for i in order {
                let (key, value) = &members[i];
                let key_text = crate::safetext::escape_cut(key, Options::security(), 200);
                count(&key_text, shown);
                match sizes.get(key.as_slice()) {
                    Some(size) => s.push_str(&format!("  {key_text} ({size} bytes)\n")),
                    None => s.push_str(&format!("  {key_text}\n")),
                }
                for line in render_json(value, &opts) {
                    count(&line, shown);
                    s.push_str(&format!("    {line}\n"));
                }
            }
        }
        other => {
            s.push_str("  value\n");
            for line in render_json(other, &opts) {
                count(&line, shown);
                s.push_str(&format!("    {line}\n"));
            }
        }
    }
}

/// Each top-level field's own size: the length of its compact JSON encoding (agentrt prints the
/// same figure). Unknown when the value does not decode as ordinary JSON numbers allow.
fn field_sizes(raw: &[u8]) -> std::collections::HashMap<Vec<u8>, usize> {
    let mut out = std::collections::HashMap::new();
    if let Ok(serde_json::Value::Object(m)) = serde_json::from_slice::<serde_json::Value>(raw) {
        for (k, v) in m {
            if let Ok(b) = serde_json::to_vec(&v) {
                out.insert(k.into_bytes(), b.len());
            }
        }
    }
    out
}

fn count(t: &crate::safetext::SafeText, shown: &mut Shown) {
    if t.is_cut() {
        shown.cut += 1;
    }
    shown.escapes += t.escape_count();
}

/// Quotes a word for a POSIX shell when it needs it; the result is escaped for the terminal.
fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:@%+=,".contains(&b));
    if plain {
        s.to_string()
    } else {
        clean(&format!("'{}'", s.replace('\'', "'\\''")), 4000)
    }
}
