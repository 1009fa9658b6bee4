//! The recipes beyond Consul's three as futures (`baton::aio`): a read-write
//! lock's sides, barriers, double barriers, counters, groups and leader tasks,
//! on tokio, with the blocking calls' outcomes and clean-up, and waits that
//! hold no thread.

mod common;

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use baton::aio::{AsyncBarrier, AsyncDoubleBarrier, AsyncHold};
use baton::{CancelToken, Client, ErrorKind};
use common::{unique, wait_for_entries, Fixture};

const PATIENCE: Duration = Duration::from_secs(20);

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Polls `f` once: its output if it is ready at once.
async fn poll_once<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    std::future::poll_fn(|cx| match std::pin::Pin::new(&mut *f).poll(cx) {
        Poll::Ready(v) => Poll::Ready(Some(v)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

fn keys_under(c: &Client, prefix: &str) -> Vec<String> {
    c.kv()
        .list(prefix)
        .unwrap()
        .into_iter()
        .map(|p| p.key)
        .collect()
}

#[test]
fn a_writer_waits_for_a_reader_then_holds_and_a_timed_out_wait_leaves_no_contender() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let prefix = unique("aio-rw");
    rt().block_on(async {
        let reader = a.read_lock(&prefix).unwrap();
        assert!(reader.acquire_async(Some(PATIENCE)).await.unwrap());
        let writer = b.write_lock(&prefix).unwrap();
        // Timed out behind the reader: it resolves with nothing of the writer left
        // in the queue (as the blocking acquire returns).
        assert!(!writer
            .acquire_async(Some(Duration::from_millis(300)))
            .await
            .unwrap());
        assert_eq!(keys_under(&a, &format!("{prefix}/")).len(), 1);
        // A waiting writer keeps one contender key, and holds once the reader leaves.
        let mut wait = pin!(writer.acquire_async(Some(PATIENCE)));
        assert!(poll_once(&mut wait).await.is_none());
        wait_for_entries(&a, &format!("{prefix}/"), PATIENCE, "two contenders", |e| {
            e.len() == 2
        });
        assert!(!writer.is_held());
        assert!(reader.release_async().await.unwrap());
        assert!(wait.await.unwrap());
        assert!(writer.is_held());
        let seq = writer.sequencer().unwrap();
        assert!(b.check_sequencer(&seq).unwrap());
        // A reader now waits behind the writer; dropping its future removes its key.
        let late = a.read_lock(&prefix).unwrap();
        {
            let mut wait = pin!(late.acquire_async(None));
            assert!(poll_once(&mut wait).await.is_none());
            wait_for_entries(&a, &format!("{prefix}/"), PATIENCE, "reader queued", |e| {
                e.len() == 2
            });
        }
        wait_for_entries(&a, &format!("{prefix}/"), PATIENCE, "reader gone", |e| {
            e.len() == 1
        });
        assert!(writer.release_async().await.unwrap());
        assert!(keys_under(&a, &format!("{prefix}/")).is_empty());
        // A holding lost under it: `lost()` resolves to why.
        assert!(late.acquire_async(Some(PATIENCE)).await.unwrap());
        let sid = late.sequencer().unwrap().session;
        b.sessions().destroy(&sid).unwrap();
        let why = late.lost().await.unwrap();
        assert!(matches!(why, baton::LockLost::SessionLost(_)), "{why}");
        assert!(!late.is_held());
    });
}

#[test]
fn a_barrier_wait_ends_when_released_times_out_while_held_and_is_cancelled() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let key = unique("aio-barrier");
    rt().block_on(async {
        let gate = a.barrier(&key).unwrap();
        let waiter = b.barrier(&key).unwrap();
        let never = CancelToken::new();
        // Down: at once.
        assert!(waiter
            .wait_async(Some(Duration::ZERO), &never)
            .await
            .unwrap());
        assert!(gate.hold_async().await.unwrap());
        assert!(waiter.is_held_async().await.unwrap());
        assert!(!waiter
            .wait_async(Some(Duration::from_millis(300)), &never)
            .await
            .unwrap());
        // Cancelled while it waits (its first look done, the future pending).
        let cancel = CancelToken::new();
        let mut wait = waiter.wait_async(None, &cancel);
        assert!(poll_once(&mut wait).await.is_none());
        cancel.cancel();
        let err = wait.await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
        let mut wait = waiter.wait_async(Some(PATIENCE), &never);
        assert!(poll_once(&mut wait).await.is_none());
        assert!(gate.release_async().await.unwrap());
        assert!(wait.await.unwrap());
    });
}

#[test]
fn two_participants_enter_and_leave_a_double_barrier_and_a_lone_one_leaves_no_key() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let prefix = unique("aio-double");
    rt().block_on(async {
        let never = CancelToken::new();
        let pa = a.double_barrier(&prefix, 2).unwrap();
        let pb = b.double_barrier(&prefix, 2).unwrap();
        // Alone: times out, and its participant key is withdrawn.
        assert!(!pa
            .enter_async(Some(Duration::from_millis(300)), &never)
            .await
            .unwrap());
        assert!(!pa.is_entered());
        assert!(keys_under(&a, &format!("{prefix}/")).is_empty());
        let (ea, eb) = tokio::join!(
            pa.enter_async(Some(PATIENCE), &never),
            pb.enter_async(Some(PATIENCE), &never)
        );
        assert!(ea.unwrap() && eb.unwrap());
        assert!(pa.is_entered() && pb.is_entered());
        let err = pa.enter_async(Some(PATIENCE), &never).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
        let (la, lb) = tokio::join!(
            pa.leave_async(Some(PATIENCE), &never),
            pb.leave_async(Some(PATIENCE), &never)
        );
        assert!(la.unwrap() && lb.unwrap());
        wait_for_entries(&a, &format!("{prefix}/"), PATIENCE, "all gone", |e| {
            e.is_empty()
        });
    });
}

#[test]
fn counter_calls_and_a_shared_watch_as_futures() {
    use baton::aio::{counter_next_shared, AsyncCounter};
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let key = unique("aio-counter");
    rt().block_on(async {
        let (ca, cb) = (a.counter(&key).unwrap(), b.counter(&key).unwrap());
        let never = CancelToken::new();
        let watch = cb.watch_shared().unwrap();
        // The first value is the current one (an absent key is 0).
        assert_eq!(
            counter_next_shared(&watch, Some(PATIENCE), &never)
                .await
                .unwrap(),
            Some(0)
        );
        // Nothing changed: the timeout says so.
        assert_eq!(
            counter_next_shared(&watch, Some(Duration::from_millis(200)), &never)
                .await
                .unwrap(),
            None
        );
        // Twenty adds from each client at once: none lost.
        let adds_a: Vec<_> = (0..20).map(|_| ca.add_async(1)).collect();
        let adds_b: Vec<_> = (0..20).map(|_| cb.add_async(2)).collect();
        for c in adds_a.into_iter().chain(adds_b) {
            c.await.unwrap();
        }
        assert_eq!(ca.get_async().await.unwrap(), 60);
        assert!(!cb.compare_and_set_async(59, 0).await.unwrap());
        assert!(cb.compare_and_set_async(60, 100).await.unwrap());
        // The watch sees the latest value (values in between may be skipped).
        let mut last = None;
        while last != Some(100) {
            last = counter_next_shared(&watch, Some(PATIENCE), &never)
                .await
                .unwrap();
            assert!(last.is_some(), "no change seen");
        }
        // A pending next ends with the value set.
        let mut pending = counter_next_shared(&watch, Some(PATIENCE), &never);
        assert!(poll_once(&mut pending).await.is_none());
        ca.set_async(7).await.unwrap();
        assert_eq!(pending.await.unwrap(), Some(7));
        // Closed: taken out of the shared slot.
        let mut pending = counter_next_shared(&watch, Some(PATIENCE), &never);
        assert!(poll_once(&mut pending).await.is_none());
        drop(watch.lock().unwrap().take());
        ca.set_async(8).await.unwrap();
        let err = pending.await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    });
}

#[test]
fn group_join_watch_and_loss_as_futures() {
    use baton::aio::{members_next_shared, AsyncGroup, AsyncMember};
    use baton::{MemberLost, MembershipEvent};
    let f = Fixture::start();
    let (a, b, c) = (f.client(), f.client(), f.client());
    let prefix = unique("aio-group");
    rt().block_on(async {
        let never = CancelToken::new();
        let (ga, gb) = (a.group(&prefix).unwrap(), b.group(&prefix).unwrap());
        let watch = ga.watch_shared().unwrap();
        let first = members_next_shared(&watch, Some(PATIENCE), &never)
            .await
            .unwrap();
        assert_eq!(first, Some(MembershipEvent::Snapshot(vec![])));
        let mb = gb.join_async("b", b"10.0.0.2").await.unwrap();
        match members_next_shared(&watch, Some(PATIENCE), &never)
            .await
            .unwrap()
        {
            Some(MembershipEvent::Joined(m)) => assert_eq!(m.id, "b"),
            other => panic!("{other:?}"),
        }
        let listed = ga.members_async().await.unwrap();
        assert_eq!(
            listed.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
            ["b"]
        );
        mb.update_value_async(b"10.0.0.3").await.unwrap();
        match members_next_shared(&watch, Some(PATIENCE), &never)
            .await
            .unwrap()
        {
            Some(MembershipEvent::Updated(m)) => assert_eq!(m.value, b"10.0.0.3"),
            other => panic!("{other:?}"),
        }
        // Still a member: the wait for its loss times out.
        let err = mb
            .lost_within(Some(Duration::from_millis(200)), &never)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
        // Its session destroyed from elsewhere: the pending wait learns why.
        let mut lost = mb.lost_within(Some(PATIENCE), &never);
        assert!(poll_once(&mut lost).await.is_none());
        c.sessions().destroy(mb.session().id()).unwrap();
        assert!(matches!(lost.await.unwrap(), MemberLost::SessionLost(_)));
        match members_next_shared(&watch, Some(PATIENCE), &never)
            .await
            .unwrap()
        {
            Some(MembershipEvent::Left(id)) => assert_eq!(id, "b"),
            other => panic!("{other:?}"),
        }
        // A member that leaves on purpose.
        let ma = ga.join_async("a", b"").await.unwrap();
        assert!(ma.leave_async().await.unwrap());
        assert_eq!(ma.lost(), Some(MemberLost::Left));
    });
}

/// The ordering rule, for `run_async`: the leader's session destroyed under it, its
/// task's token fires before the next leader's task starts (one monotonic clock); the
/// one-term run then ends, and the other candidate's run ends at its stop, with
/// nothing held.
#[test]
fn an_async_leader_task_s_loss_fires_its_token_before_the_next_leader_starts() {
    use baton::aio::AsyncLeaderTask;
    use baton::SessionOptions;
    use std::sync::{mpsc, Arc};
    use std::time::Instant;
    let f = Fixture::start();
    let with_delay = || {
        f.builder()
            .default_session(
                SessionOptions::default_for_client().lock_delay(Duration::from_secs(1)),
            )
            .build()
            .unwrap()
    };
    let (ca, cb) = (with_delay(), with_delay());
    let key = unique("aio-leader-task");
    let (tx, rx) = mpsc::channel::<(&'static str, Instant)>();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (a_stopped_tx, a_stopped_rx) = mpsc::channel::<String>();
    let (b_sees_tx, b_sees_rx) = mpsc::channel::<Option<Vec<u8>>>();
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let a = Arc::new(
        ca.leader_task(&key, "a")
            .unwrap()
            .requeue(false)
            .on_started_leading({
                let started = Arc::clone(&started);
                move || {
                    started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            })
            .on_stopped_leading(move |why| a_stopped_tx.send(why.to_string()).unwrap()),
    );
    let b = Arc::new(cb.leader_task(&key, "b").unwrap().on_new_leader(move |l| {
        let _ = b_sees_tx.send(l.map(|l| l.value));
    }));
    let (stop_a, stop_b) = (CancelToken::new(), CancelToken::new());
    let a_tx = tx.clone();
    let run_a = rt.spawn({
        let (a, stop) = (Arc::clone(&a), stop_a.clone());
        async move {
            a.run_async(
                move |token| {
                    let tx = a_tx.clone();
                    async move {
                        tx.send(("a started", Instant::now())).unwrap();
                        token.cancelled().await;
                        tx.send(("a token fired", Instant::now())).unwrap();
                        Ok(())
                    }
                },
                &stop,
            )
            .await
        }
    });
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap().0, "a started");
    let b_tx = tx.clone();
    let run_b = rt.spawn({
        let (b, stop) = (Arc::clone(&b), stop_b.clone());
        async move {
            b.run_async(
                move |token| {
                    let tx = b_tx.clone();
                    async move {
                        tx.send(("b started", Instant::now())).unwrap();
                        token.cancelled().await;
                        Ok(())
                    }
                },
                &stop,
            )
            .await
        }
    });
    // B's run is under way: its feed reports A as the leader.
    assert_eq!(
        b_sees_rx.recv_timeout(PATIENCE).unwrap(),
        Some(b"a".to_vec())
    );
    assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 1);
    let sid_a = ca.default_session().unwrap().id().to_string();
    f.client().sessions().destroy(&sid_a).unwrap();
    let (mut a_fired, mut b_started) = (None, None);
    while a_fired.is_none() || b_started.is_none() {
        let (what, at) = rx.recv_timeout(PATIENCE).unwrap();
        match what {
            "a token fired" => a_fired = Some(at),
            "b started" => b_started = Some(at),
            other => panic!("unexpected {other}"),
        }
    }
    // B's run is under way: a second run of it is refused.
    let err = b.terms(&CancelToken::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(
        a_fired.unwrap() < b_started.unwrap(),
        "a's token fired after b's task started"
    );
    let why = a_stopped_rx.recv_timeout(PATIENCE).unwrap();
    assert!(why.starts_with("lost: session_lost"), "{why}");
    rt.block_on(async {
        run_a.await.unwrap().unwrap();
        assert!(b.is_leader());
        stop_b.cancel();
        run_b.await.unwrap().unwrap();
    });
    assert!(!a.is_leader() && !b.is_leader());
    assert!(common::holder(&f.client(), &key).is_none());
}

/// Every request inside a wait with a deadline is bounded by it (DESIGN §2): with each
/// chunk to and from Consul delayed 2 s, a barrier wait of 300 ms ends with `false` well
/// before one delayed answer could arrive (8 s without the bound).
#[test]
fn a_wait_s_requests_are_bounded_by_its_deadline() {
    let f = Fixture::start();
    let Some((builder, proxy)) = f.proxied() else {
        return;
    };
    let slow = builder.build().unwrap();
    let key = unique("aio-bounded");
    rt().block_on(async {
        let never = CancelToken::new();
        assert!(f.client().barrier(&key).unwrap().hold().unwrap());
        proxy.delay(Duration::from_secs(2));
        let short = Some(Duration::from_millis(300));
        let started = std::time::Instant::now();
        let gate = slow.barrier(&key).unwrap();
        assert!(!gate.wait_async(short, &never).await.unwrap());
        let waited = started.elapsed();
        assert!(
            waited < Duration::from_millis(1500),
            "barrier wait took {waited:?}"
        );
        proxy.heal();
    });
    assert!(slow.close(PATIENCE));
    drop(proxy);
    assert!(f.client().barrier(&key).unwrap().release().unwrap());
}
