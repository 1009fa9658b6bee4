//! HTTP plumbing: URL and query encoding, the request engine and its connections, timeouts,
//! cancellation, and mapping answers into [`Error`].

mod availability;
mod body;
mod encode;
mod errors;
pub(crate) mod exchange;
mod message;
mod proxy;
mod query;
mod transport;

pub(crate) use availability::ProbeSlot;
pub(crate) use encode::encode_component;
pub use encode::encode_key;
pub use exchange::Interest;
pub(crate) use message::{check, Request, Response};
pub use query::{Consistency, QueryMeta, QueryOptions};
pub(crate) use transport::Transport;
