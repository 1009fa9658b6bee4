//! The connection handle: the transport layer every API module talks through.
//!
//! One per client: the HTTP transport, the token `close` cancels, the checks
//! that the client is still open and used by the process that made it, the
//! send that bounds each request by the calling thread's call scope (see
//! `scope`), what the answers taught about the server (`compat`), and the
//! count of transient failures waited out. The API modules (kv, sessions,
//! txn, agent) borrow a `Conn`, not the `Client`: they know nothing of the
//! client's threads and recipes, and the client's background threads call
//! them exactly as users do.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::foundations::cancel::CancelToken;
use crate::foundations::compat::Learned;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::transport::http::{Request, Response, Transport};

/// A client's connection to Consul (see the module docs).
pub(crate) struct Conn {
    pub(crate) transport: Transport,
    /// Cancelled by `close`: interrupts background I/O and stops the threads.
    pub(crate) closing: CancelToken,
    closed: AtomicBool,
    pid: u32,
    request_timeout: Duration,
    /// What the answers so far taught about the server's behaviour.
    pub(crate) learned: Learned,
    /// Transient failures (no leader, connection refused, …) that calls with
    /// time left waited out and tried again (see `ride_out`).
    pub(crate) transient_retries: AtomicU64,
    /// Lock acquires and releases settled on the direct path (`lock::direct`).
    pub(crate) direct_calls: AtomicU64,
    /// Until when a loss signal does not ask Consul whether its session still exists,
    /// because such a question just went unanswered (`session_api::gone`).
    pub(crate) probes_quiet_until: std::sync::Mutex<Option<std::time::Instant>>,
}

/// The address only: no token, no state.
impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("address", &self.transport.base())
            .finish_non_exhaustive()
    }
}

impl Conn {
    pub(crate) fn new(transport: Transport, request_timeout: Duration) -> Conn {
        Conn {
            transport,
            closing: CancelToken::new(),
            closed: AtomicBool::new(false),
            pid: std::process::id(),
            request_timeout,
            learned: Learned::default(),
            transient_retries: AtomicU64::new(0),
            direct_calls: AtomicU64::new(0),
            probes_quiet_until: std::sync::Mutex::new(None),
        }
    }

    /// An error unless the client is open and this is the process that made it.
    pub(crate) fn check_usable(&self) -> Result<()> {
        let now = std::process::id();
        if now != self.pid {
            return Err(Error::new(
                ErrorKind::Closed,
                format!(
                    "this baton client was created in process {} and cannot be used in \
                     forked process {now}; create a new client after fork()",
                    self.pid
                ),
            ));
        }
        if self.is_closed() {
            return Err(Error::new(ErrorKind::Closed, "the baton client is closed"));
        }
        Ok(())
    }

    /// Whether this is the process that made the client (not a forked child).
    pub(crate) fn in_own_process(&self) -> bool {
        std::process::id() == self.pid
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Marks the client closed; `true` if it already was.
    pub(crate) fn mark_closed(&self) -> bool {
        self.closed.swap(true, Ordering::SeqCst)
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Sends a request, bounded by the calling thread's call scope (the time
    /// left of an acquire's deadline; see `scope`).
    pub(crate) fn send(&self, req: &Request) -> Result<Response> {
        // `close` making owed work passes the closed check and is not
        // interrupted by the closing token (its deadline bounds it).
        let finishing = crate::foundations::scope::is_finishing();
        if !finishing {
            self.check_usable()?;
        }
        let (left, cancel) = crate::foundations::scope::limits(&req.endpoint())?;
        let closing = (!finishing).then_some(&self.closing);
        if left.is_none() && cancel.is_none() {
            return self.transport.send_on(req, closing);
        }
        let mut bounded = req.clone();
        if let Some(left) = left {
            bounded.timeout = Some(bounded.timeout.map_or(left, |t| t.min(left)));
        }
        if bounded.cancel.is_none() {
            bounded.cancel = cancel;
        }
        self.transport.send_on(&bounded, closing)
    }

    /// [`Conn::send`] on an idle connection, driven on this thread (see
    /// `Transport::send_direct`); `None` when it cannot be (send it the ordinary way). An
    /// error may leave the request applied.
    pub(crate) fn send_direct(&self, req: &Request) -> Option<Result<Response>> {
        if crate::foundations::scope::is_finishing() || self.check_usable().is_err() {
            return None;
        }
        let (left, cancel) = match crate::foundations::scope::limits(&req.endpoint()) {
            Ok(limits) => limits,
            Err(e) => return Some(Err(e)),
        };
        let mut bounded = req.clone();
        if let Some(left) = left {
            bounded.timeout = Some(bounded.timeout.map_or(left, |t| t.min(left)));
        }
        if bounded.cancel.is_none() {
            bounded.cancel = cancel;
        }
        self.transport.send_direct(&bounded, Some(&self.closing))
    }

    /// [`Conn::send`], a non-2xx answer turned into an error.
    pub(crate) fn call(&self, req: &Request) -> Result<Response> {
        let resp = self.send(req)?;
        crate::transport::http::check(req, resp)
    }
}
