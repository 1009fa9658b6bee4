//! The ACL tables (tokens, policies, roles, auth methods, binding rules), stored as the JSON
//! objects Consul returns, with one index for all of them (`acl-*` tables of Consul's state
//! store share the ACL raft writes). The endpoint logic is in `acl_endpoint.rs`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::State;

/// One JSON object per ID (or per name, for auth methods).
pub(crate) type Table = BTreeMap<String, Map<String, Value>>;

/// The ACL tables.
#[derive(Default)]
pub(crate) struct AclTables {
    /// Whether the built-in policy and the anonymous token are in place.
    pub bootstrapped: bool,
    /// The index of the ACL bootstrap (the initial management token's creation, or
    /// `PUT /v1/acl/bootstrap`); 0 while the system can still be bootstrapped.
    pub bootstrap_index: u64,
    /// Tokens by AccessorID.
    pub tokens: Table,
    pub policies: Table,
    pub roles: Table,
    /// Auth methods by name.
    pub auth_methods: Table,
    pub binding_rules: Table,
    pub index: u64,
}

impl State {
    /// The ACL tables.
    pub fn acl(&self) -> &AclTables {
        &self.acl
    }

    /// The ACL tables, to write; the caller consumes an index with [`State::acl_write_index`].
    pub fn acl_mut(&mut self) -> &mut AclTables {
        &mut self.acl
    }

    /// Consumes the next raft index for an ACL write and returns it.
    pub fn acl_write_index(&mut self) -> u64 {
        let idx = self.next_index();
        self.acl.index = idx;
        idx
    }
}
