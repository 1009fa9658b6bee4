//! Transactions (`PUT /v1/txn`) over KV operations.

use base64::Engine as _;
use serde::Deserialize;
#[cfg(test)]
use serde_json::{json, Value};
use std::borrow::Cow;

use crate::api::kv::{kv_path, KvPair, WriteOptions};
use crate::foundations::compat::{
    exact_in_f64, lossy_number_error, probe_answer, TxnNumbers, GET_OR_EMPTY_SINCE, PROBE_INDEX,
    TXN_128_OPS_SINCE, TXN_FLOAT64_BEFORE,
};
use crate::foundations::error::{Error, ErrorKind, Result, TxnOpError};
use crate::transport::conn::Conn;
use crate::transport::http::{Request, Response};

/// Consul's limit of operations per transaction since 1.14.0 (64 before; such
/// a server's refusal teaches the client, which then refuses more itself).
pub const MAX_TXN_OPS: usize = 128;

/// Consul's limit of operations per transaction before 1.14.0.
const OLD_MAX_TXN_OPS: usize = 64;

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

    /// The op as Consul's `/v1/txn` reads it (a test's view of [`TxnBody`]).
    #[cfg(test)]
    pub(crate) fn to_json(&self) -> Value {
        serde_json::to_value(TxnBody(std::slice::from_ref(self))).expect("serialisable")[0].take()
    }
}

/// The body of a `/v1/txn` request: `[{"KV": {"Verb", "Key", ...}}, ...]`, the fields in the
/// order Go's `api.KVTxnOp` declares them, leaving out a value the op does not carry, zero
/// flags or index, and an unset session. Written straight to bytes: a lock's acquire and
/// release each send one.
pub(crate) struct TxnBody<'a>(pub(crate) &'a [KvOp]);

impl serde::Serialize for TxnBody<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|op| OpJson { kv: KvJson::of(op) }))
    }
}

/// One op of a [`TxnBody`].
#[derive(serde::Serialize)]
struct OpJson<'a> {
    #[serde(rename = "KV")]
    kv: KvJson<'a>,
}

/// The `KV` object of an [`OpJson`].
#[derive(serde::Serialize)]
#[serde(rename_all = "PascalCase")]
struct KvJson<'a> {
    verb: &'a str,
    key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    #[serde(skip_serializing_if = "is_zero")]
    flags: u64,
    #[serde(skip_serializing_if = "is_zero")]
    index: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a str>,
}

impl<'a> KvJson<'a> {
    fn of(op: &'a KvOp) -> KvJson<'a> {
        KvJson {
            verb: op.verb.as_str(),
            key: &op.key,
            value: op
                .value
                .as_ref()
                .map(|v| base64::engine::general_purpose::STANDARD.encode(v)),
            flags: op.flags,
            index: op.index,
            session: op.session.as_deref(),
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The `PUT /v1/txn` request that runs `ops` as they are (no checks).
fn txn_put(ops: &[KvOp]) -> Request {
    let mut req = Request::new("PUT", "/v1/txn");
    req.json_body(&TxnBody(ops));
    req
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

impl KvOp {
    /// Whether the op writes (Consul's `isWrite`).
    pub(crate) fn is_write(&self) -> bool {
        matches!(
            self.verb,
            KvVerb::Set
                | KvVerb::Cas
                | KvVerb::Lock
                | KvVerb::Unlock
                | KvVerb::Delete
                | KvVerb::DeleteCas
                | KvVerb::DeleteTree
        )
    }

    /// Whether the op stores `flags` (and so teaches how the server stores numbers).
    fn stores_flags(&self) -> bool {
        matches!(
            self.verb,
            KvVerb::Set | KvVerb::Cas | KvVerb::Lock | KvVerb::Unlock
        )
    }
}

impl Conn {
    /// Runs `ops` as one transaction (see `Client::txn`, its public face).
    pub(crate) fn txn(&self, ops: &[KvOp]) -> Result<Vec<KvPair>> {
        let normalised = normalise_keys(ops)?;
        let ops = &*normalised;
        // Never let a rounded flag land on a key others read: learn first.
        if self.learned.txn_numbers() == TxnNumbers::Unknown {
            if let Some(op) = ops
                .iter()
                .find(|o| o.stores_flags() && !exact_in_f64(o.flags))
            {
                self.learn_txn_numbers(&op.key);
            }
        }
        let req = self.txn_request(ops)?;
        let resp = self.send(&req)?;
        self.txn_judge(ops, &req, resp)
    }

    /// [`Conn::txn`] sent on the idle loop connection when there is one, driven on this
    /// thread (`Conn::send_direct`: no retry), else the ordinary way. For callers whose next
    /// steps settle a txn whose answer was lost: a failure may leave it applied.
    pub(crate) fn txn_direct(&self, ops: &[KvOp]) -> Result<Vec<KvPair>> {
        let normalised = normalise_keys(ops)?;
        let ops = &*normalised;
        if self.learned.txn_numbers() != TxnNumbers::Exact {
            return self.txn(ops);
        }
        let req = self.txn_request(ops)?;
        let resp = match self.send_direct(&req) {
            Some(r) => r?,
            None => self.send(&req)?,
        };
        self.txn_judge(ops, &req, resp)
    }

    /// The request that runs `ops` (keys already normalised), refused before sending what
    /// the server is known not to support. No request is sent (an event loop's warm path
    /// sends it itself; see `http::exchange`).
    pub(crate) fn txn_request(&self, ops: &[KvOp]) -> Result<Request> {
        self.refuse_unsupported(ops)?;
        Ok(txn_put(ops))
    }

    /// What the answer to `req`, the request of `ops`, says: the entries, or the refusal,
    /// learning from it. Sends nothing on a server known to store txn numbers exactly (before
    /// 1.6.2 it repairs rounded flags, see [`Conn::txn`]).
    pub(crate) fn txn_judge(
        &self,
        ops: &[KvOp],
        req: &Request,
        resp: Response,
    ) -> Result<Vec<KvPair>> {
        let entries = match txn_answer(req, resp) {
            Ok(entries) => entries,
            Err(e) => return Err(self.learn_refusal(ops, e)),
        };
        self.check_stored_flags(ops, entries)
    }

    /// Learns how the server stores numbers in a txn body (exactly from
    /// Consul 1.6.2; through a float64 before) without storing any: a txn that
    /// sets `key` and then checks its index against [`PROBE_INDEX`] (odd,
    /// above 2^53) always fails, so nothing is written, and Consul's refusal
    /// quotes the index as it decoded it. Needs the write permission on `key`
    /// the caller's own write needs. Leaves it unknown when the answer does not
    /// tell (a refusal, an unreachable server; only the latter is asked again);
    /// errors are not the caller's. The refusal's text ("failed index check for
    /// key …, current modify index N != M") is the state store's in Consul's
    /// source from before 1.0 (`consul/state/kvs.go`) to today.
    pub(crate) fn learn_txn_numbers(&self, key: &str) -> TxnNumbers {
        let learned = &self.learned;
        if learned.txn_numbers() != TxnNumbers::Unknown || learned.probe_untold() {
            return learned.txn_numbers();
        }
        let ops = [KvOp::set(key, b"", 0), KvOp::check_index(key, PROBE_INDEX)];
        let req = txn_put(&ops);
        let (found, answered) = match self.send(&req).and_then(|resp| txn_answer(&req, resp)) {
            Err(e) => {
                let found = e
                    .txn_errors()
                    .iter()
                    .filter(|t| t.op_index == 1)
                    .map(|t| probe_answer(&t.what))
                    .find(|n| *n != TxnNumbers::Unknown)
                    .unwrap_or(TxnNumbers::Unknown);
                (found, e.status().is_some())
            }
            Ok(_) => {
                log::warn!(
                    "baton: the txn-number probe on {key:?} was applied (index {PROBE_INDEX})"
                );
                (TxnNumbers::Unknown, true)
            }
        };
        log::debug!("baton: txn numbers on this server: {found:?}");
        learned.learn(found);
        // No answer (Consul unreachable): asked again next time. An answer that
        // does not tell: never again (lock keys then go Go's way, exact everywhere).
        if found == TxnNumbers::Unknown && answered {
            learned.learn_probe_untold();
        }
        found
    }

    fn kv(&self) -> crate::api::kv::Kv<'_> {
        crate::api::kv::Kv { conn: self }
    }

    /// Refuses, before sending, what the server is known not to support.
    fn refuse_unsupported(&self, ops: &[KvOp]) -> Result<()> {
        let learned = &self.learned;
        let cap = learned
            .max_txn_ops()
            .unwrap_or(MAX_TXN_OPS)
            .min(MAX_TXN_OPS);
        if ops.len() > cap {
            return Err(too_many_ops(ops.len(), cap));
        }
        if learned.get_or_empty_unknown() && ops.iter().any(|o| o.verb == KvVerb::GetOrEmpty) {
            return Err(get_or_empty_unsupported());
        }
        if learned.txn_numbers() == TxnNumbers::Lossy {
            for (i, op) in ops.iter().enumerate() {
                if op.stores_flags() && !exact_in_f64(op.flags) {
                    return Err(lossy_number_error(
                        &format!("the flags of op {i} ({:?})", op.key),
                        op.flags,
                    ));
                }
                if !exact_in_f64(op.index) {
                    return Err(lossy_number_error(
                        &format!("the index of op {i} ({:?})", op.key),
                        op.index,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Turns a refusal that means "this server is too old" into `Unsupported`,
    /// remembering it.
    fn learn_refusal(&self, ops: &[KvOp], e: Error) -> Error {
        let learned = &self.learned;
        if let Some(text) = e.server_text() {
            if let Some(cap) = parse_op_cap(text) {
                // Consul's cap was 64 before 1.14 and is 128 since; a smaller one
                // from a confused server is not learnt (a cap of 1 would make every
                // lock acquire, a two-op txn, fail locally from then on).
                if (OLD_MAX_TXN_OPS..MAX_TXN_OPS).contains(&cap) {
                    learned.learn_max_txn_ops(cap);
                    return too_many_ops(ops.len(), cap).with_endpoint("PUT /v1/txn");
                }
            }
        }
        let unknown_verb = e.txn_errors().iter().any(|t| {
            t.what.contains("unknown KV verb")
                && ops
                    .get(t.op_index)
                    .is_some_and(|o| o.verb == KvVerb::GetOrEmpty)
        });
        if unknown_verb {
            learned.learn_get_or_empty_unknown();
            return get_or_empty_unsupported().with_endpoint("PUT /v1/txn");
        }
        e
    }

    /// Learns from the flags the answer shows for flagged writes, and repairs
    /// the keys a server before 1.6.2 stored with rounded flags.
    fn check_stored_flags(&self, ops: &[KvOp], mut entries: Vec<KvPair>) -> Result<Vec<KvPair>> {
        let learned = &self.learned;
        let mut rounded: Vec<&KvOp> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            if !op.stores_flags() || exact_in_f64(op.flags) {
                continue;
            }
            // Only the last write of a key in the txn decides what it stores.
            if ops[i + 1..].iter().any(|o| o.is_write() && o.key == op.key) {
                continue;
            }
            let stored = entries
                .iter()
                .rev()
                .find(|p| p.key == op.key)
                .map(|p| p.flags);
            if let Some(stored) = stored {
                if !learned.learn_txn_flags(op.flags, stored) {
                    rounded.push(op);
                }
            }
        }
        if rounded.is_empty() {
            return Ok(entries);
        }
        let mut unrepairable = Vec::new();
        for op in rounded {
            let Some(at) = entries.iter().rposition(|p| p.key == op.key) else {
                continue;
            };
            let value = op.value.as_deref().unwrap_or_default();
            let written = entries[at].modify_index;
            let options = match op.verb {
                KvVerb::Lock => WriteOptions {
                    flags: op.flags,
                    acquire: op.session.clone(),
                    ..WriteOptions::default()
                },
                KvVerb::Set | KvVerb::Cas => WriteOptions {
                    flags: op.flags,
                    cas: Some(written),
                    ..WriteOptions::default()
                },
                _ => {
                    unrepairable.push(op.key.clone());
                    continue;
                }
            };
            // `false`: the key changed since (someone else's write now stands).
            match self.kv().put_with(&op.key, value, &options) {
                Ok(true) => {
                    if let Ok(Some(fresh)) = self.kv().get(&op.key) {
                        for p in entries.iter_mut().filter(|p| p.key == op.key) {
                            *p = fresh.clone();
                        }
                    }
                }
                Ok(false) => log::debug!(
                    "baton: {:?} changed before its rounded flags could be repaired",
                    op.key
                ),
                Err(e) => return Err(e),
            }
        }
        if !unrepairable.is_empty() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "this Consul (before {TXN_FLOAT64_BEFORE}) stored the flags of an unlock \
                     rounded through a float64 on {unrepairable:?}, and they cannot be repaired \
                     without resetting the LockIndex; release keys with flags above 2^53 with \
                     Kv::release (flags in the query string are exact on every version)"
                ),
            ));
        }
        Ok(entries)
    }
}

/// `ops` with their keys in the form Consul is asked about ([`crate::foundations::keys`]):
/// prefixes for the `*-tree` verbs, keys for the others. The op's index names
/// a bad key. Ops already in that form (every op baton builds itself, on the
/// lock's hot path) are borrowed, not copied.
/// The request that releases `key` held by `session`, resending `value` and
/// the lock's `flags` (Consul overwrites both on release).
/// (A lock's wire format; here, below the lock and the client's close, which both send it.)
pub(crate) fn unlock_request(
    exact_txn: bool,
    key: &str,
    value: &[u8],
    session: &str,
    flags: u64,
) -> Request {
    if exact_txn {
        txn_put(&[KvOp::unlock(key, value, flags, session)])
    } else {
        let mut req = Request::new("PUT", kv_path(key));
        req.param("flags", flags.to_string());
        req.param("release", session.to_string());
        req.raw_body(value.to_vec());
        req
    }
}

fn normalise_keys(ops: &[KvOp]) -> Result<Cow<'_, [KvOp]>> {
    let mut fixed: Option<Vec<KvOp>> = None;
    for (i, op) in ops.iter().enumerate() {
        let key = match op.verb {
            KvVerb::GetTree | KvVerb::DeleteTree => crate::foundations::keys::prefix(&op.key),
            _ => crate::foundations::keys::key(&op.key),
        }
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("transaction op {i}: {}", e.message()),
            )
        })?;
        if key.len() != op.key.len() {
            fixed.get_or_insert_with(|| ops.to_vec())[i].key = key.to_string();
        }
    }
    Ok(fixed.map_or(Cow::Borrowed(ops), Cow::Owned))
}

/// Parses a txn answer: the entries of a 200, the op errors of a 409.
pub(crate) fn txn_answer(req: &Request, resp: Response) -> Result<Vec<KvPair>> {
    // Any 2xx is read as Consul's 200 (a 204 used to reach an `expect` here and panic).
    if resp.status != 409 && !(200..300).contains(&resp.status) {
        let e = Error::from_status(req.endpoint(), resp.status, &resp.body);
        return Err(resp.located(req, e));
    }
    let answer: TxnAnswer = resp.json(req)?;
    if resp.status == 409 {
        let errors: Vec<TxnOpError> = answer
            .errors
            .unwrap_or_default()
            .into_iter()
            .map(|e| TxnOpError {
                op_index: e.op_index,
                what: e.what,
            })
            .collect();
        if errors.is_empty() {
            // Consul's 409 always lists the failed operations; without them the
            // callers could not tell a lost lock from a CAS mismatch.
            let e = Error::new(
                ErrorKind::BadResponse,
                "Consul answered 409 to a transaction without listing its failed operations \
                 (\"Errors\" is empty or missing)",
            );
            return Err(resp.located(req, e));
        }
        let body = req.body.as_ref().map(|b| &b.0[..]).unwrap_or_default();
        let e = Error::txn_conflict_of(req.endpoint(), errors, body);
        return Err(resp.located(req, e));
    }
    Ok(answer
        .results
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| r.kv)
        .collect())
}

/// The cap in Consul's "Transaction contains too many operations (N > CAP)".
fn parse_op_cap(text: &str) -> Option<usize> {
    let rest = text.split("too many operations").nth(1)?;
    let cap = rest.split('>').nth(1)?;
    cap.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok()
}

fn too_many_ops(n: usize, cap: usize) -> Error {
    if cap < MAX_TXN_OPS {
        Error::new(
            ErrorKind::Unsupported,
            format!(
                "Transaction contains too many operations ({n} > {cap}): this Consul (before \
                 {TXN_128_OPS_SINCE}) allows {cap} per transaction"
            ),
        )
    } else {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("Transaction contains too many operations ({n} > {cap})"),
        )
    }
}

fn get_or_empty_unsupported() -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "the get-or-empty transaction verb needs Consul {GET_OR_EMPTY_SINCE} or later; this \
             server does not know it"
        ),
    )
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
