//! What the child runs under: a lock (consul lock's `-n 1`), a semaphore slot
//! (`-n N`) or leadership (`baton elect`), behind one interface.

use std::sync::Arc;

use baton::{
    CancelToken, Client, Election, ErrorKind, Lock, LockLost, LostReason, Semaphore, SemaphoreLost,
    Sequencer,
};

/// A holding the supervisor watches and gives back.
#[derive(Clone)]
pub enum Holding {
    /// `PREFIX/.lock` with Go's lock format.
    Lock(Arc<Lock>),
    /// A slot of the semaphore on `PREFIX` with Go's semaphore format.
    Semaphore(Arc<Semaphore>),
    /// Leadership of an election key (Go's lock format on the key itself).
    Election(Arc<Election>),
}

fn session_reason(r: LostReason) -> String {
    match r {
        LostReason::Invalidated => {
            "the session was invalidated at Consul (destroyed, expired or its check failed)".into()
        }
        LostReason::DeadlineExceeded => {
            "the session's local lease deadline passed without a successful renew (Consul unreachable?)"
                .into()
        }
        LostReason::Destroyed => "the session was destroyed by this process".into(),
        LostReason::ClientClosed => "the client was closed".into(),
    }
}

fn lock_reason(l: LockLost) -> String {
    match l {
        LockLost::KeyChanged => {
            "the lock key no longer carries our session: deleted, released or taken by someone else"
                .into()
        }
        LockLost::SessionLost(r) => session_reason(r),
        LockLost::Released => "released".into(),
        LockLost::ClientClosed => "the client was closed".into(),
    }
}

impl Holding {
    /// The underlying lock of a lock or election.
    fn lock(&self) -> Option<&Lock> {
        match self {
            Holding::Lock(l) => Some(l),
            Holding::Election(e) => Some(e.lock()),
            Holding::Semaphore(_) => None,
        }
    }

    /// Whether it is still held (no network: the local view).
    pub fn is_held(&self) -> bool {
        match self {
            Holding::Semaphore(s) => s.is_held(),
            _ => self.lock().is_some_and(Lock::is_held),
        }
    }

    /// Blocks until the holding ends; `None` when `stop` fires first.
    pub fn wait_lost(&self, stop: &CancelToken) -> Option<String> {
        match self {
            Holding::Semaphore(s) => match s.wait_lost(None, Some(stop)) {
                Ok(SemaphoreLost::Removed) => Some(
                    "our slot is gone: the contender key was deleted or .lock no longer lists us"
                        .into(),
                ),
                Ok(SemaphoreLost::SessionLost(r)) => Some(session_reason(r)),
                Ok(other) => Some(other.name().replace('_', " ")),
                Err(_) => None,
            },
            _ => {
                let l = self.lock()?;
                match l.wait_lost(None, Some(stop)) {
                    Ok(r) => Some(lock_reason(r)),
                    Err(_) => None,
                }
            }
        }
    }

    /// The sequencer the child gets: the lock's, or for a semaphore the one of
    /// our contender key `PREFIX/<session>` (acquired by our session; its
    /// ModifyIndex is the token).
    pub fn sequencer(&self, client: &Client, contender: Option<&str>) -> Option<Sequencer> {
        match self {
            Holding::Semaphore(_) => {
                let key = contender?;
                let p = client.kv().get(key).ok()??;
                Some(Sequencer {
                    key: p.key,
                    session: p.session?,
                    lock_index: p.lock_index,
                    token: p.modify_index,
                })
            }
            _ => self.lock()?.sequencer(),
        }
    }

    /// Gives the holding back, then removes the coordination key when nobody
    /// uses it any more (consul lock's `Destroy` step; "in use" is fine).
    /// Returns a problem worth reporting, if any.
    pub fn release_and_clean(&self, cleanup: bool) -> Option<String> {
        let mut problem = None;
        match self {
            Holding::Semaphore(s) => {
                if let Err(e) = s.release() {
                    problem = Some(format!("Lock release failed: {e}"));
                }
                if cleanup {
                    if let Err(e) = s.destroy() {
                        if !(e.kind() == ErrorKind::Conflict && e.message().contains("in use")) {
                            problem.get_or_insert(format!("Lock cleanup failed: {e}"));
                        }
                    }
                }
            }
            _ => {
                let l = self.lock()?;
                if let Err(e) = l.release() {
                    problem = Some(format!("Lock release failed: {e}"));
                }
                if cleanup {
                    if let Err(e) = l.destroy() {
                        if !(e.kind() == ErrorKind::Conflict && e.message().contains("in use")) {
                            problem.get_or_insert(format!("Lock cleanup failed: {e}"));
                        }
                    }
                }
            }
        }
        problem
    }
}
