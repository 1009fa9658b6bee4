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

/// The message of an answer over [`MAX_RESPONSE_BYTES`].
pub(super) fn too_large_message() -> String {
    format!(
        "response body exceeds the {} MiB limit for Consul answers",
        MAX_RESPONSE_BYTES / (1024 * 1024)
    )
}
