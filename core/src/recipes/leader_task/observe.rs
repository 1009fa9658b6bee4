//! The `on_new_leader` feed of a running [`LeaderTask`](super::LeaderTask): the
//! election's [`Observer`] on the client's key hub, drained on the dispatcher.
//!
//! No thread is spent on it: the hub calls a hook when the key changes, the hook
//! posts a drain to the dispatcher, and the drain takes what the observer has
//! (the current state first, then each change, never an older one) and calls the
//! user's callback with no lock held. The dispatcher is one thread, so the
//! callbacks run in the order the changes were seen. Closing the feed (at the
//! end of `run`) waits for a callback that is running, so none runs afterwards.

use std::sync::{Arc, Condvar, Mutex, Weak};

use crate::client::{Client, Core};
use crate::foundations::error::Result;
use crate::foundations::sync::lock;
use crate::recipes::election::{Leader, LeaderEvent, Observer};
use crate::runtime::keyhub::Hook;

/// The user's `on_new_leader` callback.
pub(crate) type NewLeaderCallback = Arc<dyn Fn(Option<Leader>) + Send + Sync + 'static>;

struct State {
    /// `None` before the observer is made and after the feed closes.
    observer: Option<Observer>,
    closed: bool,
    /// Drains calling the callback right now (zero or one: the dispatcher is one thread).
    in_flight: usize,
}

struct Feed {
    core: Arc<Core>,
    callback: NewLeaderCallback,
    state: Mutex<State>,
    idle: Condvar,
}

/// Feeds `on_new_leader` while it lives; dropping it stops the feed and waits
/// for a callback that is running.
pub(crate) struct NewLeaderFeed {
    feed: Arc<Feed>,
}

impl NewLeaderFeed {
    /// Starts observing `key` through `client`, calling `callback` on the
    /// dispatcher with the current leader and then every change.
    pub(crate) fn start(
        client: &Client,
        key: &str,
        callback: NewLeaderCallback,
    ) -> Result<NewLeaderFeed> {
        let feed = Arc::new(Feed {
            core: client.core().clone(),
            callback,
            state: Mutex::new(State {
                observer: None,
                closed: false,
                in_flight: 0,
            }),
            idle: Condvar::new(),
        });
        let weak: Weak<Feed> = Arc::downgrade(&feed);
        // On the hub thread: only post, never run user code here.
        let hook: Hook = Arc::new(move |_entry| {
            if let Some(feed) = weak.upgrade() {
                post_drain(feed);
            }
        });
        let observer = client.observe_leader_hooked(key, Some(hook))?;
        lock(&feed.state).observer = Some(observer);
        // A change the hook saw before the observer was in place, or a state the
        // hub already knew: drained now.
        post_drain(feed.clone());
        Ok(NewLeaderFeed { feed })
    }
}

impl Drop for NewLeaderFeed {
    fn drop(&mut self) {
        let observer = {
            let mut st = lock(&self.feed.state);
            st.closed = true;
            st.observer.take()
        };
        // Unsubscribes from the hub, out of our mutex.
        drop(observer);
        let mut st = lock(&self.feed.state);
        while st.in_flight > 0 {
            st = self
                .feed
                .idle
                .wait(st)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

fn post_drain(feed: Arc<Feed>) {
    let core = feed.core.clone();
    core.post(Box::new(move || drain(&feed)));
}

/// Counts a drain in flight; uncounts it even if the callback panics.
struct InFlight<'a>(&'a Feed);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut st = lock(&self.0.state);
        st.in_flight -= 1;
        if st.in_flight == 0 {
            self.0.idle.notify_all();
        }
    }
}

/// On the dispatcher: takes the observer's new states and tells the callback.
fn drain(feed: &Feed) {
    let (events, _in_flight) = {
        let mut st = lock(&feed.state);
        if st.closed {
            return;
        }
        let Some(observer) = st.observer.as_mut() else {
            return;
        };
        let mut events = Vec::new();
        loop {
            match observer.take_event() {
                Ok(Some(event)) => events.push(event),
                Ok(None) => break,
                Err(e) => {
                    log::debug!("baton leader task: observing {}: {e}", observer.key());
                    break;
                }
            }
        }
        if events.is_empty() {
            return;
        }
        st.in_flight += 1;
        (events, InFlight(feed))
    };
    for event in events {
        (feed.callback)(match event {
            LeaderEvent::Leader(l) => Some(l),
            LeaderEvent::NoLeader => None,
        });
    }
}
