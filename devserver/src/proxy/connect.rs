//! An HTTP CONNECT proxy (what `HTTPS_PROXY`/`HTTP_PROXY` name), for testing clients that
//! talk to Consul through one. Built on hyper: its HTTP/1 server reads the requests and hands
//! over the connection of an answered CONNECT (`hyper::upgrade`), whose bytes are then copied
//! both ways to the target. The handle and its semantics are documented on [`ConnectProxy`].

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use super::bind;

/// How long a CONNECT waits for the target to accept before the proxy answers 504.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Counters shared by the connections and the handle.
#[derive(Default)]
struct Counters {
    tunnels: AtomicU64,
}

/// A running HTTP CONNECT proxy on `127.0.0.1`, for tests of clients configured with
/// `HTTPS_PROXY`/`HTTP_PROXY` (or an explicit proxy setting). It runs on a thread of its own
/// with its own Tokio runtime, so plain synchronous code can use it; [`ConnectProxy::stop`] or
/// drop closes the listener and every tunnel and joins the thread.
///
/// ```no_run
/// use baton_devserver::{Config, ConnectProxy, DevServer};
/// let server = DevServer::start(Config::default()).unwrap();
/// let proxy = ConnectProxy::start().unwrap();
/// // HTTPS_PROXY=<proxy.url()> for the client under test, which then reaches
/// // server.addr() through a CONNECT tunnel:
/// println!("HTTPS_PROXY={} CONSUL_HTTP_ADDR={}", proxy.url(), server.http_addr());
/// // ... run the client ...
/// assert!(proxy.tunnels() > 0, "the client bypassed the proxy");
/// ```
///
/// What it answers, precisely:
///
/// - `CONNECT host:port` (the authority form; a host name is resolved by the proxy): the proxy
///   connects to the target first, then answers `200` and from there on copies bytes both ways
///   between the client and the target (TLS inside the tunnel is the client's business; an
///   orderly close by either side is passed on as one). The tunnel is counted by
///   [`ConnectProxy::tunnels`] when the target has accepted, before the `200` is sent.
/// - A CONNECT whose target refuses the connection or cannot be resolved: `502 Bad Gateway`,
///   with the reason as plain text. One whose target does not accept within 10 s: `504
///   Gateway Timeout`. A CONNECT target without a port: `400 Bad Request`. None of these
///   is counted as a tunnel, and the client connection stays open for another request.
/// - Any other method, absolute-URI forwarding (`GET http://host/...`) included: `405 Method
///   Not Allowed` with `Allow: CONNECT`. ureq, baton's HTTP client, tunnels `http://`
///   targets with CONNECT too, so it never asks a proxy to forward a request itself.
///
/// There is no authentication: a `Proxy-Authorization` header is ignored.
pub struct ConnectProxy {
    addr: SocketAddr,
    counters: Arc<Counters>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ConnectProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectProxy")
            .field("addr", &self.addr)
            .field("tunnels", &self.tunnels())
            .finish_non_exhaustive()
    }
}

impl ConnectProxy {
    /// Binds `127.0.0.1` on a free port and starts serving, on a thread of its own. Returns
    /// once the proxy accepts connections.
    pub fn start() -> io::Result<ConnectProxy> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("baton-connect-proxy-worker")
            .enable_all()
            .build()?;
        let listener = {
            let _in_runtime = rt.enter();
            bind(SocketAddr::from(([127, 0, 0, 1], 0)))?
        };
        let addr = listener.local_addr()?;
        let counters = Arc::new(Counters::default());
        let (tx, rx) = oneshot::channel();
        let c2 = counters.clone();
        let thread = std::thread::Builder::new()
            .name("baton-connect-proxy".into())
            .spawn(move || {
                rt.block_on(async move {
                    tokio::select! {
                        _ = accept_loop(listener, c2) => {}
                        _ = rx => {}
                    }
                });
                // Drops every connection and tunnel task, closing their sockets.
                rt.shutdown_timeout(Duration::from_secs(2));
            })?;
        Ok(ConnectProxy {
            addr,
            counters,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// The address the proxy listens on (`127.0.0.1` and the port it was given).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`: the form `HTTPS_PROXY`/`HTTP_PROXY` take.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many CONNECT tunnels the proxy has opened since it started (targets that accepted
    /// and were answered `200`), whether still open or not.
    pub fn tunnels(&self) -> u64 {
        self.counters.tunnels.load(Ordering::SeqCst)
    }

    /// Closes the listener and every connection and tunnel and joins the proxy's thread.
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

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

async fn accept_loop(listener: TcpListener, counters: Arc<Counters>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                log::warn!("baton-devserver connect proxy: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let counters = counters.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                serve(req, counters.clone())
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades()
                .await
            {
                log::debug!("baton-devserver connect proxy: connection: {e}");
            }
        });
    }
}

/// Answers one request: a CONNECT opens a tunnel, anything else is refused.
async fn serve(
    req: Request<Incoming>,
    counters: Arc<Counters>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != Method::CONNECT {
        let mut resp = text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "this proxy only tunnels (CONNECT host:port), it does not forward {} requests\n",
                req.method()
            ),
        );
        resp.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("CONNECT"));
        return Ok(resp);
    }
    let Some(target) = req
        .uri()
        .authority()
        .filter(|a| a.port_u16().is_some())
        .map(|a| a.as_str().to_string())
    else {
        return Ok(text(
            StatusCode::BAD_REQUEST,
            format!("CONNECT wants host:port, got {:?}\n", req.uri().to_string()),
        ));
    };
    let upstream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&target)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            log::debug!("baton-devserver connect proxy: {target}: {e}");
            return Ok(text(
                StatusCode::BAD_GATEWAY,
                format!("cannot connect to {target}: {e}\n"),
            ));
        }
        Err(_) => {
            return Ok(text(
                StatusCode::GATEWAY_TIMEOUT,
                format!("{target} did not accept within {CONNECT_TIMEOUT:?}\n"),
            ))
        }
    };
    let _ = upstream.set_nodelay(true);
    counters.tunnels.fetch_add(1, Ordering::SeqCst);
    // The connection is handed over once the 200 below has been written.
    tokio::spawn(async move {
        let mut upstream = upstream;
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => {
                let mut client = TokioIo::new(upgraded);
                if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
                    log::debug!("baton-devserver connect proxy: tunnel to {target}: {e}");
                }
            }
            Err(e) => log::debug!("baton-devserver connect proxy: upgrade for {target}: {e}"),
        }
    });
    Ok(Response::new(Full::new(Bytes::new())))
}

/// A plain-text answer.
fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}
