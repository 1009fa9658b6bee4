//! The graveyard (Consul's `state/graveyard.go`): a tombstone for every deleted key or deleted
//! prefix, so a list query under it still reports the index of the delete until the tombstone
//! is reaped, and the tombstones table's own index.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A deleted key (or deleted prefix) still counted by list queries until it is reaped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tombstone {
    index: u64,
    at: Instant,
}

/// The tombstones table.
#[derive(Default)]
pub(crate) struct Graveyard {
    tombstones: BTreeMap<String, Tombstone>,
    /// The highest index a tombstone was made at (Consul's `tombstones` table index).
    index: u64,
}

impl Graveyard {
    /// The tombstones table index.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Puts the table index back (a rolled-back transaction).
    pub fn set_index(&mut self, index: u64) {
        self.index = index;
    }

    /// Buries `key` at `idx`; returns the tombstone it replaced, for the journal.
    pub fn insert(&mut self, key: &str, idx: u64) -> Option<Tombstone> {
        self.index = self.index.max(idx);
        self.tombstones.insert(
            key.to_string(),
            Tombstone {
                index: idx,
                at: Instant::now(),
            },
        )
    }

    /// Puts back what a journaled `insert` replaced.
    pub fn restore(&mut self, key: String, old: Option<Tombstone>) {
        match old {
            Some(t) => self.tombstones.insert(key, t),
            None => self.tombstones.remove(&key),
        };
    }

    /// The highest tombstone index under `prefix` (0 when none).
    pub fn max_index_under(&self, prefix: &str) -> u64 {
        self.tombstones
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, t)| t.index)
            .max()
            .unwrap_or(0)
    }

    /// Forgets tombstones older than `ttl`. Returns whether any went.
    pub fn reap(&mut self, ttl: Duration) -> bool {
        let before = self.tombstones.len();
        self.tombstones.retain(|_, t| t.at.elapsed() < ttl);
        before != self.tombstones.len()
    }
}
