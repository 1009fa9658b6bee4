//! The request engine: every request goes out on a connection baton drives itself
//! ([`LoopConn`]: TCP, a unix socket, or a proxy's tunnel; TLS on top for HTTPS), rendered and
//! framed by `ureq-proto` ([`Exchange`]). A blocking call drives
//! its exchange on its own thread ([`drive_here`]); an event loop drives the same exchange
//! from its poll (`lock::warm`); the key hub's poller drives many at once. They share the
//! client's idle connections, so a cold call leaves behind the connection a warm one takes.
//!
//! What the engine gives every request: the request timeout or the call's own bound (a
//! blocking query's wait plus its margin) over connecting, writing and reading alike; the
//! caller's cancel token and the client's close interrupt it (their hooks shut the connection
//! down, ending the poll); one retry on a fresh connection when a pooled one turns out closed
//! by the agent.

use std::time::{Duration, Instant};

use super::Transport;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::transport::http::exchange::{drive_here, Exchange, LoopConn, Progress};
use crate::transport::http::{Request, Response};
use crate::transport::net::{connect_tcp, handshake, Dial};

/// The most idle connections a client keeps for its next requests (more are closed when
/// given back): the threads that send at once, bounded (`docs/src/design/architecture.md`).
const IDLE_CONNS: usize = 8;

/// How one exchange on one connection ended.
enum Outcome {
    /// Answered (the connection went back to the idle ones if it can carry another).
    Answered(Response),
    /// Interrupted or out of time, maybe applied.
    Stopped,
    /// The connection failed; `unsent`: not a byte of the request left.
    Failed(std::io::Error, bool),
}

impl Transport {
    /// An idle connection, taken for one exchange (`None`: none is idle). One the agent
    /// closed while it sat idle is dropped on the way.
    pub(crate) fn take_loop_conn(&self) -> Option<LoopConn> {
        let mut idle = lock(&self.idle);
        while let Some(mut c) = idle.as_mut()?.pop() {
            if c.reusable() {
                return Some(c);
            }
        }
        None
    }

    /// Gives a connection back after a clean exchange, for the next one (closed instead
    /// once the client has closed, or when enough are idle).
    pub(crate) fn give_back_loop_conn(&self, conn: LoopConn) {
        if let Some(idle) = lock(&self.idle).as_mut().filter(|i| i.len() < IDLE_CONNS) {
            idle.push(conn);
        }
    }

    /// Closes every idle connection, and each one given back from now on (the client
    /// closed; an event loop's warm call may still end after that).
    pub(crate) fn close_idle_conns(&self) {
        *lock(&self.idle) = None;
    }

    /// Whether a connection is open and idle.
    pub(crate) fn has_loop_conn(&self) -> bool {
        lock(&self.idle).as_ref().is_some_and(|i| !i.is_empty())
    }

    /// Opens an idle connection if none is (blocking: run on a baton thread, never a
    /// loop's), within the connect timeout.
    pub(crate) fn open_loop_conn(&self) -> Result<()> {
        if self.has_loop_conn() {
            return Ok(());
        }
        let conn = self.connect_loop_conn()?;
        self.give_back_loop_conn(conn);
        Ok(())
    }

    /// A new non-blocking connection to the agent (blocking while it connects and, over
    /// HTTPS, shakes hands, within the connect timeout in all).
    pub(crate) fn connect_loop_conn(&self) -> Result<LoopConn> {
        self.connect_within(self.connect_timeout)
            .map_err(|io| self.failure_of(io, false))
    }

    /// Connects (through the proxy's tunnel, if any) and shakes hands over HTTPS, within
    /// `budget` in all.
    fn connect_within(&self, budget: Duration) -> std::io::Result<LoopConn> {
        let stop_at = Instant::now() + budget.max(Duration::from_millis(1));
        let stream = match (&self.proxy, &self.dial) {
            (Some(proxy), Dial::Tcp { .. }) => {
                let target = self.dial.authority().unwrap_or_default();
                proxy.tunnel(&target, stop_at, connect_tcp)?
            }
            _ => self.dial.connect(stop_at)?,
        };
        match &self.loop_tls {
            None => LoopConn::new(stream),
            Some((config, name)) => {
                let left = stop_at.saturating_duration_since(Instant::now());
                handshake(stream, config.clone(), name.clone(), left)
            }
        }
    }

    /// Sends `req` through the engine on this thread: an idle connection or a new one,
    /// driven until answered, out of time (the request's [`Transport::time_limit`]) or
    /// interrupted (`req.cancel`, `closing`).
    pub(super) fn send_own(
        &self,
        req: &Request,
        closing: Option<&CancelToken>,
    ) -> Result<Response> {
        let endpoint = req.endpoint();
        let limit = self.time_limit(req);
        let users = req.timeout.is_some_and(|t| t <= limit);
        let started = Instant::now();
        let stop_at = started + limit;
        // A blocking query's latency is its wait: not a request latency.
        let timed = req.wait.is_none().then_some(started);
        let tokens: Vec<&CancelToken> = closing.into_iter().chain(req.cancel.as_ref()).collect();
        let mut retried = false;
        loop {
            let pooled = if retried { None } else { self.take_loop_conn() };
            let reused = pooled.is_some();
            let conn = match pooled {
                Some(c) => c,
                None => {
                    let left = stop_at.saturating_duration_since(Instant::now());
                    match self.connect_within(self.connect_timeout.min(left)) {
                        Ok(c) => c,
                        Err(io) => {
                            if let Some(e) = self.interrupted(req, closing) {
                                return Err(e);
                            }
                            let e = if io.kind() == std::io::ErrorKind::TimedOut {
                                self.out_of_time(&endpoint, limit, users, "connect")
                            } else {
                                self.failure(io, endpoint.clone(), retried)
                            };
                            return self.conclude_at(endpoint, Err(e), users, timed);
                        }
                    }
                }
            };
            match self.exchange_on(conn, req, stop_at, &tokens)? {
                Outcome::Answered(resp) => {
                    return self.conclude_at(endpoint, Ok(resp), users, timed)
                }
                Outcome::Stopped => {
                    return self.stopped(req, closing, endpoint, limit, (users, timed))
                }
                Outcome::Failed(io, unsent) => {
                    // A pooled connection the agent had closed (idle timeout, restart, leader
                    // change): the request never reached a live server, so it goes once more
                    // on a new connection. Every request baton sends is safe to repeat (reads,
                    // renews, releases, CAS and check-guarded transactions), except that a
                    // repeated session create may leave a spare session to expire by its TTL.
                    // Not a blocking query that was sent: its connection closing is news (the
                    // agent restarted, maybe with its state lost), and repeating it with the
                    // same index could wait on a server whose index is now below it.
                    let again = !retried
                        && ((reused && unsent) || (stale(&io) && req.wait.is_none()))
                        && Instant::now() < stop_at;
                    if again && self.interrupted(req, closing).is_none() {
                        log::debug!("baton: {endpoint} on a stale connection, retrying once");
                        retried = true;
                        self.metrics.retry();
                        continue;
                    }
                    if let Some(e) = self.interrupted(req, closing) {
                        return Err(e);
                    }
                    let e = self.failure(io, endpoint.clone(), retried);
                    return self.conclude_at(endpoint, Err(e), false, timed);
                }
            }
        }
    }

    /// One exchange of `req` on `conn`, driven here until `stop_at` or a token's cancel.
    fn exchange_on(
        &self,
        conn: LoopConn,
        req: &Request,
        stop_at: Instant,
        tokens: &[&CancelToken],
    ) -> Result<Outcome> {
        let out = match self.render(req) {
            Ok(out) => out,
            Err(e) => {
                self.give_back_loop_conn(conn);
                return Err(e);
            }
        };
        let mut ex = Exchange::new(conn, out);
        Ok(match drive_here(&mut ex, stop_at, tokens) {
            None | Some(Progress::Pending(_)) => Outcome::Stopped,
            Some(Progress::Answered(resp, conn)) => {
                if let Some(conn) = conn {
                    self.give_back_loop_conn(conn);
                }
                Outcome::Answered(resp)
            }
            Some(Progress::Failed(io, unsent)) => Outcome::Failed(io, unsent),
        })
    }

    /// Sends `req` on an idle connection only, driven on this thread: `None` when it cannot
    /// be (none idle, a blocking query, or the connection failed before a byte of the request
    /// left, so the caller sends it the ordinary way). For callers whose next steps settle
    /// an error's either outcome (it may have reached the agent): no retry here.
    pub(crate) fn send_direct(
        &self,
        req: &Request,
        closing: Option<&CancelToken>,
    ) -> Option<Result<Response>> {
        if req.wait.is_some() {
            return None;
        }
        let endpoint = req.endpoint();
        let conn = self.take_loop_conn()?;
        let tokens: Vec<_> = closing.into_iter().chain(req.cancel.as_ref()).collect();
        let limit = self.time_limit(req);
        let users = req.timeout.is_some_and(|t| t <= limit);
        let started = Instant::now();
        let timed = Some(started);
        let outcome = match self.exchange_on(conn, req, started + limit, &tokens) {
            Ok(o) => o,
            Err(e) => return Some(Err(e)),
        };
        Some(match outcome {
            Outcome::Answered(resp) => self.conclude_at(endpoint, Ok(resp), users, timed),
            Outcome::Stopped => self.stopped(req, closing, endpoint, limit, (users, timed)),
            Outcome::Failed(_, true) => return None,
            Outcome::Failed(io, false) => {
                let e = self.failure(io, endpoint.clone(), false);
                self.conclude_at(endpoint, Err(e), false, timed)
            }
        })
    }

    /// The error of a call its caller cancelled or whose client closed, if either happened.
    pub(super) fn interrupted(
        &self,
        req: &Request,
        closing: Option<&CancelToken>,
    ) -> Option<Error> {
        if req.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            return Some(super::cancelled(req.endpoint()));
        }
        closing
            .filter(|c| c.is_cancelled())
            .map(|_| Error::new(ErrorKind::Closed, "client closed").with_endpoint(req.endpoint()))
    }

    /// How a request whose exchange stopped ends: cancelled, closed, or out of time.
    fn stopped(
        &self,
        req: &Request,
        closing: Option<&CancelToken>,
        endpoint: String,
        limit: Duration,
        (users, timed): (bool, Option<Instant>),
    ) -> Result<Response> {
        if let Some(e) = self.interrupted(req, closing) {
            return Err(e);
        }
        let e = self.out_of_time(&endpoint, limit, users, "answer");
        self.conclude_at(endpoint, Err(e), users, timed)
    }

    /// No answer within `limit` (`stage`: what was still awaited).
    fn out_of_time(&self, endpoint: &str, limit: Duration, users: bool, stage: &str) -> Error {
        let whose = if users { "" } else { ", the request timeout" };
        Error::new(
            ErrorKind::Timeout,
            format!("no answer within {limit:?} ({stage}{whose})"),
        )
        .with_endpoint(endpoint.to_string())
        .transient()
    }

    /// A failed connect, read or write of the engine as an [`Error`], with what to do about
    /// it when that is known (the address tried, a TLS setting). `retried`: it failed on a
    /// fresh connection after a pooled one had.
    pub(crate) fn failure(&self, io: std::io::Error, endpoint: String, retried: bool) -> Error {
        self.failure_of(io, retried).with_endpoint(endpoint)
    }

    /// [`Transport::failure`] of no one request (opening a connection ahead of them).
    fn failure_of(&self, io: std::io::Error, retried: bool) -> Error {
        use crate::foundations::tls_hint;
        use std::io::ErrorKind as K;
        let https = self.loop_tls.is_some();
        if let Some(tls) = tls_hint::rustls_in_io(&io) {
            // Advice on TLS reads first, the library's words after it.
            let hint =
                tls_hint::hint_rustls(&self.tls, tls).or_else(|| self.plain_http_answer(tls));
            let err = Error::new(ErrorKind::Connection, format!("TLS error: {tls}"));
            let err = match hint {
                Some(h) => err.led_by(&h),
                None => err,
            };
            return err.with_source(io);
        }
        if let Some(bad) = crate::transport::http::exchange::framing_error(&io) {
            return Error::new(ErrorKind::BadResponse, bad.to_string());
        }
        // Through a proxy, its own words name what failed (`proxy`).
        let unreachable = self.proxy.is_none()
            && matches!(
                io.kind(),
                K::ConnectionRefused | K::HostUnreachable | K::NotFound
            );
        let closed_hint = https
            .then(|| tls_hint::hint_closed(&self.tls, &io))
            .flatten();
        // A fresh HTTPS connection closed under the request too, with no client certificate
        // to offer: how a server that requires one (verify_incoming) refuses with TLS 1.3.
        // Waiting will not mend that.
        let refused_again = retried && stale(&io) && closed_hint.is_some();
        let err = super::io_failure(io);
        let err = if refused_again { err.permanent() } else { err };
        if unreachable {
            err.suffixed(&format!("no Consul agent answered at {}", self.address()))
        } else if let Some(h) = closed_hint {
            err.led_by(&h)
        } else {
            err
        }
    }

    /// Advice when an HTTPS connection met a plain-HTTP answer where a TLS record was due.
    fn plain_http_answer(&self, tls: &rustls::Error) -> Option<String> {
        tls.to_string().contains("InvalidContentType").then(|| {
            format!(
                "{} does not answer TLS: if the agent serves plain HTTP, use an http:// address \
                 (and unset CONSUL_HTTP_SSL)",
                self.base
            )
        })
    }
}

/// Whether the connection died under the request (reset, closed, broken pipe) rather than
/// that the agent refused or timed out.
fn stale(io: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        io.kind(),
        K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof
    )
}
