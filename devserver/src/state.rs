//! The replicated-state equivalent: KV entries, tombstones, sessions, nodes and checks, the
//! global raft-like index and the per-table indexes, plus the leader-only lock-delay map.
//!
//! Everything here is synchronous and runs under one mutex (see `server.rs`). Each method that
//! corresponds to a raft write consumes the next global index exactly where Consul would — also
//! for writes that change nothing (failed CAS, acquire of a held key) — and records which watch
//! topics changed, so the caller can wake blocking queries after the lock is released.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Consul's `SessionTTLMultiplier`: a session expires about 2×TTL after its last renew.
pub(crate) const SESSION_TTL_MULTIPLIER: u32 = 2;
/// Consul's `structs.SessionTTLMax`.
pub(crate) const SESSION_TTL_MAX: Duration = Duration::from_secs(24 * 3600);
/// Lock-delays longer than this are capped when applied (`structs.MaxLockDelay`).
pub(crate) const MAX_LOCK_DELAY: Duration = Duration::from_secs(60);
/// The node check every session is bound to by default.
pub(crate) const SERF_CHECK_ID: &str = "serfHealth";
/// Raft index the store starts at, standing in for the bootstrap writes a real cluster makes.
const BOOT_INDEX: u64 = 10;

/// One KV pair as Consul stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: String,
    pub value: Vec<u8>,
    pub flags: u64,
    pub session: String,
    pub lock_index: u64,
    pub create_index: u64,
    pub modify_index: u64,
}

impl Entry {
    /// A request entry: key, value and flags; indexes are filled in by the write.
    pub fn new(key: &str, value: Vec<u8>, flags: u64) -> Entry {
        Entry {
            key: key.to_string(),
            value,
            flags,
            session: String::new(),
            lock_index: 0,
            create_index: 0,
            modify_index: 0,
        }
    }

    /// Consul's `DirEntry.Equal`: the fields whose equality makes a write a no-op.
    fn same_data(&self, other: &Entry) -> bool {
        self.lock_index == other.lock_index
            && self.key == other.key
            && self.flags == other.flags
            && self.value == other.value
            && self.session == other.session
    }
}

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
    fn all_check_ids(&self) -> impl Iterator<Item = &str> {
        let legacy = self.checks.iter().flatten().map(String::as_str);
        let node = self.node_checks.iter().map(String::as_str);
        let svc = self.service_checks.iter().flatten().map(|c| c.id.as_str());
        legacy.chain(node).chain(svc)
    }
}

/// Health of a registered check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CheckStatus {
    Passing,
    Warning,
    Critical,
}

impl CheckStatus {
    pub fn parse(s: &str) -> Option<CheckStatus> {
        match s {
            "passing" => Some(CheckStatus::Passing),
            "warning" => Some(CheckStatus::Warning),
            "critical" => Some(CheckStatus::Critical),
            _ => None,
        }
    }
}

/// A catalog node and its checks.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub name: String,
    pub address: String,
    pub checks: BTreeMap<String, CheckStatus>,
}

/// A deleted key (or deleted prefix) still counted by list queries until it is reaped.
#[derive(Clone, Copy, Debug)]
struct Tombstone {
    index: u64,
    at: Instant,
}

/// What a blocking query can wait on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Topic {
    /// One key was created, modified or deleted.
    Key(String),
    /// Anything in the KV store (list queries and missing keys re-check on this).
    KvTable,
    /// A session was created or destroyed.
    Sessions,
}

/// Error texts the FSM returns for session creation.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ApplyError {
    /// Returned to the client as a 500 with this text.
    Text(String),
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

/// Undo records of a write transaction in progress.
struct Journal {
    kv: Vec<(String, Option<Entry>)>,
    tombstones: Vec<(String, Option<Tombstone>)>,
    kvs_index: u64,
    tombstones_index: u64,
    changes_len: usize,
}

/// The whole store.
pub(crate) struct State {
    tombstone_ttl: Duration,
    index: u64,
    kvs_index: u64,
    tombstones_index: u64,
    sessions_index: u64,
    kv: BTreeMap<String, Entry>,
    tombstones: BTreeMap<String, Tombstone>,
    /// Sessions by lowercase ID (Consul looks IDs up case-insensitively).
    sessions: HashMap<String, Session>,
    /// Keys held, by lowercase session ID.
    held: HashMap<String, BTreeSet<String>>,
    /// TTL timers: (deadline, lowercase session ID).
    timers: BTreeSet<(Instant, String)>,
    lock_delays: HashMap<String, Instant>,
    /// Nodes by lowercase name.
    nodes: BTreeMap<String, Node>,
    changes: Vec<Topic>,
    journal: Option<Journal>,
}

impl State {
    /// A fresh store with the agent's node registered and its `serfHealth` check passing.
    pub fn new(node_name: &str, tombstone_ttl: Duration) -> State {
        let mut st = State {
            tombstone_ttl,
            index: BOOT_INDEX,
            kvs_index: 0,
            tombstones_index: 0,
            sessions_index: 0,
            kv: BTreeMap::new(),
            tombstones: BTreeMap::new(),
            sessions: HashMap::new(),
            held: HashMap::new(),
            timers: BTreeSet::new(),
            lock_delays: HashMap::new(),
            nodes: BTreeMap::new(),
            changes: Vec::new(),
            journal: None,
        };
        st.register_node(
            node_name,
            "127.0.0.1",
            &[(SERF_CHECK_ID.to_string(), CheckStatus::Passing)],
        );
        st
    }

    /// The last index handed out.
    pub fn current_index(&self) -> u64 {
        self.index
    }

    /// Takes the topics changed since the last call.
    pub fn take_changes(&mut self) -> Vec<Topic> {
        std::mem::take(&mut self.changes)
    }

    /// Consumes the next raft index (every raft-equivalent write does, even a no-op one).
    pub fn next_index(&mut self) -> u64 {
        self.index += 1;
        self.index
    }

    // ----- low-level mutation (journaled) -----

    fn put_entry(&mut self, key: &str, new: Option<Entry>) {
        let old = match &new {
            Some(e) => self.kv.insert(key.to_string(), e.clone()),
            None => self.kv.remove(key),
        };
        if let Some(o) = &old {
            if !o.session.is_empty() {
                let sid = o.session.to_ascii_lowercase();
                if let Some(set) = self.held.get_mut(&sid) {
                    set.remove(key);
                    if set.is_empty() {
                        self.held.remove(&sid);
                    }
                }
            }
        }
        if let Some(n) = &new {
            if !n.session.is_empty() {
                self.held
                    .entry(n.session.to_ascii_lowercase())
                    .or_default()
                    .insert(key.to_string());
            }
        }
        if let Some(j) = &mut self.journal {
            j.kv.push((key.to_string(), old));
        }
        self.changes.push(Topic::Key(key.to_string()));
        self.changes.push(Topic::KvTable);
    }

    fn put_tombstone(&mut self, key: &str, idx: u64) {
        let old = self.tombstones.insert(
            key.to_string(),
            Tombstone {
                index: idx,
                at: Instant::now(),
            },
        );
        if let Some(j) = &mut self.journal {
            j.tombstones.push((key.to_string(), old));
        }
        self.tombstones_index = self.tombstones_index.max(idx);
    }

    /// Starts a write transaction: until `commit`/`rollback`, every KV change is journaled.
    pub fn begin(&mut self) {
        self.journal = Some(Journal {
            kv: Vec::new(),
            tombstones: Vec::new(),
            kvs_index: self.kvs_index,
            tombstones_index: self.tombstones_index,
            changes_len: self.changes.len(),
        });
    }

    /// Keeps the transaction's changes.
    pub fn commit(&mut self) {
        self.journal = None;
    }

    /// Undoes every change since `begin` (the consumed global index stays consumed, as in raft).
    pub fn rollback(&mut self) {
        let Some(j) = self.journal.take() else { return };
        for (key, old) in j.kv.into_iter().rev() {
            self.put_entry(&key, old);
        }
        for (key, old) in j.tombstones.into_iter().rev() {
            match old {
                Some(t) => self.tombstones.insert(key, t),
                None => self.tombstones.remove(&key),
            };
        }
        self.kvs_index = j.kvs_index;
        self.tombstones_index = j.tombstones_index;
        self.changes.truncate(j.changes_len);
    }

    // ----- KV reads -----

    /// A single key and the index a read of it reports: its ModifyIndex when present,
    /// otherwise the KV activity index (max of the kvs and tombstones tables).
    pub fn kv_get(&self, key: &str) -> (u64, Option<Entry>) {
        match self.kv.get(key) {
            Some(e) => (e.modify_index, Some(e.clone())),
            None => (self.kvs_index.max(self.tombstones_index), None),
        }
    }

    /// Entries under `prefix` (plain string prefix) in key order, and the list index.
    pub fn kv_list(&self, prefix: &str) -> (u64, Vec<Entry>) {
        let entries: Vec<Entry> = self.range(prefix).cloned().collect();
        let idx = self.list_index(
            prefix,
            entries.iter().map(|e| e.modify_index).max().unwrap_or(0),
        );
        (idx, entries)
    }

    /// Key names under `prefix`, folded after the first `separator` past the prefix.
    pub fn kv_keys(&self, prefix: &str, separator: &str) -> (u64, Vec<String>) {
        let mut max = 0;
        let mut keys: Vec<String> = Vec::new();
        for e in self.range(prefix) {
            max = max.max(e.modify_index);
            let mut k = e.key.as_str();
            if !separator.is_empty() {
                if let Some(pos) = e.key[prefix.len()..].find(separator) {
                    k = &e.key[..prefix.len() + pos + separator.len()];
                }
            }
            if keys.last().map(String::as_str) != Some(k) {
                keys.push(k.to_string());
            }
        }
        (self.list_index(prefix, max), keys)
    }

    fn range<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.kv
            .range(prefix.to_string()..)
            .take_while(move |(k, _)| k.starts_with(prefix))
            .map(|(_, e)| e)
    }

    fn list_index(&self, prefix: &str, entries_max: u64) -> u64 {
        let table = self.kvs_index.max(self.tombstones_index);
        if prefix.is_empty() {
            return table;
        }
        let graves = self
            .tombstones
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, t)| t.index)
            .max()
            .unwrap_or(0);
        match entries_max.max(graves) {
            0 => table,
            n => n,
        }
    }

    // ----- KV writes (each consumes an index unless noted) -----

    /// `kvsSetTxn`: write `req`, keeping the existing Session unless `update_session`.
    /// Identical data is a no-op that keeps ModifyIndex. Returns the stored entry.
    ///
    /// Consul's source takes LockIndex from the request here, so a plain PUT or CAS (whose
    /// request LockIndex is 0) resets it to 0 even on a locked key, while keeping the holder.
    /// (`consul-semantics.md` §6.1 says LockIndex is preserved; the source disagrees.)
    fn set_at(&mut self, idx: u64, mut req: Entry, update_session: bool) -> Entry {
        let existing = self.kv.get(&req.key).cloned();
        match &existing {
            Some(e) => {
                req.create_index = e.create_index;
                if !update_session {
                    req.session = e.session.clone();
                }
            }
            None => {
                req.create_index = idx;
                if !update_session {
                    req.session.clear();
                }
            }
        }
        if let Some(e) = &existing {
            if e.same_data(&req) {
                return e.clone();
            }
        }
        req.modify_index = idx;
        self.kvs_index = self.kvs_index.max(idx);
        let key = req.key.clone();
        self.put_entry(&key, Some(req.clone()));
        req
    }

    /// Plain PUT / txn `set`.
    pub fn kv_set_at(&mut self, idx: u64, req: Entry) -> Entry {
        self.set_at(idx, req, false)
    }

    /// PUT `?cas=` / txn `cas`: `None` when the index does not match.
    pub fn kv_cas_at(&mut self, idx: u64, req: Entry, cas: u64) -> Option<Entry> {
        match (self.kv.get(&req.key), cas) {
            (Some(_), 0) | (None, 1..) => return None,
            (Some(e), n) if e.modify_index != n => return None,
            _ => {}
        }
        Some(self.set_at(idx, req, false))
    }

    /// Whether a lock-delay is in force on `key` (the leader's pre-apply check).
    pub fn lock_delayed(&mut self, key: &str) -> bool {
        match self.lock_delays.get(key) {
            Some(until) if *until > Instant::now() => true,
            Some(_) => {
                self.lock_delays.remove(key);
                false
            }
            None => false,
        }
    }

    /// `kvsLockTxn` (after the lock-delay pre-check): `Ok(None)` when another session holds it.
    pub fn kv_lock_at(
        &mut self,
        idx: u64,
        mut req: Entry,
        session: &str,
    ) -> Result<Option<Entry>, String> {
        if session.is_empty() {
            return Err("missing session".into());
        }
        if !self.sessions.contains_key(&session.to_ascii_lowercase()) {
            return Err(format!(
                "invalid session {}",
                crate::godur::go_quote(session)
            ));
        }
        req.session = session.to_string();
        match self.kv.get(&req.key) {
            Some(e) if e.session == session => {
                req.lock_index = e.lock_index;
            }
            Some(e) if !e.session.is_empty() => return Ok(None),
            Some(e) => req.lock_index = e.lock_index + 1,
            None => req.lock_index = 1,
        }
        Ok(Some(self.set_at(idx, req, true)))
    }

    /// `kvsUnlockTxn`: clears the holder and overwrites Value and Flags with the request's.
    /// `Ok(None)` when the key is missing or held by someone else.
    pub fn kv_unlock_at(
        &mut self,
        idx: u64,
        mut req: Entry,
        session: &str,
    ) -> Result<Option<Entry>, String> {
        if session.is_empty() {
            return Err("missing session".into());
        }
        let Some(e) = self.kv.get(&req.key) else {
            return Ok(None);
        };
        if e.session != session {
            return Ok(None);
        }
        req.session.clear();
        req.lock_index = e.lock_index;
        Ok(Some(self.set_at(idx, req, true)))
    }

    /// Deletes one key (no-op when missing), leaving a tombstone.
    pub fn kv_delete_at(&mut self, idx: u64, key: &str) {
        if self.kv.contains_key(key) {
            self.put_entry(key, None);
            self.put_tombstone(key, idx);
            self.kvs_index = self.kvs_index.max(idx);
        }
    }

    /// Delete with `cas`: true when the key is missing or its ModifyIndex matches.
    pub fn kv_delete_cas_at(&mut self, idx: u64, key: &str, cas: u64) -> bool {
        match self.kv.get(key) {
            None => true,
            Some(e) if e.modify_index != cas => false,
            Some(_) => {
                self.kv_delete_at(idx, key);
                true
            }
        }
    }

    /// Deletes every key under `prefix`; one tombstone for the prefix (none for the root).
    pub fn kv_delete_tree_at(&mut self, idx: u64, prefix: &str) {
        let keys: Vec<String> = self.range(prefix).map(|e| e.key.clone()).collect();
        if keys.is_empty() {
            return;
        }
        for k in &keys {
            self.put_entry(k, None);
        }
        if !prefix.is_empty() {
            self.put_tombstone(prefix, idx);
        }
        self.kvs_index = self.kvs_index.max(idx);
    }

    /// Forgets tombstones older than the tombstone TTL. Returns whether any went.
    pub fn reap_tombstones(&mut self) -> bool {
        let ttl = self.tombstone_ttl;
        let before = self.tombstones.len();
        self.tombstones.retain(|_, t| t.at.elapsed() < ttl);
        before != self.tombstones.len()
    }

    // ----- sessions -----

    /// Looks a session up case-insensitively.
    pub fn session(&self, id: &str) -> Option<&Session> {
        self.sessions.get(&id.to_ascii_lowercase())
    }

    /// The sessions table index.
    pub fn sessions_index(&self) -> u64 {
        self.sessions_index
    }

    /// All sessions, ordered by ID.
    pub fn sessions_sorted(&self) -> Vec<Session> {
        let mut v: Vec<Session> = self.sessions.values().cloned().collect();
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
        let Some(node) = self.nodes.get(&req.node.to_ascii_lowercase()).cloned() else {
            // A raft write was attempted: the index is consumed.
            self.next_index();
            return fail("Missing node registration".into());
        };
        let mut wanted: Vec<&str> = req.node_checks.iter().map(String::as_str).collect();
        wanted.extend(req.checks.iter().flatten().map(String::as_str));
        wanted.extend(req.service_checks.iter().flatten().map(|c| c.id.as_str()));
        for check in wanted {
            match node.checks.get(check) {
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
            if !self.sessions.contains_key(&id) {
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
            self.timers.insert((at, id.clone()));
        }
        self.sessions.insert(id.clone(), s);
        self.sessions_index = idx;
        self.changes.push(Topic::Sessions);
        Ok(id)
    }

    /// Re-arms a session's TTL timer to a fresh 2×TTL. Not a raft write: no index changes.
    /// `None` when the session does not exist.
    pub fn session_renew(&mut self, id: &str) -> Option<Session> {
        let lid = id.to_ascii_lowercase();
        let s = self.sessions.get_mut(&lid)?;
        if let Some(ttl) = s.ttl_dur {
            if let Some(old) = s.expires_at {
                self.timers.remove(&(old, lid.clone()));
            }
            let at = Instant::now() + ttl * SESSION_TTL_MULTIPLIER;
            s.expires_at = Some(at);
            self.timers.insert((at, lid));
        }
        Some(s.clone())
    }

    /// Invalidates a session: deletes it, applies its behaviour to every key it holds and sets
    /// the lock-delay on each. All at one new index. Returns false when it does not exist (then
    /// no index is consumed).
    pub fn session_invalidate(&mut self, id: &str) -> bool {
        let lid = id.to_ascii_lowercase();
        let Some(s) = self.sessions.remove(&lid) else {
            return false;
        };
        let idx = self.next_index();
        self.invalidate_at(idx, s);
        true
    }

    fn invalidate_at(&mut self, idx: u64, s: Session) {
        let lid = s.id.to_ascii_lowercase();
        self.sessions.remove(&lid);
        if let Some(at) = s.expires_at {
            self.timers.remove(&(at, lid.clone()));
        }
        self.sessions_index = idx;
        self.changes.push(Topic::Sessions);
        let keys: Vec<String> = self
            .held
            .get(&lid)
            .map(|k| k.iter().cloned().collect())
            .unwrap_or_default();
        let delay = if s.lock_delay_ns > 0 {
            Duration::from_nanos(s.lock_delay_ns as u64).min(MAX_LOCK_DELAY)
        } else {
            Duration::ZERO
        };
        let now = Instant::now();
        for key in keys {
            match s.behavior {
                Behavior::Release => {
                    if let Some(mut e) = self.kv.get(&key).cloned() {
                        e.session.clear();
                        e.modify_index = idx;
                        self.put_entry(&key, Some(e));
                        self.kvs_index = self.kvs_index.max(idx);
                    }
                }
                Behavior::Delete => self.kv_delete_at(idx, &key),
            }
            if !delay.is_zero() {
                self.lock_delays.insert(key, now + delay);
            }
        }
    }

    /// Restarts every TTL timer at a full 2×TTL, as a newly elected leader does.
    pub fn rearm_all_timers(&mut self) {
        self.timers.clear();
        let now = Instant::now();
        for (lid, s) in self.sessions.iter_mut() {
            if let Some(ttl) = s.ttl_dur {
                let at = now + ttl * SESSION_TTL_MULTIPLIER;
                s.expires_at = Some(at);
                self.timers.insert((at, lid.clone()));
            }
        }
    }

    /// The earliest TTL timer, if any.
    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.iter().next().map(|(at, _)| *at)
    }

    /// Invalidates every session whose TTL timer has fired. Returns how many.
    pub fn expire_sessions(&mut self, now: Instant) -> usize {
        let due: Vec<String> = self
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

    // ----- catalog -----

    /// Registers (or updates) a node and some of its checks. A check that becomes critical
    /// invalidates the sessions bound to it, in the same write.
    pub fn register_node(&mut self, name: &str, address: &str, checks: &[(String, CheckStatus)]) {
        let idx = self.next_index();
        let node = self
            .nodes
            .entry(name.to_ascii_lowercase())
            .or_insert_with(|| Node {
                name: name.to_string(),
                address: address.to_string(),
                checks: BTreeMap::new(),
            });
        if !address.is_empty() {
            node.address = address.to_string();
        }
        for (id, status) in checks {
            node.checks.insert(id.clone(), *status);
        }
        let critical: Vec<&str> = checks
            .iter()
            .filter(|(_, s)| *s == CheckStatus::Critical)
            .map(|(id, _)| id.as_str())
            .collect();
        if !critical.is_empty() {
            self.invalidate_where(idx, |s| {
                s.node.eq_ignore_ascii_case(name)
                    && s.all_check_ids().any(|c| critical.contains(&c))
            });
        }
    }

    /// Removes a node (and its checks, invalidating its sessions), or just one of its checks.
    /// Returns false when the node is unknown.
    pub fn deregister(&mut self, name: &str, check: Option<&str>) -> bool {
        let lname = name.to_ascii_lowercase();
        if !self.nodes.contains_key(&lname) {
            return false;
        }
        let idx = self.next_index();
        match check {
            None => {
                self.nodes.remove(&lname);
                self.invalidate_where(idx, |s| s.node.eq_ignore_ascii_case(name));
            }
            Some(c) => {
                if let Some(n) = self.nodes.get_mut(&lname) {
                    n.checks.remove(c);
                }
                self.invalidate_where(idx, |s| {
                    s.node.eq_ignore_ascii_case(name) && s.all_check_ids().any(|id| id == c)
                });
            }
        }
        true
    }

    fn invalidate_where(&mut self, idx: u64, pred: impl Fn(&Session) -> bool) {
        let victims: Vec<Session> = self
            .sessions
            .values()
            .filter(|s| pred(s))
            .cloned()
            .collect();
        for s in victims {
            self.invalidate_at(idx, s);
        }
    }
}

/// A random session ID: lowercase hex `8-4-4-4-12` from 16 random bytes.
pub(crate) fn new_uuid() -> String {
    let b: [u8; 16] = rand::random();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st() -> State {
        State::new("n1", Duration::from_secs(900))
    }

    fn sess(st: &mut State, behavior: Behavior, delay_ns: i64) -> String {
        st.session_create(NewSession {
            name: String::new(),
            node: "n1".into(),
            lock_delay_ns: delay_ns,
            behavior,
            ttl: String::new(),
            ttl_dur: None,
            node_checks: vec![SERF_CHECK_ID.into()],
            service_checks: None,
            checks: None,
        })
        .unwrap()
    }

    #[test]
    fn identical_write_keeps_modify_index() {
        let mut s = st();
        let i1 = s.next_index();
        let e1 = s.kv_set_at(i1, Entry::new("a", b"x".to_vec(), 0));
        let i2 = s.next_index();
        let e2 = s.kv_set_at(i2, Entry::new("a", b"x".to_vec(), 0));
        assert_eq!(e1.modify_index, e2.modify_index);
        assert!(s.current_index() > e2.modify_index);
    }

    #[test]
    fn release_overwrites_value_and_invalidate_sets_delay() {
        let mut s = st();
        let id = sess(&mut s, Behavior::Release, 1_000_000_000);
        let i = s.next_index();
        let e = s
            .kv_lock_at(i, Entry::new("k", b"v".to_vec(), 7), &id)
            .unwrap()
            .unwrap();
        assert_eq!(e.lock_index, 1);
        let i = s.next_index();
        let e = s
            .kv_unlock_at(i, Entry::new("k", vec![], 0), &id)
            .unwrap()
            .unwrap();
        assert!(e.value.is_empty() && e.flags == 0 && e.session.is_empty());
        let i = s.next_index();
        s.kv_lock_at(i, Entry::new("k", vec![], 0), &id)
            .unwrap()
            .unwrap();
        assert!(s.session_invalidate(&id));
        assert!(s.lock_delayed("k"));
        assert_eq!(s.kv_get("k").1.unwrap().lock_index, 2);
    }

    #[test]
    fn rollback_restores_entries_and_holders() {
        let mut s = st();
        let id = sess(&mut s, Behavior::Delete, 0);
        let before = s.kv_get("k");
        s.begin();
        let i = s.next_index();
        s.kv_lock_at(i, Entry::new("k", vec![], 0), &id)
            .unwrap()
            .unwrap();
        s.rollback();
        assert_eq!(s.kv_get("k").1, before.1);
        assert!(s.held.is_empty());
    }

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
        let until = s.lock_delays["k"];
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
    fn list_index_uses_prefix_then_table() {
        let mut s = st();
        let i = s.next_index();
        s.kv_set_at(i, Entry::new("a/1", vec![], 0));
        let j = s.next_index();
        s.kv_set_at(j, Entry::new("b/1", vec![], 0));
        assert_eq!(s.kv_list("a/").0, i);
        // No entries and no tombstones under the prefix: the whole-table index.
        assert_eq!(s.kv_list("zzz").0, j);
        assert_eq!(s.kv_list("").0, j);
    }

    #[test]
    fn failed_cas_and_held_acquire_consume_index_without_change() {
        let mut s = st();
        let a = sess(&mut s, Behavior::Release, 0);
        let b = sess(&mut s, Behavior::Release, 0);
        let i = s.next_index();
        let held = s
            .kv_lock_at(i, Entry::new("k", vec![], 0), &a)
            .unwrap()
            .unwrap();
        let i = s.next_index();
        assert_eq!(s.kv_lock_at(i, Entry::new("k", vec![], 0), &b), Ok(None));
        let i = s.next_index();
        assert!(s.kv_cas_at(i, Entry::new("k", vec![], 0), 1).is_none());
        assert_eq!(s.kv_get("k").1.unwrap().modify_index, held.modify_index);
        assert_eq!(s.current_index(), held.modify_index + 2);
    }

    #[test]
    fn plain_put_keeps_holder_but_resets_lock_index() {
        let mut s = st();
        let a = sess(&mut s, Behavior::Release, 0);
        let i = s.next_index();
        s.kv_lock_at(i, Entry::new("k", vec![], 0), &a)
            .unwrap()
            .unwrap();
        let i = s.next_index();
        let e = s.kv_set_at(i, Entry::new("k", b"x".to_vec(), 0));
        assert_eq!(e.session, a);
        assert_eq!(e.lock_index, 0);
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

    #[test]
    fn critical_check_invalidates_bound_sessions() {
        let mut s = st();
        let id = sess(&mut s, Behavior::Release, 0);
        s.register_node("n1", "", &[(SERF_CHECK_ID.into(), CheckStatus::Critical)]);
        assert!(s.session(&id).is_none());
        let err = s.session_create(NewSession {
            name: String::new(),
            node: "n1".into(),
            lock_delay_ns: 0,
            behavior: Behavior::Release,
            ttl: String::new(),
            ttl_dur: None,
            node_checks: vec![SERF_CHECK_ID.into()],
            service_checks: None,
            checks: None,
        });
        assert_eq!(
            err,
            Err(ApplyError::Text(
                "apply failed: Check 'serfHealth' is in critical state".into()
            ))
        );
    }

    #[test]
    fn keys_fold_on_separator() {
        let mut s = st();
        for k in ["a/x", "a/y/z", "a/y/w", "b"] {
            let i = s.next_index();
            s.kv_set_at(i, Entry::new(k, vec![], 0));
        }
        assert_eq!(
            s.kv_keys("a/", "/").1,
            vec!["a/x".to_string(), "a/y/".to_string()]
        );
    }
}
