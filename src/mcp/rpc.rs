//! What the stdio and HTTP transports share: the JSON-RPC envelope as read (the `result` kept
//! as the raw bytes the server sent) and why a request got no result.

use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::sanitize;

/// Why a request did not get a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// No answer before the deadline.
    TimedOut(Duration),
    /// The connection is gone (the server exited, closed stdout, or was closed) after the
    /// request was written, or while it was being written: the server may have it.
    Closed(String),
    /// The request was never written: the connection was already gone before it (why). The
    /// server cannot have it, whatever it does.
    NotSent(String),
    /// The server answered with a JSON-RPC error (message as sent, not yet sanitised).
    Rpc { code: i64, message: String },
    /// The server answered something that is not a JSON-RPC response.
    Protocol(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // To the millisecond: the bound a person set, not the nanoseconds the clock
            // read between computing the deadline and sending (found from outside:
            // "timed out after 4.999999559s" for a 5s bound).
            CallError::TimedOut(d) => {
                let ms = d.as_nanos().saturating_add(500_000) / 1_000_000;
                let d = std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX));
                write!(f, "timed out after {}", super::duration::format(d))
            }
            CallError::Closed(why) => write!(f, "{why}"),
            CallError::NotSent(why) => write!(f, "{NOT_SENT}{why}"),
            CallError::Rpc { code, message } => {
                write!(f, "jsonrpc error {code}: {}", sanitize(message))
            }
            CallError::Protocol(why) => write!(f, "{why}"),
        }
    }
}

/// How a [`CallError::NotSent`] reads, before its reason: a text no answer of a server can
/// produce in that place (the proxy reads a recorded error that starts with it as "not sent").
pub const NOT_SENT: &str = "the request was not sent: ";

/// One JSON-RPC message as read: a response (`id` and `result` or `error`), a request from the
/// server (`id` and `method`) or a notification (`method` alone).
#[derive(Deserialize)]
pub struct Envelope {
    pub id: Option<Box<RawValue>>,
    pub method: Option<String>,
    pub result: Option<Box<RawValue>>,
    pub error: Option<RpcError>,
}

/// A JSON-RPC error object.
#[derive(Deserialize)]
pub struct RpcError {
    #[serde(default)]
    pub code: i64,
    #[serde(default)]
    pub message: String,
}

/// A response's raw `result`, or why it has none.
pub fn answer_of(
    result: Option<Box<RawValue>>,
    error: Option<RpcError>,
) -> Result<Vec<u8>, CallError> {
    match (result, error) {
        (_, Some(e)) => Err(CallError::Rpc {
            code: e.code,
            message: e.message,
        }),
        (Some(res), None) => Ok(res.get().as_bytes().to_vec()),
        (None, None) => Err(CallError::Protocol(
            "a response with neither result nor error".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    /// A timeout is said to the millisecond of the bound.
    #[test]
    fn a_timeout_is_said_to_the_millisecond() {
        let e = super::CallError::TimedOut(std::time::Duration::from_nanos(4_999_999_559));
        assert_eq!(e.to_string(), "timed out after 5s");
        let e = super::CallError::TimedOut(std::time::Duration::from_millis(1_250));
        assert_eq!(e.to_string(), "timed out after 1.25s");
    }
}
