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

/// The names of this process's threads (Linux).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("procfs")
        .count()
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
        // Timed out behind the reader: nothing of the writer stays in the queue.
        assert!(!writer
            .acquire_async(Some(Duration::from_millis(300)))
            .await
            .unwrap());
        wait_for_entries(&a, &format!("{prefix}/"), PATIENCE, "one contender", |e| {
            e.len() == 1
        });
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
        let cancel = CancelToken::new();
        let c2 = cancel.clone();
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            c2.cancel();
        });
        let err = waiter.wait_async(None, &cancel).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
        stopper.join().unwrap();
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
fn a_thousand_barrier_waits_and_rwlock_acquires_hold_no_thread_each() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let key = unique("aio-many-barrier");
    let prefix = unique("aio-many-rw");
    rt().block_on(async {
        let never = CancelToken::new();
        let gate = a.barrier(&key).unwrap();
        assert!(gate.hold_async().await.unwrap());
        let writer = a.write_lock(&prefix).unwrap();
        assert!(writer.acquire_async(Some(PATIENCE)).await.unwrap());
        // Warm the client's threads up with one of each.
        let waiter = b.barrier(&key).unwrap();
        let readers: Vec<_> = (0..200).map(|_| b.read_lock(&prefix).unwrap()).collect();
        let mut first = waiter.wait_async(Some(PATIENCE), &never);
        assert!(poll_once(&mut first).await.is_none());
        let before = threads();
        let mut waits: Vec<_> = (0..1000)
            .map(|_| waiter.wait_async(Some(PATIENCE), &never))
            .collect();
        for w in &mut waits {
            assert!(poll_once(w).await.is_none());
        }
        let mut acquires: Vec<_> = readers
            .iter()
            .map(|r| Box::pin(r.acquire_async(Some(PATIENCE))))
            .collect();
        for w in &mut acquires {
            assert!(poll_once(w).await.is_none());
        }
        // Let their first steps run (each on a step thread, at most 8).
        wait_for_entries(&a, &format!("{prefix}/"), PATIENCE, "readers queued", |e| {
            e.len() == 201
        });
        let during = threads();
        assert!(
            during <= before + 10,
            "threads {before} before 1,200 waits, {during} during"
        );
        assert!(gate.release_async().await.unwrap());
        for w in waits {
            assert!(w.await.unwrap());
        }
        assert!(first.await.unwrap());
        assert!(writer.release_async().await.unwrap());
        for w in acquires {
            assert!(w.await.unwrap());
        }
        assert!(readers.iter().all(|r| r.is_held()));
    });
}
