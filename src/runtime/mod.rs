//! The embedded runtime: agentrt's run database and the guarantees that make decisions binding.

pub mod json;
pub mod operator;
pub mod store;
pub mod types;

pub use json::{
    JsonError, approval_hash, canonical_json, check_json, checked_canonical_json, content_hash,
    event_hash, policy_form_unchecked, policy_json, sha256_hex, tool_spec_hash, try_canonical,
};
