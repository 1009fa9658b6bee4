//! One connection handle (`conn::Conn`), the HTTP transport under it (`http`): every request, bounded by its caller's deadline, and the connections under that (`net`: TCP, unix sockets, TLS).
//!
//! A layer of the core (see `core/tests/layers.rs`): it imports only from the layers below it.

pub(crate) mod conn;
pub(crate) mod http;
pub(crate) mod net;
