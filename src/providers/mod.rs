//! Real models: adapters for an OpenAI-compatible chat completions API, Anthropic's Messages
//! API and Ollama, each implementing the runtime's [`crate::runtime::model::Model`]; the render
//! layer that turns a run's steps into a conversation and a reply into a decision; and the
//! replay recorder (agentrt-providers spec).
//!
//! This module sits beside the runtime, not inside it: the runtime's store, driver and
//! accounting never need HTTP, and the HTTP half (`http`, the adapters) builds only with the
//! `providers` feature. The conversation types, the endpoint and key rules, render and replay
//! need no network and are always built.

/// `Display` for each type as its `Debug` (which shows a key only as [`Secret`] does).
#[cfg(feature = "providers")]
macro_rules! display_as_debug {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(self, f)
            }
        }
    )*};
}
#[cfg(feature = "providers")]
pub(crate) use display_as_debug;

/// Each type encodes as the string of its `Debug` (which shows a key only as [`Secret`] does).
#[cfg(feature = "providers")]
macro_rules! serialize_as_debug {
    ($($t:ty),*) => {$(
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&format!("{self:?}"))
            }
        }
    )*};
}
#[cfg(feature = "providers")]
pub(crate) use serialize_as_debug;

/// `Debug` for a keyed adapter's `Config` as its Go client prints it,
/// `<provider>.Config{Model:… Name:… BaseURL:… APIKey:…}` (the key as [`Secret`] shows it),
/// and `Display` the same.
#[cfg(feature = "providers")]
macro_rules! keyed_config_debug {
    ($t:ty, $provider:expr) => {
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(
                    f,
                    "{}.Config{{Model:{:?} Name:{:?} BaseURL:{:?} APIKey:{}}}",
                    $provider, self.model, self.name, self.base_url, self.api_key
                )
            }
        }
        crate::providers::display_as_debug!($t);
    };
}
#[cfg(feature = "providers")]
pub(crate) use keyed_config_debug;

pub mod agent;
pub mod render;
pub mod replay;
pub mod shared;
pub mod wire;

#[cfg(feature = "providers")]
pub mod anthropic;
#[cfg(feature = "providers")]
pub mod dns;
#[cfg(feature = "providers")]
pub mod http;
#[cfg(feature = "providers")]
pub mod ollama;
#[cfg(feature = "providers")]
pub mod openai;

pub use shared::Failure;
pub use wire::{ChatRequest, ChatResponse, ContentBlock, Message, ToolUse};

/// An API key. It prints, encodes and logs as `[redacted]` (`""` when empty) in every form;
/// only [`Secret::expose`] gives the text, and only the adapters call it, to build a header.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    fn shown(&self) -> &'static str {
        if self.0.is_empty() {
            "\"\""
        } else {
            "[redacted]"
        }
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.shown())
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.shown())
    }
}

impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if self.0.is_empty() { "" } else { "[redacted]" })
    }
}
