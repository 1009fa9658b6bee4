//! The threads and state that keep sessions and watches alive: the renewer, the session monitor, the key hub, watches, the callback and clean-up threads, claims and riding out a leaderless Consul.
//!
//! A layer of the core (see `core/tests/layers.rs`): it imports only from the layers below it.

pub(crate) mod claim;
pub(crate) mod cleanup;
pub(crate) mod dispatcher;
pub(crate) mod keyhub;
pub(crate) mod lease;
pub(crate) mod monitor;
pub(crate) mod renewer;
pub(crate) mod ride_out;
pub(crate) mod steps;
pub(crate) mod watch;
