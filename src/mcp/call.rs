//! Calling a registered tool (agentrt mcp 1.13, 1.14): the operator's denied and fixed
//! parameters enforced, the call bounded by the tool's timeout, and the result capped,
//! flattened to JSON and summarised as the server's data.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::canonical::{canonical_schema, json_string, raw_object};
use super::client::Connection;
use super::rules::Built;
use crate::runtime::tools::ToolOutput;

/// The truncation marker (15 bytes encoded, with the quotes).
const MARKER: &str = "\n[truncated]";

#[derive(Deserialize)]
struct CallResult {
    #[serde(default)]
    content: Vec<Box<RawValue>>,
    #[serde(rename = "structuredContent")]
    structured: Option<Box<RawValue>>,
    #[serde(rename = "isError", default)]
    is_error: bool,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: String,
}

/// Calls `tool` on `server` with the model's `args` (empty = `{}`). An error is the text the
/// agent sees; it never aborts the run.
pub fn call(
    conn: &Connection,
    server: &str,
    tool: &Built,
    args: &[u8],
    max_content: usize,
) -> Result<ToolOutput, String> {
    let name = &tool.name;
    let args = if args.trim_ascii().is_empty() {
        &b"{}"[..]
    } else {
        args
    };
    let mut obj: BTreeMap<String, Box<RawValue>> = serde_json::from_slice(args)
        .map_err(|e| format!("{name}: arguments are not a JSON object: {e}"))?;
    for p in &tool.deny {
        if obj.contains_key(p) {
            return Err(format!(
                "{name}: parameter {} is denied by the operator",
                super::quote(p)
            ));
        }
    }
    for p in tool.fixed.keys() {
        if obj.contains_key(p) {
            return Err(format!(
                "{name}: parameter {} is fixed by the operator",
                super::quote(p)
            ));
        }
    }
    for (p, v) in &tool.fixed {
        let raw = RawValue::from_string(String::from_utf8_lossy(v).into_owned())
            .map_err(|e| format!("{name}: fixed value for {}: {e}", super::quote(p)))?;
        obj.insert(p.clone(), raw);
    }
    let mut params = b"{\"name\":".to_vec();
    params.extend_from_slice(&json_string(&tool.tool));
    params.extend_from_slice(b",\"arguments\":");
    params.extend_from_slice(&raw_object(&obj));
    params.push(b'}');
    let deadline = Instant::now() + tool.timeout;
    let raw = conn
        .request("tools/call", &params, deadline)
        .map_err(|e| format!("{}{e}", failed_prefix(server, &tool.tool)))?;
    let res: CallResult = serde_json::from_slice(&raw).map_err(|e| {
        format!(
            "mcp: server {}: tool {}: the result is not usable: {}",
            super::quote(server),
            super::quote(&tool.tool),
            super::sanitize(&e.to_string())
        )
    })?;
    let cap = max_content.max(json_string(MARKER).len());
    let mut truncated = false;
    let mut dropped = None;
    let mut content = None;
    if let Some(s) = &res.structured {
        match canonical_schema(s.get().as_bytes()) {
            Ok(c) if c.len() <= cap => content = Some(c),
            Ok(c) => dropped = Some(c.len()),
            Err(_) => dropped = Some(s.get().len()),
        }
    }
    let text_of = || -> String {
        let parts: Vec<String> = res
            .content
            .iter()
            .map(|b| match serde_json::from_str::<Block>(b.get()) {
                Ok(b) if b.kind == "text" => b.text,
                Ok(b) => match b.kind.as_str() {
                    "image" => "[image omitted]".into(),
                    "audio" => "[audio omitted]".into(),
                    "resource_link" => "[resource link omitted]".into(),
                    "resource" => "[embedded resource omitted]".into(),
                    _ => "[content omitted]".into(),
                },
                Err(_) => "[content omitted]".into(),
            })
            .collect();
        if parts.is_empty() && dropped.is_some() {
            "[structured content dropped: too large]".into()
        } else {
            parts.join("\n")
        }
    };
    let content = match content {
        Some(c) => c,
        None => {
            let (c, cut) = cap_text(&text_of(), cap);
            truncated = cut;
            c
        }
    };
    let mut summary = format!("{server}/{}: {} bytes", tool.tool, content.len());
    if truncated || dropped.is_some() {
        summary.push_str(", truncated");
    }
    if let Some(m) = dropped {
        summary.push_str(&format!(
            ", structured content of {m} bytes dropped for the text"
        ));
    }
    if res.is_error {
        let text = String::from_utf8_lossy(&content).into_owned();
        let text = serde_json::from_str::<String>(&text).unwrap_or(text);
        return Err(format!("{summary}, error: {text}"));
    }
    Ok(ToolOutput { content, summary })
}

/// How the error of a call the server gave no result to starts: `mcp: server "<server>": tool
/// "<remote>": `, then the [`CallError`](super::rpc::CallError) as text.
pub fn failed_prefix(server: &str, remote: &str) -> String {
    format!(
        "mcp: server {}: tool {}: ",
        super::quote(server),
        super::quote(remote)
    )
}

/// Whether a call's error says its request was never written to the server (the connection
/// was already gone): `failed_prefix`, then [`NOT_SENT`](super::rpc::NOT_SENT).
pub fn was_not_sent(err: &str, server: &str, remote: &str) -> bool {
    err.strip_prefix(&failed_prefix(server, remote))
        .is_some_and(|rest| rest.starts_with(super::rpc::NOT_SENT))
}

/// The text as a JSON string of at most `cap` encoded bytes: the longest prefix (whole
/// characters) that fits with the marker when it does not fit whole.
pub fn cap_text(text: &str, cap: usize) -> (Vec<u8>, bool) {
    let whole = json_string(text);
    if whole.len() <= cap {
        return (whole, false);
    }
    let marker_len = json_string(MARKER).len() - 2;
    // Encoded length of each prefix grows monotonically: find the longest that fits.
    let mut used = 2 + marker_len;
    let mut end = 0;
    for (i, c) in text.char_indices() {
        let mut b = [0u8; 4];
        let n = json_string(c.encode_utf8(&mut b)).len() - 2;
        if used + n > cap {
            break;
        }
        used += n;
        end = i + c.len_utf8();
    }
    let mut s = text[..end].to_string();
    s.push_str(MARKER);
    (json_string(&s), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_text_never_exceeds_the_cap() {
        let text = "ab\u{1}é\u{2028}\"x".repeat(20);
        for cap in 15..200 {
            let (b, cut) = cap_text(&text, cap);
            assert!(b.len() <= cap, "cap {cap}: {}", b.len());
            let back: String = serde_json::from_slice(&b).unwrap();
            if cut {
                assert!(back.ends_with(MARKER));
                assert!(text.starts_with(back.trim_end_matches(MARKER)));
            }
        }
        let (b, cut) = cap_text(&"x".repeat(500), 64);
        assert!(cut);
        assert_eq!(b.len(), 64);
        assert_eq!(
            serde_json::from_slice::<String>(&b).unwrap(),
            format!("{}{MARKER}", "x".repeat(49))
        );
    }
}
