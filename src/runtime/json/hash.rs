//! The hashes (spec 4.2, 5.3): content, approval, tool spec and event chain.

use sha2::{Digest, Sha256};

use super::JsonError;
use super::canonical_json;
use super::gojson::Object;

/// Hex SHA-256 of some bytes.
pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The event-chain hash: SHA-256 over the netstrings of the seven fields.
pub(super) fn event_hash(fields: [&[u8]; 7]) -> String {
    let mut h = Sha256::new();
    for f in fields {
        h.update(f.len().to_string().as_bytes());
        h.update(b":");
        h.update(f);
        h.update(b",");
    }
    hex::encode(h.finalize())
}

/// The approval hash (spec 4.2): the Go JSON of the map `{capability, kind, presentation,
/// request}` (Go sorts map keys; an empty capability or presentation is `{}`), canonicalised,
/// hashed. An encoding error (a raw part that is not valid JSON) is an error, never a stand-in.
pub(super) fn approval_hash(
    kind: &str,
    capability: &[u8],
    presentation: &[u8],
    request_go_json: &[u8],
) -> Result<String, JsonError> {
    let or_empty = |b: &'_ [u8]| -> Vec<u8> {
        if b.is_empty() {
            b"{}".to_vec()
        } else {
            b.to_vec()
        }
    };
    let mut m = Object::new();
    m.raw("capability", &or_empty(capability))?;
    m.str("kind", kind);
    m.raw("presentation", &or_empty(presentation))?;
    m.raw("request", request_go_json)?;
    Ok(sha256_hex(&canonical_json(&m.finish())))
}
