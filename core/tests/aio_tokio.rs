//! The `tokio` feature: a lock's warm futures polled inside a tokio runtime wait for their
//! sockets on that runtime's own reactor, with no readiness thread; polled in a tokio runtime
//! without I/O or by another executor, they wait on the readiness thread as without the
//! feature. Alone in its binary: it counts the process's threads by name. (`aio_warm.rs`,
//! also built with the feature by `make test-rust`, covers the calls that end early.)
#![cfg(feature = "tokio")]

mod common;

use std::thread;
use std::time::Duration;

use baton::aio::AsyncHold;
use baton::{Client, Lock};
use common::{holder, unique, Fixture};

const PATIENCE: Duration = Duration::from_secs(20);
/// The tests count threads: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn count(prefix: &str) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir("/proc/self/task").expect("procfs") {
        let path = entry.unwrap().path().join("comm");
        if std::fs::read_to_string(path).is_ok_and(|name| name.trim().starts_with(prefix)) {
            n += 1;
        }
    }
    n
}

/// A lock whose next acquire is warm: the key known free (a blocking cycle), a connection
/// idle.
fn warmed(c: &Client, key: &str) -> Lock {
    let lock = c.lock(key).unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.release().unwrap());
    lock
}

async fn cycles(lock: &Lock, n: usize) {
    for _ in 0..n {
        assert!(lock.acquire_async(Some(PATIENCE)).await.unwrap());
        assert!(lock.is_held());
        assert!(lock.release_async().await.unwrap());
        assert!(!lock.is_held());
    }
}

/// Fixture, or `None` where no call is warm (before Consul 1.6.2 every call takes the steps).
fn fixture() -> Option<Fixture> {
    let f = Fixture::start();
    if f.before("1.6.2") {
        eprintln!("skipped: no warm lock calls before Consul 1.6.2");
        return None;
    }
    Some(f)
}

#[test]
fn futures_on_a_multi_thread_runtime_wait_on_its_reactor() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(f) = fixture() else { return };
    let c = f.client();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // One task: every call settled by its own request, no thread of baton's behind it.
    let key = unique("aio-tokio-one");
    let lock = warmed(&c, &key);
    let before = c.direct_calls();
    rt.block_on(async { cycles(&lock, 20).await });
    assert_eq!(
        c.direct_calls() - before,
        40,
        "every call settled by its one request"
    );
    assert_eq!(count("baton-step-"), 0, "no step thread");
    assert_eq!(count("baton-reactor"), 0, "no readiness thread");

    // Futures made outside the runtime and polled inside it wait on its reactor too: the
    // way a call waits is decided when it first waits.
    let before = c.direct_calls();
    let acquire = lock.acquire_async(Some(PATIENCE));
    assert!(rt.block_on(acquire).unwrap());
    let release = lock.release_async();
    assert!(rt.block_on(release).unwrap());
    assert_eq!(
        c.direct_calls() - before,
        2,
        "both settled by their request"
    );
    assert_eq!(count("baton-reactor"), 0, "no readiness thread");

    // Many tasks at once on the runtime's two workers, each on its own key: each socket is
    // registered for one wait and gone before the connection is reused by another task.
    let locks: Vec<Lock> = (0..24)
        .map(|i| warmed(&c, &unique(&format!("aio-tokio-many-{i}"))))
        .collect();
    let before = c.direct_calls();
    let locks: Vec<Lock> = rt.block_on(async {
        let tasks: Vec<_> = locks
            .into_iter()
            .map(|l| {
                tokio::spawn(async move {
                    cycles(&l, 10).await;
                    l
                })
            })
            .collect();
        let mut back = Vec::new();
        for t in tasks {
            back.push(t.await.expect("a task's cycles"));
        }
        back
    });
    assert!(
        c.direct_calls() > before,
        "some calls settled by their own request"
    );
    assert_eq!(count("baton-reactor"), 0, "no readiness thread");
    let observer = f.client();
    assert!(holder(&observer, &key).is_none());
    for l in &locks {
        assert!(!l.is_held());
        assert!(holder(&observer, l.key()).is_none(), "{} is free", l.key());
    }
    assert!(c.close_report(PATIENCE).is_complete());
}

#[test]
fn without_tokio_s_io_the_readiness_thread_waits() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(f) = fixture() else { return };
    let c = f.client();
    let key = unique("aio-tokio-noio");
    let lock = warmed(&c, &key);

    // A tokio runtime built without I/O: tokio cannot take the socket (it panics when asked,
    // which the client catches once), so the readiness thread waits on it.
    let before = c.direct_calls();
    let no_io = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    no_io.block_on(async { cycles(&lock, 10).await });
    assert_eq!(
        c.direct_calls() - before,
        20,
        "still settled by their own request"
    );
    assert_eq!(count("baton-reactor"), 1, "the readiness thread waited");

    // Another executor: the readiness thread too.
    let before = c.direct_calls();
    smol::block_on(async { cycles(&lock, 10).await });
    assert_eq!(c.direct_calls() - before, 20);
    assert!(holder(&f.client(), &key).is_none());
    assert!(c.close_report(PATIENCE).is_complete());
    assert_eq!(count("baton-reactor"), 0, "joined by close");

    // A new client in a runtime with I/O goes back to tokio's reactor: what the first client
    // learnt was its own.
    let c = f.client();
    let lock = warmed(&c, &key);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = c.direct_calls();
    rt.block_on(async { cycles(&lock, 5).await });
    assert_eq!(c.direct_calls() - before, 10);
    assert_eq!(count("baton-reactor"), 0, "no readiness thread");
    drop(lock);
    let closer = thread::spawn(move || c.close_report(PATIENCE).is_complete());
    assert!(closer.join().unwrap());
}
