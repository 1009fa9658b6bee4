//! Barriers and double barriers against the dev server (or `BATON_TEST_CONSUL`).

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton::{CancelToken, Client, ErrorKind, KvPair, SessionOptions};
use common::{unique, Fixture};

const PATIENCE: Duration = Duration::from_secs(20);
/// A wait that must end without the barrier opening.
const SHORT: Duration = Duration::from_millis(300);

/// The entries under `prefix/`.
fn listing(c: &Client, prefix: &str) -> Vec<KvPair> {
    c.kv().list(&format!("{prefix}/")).unwrap()
}

/// Participant keys under `prefix` locked by a session.
fn live_participants(entries: &[KvPair], prefix: &str) -> usize {
    let dir = format!("{prefix}/participants/");
    entries
        .iter()
        .filter(|p| p.key.starts_with(&dir) && p.session.is_some())
        .count()
}

/// Blocks (on blocking queries of the prefix) until `n` live participants are
/// registered under `prefix`, failing after [`PATIENCE`].
fn wait_participants(c: &Client, prefix: &str, n: usize) {
    let what = format!("not {n} participants");
    common::wait_for_entries(c, &format!("{prefix}/"), PATIENCE, &what, |entries| {
        live_participants(entries, prefix) == n
    });
}

// ---- Barrier ---------------------------------------------------------------------------

#[test]
fn wait_returns_at_once_when_the_barrier_is_not_held() {
    let f = Fixture::start();
    let c = f.client();
    let b = c.barrier(&unique("barrier-free")).unwrap();
    assert!(!b.is_held().unwrap());
    assert!(b.wait(Some(Duration::ZERO), None).unwrap());
    let started = Instant::now();
    assert!(b.wait(Some(PATIENCE), None).unwrap());
    assert!(b.wait(None, None).unwrap());
    assert!(started.elapsed() < PATIENCE);
}

#[test]
fn hold_twice_then_release_twice() {
    let f = Fixture::start();
    let c = f.client();
    let key = unique("barrier-hold");
    let b = c.barrier(&key).unwrap();
    assert!(b.hold().unwrap(), "first hold raises it");
    assert!(!b.hold().unwrap(), "second hold finds it up");
    // Another process sees the same barrier.
    let other = f.client().barrier(&key).unwrap();
    assert!(!other.hold().unwrap());
    assert!(other.is_held().unwrap());
    let raw = c.kv().get(&key).unwrap().expect("the barrier key");
    assert_eq!((raw.flags, raw.session), (0, None));
    assert!(!b.wait(Some(Duration::ZERO), None).unwrap());
    assert!(other.release().unwrap(), "anyone may lower it");
    assert!(!b.release().unwrap(), "already down");
    assert!(!b.is_held().unwrap());
    assert!(c.kv().get(&key).unwrap().is_none());
    assert!(b.hold().unwrap(), "raised again");
    assert!(b.release().unwrap());
}

#[test]
fn a_waiter_goes_on_when_the_holder_releases_and_not_before() {
    let f = Fixture::start();
    let key = unique("barrier-release");
    let holder = f.client().barrier(&key).unwrap();
    assert!(holder.hold().unwrap());
    let released = Arc::new(AtomicBool::new(false));
    let (tx, rx) = crossbeam_channel::bounded(1);
    let waiter = {
        let (c, key, released) = (f.client(), key.clone(), released.clone());
        std::thread::spawn(move || {
            let b = c.barrier(&key).unwrap();
            // Held: a short wait ends without the barrier opening.
            tx.send(b.wait(Some(SHORT), None).unwrap()).unwrap();
            let opened = b.wait(Some(PATIENCE), None).unwrap();
            (opened, released.load(Ordering::SeqCst))
        })
    };
    assert!(
        !rx.recv().unwrap(),
        "the waiter went on while the barrier was up"
    );
    released.store(true, Ordering::SeqCst);
    assert!(holder.release().unwrap());
    let (opened, after_release) = waiter.join().unwrap();
    assert!(opened, "the waiter timed out after the release");
    assert!(after_release, "the waiter went on before the release");
}

#[test]
fn a_cancelled_wait_is_cancelled() {
    let f = Fixture::start();
    let c = f.client();
    let b = c.barrier(&unique("barrier-cancel")).unwrap();
    assert!(b.hold().unwrap());
    let token = CancelToken::new();
    let canceller = {
        let token = token.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            token.cancel();
        })
    };
    let started = Instant::now();
    let err = b.wait(Some(PATIENCE), Some(&token)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    assert!(started.elapsed() < PATIENCE);
    canceller.join().unwrap();
    // An already cancelled token cancels at once.
    let err = b.wait(None, Some(&token)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    assert!(b.is_held().unwrap(), "a cancelled wait changes nothing");
    assert!(b.release().unwrap());
}

#[test]
fn a_session_bound_barrier_falls_with_its_session() {
    let f = Fixture::start();
    let c = f.client();
    let key = unique("barrier-session");
    let session = c
        .create_session(&SessionOptions::new().lock_delay(Duration::ZERO))
        .unwrap();
    let b = c.barrier(&key).unwrap();
    assert!(b.hold_with_session(&session).unwrap());
    assert!(!b.hold_with_session(&session).unwrap(), "already up");
    let other = c.create_session(&SessionOptions::new()).unwrap();
    assert!(
        !b.hold_with_session(&other).unwrap(),
        "up, held by another session"
    );
    assert!(!b.hold().unwrap(), "already up");
    let raw = c.kv().get(&key).unwrap().expect("the barrier key");
    assert_eq!(raw.session.as_deref(), Some(session.id()));
    let (tx, rx) = crossbeam_channel::bounded(1);
    let waiter = {
        let (c, key) = (f.client(), key.clone());
        std::thread::spawn(move || {
            let b = c.barrier(&key).unwrap();
            tx.send(b.wait(Some(SHORT), None).unwrap()).unwrap();
            b.wait(Some(PATIENCE), None).unwrap()
        })
    };
    assert!(
        !rx.recv().unwrap(),
        "the waiter went on while the barrier was up"
    );
    // The session ends (behaviour release: Consul leaves the key, unlocked).
    session.destroy().unwrap();
    assert!(
        waiter.join().unwrap(),
        "the barrier did not fall with its session"
    );
    assert!(
        c.kv().get(&key).unwrap().is_some(),
        "the key is left unlocked"
    );
    assert!(!b.is_held().unwrap());
    // A fallen hold is replaced by a new one.
    assert!(b.hold().unwrap());
    assert!(b.is_held().unwrap());
    assert!(b.release().unwrap());
    let err = b.hold_with_session(&session).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SessionInvalidated, "{err}");
}

// ---- DoubleBarrier ---------------------------------------------------------------------

#[test]
fn double_barrier_arguments_are_checked() {
    let f = Fixture::start();
    let c = f.client();
    for (prefix, count) in [("b", 0), ("b", 127), ("", 2), ("/", 2), ("//b", 2)] {
        let err = c.double_barrier(prefix, count).unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::InvalidArgument,
            "{prefix:?} {count}: {err}"
        );
    }
    let b = c.double_barrier("jobs/start/", 126).unwrap();
    assert_eq!((b.prefix(), b.count()), ("jobs/start", 126));
    let err = b.leave(Some(Duration::ZERO), None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "leave before enter: {err}");
}

#[test]
fn three_participants_enter_together_and_leave_together() {
    let f = Fixture::start();
    let prefix = unique("double");
    // How many participants have called enter, and leave.
    let entering = Arc::new(AtomicUsize::new(0));
    let leaving = Arc::new(AtomicUsize::new(0));
    let (entered_tx, entered_rx) = crossbeam_channel::unbounded();
    let (left_tx, left_rx) = crossbeam_channel::unbounded();
    let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(1);
    let spawn = |i: usize| {
        let c = f.client();
        let (prefix, entering, leaving) = (prefix.clone(), entering.clone(), leaving.clone());
        let (entered_tx, left_tx, go_rx) = (entered_tx.clone(), left_tx.clone(), go_rx.clone());
        std::thread::spawn(move || {
            let b = c.double_barrier(&prefix, 3).unwrap();
            entering.fetch_add(1, Ordering::SeqCst);
            assert!(
                b.enter(Some(PATIENCE), None).unwrap(),
                "participant {i} timed out"
            );
            assert!(b.is_entered());
            // Nobody enters before all three have called enter.
            let seen = entering.load(Ordering::SeqCst);
            entered_tx.send((i, seen)).unwrap();
            if i == 2 {
                go_rx.recv().unwrap();
            }
            leaving.fetch_add(1, Ordering::SeqCst);
            assert!(
                b.leave(Some(PATIENCE), None).unwrap(),
                "participant {i} left late"
            );
            assert!(!b.is_entered());
            // Nobody leaves before all three have called leave.
            left_tx.send((i, leaving.load(Ordering::SeqCst))).unwrap();
        })
    };
    let c = f.client();
    let first = [spawn(0), spawn(1)];
    wait_participants(&c, &prefix, 2);
    assert!(
        entered_rx.try_recv().is_err(),
        "a participant entered with two of three there"
    );
    let third = spawn(2);
    for _ in 0..3 {
        let (i, seen) = entered_rx.recv_timeout(PATIENCE).expect("all three enter");
        assert_eq!(seen, 3, "participant {i} entered before the third arrived");
    }
    let entries = listing(&c, &prefix);
    assert!(entries.iter().any(|p| p.key == format!("{prefix}/ready")));
    // Two leave; the third is still in, so they wait.
    wait_participants(&c, &prefix, 1);
    assert!(
        left_rx.try_recv().is_err(),
        "a participant left with the third still in"
    );
    go_tx.send(()).unwrap();
    for _ in 0..3 {
        let (i, seen) = left_rx.recv_timeout(PATIENCE).expect("all three leave");
        assert_eq!(seen, 3, "participant {i} left before the third did");
    }
    for t in first.into_iter().chain([third]) {
        t.join().expect("participant");
    }
    assert_eq!(listing(&c, &prefix), vec![], "keys left behind");
}

#[test]
fn a_participant_that_gives_up_leaves_no_key_behind() {
    let f = Fixture::start();
    let c = f.client();
    let prefix = unique("double-timeout");
    let b = c.double_barrier(&prefix, 3).unwrap();
    assert!(!b.enter(Some(SHORT), None).unwrap());
    assert!(!b.is_entered());
    assert_eq!(listing(&c, &prefix), vec![]);
    assert!(!b.enter(Some(Duration::ZERO), None).unwrap());
    assert_eq!(listing(&c, &prefix), vec![]);
    // Cancelled from another thread while it waits.
    let token = CancelToken::new();
    let canceller = {
        let (c, prefix, token) = (f.client(), prefix.clone(), token.clone());
        std::thread::spawn(move || {
            wait_participants(&c, &prefix, 1);
            token.cancel();
        })
    };
    let err = b.enter(Some(PATIENCE), Some(&token)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    canceller.join().unwrap();
    assert_eq!(listing(&c, &prefix), vec![]);
    // A round of one opens at once.
    let b1 = c.double_barrier(&prefix, 1).unwrap();
    assert!(
        b1.enter(Some(Duration::ZERO), None).unwrap(),
        "a round of one"
    );
    let err = b1.enter(Some(Duration::ZERO), None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "entered twice: {err}");
    assert!(b1.leave(Some(Duration::ZERO), None).unwrap());
    assert_eq!(listing(&c, &prefix), vec![]);
}

#[test]
fn a_late_participant_waits_for_the_next_round() {
    let f = Fixture::start();
    let (ca, cb, cc) = (f.client(), f.client(), f.client());
    let prefix = unique("double-rounds");
    let a = ca.double_barrier(&prefix, 2).unwrap();
    let b = cb.double_barrier(&prefix, 2).unwrap();
    let late = cc.double_barrier(&prefix, 2).unwrap();
    let t = std::thread::spawn(move || {
        assert!(a.enter(Some(PATIENCE), None).unwrap());
        a
    });
    assert!(b.enter(Some(PATIENCE), None).unwrap());
    let a = t.join().unwrap();
    // A round of two is open: a third waits, and gives up.
    assert!(!late.enter(Some(SHORT), None).unwrap());
    let entries = listing(&ca, &prefix);
    assert_eq!(live_participants(&entries, &prefix), 2, "{entries:?}");
    // The round closes; the late one and `a` make the next.
    let t = std::thread::spawn(move || b.leave(Some(PATIENCE), None).unwrap());
    assert!(a.leave(Some(PATIENCE), None).unwrap());
    assert!(t.join().unwrap());
    let t = std::thread::spawn(move || {
        assert!(late.enter(Some(PATIENCE), None).unwrap());
        assert!(late.leave(Some(PATIENCE), None).unwrap());
    });
    assert!(a.enter(Some(PATIENCE), None).unwrap());
    assert!(a.leave(Some(PATIENCE), None).unwrap());
    t.join().unwrap();
    assert_eq!(listing(&ca, &prefix), vec![]);
}

#[test]
fn a_participant_whose_session_ends_stops_counting() {
    let f = Fixture::start();
    let c = f.client();
    let prefix = unique("double-session");
    let session = c
        .create_session(&SessionOptions::new().lock_delay(Duration::ZERO))
        .unwrap();
    let b = c
        .double_barrier_with_session(&prefix, 2, session.clone())
        .unwrap();
    let t = std::thread::spawn(move || b.enter(Some(PATIENCE), None));
    wait_participants(&c, &prefix, 1);
    let entries = listing(&c, &prefix);
    assert_eq!(entries[0].session.as_deref(), Some(session.id()));
    session.destroy().unwrap();
    let err = t.join().unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SessionInvalidated, "{err}");
    assert_eq!(listing(&c, &prefix), vec![], "the dead participant's key");
    // A participant key left unlocked by a dead session never counts.
    let dead = format!("{prefix}/participants/dead");
    let s2 = c.create_session(&SessionOptions::new()).unwrap();
    assert!(c.kv().acquire(&dead, b"", s2.id(), 0).unwrap());
    s2.destroy().unwrap();
    let other = c.double_barrier(&prefix, 2).unwrap();
    assert!(
        !other.enter(Some(SHORT), None).unwrap(),
        "counted a dead participant"
    );
    assert_eq!(listing(&c, &prefix), vec![], "dead keys are pruned");
}
