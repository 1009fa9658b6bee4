//! How a lock's key is written on each Consul version.
//!
//! Where the server stores txn numbers exactly (Consul 1.6.2 and later), an
//! acquire is one txn (`check-index` or `check-not-exists`, then `lock`) and a
//! release one txn `unlock`, whose answers carry the entry. A Consul before
//! 1.6.2 rounds the lock flag of a txn through a float64, so there the key is
//! written as Go's `api.Lock` writes it, with the flags in the query string:
//! `PUT ?acquire=` then a read for the entry, and `PUT ?release=`. The client
//! learns which from the answer to its first lock txn (see `compat`), and a
//! key that answer shows written with rounded flags is rewritten at once by
//! `Client::txn`.

use crate::api::kv::{parse_bool, KvPair};
use crate::api::txn::{txn_answer, unlock_request, KvOp};
use crate::client::Client;
use crate::foundations::compat::{through_f64, TxnNumbers};
use crate::foundations::error::{Error, ErrorKind, Result};

use super::LOCK_FLAG_VALUE;

/// Whether `flags` mark a lock key: Go's lock flag, or the value a Consul
/// before 1.6.2 stores for it when it comes in a txn (a baton lock key whose
/// repair did not happen: its holder crashed in between, or lost the key).
pub(crate) fn is_lock_flags(flags: u64) -> bool {
    flags == LOCK_FLAG_VALUE || flags == through_f64(LOCK_FLAG_VALUE)
}

/// Whether a key written with `have` belongs to a lock writing `want`: the
/// same flags, or Go's lock flag as a Consul before 1.6.2 stored it.
pub(crate) fn flags_match(want: u64, have: u64) -> bool {
    have == want || (want == LOCK_FLAG_VALUE && is_lock_flags(have))
}

/// Whether lock writes go in a txn: only once the server is known to store
/// txn numbers exactly. An acquire on a server not yet known also uses a txn
/// (its answer teaches, and a rounded write is repaired at once).
pub(crate) fn by_txn(client: &Client) -> bool {
    client.core().learned.txn_numbers() == TxnNumbers::Exact
}

/// What an unlock did.
pub(crate) enum Unlocked {
    /// The key is free now; the entry when the answer carried one.
    Released(Option<KvPair>),
    /// Consul says the session did not hold the key (its text).
    NotHeld(String),
}

/// Releases `key` held by `session` (one request either way).
pub(crate) fn unlock(
    client: &Client,
    key: &str,
    value: &[u8],
    session: &str,
    flags: u64,
) -> Result<Unlocked> {
    let exact_txn = by_txn(client);
    let req = unlock_request(exact_txn, key, value, session, flags);
    let resp = client.send(&req)?;
    unlocked(exact_txn, key, session, &req, resp)
}

/// What the answer to an unlock request says (`exact_txn`: it was the txn form).
pub(crate) fn unlocked(
    exact_txn: bool,
    key: &str,
    session: &str,
    req: &crate::transport::http::Request,
    resp: crate::transport::http::Response,
) -> Result<Unlocked> {
    if exact_txn {
        match txn_answer(req, resp) {
            Ok(entries) => Ok(Unlocked::Released(
                entries.into_iter().rev().find(|p| p.key == key),
            )),
            Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => {
                let texts: Vec<&str> = e.txn_errors().iter().map(|t| t.what.as_str()).collect();
                Ok(Unlocked::NotHeld(texts.join("; ")))
            }
            Err(e) => Err(e),
        }
    } else {
        let resp = crate::transport::http::check(req, resp)?;
        Ok(if parse_bool(req, &resp.body)? {
            Unlocked::Released(None)
        } else {
            Unlocked::NotHeld(format!(
                "failed to unlock key {key:?}: Consul answered false (not held by session {session})"
            ))
        })
    }
}

/// Rewrites the value of `key` held by `session`, keeping its LockIndex
/// `lock_index`. `Ok(Err(text))`: the session no longer held the key.
pub(crate) fn relock(
    client: &Client,
    key: &str,
    value: &[u8],
    session: &str,
    lock_index: u64,
    flags: u64,
) -> Result<std::result::Result<KvPair, String>> {
    if by_txn(client) {
        // A `lock` by the same session behind a `check-session`, so a lost lock
        // is never re-taken.
        return match client.txn(&[
            KvOp::check_session(key, session),
            KvOp::lock(key, value, flags, session),
        ]) {
            Ok(entries) => match entries.into_iter().rev().find(|p| p.key == key) {
                Some(p) => Ok(Ok(p)),
                None => Err(Error::new(
                    ErrorKind::BadResponse,
                    format!("txn answer without the key {key:?}"),
                )),
            },
            Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => {
                Ok(Err(e.message().to_string()))
            }
            Err(e) => Err(e),
        };
    }
    // As Go would: a re-acquire with the flags in the query string. It has no
    // session check, so a key we had lost and found free is taken again: a new
    // LockIndex shows it, and it is given back.
    if !client.kv().acquire(key, value, session, flags)? {
        return Ok(Err(format!(
            "Consul refused to rewrite {key:?} with session {session}"
        )));
    }
    match client.kv().get(key)? {
        Some(p) if p.session.as_deref() == Some(session) && p.lock_index == lock_index => Ok(Ok(p)),
        Some(p) if p.session.as_deref() == Some(session) => {
            let _ = client.kv().release(key, value, session, flags);
            Ok(Err(format!(
                "{key:?} had been released (LockIndex {} is not {lock_index})",
                p.lock_index
            )))
        }
        _ => Ok(Err(format!("{key:?} no longer carries session {session}"))),
    }
}
