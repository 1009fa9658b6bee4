//! Consul's lock-delay, which it never announces: whether a key is held back
//! for it right now, asked without writing anything.
//!
//! When Consul ends a session that held keys (destroyed, expired, a failed
//! check), it releases or deletes them and refuses to lock them for the
//! session's lock-delay, so that the holder can learn of its loss before anyone
//! else acts on the key. A lock gets this protection from Consul for free. A
//! recipe whose holders are *other* keys (a semaphore's slots, a read-write
//! lock's queue) must respect it by hand: a dead holder's key keeps its place
//! until the delay is over. Consul shows the delay only by refusing a lock on
//! the key, so that is how it is asked: a transaction that would lock the key
//! and then fails on purpose (a session check nobody passes), so nothing is
//! ever written.

use std::time::Duration;

use crate::api::txn::KvOp;
use crate::client::Client;
use crate::foundations::error::{ErrorKind, Result};

/// A session ID no session has (Consul's IDs are random UUIDs): the check that
/// makes a probe fail whatever else happens.
const NO_SESSION: &str = "00000000-0000-0000-0000-000000000000";

/// How often a waiter looks again at a key held back for a dead holder's
/// lock-delay (Consul does not tell how long the delay still runs, and its end
/// changes nothing a watch would see).
pub(crate) const LOCK_DELAY_RECHECK: Duration = Duration::from_millis(250);

/// Whether Consul refuses to lock `key` for `session` because of lock-delay
/// (nothing is written either way).
pub(crate) fn under_lock_delay(client: &Client, key: &str, session: &str) -> Result<bool> {
    let probe = [
        KvOp::lock(key, b"", 0, session),
        KvOp::check_session(key, NO_SESSION),
    ];
    match client.txn(&probe) {
        // Cannot happen (the check fails); nothing to hold back.
        Ok(_) => Ok(false),
        Err(e) if e.kind() == ErrorKind::Conflict && !e.txn_errors().is_empty() => Ok(e
            .txn_errors()
            .iter()
            .any(|t| t.op_index == 0 && t.what.contains("lock delay"))),
        Err(e) => Err(e),
    }
}
