//! The OpenAI-compatible adapter: `POST <base>/chat/completions` (spec §5). Works with any
//! server that speaks it (gateways, local servers, Ollama's `/v1`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::Secret;
use super::http::{self, Header};
use super::shared::{self, Failure};
use super::wire::{ChatRequest, ChatResponse, ContentBlock, ToolUse};
use crate::runtime::json::gojson::Object;
use crate::runtime::model::{ModelError, ModelFuture, ModelRequest, Usage};
use crate::runtime::types::ToolSpec;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
const P: &str = "openai";

/// The adapter's configuration. Every encoding of it shows the key as `[redacted]`.
#[derive(Clone, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Config {
    pub model: String,
    /// The accounting and pricing identity (default `openai:<model>`).
    pub name: String,
    #[serde(rename = "BaseURL")]
    pub base_url: String,
    #[serde(rename = "APIKey")]
    pub api_key: Secret,
}

super::keyed_config_debug!(Config, P);

/// `openai:<model>`.
pub fn name(model: &str) -> String {
    format!("openai:{model}")
}

struct Inner {
    model: String,
    name: String,
    base: String,
    key: Secret,
    client: reqwest::Client,
}

/// The adapter.
#[derive(Clone)]
pub struct OpenAi {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "openai.Model{{Name:{:?} BaseURL:{:?} APIKey:{}}}",
            self.inner.name, self.inner.base, self.inner.key
        )
    }
}

super::display_as_debug!(OpenAi);
super::serialize_as_debug!(OpenAi);

impl OpenAi {
    /// Builds the adapter; `OPENAI_API_KEY` is read only for the default base.
    pub fn new(cfg: Config) -> Result<OpenAi, String> {
        OpenAi::new_with_env(cfg, &|k| std::env::var(k).ok())
    }

    /// [`OpenAi::new`] with the environment given (tests).
    pub fn new_with_env(
        cfg: Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<OpenAi, String> {
        shared::require_model(P, &cfg.model)?;
        let mut key = cfg.api_key.clone();
        let base = cfg.base_url.trim_end_matches('/');
        let base = if base.is_empty() {
            DEFAULT_BASE_URL
        } else {
            base
        };
        // A custom base never receives the environment's key: it was meant for OpenAI.
        if key.is_empty()
            && base == DEFAULT_BASE_URL
            && let Some(k) = env("OPENAI_API_KEY").filter(|k| !k.is_empty())
        {
            key = Secret::new(k);
        }
        let ep = shared::check_endpoint(P, base, !key.is_empty())?;
        let loopback = (!key.is_empty() && ep.scheme == "http").then_some(ep.authority.as_str());
        let client = http::client(loopback)?;
        Ok(OpenAi {
            inner: Arc::new(Inner {
                name: shared::name_or(&cfg.name, || name(&cfg.model)),
                model: cfg.model,
                base: base.to_string(),
                key,
                client,
            }),
        })
    }

    /// The request body sent for `req`.
    pub fn body(&self, req: &ChatRequest) -> Result<Vec<u8>, String> {
        let mut o = chat_body(P, &self.inner.model, req, tool_call, tool_result)?;
        if !req.tools.is_empty() {
            o.str("tool_choice", "auto")
                .bool("parallel_tool_calls", false);
        }
        o.int("temperature", 0)
            .int_opt("max_tokens", req.max_output_tokens);
        Ok(o.finish())
    }

    async fn generate_chat(&self, req: ChatRequest) -> Result<ChatResponse, Failure> {
        let body = self.body(&req).map_err(Failure::Permanent)?;
        let url = format!("{}/chat/completions", self.inner.base);
        let mut headers = Vec::new();
        if !self.inner.key.is_empty() {
            headers.push(Header::Secret("authorization", &self.inner.key, "Bearer "));
        }
        http::post(P, &self.inner.client, &url, &headers, body)
            .await?
            .read(P, parse_reply)
    }
}

/// An assistant's tool call as OpenAI takes it: the arguments a JSON string (`{}` when none).
fn tool_call(b: &ContentBlock) -> Result<Vec<u8>, String> {
    let args = if b.input.is_empty() {
        "{}".to_string()
    } else {
        String::from_utf8_lossy(&b.input).into_owned()
    };
    let f = Object::new()
        .str("name", &b.name)
        .str("arguments", &args)
        .finish();
    Ok(Object::new()
        .str("id", &b.tool_use_id)
        .str("type", "function")
        .encoded("function", &f)
        .finish())
}

/// A tool result as OpenAI takes it: a `tool` message naming the call it answers.
fn tool_result(b: &ContentBlock) -> Vec<u8> {
    Object::new()
        .str("role", "tool")
        .str_opt("tool_call_id", &b.tool_use_id)
        .str("content", &b.content)
        .finish()
}

/// The start of a chat-completions body both OpenAI and Ollama send: the model, the messages
/// (see [`chat_messages`]) and, when the request has tools, `tools` (see [`function_tools`]);
/// the adapter adds what follows.
pub(crate) fn chat_body(
    provider: &str,
    model: &str,
    req: &ChatRequest,
    tool_call: impl Fn(&ContentBlock) -> Result<Vec<u8>, String>,
    tool_result: impl Fn(&ContentBlock) -> Vec<u8>,
) -> Result<Object, String> {
    let messages = chat_messages(req, tool_call, tool_result)?;
    let mut o = Object::new();
    o.str("model", model).encoded("messages", &messages);
    if !req.tools.is_empty() {
        o.encoded("tools", &function_tools(provider, &req.tools)?);
    }
    Ok(o)
}

/// The `messages` array in the chat-completions shape both OpenAI and Ollama use: the system
/// prompt (when there is one), then each turn of the conversation (see [`push_turn`]). The
/// adapters differ only in how a tool call and a tool result are written: `tool_call` and
/// `tool_result` write them.
pub(crate) fn chat_messages(
    req: &ChatRequest,
    tool_call: impl Fn(&ContentBlock) -> Result<Vec<u8>, String>,
    tool_result: impl Fn(&ContentBlock) -> Vec<u8>,
) -> Result<Vec<u8>, String> {
    let mut msgs: Vec<Vec<u8>> = Vec::new();
    if !req.system.is_empty() {
        msgs.push(
            Object::new()
                .str("role", "system")
                .str("content", &req.system)
                .finish(),
        );
    }
    for m in &req.messages {
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut results = Vec::new();
        for b in &m.content {
            match b.kind.as_str() {
                "text" => text.push_str(&b.text),
                "tool_use" => calls.push(tool_call(b)?),
                "tool_result" => results.push(tool_result(b)),
                _ => {}
            }
        }
        push_turn(&mut msgs, m.role == "assistant", &text, &calls, results);
    }
    Ok(join(&msgs))
}

/// Appends one conversation turn in the chat-completions shape both OpenAI and Ollama use: an
/// assistant turn carries its text and tool calls; any other turn is the user's text (when
/// there is any) followed by its tool results, each a `tool` message.
fn push_turn(
    msgs: &mut Vec<Vec<u8>>,
    assistant: bool,
    text: &str,
    calls: &[Vec<u8>],
    results: Vec<Vec<u8>>,
) {
    if assistant {
        let mut o = Object::new();
        o.str("role", "assistant").str("content", text);
        if !calls.is_empty() {
            o.encoded("tool_calls", &join(calls));
        }
        msgs.push(o.finish());
    } else {
        if !text.is_empty() {
            msgs.push(
                Object::new()
                    .str("role", "user")
                    .str("content", text)
                    .finish(),
            );
        }
        msgs.extend(results);
    }
}

/// The `tools` array both OpenAI and Ollama take: each tool a `function` with its name,
/// description and schema passed through byte for byte (`{}` when it has none).
pub(crate) fn function_tools(provider: &str, tools: &[ToolSpec]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for t in tools {
        let mut f = Object::new();
        f.str("name", &t.name).str("description", &t.description);
        if t.input_schema.is_empty() {
            f.encoded("parameters", b"{}");
        } else {
            f.raw("parameters", &t.input_schema)
                .map_err(|_| format!("{provider}: tool {}: the schema is not JSON", t.name))?;
        }
        out.push(
            Object::new()
                .str("type", "function")
                .encoded("function", &f.finish())
                .finish(),
        );
    }
    Ok(join(&out))
}

pub(crate) fn join(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![b'['];
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(it);
    }
    out.push(b']');
    out
}

#[derive(Deserialize)]
struct UsageOnly {
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<Box<RawValue>>,
    completion_tokens: Option<Box<RawValue>>,
    prompt_tokens_details: Option<Details>,
}

#[derive(Deserialize)]
struct Details {
    cached_tokens: Option<Box<RawValue>>,
}

fn raw(v: &Option<Box<RawValue>>) -> Option<&str> {
    v.as_deref().map(RawValue::get)
}

/// Usage is read first, on its own: a reply that is unusable otherwise is still charged it.
fn read_usage(body: &[u8]) -> Result<Usage, Failure> {
    let unusable = |e: String| Failure::UnusableUsage(format!("{P}: {e}"));
    let Ok(UsageOnly { usage: Some(u) }) = serde_json::from_slice::<UsageOnly>(body) else {
        return Ok(Usage::default());
    };
    let usage = Usage {
        input_tokens: shared::usage_count("usage.prompt_tokens", raw(&u.prompt_tokens))
            .map_err(unusable)?,
        output_tokens: shared::usage_count("usage.completion_tokens", raw(&u.completion_tokens))
            .map_err(unusable)?,
        cached_input_tokens: shared::usage_count(
            "usage.prompt_tokens_details.cached_tokens",
            u.prompt_tokens_details
                .as_ref()
                .and_then(|d| raw(&d.cached_tokens)),
        )
        .map_err(unusable)?,
    };
    shared::check_usage(&usage).map_err(unusable)?;
    Ok(usage)
}

/// Reads a 2xx body (spec §5, response handling 4–8).
pub fn parse_reply(body: &[u8]) -> Result<ChatResponse, Failure> {
    shared::read_as_go(body, read_reply)
}

/// [`parse_reply`] on the body as Go's decoder reads it; the bytes received are the caller's.
fn read_reply(body: &[u8]) -> Result<ChatResponse, Failure> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Choice {
        message: ReplyMessage<Option<String>>,
        finish_reason: Option<String>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct ApiError {
        #[serde(rename = "type")]
        kind: Option<String>,
        message: Option<String>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Reply {
        choices: Option<Vec<Choice>>,
        error: Option<ApiError>,
    }
    let usage = read_usage(body)?;
    let served = |message: String| Failure::Served { message, usage };
    let r: Reply = serde_json::from_slice(body).map_err(|e| served(format!("{P}: decode: {e}")))?;
    if let Some(e) = r.error {
        // The error's type when it names one (`invalid_request_error: …`), else its message.
        let message = shared::truncate(e.message.as_deref().unwrap_or(""), 512);
        return Err(served(match e.kind.as_deref().filter(|k| !k.is_empty()) {
            Some(kind) => format!("{P}: {}: {message}", shared::truncate(kind, 512)),
            None => format!("{P}: {message}"),
        }));
    }
    let Some(choice) = r.choices.unwrap_or_default().into_iter().next() else {
        return Err(served(format!("{P}: response carried no choice")));
    };
    let finish = choice.finish_reason.unwrap_or_default();
    // A reply cut off by the cap or filtered carries partial calls: dropped, not judged.
    let dropped = finish == "length" || finish == "content_filter";
    let mut uses = Vec::new();
    let calls = if dropped {
        Vec::new()
    } else {
        choice.message.tool_calls.unwrap_or_default()
    };
    for (i, c) in calls.into_iter().enumerate() {
        let args = c.function.arguments.unwrap_or_default();
        let args = args.trim();
        let args = if args.is_empty() { "{}" } else { args };
        let object = object_args(args);
        uses.push(tool_use(P, i, c.id, c.function.name, args, object).map_err(served)?);
    }
    let stop = match finish.as_str() {
        "tool_calls" => "tool_use".to_string(),
        "stop" => "end_turn".into(),
        "length" => "max_tokens".into(),
        "content_filter" => "refusal".into(),
        _ if !uses.is_empty() => "tool_use".into(),
        "" => "end_turn".into(),
        other => other.to_string(),
    };
    if stop == "max_tokens" || stop == "refusal" {
        uses.clear();
    }
    Ok(ChatResponse {
        text: choice.message.content.unwrap_or_default(),
        tool_uses: uses,
        stop_reason: stop,
        usage,
        raw: Vec::new(),
    })
}

/// A chat-completions reply's message as OpenAI and Ollama send it: its text and tool calls.
/// `A` is how a call's arguments come (OpenAI: JSON text in a string; Ollama: a JSON value).
#[derive(Deserialize, Default)]
#[serde(default, bound(deserialize = "A: Deserialize<'de> + Default"))]
pub(crate) struct ReplyMessage<A> {
    pub content: Option<String>,
    pub tool_calls: Option<Vec<ReplyCall<A>>>,
}

/// One tool call of a [`ReplyMessage`].
#[derive(Deserialize, Default)]
#[serde(default, bound(deserialize = "A: Deserialize<'de> + Default"))]
pub(crate) struct ReplyCall<A> {
    pub id: Option<String>,
    pub function: ReplyFunction<A>,
}

/// The function a [`ReplyCall`] names, with its arguments.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct ReplyFunction<A> {
    pub name: String,
    pub arguments: A,
}

/// Whether a tool call's arguments are a JSON object the runtime takes, or what they are
/// instead (not an object; an object refused for what it holds, such as a key twice, a number
/// past any float or nesting past the limit), said as the refusal says it.
pub(crate) fn object_args(args: &str) -> Result<(), String> {
    if !args.starts_with('{') {
        return Err("not a JSON object".into());
    }
    crate::runtime::json::check_json(args.as_bytes())
        .map_err(|e| format!("a JSON object the runtime refuses ({e})"))
}

/// The `i`th tool call of a chat-completions reply as a [`ToolUse`]. Its arguments must be a
/// JSON object the runtime takes (`object`, [`object_args`]); if not, the reply is refused with
/// the message returned, which says why. A call without an id is given one made from its place.
pub(crate) fn tool_use(
    provider: &str,
    i: usize,
    id: Option<String>,
    name: String,
    args: &str,
    object: Result<(), String>,
) -> Result<ToolUse, String> {
    if let Err(why) = object {
        return Err(format!(
            "{provider}: tool call {}: arguments are {why}: {}",
            shared::truncate(&name, 512),
            shared::truncate(args, 512)
        ));
    }
    Ok(ToolUse {
        id: id
            .filter(|i| !i.is_empty())
            .unwrap_or_else(|| shared::synthesize_tool_use_id(i)),
        name,
        args: args.as_bytes().to_vec(),
    })
}

/// [`Model`] for an adapter: the name it was configured with (`self.inner.name`), and each
/// request run through [`generate_with`] by its `generate_chat`.
macro_rules! chat_model {
    ($adapter:ident) => {
        impl $crate::runtime::model::Model for $adapter {
            fn name(&self) -> String {
                self.inner.name.clone()
            }
            fn generate(
                &self,
                req: $crate::runtime::model::ModelRequest,
            ) -> $crate::runtime::model::ModelFuture {
                let me = self.clone();
                $crate::providers::openai::generate_with(req, move |c| async move {
                    me.generate_chat(c).await
                })
            }
        }
    };
}
pub(crate) use chat_model;

/// Runs one chat request through an adapter as the runtime's model.
pub(crate) fn generate_with<F, Fut>(req: ModelRequest, f: F) -> ModelFuture
where
    F: FnOnce(ChatRequest) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<ChatResponse, Failure>> + Send + 'static,
{
    Box::pin(async move {
        let chat = ChatRequest::from_model_request(&req).map_err(ModelError::Fatal)?;
        let resp = f(chat).await.map_err(ModelError::from)?;
        resp.to_model_reply().map_err(|e| ModelError::Served {
            message: format!("the reply does not encode: {e}"),
            usage: resp.usage,
        })
    })
}

chat_model!(OpenAi);

/// Zero prices for these models under the names this adapter reports.
pub fn free(models: &[&str]) -> shared::PriceTable {
    shared::free(&models.iter().map(|m| name(m)).collect::<Vec<_>>())
}
