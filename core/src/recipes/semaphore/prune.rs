//! Pruning dead holders from `.lock`, keeping a slot back while its dead
//! holder's lock-delay runs.
//!
//! Go's `api.Semaphore` drops a holder from `.lock` as soon as no key under the
//! prefix carries its session. When Consul invalidates a holder's session (an
//! operator destroys it, a check fails), the slot is then free at once, before
//! the holder can have learnt of its loss: for a few milliseconds more
//! processes believe they hold a slot than the limit allows. A lock has
//! Consul's lock-delay against exactly this; a slot had none.
//!
//! Consul does set that lock-delay on the dead holder's contender key (it held
//! it with the session), and it only shows it by refusing a lock on that key.
//! So before pruning, baton asks (`recipes::lock_delay`, nothing written).
//! Refused for lock-delay: the holder
//! died less than its lock-delay ago, and its slot stays taken. Any other
//! answer: it is pruned, as Go would. A clean release takes the holder out of
//! `.lock` itself, so only crashed and invalidated holders are ever probed.

use std::collections::HashSet;

use crate::api::kv::KvPair;
use crate::client::Client;
use crate::foundations::error::Result;
use crate::recipes::lock_delay::under_lock_delay;

use super::format::{path_join, LockDoc};

/// Makes room for `session` in `doc` if it needs a slot: drops holders no key
/// under the prefix carries, one at a time until a slot is free, except those
/// whose contender key is still under lock-delay. Dead holders are only
/// probed (one txn each) while a slot is still needed; when there is room
/// already, or `session` is listed, `doc` is left as it is. Returns whether a
/// holder was kept back for lock-delay (the caller looks again later: a
/// lock-delay ending changes nothing in the KV store).
pub(super) fn make_room(
    client: &Client,
    prefix: &str,
    session: &str,
    limit: u64,
    doc: &mut LockDoc,
    entries: &[KvPair],
) -> Result<bool> {
    let full =
        |doc: &LockDoc| !doc.holders.contains_key(session) && doc.holders.len() as u64 >= limit;
    if !full(doc) {
        return Ok(false);
    }
    let alive: HashSet<&str> = entries
        .iter()
        .filter_map(|p| p.session.as_deref())
        .collect();
    let dead: Vec<String> = doc
        .holders
        .keys()
        .filter(|h| !alive.contains(h.as_str()))
        .cloned()
        .collect();
    let mut kept = false;
    for holder in dead {
        if !full(doc) {
            break;
        }
        if under_lock_delay(client, &path_join(prefix, &holder), session)? {
            kept = true;
        } else {
            doc.holders.remove(&holder);
        }
    }
    Ok(kept)
}
