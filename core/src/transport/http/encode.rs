//! Percent-encoding of keys, path segments and query components.

/// Percent-encodes a KV key for the URL path: everything but unreserved
/// characters and `/` (so `?`, `#`, `%`, space and `%2F` survive, hashicorp/consul#1409).
pub fn encode_key(key: &str) -> String {
    encode(key, true)
}

/// Percent-encodes one query or path component.
pub(crate) fn encode_component(s: &str) -> String {
    encode(s, false)
}

pub(super) fn encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        let keep = b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_' | b'~')
            || (keep_slash && b == b'/');
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
