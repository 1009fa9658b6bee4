//! The threads and state that keep sessions and watches alive: the renewer, the session monitor, the key hub, watches, the callback and clean-up threads, the threads behind the futures (steps, timer, reactor), claims and riding out a leaderless Consul.
//!
//! A layer of the core (see `core/tests/layers.rs`): it imports only from the layers below it.

pub(crate) mod claim;
pub(crate) mod cleanup;
pub(crate) mod dispatcher;
pub(crate) mod keyhub;
pub(crate) mod lease;
pub(crate) mod monitor;
pub(crate) mod pacing;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) mod reactor;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
#[path = "reactor_none.rs"]
pub(crate) mod reactor;
pub(crate) mod renewer;
pub(crate) mod ride_out;
pub(crate) mod step_wait;
pub(crate) mod steps;
pub(crate) mod watch;
