//! The direct path (`lock::direct`): a blocking acquire or release of a client that cycles its
//! locks writes and reads its one request itself on the loop connection, instead of going
//! through ureq. What the blocking path promises holds on it too: the deadline bounds it, a
//! cancel or a close interrupts it, and nothing stays held that the call did not return.
#![cfg(unix)]

mod common;

use std::time::{Duration, Instant};

use baton::{CancelToken, Client, ErrorKind, Lock};
use common::{holder, unique, wait_free, Fixture};

/// Generous bound for "eventually"; a failure bound, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(20);

/// Acquire+release cycles through the blocking API.
fn cycle(lock: &Lock) {
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.release().unwrap());
}

/// Direct calls per cycle: before Consul 1.6.2 an acquire is two requests (Go's form), so only
/// the release is direct there.
fn direct_per_cycle(f: &Fixture) -> u64 {
    if f.before("1.6.2") {
        1
    } else {
        2
    }
}

/// A lock of a client that has cycled twice: its loop connection is open and the key is
/// known free, so its next calls are direct.
fn cycling_lock(c: &Client, key: &str) -> Lock {
    let lock = c.lock(key).unwrap();
    cycle(&lock);
    cycle(&lock);
    lock
}

/// Waits until the dev server has `what` (`"<METHOD> <path>"`) in flight; false if it never
/// does (the caller then ends its call before failing, so that the test does not hang).
fn wait_in_flight(dev: &baton_devserver::DevServer, what: &str) -> bool {
    let end = Instant::now() + PATIENCE;
    let in_flight = || {
        dev.request_counts()
            .in_flight
            .get(what)
            .copied()
            .unwrap_or(0)
    };
    while in_flight() == 0 {
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// Whether acquires go direct: from Consul 1.6.2 (before, a lock is written as Go writes it,
/// in two requests, and only releases are one request).
fn direct_acquires(f: &Fixture) -> bool {
    !f.before("1.6.2")
}

#[test]
fn a_cycling_client_goes_direct_once_a_call_left_its_connection_idle() {
    let f = Fixture::start();
    let c = f.client();
    let key = unique("direct-cycle");
    let lock = c.lock(&key).unwrap();
    assert!(lock.wants_loop_conn(), "a new client has no connection yet");
    cycle(&lock);
    // The first cycle's calls went through the engine and left their connection idle: the
    // direct path needs no second one.
    assert!(
        !lock.wants_loop_conn(),
        "the first cycle left no connection idle"
    );
    let before = c.direct_calls();
    let session = c.default_session().unwrap();
    for round in 1..=3u64 {
        assert!(lock.acquire(Some(PATIENCE), None).unwrap());
        assert!(lock.is_held());
        assert_eq!(holder(&c, &key).as_deref(), Some(session.id()));
        let seq = lock.sequencer().expect("a sequencer");
        assert_eq!(seq.session, session.id());
        assert!(lock.release().unwrap());
        assert!(!lock.is_held());
        assert_eq!(holder(&c, &key), None);
        assert_eq!(
            c.direct_calls() - before,
            round * direct_per_cycle(&f),
            "round {round}"
        );
    }
    // Held elsewhere: the direct attempt's check fails, and the call ends as the blocking
    // path would (a try-once finds the key taken).
    let rival = f.client();
    let theirs = rival.lock(&key).unwrap();
    assert!(theirs.acquire(Some(PATIENCE), None).unwrap());
    assert!(!lock.acquire(Some(Duration::ZERO), None).unwrap());
    assert!(!lock.is_held());
    assert!(theirs.release().unwrap());
    cycle(&lock);
}

#[test]
fn a_direct_acquire_whose_deadline_passes_in_flight_leaves_nothing_held() {
    let f = Fixture::start();
    let c = f.client();
    let key = unique("direct-deadline");
    let lock = cycling_lock(&c, &key);
    let Some(dev) = f.dev("a latency fault keeps the request in flight") else {
        return;
    };
    let before = c.direct_calls();
    dev.set_latency(Duration::from_millis(1500));
    let started = Instant::now();
    assert!(!lock
        .acquire(Some(Duration::from_millis(100)), None)
        .unwrap());
    // Ended by its deadline, not by the answer (which the latency holds back).
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "the acquire waited for its answer past its deadline ({:?})",
        started.elapsed()
    );
    assert!(!lock.is_held());
    assert_eq!(
        c.direct_calls(),
        before,
        "an abandoned request settled nothing"
    );
    dev.set_latency(Duration::ZERO);
    // Granted late or not, the key is given back.
    wait_free(&c, &key);
    cycle(&lock);
}

/// A client whose request timeout is long (so that only an interruption ends a request early)
/// with a cycling lock on a fresh key; `None` (the client closed) where the test cannot hold
/// a direct acquire in flight: no dev server, or acquires not direct.
fn interruptible<'f>(
    f: &'f Fixture,
    name: &str,
) -> Option<(Client, Lock, String, &'f baton_devserver::DevServer)> {
    let c = f
        .builder()
        .request_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let key = unique(name);
    let lock = cycling_lock(&c, &key);
    match f
        .dev("a fault keeps the request in flight")
        .filter(|_| direct_acquires(f))
    {
        Some(dev) => Some((c, lock, key, dev)),
        None => {
            c.close(PATIENCE);
            None
        }
    }
}

#[test]
fn a_cancel_interrupts_a_direct_acquire_in_flight() {
    let f = Fixture::start();
    let Some((c, lock, key, dev)) = interruptible(&f, "direct-cancel") else {
        return;
    };
    let before = c.direct_calls();
    dev.set_latency(Duration::from_secs(30));
    let token = CancelToken::new();
    let (r, cancelled_after) = std::thread::scope(|s| {
        let call = s.spawn(|| lock.acquire(None, Some(&token)));
        let arrived = wait_in_flight(dev, "PUT /v1/txn");
        // The txn in flight keeps its delay (taken as it arrived); what the cancel sends
        // next (the give-back of a grant it may have missed) does not wait 30 s.
        dev.set_latency(Duration::ZERO);
        let at = Instant::now();
        token.cancel();
        let r = call.join().unwrap();
        assert!(arrived, "the acquire's txn never reached the server");
        (r, at.elapsed())
    });
    let e = r.expect_err("a cancelled acquire");
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    // Interrupted, not waiting out the latency (30 s).
    assert!(
        cancelled_after < Duration::from_secs(10),
        "the cancel took {cancelled_after:?} to end the call"
    );
    assert!(!lock.is_held());
    assert_eq!(c.direct_calls(), before);
    wait_free(&c, &key);
    cycle(&lock);
    c.close(PATIENCE);
}

#[test]
fn a_close_interrupts_a_direct_acquire_in_flight() {
    let f = Fixture::start();
    let observer = f.client();
    let Some((c, lock, key, dev)) = interruptible(&f, "direct-close") else {
        return;
    };
    dev.pause();
    let (r, closed_after) = std::thread::scope(|s| {
        let call = s.spawn(|| lock.acquire(None, None));
        let arrived = wait_in_flight(dev, "PUT /v1/txn");
        let at = Instant::now();
        // The close's own requests wait for the server too: it answers again once the
        // call has ended, and the close then finishes its work.
        let closer = s.spawn(|| c.close(PATIENCE));
        let r = call.join().unwrap();
        let took = at.elapsed();
        dev.resume();
        assert!(closer.join().unwrap(), "the close finished its work");
        assert!(arrived, "the acquire's txn never reached the server");
        (r, took)
    });
    let e = r.expect_err("an acquire interrupted by close");
    assert_eq!(e.kind(), ErrorKind::Closed, "{e}");
    assert!(
        closed_after < Duration::from_secs(10),
        "the close took {closed_after:?} to end the call"
    );
    assert!(!lock.is_held());
    // Whatever the interrupted request did, nothing stays held.
    wait_free(&observer, &key);
}

#[test]
fn a_direct_release_waits_for_its_answer_and_counts() {
    let f = Fixture::start();
    let c = f.client();
    let key = unique("direct-release");
    let lock = cycling_lock(&c, &key);
    let Some(dev) = f.dev("a latency fault keeps the request in flight") else {
        return;
    };
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    let before = c.direct_calls();
    dev.set_latency(Duration::from_millis(200));
    assert!(lock.release().unwrap());
    dev.set_latency(Duration::ZERO);
    assert_eq!(c.direct_calls(), before + 1);
    assert_eq!(
        holder(&c, &key),
        None,
        "released at the server when it returned"
    );
}
