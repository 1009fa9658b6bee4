//! The one error type of the crate, and its stable kinds and codes.

use std::fmt;

/// What went wrong, in a form that stays stable across releases.
///
/// The C, Python and Node layers map these 1:1 (see [`ErrorKind::code`]).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The server could not be reached, or the connection broke.
    Connection,
    /// The call's deadline passed before it finished.
    Timeout,
    /// The call was cancelled through a [`CancelToken`](crate::CancelToken).
    Cancelled,
    /// Consul answered 403 (ACL denial or unknown token).
    PermissionDenied,
    /// The thing asked for does not exist (e.g. renew of an unknown session).
    NotFound,
    /// The request was rejected as malformed, or the configuration is invalid.
    InvalidArgument,
    /// A transaction failed (409), or a key is in use in an incompatible way.
    Conflict,
    /// The session is gone: destroyed, expired, or invalidated by a failed check.
    SessionInvalidated,
    /// Consul answered with another error status; see [`Error::status`] and
    /// [`Error::server_text`].
    Server,
    /// Consul's answer could not be understood.
    BadResponse,
    /// The client was closed, or is used in a process forked from the one that made it.
    Closed,
}

impl ErrorKind {
    /// The stable code string for this kind, e.g. `"BATON_TIMEOUT"`.
    ///
    /// Bindings expose the same string (`err.code` in Python and Node,
    /// `baton_result_name` in C).
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::Connection => "BATON_CONNECTION",
            ErrorKind::Timeout => "BATON_TIMEOUT",
            ErrorKind::Cancelled => "BATON_CANCELLED",
            ErrorKind::PermissionDenied => "BATON_PERMISSION_DENIED",
            ErrorKind::NotFound => "BATON_NOT_FOUND",
            ErrorKind::InvalidArgument => "BATON_INVALID_ARGUMENT",
            ErrorKind::Conflict => "BATON_CONFLICT",
            ErrorKind::SessionInvalidated => "BATON_SESSION_INVALIDATED",
            ErrorKind::Server => "BATON_SERVER",
            ErrorKind::BadResponse => "BATON_BAD_RESPONSE",
            ErrorKind::Closed => "BATON_CLOSED",
        }
    }

    /// Every kind, in a fixed order (for bindings that build tables).
    pub const ALL: [ErrorKind; 11] = [
        ErrorKind::Connection,
        ErrorKind::Timeout,
        ErrorKind::Cancelled,
        ErrorKind::PermissionDenied,
        ErrorKind::NotFound,
        ErrorKind::InvalidArgument,
        ErrorKind::Conflict,
        ErrorKind::SessionInvalidated,
        ErrorKind::Server,
        ErrorKind::BadResponse,
        ErrorKind::Closed,
    ];
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// One failed operation of a transaction, as Consul reports it in a 409.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOpError {
    /// Index of the failing operation in the request.
    pub op_index: usize,
    /// Consul's description, e.g. `failed to lock key "k", lock is already held`.
    pub what: String,
}

/// The error type of every fallible baton call.
///
/// It never contains an ACL token: messages name the endpoint (method and path,
/// without query string) and Consul's answer.
pub struct Error {
    kind: ErrorKind,
    message: String,
    status: Option<u16>,
    endpoint: Option<String>,
    server_text: Option<String>,
    txn_errors: Vec<TxnOpError>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    /// A new error of `kind` with a human-readable message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            status: None,
            endpoint: None,
            server_text: None,
            txn_errors: Vec::new(),
            source: None,
        }
    }

    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        self.source = Some(Box::new(source));
        self
    }

    pub(crate) fn with_endpoint(mut self, endpoint: impl Into<String>) -> Error {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// An error built from a non-success HTTP answer.
    pub(crate) fn from_status(endpoint: String, status: u16, body: &[u8]) -> Error {
        let text = String::from_utf8_lossy(body).trim().to_string();
        let kind = classify_status(status, &text);
        let message = if text.is_empty() {
            format!("Consul answered {status}")
        } else {
            format!("Consul answered {status}: {text}")
        };
        Error {
            kind,
            message,
            status: Some(status),
            endpoint: Some(endpoint),
            server_text: Some(text),
            txn_errors: Vec::new(),
            source: None,
        }
    }

    pub(crate) fn txn_conflict(endpoint: String, errors: Vec<TxnOpError>) -> Error {
        let list: Vec<String> = errors
            .iter()
            .map(|e| format!("op {}: {}", e.op_index, e.what))
            .collect();
        let kind = if errors.iter().any(|e| e.what.contains("Permission denied")) {
            ErrorKind::PermissionDenied
        } else {
            ErrorKind::Conflict
        };
        Error {
            kind,
            message: format!("transaction failed: {}", list.join("; ")),
            status: Some(409),
            endpoint: Some(endpoint),
            server_text: None,
            txn_errors: errors,
            source: None,
        }
    }

    /// The stable kind of this error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The stable code string of this error's kind, e.g. `"BATON_TIMEOUT"`.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// The HTTP status Consul answered with, if the error came from an answer.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The endpoint the failing request went to, e.g. `PUT /v1/session/renew/<id>`.
    pub fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }

    /// Consul's own error text (the trimmed plain-text body), if any.
    pub fn server_text(&self) -> Option<&str> {
        self.server_text.as_deref()
    }

    /// For a failed transaction (409): every failing operation Consul listed.
    pub fn txn_errors(&self) -> &[TxnOpError] {
        &self.txn_errors
    }

    /// The message without the endpoint prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Maps an HTTP status and Consul's text onto a kind.
fn classify_status(status: u16, text: &str) -> ErrorKind {
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

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.endpoint {
            Some(ep) => write!(f, "{ep}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind)
            .field("message", &self.message)
            .field("status", &self.status)
            .field("endpoint", &self.endpoint);
        if !self.txn_errors.is_empty() {
            d.field("txn_errors", &self.txn_errors);
        }
        if let Some(s) = &self.source {
            d.field("source", &s.to_string());
        }
        d.finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|b| b.as_ref() as &(dyn std::error::Error + 'static))
    }
}

/// The result type of baton calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_prefixed() {
        let mut seen = std::collections::HashSet::new();
        for k in ErrorKind::ALL {
            assert!(k.code().starts_with("BATON_"));
            assert!(seen.insert(k.code()));
        }
    }

    #[test]
    fn statuses_map_to_kinds() {
        let e = Error::from_status("PUT /v1/kv/a".into(), 403, b"Permission denied: x");
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
        assert_eq!(
            e.to_string(),
            "PUT /v1/kv/a: Consul answered 403: Permission denied: x"
        );
        let e = Error::from_status(
            "PUT /v1/kv/a".into(),
            500,
            b"raft apply failed: invalid session \"x\"",
        );
        assert_eq!(e.kind(), ErrorKind::SessionInvalidated);
        let e = Error::from_status("GET /v1/kv/a".into(), 500, b"No cluster leader\n");
        assert_eq!(e.kind(), ErrorKind::Server);
        assert_eq!(e.server_text(), Some("No cluster leader"));
        assert_eq!(e.status(), Some(500));
        let e = Error::from_status(
            "PUT /v1/session/create".into(),
            500,
            b"Invalid Session TTL '5000000000', must be between [10s=24h0m0s]",
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let e = Error::from_status("PUT /v1/session/renew/x".into(), 404, b"");
        assert_eq!(e.kind(), ErrorKind::NotFound);
    }
}
