//! The future of a [`StepWait`]: its steps on the client's step threads, and in
//! between no thread at all — a change hook, the client's timer, the caller's
//! cancel token and the client's close wake the task.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::super::call::Call;
use super::super::wake::{Fire, SlotAlarm, WakeSlot};
use super::super::Waiting;
use crate::client::Client;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::runtime::step_wait::StepWait;

/// What a stepped wait subscribes to before its first look: a change of
/// what it judges fires the hook, until the returned guard drops.
pub(crate) type Subscribe = Box<dyn FnOnce(Fire) -> Result<Box<dyn Send>> + Send>;

/// `wait` as a future: a step at once, then one more after every change
/// `subscribe` reports, until a step settles it; at `timeout` (`None`: no
/// limit; zero: one look) its `timed_out` gives the outcome. `cancel` ends it
/// with kind `Cancelled` (`"<what> cancelled"`), the client's close with
/// `Closed`; either, an error of a step, or dropping the future calls
/// `abandon` (on a step thread).
pub(crate) fn stepped<W: StepWait>(
    client: &Client,
    what: &'static str,
    subscribe: Subscribe,
    wait: W,
    timeout: Option<Duration>,
    cancel: &CancelToken,
) -> Waiting<W::Out> {
    let client = client.clone();
    let cancel = cancel.clone();
    let deadline = crate::foundations::scope::deadline_after(timeout);
    Box::pin(async move {
        client.core().check_usable()?;
        if cancel.is_cancelled() {
            return Err(Error::new(
                ErrorKind::Cancelled,
                format!("{what} cancelled"),
            ));
        }
        let slot = WakeSlot::new(false);
        // Subscribed before the first look: no change after it is missed.
        let _changes = subscribe(slot.hook())?;
        let fire = slot.hook();
        let _cancelled = cancel.on_cancel(move || fire());
        let fire = slot.hook();
        let _closing = client.core().closing.on_cancel(move || fire());
        let mut run = Abandon {
            wait: Some(Arc::new(Mutex::new(wait))),
            client: client.clone(),
        };
        let mut alarm = SlotAlarm::default();
        loop {
            slot.take_fired();
            let state = run.state();
            let stop = cancel.clone();
            let step = Call::start(
                &client,
                CancelToken::new(),
                move |dropped| {
                    let linked = CancelToken::any_of([dropped.clone(), stop]);
                    lock(&state).step(&linked.token)
                },
                None,
            );
            let passed = match step.await {
                Ok(Some(out)) => {
                    run.done();
                    return Ok(out);
                }
                // A step's requests are bounded by the call's deadline too.
                Err(e) if e.kind() == ErrorKind::Timeout && past(deadline) => true,
                Err(e) => return Err(e),
                Ok(None) => false,
            };
            let passed = passed
                || Between {
                    slot: &slot,
                    client: &client,
                    alarm: &mut alarm,
                    deadline,
                    cancel: &cancel,
                    what,
                }
                .await?;
            if passed {
                let state = run.state();
                let out = Call::start(
                    &client,
                    CancelToken::new(),
                    move |_| lock(&state).timed_out(),
                    None,
                )
                .await;
                run.done();
                return out;
            }
        }
    })
}

/// Calls the wait's `abandon` on a step thread when dropped before [`Abandon::done`].
struct Abandon<W: StepWait> {
    wait: Option<Arc<Mutex<W>>>,
    client: Client,
}

impl<W: StepWait> Abandon<W> {
    fn state(&self) -> Arc<Mutex<W>> {
        Arc::clone(self.wait.as_ref().expect("taken only by done"))
    }

    fn done(&mut self) {
        self.wait = None;
    }
}

impl<W: StepWait> Drop for Abandon<W> {
    fn drop(&mut self) {
        let Some(wait) = self.wait.take() else {
            return;
        };
        let job = Box::new(move || {
            lock(&wait).abandon();
            false
        });
        if let Err(e) = self.client.core().step(job) {
            log::debug!("baton: cannot end an abandoned wait on a step thread: {e}");
        }
    }
}

/// The wait between two steps: `Ok(false)` when something fired (look again),
/// `Ok(true)` when the deadline passed; errors for a cancel or the close.
struct Between<'a> {
    slot: &'a Arc<WakeSlot>,
    client: &'a Client,
    alarm: &'a mut SlotAlarm,
    deadline: Option<Instant>,
    cancel: &'a CancelToken,
    what: &'static str,
}

impl Future for Between<'_> {
    type Output = Result<bool>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<bool>> {
        let this = self.get_mut();
        this.slot.register(cx.waker());
        if this.cancel.is_cancelled() {
            let what = this.what;
            return Poll::Ready(Err(Error::new(
                ErrorKind::Cancelled,
                format!("{what} cancelled"),
            )));
        }
        if let Err(e) = this.client.core().check_usable() {
            return Poll::Ready(Err(e));
        }
        if this.slot.take_fired() {
            return Poll::Ready(Ok(false));
        }
        if this.deadline.is_some_and(|d| d <= Instant::now()) {
            return Poll::Ready(Ok(true));
        }
        if let Err(e) = this.alarm.set(this.slot, this.client, this.deadline) {
            return Poll::Ready(Err(e));
        }
        if this.slot.fired() {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// Subscribes to changes of `key` on the client's key hub (bounded threads and
/// connections whatever the key is called).
pub(crate) fn on_key(client: &Client, key: &str) -> Subscribe {
    let (client, key) = (client.clone(), key.to_string());
    Box::new(move |fire: Fire| {
        let core = client.core();
        let hook: crate::runtime::keyhub::Hook = Arc::new(move |_| fire());
        let sub = crate::runtime::keyhub::KeySub::hooked(&core.conn, &core.keyhub, &key, hook)?;
        Ok(Box::new(sub) as Box<dyn Send>)
    })
}

/// Subscribes to changes of anything under `prefix` (the client's shared watch of it).
pub(crate) fn on_prefix(client: &Client, prefix: &str) -> Subscribe {
    let (client, prefix) = (client.clone(), prefix.to_string());
    Box::new(move |fire: Fire| {
        let watch = client.watch_prefix(&prefix)?;
        watch.on_change(fire);
        Ok(Box::new(watch) as Box<dyn Send>)
    })
}

fn past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| d <= Instant::now())
}
