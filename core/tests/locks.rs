//! Locks against the dev server: exclusion, Go interop, lock-delay, loss, cost.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton::{
    Client, ErrorKind, LockLost, LockOptions, LostReason, SessionOptions, WriteOptions,
    LOCK_FLAG_VALUE,
};
use common::{unique, Fixture};

/// Generous bound for "eventually"; a failure bound, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(20);

fn lost_events(lock: &baton::Lock) -> crossbeam_channel::Receiver<LockLost> {
    let (tx, rx) = crossbeam_channel::unbounded();
    lock.on_lost(move |r| {
        let _ = tx.send(r);
    });
    rx
}

#[test]
fn acquire_release_reacquire_and_state() {
    let f = Fixture::start();
    let c = f.client();
    let key = unique("basic");
    let lock = c
        .lock_with(&key, LockOptions::new().value(b"me".to_vec()))
        .unwrap();
    assert!(!lock.is_held());
    assert!(!lock.release().unwrap(), "release when not held");
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.is_held());
    let e = lock.acquire(Some(Duration::ZERO), None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert!(e.to_string().contains("Lock already held"), "{e}");

    let pair = c.kv().get(&key).unwrap().expect("key exists");
    let session = c.default_session().unwrap();
    assert_eq!(pair.flags, LOCK_FLAG_VALUE);
    assert_eq!(pair.value.as_deref(), Some(&b"me"[..]));
    assert_eq!(pair.session.as_deref(), Some(session.id()));
    let seq = lock.sequencer().unwrap();
    assert_eq!(seq.lock_index, pair.lock_index);
    assert_eq!(seq.token, pair.modify_index);
    assert_eq!(seq.session, session.id());

    assert!(lock.release().unwrap());
    assert!(!lock.is_held());
    assert!(lock.sequencer().is_none());
    assert!(lock.cancel_token().is_cancelled());
    assert!(!lock.release().unwrap(), "double release");
    let pair = c.kv().get(&key).unwrap().unwrap();
    assert_eq!(pair.session, None, "released");
    assert_eq!(
        pair.value.as_deref(),
        Some(&b"me"[..]),
        "value resent on release"
    );
    assert_eq!(pair.flags, LOCK_FLAG_VALUE);

    assert!(lock.try_acquire().unwrap());
    let seq2 = lock.sequencer().unwrap();
    assert_eq!(seq2.lock_index, seq.lock_index + 1);
    assert!(seq2.token > seq.token);
}

#[test]
fn warm_uncontended_acquire_and_release_cost_one_request_each() {
    let f = Fixture::start();
    let Some(dev) = f.dev("request counts") else {
        return;
    };
    let c = f.client();
    let key = unique("cost");
    let lock = c.lock(&key).unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.release().unwrap());
    // Warm: the release told the lock the key's state.
    dev.reset_request_counts();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    let acquire = dev.request_counts();
    assert!(lock.release().unwrap());
    let both = dev.request_counts();
    let txn = |c: &baton_devserver::RequestCounts| c.by_route.get("PUT /v1/txn").copied();
    if f.before("1.6.2") {
        // Such a server rounds the lock flag of a txn: locks write as Go's api.Lock does
        // (README, Consul versions): GET, PUT ?acquire=, GET for the entry; PUT ?release=.
        // The holding's watch (a blocking GET) polls on its own schedule: not counted.
        let kv =
            |c: &baton_devserver::RequestCounts, m: &str| c.non_blocking(&format!("{m} /v1/kv"));
        assert_eq!(kv(&acquire, "GET"), 2, "{acquire:?}");
        assert_eq!(kv(&acquire, "PUT"), 1, "{acquire:?}");
        assert_eq!(kv(&both, "PUT"), 2, "{both:?}");
        assert_eq!(kv(&both, "GET"), 2, "{both:?}");
        assert_eq!(txn(&both), None, "{both:?}");
        return;
    }
    assert_eq!(txn(&acquire), Some(1), "acquire: {:?}", acquire.by_route);
    assert_eq!(txn(&both), Some(2), "acquire+release: {:?}", both.by_route);
    assert!(
        !both.by_route.keys().any(|r| r.starts_with("PUT /v1/kv")),
        "no KV PUTs: {:?}",
        both.by_route
    );
}

/// Checks that at most one contender holds at any time.
struct Checker {
    holders: AtomicUsize,
    max: AtomicUsize,
    total: AtomicUsize,
}

impl Checker {
    fn new() -> Arc<Checker> {
        Arc::new(Checker {
            holders: AtomicUsize::new(0),
            max: AtomicUsize::new(0),
            total: AtomicUsize::new(0),
        })
    }
    fn enter(&self) {
        let n = self.holders.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        self.total.fetch_add(1, Ordering::SeqCst);
        std::thread::yield_now();
    }
    fn leave(&self) {
        self.holders.fetch_sub(1, Ordering::SeqCst);
    }
}

fn contend(clients: Vec<Client>, key: &str, iterations: usize) -> Arc<Checker> {
    let checker = Checker::new();
    let threads: Vec<_> = clients
        .into_iter()
        .map(|c| {
            let checker = checker.clone();
            let key = key.to_string();
            std::thread::spawn(move || {
                let lock = c.lock(&key).unwrap();
                for _ in 0..iterations {
                    assert!(lock.acquire(Some(Duration::from_secs(60)), None).unwrap());
                    assert!(lock.is_held());
                    checker.enter();
                    checker.leave();
                    assert!(lock.release().unwrap());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("contender thread");
    }
    checker
}

#[test]
fn eight_processes_worth_of_clients_exclude_each_other() {
    let f = Fixture::start();
    let key = unique("mutex-clients");
    let clients: Vec<Client> = (0..8).map(|_| f.client()).collect();
    let checker = contend(clients, &key, 200);
    assert_eq!(checker.total.load(Ordering::SeqCst), 1600);
    assert_eq!(checker.max.load(Ordering::SeqCst), 1, "two holders at once");
}

#[test]
fn eight_threads_sharing_one_client_and_session_exclude_each_other() {
    let f = Fixture::start();
    let key = unique("mutex-shared");
    let c = f.client();
    let clients: Vec<Client> = (0..8).map(|_| c.clone()).collect();
    let checker = contend(clients, &key, 200);
    assert_eq!(checker.total.load(Ordering::SeqCst), 1600);
    assert_eq!(checker.max.load(Ordering::SeqCst), 1, "two holders at once");
}

/// Go's `api.Lock`, replayed request by request (consul-semantics §7).
struct GoLock {
    client: Client,
    key: String,
    value: Vec<u8>,
    session: String,
}

#[derive(Debug, PartialEq)]
enum GoOutcome {
    Held,
    WouldBlock(String),
    Conflict,
}

impl GoLock {
    fn new(client: Client, key: &str, value: &[u8]) -> GoLock {
        // Go: PUT /v1/session/create {"Name":"Consul API Lock","TTL":"15s"}.
        let session = client
            .sessions()
            .create(
                &SessionOptions::new()
                    .name("Consul API Lock")
                    .ttl(Duration::from_secs(15)),
            )
            .unwrap();
        GoLock {
            client,
            key: key.to_string(),
            value: value.to_vec(),
            session,
        }
    }

    /// One pass of Go's WAIT loop in try-once mode, without the blocking read.
    fn try_lock(&self) -> GoOutcome {
        let kv = self.client.kv();
        let pair = kv.get(&self.key).unwrap();
        if let Some(p) = &pair {
            if p.flags != LOCK_FLAG_VALUE {
                return GoOutcome::Conflict;
            }
            match p.session.as_deref() {
                Some(s) if s == self.session => return GoOutcome::Held,
                Some(s) => return GoOutcome::WouldBlock(s.to_string()),
                None => {}
            }
        }
        let ok = kv
            .put_with(
                &self.key,
                &self.value,
                &WriteOptions {
                    flags: LOCK_FLAG_VALUE,
                    acquire: Some(self.session.clone()),
                    ..Default::default()
                },
            )
            .unwrap();
        if ok {
            return GoOutcome::Held;
        }
        match kv.get(&self.key).unwrap().and_then(|p| p.session) {
            Some(s) => GoOutcome::WouldBlock(s),
            None => GoOutcome::WouldBlock(String::new()),
        }
    }

    fn unlock(&self) {
        // Go: PUT ?flags=<LockFlagValue>&release=<sid>, body = Value; `false` ignored.
        self.client
            .kv()
            .release(&self.key, &self.value, &self.session, LOCK_FLAG_VALUE)
            .unwrap();
    }
}

#[test]
fn go_api_lock_and_baton_exclude_each_other_and_see_each_others_holder() {
    let f = Fixture::start();
    f.sessions_may_remain(
        "the Go-format client it plays leaves its session to expire, as Go's api.Lock does",
    );
    let key = unique("go-interop");
    let c = f.client();
    let go = GoLock::new(f.client(), &key, b"go-holder");
    let lock = c
        .lock_with(&key, LockOptions::new().value(b"baton-holder".to_vec()))
        .unwrap();
    let baton_sid = c.default_session().unwrap().id().to_string();

    // baton holds: Go would block, and reads baton's session as the holder.
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert_eq!(go.try_lock(), GoOutcome::WouldBlock(baton_sid.clone()));
    lock.release().unwrap();

    // Go holds: baton cannot take it and sees Go's session and value.
    assert_eq!(go.try_lock(), GoOutcome::Held);
    assert!(!lock.try_acquire().unwrap());
    assert!(!lock
        .acquire(Some(Duration::from_millis(300)), None)
        .unwrap());
    let leader = c.leader(&key).unwrap().expect("a holder");
    assert_eq!(leader.session, go.session);
    assert_eq!(leader.value, b"go-holder");

    // A waiting baton acquire gets the lock when Go unlocks.
    let waiter = {
        let c = c.clone();
        let key = key.clone();
        std::thread::spawn(move || {
            let l = c.lock(&key).unwrap();
            let got = l.acquire(Some(PATIENCE), None).unwrap();
            let seq = l.sequencer();
            l.release().unwrap();
            (got, seq)
        })
    };
    // Give the waiter a chance to park (not needed for correctness).
    std::thread::sleep(Duration::from_millis(100));
    go.unlock();
    let (got, seq) = waiter.join().unwrap();
    assert!(got, "baton acquired after Go's unlock");
    assert_eq!(seq.unwrap().session, baton_sid);
}

#[test]
fn a_key_with_foreign_flags_is_a_conflict_for_both() {
    let f = Fixture::start();
    f.sessions_may_remain(
        "the Go-format client it plays leaves its session to expire, as Go's api.Lock does",
    );
    let key = unique("foreign");
    let c = f.client();
    c.kv().put(&key, b"plain value").unwrap();
    let lock = c.lock(&key).unwrap();
    let e = lock
        .acquire(Some(Duration::from_secs(1)), None)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert!(
        e.to_string()
            .contains("Existing key does not match lock use"),
        "{e}"
    );
    assert_eq!(
        c.kv().get(&key).unwrap().unwrap().value.as_deref(),
        Some(&b"plain value"[..]),
        "untouched"
    );
    let go = GoLock::new(f.client(), &key, b"x");
    assert_eq!(go.try_lock(), GoOutcome::Conflict);
    let e = lock.destroy().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
}

#[test]
fn destroy_deletes_a_free_lock_key_and_refuses_a_held_one() {
    let f = Fixture::start();
    let key = unique("destroy");
    let c = f.client();
    let a = c.lock(&key).unwrap();
    let b = f.client().lock(&key).unwrap();
    a.destroy().unwrap(); // missing key: nothing to do
    assert!(a.try_acquire().unwrap());
    let e = a.destroy().unwrap_err();
    assert!(e.to_string().contains("Lock already held"), "{e}");
    let e = b.destroy().unwrap_err();
    assert!(e.to_string().contains("Lock in use"), "{e}");
    a.release().unwrap();
    b.destroy().unwrap();
    assert!(c.kv().get(&key).unwrap().is_none());
}

#[test]
fn lock_delay_is_waited_out_not_slept_through() {
    let f = Fixture::start();
    let key = unique("delay");
    let delay = Duration::from_secs(2);
    let holder_client = f.client();
    let holder_session = holder_client
        .create_session(
            &SessionOptions::new()
                .lock_delay(delay)
                .ttl(Duration::from_secs(10)),
        )
        .unwrap();
    let holder = holder_client
        .lock_with(&key, LockOptions::new().session(holder_session.clone()))
        .unwrap();
    assert!(holder.acquire(Some(PATIENCE), None).unwrap());

    let c = f.client();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let waiter = {
        let key = key.clone();
        std::thread::spawn(move || {
            let l = c.lock(&key).unwrap();
            let got = l.acquire(Some(PATIENCE), None).unwrap();
            tx.send(Instant::now()).unwrap();
            l.release().unwrap();
            got
        })
    };
    // Let the waiter see the holder (and learn its LockDelay) before it dies.
    std::thread::sleep(Duration::from_millis(300));
    let killed = Instant::now();
    f.client().sessions().destroy(holder_session.id()).unwrap();
    let acquired = rx.recv_timeout(PATIENCE).expect("the waiter acquires");
    assert!(waiter.join().unwrap());
    let after = acquired - killed;
    println!("acquired {after:?} after the holder's session was destroyed (lock-delay {delay:?})");
    assert!(after >= delay, "acquired during the lock-delay: {after:?}");
    assert!(
        after < delay + Duration::from_secs(4),
        "took {after:?}: slept instead of retrying when the delay ended"
    );
}

#[test]
fn clean_release_hands_over_without_lock_delay() {
    let f = Fixture::start();
    let key = unique("handover");
    let delay = Duration::from_secs(15);
    let holder_client = f.client();
    let s = holder_client
        .create_session(
            &SessionOptions::new()
                .lock_delay(delay)
                .ttl(Duration::from_secs(10)),
        )
        .unwrap();
    let holder = holder_client
        .lock_with(&key, LockOptions::new().session(s))
        .unwrap();
    assert!(holder.acquire(Some(PATIENCE), None).unwrap());
    let c = f.client();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let key2 = key.clone();
    let waiter = std::thread::spawn(move || {
        let l = c.lock(&key2).unwrap();
        let got = l.acquire(Some(PATIENCE), None).unwrap();
        tx.send(Instant::now()).unwrap();
        got
    });
    std::thread::sleep(Duration::from_millis(200));
    let released = Instant::now();
    assert!(holder.release().unwrap());
    let acquired = rx.recv_timeout(PATIENCE).expect("handed over");
    assert!(waiter.join().unwrap());
    let after = acquired - released;
    println!("handover took {after:?}");
    assert!(
        after < delay,
        "a clean release must not cost the lock-delay"
    );
}

#[test]
fn loss_when_the_key_is_force_released_or_deleted_then_reacquire() {
    let f = Fixture::start();
    let c = f.client();
    let other = f.client();
    for how in ["release", "delete"] {
        let key = unique(how);
        let lock = c.lock(&key).unwrap();
        let events = lost_events(&lock);
        assert!(lock.acquire(Some(PATIENCE), None).unwrap());
        let token = lock.cancel_token();
        let sid = lock.sequencer().unwrap().session;
        match how {
            "release" => assert!(other
                .kv()
                .release(&key, b"", &sid, LOCK_FLAG_VALUE)
                .unwrap()),
            _ => assert!(other.kv().delete(&key).unwrap()),
        }
        assert_eq!(
            events.recv_timeout(PATIENCE).unwrap(),
            LockLost::KeyChanged,
            "{how}"
        );
        assert!(!lock.is_held());
        assert!(token.is_cancelled());
        assert_eq!(
            lock.wait_lost(Some(Duration::ZERO), None).unwrap(),
            LockLost::KeyChanged
        );
        assert!(
            events.recv_timeout(Duration::from_millis(300)).is_err(),
            "the callback fires once"
        );
        assert!(
            lock.acquire(Some(PATIENCE), None).unwrap(),
            "acquire again after loss ({how})"
        );
        assert!(lock.release().unwrap());
    }
}

#[test]
fn loss_when_the_session_is_destroyed_elsewhere_then_reacquire_with_a_new_session() {
    let f = Fixture::start();
    let c = f
        .builder()
        .default_session(SessionOptions::default_for_client().lock_delay(Duration::from_secs(1)))
        .build()
        .unwrap();
    let key = unique("session-destroyed");
    let lock = c.lock(&key).unwrap();
    let events = lost_events(&lock);
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    let sid = lock.sequencer().unwrap().session;
    let lock_ref = &lock;
    let waiter = std::thread::scope(|s| {
        let h = s.spawn(move || lock_ref.wait_lost(Some(PATIENCE), None));
        f.client().sessions().destroy(&sid).unwrap();
        h.join().unwrap()
    });
    let reason = waiter.expect("wait_lost returns");
    assert_eq!(reason, LockLost::SessionLost(LostReason::Invalidated));
    assert_eq!(events.recv_timeout(PATIENCE).unwrap(), reason);
    assert!(!lock.is_held());
    // The default session is replaced; the lock-delay of the dead one applies.
    assert!(lock.acquire(Some(Duration::from_secs(30)), None).unwrap());
    assert_ne!(lock.sequencer().unwrap().session, sid);
}

#[test]
fn loss_when_the_server_is_unreachable_past_the_deadline() {
    let f = Fixture::start();
    let Some(dev) = f.dev("pause") else { return };
    let c = f
        .builder()
        .default_session(
            SessionOptions::default_for_client()
                .ttl(Duration::from_secs(1))
                .lock_delay(Duration::from_millis(500)),
        )
        .request_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let key = unique("partition");
    let lock = c.lock(&key).unwrap();
    let events = lost_events(&lock);
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    dev.pause();
    let reason = lock.wait_lost(Some(PATIENCE), None).unwrap();
    assert_eq!(reason, LockLost::SessionLost(LostReason::DeadlineExceeded));
    assert!(!lock.is_held());
    assert_eq!(events.recv_timeout(PATIENCE).unwrap(), reason);
    // The lock names the session's own reason, the one its session reports (issue 22).
    assert_eq!(lock.last_lost(), Some(reason));
    assert_eq!(reason.session_reason(), Some(LostReason::DeadlineExceeded));
    assert_eq!(reason.to_string(), "session_lost (deadline_exceeded)");
    dev.resume();
    let started = std::time::Instant::now();
    if !lock.acquire(Some(Duration::from_secs(60)), None).unwrap() {
        // Failed once on CI (2026-11-29), never here: say what the server holds, to find why.
        let other = f.client();
        panic!(
            "acquire again: not acquired in {:?}; the key now {:?}; sessions {:?}; this lock's session {:?}",
            started.elapsed(),
            other.kv().get(&key),
            other.sessions().list(),
            lock.session().map(|s| s.id().to_string()),
        );
    }
}

#[test]
fn waiting_acquire_is_cancellable_and_times_out() {
    let f = Fixture::start();
    let key = unique("cancel");
    let holder = f.client().lock(&key).unwrap();
    assert!(holder.acquire(Some(PATIENCE), None).unwrap());
    let c = f.client();
    let lock = c.lock(&key).unwrap();
    assert!(!lock.try_acquire().unwrap());
    assert!(!lock
        .acquire(Some(Duration::from_millis(200)), None)
        .unwrap());
    let cancel = baton::CancelToken::new();
    let t = cancel.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        t.cancel();
    });
    let e = lock.acquire(None, Some(&cancel)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    canceller.join().unwrap();
    // Nothing was left behind: the lock works once the holder lets go.
    holder.release().unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
}

/// A lock on each of `keys`, acquired.
fn acquire_all(c: &baton::Client, keys: &[String]) -> Vec<baton::Lock> {
    keys.iter()
        .map(|k| {
            let l = c.lock(k).unwrap();
            assert!(l.acquire(Some(PATIENCE), None).unwrap());
            l
        })
        .collect()
}

/// Deletes the keys of `lost` from another client: each of those locks notices, the others
/// stay held.
fn delete_and_see_lost(f: &Fixture, keys: &[String], locks: &[baton::Lock], lost: &[usize]) {
    for &i in lost {
        let events = lost_events(&locks[i]);
        f.client().kv().delete(&keys[i]).unwrap();
        assert_eq!(events.recv_timeout(PATIENCE).unwrap(), LockLost::KeyChanged);
        assert!(!locks[i].is_held());
    }
    assert!(locks
        .iter()
        .enumerate()
        .all(|(i, l)| lost.contains(&i) || l.is_held()));
}

#[test]
fn groups_of_unrelated_keys_share_one_watch_thread_and_each_notices_loss() {
    let f = Fixture::start();
    let c = f.client();
    // Twelve first segments: eight groups (the bound), polled by one thread.
    let base = unique("flat").replace('/', "-");
    let keys: Vec<String> = (0..12).map(|i| format!("{base}-{i}/lock")).collect();
    let locks = acquire_all(&c, &keys);
    assert_eq!(c.key_watch_polls(), 8, "groups are bounded");
    assert_eq!(c.key_watch_threads(), 1, "one thread polls every group");
    delete_and_see_lost(&f, &keys, &locks, &[0, 5, 11]);
}

#[test]
fn many_held_locks_share_one_watch_thread_and_each_notices_loss() {
    let f = Fixture::start();
    let c = f.client();
    let base = unique("many");
    let keys: Vec<String> = (0..100).map(|i| format!("{base}/{i}")).collect();
    let locks = acquire_all(&c, &keys);
    assert_eq!(c.key_watch_threads(), 1, "one group, one thread");
    assert_eq!(c.key_watch_polls(), 1, "one group, one poll");
    delete_and_see_lost(&f, &keys, &locks, &[42]);
}

#[test]
fn bad_keys_are_rejected_with_a_clear_error() {
    let f = Fixture::start();
    let c = f.client();
    for key in ["", "/"] {
        let e = c.lock(key).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("missing key"), "{e}");
    }
}

#[test]
fn dropping_a_held_lock_releases_it() {
    let f = Fixture::start();
    let c = f.client();
    let key = unique("drop");
    {
        let l = c.lock(&key).unwrap();
        assert!(l.acquire(Some(PATIENCE), None).unwrap());
    }
    assert_eq!(c.kv().get(&key).unwrap().unwrap().session, None);
}

#[test]
fn closing_a_client_releases_its_locks_before_destroying_the_session() {
    let f = Fixture::start();
    let key = unique("close-release");
    let holder = f.client(); // default session: lock-delay 15 s
    let lock = holder.lock(&key).unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(holder.close(Duration::from_secs(10)));
    // Had the session been destroyed with the key held, lock-delay would refuse this for 15 s.
    let other = f.client();
    let l2 = other.lock(&key).unwrap();
    assert!(
        l2.acquire(Some(Duration::from_secs(5)), None).unwrap(),
        "the next holder paid lock-delay"
    );
}

/// A failed try must not leave a belief behind: after the holder releases, the
/// next try-once of the waiter reads the key again and gets it (found by the Node
/// binding's tests: it used to answer from the cached "held" view).
#[test]
fn a_try_after_a_failed_try_reads_the_key_again() {
    let f = Fixture::start();
    let key = unique("retry-try");
    let (ca, cb) = (f.client(), f.client());
    let a = ca.lock(&key).unwrap();
    let b = cb.lock(&key).unwrap();
    assert!(a.try_acquire().unwrap());
    assert!(!b.try_acquire().unwrap());
    assert!(!b.acquire(Some(Duration::from_millis(100)), None).unwrap());
    assert!(a.release().unwrap());
    assert!(
        b.try_acquire().unwrap(),
        "the key is free: a try-once must see it"
    );
    assert!(b.release().unwrap());
}

/// A loss signal waits on Consul at most `GONE_PROBE_TIMEOUT` (500 ms) to name its reason:
/// with every chunk to and from Consul delayed by 2 s, a key deleted under the holder is
/// signalled within the hub's answer (2 s, or 4 s when its poll is sent after the delay
/// began) plus 0.5 s, not after a session lookup of two more delayed chunks (6 s or more).
/// The session is valid: a key change.
#[test]
fn a_slow_consul_delays_a_key_change_signal_by_at_most_the_probe_bound() {
    let f = Fixture::start();
    let Some((builder, proxy)) = f.proxied() else {
        return;
    };
    let holder = builder.build().unwrap();
    let key = unique("slow-probe");
    let lock = holder.lock(&key).unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    let delay = Duration::from_secs(2);
    proxy.delay(delay);
    let deleted = Instant::now();
    assert!(f.client().kv().delete(&key).unwrap());
    let why = lock.wait_lost(Some(PATIENCE), None).unwrap();
    let after = deleted.elapsed();
    proxy.heal();
    assert_eq!(why, LockLost::KeyChanged);
    assert!(
        after < delay * 2 + Duration::from_millis(1500),
        "signalled {after:?} after the delete (chunks delayed {delay:?} each way)"
    );
    eprintln!("signalled {after:?} after the delete");
    holder.close(PATIENCE);
}
