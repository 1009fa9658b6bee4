//! The event loops' warm path (`lock::warm`): a lock's acquire and release whose one request
//! the caller writes and reads without blocking, driven here the way a loop would drive it.

mod common;

use std::time::{Duration, Instant};

use baton::warm::{WarmAcquire, WarmRelease, WarmStep};
use baton::{Client, Lock};
use common::{holder, unique, wait_free, Fixture};

/// Generous bound for "eventually"; a failure bound, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(20);

/// What a loop does with a warm call: advance it whenever its socket may be ready (here:
/// again and again, yielding, as a loop would poll), until it is no longer pending.
fn drive<R>(mut advance: impl FnMut() -> WarmStep<R>) -> WarmStep<R> {
    let end = Instant::now() + PATIENCE;
    loop {
        match advance() {
            WarmStep::Pending(_) => {
                assert!(Instant::now() < end, "a warm call stayed pending");
                std::thread::yield_now();
            }
            done => return done,
        }
    }
}

fn acquire(w: &mut WarmAcquire) -> WarmStep<baton::warm::ResumeAcquire> {
    drive(|| w.advance())
}

fn release(w: &mut WarmRelease) -> WarmStep<baton::warm::ResumeRelease> {
    drive(|| w.advance())
}

/// Whether the server rounds txn numbers (before Consul 1.6.2): the warm path is never taken
/// there (a lock is written as Go writes it, in two requests).
fn no_warm_path(f: &Fixture) -> bool {
    f.before("1.6.2")
}

/// A lock whose key is known free (one blocking cycle) on a client with its loop
/// connection open: what the warm path needs.
fn warm_lock(c: &Client, key: &str) -> Lock {
    let lock = c.lock(key).unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.release().unwrap());
    c.open_loop_conn().unwrap();
    lock
}

#[test]
fn a_warm_cycle_holds_and_releases_as_the_blocking_one_does() {
    let f = Fixture::start();
    let c = f.client();
    let key = unique("warm-cycle");
    let lock = warm_lock(&c, &key);
    if no_warm_path(&f) {
        assert!(
            lock.warm_acquire().is_none(),
            "no warm path before Consul 1.6.2"
        );
        return;
    }
    let session = c.default_session().unwrap();
    for round in 0..3 {
        let mut w = lock.warm_acquire().expect("a warm acquire");
        match acquire(&mut w) {
            WarmStep::Done(Ok(true)) => {}
            other => panic!("round {round}: expected a grant, got {other:?}"),
        }
        drop(w);
        assert!(lock.is_held());
        assert_eq!(holder(&c, &key).as_deref(), Some(session.id()));
        let seq = lock.sequencer().expect("a sequencer");
        assert_eq!(seq.session, session.id());
        // Held: no second warm acquire, and the blocking one says why.
        assert!(lock.warm_acquire().is_none());

        let mut r = lock.warm_release().expect("a warm release");
        assert!(!lock.is_held(), "the holding ends at once");
        match release(&mut r) {
            WarmStep::Done(Ok(true)) => {}
            other => panic!("round {round}: expected a release, got {other:?}"),
        }
        assert_eq!(holder(&c, &key), None);
    }
    // Nothing held: no warm release.
    assert!(lock.warm_release().is_none());
}

#[test]
fn no_warm_call_without_a_known_free_key_or_an_idle_connection() {
    let f = Fixture::start();
    let c = f.client();
    let key = unique("warm-cold");
    let lock = c.lock(&key).unwrap();
    c.open_loop_conn().unwrap();
    // Never read: the blocking path reads first.
    assert!(lock.warm_acquire().is_none());
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.release().unwrap());
    if no_warm_path(&f) {
        assert!(
            lock.warm_acquire().is_none(),
            "no warm path before Consul 1.6.2"
        );
        return;
    }
    // Known free now; the loop connection is open: warm.
    let mut w = lock.warm_acquire().expect("warm");
    assert!(matches!(acquire(&mut w), WarmStep::Done(Ok(true))));
    drop(w);
    // A client whose connection is busy (taken by a warm call in flight) has no warm path
    // for another call until it is given back.
    let lock2 = c.lock(&unique("warm-busy")).unwrap();
    assert!(lock2.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock2.release().unwrap());
    assert!(lock.release().unwrap());
    let w = lock
        .warm_acquire()
        .expect("warm: the calls left their connection idle");
    assert!(
        lock2.warm_acquire().is_none(),
        "a warm call with no idle connection"
    );
    drop(w);
}

#[test]
fn a_stale_view_goes_on_on_a_thread_and_ends_as_the_blocking_path_would() {
    let f = Fixture::start();
    let c = f.client();
    let rival = f.client();
    let key = unique("warm-stale");
    let lock = warm_lock(&c, &key);
    if no_warm_path(&f) {
        return;
    }
    // Someone else takes the key after our view of it was cached.
    let theirs = rival.lock(&key).unwrap();
    assert!(theirs.acquire(Some(PATIENCE), None).unwrap());
    let mut w = lock.warm_acquire().expect("our view says free");
    let resume = match acquire(&mut w) {
        WarmStep::Resume(r) => r,
        other => panic!("expected a resume (the check failed), got {other:?}"),
    };
    drop(w);
    // Resumed as a try-once: the key is held by the rival.
    assert!(!resume.run(Some(Duration::ZERO), None).unwrap());
    assert!(!lock.is_held());
    assert!(theirs.release().unwrap());
    // Free again: the next (blocking) acquire takes it.
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.release().unwrap());
}

#[test]
fn a_warm_acquire_given_up_in_flight_leaves_nothing_held() {
    let f = Fixture::start();
    let c = f.client();
    let key = unique("warm-abandon");
    let lock = warm_lock(&c, &key);
    if no_warm_path(&f) {
        return;
    }
    // Requests wait on the server, so that each is still on its way when given up.
    let Some(dev) = f.dev("a latency fault keeps the request in flight") else {
        return;
    };
    dev.set_latency(Duration::from_millis(100));

    // Given up after the request left (its loop's timer for the request fired): resumed on
    // a thread with time left, the call ends holding the key, whether the abandoned request
    // was granted (the key is ours: taken again) or not.
    let mut w = lock.warm_acquire().expect("warm");
    assert!(matches!(w.advance(), WarmStep::Pending(_)));
    let resume = w.abandon().expect("in flight");
    assert!(resume.run(Some(PATIENCE), None).unwrap());
    assert!(lock.is_held());
    assert!(lock.release().unwrap());

    // Dropped after the request left (its loop went away): given back in the background.
    c.open_loop_conn().unwrap();
    let mut w = lock.warm_acquire().expect("warm again");
    assert!(matches!(w.advance(), WarmStep::Pending(_)));
    drop(w);
    assert!(!lock.is_held());
    // The dropped acquire's grant is given back.
    wait_free(&c, &key);
    dev.set_latency(Duration::ZERO);
    // And the lock's turn and claim are free: a blocking acquire goes through.
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.release().unwrap());
}

#[test]
fn a_warm_release_dropped_in_flight_still_releases() {
    let f = Fixture::start();
    let c = f.client();
    let key = unique("warm-release-drop");
    let lock = warm_lock(&c, &key);
    if no_warm_path(&f) {
        return;
    }
    let mut w = lock.warm_acquire().expect("warm");
    assert!(matches!(acquire(&mut w), WarmStep::Done(Ok(true))));
    drop(w);
    let r = lock.warm_release().expect("warm release");
    drop(r); // before anything was written
    assert!(!lock.is_held());
    // The dropped release happens.
    wait_free(&c, &key);
}
