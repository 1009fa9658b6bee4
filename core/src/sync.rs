//! Small synchronisation helpers.

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crossbeam_channel::{Receiver, TryRecvError};

/// Locks a mutex, recovering the data if another thread panicked while holding it
/// (callbacks are caught, so poisoning must not cascade into library threads).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What arrives on `rx` before `until`, or before `stop()` says to give up,
/// yielding the CPU between looks: `Some(Some(v))` a value, `Some(None)` the
/// channel disconnected, `None` nothing came. For a thread that just handed an
/// outcome over and expects its caller's next call within microseconds (a
/// parked thread costs a wake-up per call).
pub(crate) fn look_for<T>(
    rx: &Receiver<T>,
    until: Instant,
    stop: impl Fn() -> bool,
) -> Option<Option<T>> {
    loop {
        match rx.try_recv() {
            Ok(v) => return Some(Some(v)),
            Err(TryRecvError::Disconnected) => return Some(None),
            Err(TryRecvError::Empty) if stop() || Instant::now() >= until => return None,
            Err(TryRecvError::Empty) => std::thread::yield_now(),
        }
    }
}

/// Whether an on-by-default switch of the environment is on: unset, or set to
/// anything but `0` (`BATON_POOL_BIND`, `BATON_STEP_BIND`).
pub(crate) fn env_switch(name: &str) -> bool {
    std::env::var_os(name).is_none_or(|v| v != "0")
}
