//! The request key (agentrt mcp 2.6): SHA-256 over the registered name, a zero byte and the
//! runtime's canonical JSON of the arguments. Arguments the boundary check refuses have no key.

use sha2::{Digest, Sha256};

use crate::runtime::json::checked_canonical_json;

/// `hex(SHA-256(name || 0x00 || CanonicalJSON(args)))`, or `None` when the arguments fail the
/// runtime's boundary check (they then match nothing and go straight to the gate).
pub fn request_key(name: &str, args: &[u8]) -> Option<String> {
    let canon = checked_canonical_json(args).ok()?;
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([0u8]);
    h.update(&canon);
    Some(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_by_literal() {
        let k = |a: &str| request_key("fs_write", a.as_bytes());
        assert_eq!(k(r#"{"a":1,"b":"x"}"#), k(r#" { "b" : "\u0078", "a":1 } "#));
        assert_ne!(k(r#"{"a":1}"#), k(r#"{"a":1.0}"#));
        assert_ne!(k(r#"{"a":1}"#), request_key("fs_other", br#"{"a":1}"#));
        assert_eq!(k(r#"{"a":1,"a":2}"#), None);
        assert_eq!(k("{\"a\":\"\\ud800\"}"), None);
        assert_eq!(k(r#"{"a":1} x"#), None);
    }
}
