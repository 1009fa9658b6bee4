//! One key rule for every API (`core/src/foundations/keys.rs`): one leading '/' is dropped,
//! a key that still begins with '/', is empty, or holds a NUL is refused before
//! anything is sent, naming the problem.

mod common;

use std::time::Duration;

use baton::{ErrorKind, KvOp};
use common::{unique, Fixture};

fn refused(r: baton::Result<impl std::fmt::Debug>, what: &str) {
    let e = r.expect_err("a bad key must be refused");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains(what), "{what:?} not in {e}");
}

#[test]
fn a_leading_slash_names_the_same_key_in_every_api() {
    let f = Fixture::start();
    let c = f.client();
    let p = unique("keys");
    let kv = c.kv();

    // Writes as well as reads and deletes (Go's api.KV refuses it on writes only).
    assert!(kv.put(&format!("/{p}/a"), b"1").unwrap());
    assert_eq!(
        kv.get(&format!("{p}/a")).unwrap().unwrap().value.as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(
        kv.get(&format!("/{p}/a")).unwrap().unwrap().key,
        format!("{p}/a")
    );
    assert_eq!(
        kv.keys(&format!("/{p}/"), None).unwrap(),
        vec![format!("{p}/a")]
    );

    // Transactions: '/k' is 'k' there too.
    c.txn(&[KvOp::set(&format!("/{p}/t"), b"t", 0)]).unwrap();
    assert_eq!(
        kv.get(&format!("{p}/t")).unwrap().unwrap().value.as_deref(),
        Some(&b"t"[..])
    );

    // A lock on '/k' is the lock on 'k'.
    let lock = c.lock(&format!("/{p}/lock")).unwrap();
    assert!(lock.try_acquire().unwrap());
    assert_eq!(
        kv.get(&format!("{p}/lock"))
            .unwrap()
            .unwrap()
            .session
            .as_deref(),
        Some(lock.sequencer().unwrap().session.as_str())
    );
    assert!(!c.lock(&format!("{p}/lock")).unwrap().try_acquire().unwrap());
    lock.release().unwrap();

    // A semaphore's prefix: leading and trailing '/' do not change its keys.
    let sem = c.semaphore(&format!("/{p}/sem/"), 2).unwrap();
    assert!(sem.acquire(Some(Duration::from_secs(5)), None).unwrap());
    let keys = kv.keys(&format!("{p}/sem/"), None).unwrap();
    assert!(keys.contains(&format!("{p}/sem/.lock")), "{keys:?}");
    assert!(keys.iter().all(|k| !k.contains("//")), "{keys:?}");
    sem.release().unwrap();

    assert!(kv.delete(&format!("/{p}/a")).unwrap());
    assert_eq!(kv.get(&format!("{p}/a")).unwrap(), None);
    kv.delete_tree(&format!("/{p}/")).unwrap();
    assert!(kv.keys(&format!("{p}/"), None).unwrap().is_empty());
}

#[test]
fn bad_keys_are_refused_before_anything_is_sent() {
    let f = Fixture::start();
    let c = f.client();
    let p = unique("badkeys");
    let kv = c.kv();
    refused(kv.get(""), "missing key");
    refused(kv.put("/", b"x"), "missing key");
    refused(kv.put(&format!("//{p}"), b"x"), "more than one '/'");
    refused(kv.delete(&format!("//{p}")), "more than one '/'");
    refused(kv.put(&format!("{p}/a\0b"), b"x"), "NUL");
    refused(c.lock(&format!("//{p}/l")), "more than one '/'");
    refused(c.semaphore("/", 2), "missing prefix");
    refused(c.election(""), "missing key");
    refused(c.watch_key(""), "missing key");
    let e = c
        .txn(&[
            KvOp::set(&format!("{p}/ok"), b"1", 0),
            KvOp::get(&format!("//{p}")),
        ])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(
        e.message().starts_with("transaction op 1: invalid key"),
        "{e}"
    );
    // Nothing of the refused transaction was applied.
    assert_eq!(kv.get(&format!("{p}/ok")).unwrap(), None);
    // Prefixes may be empty (every key) where a prefix is asked for.
    kv.keys("/", Some("/")).unwrap();
}
