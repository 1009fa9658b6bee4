//! Read-write locks against the dev server: readers share, a writer is
//! alone, a waiting writer is not overtaken by later readers, timeout and
//! cancel leave no contender key, the session's loss ends a holding.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use baton::{
    CancelToken, Client, ErrorKind, LockLost, LostReason, RwMode, SessionOptions,
    RW_LOCK_FLAG_VALUE,
};
use common::{unique, wait_for_entries, Fixture};

/// Generous bound for "eventually"; a failure bound, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(20);
/// How long a contender that must not get the lock is given to try.
const SHORT: Duration = Duration::from_millis(500);
/// The lock-delay of the sessions whose loss a test provokes.
const LOCK_DELAY: Duration = Duration::from_secs(1);

/// A client whose default session has `lock_delay`.
fn with_lock_delay(f: &Fixture, lock_delay: Duration) -> Client {
    f.builder()
        .default_session(SessionOptions::default_for_client().lock_delay(lock_delay))
        .build()
        .unwrap()
}

/// The contender keys under `prefix` with their values.
fn contenders(c: &Client, prefix: &str) -> Vec<(String, String)> {
    c.kv()
        .list(&format!("{prefix}/"))
        .unwrap()
        .into_iter()
        .map(|p| {
            let v = String::from_utf8(p.value.unwrap_or_default()).unwrap();
            (p.key, v)
        })
        .collect()
}

#[test]
fn two_readers_hold_at_once() {
    let f = Fixture::start();
    let (c1, c2) = (f.client(), f.client());
    let prefix = unique("rw-readers");
    let r1 = c1.read_lock(&prefix).unwrap();
    let r2 = c2.read_lock(&prefix).unwrap();
    assert_eq!(r1.mode(), RwMode::Read);
    assert!(r1.acquire(Some(PATIENCE), None).unwrap());
    assert!(r2.acquire(Some(PATIENCE), None).unwrap());
    assert!(r1.is_held() && r2.is_held());
    let keys = c1.kv().list(&format!("{prefix}/")).unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    for p in &keys {
        assert_eq!(p.value.as_deref(), Some(&b"read"[..]));
        assert_eq!(p.flags, RW_LOCK_FLAG_VALUE);
        assert!(p.session.is_some());
    }
    let (s1, s2) = (r1.sequencer().unwrap(), r2.sequencer().unwrap());
    assert!(s1.token < s2.token, "queue order: {s1} then {s2}");
    assert!(c1.check_sequencer(&s1).unwrap());
    assert!(r1.release().unwrap());
    assert!(!c1.check_sequencer(&s1).unwrap());
    assert!(r2.release().unwrap());
    assert!(!r2.release().unwrap(), "nothing left to release");
    assert!(contenders(&c1, &prefix).is_empty());
}

#[test]
fn a_writer_waits_for_readers_and_readers_for_a_writer() {
    let f = Fixture::start();
    let (c1, c2) = (f.client(), f.client());
    let prefix = unique("rw-exclusion");
    let r = c1.read_lock(&prefix).unwrap();
    let w = c2.write_lock(&prefix).unwrap();
    assert!(r.acquire(Some(PATIENCE), None).unwrap());
    assert!(
        !w.acquire(Some(SHORT), None).unwrap(),
        "writer beside a reader"
    );
    assert!(!w.try_acquire().unwrap());
    std::thread::scope(|s| {
        let waiting = s.spawn(|| w.acquire(Some(PATIENCE), None));
        wait_for_entries(&c1, &prefix, PATIENCE, "the writer queued", |e| {
            e.len() == 2
        });
        assert!(!w.is_held());
        assert!(r.release().unwrap());
        assert!(waiting.join().unwrap().unwrap(), "writer after the reader");
    });
    assert!(w.is_held());
    let r2 = c1.read_lock(&prefix).unwrap();
    assert!(
        !r2.acquire(Some(SHORT), None).unwrap(),
        "reader beside a writer"
    );
    let w2 = c1.write_lock(&prefix).unwrap();
    assert!(
        !w2.acquire(Some(SHORT), None).unwrap(),
        "writer beside a writer"
    );
    assert!(w.release().unwrap());
    assert!(r2.acquire(Some(PATIENCE), None).unwrap());
    assert!(r2.release().unwrap());
    assert!(contenders(&c1, &prefix).is_empty());
}

#[test]
fn a_waiting_writer_is_not_overtaken_by_later_readers() {
    let f = Fixture::start();
    let (ca, cw, cb) = (f.client(), f.client(), f.client());
    let prefix = unique("rw-starve");
    let a = ca.read_lock(&prefix).unwrap();
    let w = cw.write_lock(&prefix).unwrap();
    let b = cb.read_lock(&prefix).unwrap();
    assert!(a.acquire(Some(PATIENCE), None).unwrap());
    std::thread::scope(|s| {
        let (w_tx, w_rx) = mpsc::channel();
        let wt = s.spawn(move || {
            let got = w.acquire(Some(PATIENCE), None);
            w_tx.send(()).unwrap();
            (w, got)
        });
        wait_for_entries(&ca, &prefix, PATIENCE, "the writer queued", |e| {
            e.len() == 2
        });
        // Only a reader holds, yet B must wait behind the queued writer.
        assert!(!b.acquire(Some(SHORT), None).unwrap(), "B overtook W");
        assert!(w_rx.try_recv().is_err(), "W returned while A held");
        let (b_tx, b_rx) = mpsc::channel();
        let bt = s.spawn(move || {
            let got = b.acquire(Some(PATIENCE), None);
            b_tx.send(()).unwrap();
            (b, got)
        });
        wait_for_entries(&ca, &prefix, PATIENCE, "B queued", |e| e.len() == 3);
        assert!(a.release().unwrap());
        let (w, got) = wt.join().unwrap();
        assert!(got.unwrap(), "W after A");
        assert!(w.is_held());
        assert!(b_rx.try_recv().is_err(), "B returned while W held");
        // B's key is still queued behind W's while W holds.
        let now = contenders(&ca, &prefix);
        assert_eq!(now.len(), 2, "{now:?}");
        assert!(w.release().unwrap());
        let (b, got) = bt.join().unwrap();
        assert!(got.unwrap(), "B after W");
        assert!(b.is_held());
        assert!(b.release().unwrap());
    });
    assert!(contenders(&ca, &prefix).is_empty());
}

#[test]
fn timeout_and_cancel_leave_no_contender_key() {
    let f = Fixture::start();
    let (c1, c2) = (f.client(), f.client());
    let prefix = unique("rw-timeout");
    let r = c1.read_lock(&prefix).unwrap();
    assert!(r.acquire(Some(PATIENCE), None).unwrap());
    let mine = contenders(&c1, &prefix);
    let w = c2.write_lock(&prefix).unwrap();
    assert!(!w.acquire(Some(SHORT), None).unwrap());
    assert!(!w.is_held());
    assert_eq!(contenders(&c1, &prefix), mine, "timeout left its key");

    let cancel = CancelToken::new();
    std::thread::scope(|s| {
        let waiting = s.spawn(|| w.acquire(Some(PATIENCE), Some(&cancel)));
        wait_for_entries(&c1, &prefix, PATIENCE, "the writer queued", |e| {
            e.len() == 2
        });
        cancel.cancel();
        let e = waiting.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    });
    assert!(!w.is_held());
    assert_eq!(contenders(&c1, &prefix), mine, "cancel left its key");
    assert!(r.release().unwrap());
    assert!(w.acquire(Some(PATIENCE), None).unwrap());
    assert!(w.release().unwrap());
}

#[test]
fn a_foreign_key_under_the_prefix_is_a_conflict() {
    let f = Fixture::start();
    let c = f.client();
    let prefix = unique("rw-foreign");
    let other = format!("{prefix}/plain");
    c.kv().put(&other, b"x").unwrap();
    let w = c.write_lock(&prefix).unwrap();
    let e = w.acquire(Some(PATIENCE), None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert_eq!(contenders(&c, &prefix), vec![(other, "x".to_string())]);
}

#[test]
fn losing_the_session_ends_the_holding() {
    let f = Fixture::start();
    let (c1, c2) = (with_lock_delay(&f, LOCK_DELAY), f.client());
    let prefix = unique("rw-loss");
    let r = c1.read_lock(&prefix).unwrap();
    assert!(r.acquire(Some(PATIENCE), None).unwrap());
    let sid = r.sequencer().unwrap().session;
    let token = r.cancel_token();
    let (tx, rx) = mpsc::channel();
    r.on_lost(move |why| tx.send(why).unwrap());
    let w = c2.write_lock(&prefix).unwrap();
    std::thread::scope(|s| {
        let waiting = s.spawn(|| w.acquire(Some(PATIENCE), None));
        wait_for_entries(&c1, &prefix, PATIENCE, "the writer queued", |e| {
            e.len() == 2
        });
        f.client().sessions().destroy(&sid).unwrap();
        assert_eq!(
            r.wait_lost(Some(PATIENCE), None).unwrap(),
            LockLost::SessionLost(LostReason::Invalidated)
        );
        assert!(token.is_cancelled());
        assert!(!r.is_held());
        assert_eq!(
            rx.recv_timeout(PATIENCE).unwrap(),
            LockLost::SessionLost(LostReason::Invalidated)
        );
        // The dead reader's key blocks the writer until its lock-delay is over.
        assert!(waiting.join().unwrap().unwrap());
    });
    assert!(w.is_held());
    assert!(w.release().unwrap());
    wait_for_entries(&c1, &prefix, PATIENCE, "every key gone", |e| e.is_empty());
}

/// A prefix too long for Consul: the acquire fails with Consul's refusal, and
/// nothing is left owed for close (the contender key was never written).
#[test]
fn a_prefix_consul_refuses_fails_the_acquire_and_leaves_close_nothing_to_do() {
    let f = Fixture::start();
    let c = f.client();
    let prefix = format!("{}/{}", unique("rw-huge"), "r".repeat(1 << 20));
    let rw = c.read_lock(&prefix).unwrap();
    let err = rw.acquire(Some(SHORT), None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(!rw.is_held());
    drop(rw);
    let report = c.close_report(PATIENCE);
    assert!(report.is_complete(), "{report}");
}

/// A holder whose session Consul ends keeps its place for the session's lock-delay, as a
/// lock's key is held back: the writer behind a reader whose session is destroyed goes
/// ahead only after the lock-delay, and after the reader's loss signal (one monotonic
/// clock), never on the same change that tells the reader. Also through the async wait.
#[test]
fn a_dead_holder_keeps_its_place_for_its_lock_delay() {
    use baton::aio::AsyncHold;
    use std::time::Instant;
    let f = Fixture::start();
    for asynchronous in [false, true] {
        let (c1, c2) = (with_lock_delay(&f, LOCK_DELAY), f.client());
        let prefix = unique("rw-lock-delay");
        let r = c1.read_lock(&prefix).unwrap();
        assert!(r.acquire(Some(PATIENCE), None).unwrap());
        let sid = r.sequencer().unwrap().session;
        let (tx, rx) = mpsc::channel::<(&str, Instant)>();
        let lost_tx = tx.clone();
        r.on_lost(move |_| lost_tx.send(("reader lost", Instant::now())).unwrap());
        let w = c2.write_lock(&prefix).unwrap();
        let destroyed = std::thread::scope(|s| {
            let waiting = s.spawn(|| {
                let held = if asynchronous {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap()
                        .block_on(w.acquire_async(Some(PATIENCE)))
                } else {
                    w.acquire(Some(PATIENCE), None)
                };
                tx.send(("writer holds", Instant::now())).unwrap();
                held
            });
            wait_for_entries(&c1, &prefix, PATIENCE, "the writer queued", |e| {
                e.len() == 2
            });
            let destroyed = Instant::now();
            f.client().sessions().destroy(&sid).unwrap();
            assert!(waiting.join().unwrap().unwrap());
            destroyed
        });
        let (mut lost, mut holds) = (None, None);
        while lost.is_none() || holds.is_none() {
            let (what, at) = rx.recv_timeout(PATIENCE).unwrap();
            match what {
                "reader lost" => lost = Some(at),
                _ => holds = Some(at),
            }
        }
        let (lost, holds) = (lost.unwrap(), holds.unwrap());
        assert!(
            lost < holds,
            "async {asynchronous}: the writer held before the reader's loss"
        );
        assert!(
            holds - destroyed >= LOCK_DELAY / 2,
            "async {asynchronous}: the writer held {:?} after the destroy, within the lock-delay",
            holds - destroyed
        );
        assert!(w.release().unwrap());
    }
}
