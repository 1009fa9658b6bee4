//! Semaphores against the dev server: limit, Go interop, pruning, herd, cleanup.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton::{
    Behavior, Client, ErrorKind, SemaphoreLost, SemaphoreOptions, SessionOptions, WriteOptions,
    SEMAPHORE_FLAG_VALUE,
};
use common::{unique, Fixture};

const PATIENCE: Duration = Duration::from_secs(20);

#[test]
fn at_most_limit_holders_among_eight_contenders() {
    let f = Fixture::start();
    let prefix = unique("sem-limit");
    let holders = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let c = f.client();
            let (prefix, holders, max) = (prefix.clone(), holders.clone(), max.clone());
            std::thread::spawn(move || {
                let s = c.semaphore(&prefix, 3).unwrap();
                for _ in 0..200 {
                    assert!(s.acquire(Some(Duration::from_secs(60)), None).unwrap());
                    let n = holders.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_micros(200));
                    holders.fetch_sub(1, Ordering::SeqCst);
                    assert!(s.release().unwrap());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("contender");
    }
    let max = max.load(Ordering::SeqCst);
    println!("most holders at once: {max}");
    assert!(max <= 3, "more than 3 holders at once: {max}");
    assert!(max > 1, "the semaphore never let two in at once");
}

/// Go's `api.Semaphore` replayed request by request (consul-semantics §8), try-once.
struct GoSem {
    client: Client,
    prefix: String,
    limit: u64,
    session: String,
}

impl GoSem {
    fn new(client: Client, prefix: &str, limit: u64) -> GoSem {
        let session = client
            .sessions()
            .create(
                &SessionOptions::new()
                    .name("Consul API Semaphore")
                    .ttl(Duration::from_secs(15))
                    .behavior(Behavior::Delete),
            )
            .unwrap();
        GoSem {
            client,
            prefix: prefix.to_string(),
            limit,
            session,
        }
    }

    fn lock_key(&self) -> String {
        format!("{}/.lock", self.prefix)
    }

    /// Ok(true) held, Ok(false) would wait, Err(text) for Go's errors.
    fn try_acquire(&self) -> Result<bool, String> {
        let kv = self.client.kv();
        let contender = format!("{}/{}", self.prefix, self.session);
        let made = kv
            .put_with(
                &contender,
                b"go",
                &WriteOptions {
                    flags: SEMAPHORE_FLAG_VALUE,
                    acquire: Some(self.session.clone()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(made);
        let pairs = kv.list(&self.prefix).unwrap();
        let lock = pairs.iter().find(|p| p.key == self.lock_key());
        let (flags, index, value) = match lock {
            Some(p) => (p.flags, p.modify_index, p.value.clone()),
            None => (SEMAPHORE_FLAG_VALUE, 0, None),
        };
        if flags != SEMAPHORE_FLAG_VALUE {
            return Err("Existing key does not match semaphore use".into());
        }
        let mut doc: serde_json::Value = match value {
            Some(v) => serde_json::from_slice(&v).unwrap(),
            None => serde_json::json!({"Limit": self.limit, "Holders": {}}),
        };
        if doc["Limit"].as_u64() != Some(self.limit) {
            return Err(format!(
                "semaphore limit conflict (lock: {}, local: {})",
                doc["Limit"], self.limit
            ));
        }
        let alive: Vec<String> = pairs.iter().filter_map(|p| p.session.clone()).collect();
        let holders = doc["Holders"].as_object_mut().unwrap();
        holders.retain(|k, _| alive.contains(k));
        if holders.len() as u64 >= self.limit {
            return Ok(false);
        }
        holders.insert(self.session.clone(), serde_json::json!(true));
        let body = serde_json::to_vec(&doc).unwrap();
        Ok(kv
            .put_with(
                &self.lock_key(),
                &body,
                &WriteOptions {
                    flags: SEMAPHORE_FLAG_VALUE,
                    cas: Some(index),
                    ..Default::default()
                },
            )
            .unwrap())
    }

    fn holders(&self) -> Vec<String> {
        let Some(p) = self.client.kv().get(&self.lock_key()).unwrap() else {
            return Vec::new();
        };
        let doc: serde_json::Value = serde_json::from_slice(&p.value.unwrap()).unwrap();
        doc["Holders"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    fn release(&self) {
        let kv = self.client.kv();
        loop {
            let p = kv.get(&self.lock_key()).unwrap().unwrap();
            let mut doc: serde_json::Value = serde_json::from_slice(&p.value.unwrap()).unwrap();
            doc["Holders"]
                .as_object_mut()
                .unwrap()
                .remove(&self.session);
            let ok = kv
                .put_with(
                    &self.lock_key(),
                    &serde_json::to_vec(&doc).unwrap(),
                    &WriteOptions {
                        flags: SEMAPHORE_FLAG_VALUE,
                        cas: Some(p.modify_index),
                        ..Default::default()
                    },
                )
                .unwrap();
            if ok {
                break;
            }
        }
        kv.delete(&format!("{}/{}", self.prefix, self.session))
            .unwrap();
    }
}

#[test]
fn go_api_semaphore_and_baton_share_the_slots() {
    let f = Fixture::start();
    f.sessions_may_remain(
        "the Go-format client it plays leaves its session to expire, as Go's api.Semaphore does",
    );
    let prefix = unique("sem-go");
    let c = f.client();
    let go = GoSem::new(f.client(), &prefix, 1);
    let s = c.semaphore(&prefix, 1).unwrap();

    assert!(s.acquire(Some(PATIENCE), None).unwrap());
    let baton_sid = s.session().unwrap().id().to_string();
    assert_eq!(go.try_acquire(), Ok(false), "Go waits while baton holds");
    assert_eq!(
        go.holders(),
        vec![baton_sid.clone()],
        "Go sees baton's holder"
    );
    assert!(s.release().unwrap());

    assert_eq!(go.try_acquire(), Ok(true));
    assert!(!s.try_acquire().unwrap(), "baton waits while Go holds");
    let listed = c.kv().list(&prefix).unwrap();
    assert!(
        !listed.iter().any(|p| p.key.ends_with(&baton_sid)),
        "a timed-out baton contender removes its key: {listed:?}"
    );
    go.release();
    assert!(s.acquire(Some(PATIENCE), None).unwrap());
    assert_eq!(go.holders(), vec![baton_sid]);

    // Go's encoding of .lock is what baton writes (compact, Limit first).
    let raw = c.kv().get(&format!("{prefix}/.lock")).unwrap().unwrap();
    assert_eq!(raw.flags, SEMAPHORE_FLAG_VALUE);
    assert!(raw
        .value
        .unwrap()
        .starts_with(b"{\"Limit\":1,\"Holders\":{"));
}

#[test]
fn foreign_flags_and_a_limit_mismatch_are_conflicts() {
    let f = Fixture::start();
    f.sessions_may_remain(
        "the Go-format clients it plays leave their sessions to expire, as Go's api.Semaphore does",
    );
    let c = f.client();
    let prefix = unique("sem-conflict");
    let go = GoSem::new(f.client(), &prefix, 2);
    assert_eq!(go.try_acquire(), Ok(true));
    let s = c.semaphore(&prefix, 3).unwrap();
    let e = s.acquire(Some(PATIENCE), None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert!(
        e.to_string()
            .contains("semaphore limit conflict (lock: 2, local: 3)"),
        "{e}"
    );
    let other = unique("sem-foreign");
    c.kv().put(&format!("{other}/.lock"), b"{}").unwrap();
    let e = c
        .semaphore(&other, 1)
        .unwrap()
        .acquire(Some(PATIENCE), None)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Existing key does not match semaphore use"),
        "{e}"
    );
    assert_eq!(
        GoSem::new(f.client(), &other, 1).try_acquire(),
        Err("Existing key does not match semaphore use".into())
    );
    // Bad arguments.
    assert_eq!(
        c.semaphore("x", 0).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        c.semaphore("", 1).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn a_dead_holder_is_pruned_loses_once_and_can_acquire_again() {
    let f = Fixture::start();
    let prefix = unique("sem-prune");
    let ca = f.client();
    let a = ca.semaphore(&prefix, 1).unwrap();
    let (tx, lost) = crossbeam_channel::unbounded();
    a.on_lost(move |r| {
        let _ = tx.send(r);
    });
    assert!(a.acquire(Some(PATIENCE), None).unwrap());
    let b_client = f.client();
    let b = b_client.semaphore(&prefix, 1).unwrap();
    let waiter = std::thread::spawn(move || {
        let got = b.acquire(Some(PATIENCE), None).unwrap();
        (got, b)
    });
    let sid = a.session().unwrap().id().to_string();
    f.client().sessions().destroy(&sid).unwrap();
    let reason = lost.recv_timeout(PATIENCE).expect("A is told");
    assert!(
        matches!(
            reason,
            SemaphoreLost::SessionLost(_) | SemaphoreLost::Removed
        ),
        "{reason:?}"
    );
    assert!(
        lost.recv_timeout(Duration::from_millis(300)).is_err(),
        "once"
    );
    assert!(!a.is_held());
    let (got, b) = waiter.join().unwrap();
    assert!(got, "B took the dead holder's slot");
    assert!(b.release().unwrap());
    assert!(
        a.acquire(Some(PATIENCE), None).unwrap(),
        "A again, with a new session"
    );
}

#[test]
fn a_change_that_frees_no_slot_makes_no_waiter_write() {
    let f = Fixture::start();
    let Some(dev) = f.dev("request counts") else {
        return;
    };
    let prefix = unique("sem-herd");
    let holder_client = f.client();
    let holder = holder_client.semaphore(&prefix, 1).unwrap();
    assert!(holder.acquire(Some(PATIENCE), None).unwrap());
    let got = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let c = f.client();
            let (prefix, got) = (prefix.clone(), got.clone());
            std::thread::spawn(move || {
                let s = c.semaphore(&prefix, 1).unwrap();
                if s.acquire(Some(Duration::from_secs(5)), None).unwrap() {
                    got.fetch_add(1, Ordering::SeqCst);
                    // Hold until the end of the wait window of the others.
                    std::thread::sleep(Duration::from_secs(6));
                    s.release().unwrap();
                }
            })
        })
        .collect();
    // Wait until all five contender keys exist (they are waiting then).
    let deadline = std::time::Instant::now() + PATIENCE;
    while f.client().kv().list(&prefix).unwrap().len() < 7 {
        assert!(
            std::time::Instant::now() < deadline,
            "waiters did not show up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    dev.reset_request_counts();
    // An unrelated change under the prefix: no slot is freed.
    f.client()
        .kv()
        .put(&format!("{prefix}/unrelated"), b"x")
        .unwrap();
    // A window for a herd to show (a negative can only be observed over time).
    std::thread::sleep(Duration::from_millis(500));
    let counts = dev.request_counts();
    let writes: u64 = counts
        .by_route
        .iter()
        .filter(|(r, _)| r.starts_with("PUT "))
        .map(|(_, n)| *n)
        .sum();
    assert_eq!(writes, 1, "only our own PUT: {:?}", counts.by_route);
    assert!(holder.release().unwrap());
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(
        got.load(Ordering::SeqCst),
        1,
        "exactly one waiter got the freed slot"
    );
}

#[test]
fn destroy_refuses_while_in_use_and_removes_the_lock_key_when_free() {
    let f = Fixture::start();
    let prefix = unique("sem-destroy");
    let c = f.client();
    let s = c.semaphore(&prefix, 2).unwrap();
    s.destroy().unwrap(); // nothing there yet
    assert!(s.acquire(Some(PATIENCE), None).unwrap());
    assert!(s
        .destroy()
        .unwrap_err()
        .to_string()
        .contains("Semaphore already held"));
    let other = f.client().semaphore(&prefix, 2).unwrap();
    assert!(other
        .destroy()
        .unwrap_err()
        .to_string()
        .contains("Semaphore in use"));
    assert!(s.release().unwrap());
    assert!(
        c.kv().get(&format!("{prefix}/.lock")).unwrap().is_some(),
        "release keeps .lock"
    );
    other.destroy().unwrap();
    assert!(c.kv().get(&format!("{prefix}/.lock")).unwrap().is_none());
}

#[test]
fn two_semaphores_given_one_session_on_one_prefix_queue_locally() {
    let f = Fixture::start();
    let prefix = unique("sem-local");
    let c = f.client();
    let shared = c.default_session().unwrap();
    let opts = || baton::SemaphoreOptions::new().session(shared.clone());
    let a = c.semaphore_with(&prefix, 5, opts()).unwrap();
    let b = c.semaphore_with(&prefix, 5, opts()).unwrap();
    assert!(a.acquire(Some(PATIENCE), None).unwrap());
    // Same session, same contender key: b waits for a even though slots are free.
    assert!(!b.acquire(Some(Duration::from_millis(200)), None).unwrap());
    assert!(a.is_held(), "b's timeout did not disturb a");
    assert!(a.release().unwrap());
    assert!(b.acquire(Some(PATIENCE), None).unwrap());
}

/// A holder cut off from Consul whose session an operator destroys: Consul sets
/// the session's lock-delay on its contender key, and a waiter must keep the
/// dead holder's slot until it ends — the holder cannot have learnt of its loss
/// before (Go's `api.Semaphore` prunes it at once; a lock has lock-delay for
/// exactly this). The lower bound below is Consul's own lock-delay, a safety
/// property, not a speed measurement (found by the fault harness, tests/faults).
#[test]
fn a_dead_holder_s_slot_is_kept_for_its_lock_delay() {
    let f = Fixture::start();
    let Some((builder, proxy)) = f.proxied() else {
        return;
    };
    let prefix = unique("sem-lock-delay");
    let lock_delay = Duration::from_secs(2);
    let ca = builder.build().unwrap();
    let sa = ca
        .create_session(
            &SessionOptions::new()
                .ttl(Duration::from_secs(60))
                .lock_delay(lock_delay),
        )
        .unwrap();
    let a = ca
        .semaphore_with(&prefix, 1, SemaphoreOptions::new().session(sa.clone()))
        .unwrap();
    assert!(a.acquire(Some(PATIENCE), None).unwrap());
    let cb = f.client();
    let b = cb.semaphore(&prefix, 1).unwrap();
    assert!(!b.try_acquire().unwrap(), "the slot is A's");
    // A can no longer hear from Consul (nor give its slot back); an operator
    // destroys its session.
    proxy.blackhole();
    let destroyed = Instant::now();
    cb.sessions().destroy(sa.id()).unwrap();
    assert!(b.acquire(Some(PATIENCE), None).unwrap(), "B gets the slot");
    let waited = destroyed.elapsed();
    assert!(
        waited >= lock_delay,
        "B took the dead holder's slot {waited:?} after the destroy, within its lock-delay"
    );
    assert!(b.release().unwrap());
    proxy.heal();
}

/// Issue "One library in four languages", finding 1: semaphores of one client on
/// one prefix hold as many slots as the limit allows at once (each has a session
/// of its own, as Go's `api.Semaphore` does), not one at a time; dropping one
/// destroys its session.
#[test]
fn semaphores_of_one_client_hold_several_slots_at_once() {
    let f = Fixture::start();
    let c = f.client();
    let prefix = unique("sem-own-sessions");
    let sems: Vec<_> = (0..3).map(|_| c.semaphore(&prefix, 3).unwrap()).collect();
    for s in &sems {
        assert!(
            s.acquire(Some(Duration::from_secs(5)), None).unwrap(),
            "a free slot is taken at once"
        );
    }
    assert!(sems.iter().all(|s| s.is_held()));
    let ids: std::collections::BTreeSet<String> = sems
        .iter()
        .map(|s| s.session().unwrap().id().to_string())
        .collect();
    assert_eq!(ids.len(), 3, "one session per semaphore");
    // A fourth waits: the limit still holds.
    let fourth = c.semaphore(&prefix, 3).unwrap();
    assert!(!fourth.try_acquire().unwrap());
    drop(fourth);
    // Dropping a semaphore releases it and destroys its own session.
    let mut sems = sems;
    let gone = sems.pop().unwrap();
    let gone_id = gone.session().unwrap().id().to_string();
    drop(gone);
    common::wait_session_gone(&c, &gone_id);
    drop(sems);
    assert!(c.close(Duration::from_secs(5)));
}

/// Issue 31 item 1: semaphores dropped just before `close()` queued the destroy
/// of their own sessions on the clean-up thread, which close stopped: the
/// README's "four workers" left 1–4 sessions while close reported success.
#[test]
fn close_right_after_dropped_semaphores_leaves_no_session() {
    let f = Fixture::start();
    for round in 0..5 {
        let client = f.client();
        let prefix = unique("sem-close");
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let slot = client.semaphore(&prefix, 3).unwrap();
                std::thread::spawn(move || {
                    assert!(slot.acquire(Some(PATIENCE), None).unwrap());
                    let id = slot
                        .session()
                        .expect("a held slot has a session")
                        .id()
                        .to_string();
                    assert!(slot.release().unwrap());
                    id
                })
            })
            .collect();
        // The sessions this round's semaphores contended with (each its own): only
        // those are counted, the server may be shared with tests running in parallel.
        let ours: Vec<String> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(ours.len(), 4);
        let report = client.close_report(Duration::from_secs(5));
        assert!(report.is_complete(), "round {round}: {report}");
        let left = f.sessions_among(&ours);
        assert!(
            left.is_empty(),
            "round {round}: sessions of this round's semaphores left after close: {left:?}"
        );
    }
}

/// An uncontended cycle whose `.lock` the semaphore knows (from its last release) is one
/// txn to take the slot and one to give it back, on the keys and in the states Go's
/// `api.Semaphore` reads: a Go holder sees the slot taken while it is, and free after.
#[test]
fn a_known_uncontended_cycle_is_one_txn_each_way() {
    let f = Fixture::start();
    let Some(dev) = f.dev("request counts") else {
        return;
    };
    let c = f.client();
    let prefix = unique("sem-cost");
    let sem = c.semaphore(&prefix, 2).unwrap();
    // Two full cycles: the first release (step by step) and the second (one txn, from the
    // key hub's view of `.lock`) teach the semaphore what `.lock` holds.
    for _ in 0..2 {
        assert!(sem.acquire(Some(PATIENCE), None).unwrap());
        assert!(sem.release().unwrap());
    }
    dev.reset_request_counts();
    let rounds = 20u64;
    let lock_key = format!("{prefix}/.lock");
    for _ in 0..rounds {
        assert!(sem.acquire(Some(PATIENCE), None).unwrap());
        // What Go reads: our contender key, locked with our session and Go's flags, and
        // `.lock` listing us.
        let sid = sem.session().expect("a session").id().to_string();
        let mine = c
            .kv()
            .get(&format!("{prefix}/{sid}"))
            .unwrap()
            .expect("contender key");
        assert_eq!(mine.session.as_deref(), Some(sid.as_str()));
        assert_eq!(mine.flags, SEMAPHORE_FLAG_VALUE);
        let doc = c.kv().get(&lock_key).unwrap().expect(".lock");
        assert_eq!(doc.flags, SEMAPHORE_FLAG_VALUE);
        let v: serde_json::Value = serde_json::from_slice(doc.value.as_deref().unwrap()).unwrap();
        assert_eq!(v["Limit"], 2);
        assert_eq!(v["Holders"][&sid], true, "{v}");
        assert!(sem.release().unwrap());
        let doc = c.kv().get(&lock_key).unwrap().expect(".lock");
        let v: serde_json::Value = serde_json::from_slice(doc.value.as_deref().unwrap()).unwrap();
        assert!(v["Holders"].as_object().unwrap().is_empty(), "{v}");
        assert!(c.kv().get(&format!("{prefix}/{sid}")).unwrap().is_none());
    }
    let counts = dev.request_counts();
    // The test's own reads: 4 GETs per round.
    let reads = counts.non_blocking("GET /v1/kv");
    let theirs = counts.total - counts.blocking_by_route.values().sum::<u64>() - reads;
    let txns = counts.by_route.get("PUT /v1/txn").copied().unwrap_or(0);
    if f.before("1.6.2") {
        // Txn numbers are rounded there: the full path, as Go's steps.
        assert_eq!(txns, 0, "{:?}", counts.by_route);
        return;
    }
    assert_eq!(reads, 4 * rounds, "{:?}", counts.by_route);
    assert_eq!(txns, 2 * rounds, "{:?}", counts.by_route);
    assert!(
        theirs as f64 <= 2.1 * rounds as f64,
        "{theirs} requests for {rounds} cycles: {:?}",
        counts.by_route
    );
    assert!(c.close(PATIENCE));
}
