//! Managed sessions: the local lease view (state, deadline) and loss signals.

use std::fmt;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::select;

use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::runtime::dispatcher::Job;
use crate::transport::conn::Conn;

/// Why a session was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LostReason {
    /// Consul no longer has the session: destroyed by someone else, TTL expired,
    /// a check failed, or a renew answered 404.
    Invalidated,
    /// The local lease deadline passed without a successful renew.
    DeadlineExceeded,
    /// This process destroyed it ([`Session::destroy`]).
    Destroyed,
    /// The client was closed.
    ClientClosed,
}

impl LostReason {
    /// A stable lowercase name (`"invalidated"`, `"deadline_exceeded"`, `"destroyed"`,
    /// `"client_closed"`), the one the Python and Node bindings report.
    pub fn name(self) -> &'static str {
        match self {
            LostReason::Invalidated => "invalidated",
            LostReason::DeadlineExceeded => "deadline_exceeded",
            LostReason::Destroyed => "destroyed",
            LostReason::ClientClosed => "client_closed",
        }
    }
}

/// Why a release found nothing to release, in words, for the bindings'
/// not-held errors (one text in every language): `what` names the holding
/// (`lock "jobs/a"`), `last` is why its last holding ended (`None`: never
/// acquired), as its `Display` and stable `name()` give it.
pub fn not_held_message(what: &str, last: Option<(&str, String)>) -> String {
    match last {
        None | Some(("released", _)) => {
            format!("release of {what}, which is not held (never acquired, or already released)")
        }
        Some(("client_closed", _)) => {
            format!("release of {what}, which is not held: its client was closed")
        }
        Some((_, shown)) => format!(
            "release of {what}, which is not held: the holding was lost ({shown}) before this \
             release; work done under it must stop (watch its loss signals: callback, wait or \
             cancel token)"
        ),
    }
}

/// The local view of a managed session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Renewals succeed and the deadline has not passed.
    Held,
    /// The last renew failed; the deadline has not passed yet.
    Suspect,
    /// The session is gone, or can no longer be trusted.
    Lost(LostReason),
}

/// A change of a managed session's state, as given to callbacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEvent {
    /// First failed renew after a success.
    Suspect,
    /// A renew succeeded again after [`SessionEvent::Suspect`].
    Recovered,
    /// The session is lost (delivered at most once).
    Lost(LostReason),
}

type Callback = Arc<dyn Fn(&SessionEvent) + Send + Sync + 'static>;

struct LeaseInner {
    state: SessionState,
    ttl: Option<Duration>,
    valid_until: Option<Instant>,
    renewing: bool,
    callbacks: Vec<(u64, Callback)>,
    next_callback: u64,
}

/// What a managed session needs of the client that manages it (the client's
/// core implements it): its connection, the callback dispatcher, and the
/// session bookkeeping a loss or a destroy updates. The session knows the
/// client only through this, so the lease sits below the client.
pub(crate) trait SessionHost: Send + Sync {
    /// The connection the session's requests go through.
    fn conn(&self) -> &Conn;
    /// Runs `job` on the dispatcher thread (user callbacks never run elsewhere).
    fn post(&self, job: Job);
    /// Stops tracking session `id` (Consul no longer has it).
    fn forget_session(&self, id: &str);
    /// Destroys session `id` in the background once what is owed on its
    /// behalf is done (see `Core::destroy_later`).
    fn destroy_later(&self, id: &str);
}

/// Shared state of one managed session.
pub(crate) struct SessionShared {
    pub(crate) id: String,
    pub(crate) core: Arc<dyn SessionHost>,
    inner: Mutex<LeaseInner>,
    lost: CancelToken,
    /// Created by this client (destroyed on close).
    pub(crate) owned: bool,
    /// Clean-ups owed to Consul on behalf of this session that are still
    /// pending (`cleanup::Owed`): a session declared lost is destroyed after them.
    pub(crate) owed: AtomicUsize,
}

/// The local deadline of a lease renewed (or created) by a request sent at
/// `sent`: `sent + ttl − margin`; `None` when that is beyond what an `Instant`
/// can hold (a server reporting an absurd TTL must not panic us).
pub(crate) fn lease_end(sent: Instant, ttl: Duration) -> Option<Instant> {
    sent.checked_add(ttl - deadline_margin(ttl))
}

/// Safety margin subtracted from the TTL for the local deadline.
pub(crate) fn deadline_margin(ttl: Duration) -> Duration {
    (ttl / 10).min(Duration::from_secs(2))
}

impl SessionShared {
    pub(crate) fn new(
        core: Arc<dyn SessionHost>,
        id: String,
        ttl: Option<Duration>,
        created_sent_at: Instant,
        owned: bool,
    ) -> SessionShared {
        SessionShared {
            id,
            core,
            inner: Mutex::new(LeaseInner {
                state: SessionState::Held,
                ttl,
                valid_until: ttl.and_then(|t| lease_end(created_sent_at, t)),
                renewing: ttl.is_some(),
                callbacks: Vec::new(),
                next_callback: 0,
            }),
            lost: CancelToken::new(),
            owned,
            owed: AtomicUsize::new(0),
        }
    }

    pub(crate) fn ttl(&self) -> Option<Duration> {
        lock(&self.inner).ttl
    }

    pub(crate) fn valid_until(&self) -> Option<Instant> {
        lock(&self.inner).valid_until
    }

    pub(crate) fn state(&self) -> SessionState {
        lock(&self.inner).state
    }

    pub(crate) fn is_renewing(&self) -> bool {
        let g = lock(&self.inner);
        g.renewing && !matches!(g.state, SessionState::Lost(_))
    }

    pub(crate) fn is_lost(&self) -> bool {
        matches!(self.state(), SessionState::Lost(_))
    }

    /// A renew sent at `sent` succeeded; Consul reports `ttl`.
    pub(crate) fn renewed(&self, sent: Instant, ttl: Option<Duration>) {
        let event = {
            let mut g = lock(&self.inner);
            if matches!(g.state, SessionState::Lost(_)) {
                return;
            }
            if let Some(t) = ttl {
                g.ttl = Some(t);
            }
            if let Some(t) = g.ttl {
                let Some(until) = lease_end(sent, t) else {
                    // A TTL too long to represent: no local deadline to keep.
                    g.valid_until = None;
                    g.state = SessionState::Held;
                    return;
                };
                if until <= Instant::now() {
                    // Answer too late to extend anything useful.
                    drop(g);
                    self.check_deadline();
                    return;
                }
                g.valid_until = Some(until);
            }
            let was = g.state;
            g.state = SessionState::Held;
            (was == SessionState::Suspect).then_some(SessionEvent::Recovered)
        };
        if let Some(e) = event {
            log::info!("baton session {} recovered", self.id);
            self.emit(e);
        }
    }

    /// A renew failed for a reason other than the session being gone.
    pub(crate) fn renew_failed(&self, err: &Error) {
        if self.check_deadline() {
            return;
        }
        let event = {
            let mut g = lock(&self.inner);
            if g.state == SessionState::Held {
                g.state = SessionState::Suspect;
                Some(SessionEvent::Suspect)
            } else {
                None
            }
        };
        if let Some(e) = event {
            log::warn!("baton session {} suspect: renew failed: {err}", self.id);
            self.emit(e);
        }
    }

    /// Moves to Lost if the deadline has passed; returns whether the session is lost.
    pub(crate) fn check_deadline(&self) -> bool {
        let expired = {
            let g = lock(&self.inner);
            match (g.state, g.valid_until) {
                (SessionState::Lost(_), _) => return true,
                (_, Some(until)) => until <= Instant::now(),
                (_, None) => false,
            }
        };
        if expired {
            self.lose(LostReason::DeadlineExceeded);
        }
        expired
    }

    /// Marks the session lost (idempotent). Callbacks run unless the owner
    /// itself ended it (destroy / close).
    pub(crate) fn lose(&self, reason: LostReason) {
        {
            let mut g = lock(&self.inner);
            if matches!(g.state, SessionState::Lost(_)) {
                return;
            }
            g.state = SessionState::Lost(reason);
            g.renewing = false;
        }
        // State first, then the signals (holdings end on the token's hooks), then
        // callbacks; logging last and off this thread (a logger may block: the
        // Python bridge needs the GIL).
        self.lost.cancel();
        let id = self.id.clone();
        if matches!(reason, LostReason::Destroyed | LostReason::ClientClosed) {
            log::debug!("baton session {id} ended: {reason:?}");
        } else {
            self.emit(SessionEvent::Lost(reason));
            self.core.post(Box::new(move || {
                log::warn!("baton session {id} lost: {}", reason.name())
            }));
        }
        // After the signals: the bookkeeping below takes the client's locks and
        // may start the clean-up thread.
        match reason {
            // Consul no longer has it: nothing to do with it any more.
            LostReason::Invalidated => self.core.forget_session(&self.id),
            // Consul may still have it (and keys held by it): once the clean-ups
            // owed on its behalf are done, destroy it (see `destroy_later`).
            LostReason::DeadlineExceeded if self.owned => self.core.destroy_later(&self.id),
            _ => {}
        }
    }

    pub(crate) fn stop_renewing(&self) {
        lock(&self.inner).renewing = false;
    }

    fn emit(&self, event: SessionEvent) {
        let callbacks: Vec<Callback> = lock(&self.inner)
            .callbacks
            .iter()
            .map(|(_, c)| c.clone())
            .collect();
        for cb in callbacks {
            self.core.post(Box::new(move || cb(&event)));
        }
    }
}

/// A session managed by a [`Client`](crate::Client): renewed in the background,
/// watched for invalidation, with loss signals. Cheap to clone.
///
/// Get one from [`Client::create_session`](crate::Client::create_session) or
/// [`Client::default_session`](crate::Client::default_session), or manage one created
/// elsewhere with [`Client::adopt_session`](crate::Client::adopt_session) (never destroyed
/// by the client's close).
#[derive(Clone)]
pub struct Session {
    pub(crate) shared: Arc<SessionShared>,
}

/// What [`Session::wait_lost`] (and its future) says when its timeout passes first.
pub(crate) const STILL_VALID: &str = "session still valid at timeout";
/// What [`Session::wait_lost`] (and its future) says when cancelled.
pub(crate) const WAIT_CANCELLED: &str = "wait for session loss cancelled";

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.shared.id)
            .field("state", &self.state())
            .finish()
    }
}

/// Identifies a registered callback, for [`Session::remove_callback`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallbackId(u64);

impl CallbackId {
    pub(crate) fn new(id: u64) -> CallbackId {
        CallbackId(id)
    }

    pub(crate) fn get(self) -> u64 {
        self.0
    }
}

impl Session {
    /// The session ID.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// The current state. Turns to `Lost(DeadlineExceeded)` as soon as the local
    /// deadline passes, even with no network.
    pub fn state(&self) -> SessionState {
        self.shared.check_deadline();
        self.shared.state()
    }

    /// Whether the session can still be trusted: not lost and before its local
    /// deadline (send time of the last successful renew + TTL − margin).
    pub fn is_valid(&self) -> bool {
        !matches!(self.state(), SessionState::Lost(_))
    }

    /// The TTL Consul last reported (None for a session without TTL).
    pub fn ttl(&self) -> Option<Duration> {
        self.shared.ttl()
    }

    /// The local lease deadline (None for a session without TTL).
    pub fn valid_until(&self) -> Option<Instant> {
        self.shared.valid_until()
    }

    /// A token cancelled when the session is lost, for the holder's work to watch.
    pub fn cancel_token(&self) -> CancelToken {
        self.shared.lost.clone()
    }

    /// Registers a callback for state changes (suspect, recovered, lost). It runs
    /// on the client's dispatcher thread, never under a library lock, never after
    /// the client is closed; a panic is caught and logged. If the session is
    /// already lost, the callback gets that `Lost` event once.
    pub fn on_event(&self, callback: impl Fn(&SessionEvent) + Send + Sync + 'static) -> CallbackId {
        let cb: Callback = Arc::new(callback);
        let (id, lost) = {
            let mut g = lock(&self.shared.inner);
            let id = g.next_callback;
            g.next_callback += 1;
            g.callbacks.push((id, cb.clone()));
            (id, g.state)
        };
        if let SessionState::Lost(r) = lost {
            if !matches!(r, LostReason::Destroyed | LostReason::ClientClosed) {
                let event = SessionEvent::Lost(r);
                self.shared.core.post(Box::new(move || cb(&event)));
            }
        }
        CallbackId(id)
    }

    /// Registers a callback run once when the session is lost.
    pub fn on_lost(&self, callback: impl Fn(LostReason) + Send + Sync + 'static) -> CallbackId {
        self.on_event(move |e| {
            if let SessionEvent::Lost(r) = e {
                callback(*r)
            }
        })
    }

    /// Removes a callback. It may still run once if already queued.
    pub fn remove_callback(&self, id: CallbackId) {
        lock(&self.shared.inner)
            .callbacks
            .retain(|(i, _)| *i != id.0);
    }

    /// Blocks until the session is lost, `timeout` passes (error kind
    /// `Timeout`), or `cancel` is cancelled (kind `Cancelled`). Returns the reason.
    pub fn wait_lost(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<LostReason> {
        let end = crate::foundations::scope::deadline_after(timeout);
        let lost = self.shared.lost.receiver();
        let never = crossbeam_channel::never();
        let cancel_rx = cancel
            .map(|c| c.receiver())
            .unwrap_or_else(|| never.clone());
        loop {
            if let SessionState::Lost(r) = self.state() {
                return Ok(r);
            }
            if cancel.is_some_and(|c| c.is_cancelled()) {
                return Err(Error::new(ErrorKind::Cancelled, WAIT_CANCELLED));
            }
            let now = Instant::now();
            if end.is_some_and(|e| e <= now) {
                return Err(Error::new(ErrorKind::Timeout, STILL_VALID));
            }
            let mut wake = end;
            if let Some(until) = self.shared.valid_until() {
                wake = Some(wake.map_or(until, |w| w.min(until)));
            }
            let tick = match wake {
                Some(w) => crossbeam_channel::at(w),
                None => crossbeam_channel::never(),
            };
            select! {
                recv(lost) -> _ => {}
                recv(cancel_rx) -> _ => {}
                recv(tick) -> _ => {}
            }
        }
    }

    /// Stops renewing: the session then expires on its own (locally at its
    /// deadline, at Consul after up to 2×TTL).
    pub fn stop_renewal(&self) {
        self.shared.stop_renewing();
    }

    /// Destroys the session at Consul (its locks are released, lock-delay
    /// applies) and stops tracking it. Its callbacks are not called.
    pub fn destroy(&self) -> Result<()> {
        let conn = self.shared.core.conn();
        conn.check_usable()?;
        self.shared.lose(LostReason::Destroyed);
        self.shared.core.forget_session(&self.shared.id);
        crate::api::session_api::SessionApi { conn }.destroy(&self.shared.id)
    }
}
