//! Closing a client: threads joined, held keys released and owed work made before their
//! sessions are destroyed (so a clean exit costs the next holder no lock-delay), each step
//! bounded by the close timeout; and the [`CloseReport`] of what could not be finished.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Core, HeldKey, OwedItem};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::runtime::lease::{LostReason, SessionShared, SessionState};
use crate::runtime::steps::Steps;
use crate::runtime::watch::WatchSlot;

impl Core {
    /// Closes the client once (later calls return an empty report); see [`Client::close`](super::Client::close).
    pub(super) fn close(&self, timeout: Duration) -> CloseReport {
        // A timeout too large to represent waits as long as anything can.
        let deadline = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600));
        let mut report = CloseReport::default();
        if self.conn.mark_closed() {
            return report;
        }
        if !self.conn.in_own_process() {
            // The threads do not exist in a forked child: nothing to join.
            return report;
        }
        // Work still owed to Consul (a failed release, an unlock after a lost
        // lease, a slot to give back): the clean-up thread stops below, so it
        // is made here.
        let (mut owed, mut owed_work) = (Vec::new(), Vec::new());
        for (_, item) in lock(&self.owed).drain() {
            match item {
                OwedItem::Unlock(h) => owed.push(h),
                OwedItem::Work { key, run } => owed_work.push((key, run)),
            }
        }
        self.closing.cancel();
        let rt = std::mem::take(&mut *lock(&self.runtime));
        let mut joined = |ok: bool| {
            if !ok {
                report.threads_not_joined += 1;
            }
        };
        // The watches' subscriptions to the key hub, whose thread stops next.
        let watches: Vec<WatchSlot> = lock(&self.watches).drain().map(|(_, w)| w).collect();
        drop(watches);
        joined(self.keyhub.stop(deadline));
        if let Some(mut r) = rt.renewer {
            joined(r.worker.join_until(deadline));
            joined(r.timer.join_until(deadline));
        }
        if let Some(mut m) = rt.monitor {
            joined(m.join_until(deadline));
        }
        if let Some(mut d) = rt.dispatcher {
            joined(d.worker.join_until(deadline));
        }
        if let Some(mut c) = rt.cleanup {
            joined(c.worker.join_until(deadline));
        }
        for mut w in rt.steps.map(Steps::into_workers).unwrap_or_default() {
            joined(w.join_until(deadline));
        }
        *lock(&self.default_session) = None;
        // Release held and owed locks first: destroying their sessions would impose
        // lock-delay. Consul being briefly unavailable is waited out until the deadline.
        let mut held: Vec<HeldKey> = lock(&self.held_keys).drain().map(|(_, h)| h).collect();
        for h in owed {
            if !held.contains(&h) {
                held.push(h);
            }
        }
        for (key, sid, value, flags) in held {
            let result = until_answered(deadline, |left| {
                let exact_txn =
                    self.learned.txn_numbers() == crate::foundations::compat::TxnNumbers::Exact;
                let mut req = crate::api::txn::unlock_request(exact_txn, &key, &value, &sid, flags);
                req.timeout = Some(left);
                self.transport.call(&req).map(|_| ())
            });
            match result {
                Ok(()) => {}
                // Consul answered that the key is not held by the session: nothing to free.
                Err(e) if e.kind() == ErrorKind::Conflict => {}
                Err(e) => {
                    log::warn!("baton: could not release lock {key} on close: {e}");
                    report.unconfirmed_releases.push(key);
                }
            }
        }
        for (key, run) in owed_work {
            // Through the same API calls the clean-up thread makes, let
            // through although the client is now closed.
            let _finishing = crate::foundations::scope::finishing();
            let _bound = crate::foundations::scope::deadline(Some(deadline));
            match until_answered(deadline, |_| run(&self.conn)) {
                Ok(()) => {}
                Err(e) if super::owed_work_refused(&e) => {
                    log::debug!("baton: {key} cannot be given back ({e}): nothing to free");
                }
                Err(e) => {
                    log::warn!("baton: could not give back {key} on close: {e}");
                    report.unconfirmed_releases.push(key);
                }
            }
        }
        let sessions: Vec<Arc<SessionShared>> =
            lock(&self.sessions).drain().map(|(_, s)| s).collect();
        for s in sessions {
            let prior = s.state();
            s.lose(LostReason::ClientClosed);
            // Still tracked after `Destroyed`: a destroy queued by a drop (a
            // semaphore's own session) that the clean-up thread, stopped above,
            // may not have made; `Session::destroy` untracks before it destroys.
            let needs_destroy = s.owned
                && matches!(
                    prior,
                    SessionState::Held
                        | SessionState::Suspect
                        | SessionState::Lost(LostReason::DeadlineExceeded)
                        | SessionState::Lost(LostReason::Destroyed)
                );
            if !needs_destroy {
                continue;
            }
            let result = until_answered(deadline, |left| {
                let mut req = crate::api::session_api::session_request("destroy", &s.id);
                req.timeout = Some(left);
                self.transport.call(&req).map(|_| ())
            });
            if let Err(e) = result {
                log::warn!("baton: could not destroy session {} on close: {e}", s.id);
                report.sessions_not_destroyed.push(s.id.clone());
            }
        }
        // A closed client keeps no connection open.
        self.transport.close_idle_conns();
        report
    }
}

/// Runs `op` with the time left until `deadline`, again after transient
/// failures (with a short pause), until it gets an answer or the deadline passes.
fn until_answered(deadline: Instant, mut op: impl FnMut(Duration) -> Result<()>) -> Result<()> {
    let mut pause = crate::runtime::cleanup::PROBE_MIN;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::new(
                ErrorKind::Timeout,
                "the close timeout passed before Consul answered",
            ));
        }
        match op(left) {
            Err(e) if e.is_transient() => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left <= pause {
                    return Err(e);
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(crate::runtime::cleanup::PROBE_MAX);
            }
            other => return other,
        }
    }
}

/// What [`Client::close_report`](super::Client::close_report) did and could not do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloseReport {
    /// Background threads that had not stopped by the timeout (they stop on
    /// their own; no callback runs after close returns either way).
    pub threads_not_joined: usize,
    /// Keys whose release Consul did not confirm by the timeout: held locks,
    /// releases that had failed earlier and were still being retried, and
    /// the contender keys of semaphore slots still owed back (a slot given
    /// back late, after a loss or a failed release). Such a key stays held
    /// until Consul expires the session (TTL, then lock-delay), or until the
    /// session's destroy below frees it.
    pub unconfirmed_releases: Vec<String>,
    /// IDs of sessions this client created that Consul was not seen to destroy.
    pub sessions_not_destroyed: Vec<String>,
}

impl CloseReport {
    /// Whether close finished everything: threads joined, every release
    /// confirmed, every session destroyed.
    pub fn is_complete(&self) -> bool {
        self.threads_not_joined == 0
            && self.unconfirmed_releases.is_empty()
            && self.sessions_not_destroyed.is_empty()
    }
}

/// In words, for logs and error messages: what close could not finish
/// (`"complete"` when it finished everything).
impl fmt::Display for CloseReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_complete() {
            return f.write_str("complete");
        }
        let mut parts = Vec::new();
        if !self.unconfirmed_releases.is_empty() {
            parts.push(format!(
                "Consul did not confirm the release of {} (held until their session expires or is destroyed)",
                self.unconfirmed_releases
                    .iter()
                    .map(|k| shortened(k))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if !self.sessions_not_destroyed.is_empty() {
            parts.push(format!(
                "{} {} not destroyed (each expires by its TTL; one without a TTL stays until its node leaves)",
                if self.sessions_not_destroyed.len() == 1 { "session" } else { "sessions" },
                self.sessions_not_destroyed.join(", ")
            ));
        }
        if self.threads_not_joined > 0 {
            parts.push(format!(
                "{} background {} had not stopped",
                self.threads_not_joined,
                if self.threads_not_joined == 1 {
                    "thread"
                } else {
                    "threads"
                }
            ));
        }
        f.write_str(&parts.join("; "))
    }
}

/// A key as a message shows it: at most 200 characters, the rest elided.
fn shortened(key: &str) -> String {
    const SHOWN: usize = 200;
    match key.char_indices().nth(SHOWN) {
        Some((at, _)) => format!("{}… ({} bytes)", &key[..at], key.len()),
        None => key.to_string(),
    }
}
