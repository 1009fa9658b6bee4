//! The replicated-state equivalent, split by table as Consul's state store is
//! (`agent/consul/state/*.go`): KV entries ([`kvs`], `kvs.go`), the tombstones of deleted keys
//! ([`graveyard`], `graveyard.go`), the leader-only lock-delay map ([`delay`], `delay.go`),
//! sessions and their TTL timers ([`sessions`], `session.go`), nodes, services and checks
//! ([`catalog`], `catalog.go`), the ACL tables ([`acl`]), user events and coordinates
//! ([`events`]), prepared queries and the operator's records ([`operator`]). Each table keeps
//! its own index. This module holds what they share: the [`State`] itself, the global raft-like
//! index, the write journal (begin/commit/rollback) and the watch topics a write changed.
//!
//! Everything here is synchronous and runs under one mutex (see `server.rs`). Each method that
//! corresponds to a raft write consumes the next global index exactly where Consul would — also
//! for writes that change nothing (failed CAS, acquire of a held key) — and records which watch
//! topics changed, so the caller can wake blocking queries after the lock is released.

mod acl;
mod catalog;
mod delay;
mod events;
mod graveyard;
mod kvs;
mod operator;
mod probe;
mod sessions;

use std::time::Duration;

use crate::version::ConsulVersion;

pub(crate) use acl::Table as AclTable;
pub(crate) use catalog::{Catalog, Check, CheckStatus, Node, Service, SERF_CHECK_ID};
use delay::Delay;
use graveyard::{Graveyard, Tombstone};
pub(crate) use kvs::Entry;
use kvs::Kvs;
pub(crate) use operator::OperatorTables;
pub(crate) use probe::{Probe, Target};
use sessions::SessionTable;
pub(crate) use sessions::{Behavior, NewSession, ServiceCheck, Session, SESSION_TTL_MAX};

/// Raft index the store starts at, standing in for the bootstrap writes a real cluster makes.
pub(crate) const BOOT_INDEX: u64 = 10;

/// What a blocking query can wait on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Topic {
    /// One key was created, modified or deleted.
    Key(String),
    /// Anything in the KV store (list queries and missing keys re-check on this).
    KvTable,
    /// A session was created or destroyed.
    Sessions,
    /// Anything in the catalog tables (nodes, services, checks) or coordinates.
    Catalog,
    /// A user event was fired.
    Events,
}

/// Error texts the FSM returns for session creation.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ApplyError {
    /// Returned to the client as a 500 with this text.
    Text(String),
}

/// Undo records of a write transaction in progress.
struct Journal {
    kv: Vec<(String, Option<Entry>)>,
    tombstones: Vec<(String, Option<Tombstone>)>,
    kvs_index: u64,
    tombstones_index: u64,
    changes_len: usize,
    /// The catalog as it was, when the transaction writes to it too.
    catalog: Option<Catalog>,
}

/// The whole store.
pub(crate) struct State {
    /// The Consul release whose write semantics to follow.
    version: ConsulVersion,
    tombstone_ttl: Duration,
    index: u64,
    /// KV entries.
    kvs: Kvs,
    /// Tombstones of deleted keys.
    graveyard: Graveyard,
    /// The leader's lock-delays (not replicated).
    delay: Delay,
    /// Sessions, the keys they hold, their TTL timers.
    sessions: SessionTable,
    /// Nodes, services and checks.
    catalog: Catalog,
    /// Tokens, policies, roles, auth methods, binding rules.
    acl: acl::AclTables,
    /// User events and coordinates.
    events: events::EventsAndCoords,
    /// Prepared queries, the autopilot configuration, the Connect CA root.
    pub(crate) operator: OperatorTables,
    changes: Vec<Topic>,
    journal: Option<Journal>,
}

impl State {
    /// A fresh store with the agent's node registered (ID `node_id`, `TaggedAddresses` lan and
    /// wan), the `consul` service a server registers, and its `serfHealth` check passing.
    pub fn new(
        node_name: &str,
        node_id: &str,
        node_meta: &[(String, String)],
        tombstone_ttl: Duration,
        version: ConsulVersion,
    ) -> State {
        State::new_after(
            node_name,
            node_id,
            node_meta,
            tombstone_ttl,
            version,
            BOOT_INDEX,
        )
    }

    /// Like [`State::new`], with the boot writes and every write after them above `index`:
    /// a restart (`/_devserver/restart`) loses the data but not the raft index, as a cluster
    /// that loses its sessions keeps counting, so indexes (and fencing tokens made from them)
    /// never go backwards.
    pub fn new_after(
        node_name: &str,
        node_id: &str,
        node_meta: &[(String, String)],
        tombstone_ttl: Duration,
        version: ConsulVersion,
        index: u64,
    ) -> State {
        let mut st = State {
            version,
            tombstone_ttl,
            index: index.max(BOOT_INDEX),
            kvs: Kvs::default(),
            graveyard: Graveyard::default(),
            delay: Delay::default(),
            sessions: SessionTable::default(),
            catalog: Catalog::default(),
            acl: acl::AclTables::default(),
            events: events::EventsAndCoords::default(),
            operator: OperatorTables::default(),
            changes: Vec::new(),
            journal: None,
        };
        st.boot_catalog(node_name, node_id, node_meta);
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

    /// The raft index of the last write.
    pub fn last_index(&self) -> u64 {
        self.index
    }

    /// Consumes the next raft index (every raft-equivalent write does, even a no-op one).
    pub fn next_index(&mut self) -> u64 {
        self.index += 1;
        self.index
    }

    /// Starts a write transaction: until `commit`/`rollback`, every KV change is journaled.
    pub fn begin(&mut self) {
        self.journal = Some(Journal {
            kv: Vec::new(),
            tombstones: Vec::new(),
            kvs_index: self.kvs.index(),
            tombstones_index: self.graveyard.index(),
            changes_len: self.changes.len(),
            catalog: None,
        });
    }

    /// Like [`State::begin`], and a rollback restores the catalog tables too (a txn with
    /// node, service or check writes). Sessions a node or check write invalidated stay
    /// invalidated.
    pub fn begin_with_catalog(&mut self) {
        self.begin();
        let snapshot = self.catalog.clone();
        if let Some(j) = self.journal.as_mut() {
            j.catalog = Some(snapshot);
        }
    }

    /// Keeps the transaction's changes.
    pub fn commit(&mut self) {
        self.journal = None;
    }

    /// Undoes every change since `begin` (the consumed global index stays consumed, as in raft).
    pub fn rollback(&mut self) {
        let Some(mut j) = self.journal.take() else {
            return;
        };
        if let Some(catalog) = j.catalog.take() {
            self.catalog = catalog;
        }
        for (key, old) in j.kv.into_iter().rev() {
            self.put_entry(&key, old);
        }
        for (key, old) in j.tombstones.into_iter().rev() {
            self.graveyard.restore(key, old);
        }
        self.kvs.set_index(j.kvs_index);
        self.graveyard.set_index(j.tombstones_index);
        self.changes.truncate(j.changes_len);
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

/// Fixtures shared by the unit tests of the table modules.
#[cfg(test)]
mod testutil {
    use super::*;

    pub(super) fn st() -> State {
        State::new(
            "n1",
            "00000000-0000-0000-0000-000000000001",
            &[],
            Duration::from_secs(900),
            ConsulVersion::CURRENT,
        )
    }

    pub(super) fn sess(st: &mut State, behavior: Behavior, delay_ns: i64) -> String {
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
}

#[cfg(test)]
mod tests {
    use super::testutil::{sess, st};
    use super::*;

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
        assert!(s.sessions.nothing_held());
    }
}
