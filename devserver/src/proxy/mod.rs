//! A TCP fault proxy: faults that hit one client alone. Point one client at the proxy and the
//! proxy at the server (a dev server or a real Consul agent); the proxy forwards bytes both ways
//! until told to misbehave, while other clients keep talking to the server directly. The
//! server-wide faults live under `/_devserver/` (see the control module); these live beside them.
//!
//! The handle, its semantics and the control API are documented on [`FaultProxy`].
//!
//! The `connect` module holds the other proxy of the tests, an HTTP CONNECT one
//! ([`ConnectProxy`], what `HTTPS_PROXY` names), for clients that reach Consul through one.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use rand::Rng;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{oneshot, watch};

use crate::godur::{format_go_duration, parse_go_duration};
use crate::query::Query;

mod connect;
mod control;
mod pump;

pub use connect::ConnectProxy;

use control::control_loop;
use pump::accept_loop;

/// Pending-connection queue length of the listeners.
const LISTEN_BACKLOG: u32 = 4096;
/// Largest chunk read at once in each direction.
const CHUNK: usize = 16 * 1024;

/// The fault settings of a [`FaultProxy`] at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyFaults {
    /// True while the proxy forwards nothing ([`FaultProxy::blackhole`]).
    pub blackhole: bool,
    /// Base delay before each forwarded chunk (zero: none).
    pub delay: Duration,
    /// Each chunk's delay varies uniformly by up to this much either side of `delay`.
    pub jitter: Duration,
    /// The per-connection byte budget last set by [`FaultProxy::drop_after`], if any.
    pub drop_after: Option<u64>,
}

/// Counters of a [`FaultProxy`] since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Client connections accepted.
    pub accepted: u64,
    /// Client connections open now.
    pub open: u64,
    /// Bytes forwarded from clients to the server.
    pub bytes_to_upstream: u64,
    /// Bytes forwarded from the server to clients.
    pub bytes_to_client: u64,
}

/// The settings every connection watches.
#[derive(Clone, Debug, Default)]
struct Ctl {
    faults: ProxyFaults,
    /// Bumped whenever `faults.drop_after` is set or cleared: connections take a fresh budget.
    drop_epoch: u64,
    /// Bumped by reset: connections accepted under an older epoch are reset.
    reset_epoch: u64,
}

/// State shared by the listener, the connections, the control server and the handle.
struct Shared {
    upstream: SocketAddr,
    ctl: watch::Sender<Ctl>,
    accepted: AtomicU64,
    open: AtomicU64,
    to_upstream: AtomicU64,
    to_client: AtomicU64,
}

impl Shared {
    fn set_blackhole(&self) {
        self.ctl.send_modify(|c| c.faults.blackhole = true);
    }

    fn set_delay(&self, base: Duration, jitter: Duration) {
        self.ctl.send_modify(|c| {
            c.faults.delay = base;
            c.faults.jitter = jitter;
        });
    }

    fn reset(&self) {
        self.ctl.send_modify(|c| c.reset_epoch += 1);
    }

    fn drop_after(&self, bytes: u64) {
        self.ctl.send_modify(|c| {
            c.faults.drop_after = Some(bytes);
            c.drop_epoch += 1;
        });
    }

    fn heal(&self) {
        self.ctl.send_modify(|c| {
            c.faults = ProxyFaults::default();
            c.drop_epoch += 1;
        });
    }

    fn faults(&self) -> ProxyFaults {
        self.ctl.borrow().faults
    }

    fn stats(&self) -> ProxyStats {
        ProxyStats {
            accepted: self.accepted.load(Ordering::SeqCst),
            open: self.open.load(Ordering::SeqCst),
            bytes_to_upstream: self.to_upstream.load(Ordering::SeqCst),
            bytes_to_client: self.to_client.load(Ordering::SeqCst),
        }
    }
}

/// A running fault proxy: a listener that forwards each connection to one upstream address,
/// with faults switched on and off from the handle or over HTTP ([`FaultProxy::serve_control`];
/// `baton-devserver proxy` runs one as a process). It runs on a thread of its own with its own
/// Tokio runtime, so plain synchronous code can use it. [`FaultProxy::stop`] or drop closes the
/// listener and every connection and joins the thread.
///
/// ```no_run
/// use baton_devserver::{Config, DevServer, FaultProxy};
/// let server = DevServer::start(Config::default()).unwrap();
/// let proxy = FaultProxy::start(server.addr(), "127.0.0.1:0".parse().unwrap()).unwrap();
/// // point one client at proxy.addr(), the others at server.addr()
/// proxy.blackhole(); // that client hears nothing now
/// proxy.heal();      // and everything it sent meanwhile goes through
/// ```
///
/// | fault | on the handle | control request (`baton-devserver proxy`) |
/// |---|---|---|
/// | silence, as a network partition | [`FaultProxy::blackhole`] | `PUT /_proxy/blackhole` |
/// | fixed latency per chunk | [`FaultProxy::delay`] | `PUT /_proxy/delay?d=50ms` (`d=0s` off) |
/// | jittered latency per chunk | [`FaultProxy::delay_jitter`] | `PUT /_proxy/delay?d=50ms&jitter=20ms` |
/// | reset every open connection | [`FaultProxy::reset`] | `PUT /_proxy/reset` |
/// | close after N more bytes | [`FaultProxy::drop_after`] | `PUT /_proxy/drop-after?bytes=N` |
/// | everything back to normal | [`FaultProxy::heal`] | `PUT /_proxy/heal` |
/// | settings and counters | [`FaultProxy::faults`], [`FaultProxy::stats`] | `GET /_proxy/status` |
///
/// Control requests answer `true` (JSON, with a trailing newline) or `400` with a plain-text
/// message naming the bad parameter; `GET /_proxy/status` answers a JSON object:
///
/// ```json
/// {"mode": "forward", "upstream": "127.0.0.1:8500", "delay": "0s", "jitter": "0s",
///  "drop_after": null, "connections": {"accepted": 3, "open": 1},
///  "bytes": {"to_upstream": 812, "to_client": 1630}}
/// ```
///
/// `mode` is `"forward"` or `"blackhole"`; durations are Go duration strings; `drop_after` is
/// `null` or the byte budget last set.
///
/// Semantics, precisely:
///
/// - **Blackhole** stops reading from both sides of every connection: nothing is forwarded,
///   nothing is answered, no connection is closed or reset. Bytes the peers send are held by
///   the kernel (and by the proxy for a chunk it had already read), as TCP holds them across a
///   partition. New connections are accepted but the proxy does not connect upstream for them
///   until forwarding resumes, so a client that retries during a long blackhole does not pile
///   connections onto the server.
/// - **Heal** turns every fault off and does **not** close anything: held bytes flow again on
///   the same connections (late answers arrive, as after a partition that healed before TCP
///   gave up). A test that wants clients to reconnect calls [`FaultProxy::reset`] as well.
/// - **Delay** sleeps before writing each chunk (what one read returned), in both directions.
///   Bytes arriving meanwhile wait behind it, so this models latency of request/response
///   traffic, not bandwidth. With jitter, each chunk waits `base ± jitter` (uniformly, never
///   below zero); order is kept.
/// - **Reset** closes every connection open now with a TCP reset (`SO_LINGER` 0) on both the
///   client and the server side, including connections held by a blackhole. The settings stay
///   as they were; connections made afterwards work (or are blackholed, if that is on).
/// - **Drop after N bytes** gives every connection, open or new, a budget of N more bytes
///   (both directions together); once it is spent the connection is closed (an orderly close;
///   the kernel sends a reset instead when unread data is pending). A budget of 0 closes idle
///   connections at once and new ones as soon as they are accepted. A later call replaces the
///   budget; [`FaultProxy::heal`] removes it.
/// - An orderly close by either side is passed on as one (half-close included). When the
///   server refuses a connection, or a side's connection fails (is reset), the proxy resets
///   the other side, so the client sees an error rather than silence.
///
/// The counters are bytes forwarded (written to the other side), not bytes received.
pub struct FaultProxy {
    shared: Arc<Shared>,
    addr: SocketAddr,
    handle: tokio::runtime::Handle,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("upstream", &self.shared.upstream)
            .finish_non_exhaustive()
    }
}

impl FaultProxy {
    /// Binds `listen` (port 0 picks a free port) and starts forwarding every connection to
    /// `upstream`, on a thread of its own. Returns once the proxy accepts connections. The
    /// upstream is connected to per client connection, so it need not be up yet.
    pub fn start(upstream: SocketAddr, listen: SocketAddr) -> io::Result<FaultProxy> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("baton-proxy-worker")
            .enable_all()
            .build()?;
        let listener = {
            let _in_runtime = rt.enter();
            bind(listen)?
        };
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            ctl: watch::channel(Ctl::default()).0,
            accepted: AtomicU64::new(0),
            open: AtomicU64::new(0),
            to_upstream: AtomicU64::new(0),
            to_client: AtomicU64::new(0),
        });
        let handle = rt.handle().clone();
        let (tx, rx) = oneshot::channel();
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name("baton-proxy".into())
            .spawn(move || {
                rt.block_on(async move {
                    tokio::select! {
                        _ = accept_loop(listener, s2) => {}
                        _ = rx => {}
                    }
                });
                // Drops every connection task, closing its sockets.
                rt.shutdown_timeout(Duration::from_secs(2));
            })?;
        Ok(FaultProxy {
            shared,
            addr,
            handle,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// The address clients connect to (with the real port when `listen` asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address connections are forwarded to.
    pub fn upstream(&self) -> SocketAddr {
        self.shared.upstream
    }

    /// Forwards nothing and answers nothing, as a silent network partition: open connections
    /// stay open but no byte passes in either direction, and new connections are accepted
    /// but not connected upstream. Clients see silence (their reads time out), never a reset.
    /// Lasts until [`FaultProxy::heal`].
    pub fn blackhole(&self) {
        self.shared.set_blackhole();
    }

    /// Delays every forwarded chunk by `d`, in both directions (`Duration::ZERO` turns it
    /// off). Clears any jitter.
    pub fn delay(&self, d: Duration) {
        self.shared.set_delay(d, Duration::ZERO);
    }

    /// Delays every forwarded chunk by `base ± jitter` (uniformly drawn per chunk, never below
    /// zero), in both directions; chunks keep their order.
    pub fn delay_jitter(&self, base: Duration, jitter: Duration) {
        self.shared.set_delay(base, jitter);
    }

    /// Resets (TCP RST) every connection open now, on both the client and the server side.
    /// The fault settings are unchanged and later connections are served as usual.
    pub fn reset(&self) {
        self.shared.reset();
    }

    /// Lets every connection, open or new, forward `bytes` more bytes (both directions
    /// together) and then closes it. `0` closes idle connections at once and new ones when
    /// accepted. Lasts until replaced or [`FaultProxy::heal`].
    pub fn drop_after(&self, bytes: u64) {
        self.shared.drop_after(bytes);
    }

    /// Turns every fault off: forwarding resumes on the connections a blackhole held (they
    /// are not closed; bytes held meanwhile are delivered), the delay and the byte budget are
    /// removed.
    pub fn heal(&self) {
        self.shared.heal();
    }

    /// The current fault settings.
    pub fn faults(&self) -> ProxyFaults {
        self.shared.faults()
    }

    /// Connection and byte counters.
    pub fn stats(&self) -> ProxyStats {
        self.shared.stats()
    }

    /// Serves the HTTP control API (`/_proxy/...`, see the table above) on
    /// `listen` (port 0 picks a free port) until the proxy stops, so a process that cannot
    /// call this handle can drive the proxy. Returns the bound address.
    pub fn serve_control(&self, listen: SocketAddr) -> io::Result<SocketAddr> {
        let listener = {
            let _in_runtime = self.handle.enter();
            bind(listen)?
        };
        let addr = listener.local_addr()?;
        self.handle
            .spawn(control_loop(listener, self.shared.clone()));
        Ok(addr)
    }

    /// Closes the listener and every connection and joins the proxy's thread.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

/// A listener with a large backlog (as the dev server's), bound inside the runtime.
fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}
