//! The client's loop connection: the one non-blocking keep-alive connection that event loops
//! (Node, asyncio) and the lock's direct path send their warm calls on, and the connections
//! the key hub's poller opens the same way (see `exchange`).

use std::time::Duration;

use super::{split_host_port, Transport};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::transport::http::exchange::LoopConn;
use crate::transport::http::loop_io::handshake;
use crate::transport::http::stream::Stream;

impl Transport {
    /// Whether an event loop may send this client's requests itself (see `exchange`): HTTP
    /// or HTTPS straight to the agent (TCP or a unix socket), no proxy between.
    pub(crate) fn loop_capable(&self) -> bool {
        (self.base.starts_with("http://") || self.loop_tls.is_some()) && !self.proxied
    }

    /// The idle loop connection, taken for one exchange (`None`: none is open).
    pub(crate) fn take_loop_conn(&self) -> Option<LoopConn> {
        // One the agent closed while it sat idle is dropped (reopened by the next thread call).
        self.loop_conn
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .and_then(|mut c| c.reusable().then_some(c))
    }

    /// Gives a connection back after a clean exchange, for the next one.
    pub(crate) fn give_back_loop_conn(&self, conn: LoopConn) {
        *self.loop_conn.lock().unwrap_or_else(|p| p.into_inner()) = Some(conn);
    }

    /// Whether a loop connection is open and idle.
    pub(crate) fn has_loop_conn(&self) -> bool {
        self.loop_conn
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Opens the loop connection if none is (blocking: run on a baton thread, never a loop's),
    /// within the connect timeout per address.
    pub(crate) fn open_loop_conn(&self) -> Result<()> {
        if !self.loop_capable() || self.has_loop_conn() {
            return Ok(());
        }
        let conn = self.connect_loop_conn()?;
        self.give_back_loop_conn(conn);
        Ok(())
    }

    /// A new non-blocking connection to the agent (blocking while it connects and, over
    /// HTTPS, shakes hands, within the connect timeout per address); only on a
    /// [`Transport::loop_capable`] client.
    pub(crate) fn connect_loop_conn(&self) -> Result<LoopConn> {
        let budget = self
            .agent_config
            .timeouts()
            .connect
            .unwrap_or(Duration::from_secs(10));
        let stream = self.connect_stream(budget)?;
        let made = match &self.loop_tls {
            None => LoopConn::new(stream),
            Some((config, name)) => handshake(stream, config.clone(), name.clone(), budget),
        };
        made.map_err(|e| connect_error(&self.shown, e))
    }

    /// A socket connected to the agent (blocking, within `budget` per address).
    fn connect_stream(&self, budget: Duration) -> Result<Stream> {
        if let Some(unix) = self.resolver.dial.connect_unix() {
            return unix.map_err(|e| connect_error(&self.shown, e));
        }
        let rest = self.base.split_once("://").map_or(&*self.base, |(_, r)| r);
        let authority = rest.split('/').next().unwrap_or_default();
        let (host, port) = split_host_port(authority);
        let host = self
            .resolver
            .target_host(host.trim_start_matches('[').trim_end_matches(']'));
        let default_port = if self.loop_tls.is_some() { 443 } else { 80 };
        let port: u16 = port.and_then(|p| p.parse().ok()).unwrap_or(default_port);
        let connect_err = |e: std::io::Error| connect_error(authority, e);
        let addrs: Vec<std::net::SocketAddr> = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![std::net::SocketAddr::new(ip, port)],
            Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
                .map_err(connect_err)?
                .collect(),
        };
        let mut last = std::io::Error::from(std::io::ErrorKind::NotFound);
        for a in addrs.iter().take(16) {
            match std::net::TcpStream::connect_timeout(a, budget) {
                Ok(s) => return Ok(Stream::Tcp(s)),
                Err(e) => last = e,
            }
        }
        Err(connect_err(last))
    }

    /// Called after a lock release made through ureq. The second such release of a client
    /// with no loop connection open opens one, on the releasing thread: a client that cycles
    /// its locks then makes its next acquires and releases directly (`lock::direct`), while a
    /// one-shot user (the `baton lock` command) never pays for the connect. A failure is
    /// only logged: the next cycle goes through ureq, as before.
    pub(crate) fn after_thread_release(&self) {
        use std::sync::atomic::Ordering;
        if !self.loop_capable() || self.has_loop_conn() {
            return;
        }
        if self.thread_releases.fetch_add(1, Ordering::Relaxed) == 0 {
            return;
        }
        if let Err(e) = self.open_loop_conn() {
            log::debug!("baton: no loop connection for direct lock calls: {e}");
        }
    }
}

/// A connection to `to` that could not be made (transient: the agent may come).
fn connect_error(to: &str, e: std::io::Error) -> Error {
    Error::new(ErrorKind::Connection, format!("connecting to {to}: {e}")).transient()
}

impl Transport {
    /// Sends `req` on the idle loop connection, driven on this thread (polling its socket
    /// between advances) instead of through ureq: `None` when it cannot be (no loop
    /// connection idle, a blocking query, or the connection failed before a byte of the
    /// request left, so the caller sends it the ordinary way). Bounded by the request's
    /// time limit; `req.cancel` and `closing` interrupt it. An error means the request may
    /// have reached the agent: for callers whose next steps settle either outcome.
    pub(crate) fn send_direct(
        &self,
        req: &crate::transport::http::Request,
        closing: Option<&crate::foundations::cancel::CancelToken>,
    ) -> Option<Result<crate::transport::http::Response>> {
        use crate::transport::http::exchange::{drive_here, Exchange, Progress};
        if !self.loop_capable() || req.wait.is_some() {
            return None;
        }
        let endpoint = req.endpoint();
        let conn = self.take_loop_conn()?;
        let out = match self.render(req) {
            Ok(out) => out,
            Err(e) => {
                self.give_back_loop_conn(conn);
                return Some(Err(e));
            }
        };
        let mut ex = Exchange::new(conn, out);
        let tokens: Vec<_> = closing.into_iter().chain(req.cancel.as_ref()).collect();
        let limit = self.time_limit(req);
        let users = req.timeout.is_some_and(|t| t <= limit);
        match drive_here(&mut ex, std::time::Instant::now() + limit, &tokens) {
            None => {
                // Interrupted or out of time, maybe applied: said as the ordinary path says it.
                let e = if closing.is_some_and(|c| c.is_cancelled()) {
                    Error::new(ErrorKind::Closed, "client closed")
                } else if req.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
                    Error::new(ErrorKind::Cancelled, "cancelled")
                } else {
                    let e = Error::new(ErrorKind::Timeout, format!("no answer within {limit:?}"))
                        .with_endpoint(endpoint.clone());
                    return Some(self.conclude(endpoint, Err(e), users));
                };
                Some(Err(e.with_endpoint(endpoint)))
            }
            Some(Progress::Pending(_)) => None,
            Some(Progress::Answered(resp, conn)) => {
                if let Some(conn) = conn {
                    self.give_back_loop_conn(conn);
                }
                Some(self.conclude(endpoint, Ok(resp), users))
            }
            // Not a byte left: the caller sends it the ordinary way.
            Some(Progress::Failed(_, true)) => None,
            Some(Progress::Failed(io, false)) => {
                let e = super::io_error(io, endpoint.clone());
                Some(self.conclude(endpoint, Err(e), false))
            }
        }
    }
}
