//! Wake-ups for blocking queries: one `Notify` per topic (a key, the KV table, the sessions
//! table). A waiter registers interest *before* it runs its query, so a write that lands between
//! the query and the wait still wakes it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::state::Topic;

/// The registry of topic notifiers.
#[derive(Default)]
pub(crate) struct Hub {
    topics: Mutex<HashMap<Topic, Arc<Notify>>>,
}

impl Hub {
    /// The notifier for `topic`, created on first use.
    pub fn notifier(&self, topic: &Topic) -> Arc<Notify> {
        let mut map = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(topic.clone()).or_default().clone()
    }

    /// Wakes every waiter of the given topics. Notifiers nobody holds any more are dropped.
    pub fn notify(&self, changed: Vec<Topic>) {
        if changed.is_empty() {
            return;
        }
        let mut map = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        for t in changed {
            if let Some(n) = map.get(&t) {
                n.notify_waiters();
                if Arc::strong_count(n) == 1 {
                    map.remove(&t);
                }
            }
        }
    }

    /// Wakes everybody (used when the server restarts and all state is gone).
    pub fn notify_all(&self) {
        let map = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        for n in map.values() {
            n.notify_waiters();
        }
    }
}
