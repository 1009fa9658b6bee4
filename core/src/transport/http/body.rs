//! Reading an answer's body within the size limits.

/// The largest response body baton accepts from Consul: 64 MiB (after
/// decompression).
///
/// The biggest answers baton asks for legitimately are a transaction of
/// Consul's maximum 64 operations that each read a value of Consul's default
/// maximum size (`kv_max_value_size`, 512 KiB), about 43 MiB as base64 in JSON,
/// and recursive listings of a prefix, which for the prefixes baton's recipes
/// use are far smaller. Anything bigger is not a sane answer for a lock
/// library to hold in memory: the call fails with [`ErrorKind::BadResponse`]
/// instead. One answer costs at most about this much memory while it is read
/// (plus what decoding it builds).
pub(crate) const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// The longest request URL that can be sent (the `http` crate's limit for a URI).
pub(super) const MAX_URL_BYTES: usize = u16::MAX as usize - 1;

/// Bytes of compressed (gzip) body read at most, so that a stream that inflates
/// to nothing cannot keep a call busy forever either.
pub(super) const MAX_COMPRESSED_BYTES: u64 = 2 * MAX_RESPONSE_BYTES as u64;

/// Capacity reserved up front for a body of unknown length.
pub(super) const INITIAL_BODY_CAPACITY: usize = 8 * 1024;

/// The message of an answer over [`MAX_RESPONSE_BYTES`].
pub(super) fn too_large_message() -> String {
    format!(
        "response body exceeds the {} MiB limit for Consul answers",
        MAX_RESPONSE_BYTES / (1024 * 1024)
    )
}

/// Reads a whole response body of at most [`MAX_RESPONSE_BYTES`] decoded bytes.
///
/// ureq's own limit counts the bytes on the wire, before gzip decoding (which
/// ureq asks for), so it cannot bound the memory of a small body that inflates
/// to gigabytes; and its buffer doubles, so it can hold twice the limit. This
/// counts decoded bytes, refuses an announced `Content-Length` over the cap
/// before reading, reserves exactly an announced length, and otherwise grows
/// its buffer by doubling up to the cap and never beyond.
pub(super) fn read_body(body: &mut ureq::Body) -> std::result::Result<Vec<u8>, ureq::Error> {
    use std::io::Read as _;
    let cap = MAX_RESPONSE_BYTES;
    let announced = body.content_length();
    if announced.is_some_and(|n| n > cap as u64) {
        return Err(ureq::Error::BodyExceedsLimit(cap as u64));
    }
    let mut reader = body.with_config().limit(MAX_COMPRESSED_BYTES).reader();
    let mut buf: Vec<u8> = Vec::with_capacity(match announced {
        Some(n) => n as usize,
        None => INITIAL_BODY_CAPACITY,
    });
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return Ok(buf),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // The connection broke in the middle of the body: say how much came (it
            // stays a connection failure, worth another try, not a bad answer).
            Err(e) => {
                return Err(match ureq::Error::from(e) {
                    ureq::Error::Io(io) => ureq::Error::Io(std::io::Error::new(
                        io.kind(),
                        format!(
                            "the answer was cut off after {}{} bytes: {io}",
                            buf.len(),
                            announced.map_or(String::new(), |n| format!(" of {n}"))
                        ),
                    )),
                    other => other,
                })
            }
        };
        if n > cap - buf.len() {
            return Err(ureq::Error::BodyExceedsLimit(cap as u64));
        }
        if n > buf.capacity() - buf.len() {
            let target = (buf.capacity() * 2).max(buf.len() + n).min(cap);
            buf.reserve_exact(target - buf.len());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
