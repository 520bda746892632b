//! The Anthropic adapter: `POST <base>/v1/messages` (spec §7), spoken directly over the shared
//! client (no SDK: so no SDK environment chain, no SDK retries, and no SDK error value that
//! holds the outbound request and its key).

use std::sync::Arc;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use super::Secret;
use super::http::{self, Header};
use super::openai::{chat_model, join};
use super::shared::{self, Failure, PriceTable};
use super::wire::{ChatRequest, ChatResponse, ContentBlock, ToolUse};
use crate::runtime::json::gojson::Object;
use crate::runtime::model::{Price, Usage};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/";
pub const DEFAULT_MAX_TOKENS: i64 = 4096;
pub const DEFAULT_RAW_ASSISTANT_BLOCK: &str = "anthropic.raw_assistant";
/// The `anthropic-version` header sent.
pub const API_VERSION: &str = "2023-06-01";
/// A non-streaming request whose cap implies more than ten minutes of output (an hour per
/// 128 000 tokens) is refused by the API's SDKs; it is refused here before anything is sent.
pub const MAX_NON_STREAMING_TOKENS: i64 = 21_333;
const P: &str = "anthropic";

#[derive(Clone, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Config {
    pub model: String,
    /// Default `anthropic:<model>`, which must be in [`prices`]; set it to price it yourself.
    pub name: String,
    #[serde(rename = "APIKey")]
    pub api_key: Secret,
    #[serde(rename = "BaseURL")]
    pub base_url: String,
    pub effort: String,
    /// 0: 4096.
    pub max_tokens: i64,
    /// 0: `anthropic.raw_assistant`.
    pub raw_assistant_block: String,
}

super::keyed_config_debug!(Config, P);

pub fn name(model: &str) -> String {
    format!("anthropic:{model}")
}

/// USD micros per million tokens (dated 2026-09-29), keyed `anthropic:<model>`.
pub fn prices() -> PriceTable {
    let p = |i: i64, o: i64, c: i64| Price {
        input: i,
        output: o,
        cached_input: c,
    };
    [
        ("claude-fable-5-1", p(10_000_000, 50_000_000, 250_000)),
        ("claude-mythos-5-1", p(10_000_000, 50_000_000, 250_000)),
        ("claude-fable-5", p(10_000_000, 50_000_000, 1_000_000)),
        ("claude-mythos-5", p(10_000_000, 50_000_000, 1_000_000)),
        ("claude-opus-5-5", p(4_000_000, 20_000_000, 200_000)),
        ("claude-opus-5", p(5_000_000, 25_000_000, 500_000)),
        ("claude-opus-4-8", p(5_000_000, 25_000_000, 500_000)),
        ("claude-opus-4-7", p(5_000_000, 25_000_000, 500_000)),
        ("claude-opus-4-6", p(5_000_000, 25_000_000, 500_000)),
        ("claude-sonnet-5", p(2_000_000, 10_000_000, 200_000)),
        ("claude-sonnet-4-6", p(3_000_000, 15_000_000, 300_000)),
        ("claude-haiku-4-5", p(1_000_000, 5_000_000, 100_000)),
    ]
    .into_iter()
    .map(|(m, p)| (name(m), p))
    .collect()
}

struct Inner {
    cfg: Config,
    name: String,
    url: String,
    key: Secret,
    max_tokens: i64,
    raw_block: String,
    client: reqwest::Client,
}

#[derive(Clone)]
pub struct Anthropic {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "anthropic.Model{{Name:{:?} Config:{:?}}}",
            self.inner.name, self.inner.cfg
        )
    }
}

super::display_as_debug!(Anthropic);
super::serialize_as_debug!(Anthropic);

fn cap_fits(model: &str, n: i64) -> Result<(), String> {
    if n > MAX_NON_STREAMING_TOKENS {
        return Err(format!(
            "anthropic: max_tokens {n} is too large for a non-streaming request to {model}: the expected time exceeds 10 minutes"
        ));
    }
    Ok(())
}

impl Anthropic {
    /// Builds the adapter; the key is the config's, else `ANTHROPIC_API_KEY` (nothing else
    /// is read from the environment).
    pub fn new(cfg: Config) -> Result<Anthropic, String> {
        Anthropic::new_with_env(cfg, &|k| std::env::var(k).ok())
    }

    pub fn new_with_env(
        mut cfg: Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Anthropic, String> {
        shared::require_model(P, &cfg.model)?;
        let n = if cfg.name.is_empty() {
            let n = name(&cfg.model);
            if !prices().contains_key(&n) {
                return Err(format!(
                    "anthropic: {n}: no price for this model; set Config.Name to price it yourself"
                ));
            }
            n
        } else {
            cfg.name.clone()
        };
        let max_tokens = if cfg.max_tokens > 0 {
            cfg.max_tokens
        } else {
            DEFAULT_MAX_TOKENS
        };
        cap_fits(&cfg.model, max_tokens)?;
        let mut key = cfg.api_key.clone();
        if key.is_empty()
            && let Some(k) = env("ANTHROPIC_API_KEY").filter(|k| !k.is_empty())
        {
            key = Secret::new(k);
        }
        if key.is_empty() {
            return Err("anthropic: no API key: set Config.APIKey or ANTHROPIC_API_KEY".into());
        }
        let base = if cfg.base_url.is_empty() {
            DEFAULT_BASE_URL.to_string()
        } else {
            cfg.base_url.clone()
        };
        let ep = shared::check_endpoint(P, &base, true)?;
        let loopback = (ep.scheme == "http").then_some(ep.authority.as_str());
        let client = http::client(loopback)?;
        let raw_block = if cfg.raw_assistant_block.is_empty() {
            DEFAULT_RAW_ASSISTANT_BLOCK.to_string()
        } else {
            cfg.raw_assistant_block.clone()
        };
        // The kept config holds no key: only the adapter's opaque secret does.
        cfg.api_key = Secret::default();
        Ok(Anthropic {
            inner: Arc::new(Inner {
                url: format!("{}/v1/messages", base.trim_end_matches('/')),
                cfg,
                name: n,
                key,
                max_tokens,
                raw_block,
                client,
            }),
        })
    }

    /// The block type a consumer uses to hand back a whole assistant message.
    pub fn raw_assistant_block(&self) -> &str {
        &self.inner.raw_block
    }

    pub fn body(&self, req: &ChatRequest) -> Result<Vec<u8>, String> {
        let max = if req.max_output_tokens > 0 {
            req.max_output_tokens
        } else {
            self.inner.max_tokens
        };
        cap_fits(&self.inner.cfg.model, max)?;
        let mut o = Object::new();
        o.str("model", &self.inner.cfg.model).int("max_tokens", max);
        if !req.system.is_empty() {
            let b = Object::new()
                .str("type", "text")
                .str("text", &req.system)
                .finish();
            o.encoded("system", &join(&[b]));
        }
        let mut msgs = Vec::new();
        for m in &req.messages {
            msgs.push(self.message(m)?);
        }
        o.encoded("messages", &join(&msgs));
        if !req.tools.is_empty() {
            let mut tools = Vec::new();
            for t in &req.tools {
                let schema = input_schema(&t.input_schema)
                    .map_err(|e| format!("anthropic: tool {}: schema: {e}", t.name))?;
                tools.push(
                    Object::new()
                        .str("name", &t.name)
                        .str("description", &t.description)
                        .encoded("input_schema", &schema)
                        .finish(),
                );
            }
            o.encoded("tools", &join(&tools));
            let choice = Object::new()
                .str("type", "auto")
                .bool("disable_parallel_tool_use", true)
                .finish();
            o.encoded("tool_choice", &choice);
        }
        if !self.inner.cfg.effort.is_empty() {
            let e = Object::new().str("effort", &self.inner.cfg.effort).finish();
            o.encoded("output_config", &e);
        }
        Ok(o.finish())
    }

    fn message(&self, m: &super::wire::Message) -> Result<Vec<u8>, String> {
        let role = if m.role == "assistant" {
            "assistant"
        } else {
            "user"
        };
        if role == "assistant" && m.content.len() == 1 && m.content[0].kind == self.inner.raw_block
        {
            #[derive(Deserialize)]
            struct Raw {
                content: Box<RawValue>,
            }
            let r: Raw = serde_json::from_str(&m.content[0].text)
                .map_err(|e| format!("anthropic: raw assistant turn: {e}"))?;
            let mut o = Object::new();
            o.str("role", "assistant")
                .raw("content", r.content.get().as_bytes())
                .map_err(|e| format!("anthropic: raw assistant turn: {e}"))?;
            return Ok(o.finish());
        }
        let mut blocks = Vec::new();
        for b in &m.content {
            blocks.push(match b.kind.as_str() {
                "text" if b.text.trim().is_empty() => continue,
                "text" => Object::new()
                    .str("type", "text")
                    .str("text", &b.text)
                    .finish(),
                "tool_use" => {
                    let mut o = Object::new();
                    o.str("type", "tool_use")
                        .str("id", &b.tool_use_id)
                        .str("name", &b.name);
                    if b.input.is_empty() {
                        o.encoded("input", b"{}");
                    } else {
                        o.raw("input", &b.input).map_err(|_| {
                            format!("anthropic: tool use {}: input is not JSON", b.name)
                        })?;
                    }
                    o.finish()
                }
                "tool_result" => Object::new()
                    .str("type", "tool_result")
                    .str("tool_use_id", &b.tool_use_id)
                    .str("content", &b.content)
                    .bool("is_error", b.is_error)
                    .finish(),
                other => {
                    return Err(format!(
                        "anthropic: unsupported content block type {}",
                        crate::runtime::json::go_quote(other)
                    ));
                }
            });
        }
        if blocks.is_empty() {
            blocks.push(block_text("(no output)"));
        }
        Ok(Object::new()
            .str("role", role)
            .encoded("content", &join(&blocks))
            .finish())
    }

    async fn generate_chat(&self, req: ChatRequest) -> Result<ChatResponse, Failure> {
        let body = self.body(&req).map_err(Failure::Permanent)?;
        let headers = [
            Header::Secret("x-api-key", &self.inner.key, ""),
            Header::Plain("anthropic-version", API_VERSION),
        ];
        http::post(P, &self.inner.client, &self.inner.url, &headers, body)
            .await?
            .read(P, parse_reply)
    }
}

fn block_text(t: &str) -> Vec<u8> {
    let b = ContentBlock::text(t);
    Object::new()
        .str("type", "text")
        .str("text", &b.text)
        .finish()
}

/// A JSON object's members as written (values byte for byte, order kept).
fn raw_object(bytes: &[u8]) -> Result<Vec<(String, Box<RawValue>)>, String> {
    struct Members(Vec<(String, Box<RawValue>)>);
    impl<'de> Deserialize<'de> for Members {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Members;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Members, A::Error> {
                    let mut out = Vec::new();
                    while let Some((k, v)) = m.next_entry::<String, Box<RawValue>>()? {
                        out.push((k, v));
                    }
                    Ok(Members(out))
                }
            }
            d.deserialize_map(V)
        }
    }
    serde_json::from_slice::<Members>(bytes)
        .map(|m| m.0)
        .map_err(|e| e.to_string())
}

/// The tool's `input_schema`: `type: object`, `properties` (default `{}`), `required` (its
/// string items), every other top-level keyword copied as written.
fn input_schema(schema: &[u8]) -> Result<Vec<u8>, String> {
    let members = if schema.is_empty() {
        Vec::new()
    } else {
        raw_object(schema)?
    };
    let mut o = Object::new();
    o.str("type", "object");
    let props = members.iter().find(|(k, _)| k == "properties");
    match props {
        Some((_, v)) => {
            o.raw("properties", v.get().as_bytes())
                .map_err(|e| e.to_string())?;
        }
        None => {
            o.encoded("properties", b"{}");
        }
    }
    if let Some((_, v)) = members.iter().find(|(k, _)| k == "required") {
        let items: Vec<serde_json::Value> = serde_json::from_str(v.get()).unwrap_or_default();
        let names: Vec<Vec<u8>> = items
            .iter()
            .filter_map(|i| i.as_str())
            .map(|s| {
                let mut b = Vec::new();
                crate::runtime::json::gojson::write_string(&mut b, s);
                b
            })
            .collect();
        o.encoded("required", &join(&names));
    }
    for (k, v) in &members {
        if k == "type" || k == "properties" || k == "required" {
            continue;
        }
        o.raw(k, v.get().as_bytes()).map_err(|e| e.to_string())?;
    }
    Ok(o.finish())
}

/// Cache writes have no counter of their own: they are charged as input at their billing
/// multiple (1.25 for five minutes or undivided, 2 for one hour); reads are cached input.
fn fold_usage(body: &[u8]) -> Result<Usage, Failure> {
    #[derive(Deserialize)]
    struct Creation {
        ephemeral_1h_input_tokens: Option<Box<RawValue>>,
    }
    #[derive(Deserialize)]
    struct U {
        input_tokens: Option<Box<RawValue>>,
        output_tokens: Option<Box<RawValue>>,
        cache_read_input_tokens: Option<Box<RawValue>>,
        cache_creation_input_tokens: Option<Box<RawValue>>,
        cache_creation: Option<Creation>,
    }
    #[derive(Deserialize)]
    struct Only {
        usage: Option<U>,
    }
    let unusable = |e: String| Failure::UnusableUsage(format!("{P}: {e}"));
    let Ok(Only { usage: Some(u) }) = serde_json::from_slice::<Only>(body) else {
        return Ok(Usage::default());
    };
    fn r(v: &Option<Box<RawValue>>) -> Option<&str> {
        v.as_deref().map(RawValue::get)
    }
    let input = shared::usage_count("usage.input_tokens", r(&u.input_tokens)).map_err(unusable)?;
    let output =
        shared::usage_count("usage.output_tokens", r(&u.output_tokens)).map_err(unusable)?;
    let read = shared::usage_count(
        "usage.cache_read_input_tokens",
        r(&u.cache_read_input_tokens),
    )
    .map_err(unusable)?;
    let written = shared::usage_count(
        "usage.cache_creation_input_tokens",
        r(&u.cache_creation_input_tokens),
    )
    .map_err(unusable)?;
    let hour = shared::usage_count(
        "usage.cache_creation.ephemeral_1h_input_tokens",
        u.cache_creation
            .as_ref()
            .and_then(|c| r(&c.ephemeral_1h_input_tokens)),
    )
    .map_err(unusable)?;
    let short = (written - hour).max(0) as i128;
    let total = input as i128 + read as i128 + (short * 5 + 3) / 4 + 2 * hour as i128;
    let input = i64::try_from(total)
        .map_err(|_| unusable(format!("{}: input tokens overflow", shared::UNUSABLE_USAGE)))?;
    let usage = Usage {
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: read,
    };
    shared::check_usage(&usage).map_err(unusable)?;
    Ok(usage)
}

pub fn parse_reply(body: &[u8]) -> Result<ChatResponse, Failure> {
    shared::read_as_go(body, read_reply)
}

/// [`parse_reply`] on the body as Go's decoder reads it; the bytes received are the caller's.
fn read_reply(body: &[u8]) -> Result<ChatResponse, Failure> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Block {
        #[serde(rename = "type")]
        kind: String,
        text: String,
        id: String,
        name: String,
        input: Option<Box<RawValue>>,
    }
    #[derive(Deserialize)]
    struct Reply {
        content: Vec<Block>,
        #[serde(default)]
        stop_reason: Option<String>,
    }
    let usage = fold_usage(body)?;
    let r: Reply = serde_json::from_slice(body).map_err(|e| Failure::Served {
        message: format!("{P}: decode: {e}"),
        usage,
    })?;
    let mut texts = Vec::new();
    let mut uses = Vec::new();
    for b in r.content {
        match b.kind.as_str() {
            "text" if !b.text.is_empty() => texts.push(b.text),
            "tool_use" => uses.push(ToolUse {
                id: b.id,
                name: b.name,
                args: match super::wire::raw_bytes(b.input) {
                    a if a.is_empty() => b"{}".to_vec(),
                    a => a,
                },
            }),
            _ => {}
        }
    }
    let stop = r.stop_reason.unwrap_or_default();
    if stop == "max_tokens" || stop == "refusal" {
        uses.clear();
    }
    Ok(ChatResponse {
        text: texts.join("\n"),
        tool_uses: uses,
        stop_reason: stop,
        usage,
        raw: Vec::new(),
    })
}

chat_model!(Anthropic);
