//! countersign: a terminal review console for AI agents that take real actions, with the
//! agentrt-compatible runtime that makes its decisions binding embedded in it.
//!
//! The parts, one module each:
//! - [`runtime`]: the run database (store), canonical JSON and hashes, tools, policy, the step
//!   loop, approvals, leases, cancel and resume. It never depends on the console.
//! - [`safetext`]: the one place untrusted text becomes something a terminal may show.
//! - [`commands`]: the operator commands (`runs`, `show`, `approve`, ...).
//! - [`console`]: the interactive review console (TUI).
//! - [`consumer`]: the built-in example consumer, an order-support assistant, and the demo.
//! - [`providers`]: real models (OpenAI-compatible, Anthropic, Ollama), the render layer from
//!   steps to a conversation and from a reply to a decision, and replay. Beside the runtime,
//!   which never needs HTTP.

pub mod commands;
pub mod console;
pub mod consumer;
pub mod providers;
pub mod runtime;
pub mod safetext;
