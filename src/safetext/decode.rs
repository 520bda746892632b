//! The reverse of escaping: escaped text back to the original bytes.

/// Why escaped text could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A backslash not followed by a valid escape.
    #[error(
        "the escaped text has an invalid escape at byte {0}; it was not made by countersign's escaper or was altered"
    )]
    BadEscape(usize),
    /// The value was cut (width or dropped combining marks), so it cannot be decoded.
    #[error(
        "the value was cut for display, so its original bytes cannot be recovered from it; escape it without cutting"
    )]
    Cut,
}

/// Decodes escaped text (one-line or multi-line form, readable or strict) back to the original
/// bytes. Defined for text that was not cut: a cut marker's text would decode as literal text.
pub fn decode(escaped: &str) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(escaped.len());
    decode_into(escaped, &mut out)?;
    Ok(out)
}

pub(crate) fn decode_into(escaped: &str, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let bytes = escaped.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let Some(rel) = bytes[i..].iter().position(|&b| b == b'\\') else {
            out.extend_from_slice(&bytes[i..]);
            break;
        };
        out.extend_from_slice(&bytes[i..i + rel]);
        let at = i + rel;
        let bad = DecodeError::BadEscape(at);
        let next = *bytes.get(at + 1).ok_or(bad.clone())?;
        i = at + 2;
        match next {
            b'\\' => out.push(b'\\'),
            b'"' => out.push(b'"'),
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'x' => {
                let hex = bytes.get(at + 2..at + 4).ok_or(bad.clone())?;
                let value = parse_hex(hex).ok_or(bad.clone())?;
                // \xNN is a byte: always < 0x100 with two digits.
                out.push(value as u8);
                i = at + 4;
            }
            b'u' => {
                if bytes.get(at + 2) != Some(&b'{') {
                    return Err(bad);
                }
                let close = bytes[at + 3..]
                    .iter()
                    .take(7)
                    .position(|&b| b == b'}')
                    .ok_or(bad.clone())?;
                let hex = &bytes[at + 3..at + 3 + close];
                if hex.is_empty() {
                    return Err(bad);
                }
                let c = parse_hex(hex).and_then(char::from_u32).ok_or(bad)?;
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                i = at + 3 + close + 1;
            }
            _ => return Err(bad),
        }
    }
    Ok(())
}

fn parse_hex(hex: &[u8]) -> Option<u32> {
    if hex.is_empty() || hex.len() > 6 {
        return None;
    }
    let mut value = 0u32;
    for &b in hex {
        let digit = (b as char).to_digit(16)?;
        value = value * 16 + digit;
    }
    Some(value)
}
