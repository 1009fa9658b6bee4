//! # baton
//!
//! Consul sessions, locks, leader election and semaphores from one Rust core,
//! without an async runtime and without `unsafe`.
//!
//! This crate holds the client layer everything else builds on:
//!
//! * [`Client`]: configuration from the standard `CONSUL_*` environment
//!   variables ([`Client::from_env`]) or a [`ClientBuilder`]; every request has a
//!   timeout; tokens never appear in logs, errors or `Debug` output.
//! * A typed low-level API: [`Client::kv`], [`Client::sessions`], [`Client::txn`],
//!   [`Client::status_leader`].
//! * Managed sessions ([`Client::create_session`], [`Client::default_session`]):
//!   renewed by one background thread per client, with a conservative local
//!   lease deadline and loss signals (callbacks, [`Session::wait_lost`],
//!   [`Session::is_valid`], [`Session::cancel_token`]).
//! * Shared blocking-query watches ([`Client::watch_key`], [`Client::watch_prefix`]).
//! * Consul's recipes, wire-compatible with Go's `api` package: [`Lock`]
//!   ([`Client::lock`]), [`Election`] ([`Client::election`], [`Client::observe_leader`]),
//!   [`Semaphore`] ([`Client::semaphore`]), and fencing with [`Sequencer`],
//!   [`Client::check_sequencer`] and [`Client::guarded_txn`].
//! * Recipes beyond Consul's three: [`MultiLock`] ([`Client::multi_lock`]:
//!   several keys, all or none, in one transaction), [`RwLock`] ([`Client::read_lock`],
//!   [`Client::write_lock`]: many readers or one writer, writers not starved), [`Group`]
//!   ([`Client::group`]: members bound to their session, listed and watched),
//!   [`LeaderTask`] ([`Client::leader_task`]:
//!   a task run while leading, cancelled the moment leadership ends), [`Barrier`]
//!   ([`Client::barrier`]), [`DoubleBarrier`] ([`Client::double_barrier`]) and [`Counter`]
//!   ([`Client::counter`]).
//! * Sessions bound to health checks: [`Client::agent`] registers TTL checks and
//!   services and reports their health; [`SessionOptions::node_checks`] and
//!   [`SessionOptions::service_check`] bind a session to them;
//!   [`Client::adopt_session`] manages a session created elsewhere.
//! * One error type with stable kinds and codes ([`Error`], [`ErrorKind`]).
//!
//! ```no_run
//! # fn main() -> Result<(), baton::Error> {
//! let client = baton::Client::from_env()?;
//! let session = client.default_session()?;
//! session.on_lost(|reason| eprintln!("session lost: {reason:?}"));
//! client.kv().put("greeting", b"hello")?;
//! client.close(std::time::Duration::from_secs(5));
//! # Ok(()) }
//! ```
//!
//! Logging goes through the `log` crate; nothing is printed unless the
//! application installs a logger.
//!
//! ## Cargo features
//!
//! Both off by default.
//!
//! * `prometheus`: `baton::prometheus`, a collector of the client's metrics for the
//!   official Prometheus client's registry.
//! * `tokio`: a future of [`aio`] polled inside a tokio runtime waits for its socket on
//!   that runtime's own reactor, so an answer wakes the task directly, where otherwise the
//!   client's readiness thread takes it and wakes the task (one more wake-up per request).
//!   Polled by another executor, or in a tokio runtime built without I/O, they wait as
//!   without the feature. (Tokio panics when a runtime without I/O is asked to take a socket;
//!   the client catches that panic the first time, so the panic hook prints its message
//!   once, logs a warning, and does not ask again. With `panic = "abort"`, build the
//!   runtime with I/O or leave the feature off.)
#![forbid(unsafe_code)]

mod api;
mod foundations;
mod recipes;
mod runtime;
mod transport;

#[doc(hidden)]
pub use foundations::drive;
#[doc(hidden)]
pub use foundations::log_sink;
#[doc(hidden)]
pub use foundations::pool;
pub mod aio;
mod client;

pub use api::agent::{Agent, CheckStatus, ServiceRegistration, TtlCheck};
pub use api::kv::{Kv, KvPair, WriteOptions};
pub use api::session_api::{SessionApi, SessionEntry};
pub use api::txn::{KvOp, KvVerb, MAX_TXN_OPS};
pub use client::metrics::{HistogramSnapshot, LabeledCount, MetricsSnapshot};
#[doc(hidden)]
pub use client::WeakClient;
pub use client::{Client, CloseReport, DROP_CLOSE_TIMEOUT};
pub use foundations::cancel::{CancelToken, Cancelled, Linked};
pub use foundations::config::{
    parse_address, parse_go_bool, ClientBuilder, Endpoint, Scheme, TlsSettings, DEFAULT_ADDRESS,
    ENV_CACERT, ENV_CAPATH, ENV_CLIENT_CERT, ENV_CLIENT_KEY, ENV_HTTP_ADDR, ENV_HTTP_AUTH,
    ENV_HTTP_SSL, ENV_HTTP_SSL_VERIFY, ENV_HTTP_TOKEN, ENV_HTTP_TOKEN_FILE, ENV_NAMESPACE,
    ENV_PARTITION, ENV_TLS_SERVER_NAME,
};
pub use foundations::error::{Error, ErrorKind, Result, TxnOpError};
pub use foundations::godur::{format_go_duration, parse_go_duration};
pub use foundations::session_options::{Behavior, ServiceCheck, SessionOptions};
pub use recipes::barrier::{Barrier, DoubleBarrier};
pub use recipes::counter::{Counter, CounterWatch};
pub use recipes::election::{Election, ElectionOptions, Leader, LeaderEvent, Observer};
pub use recipes::fence::Sequencer;
pub use recipes::holding::{Hold, HoldLost};
pub use recipes::leader_task::{LeaderTask, StoppedLeading, DEFAULT_REQUEUE_DELAY};
/// The event loops' warm path (see `lock::warm`): for the language bindings, free to change.
#[doc(hidden)]
pub use recipes::lock::warm;
pub use recipes::lock::{Lock, LockLost, LockOptions, LOCK_FLAG_VALUE};
pub use recipes::membership::{
    Group, Member, MemberInfo, MemberLost, MembersWatch, MembershipEvent, MEMBER_FLAG_VALUE,
    MEMBER_ID_MAX,
};
pub use recipes::multilock::{MultiLock, MultiLockOptions, MULTI_LOCK_MAX_KEYS};
pub use recipes::rwlock::{RwLock, RwMode, RW_LOCK_FLAG_VALUE};
pub use recipes::semaphore::{Semaphore, SemaphoreLost, SemaphoreOptions, SEMAPHORE_FLAG_VALUE};
pub use runtime::lease::{CallbackId, LostReason, Session, SessionEvent, SessionState};
pub use runtime::pacing::next_index;
pub use runtime::watch::{Watch, WatchEvent, WatchTarget};
pub use transport::http::{encode_key, Consistency, QueryMeta, QueryOptions};

/// The metrics every language exposes: names, types, help texts, label values and
/// buckets ([`Client::metrics`] takes a snapshot).
pub mod metrics {
    pub use crate::client::metrics::{HistogramSnapshot, LabeledCount, MetricsSnapshot};
    pub use crate::foundations::metrics::{
        MetricDef, MetricType, ACQUIRE_OUTCOMES, FAMILIES, HOLD_BUCKETS, LOSS_REASONS, METRICS,
        OWED_KINDS, RECIPES, REQUEST_OUTCOMES, WAIT_BUCKETS,
    };
}
#[cfg(feature = "prometheus")]
pub mod prometheus;

/// The README's Rust snippets, compiled as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
