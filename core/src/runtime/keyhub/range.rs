//! Whole-range subscriptions: a key or a prefix and every entry under it, polled by the
//! group the range falls in, with its keys (the client's watches: `Client::watch_prefix`,
//! and every recipe that watches a queue or a listing).
//!
//! A range costs no thread and no connection of its own: a client watching a hundred
//! semaphores' prefixes still holds at most [`super::MAX_GROUPS`] long polls. Its subscriber
//! is told every answer that covers the range (the range's entries and the answer's index)
//! and every failed poll, on the poller thread; what changed is for it to judge.

use std::sync::Arc;

use super::{Group, KeyHub, Target};
use crate::api::kv::KvPair;
use crate::foundations::error::{Error, Result};
use crate::foundations::sync::lock;
use crate::transport::conn::Conn;

/// What a range's subscriber is told.
pub(crate) enum RangeNews<'a> {
    /// An answer that covers the range: its entries (in key order) and the answer's index.
    Answer(&'a [KvPair], u64),
    /// A poll of the range's group failed (it is retried with backoff).
    Failed(&'a Error),
}

/// Called on the poller thread, with no hub lock held. Must be quick and must not run user
/// code.
pub(crate) type RangeHook = Arc<dyn Fn(RangeNews<'_>) + Send + Sync + 'static>;

/// One range of a group and its subscribers.
#[derive(Default)]
pub(super) struct RangeState {
    /// The index of the last answer told (`None`: none yet).
    as_of: Option<u64>,
    subs: Vec<(u64, RangeHook)>,
}

/// A subscription to a range. Dropping it unsubscribes.
pub(crate) struct RangeSub {
    group: Arc<Group>,
    range: Target,
    id: u64,
}

impl RangeSub {
    /// Subscribes `hook` to every entry of `range` (a key, or a prefix). The first answer
    /// that covers it is read afresh, so the subscriber is told the current state soon.
    pub(crate) fn new(
        core: &Arc<Conn>,
        hub: &KeyHub,
        range: Target,
        hook: RangeHook,
    ) -> Result<RangeSub> {
        core.check_usable()?;
        let group = hub.group_for_name(core, range.name())?;
        let (id, in_flight) = {
            let mut st = lock(&group.state);
            let id = st.next_sub;
            st.next_sub += 1;
            st.ranges
                .entry(range.clone())
                .or_default()
                .subs
                .push((id, hook));
            // A new range needs an answer now: a poll in flight may block for minutes.
            (id, st.polling.is_some())
        };
        group.kick(in_flight);
        Ok(RangeSub { group, range, id })
    }
}

impl Drop for RangeSub {
    fn drop(&mut self) {
        let mut st = lock(&self.group.state);
        if let Some(rs) = st.ranges.get_mut(&self.range) {
            rs.subs.retain(|(id, _)| *id != self.id);
            if rs.subs.is_empty() {
                st.ranges.remove(&self.range);
            }
        }
        // The group's last interest gone, its poll in flight would hold a connection until
        // something under it changes (minutes, for a quiet prefix): cut it. (A held key's
        // poll ends by itself: its release changes the key.)
        let idle = st.keys.is_empty() && st.ranges.is_empty() && st.polling.is_some();
        drop(st);
        if idle {
            self.group.kick(true);
        }
    }
}

/// The entries of `range` in `entries` (sorted by key): where they start and end.
fn span(entries: &[KvPair], range: &Target) -> (usize, usize) {
    let name = range.name();
    let start = entries.partition_point(|e| e.key.as_str() < name);
    let len = match range {
        Target::Key(k) => usize::from(entries.get(start).is_some_and(|e| &e.key == k)),
        Target::Prefix(p) => entries[start..]
            .iter()
            .take_while(|e| e.key.starts_with(p.as_str()))
            .count(),
    };
    (start, start + len)
}

/// Tells the ranges an answer of `want` covers their entries (unless they were told a newer
/// answer, and the server was not `reset`); returns how many entries they watch.
pub(super) fn answered(
    group: &Group,
    want: &Target,
    entries: &[KvPair],
    as_of: u64,
    reset: bool,
) -> usize {
    let mut told: Vec<(RangeHook, (usize, usize))> = Vec::new();
    let mut watched = 0;
    {
        let mut st = lock(&group.state);
        for (range, rs) in st.ranges.iter_mut() {
            if !want.covers_range(range) {
                continue;
            }
            if !reset && rs.as_of.is_some_and(|known| known > as_of) {
                continue;
            }
            rs.as_of = Some(as_of);
            let span = span(entries, range);
            watched += span.1 - span.0;
            told.extend(rs.subs.iter().map(|(_, h)| (h.clone(), span)));
        }
    }
    for (hook, (a, b)) in told {
        hook(RangeNews::Answer(&entries[a..b], as_of));
    }
    watched
}

/// Tells every range of the group that its poll failed.
pub(super) fn failed(group: &Group, e: &Error) {
    let hooks: Vec<RangeHook> = lock(&group.state)
        .ranges
        .values()
        .flat_map(|rs| rs.subs.iter().map(|(_, h)| h.clone()))
        .collect();
    for h in hooks {
        h(RangeNews::Failed(e));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str) -> KvPair {
        KvPair {
            key: key.into(),
            value: None,
            flags: 0,
            session: None,
            lock_index: 0,
            create_index: 1,
            modify_index: 1,
        }
    }

    #[test]
    fn a_range_s_span_is_its_key_or_every_key_under_its_prefix() {
        let entries: Vec<KvPair> = ["a", "s/", "s/1", "s/2", "sa", "t"]
            .iter()
            .map(|k| kv(k))
            .collect();
        assert_eq!(span(&entries, &Target::Prefix("s/".into())), (1, 4));
        assert_eq!(span(&entries, &Target::Prefix("s".into())), (1, 5));
        assert_eq!(span(&entries, &Target::Prefix("".into())), (0, 6));
        assert_eq!(span(&entries, &Target::Prefix("u/".into())), (6, 6));
        assert_eq!(span(&entries, &Target::Key("s/1".into())), (2, 3));
        assert_eq!(span(&entries, &Target::Key("s/3".into())), (4, 4));
    }

    #[test]
    fn a_poll_covers_the_ranges_inside_it() {
        let wide = Target::Prefix("s/".into());
        assert!(wide.covers_range(&Target::Prefix("s/x/".into())));
        assert!(wide.covers_range(&Target::Key("s/k".into())));
        assert!(!wide.covers_range(&Target::Prefix("s".into())));
        let key = Target::Key("s/k".into());
        assert!(key.covers_range(&Target::Key("s/k".into())));
        assert!(!key.covers_range(&Target::Prefix("s/k".into())));
    }
}
