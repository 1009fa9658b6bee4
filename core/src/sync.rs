//! Small synchronisation helpers.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, recovering the data if another thread panicked while holding it
/// (callbacks are caught, so poisoning must not cascade into library threads).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
