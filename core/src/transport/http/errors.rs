//! Mapping transport failures into [`Error`](crate::Error).

use std::time::Duration;

use crate::foundations::error::{Error, ErrorKind};

use super::body::*;

pub(super) fn cancelled(endpoint: String) -> Error {
    Error::new(ErrorKind::Cancelled, "cancelled").with_endpoint(endpoint)
}

/// Whether an error means the connection died under the request (reset, closed,
/// broken pipe) rather than that the server refused or timed out.
pub(super) fn stale_connection(e: &ureq::Error) -> bool {
    use std::io::ErrorKind as K;
    match e {
        ureq::Error::Io(io) => matches!(
            io.kind(),
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof
        ),
        _ => false,
    }
}

/// How a failed read or write on a connection is described, whichever way it was made.
fn io_message(io: &std::io::Error) -> String {
    format!("I/O error: {io}")
}

/// A failed read or write on a loop connection ([`Exchange`](super::exchange::Exchange)), as
/// [`map_ureq_error`] describes one of ureq's: a connection error, worth another try.
pub(super) fn io_error(io: std::io::Error, endpoint: String) -> Error {
    io_failure(io).with_endpoint(endpoint)
}

/// [`io_error`] of no one request.
pub(super) fn io_failure(io: std::io::Error) -> Error {
    Error::new(ErrorKind::Connection, io_message(&io))
        .transient()
        .with_source(io)
}

pub(super) fn map_ureq_error(
    e: ureq::Error,
    endpoint: String,
    timeout: Duration,
    users: bool,
) -> Error {
    // A TLS failure ureq hands over as an I/O error: a certificate or handshake problem, which
    // trying again will not mend.
    let tls_failure = crate::foundations::tls_hint::rustls_error(&e);
    let (kind, msg) = match &e {
        ureq::Error::Timeout(t) => (
            ErrorKind::Timeout,
            format!(
                "no answer within {timeout:?} ({t}){}",
                if users { "" } else { " (request timeout)" }
            ),
        ),
        ureq::Error::HostNotFound => (ErrorKind::Connection, "host not found".to_string()),
        ureq::Error::ConnectionFailed => (ErrorKind::Connection, "connection failed".to_string()),
        ureq::Error::Io(_) if tls_failure.is_some() => (
            ErrorKind::Connection,
            format!("TLS error: {}", tls_failure.expect("checked")),
        ),
        ureq::Error::Io(io) => (ErrorKind::Connection, io_message(io)),
        ureq::Error::Tls(_) | ureq::Error::Pem(_) | ureq::Error::Rustls(_) => {
            (ErrorKind::Connection, format!("TLS error: {e}"))
        }
        ureq::Error::TooManyRedirects | ureq::Error::RedirectFailed => {
            (ErrorKind::InvalidArgument, format!("redirected: {e}"))
        }
        ureq::Error::BodyExceedsLimit(_) => (ErrorKind::BadResponse, too_large_message()),
        ureq::Error::Protocol(_) => (ErrorKind::BadResponse, format!("HTTP protocol error: {e}")),
        _ => (ErrorKind::Connection, e.to_string()),
    };
    // No answer, or the connection broke: worth another try while time is left. A
    // name that does not resolve, TLS and protocol failures are configuration or
    // server problems that trying again will not mend.
    let transient = tls_failure.is_none()
        && matches!(
            e,
            ureq::Error::Timeout(_) | ureq::Error::ConnectionFailed | ureq::Error::Io(_)
        );
    let err = Error::new(kind, msg).with_endpoint(endpoint);
    let err = if transient { err.transient() } else { err };
    err.with_source(e)
}
