//! MCP: an MCP server's tools offered through the runtime, only those an operator classified
//! and only while they still match their pin (agentrt's `mcp` module and the configuration of
//! its proxy; `docs/mcp.md`).
//!
//! Beside the runtime, never inside it: this module depends on [`crate::runtime`] and
//! [`crate::safetext`], the runtime depends on nothing here. Feature `mcp` (default).
//!
//! Files: `canonical.rs` (the canonical schema form and the pin hashes), `owned.rs` (files only
//! their owner can change), `duration.rs` (Go duration text), `config.rs` (the proxy
//! configuration in agentrt's format), `manifest.rs` (the pin file), `rules.rs` (operator
//! rules and the per-tool checks), `client.rs` (the stdio client: process group, minimal
//! environment, stderr tail, one connect deadline, `tools/list` from the raw bytes), `http.rs`
//! (the same connection over streamable HTTP: POST per message, JSON or SSE answers, 16 MiB
//! cap, no redirect), `rpc.rs` (the JSON-RPC envelope and `CallError` both transports share),
//! `load.rs` (pin and load, the report), `index.rs` (agentrt's `proxy_calls` tables),
//! `reach.rs` (a server's arguments must not reach the proxy's own files), and `serve/` (serving
//! a host: one run per call through the Gate, the rules across calls, holds, the status tool,
//! and `recheck`).
//!
//! The JSON-RPC is written here rather than through an SDK: what is pinned and keyed must be
//! the bytes the server sent, and an SDK that decodes into `serde_json::Value` loses number
//! literals and repeated keys before the caller sees them (docs/decisions/0030).

pub mod call;
pub mod canonical;
pub mod client;
pub mod config;
pub mod duration;
pub mod http;
pub mod index;
pub mod load;
pub mod manifest;
pub mod owned;
pub mod reach;
pub mod rpc;
pub mod rules;
pub mod serve;

/// Cap on the recorded bytes of a result when a server names none.
pub const DEFAULT_MAX_CONTENT_BYTES: usize = 65536;
/// Pages of `tools/list` read at most.
pub const MAX_TOOL_PAGES: usize = 100;
/// Tools a server may list at most.
pub const MAX_TOOLS: usize = 1000;
/// The connect deadline when a server names none.
pub const DEFAULT_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Cap on one message from a server (a stdio line, an HTTP body).
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;
/// Bytes of a server's stderr kept for connect errors.
pub const STDERR_TAIL_BYTES: usize = 4096;

/// Server-chosen text made safe for an operator's line: every control, bidi and invisible
/// character escaped (reversibly), one line.
pub fn sanitize(text: &str) -> String {
    crate::safetext::escape_reversible(text.as_bytes(), crate::safetext::Options::line())
}

/// A message this proxy built (an error, a refusal), which quotes the server's values with
/// [`quote`]/[`sanitize`] already, made safe for an operator's line: left as it is when the
/// only change [`sanitize`] would make is to double its backslashes (so `\x1b` is not shown
/// `\\x1b`: one notation), else sanitized whole. Never lets a control, bidi or invisible
/// character through.
pub fn sanitize_message(text: &str) -> String {
    crate::safetext::escaped_once(text)
}

/// Bytes from a server made safe for an operator's line (invalid UTF-8 escaped too).
pub fn sanitize_bytes(bytes: &[u8]) -> String {
    crate::safetext::escape_reversible(bytes, crate::safetext::Options::line())
}

/// The most columns a value [`quote`] shows; a longer one is cut head-and-tail with a marker
/// saying how many bytes were left out (a server or a configuration can name anything at any
/// length, and a refusal is one line a person reads).
pub const QUOTED_MAX: usize = 200;

/// `"` + [`sanitize`] + `"`, cut visibly to [`QUOTED_MAX`] columns: where agentrt writes Go's
/// `%q` of server text.
pub fn quote(text: &str) -> String {
    crate::safetext::quoted_line(text, QUOTED_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal that quotes a hostile name is shown with one notation (`\x1b`, not `\\x1b`),
    /// and a message that still holds a raw control is escaped whole: nothing raw gets out.
    #[test]
    fn messages_are_escaped_once_and_never_let_a_control_out() {
        let name = "h_x\u{1b}[2Jy\u{202e}z";
        let why = format!("the name {} does not match", quote(name));
        assert_eq!(
            sanitize_message(&why),
            "the name \"h_x\\x1b[2Jy\\u{202e}z\" does not match"
        );
        let report = load::Report {
            server: "s".into(),
            refused: vec![("t".into(), why)],
            ..load::Report::default()
        };
        assert_eq!(
            report.lines(),
            vec!["s: refused t: the name \"h_x\\x1b[2Jy\\u{202e}z\" does not match".to_string()]
        );
        let raw = format!("boom \u{1b}[31m and {}", quote(name));
        let shown = sanitize_message(&raw);
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{202e}'),
            "{shown}"
        );
        assert_eq!(shown, sanitize(&raw));
    }

    /// A schema nested past Go's bound says so, not only "not JSON" (found from outside: a
    /// 100 000-deep schema was reported as not JSON, which it is).
    #[test]
    fn a_schema_nested_too_deep_says_so() {
        let deep = format!("{}{}", "[".repeat(10_001), "]".repeat(10_001));
        let e = canonical::canonical_schema(deep.as_bytes()).unwrap_err();
        assert!(e.contains("nested more than 10000 levels deep"), "{e}");
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(canonical::canonical_schema(ok.as_bytes()).is_ok());
    }

    /// A long value is cut visibly, head and tail kept, never echoed whole (found from outside:
    /// a 100 000-character session name came back whole in its refusal).
    #[test]
    fn a_long_value_is_quoted_cut_with_a_marker() {
        let long = format!("head{}tail", "x".repeat(100_000));
        let q = quote(&long);
        assert!(q.chars().count() <= QUOTED_MAX + 2, "{}", q.len());
        assert!(q.starts_with("\"head") && q.ends_with("tail\""), "{q}");
        assert!(q.contains("bytes]"), "{q}");
        assert_eq!(quote("a\nb"), "\"a\\nb\"");
        assert_eq!(quote("a\\x1b\"q"), "\"a\\\\x1b\\\"q\"");
    }
}
