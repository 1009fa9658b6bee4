//! A lock's warm acquire and release as futures (`baton::aio`, issue 44): the one request
//! written and read in the future's own poll, its socket waited on by the client's readiness
//! thread, no step thread involved; and every way such a call can end early (dropped,
//! cancelled, the client closed) leaves nothing held. Alone in its binary: it counts the
//! process's threads by name. Built with the `tokio` feature (as `make test-rust` runs it
//! too), the same calls wait on the tokio runtime's own reactor and start no readiness thread.

mod common;

use std::future::Future;
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};

use baton::aio::AsyncHold;
use baton::{CancelToken, Client, ErrorKind, Lock};
use common::{unique, Fixture};

const PATIENCE: Duration = Duration::from_secs(20);
/// The tests count threads: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
/// Each way, per chunk, on the slowed client: a grant's answer arrives this long after
/// Consul applied it.
const DELAY: Duration = Duration::from_millis(400);
/// Readiness threads a client's warm futures start in a tokio runtime with I/O: none when
/// they wait on the runtime's own reactor (the `tokio` feature).
const READINESS_THREADS: usize = if cfg!(feature = "tokio") { 0 } else { 1 };

fn thread_names() -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").expect("procfs") {
        let path = entry.unwrap().path().join("comm");
        if let Ok(n) = std::fs::read_to_string(path) {
            names.push(n.trim().to_string());
        }
    }
    names
}

fn count(prefix: &str) -> usize {
    thread_names()
        .iter()
        .filter(|n| n.starts_with(prefix))
        .count()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A lock whose next acquire is warm: the key known free (a blocking cycle), a connection
/// idle.
fn warmed(c: &Client, key: &str) -> Lock {
    let lock = c.lock(key).unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.release().unwrap());
    lock
}

/// Who holds `key` now, as another client reads it.
fn holder(observer: &Client, key: &str) -> Option<String> {
    observer.kv().get(key).unwrap().and_then(|p| p.session)
}

/// Waits (blocking queries) until no session holds `key`.
fn wait_given_back(observer: &Client, key: &str) {
    let mut watch = observer.watch_key(key).unwrap();
    loop {
        let ev = watch
            .next(Some(PATIENCE), None)
            .expect("the key is given back");
        if ev.entries.iter().all(|p| p.session.is_none()) {
            return;
        }
    }
}

/// Polls `fut` until `key` is held by `sid` (the grant is applied while its answer is still
/// on the slowed way back), then returns it unfinished.
fn until_granted<F: Future + Unpin>(
    rt: &tokio::runtime::Runtime,
    observer: &Client,
    fut: &mut F,
    key: &str,
    sid: &str,
) {
    let deadline = Instant::now() + PATIENCE;
    rt.block_on(async {
        loop {
            let polled = std::future::poll_fn(|cx| match std::pin::Pin::new(&mut *fut).poll(cx) {
                Poll::Ready(_) => Poll::Ready(true),
                Poll::Pending => Poll::Ready(false),
            })
            .await;
            assert!(!polled, "the acquire ended before its answer could arrive");
            if holder(observer, key).as_deref() == Some(sid) {
                return;
            }
            assert!(Instant::now() < deadline, "the grant never landed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
}

#[test]
fn async_lock_cycles_are_made_in_the_futures_own_poll() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let f = Fixture::start();
    if f.before("1.6.2") {
        // No warm lock calls there (a lock's txn would round its flags): every call takes
        // the steps, as `aio.rs` tests.
        eprintln!("skipped: no warm lock calls before Consul 1.6.2");
        return;
    }
    let c = f.client();
    let key = unique("aio-warm");
    let lock = warmed(&c, &key);
    let before = c.direct_calls();
    let rt = runtime();
    rt.block_on(async {
        for _ in 0..20 {
            assert!(lock.acquire_async(Some(PATIENCE)).await.unwrap());
            assert!(lock.is_held());
            assert!(lock.release_async().await.unwrap());
            assert!(!lock.is_held());
        }
    });
    assert_eq!(
        c.direct_calls() - before,
        40,
        "every call settled by its one request"
    );
    assert_eq!(
        count("baton-step-"),
        0,
        "no step thread: {:?}",
        thread_names()
    );
    assert_eq!(
        count("baton-reactor"),
        READINESS_THREADS,
        "{:?}",
        thread_names()
    );
    assert!(holder(&f.client(), &key).is_none());
    assert!(c.close_report(PATIENCE).is_complete());
    assert_eq!(
        count("baton-reactor"),
        0,
        "joined by close: {:?}",
        thread_names()
    );
}

/// The readiness thread starts when a warm call first waits on it, not when a future merely
/// asks how it would wait: an acquire whose first try cannot be warm (a lock never acquired:
/// the key is not known free) goes to a step thread and starts no readiness thread. The Python
/// and Node bindings drive such futures and never wait on it: it was a thread of theirs for
/// nothing.
#[test]
fn an_acquire_that_is_not_warm_starts_no_readiness_thread() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let f = Fixture::start();
    let c = f.client();
    let lock = c.lock(&unique("aio-not-warm")).unwrap();
    let rt = runtime();
    rt.block_on(async {
        assert!(lock.acquire_async(Some(PATIENCE)).await.unwrap());
    });
    assert!(lock.is_held());
    assert_eq!(count("baton-reactor"), 0, "{:?}", thread_names());
    assert!(lock.release().unwrap());
    assert!(c.close_report(PATIENCE).is_complete());
}

#[test]
fn a_warm_acquire_ends_early_with_nothing_held() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let f = Fixture::start();
    if f.before("1.6.2") {
        // No warm lock calls there (a lock's txn would round its flags): every call takes
        // the steps, as `aio.rs` tests.
        eprintln!("skipped: no warm lock calls before Consul 1.6.2");
        return;
    }
    let Some((builder, proxy)) = f.proxied() else {
        return;
    };
    let c = builder.build().unwrap();
    let observer = f.client();
    let sid = c.default_session().unwrap().id().to_string();
    let rt = runtime();

    // Dropped while its granted answer is on its way: given back.
    let key = unique("aio-warm-drop");
    let lock = warmed(&c, &key);
    let settled = c.direct_calls();
    proxy.delay(DELAY);
    {
        let mut fut = Box::pin(lock.acquire_async(None));
        until_granted(&rt, &observer, &mut fut, &key, &sid);
    }
    assert_eq!(
        c.direct_calls(),
        settled,
        "the acquire was dropped in flight"
    );
    assert_eq!(
        count("baton-step-"),
        0,
        "driven by the future: {:?}",
        thread_names()
    );
    proxy.delay(Duration::ZERO);
    wait_given_back(&observer, &key);
    assert!(!lock.is_held());

    // Cancelled while its granted answer is on its way: `Cancelled`, and given back.
    let key = unique("aio-warm-cancel");
    let lock = warmed(&c, &key);
    proxy.delay(DELAY);
    let cancel = CancelToken::new();
    let mut fut = Box::pin(lock.acquire_async_with(None, &cancel));
    until_granted(&rt, &observer, &mut fut, &key, &sid);
    cancel.cancel();
    let err = rt.block_on(&mut fut).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    drop(fut);
    proxy.delay(Duration::ZERO);
    assert!(!lock.is_held(), "a cancelled acquire holds nothing");
    wait_given_back(&observer, &key);

    // The client closed while its answer is on its way: the future ends, and close gives
    // the key back.
    let key = unique("aio-warm-close");
    let lock = warmed(&c, &key);
    proxy.delay(DELAY);
    let mut fut = Box::pin(lock.acquire_async(None));
    until_granted(&rt, &observer, &mut fut, &key, &sid);
    let closer = {
        let c = c.clone();
        thread::spawn(move || c.close_report(PATIENCE).is_complete())
    };
    let ended = rt.block_on(async { tokio::time::timeout(PATIENCE, &mut fut).await });
    let err = ended
        .expect("the future ends when its client closes")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    drop(fut);
    proxy.delay(Duration::ZERO);
    assert!(closer.join().unwrap(), "close finished its work");
    wait_given_back(&observer, &key);
    assert_eq!(count("baton-reactor"), 0, "{:?}", thread_names());
}

/// A warm release whose answer never comes (a silent network) ends when its client closes,
/// not when its request's time is up: on tokio's reactor (`--features tokio`) the client's
/// close wakes the task, which nothing on the socket would. The unlock it owed is made once
/// the network heals.
#[test]
fn a_warm_release_whose_answer_never_comes_ends_when_its_client_closes() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let f = Fixture::start();
    let Some((builder, proxy)) = f.proxied() else {
        return;
    };
    // Far longer than the test waits: only the close can end the release in time.
    let c = builder
        .request_timeout(Duration::from_secs(300))
        .build()
        .unwrap();
    let observer = f.client();
    let rt = runtime();
    let key = unique("aio-warm-release-close");
    let lock = warmed(&c, &key);
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    let settled = c.direct_calls();
    proxy.blackhole();
    let mut fut = Box::pin(lock.release_async());
    // The client closes once the release waits for its answer: only the close's own wake-up
    // can end it then (the future checks for a close each time it is polled).
    let (waiting, waits) = std::sync::mpsc::channel();
    let closer = {
        let c = c.clone();
        thread::spawn(move || {
            waits.recv().unwrap();
            // Longer than the test waits for the release: what the close does at its own
            // deadline must not be what ends it.
            c.close_report(3 * PATIENCE).is_complete()
        })
    };
    let ended = rt.block_on(async {
        let mut waiting = Some(waiting);
        let release = std::future::poll_fn(|cx| {
            let p = fut.as_mut().poll(cx);
            if p.is_pending() {
                if let Some(w) = waiting.take() {
                    w.send(()).unwrap();
                }
            }
            p
        });
        // The sleep first: when its time wakes the task, the release is not polled again
        // (a poll would see the close whatever woke it).
        tokio::select! {
            biased;
            _ = tokio::time::sleep(PATIENCE) => None,
            r = release => Some(r),
        }
    });
    let err = ended
        .expect("the release ends when its client closes")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    assert_eq!(c.direct_calls(), settled, "no answer came");
    drop(fut);
    proxy.heal();
    assert!(closer.join().unwrap(), "close made the unlock it owed");
    wait_given_back(&observer, &key);
    assert_eq!(count("baton-reactor"), 0, "{:?}", thread_names());
}
