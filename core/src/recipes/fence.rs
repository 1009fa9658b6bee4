//! Fencing: sequencers, their validation, and writes guarded by them.
//!
//! A lock holder can be paused (GC, swap, a partition) past the moment its
//! session dies and another process takes the lock. Whatever it writes after
//! waking must be refused. Consul gives two tools: the key's `(Session,
//! LockIndex)` pair, which changes with every new holder, and `check-session`
//! in a transaction, which makes a write conditional on the key still carrying
//! the writer's session. [`Sequencer`] carries the first (Chubby's sequencer);
//! [`Client::guarded_txn`] uses the second.

use std::fmt;
use std::str::FromStr;

use crate::api::kv::KvPair;
use crate::api::txn::{KvOp, MAX_TXN_OPS};
use crate::client::Client;
use crate::foundations::error::{Error, ErrorKind, Result};

/// Proof of one acquisition of a lock: the key, the session that acquired it and
/// the key's LockIndex at that moment, plus a monotonic `token`.
///
/// `token` is the ModifyIndex of the acquiring write: a raft index, so it only
/// grows, even when the key is deleted and LockIndex starts again at 1. Hand it
/// to storage that rejects writes carrying a token lower than the highest it saw.
///
/// The string form, `<lock_index>:<token>:<session>:<key>`, is stable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sequencer {
    /// The lock's key.
    pub key: String,
    /// The session that holds (held) the key.
    pub session: String,
    /// The key's LockIndex after the acquisition.
    pub lock_index: u64,
    /// The ModifyIndex of the acquisition (monotonic across holders).
    pub token: u64,
}

impl fmt::Display for Sequencer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}",
            self.lock_index, self.token, self.session, self.key
        )
    }
}

impl FromStr for Sequencer {
    type Err = Error;

    fn from_str(s: &str) -> Result<Sequencer> {
        Sequencer::parse(s)
    }
}

impl Sequencer {
    /// Parses the string form produced by `to_string()`.
    pub fn parse(s: &str) -> Result<Sequencer> {
        let bad = |why: &str| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("invalid sequencer {s:?}: {why}"),
            )
        };
        let mut parts = s.splitn(4, ':');
        let lock_index = parts
            .next()
            .and_then(|p| p.parse::<u64>().ok())
            .ok_or_else(|| bad("the lock index is not a number"))?;
        let token = parts
            .next()
            .and_then(|p| p.parse::<u64>().ok())
            .ok_or_else(|| bad("the token is not a number"))?;
        let session = parts
            .next()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| bad("the session is missing"))?;
        let key = parts
            .next()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| bad("the key is missing"))?;
        Ok(Sequencer {
            key: key.to_string(),
            session: session.to_string(),
            lock_index,
            token,
        })
    }
}

impl Client {
    /// Whether `seq` is still current: the key exists, carries `seq.session`,
    /// and its LockIndex is `seq.lock_index` (one consistent read).
    pub fn check_sequencer(&self, seq: &Sequencer) -> Result<bool> {
        let key = crate::foundations::keys::key(&seq.key)?;
        let opts = crate::transport::http::QueryOptions::default()
            .with_consistency(crate::transport::http::Consistency::Consistent);
        let (entry, _) = self.kv().get_with(key, &opts)?;
        Ok(entry.is_some_and(|p| {
            p.session.as_deref() == Some(seq.session.as_str()) && p.lock_index == seq.lock_index
        }))
    }

    /// Runs `ops` in one transaction behind a `check-session` of `seq`'s key, so
    /// it applies only while that session still holds the lock. A stale holder
    /// gets kind `Conflict` with a message starting `stale sequencer`, and
    /// nothing is written. Returns the entries Consul reported for `ops`.
    ///
    /// The check is on the session: a later holding by the *same* session (a
    /// re-acquire after a release) also passes it.
    pub fn guarded_txn(&self, seq: &Sequencer, ops: &[KvOp]) -> Result<Vec<KvPair>> {
        let key = crate::foundations::keys::key(&seq.key)?;
        if ops.len() + 1 > MAX_TXN_OPS {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "a guarded transaction holds at most {} operations, got {}",
                    MAX_TXN_OPS - 1,
                    ops.len()
                ),
            ));
        }
        let mut all = Vec::with_capacity(ops.len() + 1);
        all.push(KvOp::check_session(key, &seq.session));
        all.extend_from_slice(ops);
        match self.txn(&all) {
            Ok(mut entries) => {
                // The check-session result comes first when the key exists.
                if entries.first().is_some_and(|p| p.key == key) {
                    entries.remove(0);
                }
                Ok(entries)
            }
            Err(e)
                if e.kind() == ErrorKind::Conflict
                    && e.txn_errors().iter().any(|t| t.op_index == 0) =>
            {
                let what = e
                    .txn_errors()
                    .iter()
                    .find(|t| t.op_index == 0)
                    .map(|t| t.what.clone())
                    .unwrap_or_default();
                Err(Error::new(
                    ErrorKind::Conflict,
                    format!("stale sequencer {seq}: {what}"),
                ))
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_form_round_trips_with_colons_in_the_key() {
        let s = Sequencer {
            key: "svc/a:b/leader".into(),
            session: "adf4238a-882b-9ddc-4a9d-5b6758e4159e".into(),
            lock_index: 3,
            token: 1207,
        };
        let text = s.to_string();
        assert_eq!(
            text,
            "3:1207:adf4238a-882b-9ddc-4a9d-5b6758e4159e:svc/a:b/leader"
        );
        assert_eq!(Sequencer::parse(&text).unwrap(), s);
    }

    #[test]
    fn malformed_strings_are_rejected_with_the_reason() {
        for (bad, why) in [
            ("", "lock index"),
            ("x:1:s:k", "lock index"),
            ("1:y:s:k", "token"),
            ("1:2::k", "session"),
            ("1:2:s", "key"),
            ("1:2:s:", "key"),
        ] {
            let e = Sequencer::parse(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.to_string().contains(why), "{bad:?}: {e}");
        }
    }
}
