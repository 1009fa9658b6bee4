//! The async API (`baton::aio`, issue 35): the same holdings as futures,
//! completed by baton's own threads, on tokio (multi-thread and
//! current-thread), smol and async-std; dropping a future cancels it and
//! leaves nothing held; ten thousand pending acquires hold no thread each.

mod common;

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::thread;
use std::time::Duration;

use baton::aio::{AsyncClient, AsyncElection, AsyncHold, LeaderStream};
use baton::{
    Client, ErrorKind, KvOp, KvPair, LeaderEvent, LockLost, LockOptions, QueryOptions,
    SessionOptions,
};
use common::{unique, Fixture};
use futures_core::Stream;

const PATIENCE: Duration = Duration::from_secs(20);
/// Each way, per chunk, on the slowed client: a grant's answer arrives this
/// long after Consul applied it.
const DELAY: Duration = Duration::from_millis(400);

/// Polls two futures together until both are ready (no executor's `join!`).
async fn join2<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(move |cx| {
        if ra.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        if ra.is_some() && rb.is_some() {
            Poll::Ready((ra.take().unwrap(), rb.take().unwrap()))
        } else {
            Poll::Pending
        }
    })
    .await
}

/// The next item of a stream.
async fn next<S: Stream + Unpin>(s: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *s).poll_next(cx)).await
}

/// Every holding and request of the async API, once, under `prefix`; returns
/// the leader stream (still open) for the caller to see the close.
async fn holdings(a: &Client, b: &Client, prefix: &str) -> LeaderStream {
    let key = format!("{prefix}/lock");
    let (la, lb) = (a.lock(&key).unwrap(), b.lock(&key).unwrap());

    // Acquire, contention (the timeout passes with the key held elsewhere), release.
    assert!(la.acquire_async(None).await.unwrap());
    assert!(la.is_held());
    assert!(!lb.try_acquire_async().await.unwrap());
    assert!(!lb
        .acquire_async(Some(Duration::from_millis(300)))
        .await
        .unwrap());
    // A waiter and the release together: the waiter gets the key.
    let (got, released) = join2(lb.acquire_async(Some(PATIENCE)), la.release_async()).await;
    assert!(released.unwrap());
    assert!(got.unwrap(), "the waiter gets the released key");
    assert_eq!(la.lost().await.unwrap(), LockLost::Released);

    // Loss while awaiting it: the key deleted under its holder.
    let (lost, deleted) = join2(lb.lost(), a.delete_async(&key)).await;
    assert!(deleted.unwrap());
    assert_eq!(lost.unwrap(), LockLost::KeyChanged);
    assert!(!lb.is_held());

    // KV and transactions.
    let kv = format!("{prefix}/kv");
    assert!(a.put_async(&kv, b"v1").await.unwrap());
    let got = a.get_async(&kv).await.unwrap().expect("written");
    assert_eq!(got.value.as_deref(), Some(&b"v1"[..]));
    let done = a
        .txn_async(vec![
            KvOp::cas(&kv, b"v2", 0, got.modify_index),
            KvOp::get(&kv),
        ])
        .await
        .unwrap();
    assert_eq!(
        done.last().and_then(|p| p.value.as_deref()),
        Some(&b"v2"[..])
    );
    assert_eq!(a.list_async(&kv).await.unwrap().len(), 1);

    // Sessions.
    let s = a
        .create_session_async(&SessionOptions::new().name("aio-scenario"))
        .await
        .unwrap();
    assert!(s.is_valid());
    a.destroy_session_async(&s).await.unwrap();
    assert!(!s.is_valid());

    // A semaphore of one slot between two clients.
    let prefix = format!("{prefix}/sem");
    let (sa, sb) = (
        a.semaphore(&prefix, 1).unwrap(),
        b.semaphore(&prefix, 1).unwrap(),
    );
    assert!(sa.acquire_async(Some(PATIENCE)).await.unwrap());
    assert!(!sb
        .acquire_async(Some(Duration::from_millis(200)))
        .await
        .unwrap());
    let (got, released) = join2(sb.acquire_async(Some(PATIENCE)), sa.release_async()).await;
    assert!(released.unwrap());
    assert!(got.unwrap());
    assert!(sb.release_async().await.unwrap());

    // An election, followed as a stream.
    let ekey = format!("{prefix}/election");
    let (ea, eb) = (a.election(&ekey).unwrap(), b.election(&ekey).unwrap());
    let mut leaders = b.observe_leader_stream(&ekey).unwrap();
    assert_eq!(
        next(&mut leaders).await.unwrap().unwrap(),
        LeaderEvent::NoLeader
    );
    assert!(ea.campaign_async(b"a", Some(PATIENCE)).await.unwrap());
    match next(&mut leaders).await.unwrap().unwrap() {
        LeaderEvent::Leader(l) => assert_eq!(l.value, b"a"),
        other => panic!("expected a's leadership, got {other:?}"),
    }
    ea.proclaim_async(b"a2").await.unwrap();
    let (won, resigned) = join2(eb.campaign_async(b"b", Some(PATIENCE)), ea.resign_async()).await;
    assert!(resigned.unwrap());
    assert!(won.unwrap());
    assert!(eb.resign_async().await.unwrap());

    leaders
}

/// Everything the async API offers, once, on whatever executor runs it.
async fn scenario(f: &Fixture) {
    let (a, b) = (f.client(), f.client());
    let mut leaders = holdings(&a, &b, &unique("aio-scenario")).await;
    // Close: the stream ends with `Closed`.
    let report = b.close_async(PATIENCE).await.unwrap();
    assert!(report.is_complete(), "{report:?}");
    loop {
        match next(&mut leaders).await {
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                assert_eq!(e.kind(), ErrorKind::Closed, "{e}");
                break;
            }
            None => panic!("the stream ended without saying the client closed"),
        }
    }
    assert!(next(&mut leaders).await.is_none());
    assert!(a.close_async(PATIENCE).await.unwrap().is_complete());
}

/// A current-thread tokio runtime with its timers.
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn on_a_multi_thread_tokio_runtime() {
    let f = Fixture::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(scenario(&f));
}

#[test]
fn on_a_current_thread_tokio_runtime() {
    let f = Fixture::start();
    let rt = current_thread();
    rt.block_on(scenario(&f));
}

#[test]
fn on_smol() {
    let f = Fixture::start();
    smol::block_on(scenario(&f));
}

#[test]
fn on_async_std() {
    let f = Fixture::start();
    async_std::task::block_on(scenario(&f));
}

/// Waits (blocking queries) until `key` shows (`present`) or no longer shows a
/// session `sid` holds, as `holds` judges the entry.
fn wait_key(observer: &Client, key: &str, present: bool, holds: &(dyn Fn(&KvPair) -> bool + Sync)) {
    let mut watch = observer.watch_key(key).unwrap();
    loop {
        let ev = watch
            .next(Some(PATIENCE), None)
            .expect("the key changes in time");
        if ev.entries.iter().any(holds) == present {
            return;
        }
    }
}

/// Drops `fut` (an acquire, a semaphore wait or a campaign on a slowed client)
/// the moment a direct observer sees the grant at the server — while the
/// answer is still on its way — then checks the grant is given back.
fn drop_races_the_grant<F: Future<Output = baton::Result<bool>>>(
    f: &Fixture,
    fut: F,
    key: &str,
    holds: impl Fn(&KvPair) -> bool + Send + Sync + 'static,
) {
    let observer = f.client();
    let holds = std::sync::Arc::new(holds);
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel::<()>();
    let watcher = {
        let (o, k, h) = (f.client(), key.to_string(), holds.clone());
        thread::spawn(move || {
            wait_key(&o, &k, true, &*h);
            let _ = seen_tx.send(());
        })
    };
    let rt = current_thread();
    rt.block_on(async {
        tokio::select! {
            r = fut => panic!("the acquire ended before its grant's answer could arrive: {r:?}"),
            _ = seen_rx => {}
        }
    });
    watcher.join().unwrap();
    wait_key(&observer, key, false, &*holds);
}

fn slowed(f: &Fixture) -> Option<(Client, baton_devserver::FaultProxy)> {
    let (builder, proxy) = f.proxied()?;
    Some((builder.build().unwrap(), proxy))
}

#[test]
fn dropping_an_acquire_in_flight_gives_the_lock_back() {
    let f = Fixture::start();
    let Some((c, proxy)) = slowed(&f) else { return };
    let key = unique("aio-drop-lock");
    let sid = c.default_session().unwrap().id().to_string();
    let lock = c.lock(&key).unwrap();
    proxy.delay(DELAY);
    let s = sid.clone();
    drop_races_the_grant(&f, lock.acquire_async(None), &key, move |p| {
        p.session.as_deref() == Some(&s)
    });
    proxy.delay(Duration::ZERO);
    assert!(!lock.is_held());
    // Nothing is left behind: acquirable again at once.
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.release().unwrap());
    // Closed before the proxy it talks through goes.
    assert!(c.close_report(PATIENCE).is_complete());
}

#[test]
fn dropping_a_campaign_in_flight_gives_the_key_back() {
    let f = Fixture::start();
    let Some((c, proxy)) = slowed(&f) else { return };
    let key = unique("aio-drop-election");
    let sid = c.default_session().unwrap().id().to_string();
    let election = c.election(&key).unwrap();
    proxy.delay(DELAY);
    let s = sid.clone();
    drop_races_the_grant(&f, election.campaign_async(b"me", None), &key, move |p| {
        p.session.as_deref() == Some(&s)
    });
    proxy.delay(Duration::ZERO);
    assert!(!election.is_leader());
    assert!(c.close_report(PATIENCE).is_complete());
}

#[test]
fn dropping_a_semaphore_wait_in_flight_gives_the_slot_back() {
    let f = Fixture::start();
    let Some((c, proxy)) = slowed(&f) else { return };
    let prefix = unique("aio-drop-sem");
    let session = c
        .create_session(&SessionOptions::new().name("aio-drop-sem"))
        .unwrap();
    let sid = session.id().to_string();
    let sem = c
        .semaphore_with(
            &prefix,
            1,
            baton::SemaphoreOptions::new().session(session.clone()),
        )
        .unwrap();
    proxy.delay(DELAY);
    let s = sid.clone();
    drop_races_the_grant(
        &f,
        sem.acquire_async(None),
        &format!("{prefix}/.lock"),
        move |p| {
            let doc: serde_json::Value =
                serde_json::from_slice(p.value.as_deref().unwrap_or(b"{}")).unwrap_or_default();
            doc["Holders"].get(&s).is_some()
        },
    );
    proxy.delay(Duration::ZERO);
    assert!(!sem.is_held());
    drop(sem);
    session.destroy().unwrap();
    assert!(c.close_report(PATIENCE).is_complete());
}

#[test]
fn dropping_a_session_create_in_flight_destroys_the_session() {
    let f = Fixture::start();
    let Some((c, proxy)) = slowed(&f) else { return };
    let observer = f.client();
    let name = unique("aio-drop-session").replace('/', "-");
    proxy.delay(DELAY);
    let rt = current_thread();
    let created = rt.block_on(async {
        let create = c.create_session_async(&SessionOptions::new().name(name.clone()));
        let seen = async {
            // Blocking queries on the session list, until the new session shows.
            let mut index = 0;
            loop {
                let o = observer.clone();
                let opts = QueryOptions::blocking(index, Duration::from_secs(5));
                let (list, meta) =
                    tokio::task::spawn_blocking(move || o.sessions().list_with(&opts))
                        .await
                        .unwrap()
                        .unwrap();
                if let Some(s) = list.iter().find(|s| s.name == name) {
                    return s.id.clone();
                }
                index = meta.index;
            }
        };
        tokio::select! {
            r = create => panic!("the create ended before its answer could arrive: {r:?}"),
            id = seen => id,
        }
    });
    proxy.delay(Duration::ZERO);
    // The session nobody took is destroyed (and the fixture checks none is left).
    common::wait_session_gone(&observer, &created);
    assert!(c.close_report(PATIENCE).is_complete());
}

#[test]
fn an_executor_timeout_leaves_nothing_held() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let key = unique("aio-timeout");
    let (la, lb) = (a.lock(&key).unwrap(), b.lock(&key).unwrap());
    assert!(la.acquire(Some(PATIENCE), None).unwrap());
    let rt = current_thread();
    rt.block_on(async {
        let r = tokio::time::timeout(Duration::from_millis(200), lb.acquire_async(None)).await;
        assert!(r.is_err(), "the executor's timer ended the wait");
    });
    // The dropped wait takes nothing: released, the key goes to the next taker.
    assert!(la.release().unwrap());
    let c = f.client();
    assert!(c.lock(&key).unwrap().acquire(Some(PATIENCE), None).unwrap());
    assert!(!lb.is_held());
}

#[test]
fn a_pending_acquire_ends_when_its_session_is_lost() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let key = unique("aio-session-lost");
    let la = a.lock(&key).unwrap();
    assert!(la.acquire(Some(PATIENCE), None).unwrap());
    let session = b
        .create_session(&SessionOptions::new().name("aio-session-lost"))
        .unwrap();
    let lb = b
        .lock_with(&key, LockOptions::new().session(session.clone()))
        .unwrap();
    let rt = current_thread();
    let r = rt.block_on(async {
        let destroy = async {
            // Destroyed while the acquire waits (from a plain thread).
            let s = session.clone();
            tokio::task::spawn_blocking(move || s.destroy())
                .await
                .unwrap()
        };
        join2(lb.acquire_async(Some(PATIENCE)), destroy).await
    });
    r.1.unwrap();
    let e = r.0.expect_err("a lost session ends the wait");
    assert_eq!(e.kind(), ErrorKind::SessionInvalidated, "{e}");
}

#[test]
fn loss_during_an_await_wins_a_select() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let key = unique("aio-select");
    let la = a.lock(&key).unwrap();
    let rt = current_thread();
    rt.block_on(async {
        assert!(la.acquire_async(Some(PATIENCE)).await.unwrap());
        let mut ticks = 0u32;
        let deleter = {
            let b = b.clone();
            let key = key.clone();
            tokio::task::spawn_blocking(move || b.kv().delete(&key).unwrap())
        };
        let lost = la.lost();
        tokio::pin!(lost);
        let why = loop {
            tokio::select! {
                why = &mut lost => break why.unwrap(),
                _ = tokio::time::sleep(Duration::from_millis(5)) => ticks += 1,
            }
        };
        assert_eq!(why, LockLost::KeyChanged);
        assert!(deleter.await.unwrap());
        let _ = ticks;
    });
    assert!(!la.is_held());
}

/// Threads of this process now (Linux).
fn threads_now() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

#[test]
fn ten_thousand_pending_acquires_on_one_thread_complete_when_released() {
    const N: usize = 10_000;
    let f = Fixture::start();
    let (holder, waiter) = (f.client(), f.client());
    let prefix = unique("aio-10k");
    let keys: Vec<String> = (0..N).map(|i| format!("{prefix}/k{i}")).collect();
    // The holder takes every key, 64 to a transaction, on a session without
    // lock-delay, so that releasing them frees them at once.
    let hs = holder
        .create_session(
            &SessionOptions::new()
                .name("aio-10k-holder")
                .lock_delay(Duration::ZERO),
        )
        .unwrap();
    // Before 1.6.2 a txn would round the lock flag: one PUT ?acquire= per key then.
    let by_txn = !f.before("1.6.2");
    set_holder(&holder, &keys, hs.id(), by_txn, true);
    let locks: Vec<baton::Lock> = keys.iter().map(|k| waiter.lock(k).unwrap()).collect();
    let before = threads_now();
    let rt = current_thread();
    let (held, threads_pending, locks) = rt.block_on(async {
        let locks = std::sync::Arc::new(locks);
        let mut tasks = Vec::with_capacity(N);
        for i in 0..N {
            let locks = locks.clone();
            tasks.push(tokio::spawn(async move {
                locks[i].acquire_async(Some(Duration::from_secs(300))).await
            }));
        }
        // Let every task start waiting before any key is released.
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        let threads_pending = threads_now();
        let releaser = {
            let (holder, keys, sid) = (holder.clone(), keys.clone(), hs.id().to_string());
            tokio::task::spawn_blocking(move || set_holder(&holder, &keys, &sid, by_txn, false))
        };
        releaser.await.unwrap();
        let mut held = 0;
        for t in tasks {
            if t.await.unwrap().unwrap() {
                held += 1;
            }
        }
        for l in locks.iter() {
            assert!(l.is_held());
        }
        (held, threads_pending, locks)
    });
    // The client's close releases the ten thousand keys (one request each,
    // before the session goes); the locks' own drops then have nothing to do.
    assert!(waiter.close_report(PATIENCE * 3).is_complete());
    drop(locks);
    assert_eq!(held, N);
    if let (Some(b), Some(p)) = (before, threads_pending) {
        // A thread per pending acquire would be ten thousand more; the step
        // threads, the timer and the key hub's poll are a handful.
        assert!(
            p <= b + baton_steps_bound(),
            "{p} threads with {N} acquires pending (from {b})"
        );
    }
    eprintln!("threads: {before:?} before, {threads_pending:?} with {N} acquires pending");
    hs.destroy().unwrap();
}

/// Locks (`lock`) or unlocks every key for session `sid` outside baton's
/// recipes: 64 to a transaction, or one request each.
fn set_holder(c: &Client, keys: &[String], sid: &str, by_txn: bool, lock: bool) {
    let flags = baton::LOCK_FLAG_VALUE;
    if by_txn {
        for chunk in keys.chunks(64) {
            let ops: Vec<KvOp> = chunk
                .iter()
                .map(|k| {
                    if lock {
                        KvOp::lock(k, b"", flags, sid)
                    } else {
                        KvOp::unlock(k, b"", flags, sid)
                    }
                })
                .collect();
            c.txn(&ops).unwrap();
        }
        return;
    }
    for k in keys {
        let done = if lock {
            c.kv().acquire(k, b"", sid, flags).unwrap()
        } else {
            c.kv().release(k, b"", sid, flags).unwrap()
        };
        assert!(done, "{k}");
    }
}

/// The most threads the async API may add: its step threads and timer, the
/// key hub's poll, the renewer and the session monitor, with room to spare.
fn baton_steps_bound() -> usize {
    32
}

#[test]
fn a_semaphore_wait_dropped_by_a_timer_removes_its_contender_entry() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let prefix = unique("aio-sem-timeout");
    let sa = a.semaphore(&prefix, 1).unwrap();
    assert!(sa.acquire(Some(PATIENCE), None).unwrap());
    let session = b
        .create_session(&SessionOptions::new().name("aio-sem-timeout"))
        .unwrap();
    let sb = b
        .semaphore_with(
            &prefix,
            1,
            baton::SemaphoreOptions::new().session(session.clone()),
        )
        .unwrap();
    let contender = format!("{prefix}/{}", session.id());
    let rt = current_thread();
    rt.block_on(async {
        // Waits (its entry kept between tries) until the executor's timer drops it.
        let r = tokio::time::timeout(Duration::from_millis(300), sb.acquire_async(None)).await;
        assert!(r.is_err());
    });
    // The entry goes with the wait; `sa`'s holding is untouched.
    let sid = session.id().to_string();
    wait_key(&a, &contender, false, &move |p| {
        p.session.as_deref() == Some(&sid)
    });
    assert!(a.kv().get(&contender).unwrap().is_none());
    assert!(sa.is_held());
    assert!(sa.release().unwrap());
    drop(sb);
    session.destroy().unwrap();
}

/// Polls `fut` at most `polls` times, then drops it: `None` unless it had
/// finished. Counts the polls it made.
struct DropAfter<F: Future> {
    fut: std::pin::Pin<Box<F>>,
    left: usize,
    polled: usize,
}

impl<F: Future> Future for DropAfter<F> {
    type Output = (Option<F::Output>, usize);

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Self::Output> {
        self.left -= 1;
        self.polled += 1;
        match self.fut.as_mut().poll(cx) {
            Poll::Ready(v) => Poll::Ready((Some(v), self.polled)),
            Poll::Pending if self.left == 0 => Poll::Ready((None, self.polled)),
            Poll::Pending => Poll::Pending,
        }
    }
}

fn drop_after<F: Future>(fut: F, polls: usize) -> DropAfter<F> {
    DropAfter {
        fut: Box::pin(fut),
        left: polls,
        polled: 0,
    }
}

/// Waits (blocking queries) until no key under `prefix` is held: no entry
/// carries a session and no semaphore `.lock` lists a holder.
fn wait_nothing_held(c: &Client, prefix: &str) {
    let mut watch = c.watch_prefix(prefix).unwrap();
    let mut last = Vec::new();
    loop {
        let ev = match watch.next(Some(PATIENCE), None) {
            Ok(ev) => ev,
            Err(e) => panic!("still held under {prefix} after {PATIENCE:?} ({e}): {last:?}"),
        };
        last = ev
            .entries
            .iter()
            .filter(|p| {
                let listed = p.key.ends_with("/.lock") && {
                    let doc: serde_json::Value =
                        serde_json::from_slice(p.value.as_deref().unwrap_or(b"{}"))
                            .unwrap_or_default();
                    doc["Holders"].as_object().is_some_and(|h| !h.is_empty())
                };
                p.session.is_some() || listed
            })
            .map(|p| p.key.clone())
            .collect();
        if last.is_empty() {
            return;
        }
    }
}

#[test]
fn dropping_the_futures_at_every_await_point_leaves_nothing_held() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let rt = current_thread();
    // How many times a whole run is polled (each Pending is an await point).
    let whole = unique("aio-drop-every");
    let (done, polls) = rt.block_on(drop_after(holdings(&a, &b, &whole), usize::MAX));
    assert!(done.is_some());
    drop(done);
    wait_nothing_held(&a, &whole);
    for k in 1..polls {
        let prefix = format!("{}/{k}", unique("aio-drop-at"));
        // The run's locks, semaphores and elections go with it: dropped held,
        // they release; dropped waiting, they take nothing.
        let (_, _) = rt.block_on(drop_after(holdings(&a, &b, &prefix), k));
        wait_nothing_held(&a, &prefix);
    }
    eprintln!("dropped at each of {} await points", polls - 1);
    // And no session is left behind (the fixture checks the server's list).
    assert!(a.close_report(PATIENCE).is_complete());
    assert!(b.close_report(PATIENCE).is_complete());
}

/// A zero timeout tries once, as in the blocking API: a free lock, semaphore slot or
/// election is taken, not refused because the deadline (now) passed before the try. The
/// same for a timeout that has already run out by the first poll.
#[test]
fn a_zero_or_spent_timeout_still_tries_once() {
    let f = Fixture::start();
    let c = f.client();
    let rt = current_thread();
    rt.block_on(async {
        let lock = c.lock(&unique("aio-try-once")).unwrap();
        assert!(lock.try_acquire_async().await.unwrap(), "a free lock");
        assert!(lock.release_async().await.unwrap());
        // A timeout spent before the first poll ends as the blocking call's does.
        let blocking = lock.acquire(Some(Duration::from_nanos(1)), None).unwrap();
        if blocking {
            assert!(lock.release().unwrap());
        }
        let spent = lock.acquire_async(Some(Duration::from_nanos(1)));
        thread::sleep(Duration::from_millis(2));
        assert_eq!(spent.await.unwrap(), blocking);
        if blocking {
            assert!(lock.release_async().await.unwrap());
        }
        let sem = c.semaphore(&unique("aio-try-once-sem"), 1).unwrap();
        assert!(sem.try_acquire_async().await.unwrap(), "a free slot");
        assert!(sem.release_async().await.unwrap());
        let e = c.election(&unique("aio-try-once-e")).unwrap();
        assert!(e.campaign_async(b"me", Some(Duration::ZERO)).await.unwrap());
        assert!(e.resign_async().await.unwrap());
    });
    assert!(c.close_report(PATIENCE).is_complete());
}

/// Many `Lock` objects of one process on a few keys, from two clients, acquiring and
/// releasing at once: a try refused because a sibling held the process's local claim is
/// tried again when the sibling gives the claim up, even when that changes nothing in
/// Consul (the sibling's own try failed). Without that, every waiter could wait for a key
/// change that never comes, the key free. (Seen from Python's asyncio: 200 acquires on 20
/// keys hung.)
#[test]
fn siblings_on_one_key_never_wait_for_a_change_that_does_not_come() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let keys: Vec<String> = (0..5)
        .map(|i| unique(&format!("aio-siblings-{i}")))
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let done = rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..100 {
            let client = if i % 2 == 0 { a.clone() } else { b.clone() };
            let key = keys[i % keys.len()].clone();
            tasks.push(tokio::spawn(async move {
                let lock = client.lock(&key).unwrap();
                assert!(lock.acquire_async(Some(PATIENCE)).await.unwrap(), "{key}");
                tokio::time::sleep(Duration::from_millis(2)).await;
                assert!(lock.release_async().await.unwrap());
            }));
        }
        let mut done = 0;
        for t in tasks {
            tokio::time::timeout(PATIENCE * 2, t)
                .await
                .expect("an acquire never ended")
                .unwrap();
            done += 1;
        }
        done
    });
    assert_eq!(done, 100);
    assert!(a.close_report(PATIENCE).is_complete());
    assert!(b.close_report(PATIENCE).is_complete());
}
