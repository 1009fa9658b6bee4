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
