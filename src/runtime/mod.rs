//! The embedded runtime: agentrt's run database and the guarantees that make decisions binding.

pub mod json;
pub mod policy;
pub mod schema;
pub mod tools;
pub mod types;

pub use json::{
    JsonError, canonical_json, check_json, checked_canonical_json, content_hash, event_hash,
    policy_json,
};
