//! Multi-key locks against the dev server: all or none in one transaction,
//! exclusion with Go-format and baton single-key locks, timeout, cancel, loss.

mod common;

use std::time::Duration;

use baton::{
    Client, ErrorKind, KvPair, LockLost, LostReason, MultiLockOptions, QueryOptions,
    SessionOptions, LOCK_FLAG_VALUE, MULTI_LOCK_MAX_KEYS,
};
use common::{unique, wait_for_entries, Fixture};

/// Generous bound for "eventually"; a failure bound, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(20);

/// Three keys under a fresh prefix: `(prefix, [a, b, c])`.
fn three_keys(name: &str) -> (String, Vec<String>) {
    let prefix = unique(name);
    let keys = ["a", "b", "c"]
        .iter()
        .map(|k| format!("{prefix}/{k}"))
        .collect();
    (prefix, keys)
}

fn refs(keys: &[String]) -> Vec<&str> {
    keys.iter().map(String::as_str).collect()
}

/// The keys under `prefix` that carry session `sid`.
fn held_by(c: &Client, prefix: &str, sid: &str) -> Vec<String> {
    c.kv()
        .list(prefix)
        .unwrap()
        .into_iter()
        .filter(|p| p.session.as_deref() == Some(sid))
        .map(|p| p.key)
        .collect()
}

/// A Go `api.Lock`-format holder of `key`: its own session (as Go makes one),
/// the key acquired with the raw KV API and Go's lock flag.
fn go_lock(c: &Client, key: &str) -> String {
    let sid = c
        .sessions()
        .create(
            &SessionOptions::new()
                .name("Consul API Lock")
                .ttl(Duration::from_secs(15)),
        )
        .unwrap();
    assert!(c
        .kv()
        .acquire(key, b"go-holder", &sid, LOCK_FLAG_VALUE)
        .unwrap());
    sid
}

/// Whether the server is a Consul before 1.6.2, where a multi-key lock with Go's
/// flag is refused (see the last test): such a test is skipped, saying so.
fn old_consul(f: &Fixture) -> bool {
    let old = f.before("1.6.2");
    if old {
        eprintln!("skipped: a Consul before 1.6.2 rounds Go's lock flag in a transaction");
    }
    old
}

#[test]
fn acquire_and_release_three_keys_in_go_format() {
    let f = Fixture::start();
    if old_consul(&f) {
        return;
    }
    let c = f.client();
    let (prefix, keys) = three_keys("ml-basic");
    let ml = c
        .multi_lock_with(
            &[&keys[2], &keys[0], &keys[1], &keys[0]],
            MultiLockOptions::new().value(b"me".to_vec()),
        )
        .unwrap();
    assert_eq!(ml.keys(), &keys[..], "de-duplicated and sorted");
    assert!(!ml.is_held());
    assert!(!ml.release().unwrap(), "release when not held");
    assert!(ml.acquire(Some(PATIENCE), None).unwrap());
    assert!(ml.is_held());
    let e = ml.try_acquire().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    let sid = c.default_session().unwrap().id().to_string();
    let entries = c.kv().list(&prefix).unwrap();
    assert_eq!(entries.len(), 3, "{entries:?}");
    for p in &entries {
        assert_eq!(p.session.as_deref(), Some(sid.as_str()), "{p:?}");
        assert_eq!(p.flags, LOCK_FLAG_VALUE, "{p:?}");
        assert_eq!(p.value.as_deref(), Some(&b"me"[..]), "{p:?}");
        assert_eq!(p.lock_index, 1, "{p:?}");
    }
    // One transaction wrote them all: one raft index.
    assert!(entries
        .iter()
        .all(|p| p.modify_index == entries[0].modify_index));
    let seq = ml.sequencer().unwrap();
    assert_eq!(seq.key, keys[0]);
    assert_eq!(seq.token, entries[0].modify_index);
    assert!(c.check_sequencer(&seq).unwrap());
    assert_eq!(ml.sequencers().len(), 3);

    assert!(ml.release().unwrap());
    assert!(!ml.is_held());
    assert!(ml.cancel_token().is_cancelled());
    assert_eq!(ml.last_lost(), Some(LockLost::Released));
    assert!(ml.sequencer().is_none());
    assert!(!ml.release().unwrap(), "double release");
    for p in c.kv().list(&prefix).unwrap() {
        assert_eq!(p.session, None, "released: {p:?}");
        assert_eq!(p.flags, LOCK_FLAG_VALUE, "flags resent on release: {p:?}");
        assert_eq!(p.value.as_deref(), Some(&b"me"[..]), "value resent: {p:?}");
    }
    // Again, from the released state: a new LockIndex on every key.
    assert!(ml.try_acquire().unwrap());
    assert!(c
        .kv()
        .list(&prefix)
        .unwrap()
        .iter()
        .all(|p| p.lock_index == 2 && p.session.as_deref() == Some(sid.as_str())));
    drop(ml);
    assert!(held_by(&c, &prefix, &sid).is_empty(), "drop releases");
}

/// The acceptance test: a Go-format lock on one key makes a multi-key acquire
/// wait, holding none of the other keys meanwhile (checked on every change of
/// the prefix while the waiter is woken by changes of its keys), until it is
/// released.
#[test]
fn waits_for_a_go_lock_on_one_key_and_never_holds_part_of_the_set() {
    let f = Fixture::start();
    if old_consul(&f) {
        return;
    }
    f.sessions_may_remain("the Go-format holder's session is left to expire, as Go does");
    let (prefix, keys) = three_keys("ml-accept");
    let go = f.client();
    let go_sid = go_lock(&go, &keys[1]);
    let c = f.client();
    let sid = c.default_session().unwrap().id().to_string();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let waiter = {
        let c = c.clone();
        let keys = keys.clone();
        std::thread::spawn(move || {
            let ml = c.multi_lock(&refs(&keys)).unwrap();
            let got = ml.acquire(Some(PATIENCE * 2), None);
            tx.send(()).unwrap();
            (ml, got)
        })
    };
    // Every state of the prefix since the last look, by blocking queries: none
    // may show a key carrying the waiter's session.
    let mut index = 0;
    let mut check = |round: usize| loop {
        let (entries, meta) = c
            .kv()
            .list_with(
                &prefix,
                &QueryOptions::blocking(index, Duration::from_millis(300)),
            )
            .unwrap();
        let ours: Vec<&KvPair> = entries
            .iter()
            .filter(|p| p.session.as_deref() == Some(sid.as_str()))
            .collect();
        assert!(
            ours.is_empty(),
            "round {round}: part of the set held: {ours:?}"
        );
        if meta.index == index {
            return;
        }
        index = meta.index;
    };
    // Another contender takes and gives back each free key, several times: every
    // change wakes the waiter, which must still take nothing while `b` is held.
    let third = f.client();
    for round in 0..3 {
        check(round);
        for k in [&keys[0], &keys[2]] {
            let l = third.lock(k).unwrap();
            assert!(
                l.acquire(Some(PATIENCE), None).unwrap(),
                "round {round}: {k} free for others while the multi-key acquire waits"
            );
            assert!(l.release().unwrap());
        }
        assert!(
            rx.try_recv().is_err(),
            "round {round}: the acquire still waits"
        );
    }
    check(3);
    assert!(go
        .kv()
        .release(&keys[1], b"go-holder", &go_sid, LOCK_FLAG_VALUE)
        .unwrap());
    let (ml, got) = waiter.join().unwrap();
    assert!(got.unwrap(), "acquired once the Go lock was released");
    let mut held = held_by(&c, &prefix, &sid);
    held.sort();
    assert_eq!(held, keys, "all three at once");
    assert!(ml.release().unwrap());
    assert!(held_by(&c, &prefix, &sid).is_empty());
}

#[test]
fn a_baton_lock_on_one_key_and_the_multi_lock_exclude_each_other() {
    let f = Fixture::start();
    if old_consul(&f) {
        return;
    }
    for same_client in [true, false] {
        let (prefix, keys) = three_keys("ml-exclude");
        let c = f.client();
        let other = if same_client { c.clone() } else { f.client() };
        let ml = c.multi_lock(&refs(&keys)).unwrap();
        let single = other.lock(&keys[2]).unwrap();

        // The single lock holds: the multi-key lock takes nothing.
        assert!(single.acquire(Some(PATIENCE), None).unwrap());
        assert!(!ml.try_acquire().unwrap(), "same client: {same_client}");
        assert!(!ml.acquire(Some(Duration::from_millis(300)), None).unwrap());
        let sid = c.default_session().unwrap().id().to_string();
        let single_sid = single.sequencer().unwrap().session;
        let holders: Vec<Option<String>> = c
            .kv()
            .list(&prefix)
            .unwrap()
            .into_iter()
            .map(|p| p.session)
            .collect();
        assert_eq!(
            holders,
            vec![Some(single_sid)],
            "only the single key exists, held"
        );
        assert!(single.release().unwrap());

        // The multi-key lock holds: the single lock cannot take its key.
        assert!(ml.acquire(Some(PATIENCE), None).unwrap());
        assert!(!single.try_acquire().unwrap(), "same client: {same_client}");
        assert!(!single
            .acquire(Some(Duration::from_millis(300)), None)
            .unwrap());
        assert_eq!(held_by(&c, &prefix, &sid).len(), 3);
        assert!(ml.release().unwrap());
        assert!(single.acquire(Some(PATIENCE), None).unwrap());
        assert!(single.release().unwrap());
    }
}

#[test]
fn timeout_is_false_and_cancel_is_cancelled_with_nothing_held() {
    let f = Fixture::start();
    if old_consul(&f) {
        return;
    }
    f.sessions_may_remain("the Go-format holder's session is left to expire, as Go does");
    let (prefix, keys) = three_keys("ml-cancel");
    let go = f.client();
    let go_sid = go_lock(&go, &keys[0]);
    let c = f.client();
    let ml = c.multi_lock(&refs(&keys)).unwrap();
    let sid = c.default_session().unwrap().id().to_string();

    assert!(!ml.try_acquire().unwrap());
    assert!(!ml.acquire(Some(Duration::from_millis(300)), None).unwrap());
    assert!(!ml.is_held());
    assert!(held_by(&c, &prefix, &sid).is_empty());

    let cancel = baton::CancelToken::new();
    let t = cancel.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        t.cancel();
    });
    let e = ml.acquire(None, Some(&cancel)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    canceller.join().unwrap();
    assert!(!ml.is_held());
    assert!(held_by(&c, &prefix, &sid).is_empty());

    // Cancelled before it starts, with every key free: still nothing held.
    assert!(go
        .kv()
        .release(&keys[0], b"go-holder", &go_sid, LOCK_FLAG_VALUE)
        .unwrap());
    let e = ml.acquire(Some(PATIENCE), Some(&cancel)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    assert!(held_by(&c, &prefix, &sid).is_empty());

    // Nothing was left behind (no claim, no key): it acquires now.
    assert!(ml.acquire(Some(PATIENCE), None).unwrap());
    assert!(ml.release().unwrap());
}

#[test]
fn losing_one_key_ends_the_holding_and_releases_the_others() {
    let f = Fixture::start();
    if old_consul(&f) {
        return;
    }
    let c = f.client();
    let other = f.client();
    for how in ["delete", "release"] {
        let (prefix, keys) = three_keys(&format!("ml-loss-{how}"));
        let ml = c.multi_lock(&refs(&keys)).unwrap();
        let (tx, events) = crossbeam_channel::unbounded();
        ml.on_lost(move |r| {
            let _ = tx.send(r);
        });
        assert!(ml.acquire(Some(PATIENCE), None).unwrap());
        let token = ml.cancel_token();
        let sid = ml.sequencer().unwrap().session;
        match how {
            "delete" => assert!(other.kv().delete(&keys[1]).unwrap()),
            _ => assert!(other
                .kv()
                .release(&keys[1], b"", &sid, LOCK_FLAG_VALUE)
                .unwrap()),
        }
        assert_eq!(
            ml.wait_lost(Some(PATIENCE), None).unwrap(),
            LockLost::KeyChanged,
            "{how}"
        );
        assert!(token.is_cancelled());
        assert!(!ml.is_held());
        assert_eq!(events.recv_timeout(PATIENCE).unwrap(), LockLost::KeyChanged);
        wait_for_entries(&c, &prefix, PATIENCE, "the other keys released", |e| {
            e.iter().all(|p| p.session.is_none())
        });
        assert!(
            events.recv_timeout(Duration::from_millis(300)).is_err(),
            "the callback fires once"
        );
        assert!(!ml.release().unwrap(), "nothing to release after loss");
        assert!(ml.acquire(Some(PATIENCE), None).unwrap(), "again ({how})");
        assert!(ml.release().unwrap());
    }
}

#[test]
fn losing_the_session_ends_the_holding() {
    let f = Fixture::start();
    if old_consul(&f) {
        return;
    }
    let c = f
        .builder()
        .default_session(
            SessionOptions::default_for_client().lock_delay(Duration::from_millis(100)),
        )
        .build()
        .unwrap();
    let (prefix, keys) = three_keys("ml-session");
    let ml = c.multi_lock(&refs(&keys)).unwrap();
    assert!(ml.acquire(Some(PATIENCE), None).unwrap());
    let sid = ml.sequencer().unwrap().session;
    let token = ml.cancel_token();
    f.client().sessions().destroy(&sid).unwrap();
    assert_eq!(
        ml.wait_lost(Some(PATIENCE), None).unwrap(),
        LockLost::SessionLost(LostReason::Invalidated)
    );
    assert!(token.is_cancelled());
    assert!(!ml.is_held());
    assert!(held_by(&c, &prefix, &sid).is_empty());
    // A new default session; the lock-delay of the dead one is waited out.
    assert!(ml.acquire(Some(PATIENCE), None).unwrap());
    assert_ne!(ml.sequencer().unwrap().session, sid);
    assert!(ml.release().unwrap());
}

#[test]
fn a_key_with_foreign_flags_is_a_conflict_and_nothing_is_written() {
    let f = Fixture::start();
    if old_consul(&f) {
        return;
    }
    let c = f.client();
    let (prefix, keys) = three_keys("ml-foreign");
    c.kv().put(&keys[1], b"plain value").unwrap();
    let ml = c.multi_lock(&refs(&keys)).unwrap();
    let e = ml.acquire(Some(PATIENCE), None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert!(
        e.to_string()
            .contains("Existing key does not match lock use"),
        "{e}"
    );
    let entries = c.kv().list(&prefix).unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].value.as_deref(), Some(&b"plain value"[..]));
    assert_eq!(entries[0].session, None);
}

#[test]
fn bad_key_lists_are_rejected_naming_the_problem() {
    let f = Fixture::start();
    if old_consul(&f) {
        return;
    }
    let c = f.client();
    let e = c.multi_lock(&[]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("at least one key"), "{e}");
    let e = c.multi_lock(&["x/a", "/x/a"]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("two different keys"), "{e}");
    let many: Vec<String> = (0..=MULTI_LOCK_MAX_KEYS)
        .map(|i| format!("x/{i}"))
        .collect();
    let e = c.multi_lock(&refs(&many)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(
        e.to_string()
            .contains(&format!("at most {MULTI_LOCK_MAX_KEYS} keys")),
        "{e}"
    );
    let e = c.multi_lock(&["x/a", "//x/b"]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    // The most keys one transaction carries: acquired and released.
    let prefix = unique("ml-max");
    let max: Vec<String> = (0..MULTI_LOCK_MAX_KEYS)
        .map(|i| format!("{prefix}/{i}"))
        .collect();
    let ml = c.multi_lock(&refs(&max)).unwrap();
    assert!(ml.acquire(Some(PATIENCE), None).unwrap());
    let sid = ml.sequencer().unwrap().session;
    assert_eq!(held_by(&c, &prefix, &sid).len(), MULTI_LOCK_MAX_KEYS);
    assert!(ml.release().unwrap());
    assert!(held_by(&c, &prefix, &sid).is_empty());
}

#[test]
fn before_consul_1_6_2_go_flags_are_refused_and_small_flags_work() {
    let f = Fixture::start_with(baton_devserver::Config {
        consul_version: "1.0.8".parse().unwrap(),
        session_ttl_min: common::TTL_MIN,
        ..baton_devserver::Config::default()
    });
    if f.dev("an emulated Consul 1.0.8").is_none() {
        return;
    }
    let c = f.client();
    let (prefix, keys) = three_keys("ml-old");
    let ml = c.multi_lock(&refs(&keys)).unwrap();
    let e = ml.acquire(Some(PATIENCE), None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("1.6.2"), "{e}");
    assert!(c.kv().list(&prefix).unwrap().is_empty(), "nothing written");

    let ml = c
        .multi_lock_with(&refs(&keys), MultiLockOptions::new().flags(0))
        .unwrap();
    assert!(ml.acquire(Some(PATIENCE), None).unwrap());
    let sid = ml.sequencer().unwrap().session;
    let entries = c.kv().list(&prefix).unwrap();
    assert_eq!(entries.len(), 3);
    assert!(entries
        .iter()
        .all(|p| p.flags == 0 && p.session.as_deref() == Some(sid.as_str())));
    assert!(ml.release().unwrap());
    assert!(held_by(&c, &prefix, &sid).is_empty());

    // 64 ops per transaction before Consul 1.14: 33 keys are too many there.
    let many: Vec<String> = (0..33).map(|i| format!("{prefix}/many/{i}")).collect();
    let ml = c
        .multi_lock_with(&refs(&many), MultiLockOptions::new().flags(0))
        .unwrap();
    let e = ml.acquire(Some(PATIENCE), None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("1.14"), "{e}");
    assert!(c.kv().list(&format!("{prefix}/many")).unwrap().is_empty());
}

/// Issue 46: a warm multi-key acquire is one request (its transaction checks the keys as the
/// last release's transaction left them, without reading them first), and so is its release.
#[test]
fn a_warm_cycle_is_one_transaction_each_way() {
    let f = Fixture::start();
    let Some(dev) = f.dev("request counts") else {
        return;
    };
    if f.before("1.6.2") {
        // Go's lock flag does not survive a transaction there (see `old_consul_...`).
        return;
    }
    let c = f.client();
    let (prefix, keys) = three_keys("multi-warm");
    let multi = c.multi_lock(&refs(&keys)).unwrap();
    // The first cycle reads the keys; its release leaves them known.
    assert!(multi.acquire(Some(PATIENCE), None).unwrap());
    assert!(multi.release().unwrap());
    dev.reset_request_counts();
    let rounds = 10u64;
    for _ in 0..rounds {
        assert!(multi.acquire(Some(PATIENCE), None).unwrap());
        assert!(multi.release().unwrap());
    }
    let counts = dev.request_counts();
    let blocking: u64 = counts.blocking_by_route.values().sum();
    let txns = counts.by_route.get("PUT /v1/txn").copied().unwrap_or(0);
    assert_eq!(txns, 2 * rounds, "{:?}", counts.by_route);
    assert_eq!(
        counts.total - blocking,
        2 * rounds,
        "only the transactions: {:?}",
        counts.by_route
    );
    // A key written by someone else meanwhile: the check fails, the keys are read again,
    // and the acquire still succeeds.
    c.kv().put(&keys[1], b"").unwrap_or_else(|e| panic!("{e}"));
    let other = f.client();
    other.kv().delete(&keys[1]).unwrap();
    assert!(multi.acquire(Some(PATIENCE), None).unwrap());
    let sid = multi.session().unwrap().id().to_string();
    assert_eq!(held_by(&c, &prefix, &sid).len(), 3);
    assert!(multi.release().unwrap());
    assert!(c.close(PATIENCE));
}

/// The async API (`baton::aio`): a multi-key acquire future refused by a Go-format holder of
/// one key waits without a try in flight, is woken by that key's release, and holds every
/// key; a bounded one ends `false` holding none; `lost()` resolves when a key is taken.
#[test]
fn async_acquire_waits_for_every_key_and_loss_resolves() {
    use baton::aio::AsyncHold;
    use std::future::Future;
    use std::task::Poll;
    let f = Fixture::start();
    let Some(dev) = f.dev("request counts") else {
        return;
    };
    if f.before("1.6.2") {
        return;
    }
    let c = f.client();
    let (prefix, keys) = three_keys("multi-async");
    let go = f.client();
    let go_sid = go_lock(&go, &keys[1]);
    let multi = c.multi_lock(&refs(&keys)).unwrap();
    let sid = c.default_session().unwrap().id().to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Bounded: refused while the Go holder has one key, nothing of the set held.
    let got = rt.block_on(multi.acquire_async(Some(Duration::from_millis(300))));
    assert!(!got.unwrap());
    assert!(held_by(&c, &prefix, &sid).is_empty());
    // Unbounded: poll until its try has read the keys and found one held, then the Go
    // holder releases; only the key's change can wake the future now.
    dev.reset_request_counts();
    let mut fut = Box::pin(multi.acquire_async(Some(PATIENCE)));
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let pending = rt.block_on(std::future::poll_fn(|cx| {
            Poll::Ready(fut.as_mut().poll(cx).is_pending())
        }));
        assert!(pending, "acquired while the Go holder has a key");
        // The try read every key (and, seeing the Go holder, sent nothing).
        if dev.request_counts().non_blocking("GET /v1/kv") >= 3 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no try was made");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(held_by(&c, &prefix, &sid).is_empty(), "never a partial set");
    assert!(go
        .kv()
        .release(&keys[1], b"go-holder", &go_sid, LOCK_FLAG_VALUE)
        .unwrap());
    assert!(rt.block_on(fut).unwrap());
    assert_eq!(held_by(&c, &prefix, &sid).len(), 3);
    // A key taken from it: `lost()` resolves, the other keys are given back.
    let other = f.client();
    rt.block_on(async {
        let (why, ()) = tokio::join!(multi.lost(), async {
            other.kv().delete(&keys[0]).unwrap();
        });
        assert_eq!(why.unwrap(), LockLost::KeyChanged);
    });
    assert!(!multi.is_held());
    wait_for_entries(&c, &prefix, PATIENCE, "keys still held", |e| {
        e.iter().all(|p| p.session.is_none())
    });
    go.sessions().destroy(&go_sid).unwrap();
    assert!(c.close(PATIENCE));
}
