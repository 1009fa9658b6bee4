//! How a counter's check-and-set write is retried after losing to another writer.

use std::time::Duration;

/// Check-and-set attempts an [`add`](super::Counter::add) or
/// [`compare_and_set`](super::Counter::compare_and_set) makes before giving up with a
/// `Conflict` error. Each lost attempt means another writer's write went through, so the
/// counter as a whole made progress; 1,000 losses in a row only happen when far more
/// writers than that hammer one key, where a single counter key is the wrong design.
pub(super) const MAX_ATTEMPTS: u32 = 1_000;

/// The first retry pauses a random time below this...
const PAUSE_START: Duration = Duration::from_millis(1);
/// ...the bound doubling with each loss up to this.
const PAUSE_MAX: Duration = Duration::from_millis(32);

/// The pause before retry number `lost` (1 after the first lost write): a uniformly
/// random time below `min(1 ms * 2^(lost-1), 32 ms)`.
///
/// Random, so writers that lost together do not all come back together and collide
/// again; short, because a lost check-and-set means the key just changed and a fresh
/// read is likely to win. At most 1,000 pauses of at most 32 ms bound a hopeless
/// add at about 16 s on average beside its requests.
pub(super) fn pause(lost: u32) -> Duration {
    let shift = lost.saturating_sub(1).min(16);
    let bound = PAUSE_START.saturating_mul(1 << shift).min(PAUSE_MAX);
    let nanos = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX).max(1);
    Duration::from_nanos(crate::foundations::random::random_u64() % nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_are_random_below_a_doubling_bound() {
        for _ in 0..200 {
            assert!(pause(1) < Duration::from_millis(1));
            assert!(pause(3) < Duration::from_millis(4));
            assert!(pause(6) < Duration::from_millis(32));
            assert!(pause(MAX_ATTEMPTS) < PAUSE_MAX);
        }
        let distinct: std::collections::HashSet<Duration> = (0..50).map(|_| pause(6)).collect();
        assert!(distinct.len() > 10, "not spread: {distinct:?}");
    }
}
