//! Mapping transport failures into [`Error`](crate::Error).

use crate::foundations::error::{Error, ErrorKind};

pub(super) fn cancelled(endpoint: String) -> Error {
    Error::new(ErrorKind::Cancelled, "cancelled").with_endpoint(endpoint)
}

/// A failed connect, read or write of the engine ([`Exchange`](super::exchange::Exchange)):
/// a connection error, worth another try.
pub(super) fn io_error(io: std::io::Error, endpoint: String) -> Error {
    io_failure(io).with_endpoint(endpoint)
}

/// [`io_error`] of no one request.
pub(super) fn io_failure(io: std::io::Error) -> Error {
    Error::new(ErrorKind::Connection, format!("I/O error: {io}"))
        .transient()
        .with_source(io)
}
