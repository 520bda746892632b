//! The embedded runtime: agentrt's run database and the guarantees that make decisions binding.

#![warn(missing_docs)]

/// An item public only with the `testing` feature (which only the crate's own tests and
/// benches enable, through its dev-dependency on itself), crate-private otherwise: raw
/// connection access and test hooks that would let a consumer around compare-and-set and the
/// hash chain.
macro_rules! testing_pub {
    ($(#[$m:meta])* fn $($rest:tt)*) => {
        #[cfg(feature = "testing")]
        $(#[$m])* pub fn $($rest)*
        #[cfg(not(feature = "testing"))]
        $(#[$m])* #[allow(dead_code)] pub(crate) fn $($rest)*
    };
}

/// `From<String>` and `From<&str>` into a consumer-facing error's `Message` arm, so a
/// consumer's own errors go in with `?` or `.into()`.
macro_rules! from_message {
    ($($name:ident),*) => {$(
        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name::Message(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name::Message(s.to_string())
            }
        }
    )*};
}

pub mod agent;
pub mod clock;
pub mod driver;
pub mod json;
pub mod model;
pub mod operator;
pub mod policy;
pub mod schema;
pub mod stats;
pub mod store;
pub mod tools;
pub mod types;

pub use json::{
    JsonError, approval_hash, canonical_json, check_json, checked_canonical_json, content_hash,
    event_hash, policy_form_unchecked, policy_json, sha256_hex, tool_spec_hash, try_canonical,
};
