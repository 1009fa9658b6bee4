//! The key hub: many single-key interests (held locks, lock waiters, election
//! observers) multiplexed over a few long polls.
//!
//! Go's `api.Lock` runs one blocking query (and one goroutine) per lock. Here the
//! keys a client cares about are grouped by their first path segment (`svc/` in
//! `svc/a/leader`); each group long-polls either the key itself (a group of one)
//! or the group's longest common prefix with `?recurse`, and hands each
//! subscriber the state of its key. A thousand locks under one prefix cost one
//! poll, not a thousand.
//!
//! The groups are bounded ([`MAX_GROUPS`]) whatever the keys are called: once a
//! client has that many, a key of a new first segment (`lock-17`, `job:42`) joins
//! the group whose name shares the longest prefix with it, and that group polls
//! the common prefix of all its keys, wider than before (at worst the whole KV,
//! `?recurse` from the root). Each group holds one long-poll connection, so a
//! client never holds more than `MAX_GROUPS` of them: a connection per key would
//! reach Consul's `limits.http_max_conns_per_client` (200), after which the agent
//! answers 429 to everything the client sends, its renewals and releases
//! included, and every lock it holds is lost.
//!
//! Who polls: one thread drives every group's poll on a non-blocking connection
//! (HTTP or HTTPS, TCP, a unix socket or a proxy's tunnel: [`poller`]), so the hub
//! costs one thread whatever the keys; it takes its decisions from [`poll`].
//!
//! A wider poll costs bytes: Consul answers it with every entry under the prefix, on
//! every change anywhere under it. A poll whose answer holds many entries the group does
//! not watch ([`WIDE_FREE`]) is paced ([`wide_pause`]): before its next poll it waits in
//! proportion to the entries it read for nothing. With 1,000 UUID-named locks (a group
//! polling the whole KV) while another process wrote 10,000 keys, a client read 5.4 GB a
//! minute unpaced (`make bench-scale --writes`); the pause bounds that, and a change of a
//! key in such a group is seen up to the pause late. Keys that share a first segment
//! (`locks/<uuid>`) never pay it.
//!
//! Knowledge is ordered by raft index: a subscriber may seed its key with the
//! state it just read or wrote, and a poll's answer only replaces a key's state
//! when the answer is at least as new (`X-Consul-Index` ≥ the state's index), so
//! a subscriber never goes back to an older view (no stale leader after a
//! reconnect or a restarted poll).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::api::kv::KvPair;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::transport::conn::Conn;

mod poll;
mod poller;
mod range;

use poller::{Poke, Poller};
pub(crate) use range::{RangeHook, RangeNews, RangeSub};

/// The most groups (each a thread and a long-poll connection) a client's hub has.
pub(crate) const MAX_GROUPS: usize = 8;

/// How long one poll may block at the server.
const HUB_WAIT: Duration = Duration::from_secs(300);

/// Entries a prefix poll may return beyond the keys it watches before it is paced.
const WIDE_FREE: usize = 64;
/// The pause a wide poll takes per entry it read beyond the keys it watches (and
/// [`WIDE_FREE`]): 10,000 unrelated entries (some 2 MB) make it poll every 5 s, not on
/// every write.
const WIDE_PAUSE_PER_ENTRY: Duration = Duration::from_micros(500);
/// The longest pause of a wide poll: a change of a watched key is seen at most this late.
const WIDE_MAX_PAUSE: Duration = Duration::from_secs(5);

/// How long a poll that answered `entries` entries, `watched` of them keys of the group,
/// waits before the next one (see the module notes).
fn wide_pause(entries: usize, watched: usize) -> Duration {
    let extra = entries.saturating_sub(watched);
    if extra <= WIDE_FREE {
        return Duration::ZERO;
    }
    let per = WIDE_PAUSE_PER_ENTRY.as_nanos() as u64;
    let pause = Duration::from_nanos(per.saturating_mul((extra - WIDE_FREE) as u64));
    pause.min(WIDE_MAX_PAUSE)
}

/// How long the hub waits before it starts watching a holding that was just
/// taken (a lock's key, a semaphore's entries), when nothing else in the group
/// needs a poll. Most holdings of a busy service are released sooner: the
/// poll, its answer and two thread wake-ups per acquire+release are then never
/// made (two requests per warm cycle, whatever the hold time below this). The
/// poll it starts later blocks from the index the acquire saw, so a change
/// made meanwhile is not missed: it is seen at most this late. A session's
/// loss and the lease deadline do not go through the hub and are not delayed.
const HOLDING_WATCH_DEFER: Duration = Duration::from_millis(10);

/// Called on the hub thread with a key's new state. Must be quick and must not
/// run user code (post that to the dispatcher).
pub(crate) type Hook = Arc<dyn Fn(Option<&KvPair>) + Send + Sync + 'static>;

/// The state of one key as known to the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyView {
    /// The entry, `None` when the key does not exist.
    pub(crate) entry: Option<KvPair>,
    /// The raft index this view is current as of.
    pub(crate) as_of: u64,
    /// When this view was learnt.
    pub(crate) seen_at: Instant,
}

struct Sub {
    id: u64,
    /// The subscriber's channel (`None`: it only has a hook, see [`KeySub::hooked`]).
    notify: Option<Sender<()>>,
    hook: Option<Hook>,
    /// A holding's watch: no poll is needed for it before this time.
    defer_until: Option<Instant>,
}

#[derive(Default)]
struct KeyState {
    view: Option<KeyView>,
    version: u64,
    subs: Vec<Sub>,
}

#[derive(Default)]
struct GroupState {
    keys: BTreeMap<String, KeyState>,
    /// Whole-range subscriptions (a key or a prefix, every entry of it: the client's
    /// watches), polled with the keys.
    ranges: BTreeMap<Target, range::RangeState>,
    /// The target the in-flight poll covers (`None` when idle).
    polling: Option<Target>,
    /// Set while the thread waits for its holdings' watches to come due
    /// ([`HOLDING_WATCH_DEFER`]): it looks again then, unwoken.
    deferring: Option<Instant>,
    next_sub: u64,
    last_error: Option<String>,
}

/// What a poll reads, or a range subscription wants: one key, or every key under a prefix.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Target {
    Key(String),
    Prefix(String),
}

impl Target {
    fn covers(&self, key: &str) -> bool {
        match self {
            Target::Key(k) => k == key,
            Target::Prefix(p) => key.starts_with(p.as_str()),
        }
    }

    /// Whether an answer to this poll holds every entry of `range`.
    fn covers_range(&self, range: &Target) -> bool {
        match (self, range) {
            (_, Target::Key(k)) => self.covers(k),
            (Target::Prefix(t), Target::Prefix(p)) => p.starts_with(t.as_str()),
            (Target::Key(_), Target::Prefix(_)) => false,
        }
    }

    /// The key or prefix named.
    fn name(&self) -> &str {
        match self {
            Target::Key(k) | Target::Prefix(k) => k,
        }
    }
}

impl GroupState {
    /// What the group must poll to see every key and range it has: a key alone (subscribed
    /// as a key, a range or both) is read as itself, anything more as the common prefix.
    fn target(&self) -> Option<Target> {
        let names = || {
            self.keys
                .keys()
                .map(String::as_str)
                .chain(self.ranges.keys().map(Target::name))
        };
        let first = names().next()?;
        let one_key =
            self.ranges.keys().all(|r| matches!(r, Target::Key(_))) && names().all(|n| n == first);
        Some(if one_key {
            Target::Key(first.to_string())
        } else {
            Target::Prefix(common_prefix(names()))
        })
    }
}

struct Group {
    name: String,
    state: Mutex<GroupState>,
    /// Wakes an idle poll, or tells one in flight that its target is too narrow.
    wake: Sender<()>,
    wake_rx: Receiver<()>,
    /// Wakes the poller thread that drives this group.
    poke: Arc<Poke>,
    /// Cancelled to interrupt the in-flight poll (replaced after each use).
    round: Mutex<CancelToken>,
}

impl Group {
    fn new(name: &str, poke: Arc<Poke>) -> Arc<Group> {
        let (wake, wake_rx) = crossbeam_channel::bounded(1);
        Arc::new(Group {
            name: name.to_string(),
            state: Mutex::new(GroupState::default()),
            wake,
            wake_rx,
            poke,
            round: Mutex::new(CancelToken::new()),
        })
    }

    /// Makes the group poll again for a new subscriber: cuts the poll in flight short (it
    /// may not cover the new one), or wakes an idle one.
    fn kick(&self, in_flight: bool) {
        if in_flight {
            lock(&self.round).cancel();
        }
        self.notify();
    }

    /// Wakes whatever drives the group.
    fn notify(&self) {
        let _ = self.wake.try_send(());
        self.poke.poke();
    }
}

/// The registry of groups; one per client.
#[derive(Default)]
pub(crate) struct KeyHub {
    groups: Mutex<HashMap<String, Arc<Group>>>,
    /// The one thread that polls every group (started with the first group).
    poller: Mutex<Option<Poller>>,
}

impl KeyHub {
    /// Stops every group's poll and joins the poller thread before `deadline` (the caller
    /// has cancelled the client's `closing` token already).
    pub(crate) fn stop(&self, deadline: Instant) -> bool {
        let groups: Vec<Arc<Group>> = lock(&self.groups).drain().map(|(_, g)| g).collect();
        for g in groups {
            lock(&g.round).cancel();
            g.notify();
        }
        match lock(&self.poller).take() {
            Some(mut p) => p.worker.join_until(deadline),
            None => true,
        }
    }

    /// Number of threads polling for the hub (for tests and benches).
    pub(crate) fn threads(&self) -> usize {
        usize::from(lock(&self.poller).is_some())
    }

    /// Number of groups, each one long poll on a connection of its own (for tests and
    /// benches).
    pub(crate) fn polls(&self) -> usize {
        lock(&self.groups).len()
    }

    /// The group a subscription to `name` (a key, or a range's key or prefix) joins,
    /// started if it is new.
    fn group_for_name(&self, core: &Arc<Conn>, name: &str) -> Result<Arc<Group>> {
        let mut groups = lock(&self.groups);
        core.check_usable()?;
        let name = group_for(groups.keys(), name);
        match groups.get(&name) {
            Some(g) => Ok(g.clone()),
            None => {
                let g = self.start_group(core, &name)?;
                groups.insert(name, g.clone());
                Ok(g)
            }
        }
    }

    /// A new group named `name`, polled by the client's poller thread; called with the
    /// registry locked.
    fn start_group(&self, core: &Arc<Conn>, name: &str) -> Result<Arc<Group>> {
        let failed = |e: std::io::Error| {
            Error::new(ErrorKind::Connection, format!("cannot start a thread: {e}"))
        };
        let mut poller = lock(&self.poller);
        let p = match &mut *poller {
            Some(p) => p,
            None => poller.insert(Poller::start(core).map_err(failed)?),
        };
        let g = Group::new(name, p.poke());
        p.add(g.clone());
        Ok(g)
    }
}

/// The group a key belongs to: its first path segment.
fn group_of(key: &str) -> &str {
    match key.find('/') {
        Some(i) => &key[..=i],
        None => key,
    }
}

/// The group `key` joins among the `existing` ones: its own first segment's while the
/// hub has room for it ([`MAX_GROUPS`]), else the existing group whose name shares the
/// longest prefix with the key (the first such name in order, so the choice is stable).
fn group_for<'a>(existing: impl Iterator<Item = &'a String> + Clone, key: &str) -> String {
    let own = group_of(key);
    let count = existing.clone().count();
    if count < MAX_GROUPS || existing.clone().any(|n| n == own) {
        return own.to_string();
    }
    let shared = |n: &str| {
        n.bytes()
            .zip(key.bytes())
            .take_while(|(a, b)| a == b)
            .count()
    };
    existing
        .max_by(|a, b| shared(a).cmp(&shared(b)).then_with(|| b.cmp(a)))
        .map_or_else(|| own.to_string(), Clone::clone)
}

fn common_prefix<'a>(mut keys: impl Iterator<Item = &'a str>) -> String {
    let Some(first) = keys.next() else {
        return String::new();
    };
    let mut len = first.len();
    for k in keys {
        len = first
            .bytes()
            .zip(k.bytes())
            .take(len)
            .take_while(|(a, b)| a == b)
            .count();
    }
    while !first.is_char_boundary(len) {
        len -= 1;
    }
    first[..len].to_string()
}

/// A subscription to one key. Dropping it unsubscribes.
pub(crate) struct KeySub {
    group: Arc<Group>,
    key: String,
    id: u64,
    rx: Receiver<()>,
    seen: u64,
}

impl KeySub {
    /// Subscribes to `key`, optionally seeding the hub with a state the caller
    /// just learnt (`entry` current as of raft index `as_of`).
    pub(crate) fn new(
        core: &Arc<Conn>,
        hub: &KeyHub,
        key: &str,
        seed: Option<(Option<KvPair>, u64)>,
        hook: Option<Hook>,
    ) -> Result<KeySub> {
        KeySub::subscribe(core, hub, key, seed, hook, None, true)
    }

    /// Subscribes `hook` alone to `key`: no channel ([`KeySub::changes`] never fires), for
    /// a waiter that only needs the hook (a pending future). A bounded channel is among
    /// the largest allocations of a subscription; ten thousand pending acquires or held
    /// locks need none.
    pub(crate) fn hooked(core: &Arc<Conn>, hub: &KeyHub, key: &str, hook: Hook) -> Result<KeySub> {
        KeySub::subscribe(core, hub, key, None, Some(hook), None, false)
    }

    /// Subscribes a holding just taken to its key, seeded with the entry the
    /// acquire wrote (current as of `seed.1`): the hub may start the poll up to
    /// [`HOLDING_WATCH_DEFER`] later (a release before then costs no poll).
    pub(crate) fn watch_holding(
        core: &Arc<Conn>,
        hub: &KeyHub,
        key: &str,
        seed: (Option<KvPair>, u64),
        hook: Hook,
    ) -> Result<KeySub> {
        let defer = Some(Instant::now() + HOLDING_WATCH_DEFER);
        KeySub::subscribe(core, hub, key, Some(seed), Some(hook), defer, false)
    }

    fn subscribe(
        core: &Arc<Conn>,
        hub: &KeyHub,
        key: &str,
        seed: Option<(Option<KvPair>, u64)>,
        hook: Option<Hook>,
        defer_until: Option<Instant>,
        channel: bool,
    ) -> Result<KeySub> {
        core.check_usable()?;
        let group = hub.group_for_name(core, key)?;
        let (tx, rx) = if channel {
            let (tx, rx) = crossbeam_channel::bounded(1);
            (Some(tx), rx)
        } else {
            (None, crossbeam_channel::never())
        };
        let mut seeded: Vec<Wake> = Vec::new();
        let (id, interrupt, in_flight) = {
            let mut st = lock(&group.state);
            let id = st.next_sub;
            st.next_sub += 1;
            let ks = st.keys.entry(key.to_string()).or_default();
            ks.subs.push(Sub {
                id,
                notify: tx,
                hook,
                defer_until,
            });
            if let Some((entry, as_of)) = seed {
                let newer = ks.view.as_ref().is_none_or(|v| as_of > v.as_of);
                if newer {
                    // The other subscribers learn it now: the poll that later reports the
                    // same entry at the same index is no change and wakes nobody.
                    if ks.view.as_ref().is_none_or(|v| v.entry != entry) {
                        for s in ks.subs.iter().filter(|s| s.id != id) {
                            seeded.push((s.notify.clone(), s.hook.clone(), entry.clone()));
                        }
                    }
                    ks.view = Some(KeyView {
                        entry,
                        as_of,
                        seen_at: Instant::now(),
                    });
                    ks.version += 1;
                }
            }
            let unknown = ks.view.is_none();
            let interrupt = unknown
                || match &st.polling {
                    Some(t) => !t.covers(key),
                    None => true,
                };
            // A thread waiting for its deferred watches looks again at its time,
            // which is before this one's: no need to wake it.
            let interrupt = interrupt && !(defer_until.is_some() && st.deferring.is_some());
            // Only a poll in flight needs cutting short; an idle thread just wakes (and keeps
            // its connection: cancelling the round would make it open a new one).
            (id, interrupt, interrupt && st.polling.is_some())
        };
        wake(seeded);
        if interrupt {
            group.kick(in_flight);
        }
        Ok(KeySub {
            group,
            key: key.to_string(),
            id,
            rx,
            seen: 0,
        })
    }

    /// The latest view of the key, if the hub has one.
    pub(crate) fn view(&self) -> Option<KeyView> {
        lock(&self.group.state)
            .keys
            .get(&self.key)
            .and_then(|k| k.view.clone())
    }

    /// The latest view if it is newer than the last one this subscriber took.
    pub(crate) fn take_new(&mut self) -> Option<KeyView> {
        let st = lock(&self.group.state);
        let ks = st.keys.get(&self.key)?;
        if ks.version > self.seen {
            self.seen = ks.version;
            ks.view.clone()
        } else {
            None
        }
    }

    /// A receiver that gets a message when the key's view changes.
    pub(crate) fn changes(&self) -> &Receiver<()> {
        &self.rx
    }

    /// The last poll error of this key's group (cleared by the next success).
    pub(crate) fn last_error(&self) -> Option<String> {
        lock(&self.group.state).last_error.clone()
    }

    /// Records a state the owner learnt itself (e.g. from its own write), so
    /// that other subscribers of the key see it at once.
    pub(crate) fn learn(&self, entry: Option<KvPair>, as_of: u64) {
        deliver(&self.group, &[(self.key.clone(), entry)], as_of, false);
    }
}

impl Drop for KeySub {
    fn drop(&mut self) {
        let mut st = lock(&self.group.state);
        if let Some(ks) = st.keys.get_mut(&self.key) {
            ks.subs.retain(|s| s.id != self.id);
            if ks.subs.is_empty() {
                st.keys.remove(&self.key);
            }
        }
    }
}

/// Applies new views (only where `as_of` is not older than the known one), then
/// notifies outside the lock: internal hooks first, then waiters.
fn deliver(group: &Group, found: &[(String, Option<KvPair>)], as_of: u64, reset: bool) {
    let mut notify: Vec<Wake> = Vec::new();
    {
        let mut st = lock(&group.state);
        let now = Instant::now();
        for (key, entry) in found {
            let Some(ks) = st.keys.get_mut(key) else {
                continue;
            };
            if !reset && ks.view.as_ref().is_some_and(|v| v.as_of > as_of) {
                continue;
            }
            let changed = ks.view.as_ref().is_none_or(|v| v.entry != *entry);
            ks.view = Some(KeyView {
                entry: entry.clone(),
                as_of,
                seen_at: if changed {
                    now
                } else {
                    ks.view.as_ref().map_or(now, |v| v.seen_at)
                },
            });
            if changed {
                ks.version += 1;
                for s in &ks.subs {
                    notify.push((s.notify.clone(), s.hook.clone(), entry.clone()));
                }
            }
        }
    }
    wake(notify);
}

/// A subscriber to wake about a new entry: its channel, its hook, the entry.
type Wake = (Option<Sender<()>>, Option<Hook>, Option<KvPair>);

/// Runs the hooks (internal ones first), then wakes the waiters; called with no
/// hub lock held.
fn wake(list: Vec<Wake>) {
    for (tx, hook, entry) in list {
        if let Some(h) = hook {
            h(entry.as_ref());
        }
        if let Some(tx) = tx {
            let _ = tx.try_send(());
        }
    }
}

/// Test-only pause point: stops a group's thread once it has taken a poll
/// answer and passed the round check, so that a test can subscribe while a
/// late answer is on its way to delivery.
#[cfg(test)]
pub(crate) mod failpoint {
    use super::*;

    type Armed = Option<(String, Sender<()>, Receiver<()>)>;
    static ARMED: Mutex<Armed> = Mutex::new(None);

    /// Arms the pause for group `group` (one hit). Returns a receiver told when
    /// the thread is paused, and a sender that lets it go on.
    pub(crate) fn arm(group: &str) -> (Receiver<()>, Sender<()>) {
        let (reached_tx, reached_rx) = crossbeam_channel::bounded(1);
        let (go_tx, go_rx) = crossbeam_channel::bounded(1);
        *lock(&ARMED) = Some((group.to_string(), reached_tx, go_rx));
        (reached_rx, go_tx)
    }

    pub(crate) fn hit(group: &str) {
        let armed = {
            let mut a = lock(&ARMED);
            match &*a {
                Some((g, _, _)) if g == group => a.take(),
                _ => None,
            }
        };
        if let Some((_, reached, go)) = armed {
            let _ = reached.send(());
            let _ = go.recv_timeout(Duration::from_secs(30));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_wakes_the_other_subscribers_of_the_key() {
        // No server: the hub's poll fails and backs off; only the seed can wake `a`.
        let client = crate::Client::builder()
            .address("127.0.0.1:1")
            .build()
            .unwrap();
        let core = client.core().clone();
        let mut a = KeySub::new(&core.conn, &core.keyhub, "seed/k", None, None).unwrap();
        let _ = a.take_new();
        let entry = KvPair {
            key: "seed/k".into(),
            value: Some(b"me".to_vec()),
            flags: 0,
            session: Some("s".into()),
            lock_index: 1,
            create_index: 5,
            modify_index: 5,
        };
        let _b = KeySub::new(
            &core.conn,
            &core.keyhub,
            "seed/k",
            Some((Some(entry.clone()), 5)),
            None,
        )
        .unwrap();
        assert!(
            a.changes().recv_timeout(Duration::from_secs(2)).is_ok(),
            "the seed did not wake the other subscriber"
        );
        assert_eq!(a.take_new().and_then(|v| v.entry), Some(entry));
        client.close(Duration::from_secs(5));
    }

    #[test]
    fn groups_are_bounded_whatever_the_keys_are_called() {
        let mut groups: Vec<String> = Vec::new();
        for i in 0..MAX_GROUPS {
            let name = group_for(groups.iter(), &format!("lock-{i}"));
            assert_eq!(name, format!("lock-{i}"), "room for a group of its own");
            groups.push(name);
        }
        // Full: a new first segment joins the group sharing the longest prefix with it
        // (the names above are lock-0 … lock-7, MAX_GROUPS being 8).
        assert_eq!(group_for(groups.iter(), "lock-1234"), "lock-1");
        assert_eq!(group_for(groups.iter(), "lock-77"), "lock-7");
        // Nothing shared: the first group in order, every time.
        assert_eq!(group_for(groups.iter(), "zzz"), "lock-0");
        assert_eq!(group_for(groups.iter().rev(), "zzz"), "lock-0");
        // A segment that has a group keeps it.
        assert_eq!(group_for(groups.iter(), "lock-3"), "lock-3");
    }

    #[test]
    fn groups_are_first_segments() {
        assert_eq!(group_of("svc/a/leader"), "svc/");
        assert_eq!(group_of("plain"), "plain");
        assert_eq!(group_of("/x"), "/");
    }

    #[test]
    fn a_poll_that_reads_what_it_does_not_watch_is_paced() {
        // A narrow poll (a prefix of its own keys, or a few others) never waits.
        assert_eq!(wide_pause(1000, 1000), Duration::ZERO);
        assert_eq!(wide_pause(1000 + WIDE_FREE, 1000), Duration::ZERO);
        // 2,000 entries read for 1,000 keys: about half a second.
        let p = wide_pause(2_000, 1000);
        assert!(
            p > Duration::from_millis(400) && p < Duration::from_millis(500),
            "{p:?}"
        );
        // Bounded whatever the KV holds.
        assert_eq!(wide_pause(10_000_000, 1), WIDE_MAX_PAUSE);
    }

    #[test]
    fn common_prefix_of_keys() {
        let keys = ["svc/a/1".to_string(), "svc/a/2".into(), "svc/ab".into()];
        assert_eq!(common_prefix(keys.iter().map(String::as_str)), "svc/a");
        assert_eq!(common_prefix(["k"].into_iter()), "k");
        assert_eq!(common_prefix(["a/é1", "a/é2", "a/è"].into_iter()), "a/");
    }
}
