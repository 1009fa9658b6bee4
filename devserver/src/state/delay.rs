//! Lock-delays (Consul's `state/delay.go`): after a session holding a key is invalidated, the
//! key cannot be acquired again until its lock-delay ends. Like Consul's, this map lives on the
//! leader only, in memory, outside raft: a restart forgets it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The longest lock-delay a session gets (Consul's `structs.MaxLockDelay`).
pub(super) const MAX_LOCK_DELAY: Duration = Duration::from_secs(60);

/// How long a key stays lock-delayed after its holder's session is invalidated: the session's
/// LockDelay, capped at [`MAX_LOCK_DELAY`] (zero or negative means none).
pub(super) fn effective_lock_delay(lock_delay_ns: i64) -> Duration {
    if lock_delay_ns > 0 {
        Duration::from_nanos(lock_delay_ns as u64).min(MAX_LOCK_DELAY)
    } else {
        Duration::ZERO
    }
}

/// Keys under a lock-delay, and when it ends.
#[derive(Default)]
pub(crate) struct Delay {
    until: HashMap<String, Instant>,
}

impl Delay {
    /// Starts (or moves) the lock-delay of `key` to end at `until`.
    pub fn set(&mut self, key: String, until: Instant) {
        self.until.insert(key, until);
    }

    /// Whether a lock-delay is in force on `key` now; an ended one is forgotten.
    pub fn delayed(&mut self, key: &str) -> bool {
        match self.until.get(key) {
            Some(until) if *until > Instant::now() => true,
            Some(_) => {
                self.until.remove(key);
                false
            }
            None => false,
        }
    }

    /// When the lock-delay of `key` ends, if one was set.
    #[cfg(test)]
    pub fn until(&self, key: &str) -> Option<Instant> {
        self.until.get(key).copied()
    }
}
