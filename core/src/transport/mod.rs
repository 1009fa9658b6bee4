//! One connection handle (`conn::Conn`) and the HTTP transport under it (`http`): every request, bounded by its caller's deadline.
//!
//! A layer of the core (see `core/tests/layers.rs`): it imports only from the layers below it.

pub(crate) mod conn;
pub(crate) mod http;
