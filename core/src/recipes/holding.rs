//! The holding lifecycle every recipe shares: a holding starts, is watched,
//! and ends once — released by its owner or lost — and whoever cares learns
//! it through one of three signals (a callback on the dispatcher, a cancel
//! token, a blocking wait), plus `is_held` and `last_lost` for those who ask.
//!
//! A recipe keeps a [`Lifecycle`] under its own mutex, beside what only it
//! needs (a lock's sequencer and key subscription, a semaphore's slot), and
//! implements [`Holder`]: how to reach that lifecycle and how to end a
//! holding. Everything else — the session check behind `is_held`, the
//! callbacks, `wait_lost`, the cancel token, the not-held message, the
//! guarantee that a cancelled acquire leaves nothing held — is written here
//! once, for [`Lock`](crate::Lock), [`Semaphore`](crate::Semaphore) and
//! [`Election`](crate::Election) alike (and so for every binding).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::select;

use crate::client::Core;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::metrics::{AcquireOutcome, Metrics, Recipe};
use crate::recipes::fence::Sequencer;
use crate::runtime::lease::{CallbackId, LostReason, Session, SessionState};
use crate::runtime::ride_out::Judging;
use crate::transport::conn::Conn;

/// Why a holding ended, whatever the recipe: what [`LockLost`](crate::LockLost)
/// and [`SemaphoreLost`](crate::SemaphoreLost) have in common.
pub trait HoldLost: Copy + PartialEq + fmt::Debug + fmt::Display + Send + Sync + 'static {
    /// The stable lowercase name (`"released"`, `"session_lost"`, ...).
    fn name(self) -> &'static str;
    /// Why the session was lost, when that is why the holding ended.
    fn session_reason(self) -> Option<LostReason>;
}

/// What a [`Lock`](crate::Lock), a [`Semaphore`](crate::Semaphore) and an
/// [`Election`](crate::Election) share: acquiring under a timeout and a
/// cancel token, releasing, and one holding lifecycle (`is_held`, the loss
/// callbacks, `wait_lost`, the cancel token, `last_lost`).
///
/// Code that works with any of them — every binding's one wrapper for the
/// three, a supervisor that runs work while something is held — is written
/// once against this trait. Each method is the recipe's own (an election's
/// `acquire` campaigns with its current value, its `release` resigns).
///
/// "Cancelled means nothing is held": when `cancel` fires before
/// [`Hold::acquire`] returns, it returns kind `Cancelled` and whatever it
/// took meanwhile has been given back; a caller that learns only later that
/// nobody will take a success (an abandoned task, an aborted promise) calls
/// [`Hold::abandon`].
pub trait Hold: Send + Sync {
    /// Why a holding ended.
    type Lost: HoldLost;

    /// Acquires, waiting up to `timeout` (`None` forever, zero: try once);
    /// `Ok(false)` when the timeout passed first.
    fn acquire(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<bool>;
    /// Releases; `Ok(false)` when not held.
    fn release(&self) -> Result<bool>;
    /// Held now (no network).
    fn is_held(&self) -> bool;
    /// Why the last holding ended.
    fn last_lost(&self) -> Option<Self::Lost>;
    /// A token cancelled when the current holding ends.
    fn cancel_token(&self) -> CancelToken;
    /// Registers a callback run once per lost holding, on the dispatcher.
    fn on_lost(&self, callback: Box<dyn Fn(Self::Lost) + Send + Sync + 'static>) -> CallbackId;
    /// Removes a loss callback.
    fn remove_callback(&self, id: CallbackId);
    /// Blocks until the current holding ends.
    fn wait_lost(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<Self::Lost>;
    /// Why a release found nothing to release, in words.
    fn not_held_message(&self) -> String;
    /// The fencing sequencer of the current holding (`None` for a semaphore).
    fn sequencer(&self) -> Option<Sequencer> {
        None
    }
    /// What the recipe is, for messages: `lock "jobs/a"`.
    fn describe(&self) -> String;

    /// Gives back a success nobody will take (its caller was cancelled after
    /// the acquire returned): released now, or — if Consul cannot be reached
    /// — in the background and by `close`, like any failed release.
    fn abandon(&self) {
        if let Err(e) = self.release() {
            log::debug!(
                "baton {}: giving back an abandoned acquire: {e}",
                self.describe()
            );
        }
    }
}

/// Why a holding ended, as a recipe names it ([`LockLost`](crate::LockLost),
/// [`SemaphoreLost`](crate::SemaphoreLost)): what the lifecycle needs to
/// build the reasons it records.
pub(crate) trait Loss: HoldLost {
    /// The owner released it.
    const RELEASED: Self;
    /// The client was closed.
    const CLIENT_CLOSED: Self;
    /// The holding's session was lost for `reason`.
    fn session_lost(reason: LostReason) -> Self;

    /// Why a holding ends when its session is in `state`.
    fn of_session(state: SessionState) -> Self {
        match state {
            SessionState::Lost(LostReason::ClientClosed) => Self::CLIENT_CLOSED,
            SessionState::Lost(r) => Self::session_lost(r),
            _ => Self::session_lost(LostReason::Invalidated),
        }
    }
}

/// For a recipe's loss enum with variants `Released`, `SessionLost(LostReason)`
/// and `ClientClosed` and inherent `name`/`session_reason`: [`Loss`],
/// [`HoldLost`], and `Display` as the name followed by the session's reason
/// for a lost session (`session_lost (deadline_exceeded)`).
macro_rules! loss_reason {
    ($t:ident) => {
        impl $crate::recipes::holding::HoldLost for $t {
            fn name(self) -> &'static str {
                $t::name(self)
            }
            fn session_reason(self) -> Option<$crate::LostReason> {
                $t::session_reason(self)
            }
        }

        impl $crate::recipes::holding::Loss for $t {
            const RELEASED: Self = $t::Released;
            const CLIENT_CLOSED: Self = $t::ClientClosed;
            fn session_lost(reason: $crate::LostReason) -> Self {
                $t::SessionLost(reason)
            }
        }

        /// The name, followed by the session's reason for a lost session:
        /// `session_lost (deadline_exceeded)`.
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.session_reason() {
                    Some(r) => write!(f, "{} ({})", self.name(), r.name()),
                    None => f.write_str(self.name()),
                }
            }
        }
    };
}
pub(crate) use loss_reason;

type Callback<R> = Arc<dyn Fn(R) + Send + Sync + 'static>;

/// One holding: its generation (which tells a late loss signal of an earlier
/// holding from this one), its session, the token cancelled when it ends, and
/// what the recipe keeps with it.
pub(crate) struct Held<H> {
    pub(crate) generation: u64,
    /// When it started, for the hold-time metric.
    since: Instant,
    pub(crate) session: Session,
    pub(crate) token: CancelToken,
    pub(crate) extra: H,
}

/// A recipe's holding state, kept under the recipe's mutex.
pub(crate) struct Lifecycle<R, H> {
    generation: u64,
    held: Option<Held<H>>,
    callbacks: Vec<(u64, Callback<R>)>,
    next_callback: u64,
    last_lost: Option<R>,
    /// The client's metrics and the recipe its holdings count as.
    meter: (Arc<Metrics>, Recipe),
}

impl<R: Loss, H> Lifecycle<R, H> {
    /// A lifecycle whose holdings count in `metrics` as `recipe`'s.
    pub(crate) fn new(metrics: &Arc<Metrics>, recipe: Recipe) -> Self {
        Lifecycle {
            generation: 0,
            held: None,
            callbacks: Vec::new(),
            next_callback: 0,
            last_lost: None,
            meter: (metrics.clone(), recipe),
        }
    }

    /// The recipe the holdings count as (an election's lock counts as an election).
    pub(crate) fn count_as(&mut self, recipe: Recipe) {
        self.meter.1 = recipe;
    }

    /// The recipe the holdings count as.
    pub(crate) fn recipe(&self) -> Recipe {
        self.meter.1
    }

    /// The generation the next holding will carry.
    pub(crate) fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// Records holding `generation` as the current one.
    pub(crate) fn start(&mut self, generation: u64, session: &Session, extra: H) {
        if self.held.is_some() {
            // Replaced without ending (not expected): it stops counting as held.
            self.meter.0.hold_ended(self.meter.1, Duration::ZERO, None);
        }
        self.meter.0.hold_started(self.meter.1);
        self.held = Some(Held {
            generation,
            since: Instant::now(),
            session: session.clone(),
            token: CancelToken::new(),
            extra,
        });
        self.last_lost = None;
    }

    /// The current holding, whether or not its session is still valid.
    pub(crate) fn held(&self) -> Option<&Held<H>> {
        self.held.as_ref()
    }

    /// Ends the current holding as released by its owner (no callbacks run).
    /// The caller cancels its token once out of the mutex.
    pub(crate) fn release(&mut self) -> Option<Held<H>> {
        let h = self.held.take()?;
        self.last_lost = Some(R::RELEASED);
        self.meter
            .0
            .hold_ended(self.meter.1, h.since.elapsed(), None);
        Some(h)
    }

    /// Ends holding `generation` for `reason`, if it is still the current one.
    pub(crate) fn end(&mut self, generation: u64, reason: R) -> Option<Ended<R, H>> {
        if self.held.as_ref()?.generation != generation {
            return None;
        }
        let held = self.held.take()?;
        self.last_lost = Some(reason);
        // A lost session's holding counts under the session's reason.
        let label = reason
            .session_reason()
            .map_or(reason.name(), LostReason::name);
        let label = (reason != R::RELEASED).then_some(label);
        self.meter
            .0
            .hold_ended(self.meter.1, held.since.elapsed(), label);
        Some(Ended {
            held,
            reason,
            callbacks: self.callbacks.iter().map(|(_, c)| c.clone()).collect(),
        })
    }
}

/// A holding that was just lost, with the callbacks to tell.
pub(crate) struct Ended<R, H> {
    pub(crate) held: Held<H>,
    pub(crate) reason: R,
    callbacks: Vec<Callback<R>>,
}

impl<R: Loss, H> Ended<R, H> {
    /// Signals the loss: the holding's token first, then (unless the client
    /// closed, which says so itself) the callbacks and a warning naming
    /// `what`, on the dispatcher — never on this thread, never under a lock.
    pub(crate) fn signal(&self, core: &Core, what: &str) {
        self.held.token.cancel();
        if self.reason == R::CLIENT_CLOSED {
            return;
        }
        let reason = self.reason;
        for cb in &self.callbacks {
            let cb = cb.clone();
            core.post(Box::new(move || cb(reason)));
        }
        let what = what.to_string();
        core.post(Box::new(move || log::warn!("baton {what} lost: {reason}")));
    }
}

/// A recipe whose holdings follow the shared lifecycle.
pub(crate) trait Holder {
    /// The recipe's loss reasons.
    type Lost: Loss;
    /// What the recipe keeps with a holding.
    type Extra;

    /// The recipe's noun in messages: `lock`, `semaphore`.
    const NOUN: &'static str;

    /// Runs `f` on the lifecycle, under the recipe's mutex.
    fn with<T>(&self, f: impl FnOnce(&mut Lifecycle<Self::Lost, Self::Extra>) -> T) -> T;

    /// Ends holding `generation` (idempotent) with everything the recipe does
    /// on a loss besides [`Ended::signal`].
    fn lose(&self, generation: u64, reason: Self::Lost);

    /// The generation of the current holding if it is still valid, ending it
    /// first if its session was found lost (maybe while another thread is
    /// still signalling it: it is not reported held meanwhile).
    fn held_generation(&self) -> Option<u64> {
        let (session, generation) =
            self.with(|l| l.held().map(|h| (h.session.clone(), h.generation)))?;
        if !session.is_valid() {
            self.lose(generation, Self::Lost::of_session(session.state()));
            return None;
        }
        self.with(|l| l.held().is_some_and(|h| h.generation == generation))
            .then_some(generation)
    }

    /// Acquired, not released, not lost, and the session's local lease
    /// deadline not passed (no network).
    fn is_held(&self) -> bool {
        self.held_generation().is_some()
    }

    /// Why the last holding ended (`None` while held or before the first).
    fn last_lost(&self) -> Option<Self::Lost> {
        let _ = self.is_held();
        self.with(|l| l.last_lost)
    }

    /// The current holding's token; an already cancelled one when not held.
    fn cancel_token(&self) -> CancelToken {
        let _ = self.is_held();
        self.with(|l| l.held().map(|h| h.token.clone()))
            .unwrap_or_else(|| {
                let t = CancelToken::new();
                t.cancel();
                t
            })
    }

    /// Registers a loss callback.
    fn on_lost(&self, callback: impl Fn(Self::Lost) + Send + Sync + 'static) -> CallbackId {
        self.with(|l| {
            let id = l.next_callback;
            l.next_callback += 1;
            l.callbacks.push((id, Arc::new(callback)));
            CallbackId::new(id)
        })
    }

    /// Removes a loss callback (it may still run once if already queued).
    fn remove_callback(&self, id: CallbackId) {
        self.with(|l| l.callbacks.retain(|(i, _)| *i != id.get()));
    }

    /// Blocks until the current holding ends and returns why; at once (the
    /// last reason, or `RELEASED`) when not held. Errors: `Timeout` when
    /// still held at `timeout`, `Cancelled` when `cancel` fires.
    fn wait_lost(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<Self::Lost> {
        let end = crate::foundations::scope::deadline_after(timeout);
        let cancel_rx = cancel.map_or_else(crossbeam_channel::never, |c| c.receiver());
        loop {
            if self.held_generation().is_none() {
                return Ok(self.with(|l| l.last_lost.unwrap_or(Self::Lost::RELEASED)));
            }
            let Some((token, session)) =
                self.with(|l| l.held().map(|h| (h.token.clone(), h.session.clone())))
            else {
                continue;
            };
            if cancel.is_some_and(|c| c.is_cancelled()) {
                return Err(Error::new(
                    ErrorKind::Cancelled,
                    format!("wait for {} loss cancelled", Self::NOUN),
                ));
            }
            if end.is_some_and(|e| e <= Instant::now()) {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!("{} still held at timeout", Self::NOUN),
                ));
            }
            // Wake at the session's local deadline too: passing it ends the holding.
            let wake = match (end, session.valid_until()) {
                (Some(e), Some(u)) => Some(e.min(u)),
                (e, u) => e.or(u),
            };
            let tick = wake.map_or_else(crossbeam_channel::never, crossbeam_channel::at);
            select! {
                recv(token.receiver()) -> _ => {}
                recv(cancel_rx) -> _ => {}
                recv(tick) -> _ => {}
            }
        }
    }

    /// Why a release found nothing to release, in words, for `what`.
    fn not_held_message(&self, what: &str) -> String {
        crate::runtime::lease::not_held_message(
            what,
            self.last_lost().map(|l| (l.name(), l.to_string())),
        )
    }
}

/// The [`Hold`] methods a recipe answers with its inherent method of the
/// same name (the lifecycle's; `acquire`, `release`, `is_held`,
/// `sequencer` and `describe` are written per recipe, as they differ).
macro_rules! hold_lifecycle {
    ($lost:ty) => {
        type Lost = $lost;
        fn last_lost(&self) -> Option<$lost> {
            Self::last_lost(self)
        }
        fn cancel_token(&self) -> $crate::CancelToken {
            Self::cancel_token(self)
        }
        fn on_lost(
            &self,
            callback: Box<dyn Fn($lost) + Send + Sync + 'static>,
        ) -> $crate::CallbackId {
            Self::on_lost(self, callback)
        }
        fn remove_callback(&self, id: $crate::CallbackId) {
            Self::remove_callback(self, id)
        }
        fn wait_lost(
            &self,
            timeout: Option<std::time::Duration>,
            cancel: Option<&$crate::CancelToken>,
        ) -> $crate::Result<$lost> {
            Self::wait_lost(self, timeout, cancel)
        }
        fn not_held_message(&self) -> String {
            Self::not_held_message(self)
        }
    };
}
pub(crate) use hold_lifecycle;

/// The key hub's hook on one key of holding `generation` by `session`: a state of the key
/// that no longer carries the session ends that holding, as the session's loss when Consul
/// no longer knows the session (it was invalidated, and its keys released or deleted with
/// it), else with `key_changed`. Nothing once the holding has ended (through another of its
/// keys, a release). The lock, the multi-key lock and the read-write lock share it.
pub(crate) fn key_loss_hook<H>(
    shared: &Arc<H>,
    conn: &Arc<Conn>,
    session: &Session,
    generation: u64,
    key_changed: H::Lost,
) -> crate::runtime::keyhub::Hook
where
    H: Holder + Send + Sync + 'static,
    H::Lost: Copy + Send + Sync + 'static,
{
    let weak = Arc::downgrade(shared);
    let conn = Arc::downgrade(conn);
    let sid = session.id().to_string();
    let hook_session = Arc::downgrade(&session.shared);
    Arc::new(move |entry: Option<&crate::api::kv::KvPair>| {
        if entry.is_some_and(|p| p.session.as_deref() == Some(sid.as_str())) {
            return;
        }
        let Some(sh) = weak.upgrade() else { return };
        if sh.held_generation() != Some(generation) {
            return;
        }
        // A session already known lost names the loss without asking.
        if let Some(s) = hook_session.upgrade().filter(|s| s.is_lost()) {
            sh.lose(generation, H::Lost::of_session(s.state()));
            return;
        }
        // Tell keys released by an invalidation from a key taken from us: one
        // request, bounded by GONE_PROBE_TIMEOUT (an unanswered one is a key change).
        let gone = conn
            .upgrade()
            .is_some_and(|c| crate::api::session_api::gone(&c, &sid));
        match (gone, hook_session.upgrade()) {
            (true, Some(s)) => s.lose(LostReason::Invalidated),
            _ => sh.lose(generation, key_changed),
        }
    })
}

/// The public lifecycle methods of a recipe whose state is a `shared: Arc<impl Holder>`
/// (its token, loss callbacks and `wait_lost`), written once for each type that has them.
macro_rules! holder_methods {
    ($t:ident, $lost:ty) => {
        /// A token cancelled when the current holding ends (already cancelled
        /// when not held), for the holder's work to watch.
        pub fn cancel_token(&self) -> $crate::CancelToken {
            $crate::recipes::holding::Holder::cancel_token(&*self.shared)
        }

        #[doc = concat!("Registers a callback run once per lost holding (not for [`", stringify!($t), "::release`], not after the client is closed), on the client's dispatcher thread, never under a library lock.")]
        pub fn on_lost(
            &self,
            callback: impl Fn($lost) + Send + Sync + 'static,
        ) -> $crate::CallbackId {
            $crate::recipes::holding::Holder::on_lost(&*self.shared, callback)
        }

        /// Removes a callback. It may still run once if already queued.
        pub fn remove_callback(&self, id: $crate::CallbackId) {
            $crate::recipes::holding::Holder::remove_callback(&*self.shared, id)
        }

        /// Blocks until the current holding ends and returns why; returns at once
        /// (with the last reason, or `Released`) when not held. Errors: `Timeout`
        /// when still held at `timeout`, `Cancelled` when `cancel` fires.
        pub fn wait_lost(
            &self,
            timeout: Option<std::time::Duration>,
            cancel: Option<&$crate::CancelToken>,
        ) -> $crate::Result<$lost> {
            $crate::recipes::holding::Holder::wait_lost(&*self.shared, timeout, cancel)
        }
    };
}
pub(crate) use holder_methods;

/// An acquire as every recipe makes it, around the recipe's own acquire (waiting up to its
/// `timeout`): started before it ([`Settling::start`]), given its outcome after
/// ([`Settling::settle`]), which is judged by whether Consul answered at all (see
/// [`Judging`]), then settled against `cancel` — "cancelled means nothing is held": a
/// success that raced the cancel is given back with `release` and reported as `Cancelled`,
/// so no caller (no binding) has to undo it. That release is bounded by what is left of
/// `timeout`, as every request of the call is; if the time is up it goes on in the
/// background (a release that fails does), and `close` knows it is owed.
pub(crate) struct Settling {
    judging: Judging,
    /// What the call counts as in the client's metrics.
    recipe: Recipe,
}

/// The metrics outcome of an acquire call that waited up to `timeout` and ended with
/// `result`: a try-once call's `false` is `not_acquired`, a waiting call's (its deadline
/// passed) `timed_out`, as is an error of kind `Timeout`.
pub(crate) fn acquire_outcome(timeout: Option<Duration>, result: &Result<bool>) -> AcquireOutcome {
    match result {
        Ok(true) => AcquireOutcome::Acquired,
        Ok(false) if timeout == Some(Duration::ZERO) => AcquireOutcome::NotAcquired,
        Ok(false) => AcquireOutcome::TimedOut,
        Err(e) => match e.kind() {
            ErrorKind::Timeout => AcquireOutcome::TimedOut,
            ErrorKind::Cancelled => AcquireOutcome::Cancelled,
            _ => AcquireOutcome::Failed,
        },
    }
}

impl Settling {
    /// Starts the judgement of an acquire of `recipe` about to run.
    pub(crate) fn start(recipe: Recipe) -> Settling {
        Settling {
            judging: Judging::start(),
            recipe,
        }
    }

    /// The acquire's outcome (`timeout`: what it waited up to), judged and settled against
    /// `cancel`.
    pub(crate) fn settle(
        self,
        conn: &Conn,
        what: &str,
        (timeout, cancel): (Option<Duration>, Option<&CancelToken>),
        result: Result<bool>,
        release: impl FnOnce(),
    ) -> Result<bool> {
        let started = self.judging.started();
        let recipe = self.recipe;
        let out = self.settled(conn, what, (timeout, cancel), result, release, started);
        // Once per call: the tries of a call that counts itself (an async acquire) do not.
        if !crate::foundations::metrics::in_inner_try() {
            conn.transport.metrics.acquire(
                recipe,
                acquire_outcome(timeout, &out),
                started.elapsed(),
            );
        }
        out
    }

    fn settled(
        self,
        conn: &Conn,
        what: &str,
        (timeout, cancel): (Option<Duration>, Option<&CancelToken>),
        result: Result<bool>,
        release: impl FnOnce(),
        started: Instant,
    ) -> Result<bool> {
        match self.judging.verdict(conn, what, result) {
            Ok(true) if cancel.is_some_and(CancelToken::is_cancelled) => {
                // A try-once call's request has the client's request timeout (as in the
                // recipes' acquires): so does its release.
                let bound = timeout
                    .filter(|t| !t.is_zero())
                    .and_then(|t| started.checked_add(t));
                let _bound = crate::foundations::scope::deadline(bound);
                release();
                Err(Error::new(
                    ErrorKind::Cancelled,
                    format!("{what} cancelled (what it acquired meanwhile was released)"),
                ))
            }
            other => other,
        }
    }
}
