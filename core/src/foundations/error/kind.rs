//! The stable kinds of errors, and the codes every binding reports.

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
    /// Consul answered with another error status; see [`Error::status`](crate::Error::status) and
    /// [`Error::server_text`](crate::Error::server_text).
    Server,
    /// Consul's answer could not be understood.
    BadResponse,
    /// The client was closed, or is used in a process forked from the one that made it.
    Closed,
    /// The Consul server is too old for what was asked (the message names the
    /// version that added it), e.g. the `get-or-empty` txn verb before 1.14.
    Unsupported,
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
            ErrorKind::Unsupported => "BATON_UNSUPPORTED",
        }
    }

    /// Every kind, in a fixed order (for bindings that build tables).
    pub const ALL: [ErrorKind; 12] = [
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
        ErrorKind::Unsupported,
    ];
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}
