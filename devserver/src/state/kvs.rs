//! The KV table (Consul's `state/kvs.go`): entries by key with the table's own index, and the
//! `kvs*Txn` write semantics, which also touch the graveyard (deletes), the sessions table
//! (who holds a key) and the lock-delays (acquire).

use std::collections::BTreeMap;
use std::time::Instant;

use super::{State, Topic};

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

/// The entries by key, and the `kvs` table index.
#[derive(Default)]
pub(crate) struct Kvs {
    entries: BTreeMap<String, Entry>,
    /// The highest index an entry was written or deleted at.
    index: u64,
}

impl Kvs {
    /// The `kvs` table index.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Raises the table index to `idx` (a write at `idx`).
    pub fn bump(&mut self, idx: u64) {
        self.index = self.index.max(idx);
    }

    /// Puts the table index back (a rolled-back transaction).
    pub fn set_index(&mut self, index: u64) {
        self.index = index;
    }

    /// The entry of `key`.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// Whether `key` has an entry.
    pub fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// Stores (`Some`) or removes (`None`) the entry of `key`; returns the one it replaced.
    fn put(&mut self, key: &str, new: Option<Entry>) -> Option<Entry> {
        match new {
            Some(e) => self.entries.insert(key.to_string(), e),
            None => self.entries.remove(key),
        }
    }

    /// The entries under `prefix` (plain string prefix), in key order.
    pub fn range<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries
            .range(prefix.to_string()..)
            .take_while(move |(k, _)| k.starts_with(prefix))
            .map(|(_, e)| e)
    }
}

impl State {
    // ----- low-level mutation (journaled) -----

    pub(super) fn put_entry(&mut self, key: &str, new: Option<Entry>) {
        let old = self.kvs.put(key, new.clone());
        if let Some(o) = &old {
            self.sessions.unhold(&o.session, key);
        }
        if let Some(n) = &new {
            self.sessions.hold(&n.session, key);
        }
        if let Some(j) = &mut self.journal {
            j.kv.push((key.to_string(), old));
        }
        self.changes.push(Topic::Key(key.to_string()));
        self.changes.push(Topic::KvTable);
    }

    fn put_tombstone(&mut self, key: &str, idx: u64) {
        let old = self.graveyard.insert(key, idx);
        if let Some(j) = &mut self.journal {
            j.tombstones.push((key.to_string(), old));
        }
    }

    // ----- KV reads -----

    /// A single key and the index a read of it reports: its ModifyIndex when present,
    /// otherwise the KV activity index (max of the kvs and tombstones tables).
    pub fn kv_get(&self, key: &str) -> (u64, Option<Entry>) {
        match self.kvs.get(key) {
            Some(e) => (e.modify_index, Some(e.clone())),
            None => (self.kvs.index().max(self.graveyard.index()), None),
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
        self.kvs.range(prefix)
    }

    fn list_index(&self, prefix: &str, entries_max: u64) -> u64 {
        let table = self.kvs.index().max(self.graveyard.index());
        if prefix.is_empty() {
            return table;
        }
        let graves = self.graveyard.max_index_under(prefix);
        match entries_max.max(graves) {
            0 => table,
            n => n,
        }
    }

    // ----- KV writes (each consumes an index unless noted) -----

    /// `kvsSetTxn`: write `req`, keeping the existing Session unless `update_session`.
    /// Identical data is a no-op that keeps ModifyIndex (from Consul 1.6.0; before, see
    /// [`ConsulVersion::identical_kv_write_bumps_index`]). Returns the stored entry.
    ///
    /// [`ConsulVersion::identical_kv_write_bumps_index`]: crate::ConsulVersion::identical_kv_write_bumps_index
    ///
    /// Consul's source takes LockIndex from the request here, so a plain PUT or CAS (whose
    /// request LockIndex is 0) resets it to 0 even on a locked key, while keeping the holder.
    /// (`consul-semantics.md` §6.1 says LockIndex is preserved; the source disagrees.)
    fn set_at(&mut self, idx: u64, mut req: Entry, update_session: bool) -> Entry {
        let existing = self.kvs.get(&req.key).cloned();
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
        // From 1.6.0 an identical write is a no-op; before, it was written like any other.
        if let Some(e) = &existing {
            if e.same_data(&req) && !self.version.identical_kv_write_bumps_index() {
                return e.clone();
            }
        }
        req.modify_index = idx;
        self.kvs.bump(idx);
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
        match (self.kvs.get(&req.key), cas) {
            (Some(_), 0) | (None, 1..) => return None,
            (Some(e), n) if e.modify_index != n => return None,
            _ => {}
        }
        Some(self.set_at(idx, req, false))
    }

    /// Whether a lock-delay is in force on `key` (the leader's pre-apply check).
    pub fn lock_delayed(&mut self, key: &str) -> bool {
        self.delay.delayed(key)
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
        if self.session(session).is_none() {
            return Err(format!(
                "invalid session {}",
                crate::godur::go_quote(session)
            ));
        }
        req.session = session.to_string();
        match self.kvs.get(&req.key) {
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
        let Some(e) = self.kvs.get(&req.key) else {
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
        if self.kvs.contains(key) {
            self.put_entry(key, None);
            self.put_tombstone(key, idx);
            self.kvs.bump(idx);
        }
    }

    /// Delete with `cas`: true when the key is missing or its ModifyIndex matches.
    pub fn kv_delete_cas_at(&mut self, idx: u64, key: &str, cas: u64) -> bool {
        match self.kvs.get(key) {
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
        self.kvs.bump(idx);
    }

    /// Forgets tombstones older than the tombstone TTL. Returns whether any went.
    pub fn reap_tombstones(&mut self) -> bool {
        self.graveyard.reap(self.tombstone_ttl)
    }

    /// Starts a lock-delay on `key` until `until` (the leader's in-memory `Delay` map).
    pub(super) fn set_lock_delay(&mut self, key: String, until: Instant) {
        self.delay.set(key, until);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{sess, st};
    use super::super::Behavior;
    use super::*;
    use std::time::Duration;

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
    fn identical_write_bumps_modify_index_before_1_6() {
        let v = crate::ConsulVersion::new(1, 5, 3);
        let mut s = State::new("n1", "node-id", &[], Duration::from_secs(900), v);
        let i1 = s.next_index();
        s.kv_set_at(i1, Entry::new("a", b"x".to_vec(), 0));
        s.take_changes();
        let i2 = s.next_index();
        let e2 = s.kv_set_at(i2, Entry::new("a", b"x".to_vec(), 0));
        assert_eq!(e2.modify_index, i2);
        assert_eq!(s.kv_get("a").0, i2);
        assert!(
            s.take_changes().contains(&Topic::Key("a".into())),
            "watchers wake"
        );
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
