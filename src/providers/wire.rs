//! The conversation types the adapters speak (agentrt's `ModelRequest` / `ModelResponse`,
//! spec §1), carried in the runtime's opaque [`crate::runtime::model::ModelRequest`] body as
//! their Go JSON, so that the caller's estimate (`len(json)/3 + 1`) and the replay key are
//! agentrt's.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::runtime::json::JsonError;
use crate::runtime::json::gojson::Object;
use crate::runtime::model::Usage;
use crate::runtime::types::ToolSpec;

/// One block of a message: `text`, `tool_use`, `tool_result` or an adapter's raw block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContentBlock {
    /// The JSON key `type`.
    pub kind: String,
    pub text: String,
    pub tool_use_id: String,
    pub name: String,
    /// Raw JSON (a tool use's input), byte for byte; empty = absent.
    pub input: Vec<u8>,
    pub content: String,
    pub is_error: bool,
}

impl ContentBlock {
    pub fn text(t: &str) -> ContentBlock {
        ContentBlock {
            kind: "text".into(),
            text: t.into(),
            ..ContentBlock::default()
        }
    }
    pub fn tool_use(id: &str, name: &str, input: &[u8]) -> ContentBlock {
        ContentBlock {
            kind: "tool_use".into(),
            tool_use_id: id.into(),
            name: name.into(),
            input: input.to_vec(),
            ..ContentBlock::default()
        }
    }
    pub fn tool_result(id: &str, content: &str, is_error: bool) -> ContentBlock {
        ContentBlock {
            kind: "tool_result".into(),
            tool_use_id: id.into(),
            content: content.into(),
            is_error,
            ..ContentBlock::default()
        }
    }

    fn go_json(&self) -> Result<Vec<u8>, JsonError> {
        let mut o = Object::new();
        o.str("type", &self.kind)
            .str_opt("text", &self.text)
            .str_opt("tool_use_id", &self.tool_use_id)
            .str_opt("name", &self.name);
        o.raw_opt("input", &self.input)?;
        o.str_opt("content", &self.content);
        if self.is_error {
            o.bool("is_error", true);
        }
        Ok(o.finish())
    }
}

/// A turn: `user` or `assistant`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub content: Vec<ContentBlock>,
}

impl Message {
    pub fn user(content: Vec<ContentBlock>) -> Message {
        Message {
            role: "user".into(),
            content,
        }
    }
    pub fn assistant(content: Vec<ContentBlock>) -> Message {
        Message {
            role: "assistant".into(),
            content,
        }
    }
}

/// What an agent asks a model (agentrt's `ModelRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatRequest {
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_output_tokens: i64,
}

fn array(items: impl Iterator<Item = Result<Vec<u8>, JsonError>>) -> Result<Vec<u8>, JsonError> {
    let mut out = vec![b'['];
    for (i, it) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend(it?);
    }
    out.push(b']');
    Ok(out)
}

impl ChatRequest {
    /// Go JSON: `system` (omitempty), `messages` (always; `null` when there are none),
    /// `tools` (omitempty), `max_output_tokens` (omitempty).
    pub fn go_json(&self) -> Result<Vec<u8>, JsonError> {
        let mut o = Object::new();
        o.str_opt("system", &self.system);
        if self.messages.is_empty() {
            o.encoded("messages", b"null");
        } else {
            let m = array(self.messages.iter().map(|m| {
                let blocks = array(m.content.iter().map(|b| b.go_json()))?;
                let mut mo = Object::new();
                mo.str("role", &m.role);
                if m.content.is_empty() {
                    mo.encoded("content", b"null");
                } else {
                    mo.encoded("content", &blocks);
                }
                Ok(mo.finish())
            }))?;
            o.encoded("messages", &m);
        }
        if !self.tools.is_empty() {
            let t = array(self.tools.iter().map(|t| t.to_go_json()))?;
            o.encoded("tools", &t);
        }
        o.int_opt("max_output_tokens", self.max_output_tokens);
        Ok(o.finish())
    }

    /// The runtime request carrying this one.
    pub fn to_model_request(&self) -> Result<crate::runtime::model::ModelRequest, JsonError> {
        Ok(crate::runtime::model::ModelRequest {
            body: self.go_json()?,
            max_output_tokens: self.max_output_tokens,
        })
    }

    /// Reads a runtime request's body (the cap the caller clamped wins over the body's).
    pub fn from_model_request(
        r: &crate::runtime::model::ModelRequest,
    ) -> Result<ChatRequest, String> {
        let mut c = ChatRequest::decode(&r.body)?;
        c.max_output_tokens = r.max_output_tokens;
        Ok(c)
    }

    pub fn decode(body: &[u8]) -> Result<ChatRequest, String> {
        let w: WireRequest = serde_json::from_slice(body)
            .map_err(|e| format!("the request does not decode: {e}"))?;
        Ok(ChatRequest {
            system: w.system,
            messages: w
                .messages
                .unwrap_or_default()
                .into_iter()
                .map(|m| Message {
                    role: m.role,
                    content: m
                        .content
                        .unwrap_or_default()
                        .into_iter()
                        .map(|b| ContentBlock {
                            kind: b.kind,
                            text: b.text,
                            tool_use_id: b.tool_use_id,
                            name: b.name,
                            input: raw_bytes(b.input),
                            content: b.content,
                            is_error: b.is_error,
                        })
                        .collect(),
                })
                .collect(),
            tools: w
                .tools
                .unwrap_or_default()
                .into_iter()
                .map(|t| ToolSpec {
                    name: t.name,
                    description: t.description,
                    input_schema: raw_bytes(t.input_schema),
                    side_effect: t.side_effect,
                    timeout_ns: t.timeout,
                    terminal: t.terminal,
                })
                .collect(),
            max_output_tokens: w.max_output_tokens,
        })
    }
}

/// A raw value's bytes; JSON `null` counts as absent.
pub(crate) fn raw_bytes(v: Option<Box<RawValue>>) -> Vec<u8> {
    match v {
        Some(r) if r.get().trim() != "null" => r.get().as_bytes().to_vec(),
        _ => Vec::new(),
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireBlock {
    #[serde(rename = "type")]
    kind: String,
    text: String,
    tool_use_id: String,
    name: String,
    input: Option<Box<RawValue>>,
    content: String,
    is_error: bool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireMessage {
    role: String,
    content: Option<Vec<WireBlock>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireTool {
    name: String,
    description: String,
    input_schema: Option<Box<RawValue>>,
    side_effect: String,
    timeout: i64,
    terminal: bool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireRequest {
    system: String,
    messages: Option<Vec<WireMessage>>,
    tools: Option<Vec<WireTool>>,
    max_output_tokens: i64,
}

/// One tool call in a reply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolUse {
    pub id: String,
    pub name: String,
    /// Raw JSON object, byte for byte.
    pub args: Vec<u8>,
}

/// A model's reply (agentrt's `ModelResponse`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatResponse {
    pub text: String,
    pub tool_uses: Vec<ToolUse>,
    pub stop_reason: String,
    pub usage: Usage,
    /// The provider's bytes, as received.
    pub raw: Vec<u8>,
}

impl ChatResponse {
    /// Go JSON: `text`, `tool_uses`, `stop_reason` (omitempty), `usage` (always); with
    /// `with_raw`, the provider's bytes as the string `raw_bytes` (omitempty).
    pub fn go_json(&self, with_raw: bool) -> Result<Vec<u8>, JsonError> {
        let mut o = Object::new();
        o.str_opt("text", &self.text);
        if !self.tool_uses.is_empty() {
            let t = array(self.tool_uses.iter().map(|t| {
                let mut to = Object::new();
                to.str("id", &t.id).str("name", &t.name);
                if t.args.is_empty() {
                    to.encoded("args", b"null");
                } else {
                    // As the model sent them (not compacted): the decision keeps its bytes.
                    crate::runtime::json::check_json(&t.args)?;
                    to.encoded("args", &t.args);
                }
                Ok(to.finish())
            }))?;
            o.encoded("tool_uses", &t);
        }
        o.str_opt("stop_reason", &self.stop_reason)
            .encoded("usage", &self.usage.go_json());
        if with_raw && !self.raw.is_empty() {
            // As a string, so the provider's bytes come back exactly (not re-encoded).
            o.str("raw_bytes", &String::from_utf8_lossy(&self.raw));
        }
        Ok(o.finish())
    }

    /// The runtime reply carrying this one.
    pub fn to_model_reply(&self) -> Result<crate::runtime::model::ModelReply, JsonError> {
        Ok(crate::runtime::model::ModelReply {
            body: self.go_json(true)?,
            usage: self.usage,
        })
    }

    pub fn decode(body: &[u8]) -> Result<ChatResponse, String> {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct WireUse {
            id: String,
            name: String,
            args: Option<Box<RawValue>>,
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct WireUsage {
            input_tokens: i64,
            output_tokens: i64,
            cached_input_tokens: i64,
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct WireResponse {
            text: String,
            tool_uses: Option<Vec<WireUse>>,
            stop_reason: String,
            usage: WireUsage,
            raw: Option<Box<RawValue>>,
            raw_bytes: Option<String>,
        }
        let w: WireResponse =
            serde_json::from_slice(body).map_err(|e| format!("the reply does not decode: {e}"))?;
        Ok(ChatResponse {
            text: w.text,
            tool_uses: w
                .tool_uses
                .unwrap_or_default()
                .into_iter()
                .map(|u| ToolUse {
                    id: u.id,
                    name: u.name,
                    args: raw_bytes(u.args),
                })
                .collect(),
            stop_reason: w.stop_reason,
            usage: Usage {
                input_tokens: w.usage.input_tokens,
                output_tokens: w.usage.output_tokens,
                cached_input_tokens: w.usage.cached_input_tokens,
            },
            raw: match w.raw_bytes {
                Some(b) => b.into_bytes(),
                None => raw_bytes(w.raw),
            },
        })
    }
}
