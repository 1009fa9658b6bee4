//! `baton-devserver`: a single-node, in-memory server that answers the Consul HTTP API endpoints
//! that sessions, locks, leader election and semaphores use, with Consul's own semantics.
//!
//! It exists because no Consul binary can be installed on the machines baton is built on, and
//! because tests of coordination code need things a real cluster cannot give on demand: short
//! session TTLs, a server that stops answering, a restart that loses every session, a "no
//! cluster leader" window, a node failure. The contract it follows is Consul's observable
//! behaviour (status codes, error texts, headers, index model, TTL timers at 2×TTL, lock-delay,
//! blocking queries); see the crate README for the list and the few documented deviations.
//!
//! ```no_run
//! use baton_devserver::{Config, DevServer};
//! let server = DevServer::start(Config::default()).unwrap();
//! println!("CONSUL_HTTP_ADDR={}", server.http_addr());
//! // ... talk to it over HTTP ...
//! server.stop();
//! ```
//!
//! Fault controls are available both on the handle ([`DevServer::pause`], ...) and over HTTP
//! under `/_devserver/`, outside Consul's `/v1/` namespace, for clients in other processes.
//! Faults that hit one client alone (silence, latency, resets, truncated connections) come from
//! a [`FaultProxy`] placed in front of that client, driven from its handle or over HTTP under
//! `/_proxy/` (`baton-devserver proxy --to HOST:PORT` runs one as a process).

mod acl;
mod config;
mod control;
mod godur;
mod http;
mod kv_endpoint;
mod proxy;
mod query;
mod server;
mod session_endpoint;
mod state;
mod txn_endpoint;
mod watch;

pub use config::{Config, ConfigError};
pub use godur::{format_go_duration, parse_go_duration};
pub use proxy::{FaultProxy, ProxyFaults, ProxyStats};
pub use server::{DevServer, RequestCounts};
