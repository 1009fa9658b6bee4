//! `MembersWatch`: a group's members, then their joins, leaves and updates,
//! computed by diffing consecutive views of the client's prefix watch.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{ErrorKind, Result};
use crate::runtime::watch::{Watch, WatchEvent};

use super::{live_members, MemberInfo};

/// One change of a group, as [`MembersWatch::next`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipEvent {
    /// The members when the watch started (the first event), sorted by id:
    /// the set the later events change.
    Snapshot(Vec<MemberInfo>),
    /// A member joined (an id that was not a member, or one that came back
    /// under another session or as a new key).
    Joined(MemberInfo),
    /// The member of this id left or was lost.
    Left(String),
    /// A member changed its value (same session, same key).
    Updated(MemberInfo),
}

/// A watch of a group's members; get one from [`Group::watch`](super::Group::watch).
///
/// It rides on the client's shared long poll of `<prefix>/` and diffs each
/// state it sees against the last: a member that joins and leaves between
/// two polls' answers is never reported, and one that leaves and joins again
/// with the same session and key in between shows as `Updated` at most. The
/// events of one answer come leaves first, then joins, then updates, each
/// sorted by id.
pub struct MembersWatch {
    client: crate::client::Client,
    prefix: String,
    watch: Watch,
    /// The members as last reported (`None` before the snapshot).
    known: Option<BTreeMap<String, MemberInfo>>,
    pending: VecDeque<MembershipEvent>,
}

impl fmt::Debug for MembersWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MembersWatch")
            .field("prefix", &self.prefix)
            .field("known", &self.known.as_ref().map(BTreeMap::len))
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl MembersWatch {
    pub(super) fn new(client: crate::client::Client, prefix: String, watch: Watch) -> MembersWatch {
        MembersWatch {
            client,
            prefix,
            watch,
            known: None,
            pending: VecDeque::new(),
        }
    }

    /// The members as last reported by [`MembersWatch::next`] (`None` before
    /// the snapshot), sorted by id: the watcher's own view of the group.
    pub fn members(&self) -> Option<Vec<MemberInfo>> {
        self.known.as_ref().map(|m| m.values().cloned().collect())
    }

    /// The next event: the first call returns [`MembershipEvent::Snapshot`],
    /// later ones each change seen since. `Ok(None)` when `timeout` passes
    /// with nothing new (`None` waits for as long as it takes); errors: kind
    /// `Cancelled` when `cancel` fires, `Closed` when the client closes.
    /// Failed polls are retried with backoff, not returned.
    pub fn next(
        &mut self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<MembershipEvent>> {
        let end = crate::foundations::scope::deadline_after(timeout);
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Ok(Some(ev));
            }
            let left = end.map(|e| e.saturating_duration_since(Instant::now()));
            let state = match self.watch.next(left, cancel) {
                Ok(s) => s,
                Err(e) if e.kind() == ErrorKind::Timeout => return Ok(None),
                Err(e) => return Err(e),
            };
            self.absorb(&state);
        }
    }

    /// Queues the events that a watch answer brings: the snapshot first, then
    /// the differences from the last answer.
    fn absorb(&mut self, state: &WatchEvent) {
        let now: BTreeMap<String, MemberInfo> = live_members(&self.prefix, &state.entries)
            .into_iter()
            .map(|m| (m.id.clone(), m))
            .collect();
        match &self.known {
            None => {
                let all = now.values().cloned().collect();
                self.pending.push_back(MembershipEvent::Snapshot(all));
            }
            Some(before) => self.pending.extend(diff(before, &now)),
        }
        self.known = Some(now);
    }

    /// The client it rides on.
    pub(crate) fn client(&self) -> &crate::client::Client {
        &self.client
    }

    /// [`MembersWatch::next`] without blocking, for the async layer: the next event,
    /// or `Pending` with the task woken by the next change under the prefix. Errors:
    /// `Closed` once the client closes (the caller is woken by the close itself).
    pub(crate) fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Result<MembershipEvent>> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Poll::Ready(Ok(ev));
            }
            match self.watch.poll_next(cx, false) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(state)) => self.absorb(&state),
            }
        }
    }
}

/// The events that turn `before` into `now`: leaves, then joins, then
/// updates, each in id order. A member whose session or key changed left and
/// joined again.
fn diff(
    before: &BTreeMap<String, MemberInfo>,
    now: &BTreeMap<String, MemberInfo>,
) -> Vec<MembershipEvent> {
    let same =
        |a: &MemberInfo, b: &MemberInfo| a.session == b.session && a.create_index == b.create_index;
    let mut left = Vec::new();
    let mut joined = Vec::new();
    let mut updated = Vec::new();
    for (id, old) in before {
        match now.get(id) {
            None => left.push(MembershipEvent::Left(id.clone())),
            Some(new) if !same(old, new) => {
                left.push(MembershipEvent::Left(id.clone()));
                joined.push(MembershipEvent::Joined(new.clone()));
            }
            Some(new) if old.value != new.value => {
                updated.push(MembershipEvent::Updated(new.clone()))
            }
            Some(_) => {}
        }
    }
    for (id, new) in now {
        if !before.contains_key(id) {
            joined.push(MembershipEvent::Joined(new.clone()));
        }
    }
    joined.sort_by(|a, b| event_id(a).cmp(event_id(b)));
    left.into_iter().chain(joined).chain(updated).collect()
}

fn event_id(e: &MembershipEvent) -> &str {
    match e {
        MembershipEvent::Joined(m) | MembershipEvent::Updated(m) => &m.id,
        MembershipEvent::Left(id) => id,
        MembershipEvent::Snapshot(_) => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str, session: &str, create: u64, value: &[u8]) -> MemberInfo {
        MemberInfo {
            id: id.into(),
            value: value.to_vec(),
            session: session.into(),
            create_index: create,
            modify_index: create,
        }
    }

    fn map(list: &[MemberInfo]) -> BTreeMap<String, MemberInfo> {
        list.iter().map(|m| (m.id.clone(), m.clone())).collect()
    }

    #[test]
    fn diff_reports_leaves_then_joins_then_updates() {
        let before = map(&[
            info("a", "s1", 1, b"x"),
            info("b", "s2", 2, b"x"),
            info("c", "s3", 3, b"x"),
        ]);
        let now = map(&[
            info("b", "s9", 9, b"x"),
            info("c", "s3", 3, b"y"),
            info("d", "s4", 4, b"z"),
        ]);
        let got = diff(&before, &now);
        assert_eq!(
            got,
            vec![
                MembershipEvent::Left("a".into()),
                MembershipEvent::Left("b".into()),
                MembershipEvent::Joined(info("b", "s9", 9, b"x")),
                MembershipEvent::Joined(info("d", "s4", 4, b"z")),
                MembershipEvent::Updated(info("c", "s3", 3, b"y")),
            ]
        );
        assert!(diff(&now, &now).is_empty());
    }
}
