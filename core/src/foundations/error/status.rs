//! What an HTTP status and Consul's text mean: the kind, and whether it goes away by itself.

use super::kind::ErrorKind;

/// Maps an HTTP status and Consul's text onto a kind.
pub(crate) fn classify_status(status: u16, text: &str) -> ErrorKind {
    match status {
        403 => ErrorKind::PermissionDenied,
        404 => ErrorKind::NotFound,
        400 | 405 | 413 | 431 => ErrorKind::InvalidArgument,
        409 => ErrorKind::Conflict,
        500 if text.contains("invalid session") => ErrorKind::SessionInvalidated,
        500 if text.contains("Permission denied") || text.contains("ACL not found") => {
            ErrorKind::PermissionDenied
        }
        500 if text.starts_with("Invalid Session TTL")
            || (text.starts_with("Session TTL") && text.contains("invalid"))
            || text.starts_with("Invalid Behavior setting")
            || text.contains("missing session")
            || text.contains("strconv.ParseUint") =>
        {
            ErrorKind::InvalidArgument
        }
        _ => ErrorKind::Server,
    }
}

/// Texts of Consul's 500 answers that mean "not now" rather than "not so": the
/// errors of a cluster without a usable raft leader (Consul's
/// `agent/structs/errors.go`, the RPC pool's `rpc error getting client` /
/// `rpc error making call` wrappers around connection failures, and the
/// errors `hashicorp/raft` gives for a write cut by a leadership change), and
/// its rate limits. A forwarded error keeps the server's text after Consul's
/// `rpc error making call: ` prefix, so the texts are matched anywhere.
pub(crate) const TRANSIENT_500_TEXTS: &[&str] = &[
    "No cluster leader",
    "Raft leader not found",
    "No known Consul servers",
    "Not ready to serve consistent reads",
    "RPC rate limit exceeded",
    "Rate limit reached",
    "rpc error getting client",
    "failed to get conn",
    "connection refused",
    "connection reset",
    "broken pipe",
    "i/o timeout",
    "use of closed network connection",
    "rpc error making call: EOF",
    "leadership lost while committing log",
    "node is not the leader",
    "leadership transfer in progress",
    "raft is already shutdown",
    "timed out enqueuing operation",
];

/// Whether a non-success status with Consul's `text` means "try again later".
pub(crate) fn transient_status(status: u16, text: &str) -> bool {
    match status {
        429 | 502 | 503 | 504 => true,
        500 => TRANSIENT_500_TEXTS.iter().any(|t| text.contains(t)),
        _ => false,
    }
}
