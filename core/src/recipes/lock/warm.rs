//! A lock's warm acquire and release for an event loop: the call's one request written and
//! its answer read by the loop itself (see `http::exchange`), instead of a baton thread that
//! blocks on it and then hands the outcome over (the hop that costs Node and asyncio their
//! speed at a real agent's latency: `docs/src/performance.md`, "The loops' own floors"). A
//! blocking acquire or release drives the same calls on its own thread (`lock::direct`).
//!
//! Only the warm case takes this path: a plain-HTTP client with its loop connection open, the
//! lock's turn and local claim free, a valid session, the key known free from the last
//! release or acquire, and a server known to store txn numbers exactly (one lock txn, as in
//! the blocking path). Anything else is not started ([`Lock::warm_acquire`] returns `None`).
//! Everything but a clean grant, once started, goes on on a baton thread ([`ResumeAcquire`],
//! [`ResumeRelease`]): the blocking path from where the warm attempt left it, with its turn,
//! session and claim, and knowing whether the attempt may have been granted unseen. The request is built and the
//! answer judged by the same functions the blocking path uses.

use std::sync::Arc;
use std::time::Duration;

use super::shared::Attempt;
use super::wire::{self, by_txn};
use super::{Known, Lock, LockShared};
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::recipes::holding::{Hold, Settling};
use crate::runtime::claim::{claim_now, hand_over_claim, unclaim};
pub use crate::transport::http::Interest;

use crate::api::txn::KvOp;
use crate::foundations::sync::{lock, OwnedTurn};
use crate::runtime::lease::Session;
use crate::transport::http::exchange::{Exchange, Progress};
use crate::transport::http::{Request, Response};

/// Where a warm call stands after `advance`.
#[derive(Debug)]
pub enum WarmStep<R> {
    /// Poll the call's socket ([`WarmAcquire::fd`]) for this, then advance again.
    Pending(Interest),
    /// The call's outcome.
    Done(Result<bool>),
    /// Not settled by its one request: finish it on a baton thread (`run`).
    Resume(R),
}

/// A lock acquire in flight on an event loop's connection ([`Lock::warm_acquire`]).
pub struct WarmAcquire {
    sh: Arc<LockShared>,
    session: Session,
    /// This object's acquire turn; `None` once the call has settled or resumed.
    turn: Option<OwnedTurn>,
    known: Known,
    value: Vec<u8>,
    ops: [KvOp; 2],
    req: Request,
    ex: Exchange,
    /// When the call started, if it is a call of its own that counts itself in the client's
    /// metrics when its one request settles it (a binding's; not a try inside an acquire
    /// or an async acquire, which count themselves).
    counted_from: Option<std::time::Instant>,
}

/// The rest of an acquire whose warm attempt did not settle it, for a baton thread.
pub struct ResumeAcquire {
    sh: Arc<LockShared>,
    session: Session,
    turn: OwnedTurn,
    maybe_applied: bool,
}

/// A lock release in flight on an event loop's connection ([`Lock::warm_release`]).
pub struct WarmRelease {
    sh: Arc<LockShared>,
    session: Session,
    value: Vec<u8>,
    /// Whether the call has settled or resumed.
    over: bool,
    exact_txn: bool,
    req: Request,
    ex: Exchange,
}

/// The unlock of a release whose warm request failed on its connection, for a baton thread.
pub struct ResumeRelease {
    sh: Arc<LockShared>,
    session: Session,
    value: Vec<u8>,
}

macro_rules! debug_by_key {
    ($($t:ident),*) => {$(
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t))
                    .field("key", &self.sh.key)
                    .finish_non_exhaustive()
            }
        }
    )*};
}
debug_by_key!(WarmAcquire, ResumeAcquire, WarmRelease, ResumeRelease);

/// What the loop needs of a warm call besides `advance`: its socket and its time.
macro_rules! loop_facing {
    ($($t:ident),*) => {$(
        impl $t {
            /// The socket the loop polls.
            #[cfg(unix)]
            pub fn fd(&self) -> std::os::fd::RawFd {
                self.ex.fd().unwrap_or(-1)
            }

            /// Which connection the call runs on: unique in the process (0 once the call has
            /// no connection), so a loop that keeps the socket registered between calls (a
            /// duplicate of it) can tell this connection from a later one given the same
            /// descriptor number. A connection baton drops is shut down, so a duplicate the
            /// loop still holds turns readable and can be let go.
            pub fn conn_id(&self) -> u64 {
                self.ex.conn_id().unwrap_or(0)
            }

            /// Counts a call its one request settled (`Client::direct_calls`).
            pub(crate) fn count_settled(&self) {
                self.sh
                    .client
                    .core()
                    .direct_calls
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }

            /// The socket, while the call is in flight (a future's readiness thread waits on it).
            pub(crate) fn socket(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
                self.ex.socket()
            }

            /// How long its request may take before the loop gives it up (`abandon`): the
            /// client's request timeout, which bounds every request of a blocking call too.
            pub fn time_limit(&self) -> Duration {
                self.sh.client.conn().transport.request_timeout()
            }
        }
    )*};
}
loop_facing!(WarmAcquire, WarmRelease);

impl Lock {
    /// Starts this lock's acquire as a warm call an event loop drives (see the module docs),
    /// or `None` when it is not one (then call [`Lock::acquire`] on a baton thread). Nothing
    /// is sent until the first `advance`. For the language bindings.
    #[doc(hidden)]
    pub fn warm_acquire(&self) -> Option<WarmAcquire> {
        let sh = &self.shared;
        let core = sh.client.core();
        let transport = &sh.client.conn().transport;
        if core.check_usable().is_err() || !by_txn(&sh.client) {
            return None;
        }
        let turn = sh.acquiring.try_enter_owned()?;
        if self.is_held() {
            return None;
        }
        let session = match &sh.explicit_session {
            Some(s) => s.clone(),
            None => sh.client.current_default_session()?,
        };
        if !session.is_valid() {
            return None;
        }
        {
            let g = lock(&sh.inner);
            if g.retry_at.is_some() {
                return None;
            }
            let k = g.known.as_ref()?;
            // Free (or ours), with exactly our flags: anything else goes the full way.
            let p_ok = k.entry.as_ref().is_none_or(|p| {
                p.flags == sh.flags && p.session.as_deref().is_none_or(|h| h == session.id())
            });
            if !p_ok {
                return None;
            }
        }
        if !claim_now(session.id(), &sh.key, sh.id) {
            return None;
        }
        let gave_up = || {
            unclaim(session.id(), &sh.key, sh.id);
            None
        };
        let Some(conn) = transport.take_loop_conn() else {
            return gave_up();
        };
        let (known, value) = {
            let mut g = lock(&sh.inner);
            match g.known.take() {
                Some(k) => (k, g.value.clone()),
                None => return gave_up(),
            }
        };
        let ops = sh.attempt_ops(&session, &known, &value);
        let rendered = sh
            .client
            .conn()
            .txn_request(&ops)
            .and_then(|req| transport.render(&req).map(|bytes| (req, bytes)));
        let (req, bytes) = match rendered {
            Ok(x) => x,
            Err(_) => {
                transport.give_back_loop_conn(conn);
                lock(&sh.inner).known = Some(known);
                return gave_up();
            }
        };
        Some(WarmAcquire {
            sh: sh.clone(),
            session,
            turn: Some(turn),
            known,
            value,
            ops,
            req,
            ex: Exchange::new(conn, bytes),
            counted_from: Some(std::time::Instant::now()),
        })
    }

    /// [`Lock::warm_acquire`] as a try inside a call that counts itself.
    pub(crate) fn warm_try(&self) -> Option<WarmAcquire> {
        let mut w = self.warm_acquire()?;
        w.counted_from = None;
        Some(w)
    }

    /// Whether this lock's client could make warm calls but has no loop connection open
    /// (then [`Lock::open_loop_conn`], on a baton thread). For the language bindings.
    #[doc(hidden)]
    pub fn wants_loop_conn(&self) -> bool {
        let transport = &self.shared.client.conn().transport;
        !transport.has_loop_conn()
    }

    /// [`Client::open_loop_conn`](crate::Client::open_loop_conn) for this lock's client.
    #[doc(hidden)]
    pub fn open_loop_conn(&self) -> Result<()> {
        self.shared.client.open_loop_conn()
    }

    /// Starts this lock's release as a warm call an event loop drives, or `None` when it is
    /// not one (nothing held, or no loop connection: call [`Lock::release`]). The holding ends
    /// at once, as with [`Lock::release`]. For the language bindings.
    #[doc(hidden)]
    pub fn warm_release(&self) -> Option<WarmRelease> {
        let sh = &self.shared;
        let transport = &sh.client.conn().transport;
        if sh.client.core().check_usable().is_err() {
            return None;
        }
        if !self.is_held() {
            return None;
        }
        let conn = transport.take_loop_conn()?;
        let Some((session, value)) = sh.end_for_release() else {
            transport.give_back_loop_conn(conn);
            return None;
        };
        let exact_txn = by_txn(&sh.client);
        let req =
            crate::api::txn::unlock_request(exact_txn, &sh.key, &value, session.id(), sh.flags);
        match transport.render(&req) {
            Ok(bytes) => Some(WarmRelease {
                sh: sh.clone(),
                session,
                value,
                over: false,
                exact_txn,
                req,
                ex: Exchange::new(conn, bytes),
            }),
            Err(e) => {
                // Cannot happen for a key the acquire sent; if it did, the release is owed.
                transport.give_back_loop_conn(conn);
                let _ = sh.released(&session, value, Err(e));
                None
            }
        }
    }
}

/// What a failed exchange tells the transport's reach and availability records, as any
/// failed request does.
fn connection_failed(sh: &LockShared, req: &Request, e: std::io::Error) {
    sh.client
        .conn()
        .transport
        .conclude_io_failure(req.endpoint(), e);
}

/// The answer of an exchange through the transport's judgement; gives the connection back.
fn answered(
    sh: &LockShared,
    req: &Request,
    resp: Response,
    conn: Option<crate::transport::http::exchange::LoopConn>,
) -> Result<Response> {
    let transport = &sh.client.conn().transport;
    if let Some(c) = conn {
        transport.give_back_loop_conn(c);
    }
    transport.conclude(req.endpoint(), Ok(resp), false)
}

impl WarmAcquire {
    /// Writes, reads and judges what it can without blocking.
    pub fn advance(&mut self) -> WarmStep<ResumeAcquire> {
        let step = self.advance_uncounted();
        if let (WarmStep::Done(result), Some(from)) = (&step, self.counted_from) {
            // Settled by its one request: the call ends here (else `ResumeAcquire::run`
            // counts it).
            let recipe = lock(&self.sh.inner).life.recipe();
            self.sh.client.conn().transport.metrics.acquire(
                recipe,
                crate::recipes::holding::acquire_outcome(None, result),
                from.elapsed(),
            );
        }
        step
    }

    fn advance_uncounted(&mut self) -> WarmStep<ResumeAcquire> {
        match self.ex.advance() {
            Progress::Pending(i) => WarmStep::Pending(i),
            Progress::Failed(e, unsent) => {
                connection_failed(&self.sh, &self.req, e);
                self.resume(!unsent)
            }
            Progress::Answered(resp, conn) => {
                let conn_ = self.sh.client.conn();
                let result = answered(&self.sh, &self.req, resp, conn)
                    .and_then(|r| conn_.txn_judge(&self.ops, &self.req, r));
                let value = self.value.clone();
                match self
                    .sh
                    .judge_attempt(&self.session, &self.known, &value, result)
                {
                    Ok(Attempt::Acquired(mut p)) => {
                        p.value.get_or_insert(value);
                        match self.sh.hold(&self.session, p, None) {
                            Ok(generation) if self.sh.holding_valid(generation) => {
                                self.turn = None;
                                WarmStep::Done(Ok(true))
                            }
                            // Lost before it could be returned: the blocking path decides.
                            Ok(_) => self.resume(false),
                            Err(e) => {
                                // `hold` gave the key back; as the blocking path ends.
                                self.turn = None;
                                unclaim(self.session.id(), &self.sh.key, self.sh.id);
                                WarmStep::Done(Err(e))
                            }
                        }
                    }
                    Ok(Attempt::Unknown(e)) => self.resume(e.kind() != ErrorKind::BadResponse),
                    // Stale, lock-delay, refusals and errors: the blocking path reads again
                    // and answers as it would have.
                    _ => self.resume(false),
                }
            }
        }
    }

    /// Gives the call up as a warm one (its time ran out or its caller cancelled it): the
    /// rest, a baton thread's. The request may have been granted unseen if any of it left.
    /// `None` if the call has already settled or resumed.
    pub fn abandon(mut self) -> Option<ResumeAcquire> {
        let maybe_applied = self.ex.sent_any();
        match self.resume(maybe_applied) {
            WarmStep::Resume(r) => Some(r),
            _ => None,
        }
    }

    fn resume(&mut self, maybe_applied: bool) -> WarmStep<ResumeAcquire> {
        match self.turn.take() {
            Some(turn) => WarmStep::Resume(ResumeAcquire {
                sh: self.sh.clone(),
                session: self.session.clone(),
                turn,
                maybe_applied,
            }),
            None => WarmStep::Done(Err(Error::new(
                ErrorKind::InvalidArgument,
                "this warm acquire has already ended",
            ))),
        }
    }
}

impl Drop for WarmAcquire {
    /// A call dropped in flight (its loop went away): nobody will hold what it may have
    /// been granted, so it is given back; its claim goes with it.
    fn drop(&mut self) {
        if self.turn.take().is_none() {
            return;
        }
        if self.ex.sent_any() {
            let claim = hand_over_claim(self.session.id(), &self.sh.key, self.sh.id);
            self.sh
                .unlock_later(self.value.clone(), &self.session, claim);
        } else {
            unclaim(self.session.id(), &self.sh.key, self.sh.id);
        }
    }
}

impl ResumeAcquire {
    /// Whether the warm request may have been applied (its answer was lost): the rest must
    /// then run with [`ResumeAcquire::run`], which settles that first. Otherwise nothing is
    /// owed, and dropping this lets the acquire start over another way (as a future of
    /// `baton::aio`, which waits without a thread).
    pub fn maybe_applied(&self) -> bool {
        self.maybe_applied
    }

    /// Gives up what this call holds locally (its claim of the key, its turn) and returns the
    /// lock, as a handle whose drop gives back nothing, to start the acquire over another
    /// way. Only when [`ResumeAcquire::maybe_applied`] is false: nothing is owed to Consul.
    pub fn into_restart(self) -> Lock {
        let ResumeAcquire {
            sh, session, turn, ..
        } = self;
        drop(turn);
        unclaim(session.id(), &sh.key, sh.id);
        Lock {
            shared: sh,
            view: true,
        }
    }

    /// Finishes the acquire as [`Lock::acquire`] would from here, blocking (on a baton
    /// thread): `timeout` is what is left of the call's.
    pub fn run(self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool> {
        let sh = self.sh.clone();
        let lock = Lock {
            shared: sh.clone(),
            view: true,
        };
        let settling = Settling::start(crate::foundations::sync::lock(&sh.inner).life.recipe());
        let result = {
            let deadline = crate::foundations::scope::deadline_after(timeout);
            let _scope = crate::foundations::scope::deadline(
                deadline.filter(|_| timeout != Some(Duration::ZERO)),
            );
            self.continue_here(deadline, cancel)
        };
        settling.settle(
            sh.client.core(),
            "lock acquire",
            (timeout, cancel),
            result,
            || Hold::abandon(&lock),
        )
    }

    /// The rest of the acquire, inside the call's judgement and deadline scope (the direct
    /// path's, or [`ResumeAcquire::run`]'s).
    pub(super) fn continue_here(
        self,
        deadline: Option<std::time::Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<bool> {
        let ResumeAcquire {
            sh,
            session,
            turn,
            maybe_applied,
        } = self;
        let _turn = turn;
        sh.acquire_in_turn(deadline, cancel, Some((session, maybe_applied)))
    }
}

/// A warm call the calling thread can drive (the direct path, `lock::direct`).
pub(super) trait Driven {
    /// What finishes it on this thread when its one request does not.
    type Resume;
    /// [`WarmAcquire::advance`] or [`WarmRelease::advance`].
    fn advance(&mut self) -> WarmStep<Self::Resume>;
    /// The exchange in flight, to wait on and to interrupt.
    fn exchange(&self) -> &Exchange;
    /// The client's closing token (a close interrupts the call).
    fn closing(&self) -> CancelToken;
    /// The client's request timeout, which bounds the one request.
    fn time_limit(&self) -> std::time::Duration;
    /// Counts a call its request settled (`Client::direct_calls`).
    fn settled(&self);
}

macro_rules! driven {
    ($($t:ident => $r:ident),*) => {$(
        impl Driven for $t {
            type Resume = $r;
            fn advance(&mut self) -> WarmStep<$r> {
                $t::advance(self)
            }
            fn exchange(&self) -> &Exchange {
                &self.ex
            }
            fn closing(&self) -> CancelToken {
                self.sh.client.conn().closing.clone()
            }
            fn settled(&self) {
                self.sh
                    .client
                    .core()
                    .direct_calls
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            fn time_limit(&self) -> Duration {
                $t::time_limit(self)
            }
        }
    )*};
}
driven!(WarmAcquire => ResumeAcquire, WarmRelease => ResumeRelease);

impl WarmRelease {
    /// Writes, reads and judges what it can without blocking.
    pub fn advance(&mut self) -> WarmStep<ResumeRelease> {
        if self.over {
            return WarmStep::Done(Err(Error::new(
                ErrorKind::InvalidArgument,
                "this warm release has already ended",
            )));
        }
        match self.ex.advance() {
            Progress::Pending(i) => WarmStep::Pending(i),
            Progress::Failed(e, _) => {
                connection_failed(&self.sh, &self.req, e);
                WarmStep::Resume(self.resume())
            }
            Progress::Answered(resp, conn) => {
                let result = answered(&self.sh, &self.req, resp, conn).and_then(|r| {
                    wire::unlocked(
                        self.exact_txn,
                        &self.sh.key,
                        self.session.id(),
                        &self.req,
                        r,
                    )
                });
                let value = std::mem::take(&mut self.value);
                self.over = true;
                WarmStep::Done(self.sh.released(&self.session, value, result))
            }
        }
    }

    /// Gives the call up as a warm one: the unlock, a baton thread's.
    pub fn abandon(mut self) -> ResumeRelease {
        self.resume()
    }

    fn resume(&mut self) -> ResumeRelease {
        self.over = true;
        ResumeRelease {
            sh: self.sh.clone(),
            session: self.session.clone(),
            value: std::mem::take(&mut self.value),
        }
    }
}

impl Drop for WarmRelease {
    /// A release dropped in flight: the unlock is owed, and goes on in the background.
    fn drop(&mut self) {
        if !self.over {
            let r = self.resume();
            let err = Error::new(ErrorKind::Cancelled, "warm release dropped in flight");
            let _ = r.sh.released(&r.session, r.value, Err(err));
        }
    }
}

impl ResumeRelease {
    /// Sends the unlock as [`Lock::release`] would, blocking (on a baton thread).
    pub fn run(self) -> Result<bool> {
        let sh = &self.sh;
        let result = wire::unlock(
            &sh.client,
            &sh.key,
            &self.value,
            self.session.id(),
            sh.flags,
        );
        sh.released(&self.session, self.value, result)
    }
}
