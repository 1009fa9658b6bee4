//! A double barrier's keys and what a listing of its prefix says: who takes
//! part, whether a round is open, and what a participant does next. No I/O:
//! the protocol's decisions, kept apart so they can be tested on their own.

use serde::{Deserialize, Serialize};

use crate::api::kv::KvPair;
use crate::foundations::error::{Error, ErrorKind, Result};

/// The keys of a double barrier on one prefix (stored without a trailing `/`).
#[derive(Debug, Clone)]
pub(super) struct Layout {
    prefix: String,
}

impl Layout {
    pub(super) fn new(prefix: &str) -> Layout {
        Layout {
            prefix: prefix.to_string(),
        }
    }

    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// What a participant lists and polls: every key under the prefix.
    pub(super) fn listing(&self) -> String {
        format!("{}/", self.prefix)
    }

    /// The key that opens a round.
    pub(super) fn ready(&self) -> String {
        format!("{}/ready", self.prefix)
    }

    /// The key of participant `id`.
    pub(super) fn participant(&self, id: &str) -> String {
        format!("{}/participants/{id}", self.prefix)
    }

    /// The participant id of `key`, if it is a participant key (directly
    /// under `participants/`).
    pub(super) fn id_of<'k>(&self, key: &'k str) -> Option<&'k str> {
        let rest = key
            .strip_prefix(self.prefix.as_str())?
            .strip_prefix("/participants/")?;
        (!rest.is_empty() && !rest.contains('/')).then_some(rest)
    }
}

/// The value of the `ready` key: the count the round was opened for and the
/// participants counted in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct ReadyDoc {
    #[serde(rename = "Count")]
    pub(super) count: u64,
    #[serde(rename = "Participants", default)]
    pub(super) participants: Vec<String>,
}

impl ReadyDoc {
    pub(super) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a ready document always serialises")
    }

    /// The document of `raw`, or why it is not one (the text of a `Conflict`).
    fn decode(key: &str, raw: Option<&[u8]>) -> std::result::Result<ReadyDoc, String> {
        serde_json::from_slice(raw.unwrap_or_default())
            .map_err(|e| format!("{key:?} does not hold a double barrier's ready document ({e})"))
    }
}

/// A round a participant entered: the `ready` key's CreateIndex (which names
/// the round: a later round's key is created anew) and the participants it counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Round {
    pub(super) index: u64,
    pub(super) participants: Vec<String>,
}

/// One listing of a double barrier's prefix, sorted out.
#[derive(Debug)]
pub(super) struct View<'a> {
    /// The `ready` key and its document.
    ready: Option<(&'a KvPair, std::result::Result<ReadyDoc, String>)>,
    /// Participant keys locked by a session, oldest first (CreateIndex, then key).
    pub(super) live: Vec<&'a KvPair>,
    /// Participant keys whose session ended (behaviour `release` left them unlocked).
    pub(super) dead: Vec<&'a KvPair>,
}

impl<'a> View<'a> {
    pub(super) fn of(layout: &Layout, entries: &'a [KvPair]) -> View<'a> {
        let ready_key = layout.ready();
        let ready = entries
            .iter()
            .find(|p| p.key == ready_key)
            .map(|p| (p, ReadyDoc::decode(&ready_key, p.value.as_deref())));
        let (mut live, dead): (Vec<&KvPair>, Vec<&KvPair>) = entries
            .iter()
            .filter(|p| layout.id_of(&p.key).is_some())
            .partition(|p| p.session.is_some());
        live.sort_by(|a, b| (a.create_index, &a.key).cmp(&(b.create_index, &b.key)));
        View { ready, live, dead }
    }

    fn is_live(&self, layout: &Layout, id: &str) -> bool {
        let key = layout.participant(id);
        self.live.iter().any(|p| p.key == key)
    }

    /// The round this listing shows open, whether `id` is in it or not: the
    /// `ready` key's document, while one participant it counted is still live.
    fn open_round(&self, layout: &Layout) -> Result<Option<(&'a KvPair, &ReadyDoc)>> {
        let Some((pair, doc)) = &self.ready else {
            return Ok(None);
        };
        let doc = doc
            .as_ref()
            .map_err(|why| Error::new(ErrorKind::Conflict, why.clone()))?;
        Ok(doc
            .participants
            .iter()
            .any(|id| self.is_live(layout, id))
            .then_some((*pair, doc)))
    }
}

/// What a participant entering does next.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step<'a> {
    /// A round counted it: it has entered.
    Entered(Round),
    /// Nothing to do until the listing changes.
    Wait,
    /// The `ready` key left over from a round whose participants have all gone:
    /// delete it (check-and-set on this ModifyIndex).
    ClearStale(u64),
    /// Enough participants are live and no round is open: open one counting these.
    Open(Vec<&'a KvPair>),
    /// Its own participant key is no longer locked by its session, and no round counted it.
    Gone,
}

/// The next step of participant `id` entering a double barrier of `count`.
pub(super) fn enter_step<'a>(
    view: &View<'a>,
    layout: &Layout,
    count: usize,
    id: &str,
) -> Result<Step<'a>> {
    if let Some((pair, Ok(doc))) = &view.ready {
        if doc.participants.iter().any(|p| p == id) {
            if doc.count != count as u64 {
                return Err(count_conflict(doc.count, count));
            }
            return Ok(Step::Entered(Round {
                index: pair.create_index,
                participants: doc.participants.clone(),
            }));
        }
    }
    if !view.is_live(layout, id) {
        return Ok(Step::Gone);
    }
    if let Some((pair, _)) = &view.ready {
        return match view.open_round(layout)? {
            Some((_, doc)) if doc.count != count as u64 => Err(count_conflict(doc.count, count)),
            // A round without us is on: ours is the next one.
            Some(_) => Ok(Step::Wait),
            None => Ok(Step::ClearStale(pair.modify_index)),
        };
    }
    if view.live.len() >= count {
        return Ok(Step::Open(view.live[..count].to_vec()));
    }
    Ok(Step::Wait)
}

/// Whether participant `id` is counted by the open round of this listing (a
/// participant that gives up looks once more: it may have been counted just then).
pub(super) fn counted(view: &View<'_>, id: &str) -> Option<Round> {
    let Some((pair, Ok(doc))) = &view.ready else {
        return None;
    };
    doc.participants.iter().any(|p| p == id).then(|| Round {
        index: pair.create_index,
        participants: doc.participants.clone(),
    })
}

/// The `ready` key of a listing and its ModifyIndex, if there is one.
pub(super) fn ready_index(view: &View<'_>) -> Option<u64> {
    view.ready.as_ref().map(|(p, _)| p.modify_index)
}

/// What a participant that left `round` does next.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum LeaveStep {
    /// The round is over (its `ready` key is gone or replaced by a later round's).
    Done,
    /// Every participant of the round has left: delete its `ready` key
    /// (check-and-set on this ModifyIndex); then the round is over.
    Close(u64),
    /// Some participant of the round is still in.
    Wait,
}

pub(super) fn leave_step(view: &View<'_>, layout: &Layout, round: &Round) -> LeaveStep {
    let Some((pair, _)) = &view.ready else {
        return LeaveStep::Done;
    };
    if pair.create_index != round.index {
        return LeaveStep::Done;
    }
    if round.participants.iter().any(|id| view.is_live(layout, id)) {
        return LeaveStep::Wait;
    }
    LeaveStep::Close(pair.modify_index)
}

fn count_conflict(theirs: u64, ours: usize) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!("double barrier count conflict (ready: {theirs}, local: {ours})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(key: &str, session: Option<&str>, create: u64) -> KvPair {
        KvPair {
            key: key.to_string(),
            value: None,
            flags: 0,
            session: session.map(str::to_string),
            lock_index: u64::from(session.is_some()),
            create_index: create,
            modify_index: create,
        }
    }

    fn ready(ids: &[&str], count: u64, create: u64) -> KvPair {
        let doc = ReadyDoc {
            count,
            participants: ids.iter().map(|s| s.to_string()).collect(),
        };
        KvPair {
            value: Some(doc.encode()),
            ..pair("b/ready", None, create)
        }
    }

    #[test]
    fn participant_keys_are_told_from_the_others() {
        let l = Layout::new("b");
        assert_eq!(l.id_of("b/participants/x"), Some("x"));
        assert_eq!(l.id_of("b/participants/"), None);
        assert_eq!(l.id_of("b/participants/x/y"), None);
        assert_eq!(l.id_of("b/ready"), None);
        assert_eq!(l.id_of("bb/participants/x"), None);
        assert_eq!(l.ready(), "b/ready");
        assert_eq!(l.listing(), "b/");
    }

    #[test]
    fn a_round_opens_with_the_oldest_live_participants() {
        let l = Layout::new("b");
        let entries = vec![
            pair("b/participants/c", Some("s3"), 30),
            pair("b/participants/a", Some("s1"), 10),
            pair("b/participants/dead", None, 5),
            pair("b/participants/b", Some("s2"), 20),
        ];
        let v = View::of(&l, &entries);
        assert_eq!(v.dead.len(), 1);
        match enter_step(&v, &l, 2, "c").unwrap() {
            Step::Open(chosen) => {
                let keys: Vec<_> = chosen.iter().map(|p| p.key.as_str()).collect();
                assert_eq!(keys, ["b/participants/a", "b/participants/b"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(enter_step(&v, &l, 4, "c").unwrap(), Step::Wait);
        assert_eq!(enter_step(&v, &l, 2, "gone").unwrap(), Step::Gone);
        assert_eq!(enter_step(&v, &l, 2, "dead").unwrap(), Step::Gone);
    }

    #[test]
    fn a_ready_key_counts_its_participants_only_while_one_is_live() {
        let l = Layout::new("b");
        let mut entries = vec![
            pair("b/participants/a", Some("s1"), 10),
            pair("b/participants/b", Some("s2"), 20),
            pair("b/participants/late", Some("s3"), 40),
            ready(&["a", "b"], 2, 30),
        ];
        let v = View::of(&l, &entries);
        let round = Round {
            index: 30,
            participants: vec!["a".into(), "b".into()],
        };
        assert_eq!(
            enter_step(&v, &l, 2, "a").unwrap(),
            Step::Entered(round.clone())
        );
        // A late participant waits for the next round.
        assert_eq!(enter_step(&v, &l, 2, "late").unwrap(), Step::Wait);
        assert!(enter_step(&v, &l, 3, "late").is_err(), "count conflict");
        assert_eq!(leave_step(&v, &l, &round), LeaveStep::Wait);
        // Both counted participants gone: the key is stale for the late one,
        // and closes the round for those that left.
        entries.drain(..2);
        let v = View::of(&l, &entries);
        assert_eq!(enter_step(&v, &l, 2, "late").unwrap(), Step::ClearStale(30));
        assert_eq!(leave_step(&v, &l, &round), LeaveStep::Close(30));
        assert_eq!(counted(&v, "a"), Some(round.clone()));
        assert_eq!(counted(&v, "late"), None);
        // A later round's key, or none: done.
        let later = vec![ready(&["late", "x"], 2, 50)];
        assert_eq!(
            leave_step(&View::of(&l, &later), &l, &round),
            LeaveStep::Done
        );
        assert_eq!(leave_step(&View::of(&l, &[]), &l, &round), LeaveStep::Done);
    }

    #[test]
    fn a_foreign_ready_value_is_a_conflict() {
        let l = Layout::new("b");
        let entries = vec![
            pair("b/participants/a", Some("s1"), 10),
            KvPair {
                value: Some(b"yes".to_vec()),
                ..pair("b/ready", None, 5)
            },
        ];
        let v = View::of(&l, &entries);
        assert_eq!(
            enter_step(&v, &l, 1, "a").unwrap_err().kind(),
            ErrorKind::Conflict
        );
    }
}
