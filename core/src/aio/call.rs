//! [`Call`]: one blocking piece of work run on a step thread, as a future; or a call a
//! future drives in its own poll (`aio::warm`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::client::Client;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;

/// What to do with a success nobody will take (the future was dropped after
/// the work began): give a lock back, destroy a session.
pub(crate) type Unclaimed<T> = Box<dyn FnOnce(T) + Send + 'static>;

struct State<T> {
    result: Option<Result<T>>,
    waker: Option<Waker>,
    /// The work has delivered its outcome.
    finished: bool,
    /// The future took the outcome.
    taken: bool,
    /// The future was dropped before the work finished.
    dropped: bool,
    unclaimed: Option<Unclaimed<T>>,
}

type Slot<T> = Arc<Mutex<State<T>>>;

/// A future completed by one of baton's step threads: a KV request, a session
/// create, a release, one try of an acquire. Polling never blocks; the step
/// thread wakes the task through its `Waker` when the outcome is in.
///
/// Dropping it cancels the work (its cancel token fires); a success that
/// arrives after the drop is undone where that means something (a session
/// created for nobody is destroyed, a lock taken for nobody is released).
#[must_use = "futures do nothing unless polled"]
pub struct Call<T: Send + 'static> {
    run: Run<T>,
    client: Client,
}

/// Where a call's work happens.
enum Run<T: Send + 'static> {
    /// On a step thread, which delivers into the slot.
    Step { slot: Slot<T>, cancel: CancelToken },
    /// In the future's own poll.
    Driven(Box<dyn Driven<T>>),
}

/// A call a future drives in its own poll (a warm release, `aio::warm`). Dropped unfinished,
/// it leaves nothing half-done (its own `Drop`).
pub(crate) trait Driven<T>: Send {
    /// Advances the call; wakes the task through `cx` when it can go on.
    fn poll_driven(&mut self, cx: &mut Context<'_>) -> Poll<Result<T>>;
}

impl<T: Send + 'static> std::fmt::Debug for Call<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Call");
        match &self.run {
            Run::Step { slot, .. } => d.field("finished", &lock(slot).finished),
            Run::Driven(_) => d.field("driven", &true),
        };
        d.finish()
    }
}

/// Delivers the outcome once; dropped unused (the client closed before the step
/// ran), it delivers `Closed`.
struct Completer<T> {
    slot: Option<Slot<T>>,
}

impl<T> Completer<T> {
    /// Delivers; returns whether the task woke and took the outcome.
    fn complete(mut self, result: Result<T>) -> bool {
        match self.slot.take() {
            Some(slot) => deliver(&slot, result),
            None => false,
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            deliver(&slot, Err(closed()));
        }
    }
}

fn closed() -> Error {
    Error::new(ErrorKind::Closed, "the baton client is closed")
}

/// Hands `result` to the future (or undoes it if the future is gone); with
/// [`bound`](crate::runtime::steps::bound), waits for the task to take it and returns
/// whether it did.
fn deliver<T>(slot: &Slot<T>, result: Result<T>) -> bool {
    let (leftover, waker) = {
        let mut st = lock(slot);
        st.finished = true;
        if st.dropped {
            (st.unclaimed.take().zip(result.ok()), None)
        } else {
            st.result = Some(result);
            (None, st.waker.take())
        }
    };
    // Outside the lock: the clean-up makes requests, and an executor may poll
    // the task from inside `wake`.
    if let Some((undo, value)) = leftover {
        undo(value);
    }
    let Some(w) = waker else { return false };
    w.wake();
    if !crate::runtime::steps::bound() {
        return false;
    }
    // Stay with the task until its executor has taken the outcome: the next
    // step it issues in the same poll then finds this thread awake.
    let mut taken = false;
    crate::runtime::steps::standing_by(|| {
        crate::foundations::sync::spin_until(
            Instant::now() + crate::runtime::steps::BOUND_MAX,
            || {
                let st = lock(slot);
                taken = st.taken;
                st.taken || st.dropped
            },
        )
    });
    taken
}

impl<T: Send + 'static> Call<T> {
    /// Runs `work` on a step thread of `client` with `cancel` (fired when the
    /// future drops unfinished); `unclaimed` undoes a success nobody takes.
    pub(crate) fn start(
        client: &Client,
        cancel: CancelToken,
        work: impl FnOnce(&CancelToken) -> Result<T> + Send + 'static,
        unclaimed: Option<Unclaimed<T>>,
    ) -> Call<T> {
        let slot: Slot<T> = Arc::new(Mutex::new(State {
            result: None,
            waker: None,
            finished: false,
            taken: false,
            dropped: false,
            unclaimed,
        }));
        let done = Completer {
            slot: Some(slot.clone()),
        };
        let token = cancel.clone();
        let job = Box::new(move || done.complete(work(&token)));
        if let Err(e) = client.core().step(job) {
            // The job was dropped unrun: say why it never ran.
            lock(&slot).result = Some(Err(e));
        }
        Call {
            run: Run::Step { slot, cancel },
            client: client.clone(),
        }
    }

    /// Runs `work` on `handle` (a recipe's handle, a client) on a step thread: the one
    /// shape of every call that is a single blocking piece of work.
    pub(crate) fn with<H: Send + 'static>(
        client: &Client,
        handle: H,
        work: impl FnOnce(&H) -> Result<T> + Send + 'static,
    ) -> Call<T> {
        Call::start(client, CancelToken::new(), move |_| work(&handle), None)
    }

    /// A call that has already ended with `result`.
    pub(crate) fn ready(client: &Client, result: Result<T>) -> Call<T> {
        let slot = Arc::new(Mutex::new(State {
            result: Some(result),
            waker: None,
            finished: true,
            taken: false,
            dropped: false,
            unclaimed: None,
        }));
        Call {
            run: Run::Step {
                slot,
                cancel: CancelToken::new(),
            },
            client: client.clone(),
        }
    }

    /// A call `driven` in the future's own poll.
    pub(crate) fn driven(client: &Client, driven: Box<dyn Driven<T>>) -> Call<T> {
        Call {
            run: Run::Driven(driven),
            client: client.clone(),
        }
    }
}

impl<T: Send + 'static> Future for Call<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let slot = match &mut self.get_mut().run {
            Run::Step { slot, .. } => slot,
            Run::Driven(d) => return d.poll_driven(cx),
        };
        let mut st = lock(slot);
        if let Some(r) = st.result.take() {
            st.taken = true;
            return Poll::Ready(r);
        }
        if st.taken {
            return Poll::Ready(Err(Error::new(
                ErrorKind::Conflict,
                "baton call polled after it completed",
            )));
        }
        if !st.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            st.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl<T: Send + 'static> Drop for Call<T> {
    fn drop(&mut self) {
        let Run::Step { slot, cancel } = &self.run else {
            return;
        };
        let (leftover, unfinished) = {
            let mut st = lock(slot);
            if st.taken {
                (None, false)
            } else if st.finished {
                let value = st.result.take().and_then(|r| r.ok());
                (st.unclaimed.take().zip(value), false)
            } else {
                st.dropped = true;
                (None, true)
            }
        };
        if unfinished {
            cancel.cancel();
        }
        if let Some((undo, value)) = leftover {
            // Off the executor's thread: undoing makes requests.
            let job = Box::new(move || {
                undo(value);
                false
            });
            if let Err(e) = self.client.core().step(job) {
                log::debug!("baton: cannot undo an unclaimed async result: {e}");
            }
        }
    }
}
