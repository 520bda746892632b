//! What the host receives (agentrt mcp 2.12): a tool result, never a protocol error. The codes
//! (`PENDING_APPROVAL`, `DENIED`, ...) and the facts each carries are agentrt's; the sentences
//! are this build's. Server, model and operator text inside is escaped and bounded.

use crate::mcp::duration;

/// One answer to a `tools/call`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub text: String,
    pub is_error: bool,
    /// The recorded JSON, when it is an object (sent as `structuredContent`).
    pub structured: Option<Vec<u8>>,
}

impl Answer {
    /// A successful answer of plain text.
    pub(super) fn ok(text: String) -> Answer {
        Answer {
            text,
            is_error: false,
            structured: None,
        }
    }
    fn err(text: String) -> Answer {
        Answer {
            text,
            is_error: true,
            structured: None,
        }
    }
    /// The code the text starts with (`DENIED`, ...), or empty for a result.
    pub fn code(&self) -> &str {
        let head = self.text.split(':').next().unwrap_or("");
        if !head.is_empty() && head.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
            head
        } else {
            ""
        }
    }
}

/// Escaped onto one line and cut, visibly, to `max` characters.
pub fn clean(s: &str, max: usize) -> String {
    let e = crate::mcp::sanitize(s);
    if e.chars().count() <= max {
        return e;
    }
    let cut: String = e.chars().take(max).collect();
    format!("{cut}[...cut]")
}

/// RFC 3339 UTC seconds of Unix nanoseconds.
pub fn time(ns: i64) -> String {
    crate::runtime::types::Timestamp::from_unix_nanos(i128::from(ns)).format_rfc3339_seconds()
}

/// A successful result: the recorded JSON string's contents, or the raw JSON.
pub fn result(content: &[u8]) -> Answer {
    let raw = String::from_utf8_lossy(content).into_owned();
    let text = serde_json::from_str::<String>(&raw).unwrap_or_else(|_| raw.clone());
    let structured = raw.trim_start().starts_with('{').then(|| content.to_vec());
    Answer {
        text,
        is_error: false,
        structured,
    }
}

/// A failure the server reported (known outcome).
pub fn tool_error(err: &str) -> Answer {
    Answer::err(clean(err, 65536))
}

pub fn pending(id: &str) -> Answer {
    Answer::ok(format!(
        "PENDING_APPROVAL: this request waits for an operator's approval (approval {}); nothing has run. Do not repeat the call until you are told it was approved, do not reach for another tool to do the same thing, and do not ask the user to approve it: the operator decides elsewhere. Tell the user it is waiting. Once approved, repeat this call with exactly the same arguments to run it and receive its result.",
        clean(id, 100)
    ))
}

pub fn interrupted(id: &str) -> Answer {
    Answer::ok(format!(
        "INTERRUPTED: an earlier attempt of this exact request was cut off and nobody knows whether it took effect; an operator decides whether it runs again (approval {}). Nothing more has run. Do not repeat the call until you are told the operator decided, and do not reach for another tool to do the same thing. Tell the user. If you are told it was approved, repeat this call with exactly the same arguments.",
        clean(id, 100)
    ))
}

/// `how` is a clause from [`super::policy::how`]; `approval` names the question, if one is open.
pub fn unknown(how: &str, error: &str, approval: Option<&str>) -> Answer {
    let err = if error.trim().is_empty() {
        String::new()
    } else {
        format!(" ({})", clean(error, 500))
    };
    let next = match approval {
        Some(id) => format!(
            "An operator decides whether it runs again (approval {}).",
            clean(id, 100)
        ),
        None => "An identical call will wait for an operator to decide whether it runs again."
            .to_string(),
    };
    Answer::ok(format!(
        "UNKNOWN_OUTCOME: an attempt of this exact request {how}{err}, so it may or may not have taken effect. {next} Nothing more has run. Do not repeat the call until you are told the operator decided, and do not reach for another tool to do the same thing. Tell the user. If you are told it was approved, repeat this call with exactly the same arguments."
    ))
}

pub fn unrecorded(reason: &str, window: std::time::Duration) -> Answer {
    let dup = if window.is_zero() {
        String::new()
    } else {
        format!(
            " An identical call within {} is refused as a duplicate.",
            duration::format(window)
        )
    };
    Answer::ok(format!(
        "UNRECORDED: the server answered this request, so it ran, but its answer could not be recorded ({}). What it did is unknown here: it may have taken effect. Do not repeat the call to retry it.{dup} Tell the user.",
        clean(reason, 500)
    ))
}

pub fn in_progress() -> Answer {
    Answer::ok("IN_PROGRESS: this exact request is running now, or an attempt of it has no known outcome yet. Nothing new was started. Wait a little, then repeat this call with exactly the same arguments to learn how it ended.".into())
}

pub fn denied(reason: &str) -> Answer {
    Answer::err(format!(
        "DENIED: the policy does not allow this request: {}. Nothing ran.",
        clean(reason, 500)
    ))
}

pub fn invalid(reason: &str) -> Answer {
    let mut r = reason.to_string();
    // The runtime's schema address says nothing to the model.
    while let Some(i) = r.find(" with '") {
        let end = r[i + 7..].find('\'').map_or(r.len(), |j| i + 7 + j + 1);
        r.replace_range(i..end, "");
    }
    Answer::err(format!(
        "INVALID: the arguments do not match the tool's input schema: {}. Nothing ran. Correct the arguments and call again.",
        clean(&r, 1000)
    ))
}

fn note_text(note: &str) -> String {
    if note.trim().is_empty() {
        String::new()
    } else {
        format!(" The operator's note: {}.", quoted_note(note))
    }
}

/// The operator's note for the host, quoted once (agentrt's `%q` of it): escaped as
/// [`clean`] escapes and cut at 500 characters, then put in quotes with its own quotes
/// escaped, never escaped a second time (`C:\refunds`, not `C:\\refunds`).
pub fn quoted_note(note: &str) -> String {
    format!("\"{}\"", clean(note, 500).replace('"', "\\\""))
}

pub fn rejected(id: &str, note: &str, until: i64) -> Answer {
    Answer::err(format!(
        "REJECTED: an operator rejected this exact request (approval {}).{} It did not run. An identical request is refused until {}; do not ask for it again, and tell the user.",
        clean(id, 100),
        note_text(note),
        time(until)
    ))
}

pub fn cancelled(note: &str, until: i64) -> Answer {
    Answer::err(format!(
        "REJECTED: an operator cancelled this exact request.{} Nothing more ran. An identical request is refused until {}; do not ask for it again, and tell the user.",
        note_text(note),
        time(until)
    ))
}

pub fn expired(id: &str, until: i64) -> Answer {
    Answer::err(format!(
        "EXPIRED: the approval of this exact request (approval {}) expired before it was used. It did not run. An identical request is refused until {}; tell the user.",
        clean(id, 100),
        time(until)
    ))
}

/// How an earlier execution ended, for [`duplicate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Earlier {
    Succeeded(String),
    Unrecorded(String),
    Failed(String),
}

pub fn duplicate(at: i64, window: std::time::Duration, earlier: &Earlier) -> Answer {
    let outcome = match earlier {
        Earlier::Succeeded(r) => format!("it succeeded, with this result: {}", clean(r, 65536)),
        Earlier::Unrecorded(r) => format!(
            "the server answered, but its result could not be recorded: {}",
            clean(r, 500)
        ),
        Earlier::Failed(e) => format!("it failed, with this error: {}", clean(e, 65536)),
    };
    Answer::err(format!(
        "DUPLICATE: this exact request already ran at {} and does not run again: an identical call to this tool within {} of an earlier one is refused, whether it is a retry or meant as a new one. Its outcome was: {outcome}",
        time(at),
        duration::format(window)
    ))
}

pub fn blocked_unknown(tool: &str, id: &str) -> Answer {
    let t = clean(tool, 64);
    Answer::err(format!(
        "BLOCKED: an earlier call to {t} may have taken effect and its outcome is unknown (approval {}), so no other call to {t} that changes anything runs until an operator decides it. Nothing ran. Tell the user.",
        clean(id, 100)
    ))
}

pub fn blocked_cap(max: usize) -> Answer {
    Answer::err(format!(
        "BLOCKED: {max} requests already wait for an operator's approval, the most this session allows. Nothing ran and no approval was requested. Tell the user, and wait for the waiting requests to be decided."
    ))
}

pub fn unavailable(what: &str) -> Answer {
    Answer::err(format!("UNAVAILABLE: {what}. Tell the user."))
}

/// A request not sent because its server's connection was already gone (`why`: the failure
/// that ended it, an earlier call's or the server's own, not this request's). Nothing ran;
/// an approval it collected (`approval`) stands for an identical call after a restart.
pub fn not_connected(server: &str, why: &str, approval: Option<&str>) -> Answer {
    let stands = match approval {
        Some(id) => format!(
            "; its approval (approval {}) stands, and an identical call runs it once the proxy has been restarted",
            clean(id, 100)
        ),
        None => String::new(),
    };
    unavailable(&format!(
        "the server {} is not connected since an earlier failure ({}), so this request was not sent to it and nothing was executed{stands}",
        crate::mcp::quote(server),
        clean(why, 500)
    ))
}
