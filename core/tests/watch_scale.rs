//! Watches cost no thread and no connection of their own (issue 44): a client watching
//! hundreds of prefixes named without a common first segment, and waiting on a hundred
//! semaphores so named, keeps the key hub's one thread and few long polls. Before, every
//! watched prefix cost a `baton-watch` thread and a long-poll connection, so such a client
//! neared the agent's `limits.http_max_conns_per_client` (200; the dev server enforces it
//! too), after which every request it sent was answered 429. Alone in its binary, so that
//! no other test's threads are counted.

mod common;

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use baton::aio::AsyncHold;
use baton::WatchEvent;
use common::Fixture;

/// Generous bound for "eventually"; a failure bound, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(30);

/// More watched prefixes than the agent's 200 connections per client.
const PREFIXES: usize = 300;
/// Semaphores, each held elsewhere, that one client waits on at once.
const SEMAPHORES: usize = 100;

/// Threads of this process whose name starts with `baton-`, the dev server's aside (Linux).
fn baton_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("procfs")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|n| n.starts_with("baton-") && !n.starts_with("baton-devserver"))
        .count()
}

fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("procfs")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

/// Polls `f` once: its output if it is ready at once.
async fn poll_once<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    std::future::poll_fn(|cx| match std::pin::Pin::new(&mut *f).poll(cx) {
        Poll::Ready(v) => Poll::Ready(Some(v)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

fn keys_of(ev: &WatchEvent) -> Vec<&str> {
    ev.entries.iter().map(|e| e.key.as_str()).collect()
}

#[test]
fn hundreds_of_flat_named_watches_and_semaphore_waits_share_the_key_hub() {
    let f = Fixture::start();
    let (client, other) = (f.client(), f.client());
    let run = common::unique("wflat").replace('/', "-");
    let before = baton_threads();

    // Hundreds of watched prefixes, no two with a common first segment.
    let prefixes: Vec<String> = (0..PREFIXES).map(|i| format!("{run}-{i}/")).collect();
    let mut watches: Vec<_> = prefixes
        .iter()
        .map(|p| client.watch_prefix(p).unwrap())
        .collect();
    for (p, w) in prefixes.iter().zip(&mut watches) {
        let ev = w.next(Some(PATIENCE), None).unwrap();
        assert!(ev.entries.is_empty(), "{p}: {:?}", keys_of(&ev));
    }
    let watching = baton_threads();
    assert!(
        watching <= before + 2,
        "{PREFIXES} watches: {before} baton threads before, {watching} during"
    );

    // A write under some of them is seen by its watch, and by no other.
    let changed: Vec<usize> = (0..PREFIXES).step_by(37).collect();
    for &i in &changed {
        other.kv().put(&format!("{}k", prefixes[i]), b"v").unwrap();
    }
    for &i in &changed {
        let ev = watches[i].next(Some(PATIENCE), None).unwrap();
        assert_eq!(keys_of(&ev), [format!("{}k", prefixes[i]).as_str()]);
    }
    for (i, w) in watches.iter_mut().enumerate() {
        if !changed.contains(&i) {
            let quiet = w.next(Some(Duration::ZERO), None);
            assert!(
                quiet.is_err(),
                "{}: woken for nothing: {quiet:?}",
                prefixes[i]
            );
        }
    }

    // A hundred semaphores so named, each held elsewhere, waited on as futures.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let names: Vec<String> = (0..SEMAPHORES).map(|i| format!("{run}-sem{i}")).collect();
        let held: Vec<_> = names
            .iter()
            .map(|n| other.semaphore(n, 1).unwrap())
            .collect();
        for s in &held {
            assert!(s.acquire_async(Some(PATIENCE)).await.unwrap());
        }
        let mine: Vec<_> = names
            .iter()
            .map(|n| client.semaphore(n, 1).unwrap())
            .collect();
        let mut waits: Vec<_> = mine
            .iter()
            .map(|s| Box::pin(s.acquire_async(Some(PATIENCE))))
            .collect();
        for w in &mut waits {
            assert!(
                poll_once(w).await.is_none(),
                "a held semaphore was acquired"
            );
        }
        // Every wait queued its contender entry (its first step ran).
        for n in &names {
            common::wait_for_entries(&other, &format!("{n}/"), PATIENCE, "queued", |e| {
                e.len() >= 3
            });
        }
        let during = baton_threads();
        // Per client, whatever the number of watches and waits: the key hub, the renewer
        // and its lease timer, the session monitor, the futures' timer and reactor, and the
        // step threads their requests run on (at most 8). Two clients: 28 at most.
        assert!(
            during <= before + 28,
            "{before} baton threads before, {during} with {PREFIXES} watches and \
             {SEMAPHORES} semaphore waits: {:?}",
            thread_names()
        );
        // The client is still answered (it holds no more connections than its budget).
        client.kv().put(&format!("{run}-probe"), b"ok").unwrap();
        for s in &held {
            assert!(s.release_async().await.unwrap());
        }
        for w in waits {
            assert!(
                w.await.unwrap(),
                "a wait did not acquire once the holder let go"
            );
        }
        for s in &mine {
            assert!(s.release_async().await.unwrap());
        }
    });
    drop(watches);
    assert!(client.close(Duration::from_secs(10)), "close finished");
    assert!(other.close(Duration::from_secs(10)));
    assert_eq!(baton_threads(), before, "baton threads outlived close");
}
