//! The approval as a person reads it before deciding (agentrt's printWaiting, escaped with the
//! safe-text module): every field of the arguments and of the presentation, long values cut
//! head-and-tail with counts, and a closing line written by countersign itself, never by the
//! data, so the last thing a reviewer reads is ours.

use std::path::Path;

use super::shell;
use super::text::{badged, clean, col, ident, ident_col, stamp};
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
    /// Keys that repeat a key of the same object (top level and nested).
    pub duplicates: usize,
    /// The arguments were not shown at all (the request is too large to read).
    pub not_shown: bool,
}

/// The text of a pending approval, ending with countersign's own closing line.
pub fn render(a: &Approval, db: &Path, reason: &str) -> (String, Shown) {
    let mut shown = Shown::default();
    let mut s = String::new();
    let id = ident_col(&a.raw_invalid, "id", &a.id, 80);
    let tool = a
        .request
        .as_ref()
        .map(|r| r.spec.name.clone())
        .unwrap_or_default();
    let tool = if tool.is_empty() {
        "-".to_string()
    } else {
        ident(tool.as_bytes(), 80)
    };
    s.push_str(&format!("\nAPPROVAL WAITING  {id}\n"));
    s.push_str(&format!(
        "kind    {}\n",
        ident_col(&a.raw_invalid, "kind", &a.kind, 80)
    ));
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
        None => {
            fields(&mut s, &args, &mut shown);
            let dup_args = shown.duplicates;
            if dup_args > 0 {
                s.push_str(&format!(
                    "WARNING: the arguments repeat {dup_args} key(s) (marked DUPLICATE KEY / [duplicate key] above): a decoder keeps only one of each (Go's, which agentrt tools use, keeps the last in stored order), so read every occurrence before deciding\n"
                ));
            }
        }
    }
    s.push_str(
        "presentation (supplied by the consumer's policy; it may contain model-chosen text)\n",
    );
    fields(
        &mut s,
        shell::stored(&a.raw_invalid, "presentation", &a.presentation),
        &mut shown,
    );
    s.push_str(&format!(
        "hash    {}\n",
        col(&a.raw_invalid, "hash", &a.hash, 128)
    ));
    // A row approve and reject would refuse (its hash does not recompute from what is stored,
    // or a field could not be read) is said to be one, and no decision is offered for it
    // (found from outside: a tampered approval was shown with `decide with: ... approve`).
    // A request a page read capped is not all here, so it is left to the decision to judge.
    let refused = if crate::runtime::store::capped_request(a).is_none() {
        crate::runtime::operator::verify_hash(a).err()
    } else {
        None
    };
    match refused {
        Some(e) => s.push_str(&refused_hint(a, db, &e)),
        None => s.push_str(&decide_hint(a, db)),
    }
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
            s.push_str(&format!("    {}\n", badged(&t)));
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
                let times = members.iter().filter(|(k, _)| k == key).count();
                let nth = members[..=i].iter().filter(|(k, _)| k == key).count();
                let key_text = key_label(key);
                count(&key_text, shown);
                let key_text = badged(&key_text);
                if times > 1 {
                    if nth > 1 {
                        shown.duplicates += 1;
                    }
                    // serde keeps one of them, so its size would describe the wrong one.
                    s.push_str(&format!(
                        "  {key_text} (DUPLICATE KEY: occurrence {nth} of {times}, in stored order)\n"
                    ));
                } else {
                    match sizes.get(key.as_slice()) {
                        Some(size) => s.push_str(&format!("  {key_text} ({size} bytes)\n")),
                        None => s.push_str(&format!("  {key_text}\n")),
                    }
                }
                for line in render_json(value, &opts) {
                    count(&line, shown);
                    if line.badges().contains(crate::safetext::Badge::DuplicateKey) {
                        shown.duplicates += 1;
                    }
                    s.push_str(&format!("    {}\n", badged(&line)));
                }
            }
        }
        other => {
            s.push_str("  value\n");
            for line in render_json(other, &opts) {
                count(&line, shown);
                if line.badges().contains(crate::safetext::Badge::DuplicateKey) {
                    shown.duplicates += 1;
                }
                s.push_str(&format!("    {}\n", badged(&line)));
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

/// A top-level key as printed: bare when it is `[A-Za-z0-9_-]+`, else in quotes with `"`
/// escaped, so `refund.amount_cents` and `amount ` (trailing space) cannot pass for others.
fn key_label(key: &[u8]) -> crate::safetext::SafeText {
    let simple = !key.is_empty()
        && key
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-');
    if simple {
        return crate::safetext::escape_cut(key, Options::security(), FIELD_WIDTH);
    }
    crate::safetext::quoted(key, Options::security(), FIELD_WIDTH)
}

fn count(t: &crate::safetext::SafeText, shown: &mut Shown) {
    if t.is_cut() {
        shown.cut += 1;
    }
    shown.escapes += t.escape_count();
}

/// What replaces the `decide with:` line for an approval that approve and reject refuse: why,
/// and the cancel that ends its run (a command when one can be typed).
fn refused_hint(a: &Approval, db: &Path, e: &crate::runtime::operator::OperatorError) -> String {
    let why = super::text::said(&e.said(), 400);
    format!(
        "REFUSED by approve and reject: {why}\n{}",
        cancel_line(shell::stored(&a.raw_invalid, "run_id", &a.run_id), db)
    )
}

/// `cancel its run with: countersign --db … cancel RUN`, or where to cancel it when no
/// command line can name the run or the database.
pub fn cancel_line(run_id: &[u8], db: &Path) -> String {
    match shell::id_word(run_id)
        .ok()
        .and_then(|r| shell::command(db, &format!("cancel {r}")).ok())
    {
        Some(cmd) => format!("cancel its run with: {cmd}\n"),
        None => "cancel its run in the console\n".to_string(),
    }
}

/// The `decide with:` line: a command a POSIX shell runs with exactly the stored ids and path
/// (see [`super::shell`]), or a sentence saying why none can be printed and where to decide.
/// Printable ASCII only, written as it is (never through the terminal escaper).
pub fn decide_hint(a: &Approval, db: &Path) -> String {
    let run = shell::id_word(shell::stored(&a.raw_invalid, "run_id", &a.run_id));
    let approval = shell::id_word(shell::stored(&a.raw_invalid, "id", &a.id));
    let rest = match (&run, &approval) {
        (Ok(r), Ok(ap)) => Ok(format!("approve {r} --approval {ap}")),
        // Without --approval the command shows the run's one pending approval and asks.
        (Ok(r), Err(why)) => Err((
            format!("approve {r}"),
            format!("its approval id {}", why.why()),
        )),
        (Err(why), _) => {
            return format!(
                "decide with: the console; this run's id {} so no command line can name it\n",
                why.why()
            );
        }
    };
    match rest {
        Ok(rest) => match shell::command(db, &rest) {
            Ok(cmd) => format!("decide with: {cmd}\n"),
            Err(why) => {
                format!(
                    "decide with: the console or `approve` with the same --db; {why}, so no command can be printed for it\n"
                )
            }
        },
        Err((rest, why)) => match shell::command(db, &rest) {
            Ok(cmd) => format!(
                "decide with: {cmd}\n  ({why}, so the command shows the approval and asks)\n"
            ),
            Err(dbwhy) => {
                format!("decide with: the console; {dbwhy}, so no command can be printed for it\n")
            }
        },
    }
}
