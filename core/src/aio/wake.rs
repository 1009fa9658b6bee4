//! Where a waiting future keeps its `Waker`, and the hook baton's threads call
//! to wake it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::Waker;
use std::time::Instant;

use crate::client::Client;
use crate::foundations::error::Result;
use crate::foundations::sync::lock;
use crate::runtime::steps::AlarmGuard;

/// A task's waker and a "something happened" flag. Baton's threads (the key
/// hub, a watch, the timer, a cancel token) call [`WakeSlot::fire`]; the future
/// takes the flag when polled and decides what it means.
#[derive(Default)]
pub(crate) struct WakeSlot {
    waker: Mutex<Option<Waker>>,
    fired: AtomicBool,
}

/// What baton's threads call to wake a task: quick, and safe to call after the
/// future is gone.
pub(crate) type Fire = Arc<dyn Fn() + Send + Sync + 'static>;

impl WakeSlot {
    /// A slot whose flag starts set (the future has work to do at once) or not.
    pub(crate) fn new(fired: bool) -> Arc<WakeSlot> {
        Arc::new(WakeSlot {
            waker: Mutex::new(None),
            fired: AtomicBool::new(fired),
        })
    }

    /// Sets the flag and wakes the task, outside the slot's lock (an executor
    /// may poll the task from inside `wake`).
    pub(crate) fn fire(&self) {
        self.fired.store(true, Ordering::SeqCst);
        let waker = lock(&self.waker).take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Sets the flag without waking the task (the future itself has more to do).
    pub(crate) fn mark(&self) {
        self.fired.store(true, Ordering::SeqCst);
    }

    /// Takes the flag: whether anything fired since the last take.
    pub(crate) fn take_fired(&self) -> bool {
        self.fired.swap(false, Ordering::SeqCst)
    }

    /// Whether anything fired since the last take, leaving the flag as it is.
    pub(crate) fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Keeps `waker` for the next fire (the latest poll's waker wins).
    pub(crate) fn register(&self, waker: &Waker) {
        let mut g = lock(&self.waker);
        if !g.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *g = Some(waker.clone());
        }
    }

    /// A hook that fires this slot while it exists.
    pub(crate) fn hook(self: &Arc<Self>) -> Fire {
        let me: Weak<WakeSlot> = Arc::downgrade(self);
        Arc::new(move || {
            if let Some(s) = me.upgrade() {
                s.fire();
            }
        })
    }
}

/// The timer alarm that fires a slot at a time, kept across polls: set again
/// only when the time changes.
#[derive(Default)]
pub(crate) struct SlotAlarm(Option<(Instant, AlarmGuard)>);

impl SlotAlarm {
    /// Fires `slot` at `at` (on `client`'s timer thread); no alarm for `None`.
    pub(crate) fn set(
        &mut self,
        slot: &Arc<WakeSlot>,
        client: &Client,
        at: Option<Instant>,
    ) -> Result<()> {
        match at {
            Some(at) if self.0.as_ref().is_none_or(|(t, _)| *t != at) => {
                let fire = slot.hook();
                let guard = client.core().alarm(at, Box::new(move || fire()))?;
                self.0 = Some((at, guard));
            }
            Some(_) => {}
            None => self.0 = None,
        }
        Ok(())
    }
}
