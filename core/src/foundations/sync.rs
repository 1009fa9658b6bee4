//! Small synchronisation helpers.

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crossbeam_channel::{Receiver, TryRecvError};

/// Locks a mutex, recovering the data if another thread panicked while holding it
/// (callbacks are caught, so poisoning must not cascade into library threads).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Looks until `done()` says so or `until` passes, yielding the CPU between
/// looks; whether `done()` did. For a thread that just handed an outcome over
/// and expects the next step of its caller within microseconds (a parked
/// thread costs a wake-up per call).
pub(crate) fn spin_until(until: Instant, mut done: impl FnMut() -> bool) -> bool {
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::yield_now();
    }
}

/// What arrives on `rx` before `until`, or before `stop()` says to give up
/// ([`spin_until`]): `Some(Some(v))` a value, `Some(None)` the channel
/// disconnected, `None` nothing came.
pub(crate) fn look_for<T>(
    rx: &Receiver<T>,
    until: Instant,
    stop: impl Fn() -> bool,
) -> Option<Option<T>> {
    let mut got = None;
    spin_until(until, || match rx.try_recv() {
        Ok(v) => {
            got = Some(Some(v));
            true
        }
        Err(TryRecvError::Disconnected) => {
            got = Some(None);
            true
        }
        Err(TryRecvError::Empty) => stop(),
    });
    got
}

/// Whether an on-by-default switch of the environment is on: unset, or set to
/// anything but `0` (`BATON_POOL_BIND`, `BATON_STEP_BIND`).
pub(crate) fn env_switch(name: &str) -> bool {
    std::env::var_os(name).is_none_or(|v| v != "0")
}

/// One at a time, where a turn can also be held as a value: a blocking caller waits for it
/// ([`Turnstile::enter`]), and an event loop's call that must not wait takes it only when
/// free and carries it across the loop's turns ([`Turnstile::try_enter_owned`]).
#[derive(Debug, Default)]
pub(crate) struct Turnstile {
    busy: Mutex<bool>,
    free: std::sync::Condvar,
}

/// A turn taken with [`Turnstile::enter`]; the next caller goes when it drops.
pub(crate) struct Turn<'a>(&'a Turnstile);

/// A turn taken with [`Turnstile::try_enter_owned`]; the next caller goes when it drops.
#[derive(Debug)]
pub(crate) struct OwnedTurn(std::sync::Arc<Turnstile>);

impl Turnstile {
    /// Waits for the turn.
    pub(crate) fn enter(&self) -> Turn<'_> {
        let mut busy = lock(&self.busy);
        while *busy {
            busy = self.free.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        *busy = true;
        Turn(self)
    }

    /// The turn if it is free now.
    pub(crate) fn try_enter_owned(self: &std::sync::Arc<Self>) -> Option<OwnedTurn> {
        let mut busy = lock(&self.busy);
        if *busy {
            return None;
        }
        *busy = true;
        Some(OwnedTurn(self.clone()))
    }

    fn leave(&self) {
        *lock(&self.busy) = false;
        self.free.notify_one();
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

impl Drop for OwnedTurn {
    fn drop(&mut self) {
        self.0.leave();
    }
}
