//! The Counter recipe: a shared `i64` in one KV key as decimal text, changed by
//! check-and-set writes. Only what Consul shows is checked (the raw value, its flags,
//! its ModifyIndex), so these run against a real Consul too.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use baton::{CancelToken, Counter, CounterWatch, ErrorKind, KvPair, WriteOptions};
use common::{unique, Fixture};

/// Long enough for anything that should happen to happen; a test waiting this long failed.
const PATIENCE: Duration = Duration::from_secs(20);

/// How long a watch is given to (wrongly) report something when nothing changed: a
/// blocking query answers a change within milliseconds.
const QUIET: Duration = Duration::from_millis(400);

fn raw(c: &baton::Client, key: &str) -> Option<KvPair> {
    c.kv().get(key).unwrap()
}

#[test]
fn counter_handles_are_cheap_shareable_values() {
    fn shareable<T: Clone + Send + Sync + std::fmt::Debug + 'static>() {}
    shareable::<Counter>();
    fn sendable<T: Send + std::fmt::Debug + 'static>() {}
    sendable::<CounterWatch>();

    let f = Fixture::start();
    let c = f.client();
    let k = unique("counter-debug");
    let counter = c.counter(&format!("/{k}")).unwrap();
    assert_eq!(
        counter.key(),
        k,
        "one leading '/' is dropped, as for every key"
    );
    assert!(format!("{counter:?}").contains(&k));
}

#[test]
fn an_invalid_key_is_refused_naming_the_problem() {
    let f = Fixture::start();
    let c = f.client();
    for (key, what) in [
        ("", "missing key"),
        ("//x", "more than one '/'"),
        ("a\0b", "NUL"),
    ] {
        let e = c.counter(key).expect_err("a bad key must be refused");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.message().contains(what), "{what:?} not in {e}");
    }
}

#[test]
fn an_absent_key_reads_zero_and_set_get_round_trips_as_decimal_text() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("counter-roundtrip");
    let counter = c.counter(&k).unwrap();
    assert_eq!(counter.get().unwrap(), 0);
    assert_eq!(counter.get_with_index().unwrap(), (0, 0));
    assert!(raw(&c, &k).is_none(), "reading wrote nothing");

    for (v, text) in [
        (42, "42"),
        (-7, "-7"),
        (0, "0"),
        (i64::MAX, "9223372036854775807"),
        (i64::MIN, "-9223372036854775808"),
    ] {
        counter.set(v).unwrap();
        assert_eq!(counter.get().unwrap(), v);
        let pair = raw(&c, &k).expect("set wrote the key");
        assert_eq!(
            pair.value.as_deref(),
            Some(text.as_bytes()),
            "the raw value"
        );
        assert_eq!(pair.flags, 0);
        assert_eq!(pair.session, None);
        assert_eq!(counter.get_with_index().unwrap(), (v, pair.modify_index));
    }

    // Another client's view, and one that wrote the decimal text itself.
    let other = f.client();
    assert_eq!(other.counter(&k).unwrap().get().unwrap(), i64::MIN);
    other.kv().put(&k, b"1234").unwrap();
    assert_eq!(counter.get().unwrap(), 1234);
    other.kv().put(&k, b"17\n").unwrap();
    assert_eq!(
        counter.add(1).unwrap(),
        18,
        "a shell's trailing newline is tolerated"
    );
    assert_eq!(raw(&c, &k).unwrap().value.as_deref(), Some(&b"18"[..]));
}

#[test]
fn add_increment_and_decrement_return_the_new_value() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("counter-add");
    let counter = c.counter(&k).unwrap();
    assert_eq!(counter.add(5).unwrap(), 5, "an absent key counts from 0");
    assert_eq!(counter.increment().unwrap(), 6);
    assert_eq!(counter.decrement().unwrap(), 5);
    assert_eq!(counter.add(-12).unwrap(), -7);
    assert_eq!(raw(&c, &k).unwrap().value.as_deref(), Some(&b"-7"[..]));

    // add(0) reads only.
    let before = raw(&c, &k).unwrap().modify_index;
    assert_eq!(counter.add(0).unwrap(), -7);
    assert_eq!(raw(&c, &k).unwrap().modify_index, before);
    let fresh = c.counter(&unique("counter-add0")).unwrap();
    assert_eq!(fresh.add(0).unwrap(), 0);
    assert!(raw(&c, fresh.key()).is_none());
}

#[test]
fn concurrent_adds_from_two_clients_all_count_exactly_once() {
    const THREADS: usize = 8;
    const ADDS: usize = 50;
    let f = Fixture::start();
    let clients = [f.client(), f.client()];
    let k = unique("counter-race");
    let start = std::sync::Arc::new(std::sync::Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let counter = clients[i % 2].counter(&k).unwrap();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                (0..ADDS)
                    .map(|_| counter.add(1).unwrap())
                    .collect::<Vec<i64>>()
            })
        })
        .collect();
    let mut returned = Vec::new();
    for t in threads {
        returned.extend(t.join().expect("adder panicked"));
    }
    let total = (THREADS * ADDS) as i64;
    assert_eq!(clients[0].counter(&k).unwrap().get().unwrap(), total);
    // Each add saw its own write: every value from 1 to the total returned once.
    let distinct: BTreeSet<i64> = returned.iter().copied().collect();
    assert_eq!(returned.len(), THREADS * ADDS);
    assert_eq!(distinct, (1..=total).collect::<BTreeSet<i64>>());
}

#[test]
fn compare_and_set_writes_only_over_the_expected_value() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("counter-cas");
    let counter = c.counter(&k).unwrap();

    // Absent is 0: only an expected 0 creates it.
    assert!(!counter.compare_and_set(1, 5).unwrap());
    assert!(
        raw(&c, &k).is_none(),
        "a refused compare_and_set writes nothing"
    );
    assert!(
        counter.compare_and_set(0, 5).unwrap(),
        "create-only on an absent key"
    );
    assert_eq!(raw(&c, &k).unwrap().value.as_deref(), Some(&b"5"[..]));
    assert!(!counter.compare_and_set(0, 6).unwrap());
    let index = raw(&c, &k).unwrap().modify_index;
    assert!(!counter.compare_and_set(4, 6).unwrap());
    assert_eq!(raw(&c, &k).unwrap().modify_index, index, "nothing written");
    assert!(counter.compare_and_set(5, -6).unwrap());
    assert_eq!(counter.get().unwrap(), -6);

    // A key holding "0" is 0 as well.
    counter.set(0).unwrap();
    assert!(counter.compare_and_set(0, 1).unwrap());
    assert_eq!(counter.get().unwrap(), 1);
}

#[test]
fn of_racing_creators_exactly_one_wins() {
    const THREADS: i64 = 8;
    let f = Fixture::start();
    let c = f.client();
    let k = unique("counter-create");
    let start = std::sync::Arc::new(std::sync::Barrier::new(THREADS as usize));
    let threads: Vec<_> = (1..=THREADS)
        .map(|i| {
            let counter = c.counter(&k).unwrap();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                (i, counter.compare_and_set(0, i).unwrap())
            })
        })
        .collect();
    let winners: Vec<i64> = threads
        .into_iter()
        .map(|t| t.join().expect("creator panicked"))
        .filter(|(_, won)| *won)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    assert_eq!(c.counter(&k).unwrap().get().unwrap(), winners[0]);
}

#[test]
fn a_value_that_is_not_a_counter_is_an_error_and_nothing_is_written() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("counter-foreign");
    let counter = c.counter(&k).unwrap();
    for foreign in [&b"abc"[..], b"", b"1.5", b"99999999999999999999"] {
        c.kv().put(&k, foreign).unwrap();
        let before = raw(&c, &k).unwrap();
        let errors = [
            counter.get().unwrap_err(),
            counter.get_with_index().unwrap_err(),
            counter.add(1).unwrap_err(),
            counter.increment().unwrap_err(),
            counter.compare_and_set(0, 1).unwrap_err(),
        ];
        for e in errors {
            assert_eq!(e.kind(), ErrorKind::BadResponse, "{e}");
            assert!(e.message().contains(&k), "the key is named: {e}");
            let shown = String::from_utf8_lossy(foreign);
            assert!(
                e.message().contains(&format!("\"{shown}\"")) || foreign.is_empty(),
                "{e}"
            );
        }
        assert_eq!(raw(&c, &k).unwrap(), before, "nothing was written");
    }
    // set repairs it.
    counter.set(3).unwrap();
    assert_eq!(counter.add(1).unwrap(), 4);
}

#[test]
fn an_overflowing_add_is_refused_and_nothing_is_written() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("counter-overflow");
    let counter = c.counter(&k).unwrap();
    counter.set(1).unwrap();
    let before = raw(&c, &k).unwrap();
    let e = counter.add(i64::MAX).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("overflows"), "{e}");
    assert!(e.message().contains(&k), "{e}");
    assert_eq!(raw(&c, &k).unwrap(), before, "nothing was written");

    counter.set(i64::MIN).unwrap();
    let before = raw(&c, &k).unwrap();
    assert_eq!(
        counter.decrement().unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(raw(&c, &k).unwrap(), before, "nothing was written");
    assert_eq!(counter.add(i64::MAX).unwrap(), -1, "no overflow: written");
}

#[test]
fn the_value_outlives_the_client_that_wrote_it() {
    let f = Fixture::start();
    let k = unique("counter-survives");
    let writer = f.client();
    writer.counter(&k).unwrap().add(41).unwrap();
    writer.close(Duration::from_secs(5));
    assert_eq!(
        writer.counter(&k).unwrap_err().kind(),
        ErrorKind::Closed,
        "a closed client makes no counters"
    );
    let reader = f.client();
    assert_eq!(reader.counter(&k).unwrap().increment().unwrap(), 42);
}

#[test]
fn a_watch_returns_the_current_value_then_each_change() {
    let f = Fixture::start();
    let c = f.client();
    let other = f.client();
    let k = unique("counter-watch");
    let counter = c.counter(&k).unwrap();
    let mut w = counter.watch().unwrap();
    assert_eq!(w.key(), k);
    assert_eq!(w.next(Some(PATIENCE), None).unwrap(), Some(0), "absent: 0");

    let theirs = other.counter(&k).unwrap();
    theirs.set(5).unwrap();
    assert_eq!(w.next(Some(PATIENCE), None).unwrap(), Some(5));
    assert_eq!(theirs.add(3).unwrap(), 8);
    assert_eq!(w.next(Some(PATIENCE), None).unwrap(), Some(8));

    // Nothing changed: the timeout passes.
    let t = Instant::now();
    assert_eq!(w.next(Some(QUIET), None).unwrap(), None);
    assert!(t.elapsed() >= QUIET, "returned early: {:?}", t.elapsed());
    assert_eq!(w.next(Some(Duration::ZERO), None).unwrap(), None);

    // A write that leaves the number as it was is not a change of the value.
    let flagged = WriteOptions {
        flags: 7,
        ..WriteOptions::default()
    };
    other.kv().put_with(&k, b"8", &flagged).unwrap();
    assert_eq!(w.next(Some(QUIET), None).unwrap(), None);
    theirs.decrement().unwrap();
    assert_eq!(w.next(Some(PATIENCE), None).unwrap(), Some(7));

    // Deleted: 0 again.
    other.kv().delete(&k).unwrap();
    assert_eq!(w.next(Some(PATIENCE), None).unwrap(), Some(0));

    // A second watch starts from the current value.
    theirs.set(-2).unwrap();
    assert_eq!(w.next(Some(PATIENCE), None).unwrap(), Some(-2));
    let mut second = counter.watch().unwrap();
    assert_eq!(second.next(Some(PATIENCE), None).unwrap(), Some(-2));
}

#[test]
fn a_watch_reports_a_foreign_value_once_and_goes_on() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("counter-watch-foreign");
    let counter = c.counter(&k).unwrap();
    counter.set(4).unwrap();
    let mut w = counter.watch().unwrap();
    assert_eq!(w.next(Some(PATIENCE), None).unwrap(), Some(4));
    c.kv().put(&k, b"abc").unwrap();
    let e = w.next(Some(PATIENCE), None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadResponse, "{e}");
    assert!(
        e.message().contains(&k) && e.message().contains("\"abc\""),
        "{e}"
    );
    assert_eq!(w.next(Some(QUIET), None).unwrap(), None, "reported once");
    counter.set(4).unwrap();
    assert_eq!(
        w.next(Some(PATIENCE), None).unwrap(),
        Some(4),
        "the value after the error is returned, even if it is the one before"
    );
}

#[test]
fn a_cancelled_watch_returns_cancelled() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("counter-watch-cancel");
    let counter = c.counter(&k).unwrap();
    let mut w = counter.watch().unwrap();

    // Already cancelled: Cancelled at once, even with a value waiting.
    let done = CancelToken::new();
    done.cancel();
    let e = w.next(Some(PATIENCE), Some(&done)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    assert_eq!(w.next(Some(PATIENCE), None).unwrap(), Some(0));

    // Cancelled from another thread while waiting for a change that does not come.
    let cancel = CancelToken::new();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            cancel.cancel();
        })
    };
    let t = Instant::now();
    let e = w.next(Some(PATIENCE), Some(&cancel)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    assert!(t.elapsed() < PATIENCE / 2, "cancel was not prompt");
    canceller.join().unwrap();

    // The watch goes on after a cancel.
    counter.set(9).unwrap();
    assert_eq!(w.next(Some(PATIENCE), None).unwrap(), Some(9));
}
