//! `baton-devserver`: a single-node, in-memory server that answers the Consul HTTP API endpoints
//! that sessions, locks, leader election and semaphores use, with Consul's own semantics — KV,
//! sessions, transactions — and the agent, catalog, health, status, ACL, event and coordinate
//! endpoints around them (services and TTL, HTTP and TCP checks that invalidate the sessions
//! bound to them, the HTTP and TCP ones probed as an agent does,
//! blocking reads on per-table indexes, a generated Connect CA root), so Consul's own Go test
//! harness and third-party clients' suites can run against it. Run as `consul agent
//! -config-file F` (a symlink named `consul`), it reads the harness's JSON config.
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
//!
//! # Emulating Consul versions
//!
//! By default the server answers as [`ConsulVersion::CURRENT`] (1.21.4, the newest release it
//! matches fully: 1.21.5 added KV key-name validation, which it does not do). Set
//! [`Config::consul_version`] (`--consul-version X.Y.Z` on the command line) to reproduce what
//! older releases did differently where a client can tell. Each switch is a method on
//! [`ConsulVersion`] citing its source; the boundary is the first release with today's
//! behaviour. Sources are `hashicorp/consul` CHANGELOG lines, pull requests (GH-n, #n) and
//! issues.
//!
//! | before | what the older release does | source |
//! |---|---|---|
//! | 1.6.2 | `/v1/txn` decodes numbers through float64: KV op `Flags` and `Index` are used as `uint64(float64(n))` (`3304740253564472344` → `3304740253564472320`). `PUT /v1/kv?flags=&cas=` stay exact. | CHANGELOG 1.6.2, GH-6680; issue #6655 |
//! | 1.6.0 | An identical rewrite of a KV entry (same value, flags, session, LockIndex) bumps ModifyIndex and wakes watchers, by PUT or txn alike. | PR #5885; issue #7826 |
//! | 1.8.0 (from 1.6.0) | A txn write that changed nothing reports the txn's new index as `ModifyIndex`; the stored entry keeps its old one. | CHANGELOG 1.8.0, GH-7832; issue #7826 |
//! | 1.7.0 | Sessions have only `Checks`: default `["serfHealth"]`, replaced by a `Checks` key in the create body (`[]` = none); `NodeChecks`/`ServiceChecks` are ignored on create and absent from answers. | PR #10651; CHANGELOG 1.7.2, GH-7395 |
//! | 1.7.0 | Unknown fields in a txn body are ignored instead of a 400 `json: unknown field`. | CHANGELOG 1.7.0, GH-6874 |
//! | 1.7.1 | The default per-client HTTP connection limit (`limits.http_max_conns_per_client`) is 100 from 1.6.3 and none before it, not 200. A default only: the command line uses it unless `--max-conns-per-client` is given; [`Config::default`] keeps 200, so a library user emulating release `v` sets `max_conns_per_client: v.http_max_conns_per_client()` ([`ConsulVersion::http_max_conns_per_client`]). | CHANGELOG 1.6.3, CVE-2020-7219, GH-7159; CHANGELOG 1.7.1, GH-7289 |
//! | 1.11.0 (from 1.7.0) | The txn KV field `Partition` is unknown, so a strict decoder refuses it (400). | research notes §8 |
//! | 1.14.0 | The txn verb `get-or-empty` is unknown (409, `unknown KV verb "get-or-empty"`). | CHANGELOG 1.14.0, GH-14474 |
//! | 1.14.0 | A txn holds at most 64 ops, not 128 (413 `Transaction contains too many operations (65 > 64)`). | CHANGELOG 1.14.0, GH-14599 |
//! | 1.17.0 | A `-dev` agent pretty-prints every JSON body (4-space indent, trailing newline), so [`Config::pretty`] is in effect always on. | CHANGELOG 1.17.0, GH-18367 |
//!
//! `/v1/agent/self` reports the emulated version in `Config.Version`. Not emulated: the
//! 1.0.0–1.0.1 bug that kept `serfHealth` on `"Checks": []` (fixed in 1.0.2, GH-3732), the
//! `/v1/agent/self` fields that came and went, and the older size-limit error texts.

mod acl_rules;
pub mod certs;
pub mod cli;
mod config;
mod control;
mod endpoints;
mod godur;
mod http;
mod journal;
mod leaderless;
mod proxy;
mod query;
mod serf;
mod server;
mod shared;
mod state;
mod tls;
mod version;
mod watch;

pub use config::{Config, ConfigError};
pub use godur::{format_go_duration, parse_go_duration};
pub use journal::JournalEntry;
pub use leaderless::{NoLeader, NoLeaderAnswers};
pub use proxy::{ConnectProxy, FaultProxy, ProxyFaults, ProxyStats};
pub use server::DevServer;
pub use shared::RequestCounts;
pub use tls::TlsConfig;
pub use version::ConsulVersion;
