//! What the async acquire needs of a recipe beyond [`Hold`]: a handle its step
//! threads may own, and the signals that may let a refused try succeed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::wake::Fire;
use crate::client::Client;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::Result;
use crate::recipes::election::Election;
use crate::recipes::holding::Hold;
use crate::recipes::lock::warm::{WarmAcquire, WarmRelease};
use crate::recipes::lock::Lock;
use crate::recipes::multilock::MultiLock;
use crate::recipes::rwlock::RwLock;
use crate::recipes::semaphore::Semaphore;
use crate::runtime::keyhub::KeySub;
use crate::runtime::lease::Session;

mod sealed {
    /// Keeps [`Contend`](super::Contend) to baton's own recipes.
    pub trait Sealed {}
    impl Sealed for crate::recipes::lock::Lock {}
    impl Sealed for crate::recipes::multilock::MultiLock {}
    impl Sealed for crate::recipes::semaphore::Semaphore {}
    impl Sealed for crate::recipes::election::Election {}
    impl Sealed for crate::recipes::rwlock::RwLock {}
}

/// What [`AsyncHold`](super::AsyncHold) needs of a recipe. Sealed:
/// implemented by [`Lock`], [`MultiLock`], [`RwLock`], [`Semaphore`] and [`Election`] only; its methods
/// are the async layer's business, hidden from the docs.
pub trait Contend: Hold + Sized + Unpin + 'static + sealed::Sealed {
    /// What an acquire is called in messages ("lock acquire").
    #[doc(hidden)]
    const WHAT: &'static str;
    /// The recipe its acquires count as in the client's metrics (a name of
    /// [`metrics::RECIPES`](crate::metrics::RECIPES)).
    #[doc(hidden)]
    const RECIPE: &'static str;
    /// Another handle on the same recipe whose drop gives back nothing.
    #[doc(hidden)]
    fn view(&self) -> Self;
    /// The client it talks through.
    #[doc(hidden)]
    fn client(&self) -> &Client;
    /// Calls `fire` whenever something that may let a refused try succeed
    /// happens (the key changes; anything under the semaphore's prefix
    /// changes), until the returned guard drops.
    #[doc(hidden)]
    fn watch_changes(&self, fire: Fire) -> Result<Box<dyn Send>>;
    /// When a refused try may be tried again regardless of changes (a free key
    /// refused for lock-delay).
    #[doc(hidden)]
    fn retry_hint(&self) -> Option<Instant>;
    /// The session the next try would use, if known (its loss ends a wait).
    #[doc(hidden)]
    fn session_now(&self) -> Option<Session>;
    /// Whether a refused try leaves something for the next (a semaphore's
    /// contender entry) that [`Contend::end_wait`] must remove.
    #[doc(hidden)]
    const KEEPS: bool = false;
    /// One try, never waiting for others (blocking, on a step thread).
    #[doc(hidden)]
    fn try_step(&self, cancel: &CancelToken) -> Result<bool> {
        self.acquire(Some(Duration::ZERO), Some(cancel))
    }
    /// Ends a wait whose last try was refused (blocking, on a step thread).
    #[doc(hidden)]
    fn end_wait(&self) {}
    /// The first try as a warm call the future drives itself (`aio::warm`), when it is one.
    #[doc(hidden)]
    fn warm_try(&self) -> Option<WarmAcquire> {
        None
    }
    /// The release as a warm call the future drives itself, when it is one.
    #[doc(hidden)]
    fn warm_unlock(&self) -> Option<WarmRelease> {
        None
    }
}

fn watch_key(client: &Client, key: &str, fire: Fire) -> Result<Box<dyn Send>> {
    let core = client.core();
    let f = fire.clone();
    let hook: crate::runtime::keyhub::Hook = Arc::new(move |_| f());
    // A sibling in this process giving up its claim on the key changes nothing in Consul
    // when its try failed: only this hook tells a try refused for that claim to go again.
    let unclaimed = crate::runtime::claim::on_unclaim(key, fire.clone());
    let sub = KeySub::hooked(&core.conn, &core.keyhub, key, hook)?;
    if sub.view().is_some() {
        // The hub knew the key already: a change it saw after the refused try
        // read the key, and before this subscription, told nobody here. One
        // more try settles it.
        fire();
    }
    Ok(Box::new((sub, unclaimed)))
}

impl Contend for Lock {
    const WHAT: &'static str = "lock acquire";
    const RECIPE: &'static str = "lock";
    fn view(&self) -> Lock {
        Lock::view(self)
    }
    fn client(&self) -> &Client {
        self.shared_client()
    }
    fn watch_changes(&self, fire: Fire) -> Result<Box<dyn Send>> {
        watch_key(self.shared_client(), self.key(), fire)
    }
    fn retry_hint(&self) -> Option<Instant> {
        Lock::retry_hint(self)
    }
    fn session_now(&self) -> Option<Session> {
        self.session()
    }
    fn warm_try(&self) -> Option<WarmAcquire> {
        Lock::warm_try(self)
    }
    fn warm_unlock(&self) -> Option<WarmRelease> {
        Lock::warm_release(self)
    }
}

/// A multi-key lock contends as a lock does, on every one of its keys: a change of any may
/// let a refused try succeed.
impl Contend for MultiLock {
    const WHAT: &'static str = "multi-key lock acquire";
    const RECIPE: &'static str = "multilock";
    fn view(&self) -> MultiLock {
        MultiLock::view(self)
    }
    fn client(&self) -> &Client {
        self.shared_client()
    }
    fn watch_changes(&self, fire: Fire) -> Result<Box<dyn Send>> {
        let watches = self
            .keys()
            .iter()
            .map(|key| watch_key(self.shared_client(), key, fire.clone()))
            .collect::<Result<Vec<_>>>()?;
        Ok(Box::new(watches))
    }
    fn retry_hint(&self) -> Option<Instant> {
        MultiLock::retry_hint(self)
    }
    fn session_now(&self) -> Option<Session> {
        self.session()
    }
}

/// An election contends as its lock does.
impl Contend for Election {
    const WHAT: &'static str = "campaign";
    const RECIPE: &'static str = "election";
    fn view(&self) -> Election {
        Election::view(self)
    }
    fn client(&self) -> &Client {
        Contend::client(self.lock())
    }
    fn watch_changes(&self, fire: Fire) -> Result<Box<dyn Send>> {
        self.lock().watch_changes(fire)
    }
    fn retry_hint(&self) -> Option<Instant> {
        Contend::retry_hint(self.lock())
    }
    fn session_now(&self) -> Option<Session> {
        self.lock().session_now()
    }
}

impl Contend for Semaphore {
    const WHAT: &'static str = "semaphore acquire";
    const RECIPE: &'static str = "semaphore";
    fn view(&self) -> Semaphore {
        Semaphore::view(self)
    }
    fn client(&self) -> &Client {
        self.shared_client()
    }
    fn watch_changes(&self, fire: Fire) -> Result<Box<dyn Send>> {
        // As for a lock: a sibling's claim on a contender key, given up, wakes a refused try.
        let unclaimed = crate::runtime::claim::on_unclaim(self.prefix(), fire.clone());
        Ok(Box::new((Semaphore::watch_changes(self, fire)?, unclaimed)))
    }
    fn retry_hint(&self) -> Option<Instant> {
        Semaphore::retry_hint(self)
    }
    fn session_now(&self) -> Option<Session> {
        self.session()
    }
    const KEEPS: bool = true;
    fn try_step(&self, cancel: &CancelToken) -> Result<bool> {
        self.try_keeping(cancel)
    }
    fn end_wait(&self) {
        Semaphore::end_wait(self)
    }
}

/// A read-write lock's side contends as a semaphore does: its contender key stays in the
/// queue between tries, and any change under the prefix may be its turn.
impl Contend for RwLock {
    const WHAT: &'static str = "read-write lock acquire";
    const RECIPE: &'static str = "rwlock";
    fn view(&self) -> RwLock {
        RwLock::view(self)
    }
    fn client(&self) -> &Client {
        self.shared_client()
    }
    fn watch_changes(&self, fire: Fire) -> Result<Box<dyn Send>> {
        Ok(Box::new(RwLock::watch_changes(self, fire)?))
    }
    fn retry_hint(&self) -> Option<Instant> {
        RwLock::retry_hint(self)
    }
    fn session_now(&self) -> Option<Session> {
        RwLock::session_now(self)
    }
    const KEEPS: bool = true;
    fn try_step(&self, cancel: &CancelToken) -> Result<bool> {
        self.try_keeping(cancel)
    }
    fn end_wait(&self) {
        RwLock::end_wait(self)
    }
}
