//! Blocking-query watches and cancellable blocking calls.

mod common;

use std::time::{Duration, Instant};

use baton::{CancelToken, ErrorKind, QueryOptions};
use common::{unique, Fixture};

const PATIENCE: Duration = Duration::from_secs(20);

#[test]
fn a_key_watch_sees_every_change_and_deletion() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("watch");
    let mut w = c.watch_key(&k).unwrap();
    let first = w.next(Some(PATIENCE), None).unwrap();
    assert!(first.entries.is_empty(), "missing key at first");
    c.kv().put(&k, b"1").unwrap();
    let ev = w.next(Some(PATIENCE), None).unwrap();
    assert_eq!(ev.entries[0].value.as_deref(), Some(&b"1"[..]));
    c.kv().put(&k, b"2").unwrap();
    let ev = loop {
        let ev = w.next(Some(PATIENCE), None).unwrap();
        if ev.entries.first().and_then(|e| e.value.as_deref()) == Some(&b"2"[..]) {
            break ev;
        }
    };
    assert!(ev.index > 0);
    c.kv().delete(&k).unwrap();
    let ev = w.next(Some(PATIENCE), None).unwrap();
    assert!(ev.entries.is_empty());
}

#[test]
fn subscribers_of_one_key_share_one_watch() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("shared");
    let mut a = c.watch_key(&k).unwrap();
    let mut b = c.clone().watch_key(&k).unwrap();
    assert_eq!(a.subscribers(), 2);
    let mut other = c.watch_prefix(&k).unwrap();
    assert_eq!(other.subscribers(), 1, "a prefix watch is another target");
    a.next(Some(PATIENCE), None).unwrap();
    b.next(Some(PATIENCE), None).unwrap();
    other.next(Some(PATIENCE), None).unwrap();
    drop(other);
    if let Some(dev) = f.dev("request counts") {
        dev.reset_request_counts();
        for i in 0..5u8 {
            c.kv().put(&k, &[i]).unwrap();
            a.next(Some(PATIENCE), None).unwrap();
            b.next(Some(PATIENCE), None).unwrap();
        }
        let counts = dev.request_counts();
        let gets = counts.by_route.get("GET /v1/kv").copied().unwrap_or(0);
        // One shared poll per change, not one per subscriber: 5, +1 in flight at the reset, +1
        // read when the key hub's poll of the group narrows back from the dropped prefix
        // watch's target to the key (a new target is read afresh before it blocks: indexes of
        // different targets are not comparable).
        assert!(gets <= 7, "{counts:?}");
    }
    drop(a);
    assert_eq!(b.subscribers(), 1);
}

#[test]
fn a_prefix_watch_sees_new_keys() {
    let f = Fixture::start();
    let c = f.client();
    let p = unique("prefix");
    let mut w = c.watch_prefix(&format!("{p}/")).unwrap();
    assert!(w.next(Some(PATIENCE), None).unwrap().entries.is_empty());
    c.kv().put(&format!("{p}/a"), b"").unwrap();
    c.kv().put(&format!("{p}/b"), b"").unwrap();
    loop {
        let ev = w.next(Some(PATIENCE), None).unwrap();
        if ev.entries.len() == 2 {
            break;
        }
    }
}

#[test]
fn cancel_and_timeout_of_a_blocked_watch_return_promptly() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("blocked");
    let mut w = c.watch_key(&k).unwrap();
    w.next(Some(PATIENCE), None).unwrap();
    // Nothing changes: the shared long poll is in flight at the server.
    let err = w.next(Some(Duration::from_millis(100)), None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        c2.cancel();
    });
    let err = w.next(None, Some(&cancel)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    canceller.join().unwrap();
}

#[test]
fn a_cancelled_low_level_blocking_query_returns_promptly() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("lowblock");
    c.kv().put(&k, b"v").unwrap();
    let (_, meta) = c.kv().get_with(&k, &QueryOptions::default()).unwrap();
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let client = c.clone();
    let key = k.clone();
    let blocked = std::thread::spawn(move || {
        let opts = QueryOptions::blocking(meta.index, Duration::from_secs(300)).with_cancel(c2);
        client.kv().get_with(&key, &opts)
    });
    // Cancel only once the request is surely at the server (its long poll is open).
    let start = Instant::now();
    while !blocked.is_finished() && start.elapsed() < Duration::from_millis(200) {
        std::thread::yield_now();
    }
    cancel.cancel();
    let err = blocked.join().unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    // Timeout of a blocking query.
    let opts = QueryOptions::blocking(meta.index, Duration::from_secs(300))
        .with_timeout(Duration::from_millis(100));
    let err = c.kv().get_with(&k, &opts).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    // A blocking query still answers when the key changes.
    let client = c.clone();
    let key = k.clone();
    let waiter = std::thread::spawn(move || {
        client
            .kv()
            .get_with(&key, &QueryOptions::blocking(meta.index, PATIENCE))
    });
    c.kv().put(&k, b"w").unwrap();
    let (e, m2) = waiter.join().unwrap().unwrap();
    assert!(m2.index > meta.index);
    assert_eq!(e.unwrap().value.as_deref(), Some(&b"w"[..]));
}
