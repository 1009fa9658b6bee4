//! Random numbers where no cryptographic generator is needed (retry spreads, unique ids):
//! std's `RandomState` keys each new hasher differently (randomly per thread, then counted
//! up), so hashing the same input gives a new value each call.

use std::hash::BuildHasher;

/// A random `u64`.
pub(crate) fn random_u64() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one((std::process::id(), nanos))
}
