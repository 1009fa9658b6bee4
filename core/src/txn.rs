//! Transactions (`PUT /v1/txn`) over KV operations.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::client::Client;
use crate::error::{Error, ErrorKind, Result, TxnOpError};
use crate::http::Request;
use crate::kv::KvPair;

/// Consul's limit of operations per transaction.
pub const MAX_TXN_OPS: usize = 128;

/// A KV verb of a transaction operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvVerb {
    /// Write like a plain PUT.
    Set,
    /// Write if ModifyIndex equals `index` (0 = only create).
    Cas,
    /// Acquire with `session`.
    Lock,
    /// Release the lock held by `session`.
    Unlock,
    /// Read the key (fails if missing).
    Get,
    /// Read the key, or an empty entry if missing.
    GetOrEmpty,
    /// Read every key under the prefix.
    GetTree,
    /// Fail unless the key is locked by `session` (`""` = unlocked).
    CheckSession,
    /// Fail unless the key's ModifyIndex equals `index`.
    CheckIndex,
    /// Fail if the key exists.
    CheckNotExists,
    /// Delete the key.
    Delete,
    /// Delete if ModifyIndex equals `index` (missing key succeeds).
    DeleteCas,
    /// Delete every key under the prefix.
    DeleteTree,
}

impl KvVerb {
    /// Every verb.
    pub const ALL: [KvVerb; 13] = [
        KvVerb::Set,
        KvVerb::Cas,
        KvVerb::Lock,
        KvVerb::Unlock,
        KvVerb::Get,
        KvVerb::GetOrEmpty,
        KvVerb::GetTree,
        KvVerb::CheckSession,
        KvVerb::CheckIndex,
        KvVerb::CheckNotExists,
        KvVerb::Delete,
        KvVerb::DeleteCas,
        KvVerb::DeleteTree,
    ];

    /// The verb with this wire name (`"check-session"`), if any.
    pub fn parse(name: &str) -> Option<KvVerb> {
        KvVerb::ALL.into_iter().find(|v| v.as_str() == name)
    }

    /// The wire name, e.g. `"check-session"`.
    pub fn as_str(self) -> &'static str {
        match self {
            KvVerb::Set => "set",
            KvVerb::Cas => "cas",
            KvVerb::Lock => "lock",
            KvVerb::Unlock => "unlock",
            KvVerb::Get => "get",
            KvVerb::GetOrEmpty => "get-or-empty",
            KvVerb::GetTree => "get-tree",
            KvVerb::CheckSession => "check-session",
            KvVerb::CheckIndex => "check-index",
            KvVerb::CheckNotExists => "check-not-exists",
            KvVerb::Delete => "delete",
            KvVerb::DeleteCas => "delete-cas",
            KvVerb::DeleteTree => "delete-tree",
        }
    }
}

/// One KV operation of a transaction. Build with the constructors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvOp {
    /// The verb.
    pub verb: KvVerb,
    /// Key (or prefix for the `*-tree` verbs).
    pub key: String,
    /// Value for writes.
    pub value: Option<Vec<u8>>,
    /// Flags for writes.
    pub flags: u64,
    /// Index for `cas`, `check-index`, `delete-cas`.
    pub index: u64,
    /// Session for `lock`, `unlock`, `check-session`.
    pub session: Option<String>,
}

impl KvOp {
    fn new(verb: KvVerb, key: &str) -> KvOp {
        KvOp {
            verb,
            key: key.to_string(),
            value: None,
            flags: 0,
            index: 0,
            session: None,
        }
    }

    /// `set`: write `value` with `flags`.
    pub fn set(key: &str, value: &[u8], flags: u64) -> KvOp {
        KvOp {
            value: Some(value.to_vec()),
            flags,
            ..KvOp::new(KvVerb::Set, key)
        }
    }

    /// `cas`: write if ModifyIndex is `index` (0 = create only).
    pub fn cas(key: &str, value: &[u8], flags: u64, index: u64) -> KvOp {
        KvOp {
            value: Some(value.to_vec()),
            flags,
            index,
            ..KvOp::new(KvVerb::Cas, key)
        }
    }

    /// `lock`: acquire with `session`.
    pub fn lock(key: &str, value: &[u8], flags: u64, session: &str) -> KvOp {
        KvOp {
            value: Some(value.to_vec()),
            flags,
            session: Some(session.to_string()),
            ..KvOp::new(KvVerb::Lock, key)
        }
    }

    /// `unlock`: release the lock of `session`, writing `value` and `flags`.
    pub fn unlock(key: &str, value: &[u8], flags: u64, session: &str) -> KvOp {
        KvOp {
            value: Some(value.to_vec()),
            flags,
            session: Some(session.to_string()),
            ..KvOp::new(KvVerb::Unlock, key)
        }
    }

    /// `get`.
    pub fn get(key: &str) -> KvOp {
        KvOp::new(KvVerb::Get, key)
    }

    /// `get-or-empty`.
    pub fn get_or_empty(key: &str) -> KvOp {
        KvOp::new(KvVerb::GetOrEmpty, key)
    }

    /// `get-tree`.
    pub fn get_tree(prefix: &str) -> KvOp {
        KvOp::new(KvVerb::GetTree, prefix)
    }

    /// `check-session` (`""` checks that the key is unlocked).
    pub fn check_session(key: &str, session: &str) -> KvOp {
        KvOp {
            session: Some(session.to_string()),
            ..KvOp::new(KvVerb::CheckSession, key)
        }
    }

    /// `check-index`.
    pub fn check_index(key: &str, index: u64) -> KvOp {
        KvOp {
            index,
            ..KvOp::new(KvVerb::CheckIndex, key)
        }
    }

    /// `check-not-exists`.
    pub fn check_not_exists(key: &str) -> KvOp {
        KvOp::new(KvVerb::CheckNotExists, key)
    }

    /// `delete`.
    pub fn delete(key: &str) -> KvOp {
        KvOp::new(KvVerb::Delete, key)
    }

    /// `delete-cas`.
    pub fn delete_cas(key: &str, index: u64) -> KvOp {
        KvOp {
            index,
            ..KvOp::new(KvVerb::DeleteCas, key)
        }
    }

    /// `delete-tree`.
    pub fn delete_tree(prefix: &str) -> KvOp {
        KvOp::new(KvVerb::DeleteTree, prefix)
    }

    pub(crate) fn to_json(&self) -> Value {
        let mut kv = json!({
            "Verb": self.verb.as_str(),
            "Key": self.key,
        });
        if let Some(v) = &self.value {
            kv["Value"] = json!(base64::engine::general_purpose::STANDARD.encode(v));
        }
        if self.flags != 0 {
            kv["Flags"] = json!(self.flags);
        }
        if self.index != 0 {
            kv["Index"] = json!(self.index);
        }
        if let Some(s) = &self.session {
            kv["Session"] = json!(s);
        }
        json!({ "KV": kv })
    }
}

#[derive(Deserialize)]
struct TxnAnswer {
    #[serde(rename = "Results", default)]
    results: Option<Vec<TxnResultEntry>>,
    #[serde(rename = "Errors", default)]
    errors: Option<Vec<TxnErrorEntry>>,
}

#[derive(Deserialize)]
struct TxnResultEntry {
    #[serde(rename = "KV", default)]
    kv: Option<KvPair>,
}

#[derive(Deserialize)]
struct TxnErrorEntry {
    #[serde(rename = "OpIndex", default)]
    op_index: usize,
    #[serde(rename = "What", default)]
    what: String,
}

impl Client {
    /// Runs KV operations atomically (`PUT /v1/txn`). On success returns the
    /// entries Consul reported (ops without an entry contribute none). When any
    /// op fails nothing is applied and the error (kind
    /// [`ErrorKind::Conflict`], or `PermissionDenied` for ACL denials) lists
    /// every failing op in [`Error::txn_errors`].
    pub fn txn(&self, ops: &[KvOp]) -> Result<Vec<KvPair>> {
        if ops.len() > MAX_TXN_OPS {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "Transaction contains too many operations ({} > {MAX_TXN_OPS})",
                    ops.len()
                ),
            ));
        }
        let mut req = Request::new("PUT", "/v1/txn");
        req.json_body(&Value::Array(ops.iter().map(KvOp::to_json).collect()));
        let resp = self.send(&req)?;
        match resp.status {
            200 | 409 => {}
            _ => return Err(crate::http::check(&req, resp).err().expect("non-2xx")),
        }
        let answer: TxnAnswer = resp.json(&req.endpoint())?;
        if resp.status == 409 {
            let errors = answer
                .errors
                .unwrap_or_default()
                .into_iter()
                .map(|e| TxnOpError {
                    op_index: e.op_index,
                    what: e.what,
                })
                .collect();
            return Err(Error::txn_conflict(req.endpoint(), errors));
        }
        Ok(answer
            .results
            .unwrap_or_default()
            .into_iter()
            .filter_map(|r| r.kv)
            .collect())
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn every_verb_parses_from_its_wire_name() {
        for v in KvVerb::ALL {
            assert_eq!(KvVerb::parse(v.as_str()), Some(v));
        }
        assert_eq!(KvVerb::parse("nope"), None);
    }

    use super::*;

    #[test]
    fn ops_encode_like_go() {
        assert_eq!(
            KvOp::lock("k", b"v", 7, "s").to_json(),
            json!({"KV":{"Verb":"lock","Key":"k","Value":"dg==","Flags":7,"Session":"s"}})
        );
        assert_eq!(
            KvOp::check_index("k", 5).to_json(),
            json!({"KV":{"Verb":"check-index","Key":"k","Index":5}})
        );
        assert_eq!(
            KvOp::check_session("k", "").to_json(),
            json!({"KV":{"Verb":"check-session","Key":"k","Session":""}})
        );
    }
}
