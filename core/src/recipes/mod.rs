//! Consul's recipes on the runtime: holdings, locks, semaphores, elections, fencing, adopted sessions.
//!
//! A layer of the core (see `core/tests/layers.rs`): it imports only from the layers below it.

pub(crate) mod adopt;
pub(crate) mod barrier;
pub(crate) mod counter;
pub(crate) mod election;
pub(crate) mod fence;
pub(crate) mod holding;
pub(crate) mod leader_task;
pub(crate) mod lock;
pub(crate) mod lock_delay;
pub(crate) mod membership;
pub(crate) mod multilock;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
