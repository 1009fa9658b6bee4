//! Cost that does not grow with the work (issue 44, the key hub's part): a client holding
//! hundreds of locks named without a common first segment (`flat-<n>`, as many services
//! name them) keeps a bounded number of key-hub threads and long polls. Before, each
//! distinct first segment cost a thread and a connection, and past ~195 of them the agent's
//! `limits.http_max_conns_per_client` (200; the dev server enforces it too) answered 429 to
//! everything the client sent, its releases included.

mod common;

use std::time::Duration;

use common::Fixture;

/// Generous bound for "eventually"; a failure bound, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(20);

/// More locks than the agent's 200 connections per client.
const LOCKS: usize = 300;

/// The most key-hub threads a client may run (`keyhub::MAX_GROUPS`).
const MAX_HUB_THREADS: usize = 8;

/// Threads of this process whose name starts with `prefix` (Linux: /proc/self/task).
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|name| name.trim_end().starts_with(prefix))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn hundreds_of_flat_named_locks_keep_the_hub_bounded_and_every_loss_seen() {
    let f = Fixture::start();
    let client = f.client();
    let other = f.client();
    let run = format!("flat{}x{}", std::process::id(), rand_suffix());
    let keys: Vec<String> = (0..LOCKS).map(|i| format!("{run}-{i}")).collect();
    let locks: Vec<_> = keys.iter().map(|k| client.lock(k).unwrap()).collect();
    for (k, l) in keys.iter().zip(&locks) {
        assert!(l.acquire(Some(PATIENCE), None).unwrap(), "{k} acquired");
    }
    if cfg!(target_os = "linux") {
        let hub = threads_named("baton-keys");
        assert!(
            hub <= MAX_HUB_THREADS,
            "{hub} key-hub threads for {LOCKS} flat-named locks (at most {MAX_HUB_THREADS})"
        );
    }
    // Every held key is still watched: a key deleted by another client ends its holding
    // (only the hub's polls can tell), wherever it sits among the groups.
    let gone: Vec<usize> = (0..LOCKS).step_by(37).collect();
    for &i in &gone {
        assert!(other.kv().delete(&keys[i]).unwrap());
    }
    for &i in &gone {
        locks[i]
            .wait_lost(Some(PATIENCE), None)
            .unwrap_or_else(|e| panic!("{}: the deletion was not seen: {e}", keys[i]));
    }
    // The others are still held, and every release is answered (no 429).
    for (i, (k, l)) in keys.iter().zip(&locks).enumerate() {
        if gone.contains(&i) {
            continue;
        }
        assert!(l.is_held(), "{k} lost while held");
        assert!(l.release().unwrap(), "{k} released");
    }
    drop(locks);
    assert!(client.close(Duration::from_secs(10)), "close finished");
    for k in &keys {
        other.kv().delete(k).unwrap();
    }
    assert!(other.close(Duration::from_secs(10)));
    if cfg!(target_os = "linux") {
        assert_eq!(threads_named("baton-keys"), 0, "hub threads outlived close");
    }
}

/// A few characters that differ between runs against one shared server.
fn rand_suffix() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{:x}", t.as_nanos() & 0xffff_ffff)
}
