//! What everything else is written in: errors and their kinds, the key rule, cancel tokens, a call's deadline, named joinable threads, pools, the builder's settings.
//!
//! A layer of the core (see `core/tests/layers.rs`): it imports only from the layers below it.

pub(crate) mod cancel;
pub(crate) mod compat;
pub(crate) mod config;
pub mod drive;
pub(crate) mod error;
pub(crate) mod godur;
pub(crate) mod keys;
pub mod log_sink;
pub(crate) mod metrics;
pub mod pool;
pub(crate) mod random;
pub(crate) mod scope;
pub(crate) mod session_options;
pub(crate) mod sync;
pub(crate) mod threads;
pub(crate) mod tls_hint;
