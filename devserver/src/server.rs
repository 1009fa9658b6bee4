//! The server handle: the listener thread with its own Tokio runtime, the shared state, the
//! TTL timer task, the HTTP/TCP check runner ([`checks`]), and the fault controls.

mod checks;
mod unix_socket;

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::net::TcpSocket;

use crate::config::Config;
use crate::journal::JournalEntry;
use crate::leaderless::NoLeader;
use crate::shared::{RequestCounts, Shared};
use crate::state::CheckStatus;

/// Pending-connection queue length of the listener.
const LISTEN_BACKLOG: u32 = 4096;

/// A running dev server. Stops (and joins its thread) on [`DevServer::stop`] or drop.
pub struct DevServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    https_addr: Option<SocketAddr>,
    /// The unix socket's absolute path, when [`Config::unix_socket`] asked for one.
    unix_socket: Option<PathBuf>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for DevServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevServer")
            .field("addr", &self.addr)
            .field("unix_socket", &self.unix_socket)
            .finish_non_exhaustive()
    }
}

impl DevServer {
    /// Binds the listener and starts serving on a thread of its own (the caller needs no async
    /// runtime). Returns once the server accepts connections.
    pub fn start(config: Config) -> io::Result<DevServer> {
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("baton-devserver-worker")
            .enable_all()
            .build()?;
        // A listen backlog like Go's (somaxconn) rather than std's 128, so thousands of clients
        // connecting at once are not held back by SYN retries.
        let listener = {
            let _in_runtime = rt.enter();
            let socket = if config.addr.is_ipv4() {
                TcpSocket::new_v4()?
            } else {
                TcpSocket::new_v6()?
            };
            socket.set_reuseaddr(true)?;
            socket.bind(config.addr)?;
            socket.listen(LISTEN_BACKLOG)?
        };
        let addr = listener.local_addr()?;
        // Consul's HTTPS listener (ports.https), beside the HTTP one.
        let https = match (&config.https_addr, &config.tls) {
            (Some(https_addr), Some(tls)) => {
                let server_config = tls
                    .server_config()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                let _in_runtime = rt.enter();
                let socket = if https_addr.is_ipv4() {
                    TcpSocket::new_v4()?
                } else {
                    TcpSocket::new_v6()?
                };
                socket.set_reuseaddr(true)?;
                socket.bind(*https_addr)?;
                let l = socket.listen(LISTEN_BACKLOG)?;
                Some((l, tokio_rustls::TlsAcceptor::from(server_config)))
            }
            _ => None,
        };
        let https_addr = match &https {
            Some((l, _)) => Some(l.local_addr()?),
            None => None,
        };
        // The unix socket (addresses.http = "unix:///path"), beside TCP: bound last of what
        // may fail the start, and removed again (by `SocketFile`) if the start fails after.
        let unix = match &config.unix_socket {
            Some(path) => {
                let _in_runtime = rt.enter();
                Some(unix_socket::bind(path, config.unix_socket_mode)?)
            }
            None => None,
        };
        let unix_socket = unix.as_ref().map(|(_, f)| f.path().to_path_buf());
        // Serf's LAN and WAN ports, for other dev servers' joins. A port another process holds
        // leaves that pool unreachable (a warning), rather than failing the start.
        let mut config = config;
        let mut serf = Vec::new();
        if config.serf_listen {
            let _in_runtime = rt.enter();
            for (i, pool) in [crate::serf::Pool::Lan, crate::serf::Pool::Wan]
                .into_iter()
                .enumerate()
            {
                let port = if i == 0 {
                    &mut config.serf_ports.0
                } else {
                    &mut config.serf_ports.1
                };
                match std::net::TcpListener::bind((config.addr.ip(), *port)).and_then(|l| {
                    l.set_nonblocking(true)?;
                    tokio::net::TcpListener::from_std(l)
                }) {
                    Ok(l) => {
                        *port = l.local_addr()?.port();
                        serf.push((l, pool));
                    }
                    Err(e) => eprintln!("baton-devserver: serf port {port} not served: {e}"),
                }
            }
        }
        let shared = Arc::new(Shared::new(config));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let s2 = shared.clone();
        let after = shared.clone();
        let thread = std::thread::Builder::new()
            .name("baton-devserver".into())
            .spawn(move || {
                let (unix_listener, socket_file) = match unix {
                    Some((l, f)) => (Some(l), Some(f)),
                    None => (None, None),
                };
                rt.block_on(async move {
                    tokio::spawn(ttl_timers(s2.clone()));
                    tokio::spawn(checks::run(s2.clone()));
                    tokio::spawn(tombstone_reaper(s2.clone()));
                    for (l, pool) in serf {
                        let s3 = s2.clone();
                        let me = crate::serf::member(&s3.cfg, &s3.node_id, pool);
                        tokio::spawn(
                            async move { crate::serf::listen(l, pool, me, &s3.serf).await },
                        );
                    }
                    let https_loop = async {
                        match https {
                            Some((l, acceptor)) => {
                                crate::http::accept_loop(l, s2.clone(), Some(acceptor)).await
                            }
                            None => std::future::pending().await,
                        }
                    };
                    let unix_loop = async {
                        match unix_listener {
                            Some(l) => crate::http::accept_unix_loop(l, s2.clone()).await,
                            None => std::future::pending().await,
                        }
                    };
                    let mut left = s2.left.subscribe();
                    tokio::select! {
                        _ = crate::http::accept_loop(listener, s2.clone(), None) => {}
                        _ = https_loop => {}
                        _ = unix_loop => {}
                        _ = rx => {}
                        _ = left.wait_for(|l| *l) => {}
                    }
                });
                rt.shutdown_timeout(Duration::from_secs(2));
                // The listeners are closed: the socket file goes (before a leave's hook ends
                // the process).
                drop(socket_file);
                if *after.left.borrow() {
                    after
                        .stopped_after_leave
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                    let hook = after
                        .on_left
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take();
                    if let Some(f) = hook {
                        f();
                    }
                }
            })?;
        Ok(DevServer {
            shared,
            addr,
            https_addr,
            unix_socket,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// The bound address (with the real port when the config asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `host:port`, the form `CONSUL_HTTP_ADDR` takes.
    pub fn http_addr(&self) -> String {
        self.addr.to_string()
    }

    /// `http://host:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The HTTPS listener's bound address, when [`Config::https_addr`] asked for one.
    pub fn https_addr(&self) -> Option<SocketAddr> {
        self.https_addr
    }

    /// `https://host:port` of the HTTPS listener, when there is one.
    pub fn https_url(&self) -> Option<String> {
        self.https_addr.map(|a| format!("https://{a}"))
    }

    /// The unix socket's absolute path, when [`Config::unix_socket`] asked for one.
    pub fn unix_socket(&self) -> Option<&Path> {
        self.unix_socket.as_deref()
    }

    /// `unix:///abs/path` of the unix socket, when there is one: the form `CONSUL_HTTP_ADDR`
    /// takes for it (Go's `api` and baton alike).
    pub fn unix_url(&self) -> Option<String> {
        self.unix_socket
            .as_ref()
            .map(|p| format!("unix://{}", p.display()))
    }

    /// The agent's node name (sessions default to it).
    pub fn node_name(&self) -> String {
        self.shared.cfg.node_name.clone()
    }

    /// Stops answering: new requests, and responses not yet written (including blocking queries
    /// that complete meanwhile), hang until [`DevServer::resume`]. Connections stay open, as
    /// with a server behind a silent network partition. The control path keeps answering.
    pub fn pause(&self) {
        self.shared.set_paused(true);
    }

    /// Answers again after [`DevServer::pause`].
    pub fn resume(&self) {
        self.shared.set_paused(false);
    }

    /// Delays every `/v1/` request by `d` before it is handled (`Duration::ZERO` turns it off).
    pub fn set_latency(&self, d: Duration) {
        self.shared.set_latency(d);
    }

    /// Restarts with all state lost: KV, sessions, lock-delays and the catalog start over, and
    /// every open connection is dropped. The address stays the same, and so does the raft
    /// index: writes after the restart get indexes above every one handed out before (as a
    /// real cluster keeps its index when sessions are lost), so fencing tokens keep
    /// increasing. Only a fresh dev server starts its indexes again.
    pub fn restart(&self) {
        self.shared.restart();
    }

    /// `false` enters "no cluster leader" mode as a server answers it at once: KV,
    /// session, txn, catalog and health endpoints answer `500 No cluster leader` and
    /// `/v1/status/leader` answers `""`. Session TTL timers stop, as they do on a cluster
    /// without a leader, and restart at a full 2×TTL when a leader returns (`true`).
    /// [`DevServer::set_no_leader`] chooses how the window answers.
    pub fn set_leader(&self, present: bool) {
        if present {
            self.end_no_leader();
        } else {
            self.set_no_leader(NoLeader::default());
        }
    }

    /// Starts a "no cluster leader" window that answers as `mode` says: requests that
    /// need the leader wait up to `mode.hold` for one (as Consul's `rpc_hold_timeout`), then
    /// fail with a server's or a client agent's 500 texts. Ended by
    /// [`DevServer::set_leader`]`(true)` or [`DevServer::end_no_leader`].
    pub fn set_no_leader(&self, mode: NoLeader) {
        self.shared.set_leader(false, Some(mode));
        self.shared.timer_kick.notify_one();
    }

    /// Ends a "no cluster leader" window: a leader is elected, session TTL timers restart
    /// at a full 2×TTL, and held requests are answered.
    pub fn end_no_leader(&self) {
        // Timers first, so no request answered by the new leader sees an old timer.
        self.shared.write(|st| st.rearm_all_timers());
        self.shared.set_leader(true, None);
        self.shared.timer_kick.notify_one();
    }

    /// Starts (or stops) recording every `/v1/` request in the journal.
    pub fn record_requests(&self, on: bool) {
        self.shared.journal.set(on);
    }

    /// The requests recorded since [`DevServer::record_requests`]`(true)` (the last
    /// 100,000 at most), oldest first.
    pub fn journal(&self) -> Vec<JournalEntry> {
        self.shared.journal.entries()
    }

    /// Invalidates a session now, as a failed TTL or health check would: its keys are released
    /// or deleted per its behaviour and its lock-delay applies. False when it does not exist.
    pub fn invalidate_session(&self, id: &str) -> bool {
        self.shared.invalidate_session(id)
    }

    /// Marks the agent node's `serfHealth` check critical, as when the node fails: every session
    /// bound to it is invalidated, and new sessions are refused until [`DevServer::heal_node`].
    pub fn fail_node(&self) {
        self.shared.set_serf_health(CheckStatus::Critical);
    }

    /// Marks the agent node's `serfHealth` check passing again.
    pub fn heal_node(&self) {
        self.shared.set_serf_health(CheckStatus::Passing);
    }

    /// The connections the server holds open now (accepted and not yet closed).
    pub fn open_connections(&self) -> usize {
        self.shared.open_connections()
    }

    /// The `/v1/` requests seen since start or the last [`DevServer::reset_request_counts`].
    pub fn request_counts(&self) -> RequestCounts {
        self.shared.counts()
    }

    /// Zeroes the request counters.
    pub fn reset_request_counts(&self) {
        self.shared.reset_counts();
    }

    /// The last raft-equivalent index handed out.
    pub fn current_index(&self) -> u64 {
        self.shared.read(|st| st.current_index())
    }

    /// Whether the server has stopped because it was asked to leave (`PUT /v1/agent/leave`):
    /// then nothing answers on its addresses any more.
    pub fn has_left(&self) -> bool {
        self.shared
            .stopped_after_leave
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Runs `f` once, on the server's thread, when the server stops after a leave.
    pub(crate) fn on_left(&self, f: impl FnOnce() + Send + 'static) {
        *self
            .shared
            .on_left
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Box::new(f));
    }

    /// Stops the server and joins its thread.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        // Release paused requests so their tasks can finish with the runtime.
        self.shared.set_paused(false);
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for DevServer {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

/// Fires session TTL timers and TTL checks (leader only).
async fn ttl_timers(shared: Arc<Shared>) {
    loop {
        let kicked = shared.timer_kick.notified();
        tokio::pin!(kicked);
        kicked.as_mut().enable();
        let next = if shared.has_leader() {
            let now = Instant::now();
            shared.write_quiet(|st| {
                st.expire_sessions(now);
                st.expire_checks(now);
                st.reap_services(now);
            });
            shared.read(|st| match (st.next_timer(), st.next_check_deadline()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            })
        } else {
            None
        };
        match next {
            Some(at) => {
                tokio::select! {
                    _ = kicked => {}
                    _ = tokio::time::sleep_until(at.into()) => {}
                }
            }
            None => kicked.await,
        }
    }
}

/// Reaps tombstones older than `tombstone_ttl`, every 30 s as Consul's granularity.
async fn tombstone_reaper(shared: Arc<Shared>) {
    let period = shared
        .cfg
        .tombstone_ttl
        .min(Duration::from_secs(30))
        .max(Duration::from_millis(10));
    loop {
        tokio::time::sleep(period).await;
        shared.write_quiet(|st| st.reap_tombstones());
    }
}
