//! The Ollama adapter: `POST <host>/api/chat`, the native API (spec §6). No key, so no
//! loopback rule; only `OLLAMA_HOST` is read from the environment.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::http;
use super::openai::{ReplyMessage, chat_body, chat_model, tool_use};
use super::shared::{self, Failure};
use super::wire::{ChatRequest, ChatResponse, ContentBlock};
use crate::runtime::json::gojson::Object;
use crate::runtime::model::Usage;

pub const DEFAULT_HOST: &str = "127.0.0.1:11434";
pub const DEFAULT_NUM_CTX: i64 = 32768;
const P: &str = "ollama";

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Config {
    pub model: String,
    pub name: String,
    pub host: String,
    pub think: bool,
    /// 0: 32768.
    pub num_ctx: i64,
}

pub fn name(model: &str) -> String {
    format!("ollama:{model}")
}

/// The host as the adapter would use it (`http://` prefixed, trailing `/` removed).
pub fn host(h: &str) -> Result<String, String> {
    let shown = crate::runtime::json::go_quote(&shared::redacted_url(h));
    let full = if h.contains("://") {
        h.to_string()
    } else {
        format!("http://{h}")
    };
    let (scheme, _) = full.split_once("://").unwrap_or(("", ""));
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(format!(
            "{P}: host {shown}: the scheme must be http or https"
        ));
    }
    let bad = || format!("{P}: host {shown} is not a server address");
    let (ep, userinfo) = shared::split_url(P, &full).map_err(|_| bad())?;
    if userinfo || full.contains('?') || full.contains('#') {
        return Err(bad());
    }
    Ok(format!("{}://{}{}", ep.scheme, ep.authority, ep.path))
}

struct Inner {
    model: String,
    name: String,
    base: String,
    think: bool,
    num_ctx: i64,
    client: reqwest::Client,
}

#[derive(Clone)]
pub struct Ollama {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Ollama {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ollama.Model{{Name:{:?} Host:{:?}}}",
            self.inner.name, self.inner.base
        )
    }
}

impl Ollama {
    pub fn new(cfg: Config) -> Result<Ollama, String> {
        Ollama::new_with_env(cfg, &|k| std::env::var(k).ok())
    }

    pub fn new_with_env(
        cfg: Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Ollama, String> {
        shared::require_model(P, &cfg.model)?;
        let h = if !cfg.host.is_empty() {
            cfg.host.clone()
        } else {
            env("OLLAMA_HOST")
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| DEFAULT_HOST.to_string())
        };
        let base = host(&h)?;
        Ok(Ollama {
            inner: Arc::new(Inner {
                name: shared::name_or(&cfg.name, || name(&cfg.model)),
                model: cfg.model,
                base,
                think: cfg.think,
                num_ctx: if cfg.num_ctx > 0 {
                    cfg.num_ctx
                } else {
                    DEFAULT_NUM_CTX
                },
                client: http::client(None)?,
            }),
        })
    }

    pub fn body(&self, req: &ChatRequest) -> Result<Vec<u8>, String> {
        let mut o = chat_body(P, &self.inner.model, req, tool_call, tool_result)?;
        let opts = Object::new()
            .int("temperature", 0)
            .int("num_ctx", self.inner.num_ctx)
            .int_opt("num_predict", req.max_output_tokens)
            .finish();
        o.bool("stream", false)
            .bool("think", self.inner.think)
            .encoded("options", &opts);
        Ok(o.finish())
    }

    async fn generate_chat(&self, req: ChatRequest) -> Result<ChatResponse, Failure> {
        let body = self.body(&req).map_err(Failure::Permanent)?;
        let url = format!("{}/api/chat", self.inner.base);
        http::post(P, &self.inner.client, &url, &[], body)
            .await?
            .read(P, parse_reply)
    }
}

/// An assistant's tool call as Ollama takes it: the arguments a JSON object (`{}` when none).
fn tool_call(b: &ContentBlock) -> Result<Vec<u8>, String> {
    let mut f = Object::new();
    f.str("name", &b.name);
    if b.input.is_empty() {
        f.encoded("arguments", b"{}");
    } else {
        f.raw("arguments", &b.input)
            .map_err(|_| format!("ollama: tool use {}: input is not JSON", b.name))?;
    }
    Ok(Object::new()
        .str_opt("id", &b.tool_use_id)
        .encoded("function", &f.finish())
        .finish())
}

/// A tool result as Ollama takes it: a `tool` message naming the tool.
fn tool_result(b: &ContentBlock) -> Vec<u8> {
    Object::new()
        .str("role", "tool")
        .str("content", &b.content)
        .str_opt("tool_name", &b.name)
        .finish()
}

pub fn parse_reply(body: &[u8]) -> Result<ChatResponse, Failure> {
    shared::read_as_go(body, read_reply)
}

/// [`parse_reply`] on the body as Go's decoder reads it; the bytes received are the caller's.
fn read_reply(body: &[u8]) -> Result<ChatResponse, Failure> {
    #[derive(Deserialize)]
    struct Counts {
        prompt_eval_count: Option<Box<RawValue>>,
        eval_count: Option<Box<RawValue>>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Reply {
        message: ReplyMessage<Option<Box<RawValue>>>,
        done_reason: Option<String>,
        error: Option<String>,
    }
    let unusable = |e: String| Failure::UnusableUsage(format!("{P}: {e}"));
    let usage = match serde_json::from_slice::<Counts>(body) {
        Ok(c) => {
            let u = Usage {
                input_tokens: shared::usage_count(
                    "prompt_eval_count",
                    c.prompt_eval_count.as_deref().map(RawValue::get),
                )
                .map_err(unusable)?,
                output_tokens: shared::usage_count(
                    "eval_count",
                    c.eval_count.as_deref().map(RawValue::get),
                )
                .map_err(unusable)?,
                cached_input_tokens: 0,
            };
            shared::check_usage(&u).map_err(unusable)?;
            u
        }
        Err(_) => Usage::default(),
    };
    let served = |message: String| Failure::Served { message, usage };
    let r: Reply = serde_json::from_slice(body).map_err(|e| served(format!("{P}: decode: {e}")))?;
    if let Some(e) = r.error.filter(|e| !e.is_empty()) {
        return Err(served(format!("{P}: {}", shared::truncate(&e, 512))));
    }
    let mut uses = Vec::new();
    for (i, c) in r
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let args = c
            .function
            .arguments
            .as_deref()
            .map(|a| a.get().trim().to_string())
            .unwrap_or_default();
        let args = if args.is_empty() || args == "null" {
            "{}".to_string()
        } else {
            args
        };
        let object = if args.starts_with('{') {
            Ok(())
        } else {
            Err("not a JSON object".to_string())
        };
        uses.push(tool_use(P, i, c.id, c.function.name, &args, object).map_err(served)?);
    }
    let done = r.done_reason.unwrap_or_default();
    let stop = if done == "length" {
        uses.clear();
        "max_tokens".to_string()
    } else if !uses.is_empty() {
        "tool_use".into()
    } else if done == "stop" || done.is_empty() {
        "end_turn".into()
    } else {
        done
    };
    Ok(ChatResponse {
        text: r.message.content.unwrap_or_default(),
        tool_uses: uses,
        stop_reason: stop,
        usage,
        raw: Vec::new(),
    })
}

chat_model!(Ollama);

pub fn free(models: &[&str]) -> shared::PriceTable {
    shared::free(&models.iter().map(|m| name(m)).collect::<Vec<_>>())
}
