//! Capabilities of the README's "Capabilities by language" table that no other Rust test
//! covered: removing a lock's lost callback, a semaphore's limit and cancel token, an
//! election participant reading its own election's leader, and session events with a
//! removed callback.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton::{LockLost, LostReason, SessionEvent, SessionOptions, LOCK_FLAG_VALUE};
use common::{unique, Fixture};

/// Generous bound for "eventually"; a failure bound, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(20);

#[test]
fn a_removed_lost_callback_is_not_called() {
    let f = Fixture::start();
    let c = f.client();
    let other = f.client();
    let key = unique("parity-removed-callback");
    let lock = c.lock(&key).unwrap();
    let removed_calls = Arc::new(AtomicUsize::new(0));
    let counter = removed_calls.clone();
    let removed = lock.on_lost(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    // Registered after the removed one: callbacks of one loss are posted in registration
    // order to the one dispatcher thread, so once this one ran the removed one would have.
    let (tx, rx) = crossbeam_channel::unbounded();
    lock.on_lost(move |why| {
        let _ = tx.send(why);
    });
    lock.remove_callback(removed);
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    let sid = lock.sequencer().unwrap().session;
    assert!(other
        .kv()
        .release(&key, b"", &sid, LOCK_FLAG_VALUE)
        .unwrap());
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), LockLost::KeyChanged);
    assert_eq!(removed_calls.load(Ordering::SeqCst), 0);
}

#[test]
fn semaphore_limit_and_cancel_token() {
    let f = Fixture::start();
    let c = f.client();
    let prefix = unique("parity-semaphore");
    let sem = c.semaphore(&prefix, 3).unwrap();
    assert_eq!(sem.limit(), 3);
    assert!(
        sem.cancel_token().is_cancelled(),
        "nothing held: already cancelled"
    );
    assert!(sem.acquire(Some(PATIENCE), None).unwrap());
    let token = sem.cancel_token();
    assert!(!token.is_cancelled());
    assert!(sem.release().unwrap());
    assert!(token.wait_timeout(PATIENCE), "the release ends the holding");
}

#[test]
fn election_leader_reads_the_key_of_its_election() {
    let f = Fixture::start();
    let c = f.client();
    let key = unique("parity-election-leader");
    let e = c.election(&key).unwrap();
    assert!(e.leader().unwrap().is_none());
    assert!(e.campaign(b"me", Some(PATIENCE), None).unwrap());
    let leader = e.leader().unwrap().expect("a leader");
    assert_eq!(leader.value, b"me");
    assert_eq!(leader.session, c.default_session().unwrap().id());
    assert_eq!(Some(leader.lock_index), e.sequencer().map(|s| s.lock_index));
    assert!(e.resign().unwrap());
    assert!(e.leader().unwrap().is_none());
}

#[test]
fn session_events_reach_callbacks_and_a_removed_one_is_not_called() {
    let f = Fixture::start();
    let c = f.client();
    let other = f.client();
    let ttl = if f.short_ttls() {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(10)
    };
    let s = c
        .create_session(&SessionOptions::new().ttl(ttl).lock_delay(Duration::ZERO))
        .unwrap();
    let removed_calls = Arc::new(AtomicUsize::new(0));
    let counter = removed_calls.clone();
    let removed = s.on_lost(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    // Registered after the removed one (see a_removed_lost_callback_is_not_called).
    let (tx, rx) = crossbeam_channel::unbounded();
    s.on_event(move |e| {
        let _ = tx.send(*e);
    });
    s.remove_callback(removed);
    other.sessions().destroy(s.id()).unwrap();
    assert_eq!(
        rx.recv_timeout(PATIENCE).unwrap(),
        SessionEvent::Lost(LostReason::Invalidated)
    );
    assert_eq!(removed_calls.load(Ordering::SeqCst), 0);
}

/// Issue 31 item 5: a release of something not held is `Ok(false)` in Rust (C
/// `BATON_NOT_HELD`, Python `NotHeldError`, Node `false`), and every language
/// says why in the same words: never acquired or released, lost and why.
#[test]
fn a_release_of_something_not_held_is_false_and_says_why() {
    let f = Fixture::start();
    let c = f.client();
    let other = f.client();
    let key = unique("parity-not-held");
    let lock = c.lock(&key).unwrap();
    assert!(!lock.release().unwrap(), "never acquired");
    assert!(lock.not_held_message().contains("never acquired"));
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    let sid = lock.sequencer().unwrap().session;
    other.sessions().destroy(&sid).unwrap();
    lock.wait_lost(Some(PATIENCE), None).unwrap();
    assert!(!lock.release().unwrap(), "lost");
    let text = lock.not_held_message();
    assert!(
        text.contains("was lost (session_lost (invalidated))"),
        "{text}"
    );
    let sem = c.semaphore(&unique("parity-not-held-sem"), 2).unwrap();
    assert!(!sem.release().unwrap());
    assert!(sem.not_held_message().contains("never acquired"));
    let e = c.election(&unique("parity-not-held-election")).unwrap();
    assert!(!e.resign().unwrap());
    assert!(e.not_held_message().contains("the leadership of election"));
    c.close(Duration::from_secs(5));
    other.close(Duration::from_secs(5));
}
