//! countersign: a terminal review console for AI agents that take real actions, with the
//! agentrt-compatible runtime that makes its decisions binding embedded in it.
//!
//! # Module map
//!
//! - [`runtime`]: the run database and the guarantees that make decisions binding. It never
//!   depends on the console or the commands.
//!   - [`runtime::store`]: the SQLite run database (agentrt's format): reads, pages, the event
//!     hash chain, leases; every write one transaction that compare-and-sets.
//!   - [`runtime::driver`]: the step loop ([`Driver::start`](runtime::driver::Driver::start),
//!     [`Driver::resume`](runtime::driver::Driver::resume), `cancel`) and the
//!     [`Gate`](runtime::driver::Gate) (`begin`/`attach`, then a `Session`'s `step`, `propose`,
//!     `execute`) for a loop the caller owns.
//!   - [`runtime::operator`]: what a reviewer does:
//!     [`approve_shown`](runtime::operator::approve_shown)/`reject_shown` (bound to the
//!     hash they were shown), `approve`/`reject`, `cancel`, `expire`, `pending_approval`.
//!   - [`runtime::tools`], [`runtime::policy`], [`runtime::agent`], [`runtime::model`]: what
//!     a consumer registers (tools and their side-effect class, a policy, an agent, a model
//!     with its limits).
//!   - [`runtime::json`], [`runtime::types`], [`runtime::schema`], [`runtime::clock`]:
//!     canonical JSON and hashes, the stored records, the schema, clocks.
//! - `mcp` (feature `mcp`): MCP servers' tools behind operator rules and pins, and the
//!   configuration of `countersign mcp-proxy` (agentrt's format). Beside the runtime.
//! - [`safetext`]: the one place an untrusted string becomes something a terminal may show.
//! - [`consumer`]: the built-in example consumer (an order-support assistant) and the demo.
//! - `console` (feature `console`): the interactive review console (ratatui).
//! - `commands` (feature `cli`): the operator commands (`runs`, `show`, `approve`, ...) behind
//!   the `countersign` binary.
//! - [`providers`]: real models (OpenAI-compatible, Anthropic, Ollama), the render layer from
//!   steps to a conversation and from a reply to a decision, and replay. Beside the runtime,
//!   which never needs HTTP; the HTTP half is feature `providers`.
//!
//! # Features
//!
//! - `console` (default): the review console; brings ratatui, crossterm and toml.
//! - `cli` (default): the commands and the binary; brings clap, and needs `console`.
//! - `providers` (default): the HTTP adapters and `countersign agent`; brings reqwest, rustls
//!   and hyper.
//! - `mcp` (default): the MCP proxy and its pins and rules (`countersign mcp-proxy`); brings
//!   reqwest and rustls.
//! - `postgres` (default): PostgreSQL as a second store (`pgstore`); brings the `postgres`
//!   client and its rustls TLS.
//!
//! With `default-features = false` the crate is the runtime, safe text, the example consumer
//! and the providers' render and replay layer (no HTTP), without any terminal UI, argument
//! parser, network client or PostgreSQL.
//!
//! # Examples
//!
//! `examples/embed_driver.rs` registers a tool and a policy, starts a run that pauses for an
//! approval, approves it with `operator::approve_shown` and resumes it. `examples/gate.rs` is a
//! loop the caller owns, through the Gate. `examples/custom_console.rs` (feature `console`)
//! opens the console with the caller's own toolkit as its resume hook. All three run under
//! `cargo test`.

#[macro_use]
mod forward;
#[cfg(feature = "cli")]
pub mod commands;
#[cfg(feature = "console")]
pub mod console;
pub mod consumer;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "postgres")]
pub mod pgstore;
pub mod providers;
pub mod runtime;
// Every public item of safe text is documented, and stays so. `runtime` warns too (its own
// `#![warn(missing_docs)]`), with no submodule exempt.
#[warn(missing_docs)]
pub mod safetext;
