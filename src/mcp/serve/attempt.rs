//! What became of a run's last attempt (agentrt mcp 2.10): known (a result, an error the
//! server returned, content the runtime refused), unknown (cut off, timed out, no answer), or
//! none (the tool never started, or its request was never sent: the server's connection was
//! already gone, decision 0070's amendment).

use super::answer::Earlier;
use super::policy::{INTERRUPTED_KIND, attempt_of};
use crate::mcp::call::was_not_sent;
use crate::runtime::types::{Approval, Step, StepStatus};

/// The last attempt of a run.
#[derive(Debug)]
pub enum Last {
    None,
    Known(Earlier),
    /// `ended`: `cut_off`, `timed_out` or `no_answer`.
    Unknown(String),
}

/// A recorded `tool_error`'s content.
#[derive(serde::Deserialize)]
struct Recorded {
    #[serde(default)]
    error: String,
    #[serde(default)]
    failure: String,
}

/// How a recorded `tool_error` is read: `Ok(earlier)` known, `Err(ended)` unknown.
pub fn classify(content: &[u8], server: &str, remote: &str, name: &str) -> Result<Earlier, String> {
    let Ok(e) = serde_json::from_slice::<Recorded>(content) else {
        return Err("no_answer".into());
    };
    match e.failure.as_str() {
        "timeout" => return Err("timed_out".into()),
        "invalid_content" => return Ok(Earlier::Unrecorded(e.error)),
        _ => {}
    }
    if server_answered(&e.error, server, remote) || refused_here(&e.error, name) {
        Ok(Earlier::Failed(e.error))
    } else {
        Err("no_answer".into())
    }
}

/// Whether a recorded `tool_error` is of a request never written to the server (its
/// connection was already gone): no attempt, whatever the tool changes.
pub fn not_sent(content: &[u8], server: &str, remote: &str) -> bool {
    serde_json::from_slice::<Recorded>(content)
        .is_ok_and(|e| e.failure == "error" && was_not_sent(&e.error, server, remote))
}

/// `<server>/<remote>: <digits> bytes[, truncated][, structured content of <digits> bytes
/// dropped for the text], error: `
fn server_answered(err: &str, server: &str, remote: &str) -> bool {
    let Some(rest) = err.strip_prefix(&format!("{server}/{remote}: ")) else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    let mut rest = &rest[digits..];
    let Some(r) = rest.strip_prefix(" bytes") else {
        return false;
    };
    rest = r.strip_prefix(", truncated").unwrap_or(r);
    if let Some(r) = rest.strip_prefix(", structured content of ") {
        let d = r.bytes().take_while(u8::is_ascii_digit).count();
        match r[d..].strip_prefix(" bytes dropped for the text") {
            Some(r) if d > 0 => rest = r,
            _ => return false,
        }
    }
    rest.starts_with(", error: ")
}

fn refused_here(err: &str, name: &str) -> bool {
    let Some(rest) = err.strip_prefix(&format!("{name}: ")) else {
        return false;
    };
    rest.starts_with("arguments are not a JSON object")
        || rest.starts_with("the server asked for more input")
        || ((rest.starts_with("parameter \""))
            && (rest.contains("\" is denied by the operator")
                || rest.contains("\" is fixed by the operator")))
}

/// The last attempt of `run_id`, scanning its tool-call steps newest first.
pub fn last_attempt(
    store: &super::runs::Runs,
    run_id: &str,
    tool: &super::open::Offered,
    read_only: bool,
) -> Result<Last, String> {
    let steps = store.list_steps(run_id).map_err(|e| e.to_string())?;
    let approvals = store.list_approvals(run_id).map_err(|e| e.to_string())?;
    for s in steps.iter().rev() {
        if let Some(l) = step_attempt(s, &approvals, tool, read_only) {
            return Ok(l);
        }
    }
    Ok(Last::None)
}

fn step_attempt(
    s: &Step,
    approvals: &[Approval],
    tool: &super::open::Offered,
    read_only: bool,
) -> Option<Last> {
    if let Some(a) = approvals.iter().rfind(|a| a.step_id == s.id)
        && a.kind == INTERRUPTED_KIND
        && s.observation
            .as_ref()
            .is_none_or(|o| o.kind != "tool_result" && o.kind != "tool_error")
    {
        let ended = attempt_of(a).map_or("cut_off".to_string(), |x| x.ended);
        return Some(Last::Unknown(ended));
    }
    let obs = s.observation.as_ref();
    match obs.map(|o| o.kind.as_str()) {
        Some("tool_result") => {
            let o = obs?;
            Some(Last::Known(Earlier::Succeeded(
                super::answer::result(&o.content).text,
            )))
        }
        Some("tool_error") => {
            let o = obs?;
            if not_sent(&o.content, &tool.server, &tool.built.tool) {
                return None; // never sent: no attempt, look further back
            }
            if read_only {
                let e = classify(&o.content, &tool.server, &tool.built.tool, &tool.built.name);
                return Some(Last::Known(match e {
                    Ok(k) => k,
                    Err(_) => Earlier::Failed(error_text(&o.content)),
                }));
            }
            Some(
                match classify(&o.content, &tool.server, &tool.built.tool, &tool.built.name) {
                    Ok(k) => Last::Known(k),
                    Err(ended) => Last::Unknown(ended),
                },
            )
        }
        _ if s.status == StepStatus::Interrupted
            && obs.is_some_and(|o| o.kind.contains("interrupt")) =>
        {
            Some(Last::Unknown("cut_off".into()))
        }
        _ => None,
    }
}

/// The `error` member of a recorded tool error (or the raw text).
pub fn error_text(content: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct E {
        #[serde(default)]
        error: String,
    }
    serde_json::from_slice::<E>(content)
        .map(|e| e.error)
        .unwrap_or_else(|_| String::from_utf8_lossy(content).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_recorded_errors() {
        let c = |e: &str, f: &str| {
            let j = serde_json::json!({"error": e, "failure": f, "tool": "fs_write"});
            classify(j.to_string().as_bytes(), "fs", "write", "fs_write").is_ok()
        };
        assert!(c("fs/write: 12 bytes, error: disk full", "error"));
        assert!(c(
            "fs/write: 12 bytes, truncated, structured content of 9 bytes dropped for the text, error: x",
            "error"
        ));
        assert!(c(
            "fs_write: parameter \"mode\" is denied by the operator",
            "error"
        ));
        assert!(!c(
            "mcp: server \"fs\": tool \"write\": the server closed the connection",
            "error"
        ));
        assert!(!c("fs/write: 12 bytes, error: x", "timeout"));
        assert!(!c("fs/write: bytes, error: x", "error"));
        assert!(c("whatever", "invalid_content"));
    }

    #[test]
    fn a_request_never_sent_is_no_attempt() {
        let n = |e: &str, f: &str| {
            let j = serde_json::json!({"error": e, "failure": f, "tool": "fs_write"});
            not_sent(j.to_string().as_bytes(), "fs", "write")
        };
        let e = "mcp: server \"fs\": tool \"write\": the request was not sent: the server is not connected since an earlier failure: the server closed its output";
        assert!(n(e, "error"));
        assert!(!n(e, "timeout"));
        assert!(
            !n(&e.replace("\"fs\"", "\"db\""), "error"),
            "another server's"
        );
        assert!(!n(
            "mcp: server \"fs\": tool \"write\": the server closed its output",
            "error"
        ));
        // What a server can make the text say comes after its own prefix.
        assert!(!n(
            "mcp: server \"fs\": tool \"write\": jsonrpc error 1: the request was not sent: ",
            "error"
        ));
        assert!(!n(
            "fs/write: 9 bytes, error: mcp: server \"fs\": tool \"write\": the request was not sent: x",
            "error"
        ));
    }
}
