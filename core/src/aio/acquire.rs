//! [`Acquire`]: an acquire, a semaphore wait or a campaign as a future that
//! holds no thread while it waits.
//!
//! Each try is the blocking API's try-once (`acquire(Some(ZERO))`: the same
//! local claim, lock-delay and "cancelled means nothing is held" rules) run on
//! a step thread and bounded by the call's deadline. A lock's first try, when it
//! is warm (one request settles it), is made by the future itself instead
//! (`aio::warm`), its socket waited on by the client's readiness thread. Between tries the future
//! only waits: for the key (or the semaphore's prefix) to change, for the time
//! a lock-delay refusal ends, for its session's loss, its cancel token, the
//! client's close or its deadline, each of which wakes the task.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::call::Call;
use super::contend::Contend;
use super::wake::{SlotAlarm, WakeSlot};
use super::warm::{Driving, Settled};
use crate::foundations::cancel::{CancelToken, HookGuard};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::recipes::lock::warm::WarmAcquire;
use std::sync::Arc;

/// After a transient failure (no cluster leader, a restarting agent), the
/// first pause before the next try...
const FIRST_PAUSE: Duration = Duration::from_millis(50);
/// ...doubling up to this (as the blocking API rides such failures out).
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// The future of an acquire (see [`AsyncHold::acquire_async`](super::AsyncHold::acquire_async)).
///
/// Resolves to `Ok(true)` once held, `Ok(false)` when the timeout passed first,
/// or an error as the blocking acquire's. Dropping it cancels the acquire, and
/// a cancelled acquire leaves nothing held: a try in flight is given back if it
/// succeeded, as with a cancel token.
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a, H: Contend> {
    hold: H,
    _borrow: PhantomData<&'a H>,
    deadline: Option<Instant>,
    try_once: bool,
    /// Fired when the future drops or the caller's token fires: cancels a try
    /// in flight (and, while polled, means the caller cancelled).
    cancel: CancelToken,
    slot: Arc<WakeSlot>,
    /// The first try, when warm, driven here (`aio::warm`); boxed, so that a future that
    /// waits does not carry its room.
    warm: Option<Box<Driving<WarmAcquire>>>,
    step: Option<Call<bool>>,
    /// When to try again regardless of changes (lock-delay, a transient failure).
    retry_at: Option<Instant>,
    pause: Duration,
    /// The last try's transient failure: the outcome if the deadline passes. This and
    /// `finishing` are boxed: rare, and an error is 120 bytes that every pending acquire
    /// would carry (`make bench-scale` counts what a pending acquire keeps).
    last_transient: Option<Box<Error>>,
    /// The run of transient failures, for the warning the blocking calls give too.
    failing: crate::runtime::ride_out::Unavailable,
    changes: Option<Box<dyn Send>>,
    /// The session, cancel and close hooks that wake the task.
    hooks: Vec<HookGuard>,
    session_hooked: Option<String>,
    alarm: SlotAlarm,
    /// Tries that kept something for the next (see [`Acquire::end_wait`]).
    tried_waiting: u32,
    /// A try has been started: the deadline ends the call only after one (a zero timeout
    /// tries once, as in the blocking API).
    tried: bool,
    done: bool,
    /// When the call started, for the acquire-wait metric.
    started: Instant,
    /// The call's outcome, held until what refused tries kept is removed (a timed-out
    /// wait resolves with nothing of it left in the queue, as the blocking acquire).
    finishing: Option<Box<(Call<()>, Result<bool>)>>,
}

impl<H: Contend> std::fmt::Debug for Acquire<'_, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acquire")
            .field("what", &self.hold.describe())
            .field("deadline", &self.deadline)
            .field("done", &self.done)
            .finish()
    }
}

impl<'a, H: Contend> Acquire<'a, H> {
    pub(crate) fn new(
        hold: &'a H,
        timeout: Option<Duration>,
        user_cancel: Option<&CancelToken>,
    ) -> Self {
        let cancel = CancelToken::new();
        let slot = WakeSlot::new(true);
        let mut hooks = Vec::new();
        if let Some(u) = user_cancel {
            let (c, fire) = (cancel.clone(), slot.hook());
            hooks.push(u.on_cancel(move || {
                c.cancel();
                fire();
            }));
        }
        Acquire {
            hold: hold.view(),
            _borrow: PhantomData,
            deadline: crate::foundations::scope::deadline_after(timeout),
            try_once: timeout == Some(Duration::ZERO),
            cancel,
            slot,
            warm: None,
            step: None,
            retry_at: None,
            pause: FIRST_PAUSE,
            last_transient: None,
            failing: Default::default(),
            changes: None,
            hooks,
            session_hooked: None,
            alarm: SlotAlarm::default(),
            tried_waiting: 0,
            tried: false,
            done: false,
            started: Instant::now(),
            finishing: None,
        }
    }

    /// Starts one try: the first, when warm, here; any other on a step thread.
    fn start_try(&mut self) {
        if !self.tried {
            if let Some(readiness) = super::warm::readiness(self.hold.client()) {
                if let Some(call) = self.hold.warm_try() {
                    self.tried = true;
                    self.warm = Some(Box::new(Driving::start(readiness, call)));
                    return;
                }
            }
        }
        let (hold, undo) = (self.hold.view(), self.hold.view());
        let deadline = self.deadline;
        let try_once = self.try_once;
        self.tried = true;
        if !try_once {
            self.tried_waiting += 1;
        }
        self.step = Some(Call::start(
            self.hold.client(),
            self.cancel.clone(),
            move |cancel| {
                // Every request of the try is bounded by what is left of the call's
                // time (a try-once call's by the client's request timeout).
                let _bound = crate::foundations::scope::deadline(deadline.filter(|_| !try_once));
                // One try of this call, which counts itself.
                let _inner = crate::foundations::metrics::inner_try();
                if try_once {
                    hold.acquire(Some(Duration::ZERO), Some(cancel))
                } else {
                    hold.try_step(cancel)
                }
            },
            Some(Box::new(move |held| {
                if held {
                    undo.abandon();
                }
            })),
        ));
    }

    /// Drives the warm first try: its outcome, or `None` once it handed over (a step settles
    /// what its request may have applied, or the call goes on as after any refused try).
    fn poll_warm(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<bool>>> {
        let Some(d) = self.warm.as_mut() else {
            return Poll::Ready(None);
        };
        let now = Instant::now();
        let give_up = self.cancel.is_cancelled()
            || self.hold.client().core().closing.is_cancelled()
            || now >= d.until()
            || self.deadline.is_some_and(|t| now >= t);
        let settled = if give_up {
            d.give_up()
        } else {
            match d.poll_settle(cx) {
                Poll::Ready(s) => s,
                Poll::Pending => {
                    // A cancel wakes the task through the slot, its time through the alarm.
                    self.slot.register(cx.waker());
                    let wake = self.deadline.map_or(d.until(), |t| t.min(d.until()));
                    if self
                        .alarm
                        .set(&self.slot, self.hold.client(), Some(wake))
                        .is_ok()
                    {
                        return Poll::Pending;
                    }
                    d.give_up()
                }
            }
        };
        self.warm = None;
        match settled {
            Settled::Done(result) => Poll::Ready(Some(result)),
            Settled::Resume(rest) if rest.maybe_applied() => {
                let left = self
                    .deadline
                    .map(|t| t.saturating_duration_since(Instant::now()));
                let undo = self.hold.view();
                self.step = Some(Call::start(
                    self.hold.client(),
                    self.cancel.clone(),
                    move |cancel| {
                        let _inner = crate::foundations::metrics::inner_try();
                        rest.run(left, Some(cancel))
                    },
                    Some(Box::new(move |held| {
                        if held {
                            undo.abandon();
                        }
                    })),
                ));
                Poll::Ready(None)
            }
            Settled::Resume(rest) => {
                // Nothing owed: the next try goes to a step thread at once.
                drop(rest.into_restart());
                self.slot.mark();
                Poll::Ready(None)
            }
        }
    }

    /// What a finished try means for the call: its outcome, or `None` to wait.
    fn finish_try(&mut self, result: Result<bool>) -> Option<Result<bool>> {
        let out = self.judge(result)?;
        self.done = true;
        if matches!(out, Ok(true)) {
            // The slot was taken with the kept entry: nothing to remove.
            self.tried_waiting = 0;
        }
        Some(out)
    }

    /// Ends the call with `out` once what refused tries kept is removed (on a step
    /// thread; at once when nothing was kept).
    fn finish(&mut self, out: Result<bool>, cx: &mut Context<'_>) -> Poll<Result<bool>> {
        self.done = true;
        self.count(&out);
        if !H::KEEPS || self.tried_waiting == 0 {
            return Poll::Ready(out);
        }
        self.tried_waiting = 0;
        let hold = self.hold.view();
        let call = Call::start(
            self.hold.client(),
            CancelToken::new(),
            move |_| {
                hold.end_wait();
                Ok(())
            },
            None,
        );
        self.finishing = Some(Box::new((call, out)));
        self.poll_finishing(cx)
    }

    fn poll_finishing(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool>> {
        let Some(finishing) = self.finishing.as_mut() else {
            return Poll::Ready(Err(Error::new(
                ErrorKind::Conflict,
                format!("{} polled after it completed", H::WHAT),
            )));
        };
        if Pin::new(&mut finishing.0).poll(cx).is_pending() {
            return Poll::Pending;
        }
        let (_, out) = *self.finishing.take().expect("checked above");
        Poll::Ready(out)
    }

    /// Counts the call's outcome in the client's metrics (once: at its end, or its drop).
    fn count(&self, out: &Result<bool>) {
        let timeout = self.try_once.then_some(Duration::ZERO);
        self.hold.client().core().transport.metrics.acquire(
            crate::foundations::metrics::Recipe::named(H::RECIPE),
            crate::recipes::holding::acquire_outcome(timeout, out),
            self.started.elapsed(),
        );
    }

    /// Removes what refused tries kept for the next (a semaphore's contender
    /// entry), on a step thread, after any try still in flight (the recipe
    /// serialises them). Once per future.
    fn end_wait(&mut self) {
        if !H::KEEPS || self.tried_waiting == 0 {
            return;
        }
        self.tried_waiting = 0;
        let hold = self.hold.view();
        let job = Box::new(move || {
            hold.end_wait();
            false
        });
        if let Err(e) = self.hold.client().core().step(job) {
            log::debug!("baton {}: ending a wait: {e}", self.hold.describe());
        }
    }

    /// What a finished try means: the call's outcome, or `None` to wait.
    fn judge(&mut self, result: Result<bool>) -> Option<Result<bool>> {
        match result {
            Ok(true) => Some(Ok(true)),
            Ok(false) if self.try_once => Some(Ok(false)),
            Ok(false) => {
                self.last_transient = None;
                self.failing = Default::default();
                self.pause = FIRST_PAUSE;
                self.retry_at = self.hold.retry_hint();
                None
            }
            Err(e) if e.is_transient() && !self.try_once => {
                let core = self.hold.client().core();
                self.failing
                    .note(core, H::WHAT, &e, self.deadline.is_some());
                self.retry_at = Some(Instant::now() + self.pause);
                self.pause = (self.pause * 2).min(MAX_PAUSE);
                self.last_transient = Some(Box::new(e));
                None
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// The outcome if the wait is over without another try.
    fn ended(&mut self) -> Option<Result<bool>> {
        // Only the caller's token fires `cancel` while the future is polled.
        if self.cancel.is_cancelled() {
            return Some(Err(Error::new(
                ErrorKind::Cancelled,
                format!("{} cancelled", H::WHAT),
            )));
        }
        if let Err(e) = self.hold.client().core().check_usable() {
            return Some(Err(e));
        }
        if self.tried && self.deadline.is_some_and(|d| d <= Instant::now()) {
            return Some(self.last_transient.take().map_or(Ok(false), |e| Err(*e)));
        }
        None
    }

    /// Makes sure every signal that should end the wait wakes the task.
    fn arm(&mut self) -> Result<()> {
        if self.changes.is_none() {
            self.changes = Some(self.hold.watch_changes(self.slot.hook())?);
            let fire = self.slot.hook();
            let closing = self.hold.client().core().closing.clone();
            self.hooks.push(closing.on_cancel(move || fire()));
        }
        if let Some(s) = self.hold.session_now() {
            if self.session_hooked.as_deref() != Some(s.id()) {
                let fire = self.slot.hook();
                self.hooks.push(s.cancel_token().on_cancel(move || fire()));
                self.session_hooked = Some(s.id().to_string());
            }
        }
        let wake = match (self.deadline, self.retry_at) {
            (Some(d), Some(r)) => Some(d.min(r)),
            (d, r) => d.or(r),
        };
        self.alarm.set(&self.slot, self.hold.client(), wake)
    }
}

impl<H: Contend> Future for Acquire<'_, H> {
    type Output = Result<bool>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<bool>> {
        let this = self.get_mut();
        if this.finishing.is_some() {
            return this.poll_finishing(cx);
        }
        if this.done {
            return Poll::Ready(Err(Error::new(
                ErrorKind::Conflict,
                format!("{} polled after it completed", H::WHAT),
            )));
        }
        loop {
            match this.poll_warm(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(result)) => {
                    if let Some(out) = this.finish_try(result) {
                        return this.finish(out, cx);
                    }
                }
                Poll::Ready(None) => {}
            }
            if let Some(step) = this.step.as_mut() {
                let result = match Pin::new(step).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(r) => r,
                };
                this.step = None;
                if let Some(out) = this.finish_try(result) {
                    return this.finish(out, cx);
                }
            }
            if let Some(out) = this.ended() {
                return this.finish(out, cx);
            }
            let retry_due = this.retry_at.is_some_and(|t| t <= Instant::now());
            if this.slot.take_fired() || retry_due {
                this.retry_at = this.retry_at.filter(|_| !retry_due);
                this.start_try();
                continue;
            }
            this.slot.register(cx.waker());
            if let Err(e) = this.arm() {
                return this.finish(Err(e), cx);
            }
            // A signal that fired before the waker was in place is seen here.
            if this.slot.fired() {
                continue;
            }
            return Poll::Pending;
        }
    }
}

impl<H: Contend> Drop for Acquire<'_, H> {
    fn drop(&mut self) {
        // A try in flight is cancelled (its Call's drop fires `cancel`), and a
        // success it still delivers is given back (a warm one's too, by its drop).
        if !self.done {
            // Dropped before its end: a cancelled acquire.
            self.count(&Err(Error::new(ErrorKind::Cancelled, "dropped")));
        }
        self.warm = None;
        self.step = None;
        self.cancel.cancel();
        self.end_wait();
        if let Some(changes) = self.changes.take() {
            // The last subscriber of a prefix watch joins its thread when it
            // goes: not on the executor's thread.
            let job = Box::new(move || {
                drop(changes);
                false
            });
            if let Err(e) = self.hold.client().core().step(job) {
                log::debug!("baton {}: {e}", self.hold.describe());
            }
        }
    }
}
