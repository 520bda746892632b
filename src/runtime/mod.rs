//! The embedded runtime: agentrt's run database and the guarantees that make decisions binding.

pub mod agent;
pub mod clock;
pub mod driver;
pub mod json;
pub mod model;
pub mod operator;
pub mod policy;
pub mod schema;
pub mod store;
pub mod tools;
pub mod types;

pub use json::{
    JsonError, approval_hash, canonical_json, check_json, checked_canonical_json, content_hash,
    event_hash, policy_form_unchecked, policy_json, sha256_hex, tool_spec_hash, try_canonical,
};
