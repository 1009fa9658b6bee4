//! A TCP fault proxy: faults that hit one client alone. Point one client at the proxy and the
//! proxy at the server (a dev server or a real Consul agent); the proxy forwards bytes both ways
//! until told to misbehave, while other clients keep talking to the server directly. The
//! server-wide faults live under `/_devserver/` (see the control module); these live beside them.
//!
//! The handle, its semantics and the control API are documented on [`FaultProxy`].

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

/// Counts a connection as open until dropped (also when the runtime drops its task unrun).
struct OpenGuard(Arc<Shared>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (client, _) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                log::warn!("baton-devserver proxy: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // The reset epoch at accept time: a reset from now on covers this connection.
        let epoch = shared.ctl.borrow().reset_epoch;
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        shared.open.fetch_add(1, Ordering::SeqCst);
        let guard = OpenGuard(shared.clone());
        let _ = client.set_nodelay(true);
        tokio::spawn(serve_conn(client, guard, epoch));
    }
}

/// How a connection's forwarding ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Both sides closed their half in order.
    Eof,
    /// A read or write failed.
    Failed,
    /// The byte budget is spent.
    Spent,
    /// [`FaultProxy::reset`].
    Reset,
}

/// One connection's byte budget under [`FaultProxy::drop_after`].
struct Budget(Mutex<BudgetState>);

struct BudgetState {
    /// The `drop_epoch` the budget was taken from.
    epoch: u64,
    /// Bytes still allowed (`None`: no limit).
    remaining: Option<u64>,
}

impl Budget {
    fn new(ctl: &Ctl) -> Budget {
        Budget(Mutex::new(BudgetState {
            epoch: ctl.drop_epoch,
            remaining: ctl.faults.drop_after,
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, BudgetState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a fresh budget when the setting changed since; true when the setting is a budget
    /// of zero just taken (nothing may pass: close now).
    fn sync(&self, ctl: &Ctl) -> bool {
        let mut st = self.state();
        if st.epoch != ctl.drop_epoch {
            st.epoch = ctl.drop_epoch;
            st.remaining = ctl.faults.drop_after;
        }
        st.remaining == Some(0) && ctl.faults.drop_after == Some(0)
    }

    /// Of a chunk of `n` bytes, how many may pass, and whether the budget is spent after them.
    fn take(&self, ctl: &Ctl, n: usize) -> (usize, bool) {
        self.sync(ctl);
        let mut st = self.state();
        match st.remaining {
            None => (n, false),
            Some(r) => {
                let allowed = r.min(n as u64);
                st.remaining = Some(r - allowed);
                (allowed as usize, r - allowed == 0)
            }
        }
    }
}

async fn serve_conn(mut client: TcpStream, guard: OpenGuard, reset_epoch: u64) {
    let shared = guard.0.clone();
    let rx = shared.ctl.subscribe();
    let budget = Budget::new(&rx.borrow());
    let connect = {
        let mut rx = rx.clone();
        let upstream = shared.upstream;
        async move {
            // A blackhole holds new connections before they reach the server.
            forwarding(&mut rx).await;
            TcpStream::connect(upstream).await
        }
    };
    let upstream = tokio::select! {
        r = connect => r,
        () = reset_requested(rx.clone(), reset_epoch) => {
            abort(&client);
            return;
        }
        () = budget_zeroed(rx.clone(), &budget) => return,
    };
    let mut upstream = match upstream {
        Ok(u) => u,
        Err(e) => {
            log::debug!(
                "baton-devserver proxy: cannot connect to {}: {e}",
                shared.upstream
            );
            abort(&client);
            return;
        }
    };
    let _ = upstream.set_nodelay(true);
    let end = {
        let (mut client_r, mut client_w) = client.split();
        let (mut up_r, mut up_w) = upstream.split();
        let to_server = pump(
            &mut client_r,
            &mut up_w,
            &shared.to_upstream,
            &budget,
            rx.clone(),
        );
        let to_client = pump(
            &mut up_r,
            &mut client_w,
            &shared.to_client,
            &budget,
            rx.clone(),
        );
        tokio::select! {
            e = both(to_server, to_client) => e,
            () = reset_requested(rx.clone(), reset_epoch) => End::Reset,
            () = budget_zeroed(rx.clone(), &budget) => End::Spent,
        }
    };
    match end {
        End::Eof => {}
        End::Spent => {
            let _ = client.shutdown().await;
            let _ = upstream.shutdown().await;
        }
        End::Failed | End::Reset => {
            abort(&client);
            abort(&upstream);
        }
    }
    drop(guard);
}

/// Makes the socket's close send a reset (the socket is closed when dropped).
fn abort(stream: &TcpStream) {
    let _ = stream.set_zero_linger();
}

/// Runs both directions: an orderly close of one half leaves the other running; anything
/// else ends both.
async fn both(a: impl Future<Output = End>, b: impl Future<Output = End>) -> End {
    tokio::pin!(a);
    tokio::pin!(b);
    let (mut a_done, mut b_done) = (false, false);
    while !(a_done && b_done) {
        tokio::select! {
            e = &mut a, if !a_done => {
                if e != End::Eof {
                    return e;
                }
                a_done = true;
            }
            e = &mut b, if !b_done => {
                if e != End::Eof {
                    return e;
                }
                b_done = true;
            }
        }
    }
    End::Eof
}

/// Copies one direction, applying the faults chunk by chunk.
async fn pump<R, W>(
    from: &mut R,
    to: &mut W,
    counter: &AtomicU64,
    budget: &Budget,
    mut rx: watch::Receiver<Ctl>,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    loop {
        // Under a blackhole nothing is read: the kernel holds what the peer sends.
        forwarding(&mut rx).await;
        let n = match from.read(&mut buf).await {
            Ok(0) => {
                let _ = to.shutdown().await;
                return End::Eof;
            }
            Ok(n) => n,
            Err(_) => return End::Failed,
        };
        let (pause, allowed, spent) = {
            let ctl = rx.borrow();
            let (allowed, spent) = budget.take(&ctl, n);
            (chunk_delay(&ctl.faults), allowed, spent)
        };
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        // A chunk read just before a blackhole is held until it ends.
        forwarding(&mut rx).await;
        if allowed > 0 {
            if to.write_all(&buf[..allowed]).await.is_err() {
                return End::Failed;
            }
            counter.fetch_add(allowed as u64, Ordering::SeqCst);
        }
        if spent {
            return End::Spent;
        }
    }
}

/// The delay for one chunk: `delay ± jitter`, never below zero.
fn chunk_delay(f: &ProxyFaults) -> Duration {
    if f.jitter.is_zero() {
        return f.delay;
    }
    let base = u64::try_from(f.delay.as_nanos()).unwrap_or(u64::MAX);
    let j = u64::try_from(f.jitter.as_nanos()).unwrap_or(u64::MAX / 2);
    let draw = rand::thread_rng().gen_range(0..=j.saturating_mul(2));
    Duration::from_nanos(base.saturating_add(draw).saturating_sub(j))
}

/// Returns once no blackhole is on.
async fn forwarding(rx: &mut watch::Receiver<Ctl>) {
    // The sender lives in `Shared`, which outlives every connection task.
    let _ = rx.wait_for(|c| !c.faults.blackhole).await;
}

/// Returns once a reset newer than `epoch` was asked for.
async fn reset_requested(mut rx: watch::Receiver<Ctl>, epoch: u64) {
    if rx.wait_for(|c| c.reset_epoch != epoch).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Returns once a budget of zero applies to this connection.
async fn budget_zeroed(mut rx: watch::Receiver<Ctl>, budget: &Budget) {
    loop {
        if budget.sync(&rx.borrow_and_update()) {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

// ----- the HTTP control API -----

async fn control_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                log::warn!("baton-devserver proxy: control accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                async move {
                    let (status, body) = control(&shared, req.method(), req.uri());
                    Ok::<_, Infallible>(respond(status, body))
                }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await
            {
                log::debug!("baton-devserver proxy: control connection: {e}");
            }
        });
    }
}

/// A control answer: JSON (`Ok`) or plain text (`Err`).
type Answer = Result<serde_json::Value, String>;

fn respond(status: u16, body: Answer) -> Response<Full<Bytes>> {
    let (ctype, bytes) = match body {
        Ok(v) => {
            let mut b = serde_json::to_vec(&v).unwrap_or_default();
            b.push(b'\n');
            ("application/json", b)
        }
        Err(text) => ("text/plain; charset=utf-8", text.into_bytes()),
    };
    let mut resp = Response::new(Full::new(Bytes::from(bytes)));
    *resp.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(ctype),
    );
    resp
}

/// A non-negative Go duration from the query parameter `name`.
fn duration_param(q: &Query, name: &str) -> Result<Duration, String> {
    let v = q.get(name);
    match parse_go_duration(v) {
        Ok(ns) if ns >= 0 => Ok(Duration::from_nanos(ns as u64)),
        Ok(_) => Err(format!("?{name}= must not be negative, got {v:?}")),
        Err(e) => Err(format!(
            "bad ?{name}= (want a Go duration such as 50ms): {e}"
        )),
    }
}

fn go_duration(d: Duration) -> String {
    format_go_duration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Handles one control request: the status code and the answer.
fn control(shared: &Shared, method: &Method, uri: &hyper::Uri) -> (u16, Answer) {
    let q = Query::parse(uri.query());
    let action = *method == Method::PUT || *method == Method::POST;
    let done = || (200, Ok(json!(true)));
    let bad = |msg: String| (400, Err(msg));
    match (uri.path(), action) {
        ("/_proxy/blackhole", true) => {
            shared.set_blackhole();
            done()
        }
        ("/_proxy/heal", true) => {
            shared.heal();
            done()
        }
        ("/_proxy/reset", true) => {
            shared.reset();
            done()
        }
        ("/_proxy/delay", true) => {
            if !q.has("d") {
                return bad(
                    "missing ?d= (a Go duration such as 50ms; 0s turns the delay off)".into(),
                );
            }
            let base = match duration_param(&q, "d") {
                Ok(d) => d,
                Err(e) => return bad(e),
            };
            let jitter = if q.has("jitter") {
                match duration_param(&q, "jitter") {
                    Ok(d) => d,
                    Err(e) => return bad(e),
                }
            } else {
                Duration::ZERO
            };
            shared.set_delay(base, jitter);
            done()
        }
        ("/_proxy/drop-after", true) => {
            let v = q.get("bytes");
            if !q.has("bytes") {
                return bad("missing ?bytes= (a byte count)".into());
            }
            match v.parse::<u64>() {
                Ok(n) if v.bytes().all(|b| b.is_ascii_digit()) => {
                    shared.drop_after(n);
                    done()
                }
                _ => bad(format!("?bytes= must be a non-negative integer, got {v:?}")),
            }
        }
        ("/_proxy/status", false) if *method == Method::GET => {
            let f = shared.faults();
            let s = shared.stats();
            let body = json!({
                "mode": if f.blackhole { "blackhole" } else { "forward" },
                "upstream": shared.upstream.to_string(),
                "delay": go_duration(f.delay),
                "jitter": go_duration(f.jitter),
                "drop_after": f.drop_after,
                "connections": {"accepted": s.accepted, "open": s.open},
                "bytes": {"to_upstream": s.bytes_to_upstream, "to_client": s.bytes_to_client},
            });
            (200, Ok(body))
        }
        (path, _) => (
            404,
            Err(format!("unknown control request: {method} {path}")),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jittered_delay_stays_within_bounds() {
        let f = ProxyFaults {
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(20),
            ..ProxyFaults::default()
        };
        for _ in 0..1000 {
            assert!(chunk_delay(&f) <= Duration::from_millis(30));
        }
        let f = ProxyFaults {
            delay: Duration::from_millis(50),
            ..ProxyFaults::default()
        };
        assert_eq!(chunk_delay(&f), Duration::from_millis(50));
    }

    #[test]
    fn budget_counts_down_and_renews_on_a_new_setting() {
        let mut ctl = Ctl::default();
        let b = Budget::new(&ctl);
        assert_eq!(b.take(&ctl, 100), (100, false));
        ctl.faults.drop_after = Some(10);
        ctl.drop_epoch += 1;
        assert!(!b.sync(&ctl));
        assert_eq!(b.take(&ctl, 4), (4, false));
        assert_eq!(b.take(&ctl, 100), (6, true));
        assert_eq!(b.take(&ctl, 1), (0, true));
        ctl.faults.drop_after = Some(0);
        ctl.drop_epoch += 1;
        assert!(b.sync(&ctl));
        ctl.faults.drop_after = None;
        ctl.drop_epoch += 1;
        assert_eq!(b.take(&ctl, 7), (7, false));
    }
}
