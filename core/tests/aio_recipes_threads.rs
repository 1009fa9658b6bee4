//! Waits of the new recipes as futures hold no thread each: a thousand barrier waits
//! and two hundred read-lock acquires queued behind a writer cost the client's few
//! threads. Alone in its binary, so that no other test's threads are counted.

mod common;

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use baton::aio::{AsyncBarrier, AsyncHold};
use baton::CancelToken;
use common::{unique, wait_for_entries, Fixture};

const PATIENCE: Duration = Duration::from_secs(20);

/// Threads of this process (Linux).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("procfs")
        .count()
}

/// Polls `f` once: its output if it is ready at once.
async fn poll_once<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    std::future::poll_fn(|cx| match std::pin::Pin::new(&mut *f).poll(cx) {
        Poll::Ready(v) => Poll::Ready(Some(v)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

#[test]
fn a_thousand_barrier_waits_and_rwlock_acquires_hold_no_thread_each() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let key = unique("aio-many-barrier");
    let prefix = unique("aio-many-rw");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
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
        // At most the step threads both clients may still start (8 each).
        assert!(
            during <= before + 16,
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
