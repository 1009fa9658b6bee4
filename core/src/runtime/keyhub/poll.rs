//! What one group polls next and what an answer does to it, as the poller thread
//! (`poller`) drives it. Nothing here blocks or touches a connection.

use std::time::{Duration, Instant};

use super::{deliver, wide_pause, Group, Target, HUB_WAIT};
use crate::api::kv::KvPair;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind};
use crate::foundations::sync::lock;
use crate::runtime::pacing::{next_index, Backoff, Pacer};
use crate::transport::http::{QueryMeta, QueryOptions, Request};

/// What a group does next, as [`PollState::plan`] decides it.
pub(super) enum Plan {
    /// No key to watch: wait for a subscriber (the group's wake).
    Nothing,
    /// Only holdings just taken, none due yet: wait until then (or a wake); then call
    /// [`PollState::deferred`].
    Defer(Instant),
    /// A subscriber widened the target while a poll was out: plan again at once.
    Restart,
    /// Send this poll of `target`, cut short when the round (taken in the same look as the
    /// check above) is cancelled.
    Poll(Target, Request, CancelToken),
}

/// A group's poll position: the target and the index it blocks from, and its pacing.
pub(super) struct PollState {
    index: u64,
    /// The highest index any answer reported (survives errors, unlike `index`).
    high: u64,
    target: Option<Target>,
    backoff: Backoff,
    pacer: Pacer,
    /// After a failed poll the next one reads without an index: the server may have lost
    /// its state meanwhile (an agent restarted), and a blocking query from a view's index
    /// would wait on a server whose index is now below it.
    reread: bool,
}

impl PollState {
    pub(super) fn new() -> PollState {
        PollState {
            index: 0,
            high: 0,
            target: None,
            backoff: Backoff::new(),
            pacer: Pacer::new(),
            reread: false,
        }
    }

    /// Decides what to poll, and from which index, in one look at the group's state (a key
    /// whose last subscriber left in between must not be polled from 0). Takes the group's
    /// round afresh when a subscriber cut the last one short.
    pub(super) fn plan(&mut self, group: &Group) -> Plan {
        let want = {
            let mut st = lock(&group.state);
            let t = st.target();
            // Only holdings just taken, none due yet: wait until the first is (a range is
            // never deferred).
            let due = st
                .keys
                .values()
                .flat_map(|ks| ks.subs.iter())
                .map(|s| s.defer_until)
                .try_fold(None::<Instant>, |first, d| {
                    d.map(|d| Some(first.map_or(d, |f| f.min(d))))
                })
                .flatten()
                .filter(|d| *d > Instant::now() && st.ranges.is_empty());
            st.deferring = due;
            if let Some(until) = due {
                st.polling = None;
                return Plan::Defer(until);
            }
            st.polling = t.clone();
            if let Some(want) = &t {
                if self.target.as_ref() != Some(want) {
                    // Indexes of different targets are not comparable.
                    self.index = 0;
                    self.high = 0;
                    self.target = Some(want.clone());
                }
                if self.index == 0 && !self.reread {
                    // A single key's index is its ModifyIndex (or the table index when it
                    // is missing): a view seeded by the subscriber lets us block right
                    // away instead of reading first.
                    if let Target::Key(k) = want {
                        if let Some(v) = st.keys.get(k).and_then(|ks| ks.view.as_ref()) {
                            self.index = v.as_of;
                        }
                    }
                }
            }
            t
        };
        let Some(want) = want else {
            self.target = None;
            return Plan::Nothing;
        };
        // Drain a stale wake-up: the target above already includes every key.
        let _ = group.wake_rx.try_recv();
        let round = {
            let mut r = lock(&group.round);
            if r.is_cancelled() {
                // A new key may lie outside `want`: fresh token, new target.
                *r = CancelToken::new();
                drop(r);
                self.index = 0;
                return Plan::Restart;
            }
            r.clone()
        };
        let (key, recurse) = match &want {
            Target::Key(k) => (k.as_str(), false),
            Target::Prefix(p) => (p.as_str(), true),
        };
        let opts = if self.index == 0 {
            QueryOptions::default()
        } else {
            QueryOptions::blocking(self.index, HUB_WAIT)
        };
        self.pacer.sending();
        let req = crate::api::kv::read_request(key, recurse, &opts);
        Plan::Poll(want, req, round)
    }

    /// The wait of a [`Plan::Defer`] is over (or was cut short).
    pub(super) fn deferred(&self, group: &Group) {
        lock(&group.state).deferring = None;
    }

    /// A poll was cut short to widen its target: the next one reads afresh.
    pub(super) fn interrupted(&mut self) {
        self.index = 0;
    }

    /// Delivers a poll's answer to the group's subscribers; returns how long to wait (or
    /// until a wake) before the next poll.
    pub(super) fn answered(
        &mut self,
        group: &Group,
        want: &Target,
        entries: Vec<KvPair>,
        meta: QueryMeta,
    ) -> Duration {
        self.backoff.reset();
        self.reread = false;
        let keys: Vec<String> = {
            let mut st = lock(&group.state);
            st.last_error = None;
            st.keys.keys().filter(|k| want.covers(k)).cloned().collect()
        };
        // Consul lists entries in key order; the binary search below needs that, so an
        // answer that does not keep it is put in order first (otherwise a held key could be
        // missed and taken for deleted).
        let mut entries = entries;
        if !entries.windows(2).all(|w| w[0].key <= w[1].key) {
            entries.sort_by(|a, b| a.key.cmp(&b.key));
        }
        let found: Vec<(String, Option<KvPair>)> = keys
            .into_iter()
            .map(|k| {
                let e = entries
                    .binary_search_by(|e| e.key.as_str().cmp(k.as_str()))
                    .ok()
                    .map(|i| entries[i].clone());
                (k, e)
            })
            .collect();
        // An index that went backwards means the server's state was reset (snapshot
        // restore, a dev agent restarted): its answer is the truth now, whatever we knew at
        // higher indexes.
        let reset = meta.index < self.high;
        self.high = if reset {
            meta.index
        } else {
            self.high.max(meta.index)
        };
        deliver(group, &found, meta.index, reset);
        let in_ranges = super::range::answered(group, want, &entries, meta.index, reset);
        let watched = found.iter().filter(|(_, e)| e.is_some()).count() + in_ranges;
        let wide = wide_pause(entries.len(), watched);
        if !wide.is_zero() {
            log::debug!(
                "baton key hub {:?}: poll of {want:?} read {} entries for {watched} keys; next in {wide:?}",
                group.name,
                entries.len()
            );
        }
        let pause = self.pacer.after(self.index, meta.index, HUB_WAIT).max(wide);
        self.index = next_index(self.index, meta.index);
        pause
    }

    /// Records a failed poll; returns how long to back off (cut short when Consul answers
    /// any other request of the client).
    pub(super) fn failed(&mut self, group: &Group, e: &Error) -> Duration {
        let mut st = lock(&group.state);
        // An answer we cannot decode will not decode on retry: say so once.
        if e.kind() == ErrorKind::BadResponse && st.last_error.is_none() {
            log::warn!("baton key hub {:?}: {e}", group.name);
        } else {
            log::debug!("baton key hub {:?}: {e}", group.name);
        }
        st.last_error = Some(e.to_string());
        drop(st);
        super::range::failed(group, e);
        self.index = 0;
        self.reread = true;
        self.backoff.next()
    }
}
