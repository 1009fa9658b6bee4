//! The sessions table (Consul's `state/session.go`): sessions with the table's own index, the
//! keys each holds, TTL timers (2×TTL, as Consul's leader arms them, `session_ttl.go`) and
//! invalidation (release or delete of held keys, then lock-delay).

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use super::delay::effective_lock_delay;
use super::{new_uuid, ApplyError, CheckStatus, State, Topic};

/// Consul's `SessionTTLMultiplier`: a session expires about 2×TTL after its last renew.
pub(crate) const SESSION_TTL_MULTIPLIER: u32 = 2;
/// Consul's `structs.SessionTTLMax`.
pub(crate) const SESSION_TTL_MAX: Duration = Duration::from_secs(24 * 3600);

/// What a session does to its keys when it is invalidated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Behavior {
    Release,
    Delete,
}

impl Behavior {
    pub fn as_str(self) -> &'static str {
        match self {
            Behavior::Release => "release",
            Behavior::Delete => "delete",
        }
    }
}

/// A service check a session is bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServiceCheck {
    pub id: String,
    pub namespace: String,
}

/// A session as stored.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub id: String,
    pub name: String,
    pub node: String,
    /// Nanoseconds, as the client sent it (not capped; the cap applies at use).
    pub lock_delay_ns: i64,
    pub behavior: Behavior,
    /// The TTL string exactly as given, `""` for none.
    pub ttl: String,
    pub ttl_dur: Option<Duration>,
    pub node_checks: Vec<String>,
    pub service_checks: Option<Vec<ServiceCheck>>,
    /// The deprecated `Checks` field, only when the check fix-up kept it.
    pub checks: Option<Vec<String>>,
    pub create_index: u64,
    /// When the TTL timer fires (2×TTL after create or the last renew).
    pub expires_at: Option<Instant>,
}

impl Session {
    /// Every check that invalidates this session when it goes critical or disappears.
    pub(super) fn all_check_ids(&self) -> impl Iterator<Item = &str> {
        let legacy = self.checks.iter().flatten().map(String::as_str);
        let node = self.node_checks.iter().map(String::as_str);
        let svc = self.service_checks.iter().flatten().map(|c| c.id.as_str());
        legacy.chain(node).chain(svc)
    }
}

/// The parameters of a session create, after the HTTP layer decoded and fixed them up.
#[derive(Clone, Debug)]
pub(crate) struct NewSession {
    pub name: String,
    pub node: String,
    pub lock_delay_ns: i64,
    pub behavior: Behavior,
    pub ttl: String,
    pub ttl_dur: Option<Duration>,
    pub node_checks: Vec<String>,
    pub service_checks: Option<Vec<ServiceCheck>>,
    pub checks: Option<Vec<String>>,
}

/// The sessions table: sessions by lowercase ID (Consul looks IDs up case-insensitively), the
/// keys each holds, the TTL timers, and the table index.
#[derive(Default)]
pub(crate) struct SessionTable {
    by_id: HashMap<String, Session>,
    /// Keys held, by lowercase session ID.
    held: HashMap<String, BTreeSet<String>>,
    /// TTL timers: (deadline, lowercase session ID).
    timers: BTreeSet<(Instant, String)>,
    index: u64,
}

impl SessionTable {
    /// Records that session `sid` holds `key` (nothing for an empty `sid`).
    pub(super) fn hold(&mut self, sid: &str, key: &str) {
        if !sid.is_empty() {
            self.held
                .entry(sid.to_ascii_lowercase())
                .or_default()
                .insert(key.to_string());
        }
    }

    /// Records that session `sid` no longer holds `key`.
    pub(super) fn unhold(&mut self, sid: &str, key: &str) {
        if sid.is_empty() {
            return;
        }
        let lid = sid.to_ascii_lowercase();
        if let Some(set) = self.held.get_mut(&lid) {
            set.remove(key);
            if set.is_empty() {
                self.held.remove(&lid);
            }
        }
    }

    /// A session to change in place (tests that bind checks after the create).
    #[cfg(test)]
    pub(super) fn session_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.by_id.get_mut(&id.to_ascii_lowercase())
    }

    /// Whether no session holds any key.
    #[cfg(test)]
    pub(super) fn nothing_held(&self) -> bool {
        self.held.is_empty()
    }
}

impl State {
    /// Looks a session up case-insensitively.
    pub fn session(&self, id: &str) -> Option<&Session> {
        self.sessions.by_id.get(&id.to_ascii_lowercase())
    }

    /// The sessions table index.
    pub fn sessions_index(&self) -> u64 {
        self.sessions.index
    }

    /// All sessions, ordered by ID.
    pub fn sessions_sorted(&self) -> Vec<Session> {
        let mut v: Vec<Session> = self.sessions.by_id.values().cloned().collect();
        v.sort_by_key(|s| s.id.to_ascii_lowercase());
        v
    }

    /// Sessions bound to `node` (case-insensitive), ordered by ID.
    pub fn sessions_on_node(&self, node: &str) -> Vec<Session> {
        let mut v = self.sessions_sorted();
        v.retain(|s| s.node.eq_ignore_ascii_case(node));
        v
    }

    /// The FSM side of session create: node and checks must exist and not be critical.
    pub fn session_create(&mut self, req: NewSession) -> Result<String, ApplyError> {
        let fail = |m: String| Err(ApplyError::Text(format!("apply failed: {m}")));
        let Some(node) = self.node(&req.node).cloned() else {
            // A raft write was attempted: the index is consumed.
            self.next_index();
            return fail("Missing node registration".into());
        };
        // structs.Session.CheckIDs order: the legacy Checks, NodeChecks, ServiceChecks.
        let mut wanted: Vec<&str> = req.checks.iter().flatten().map(String::as_str).collect();
        wanted.extend(req.node_checks.iter().map(String::as_str));
        wanted.extend(req.service_checks.iter().flatten().map(|c| c.id.as_str()));
        for check in wanted {
            match self.check(&node.name, check).map(|c| c.status) {
                None => {
                    self.next_index();
                    return fail(format!("Missing check '{check}' registration"));
                }
                Some(CheckStatus::Critical) => {
                    self.next_index();
                    return fail(format!("Check '{check}' is in critical state"));
                }
                Some(_) => {}
            }
        }
        let id = loop {
            let id = new_uuid();
            if !self.sessions.by_id.contains_key(&id) {
                break id;
            }
        };
        let idx = self.next_index();
        let expires_at = req
            .ttl_dur
            .map(|ttl| Instant::now() + ttl * SESSION_TTL_MULTIPLIER);
        let s = Session {
            id: id.clone(),
            name: req.name,
            node: node.name.clone(),
            lock_delay_ns: req.lock_delay_ns,
            behavior: req.behavior,
            ttl: req.ttl,
            ttl_dur: req.ttl_dur,
            node_checks: req.node_checks,
            service_checks: req.service_checks,
            checks: req.checks,
            create_index: idx,
            expires_at,
        };
        if let Some(at) = expires_at {
            self.sessions.timers.insert((at, id.clone()));
        }
        self.sessions.by_id.insert(id.clone(), s);
        self.sessions.index = idx;
        self.changes.push(Topic::Sessions);
        Ok(id)
    }

    /// Re-arms a session's TTL timer to a fresh 2×TTL. Not a raft write: no index changes.
    /// `None` when the session does not exist.
    pub fn session_renew(&mut self, id: &str) -> Option<Session> {
        let lid = id.to_ascii_lowercase();
        let table = &mut self.sessions;
        let s = table.by_id.get_mut(&lid)?;
        if let Some(ttl) = s.ttl_dur {
            if let Some(old) = s.expires_at {
                table.timers.remove(&(old, lid.clone()));
            }
            let at = Instant::now() + ttl * SESSION_TTL_MULTIPLIER;
            s.expires_at = Some(at);
            table.timers.insert((at, lid));
        }
        Some(s.clone())
    }

    /// Invalidates a session: deletes it, applies its behaviour to every key it holds and sets
    /// the lock-delay on each. All at one new index. Returns false when it does not exist (then
    /// no index is consumed).
    pub fn session_invalidate(&mut self, id: &str) -> bool {
        let lid = id.to_ascii_lowercase();
        let Some(s) = self.sessions.by_id.remove(&lid) else {
            return false;
        };
        let idx = self.next_index();
        self.invalidate_at(idx, s);
        true
    }

    pub(super) fn invalidate_at(&mut self, idx: u64, s: Session) {
        let lid = s.id.to_ascii_lowercase();
        self.sessions.by_id.remove(&lid);
        if let Some(at) = s.expires_at {
            self.sessions.timers.remove(&(at, lid.clone()));
        }
        self.sessions.index = idx;
        self.changes.push(Topic::Sessions);
        let keys: Vec<String> = self
            .sessions
            .held
            .get(&lid)
            .map(|k| k.iter().cloned().collect())
            .unwrap_or_default();
        let delay = effective_lock_delay(s.lock_delay_ns);
        let now = Instant::now();
        for key in keys {
            match s.behavior {
                Behavior::Release => {
                    if let Some(mut e) = self.kvs.get(&key).cloned() {
                        e.session.clear();
                        e.modify_index = idx;
                        self.put_entry(&key, Some(e));
                        self.kvs.bump(idx);
                    }
                }
                Behavior::Delete => self.kv_delete_at(idx, &key),
            }
            if !delay.is_zero() {
                self.set_lock_delay(key, now + delay);
            }
        }
    }

    /// Restarts every TTL timer at a full 2×TTL, as a newly elected leader does.
    pub fn rearm_all_timers(&mut self) {
        let table = &mut self.sessions;
        table.timers.clear();
        let now = Instant::now();
        for (lid, s) in table.by_id.iter_mut() {
            if let Some(ttl) = s.ttl_dur {
                let at = now + ttl * SESSION_TTL_MULTIPLIER;
                s.expires_at = Some(at);
                table.timers.insert((at, lid.clone()));
            }
        }
    }

    /// The earliest TTL timer, if any.
    pub fn next_timer(&self) -> Option<Instant> {
        self.sessions.timers.iter().next().map(|(at, _)| *at)
    }

    /// Invalidates every session whose TTL timer has fired. Returns how many.
    pub fn expire_sessions(&mut self, now: Instant) -> usize {
        let due: Vec<String> = self
            .sessions
            .timers
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, id)| id.clone())
            .collect();
        let mut n = 0;
        for id in due {
            if self.session_invalidate(&id) {
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::super::delay::MAX_LOCK_DELAY;
    use super::super::kvs::Entry;
    use super::super::testutil::{sess, st};
    use super::*;

    #[test]
    fn lock_delay_is_capped_at_sixty_seconds() {
        let mut s = st();
        let id = sess(&mut s, Behavior::Release, 3_600_000_000_000);
        let i = s.next_index();
        s.kv_lock_at(i, Entry::new("k", vec![], 0), &id)
            .unwrap()
            .unwrap();
        let before = Instant::now();
        assert!(s.session_invalidate(&id));
        let until = s.delay.until("k").unwrap();
        assert!(until <= before + MAX_LOCK_DELAY + Duration::from_secs(1));
        assert!(until >= before + MAX_LOCK_DELAY - Duration::from_secs(1));
    }

    #[test]
    fn delete_behaviour_removes_keys_and_leaves_tombstone_index() {
        let mut s = st();
        let id = sess(&mut s, Behavior::Delete, 0);
        let i = s.next_index();
        s.kv_lock_at(i, Entry::new("p/k", vec![], 0), &id)
            .unwrap()
            .unwrap();
        assert!(s.session_invalidate(&id));
        let inval = s.current_index();
        assert_eq!(s.kv_get("p/k"), (inval, None));
        assert_eq!(s.kv_list("p/").0, inval);
        assert!(!s.lock_delayed("p/k"), "LockDelay 0 means no delay");
    }

    #[test]
    fn ttl_expiry_invalidates_due_sessions_only() {
        let mut s = st();
        let req = |ttl_ms: u64| NewSession {
            name: String::new(),
            node: "n1".into(),
            lock_delay_ns: 0,
            behavior: Behavior::Release,
            ttl: format!("{ttl_ms}ms"),
            ttl_dur: Some(Duration::from_millis(ttl_ms)),
            node_checks: vec![],
            service_checks: None,
            checks: None,
        };
        let short = s.session_create(req(10)).unwrap();
        let long = s.session_create(req(60_000)).unwrap();
        let at = s.next_timer().unwrap();
        assert!(
            at <= Instant::now() + Duration::from_millis(20),
            "2xTTL of the short one"
        );
        assert_eq!(
            s.expire_sessions(Instant::now() + Duration::from_millis(25)),
            1
        );
        assert!(s.session(&short).is_none());
        assert!(s.session(&long).is_some());
    }
}
