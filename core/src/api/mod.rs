//! Consul's endpoints as functions of a `Conn`: KV, sessions, transactions, the agent.
//!
//! A layer of the core (see `core/tests/layers.rs`): it imports only from the layers below it.

pub(crate) mod agent;
pub(crate) mod kv;
pub(crate) mod session_api;
pub(crate) mod txn;
