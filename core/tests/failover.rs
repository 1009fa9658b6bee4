//! Consul's own failovers (issue "Consul's own failovers"): a cluster electing a
//! raft leader answers 500 for a while. A holder rides it out, a release that
//! fails during it completes after it, an acquire with time left waits it out,
//! no request carries a session after it was lost, and no key is left held by
//! a session nobody renews. Driven by the dev server's "no leader" windows.

mod common;

use std::time::{Duration, Instant};

use baton::{Client, ErrorKind, LockOptions, SessionOptions};
use baton_devserver::{Config, DevServer, JournalEntry, NoLeader, NoLeaderAnswers};
use common::{unique, wait_free, wait_session_gone, Fixture};
use serde_json::Value;

/// Generous bound for "eventually"; a failure bound, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(20);

/// How a client agent answers while its servers elect a leader, at once.
fn agent_window() -> NoLeader {
    NoLeader {
        hold: Duration::ZERO,
        answers: NoLeaderAnswers::ClientAgent,
    }
}

/// A client whose default session has `ttl` (and a short lock-delay).
fn client_with_ttl(f: &Fixture, ttl: Duration) -> Client {
    f.builder()
        .default_session(
            SessionOptions::default_for_client()
                .ttl(ttl)
                .lock_delay(Duration::from_millis(200)),
        )
        .build()
        .unwrap()
}

/// Whether a journal entry asks Consul to acquire with, or renew, session `sid`
/// (unlocks, releases and destroys of a lost session are clean-ups, allowed).
fn uses_session(e: &JournalEntry, sid: &str) -> bool {
    if e.path == format!("/v1/session/renew/{sid}") {
        return true;
    }
    if e.path.starts_with("/v1/kv/") && e.query.contains(&format!("acquire={sid}")) {
        return true;
    }
    if e.path == "/v1/txn" {
        let ops: Value = serde_json::from_str(&e.body).unwrap_or(Value::Null);
        return ops.as_array().is_some_and(|ops| {
            ops.iter()
                .any(|op| op["KV"]["Verb"] == "lock" && op["KV"]["Session"].as_str() == Some(sid))
        });
    }
    false
}

/// A 3 s window with a client agent's answers: the release fails with a
/// transient error, the holding ends at once, and the key is free within 1 s of
/// the new leader (the background retry probes at most every 250 ms).
#[test]
fn a_release_that_fails_without_a_leader_completes_after_it() {
    let f = Fixture::start();
    let Some(dev) = f.dev("no-leader window") else {
        return;
    };
    let holder = client_with_ttl(&f, Duration::from_secs(10));
    let other = f.client();
    let key = unique("release-window");
    let lock = holder.lock(&key).unwrap();
    assert!(lock.acquire(Some(Duration::from_secs(5)), None).unwrap());
    dev.set_no_leader(agent_window());
    let err = lock.release().unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("not confirmed yet"), "{err}");
    assert!(!lock.is_held());
    // The window lasts 3 s (the fault's length, not a wait for a condition).
    std::thread::sleep(Duration::from_secs(3));
    let healed = Instant::now();
    dev.end_no_leader();
    let free = wait_free(&other, &key) - healed;
    eprintln!("key free {free:?} after the leader returned");
    assert!(free < Duration::from_secs(1), "free only after {free:?}");
    // The holder's session lived through the window, and is still its own.
    assert!(holder.default_session().unwrap().is_valid());
    assert!(holder.close(Duration::from_secs(5)));
    other.close(Duration::from_secs(5));
}

/// A window of 2×TTL: the holder's session passes its local deadline during
/// it (Consul, once it has a leader again, restarts its timer and keeps it).
/// The release still completes after the window; the lost session is then
/// destroyed; an acquire that was waiting moves to a new session; and no
/// acquire or renew carries the lost session after its loss.
#[test]
fn a_window_of_two_ttls_leaves_no_key_held_and_no_request_on_the_lost_session() {
    let f = Fixture::start();
    let Some(dev) = f.dev("no-leader window") else {
        return;
    };
    dev.record_requests(true);
    let ttl = Duration::from_secs(1);
    let holder = client_with_ttl(&f, ttl);
    let other = f.client();
    let key = unique("release-2ttl");
    let waiting_key = unique("acquire-2ttl");
    let lock = holder.lock(&key).unwrap();
    assert!(lock.acquire(Some(Duration::from_secs(5)), None).unwrap());
    let lost_session = holder.default_session().unwrap();
    dev.set_no_leader(agent_window());
    let window_start = Instant::now();
    assert!(lock.release().unwrap_err().is_transient());
    // An acquire on the same client, started in the window with time to spare.
    let waiter = {
        let holder = holder.clone();
        let waiting_key = waiting_key.clone();
        std::thread::spawn(move || {
            let l = holder.lock(&waiting_key).unwrap();
            let got = l.acquire(Some(Duration::from_secs(15)), None).unwrap();
            (got, l.session().map(|s| s.id().to_string()), l)
        })
    };
    lost_session
        .wait_lost(Some(PATIENCE), None)
        .expect("the session is lost locally during the window");
    let lost_at = Instant::now();
    let window = 2 * ttl;
    std::thread::sleep(window.saturating_sub(window_start.elapsed()));
    let healed = Instant::now();
    dev.end_no_leader();
    let free = wait_free(&other, &key) - healed;
    eprintln!("key free {free:?} after the leader returned");
    assert!(free < Duration::from_secs(1), "free only after {free:?}");
    wait_session_gone(&other, lost_session.id());
    // Destroyed by its client, not left for Consul to expire.
    let destroy = format!("/v1/session/destroy/{}", lost_session.id());
    assert!(
        dev.journal().iter().any(|e| e.path == destroy),
        "the lost session was not destroyed by its client"
    );
    let (got, sid, waiting_lock) = waiter.join().unwrap();
    assert!(got, "the waiting acquire succeeds after the window");
    assert_ne!(sid.as_deref(), Some(lost_session.id()));
    assert!(waiting_lock.is_held());
    // Every key the holder touched is free or held by its live session.
    let live = holder.default_session().unwrap();
    for k in [&key, &waiting_key] {
        let entry = other.kv().get(k).unwrap();
        let s = entry.and_then(|p| p.session);
        assert!(
            s.is_none() || s.as_deref() == Some(live.id()),
            "{k} held by {s:?}"
        );
    }
    // No acquire or renew went out on the lost session after its loss (a request
    // already on its way then may arrive a little later: 1 s of slack).
    let late: Vec<JournalEntry> = dev
        .journal()
        .into_iter()
        .filter(|e| e.at > lost_at + Duration::from_secs(1))
        .filter(|e| uses_session(e, lost_session.id()))
        .collect();
    assert!(late.is_empty(), "requests on the lost session: {late:#?}");
    drop(waiting_lock);
    assert!(holder.close(Duration::from_secs(5)));
    other.close(Duration::from_secs(5));
}

/// An acquire (lock and semaphore) started during a 3 s window, by a client
/// with no session yet, waits it out and succeeds after it; the retries are
/// counted.
#[test]
fn an_acquire_with_a_deadline_past_the_window_succeeds_after_it() {
    let f = Fixture::start();
    let Some(dev) = f.dev("no-leader window") else {
        return;
    };
    let c = client_with_ttl(&f, Duration::from_secs(10));
    let sem_client = client_with_ttl(&f, Duration::from_secs(10));
    let key = unique("acquire-window");
    let prefix = unique("sem-window");
    dev.set_no_leader(agent_window());
    let started = Instant::now();
    let lock_thread = {
        let c = c.clone();
        let key = key.clone();
        std::thread::spawn(move || {
            let l = c.lock(&key).unwrap();
            (l.acquire(Some(Duration::from_secs(10)), None), l)
        })
    };
    let sem_thread = {
        let c = sem_client.clone();
        std::thread::spawn(move || {
            let s = c.semaphore(&prefix, 2).unwrap();
            (s.acquire(Some(Duration::from_secs(10)), None), s)
        })
    };
    std::thread::sleep(Duration::from_secs(3));
    dev.end_no_leader();
    let (got, lock) = lock_thread.join().unwrap();
    assert!(got.unwrap(), "lock acquired after the window");
    assert!(lock.is_held());
    let (got, sem) = sem_thread.join().unwrap();
    assert!(got.unwrap(), "semaphore slot taken after the window");
    assert!(sem.is_held());
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert!(c.transient_retries() > 0);
    assert!(sem_client.transient_retries() > 0);
    drop((lock, sem));
    assert!(c.close(Duration::from_secs(5)));
    assert!(sem_client.close(Duration::from_secs(5)));
}

/// A leaderless server that holds each request (Consul's rpc_hold_timeout)
/// longer than the acquire's timeout: the acquire still ends at its deadline
/// (each request is bounded by the time left), reporting "not acquired".
#[test]
fn held_requests_do_not_stretch_an_acquire_past_its_deadline() {
    let f = Fixture::start();
    let Some(dev) = f.dev("no-leader window") else {
        return;
    };
    let c = client_with_ttl(&f, Duration::from_secs(10));
    let session = c.default_session().unwrap();
    let lock = c
        .lock_with(&unique("held"), LockOptions::new().session(session))
        .unwrap();
    dev.set_no_leader(NoLeader {
        hold: Duration::from_secs(4),
        answers: NoLeaderAnswers::Server,
    });
    let t = Instant::now();
    let got = lock.acquire(Some(Duration::from_secs(2)), None).unwrap();
    let took = t.elapsed();
    dev.end_no_leader();
    assert!(!got);
    // A failure bound (the report was 9–13 s for a 5 s timeout), not a speed check.
    assert!(took < Duration::from_secs(4), "acquire took {took:?}");
    c.close(Duration::from_secs(5));
}

/// A holder whose TTL is longer than the window keeps its holding: no loss
/// signal, and nobody else gets the key.
#[test]
fn a_holding_rides_out_a_window_shorter_than_its_ttl() {
    let f = Fixture::start();
    let Some(dev) = f.dev("no-leader window") else {
        return;
    };
    let holder = client_with_ttl(&f, Duration::from_secs(4));
    let other = f.client();
    let key = unique("ride-out");
    let lock = holder.lock(&key).unwrap();
    assert!(lock.acquire(Some(Duration::from_secs(5)), None).unwrap());
    let (tx, rx) = crossbeam_channel::unbounded();
    lock.on_lost(move |r| {
        let _ = tx.send(r);
    });
    dev.set_no_leader(agent_window());
    std::thread::sleep(Duration::from_millis(1500));
    dev.end_no_leader();
    // The renewer gets through again: the session's deadline moves past where it
    // stood in the window.
    let session = lock.session().unwrap();
    let deadline_then = session.valid_until().unwrap();
    let end = Instant::now() + PATIENCE;
    while session.valid_until().unwrap() <= deadline_then {
        assert!(
            Instant::now() < end,
            "no renew got through after the window"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(lock.is_held());
    assert!(rx.try_recv().is_err(), "no loss signal");
    let rival = other.lock(&key).unwrap();
    assert!(!rival.try_acquire().unwrap());
    assert!(lock.release().unwrap());
    assert!(holder.close(Duration::from_secs(5)));
    other.close(Duration::from_secs(5));
}

/// Refusals are not waited out: a token without permission fails an acquire at
/// once (not at its 30 s deadline), and so does a TTL the server refuses.
#[test]
fn permanent_refusals_fail_at_once() {
    if std::env::var("BATON_TEST_CONSUL").is_ok() {
        eprintln!("skipped against real Consul: needs a dev server with ACLs");
        return;
    }
    let dev = DevServer::start(Config {
        acl_token: Some("root-token".into()),
        session_ttl_min: common::TTL_MIN,
        ..Config::default()
    })
    .unwrap();
    let c = Client::builder()
        .address(dev.http_addr())
        .token("not-a-token")
        .build()
        .unwrap();
    let err = c
        .lock(&unique("denied"))
        .unwrap()
        .acquire(Some(Duration::from_secs(30)), None)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(!err.is_transient());
    assert_eq!(c.transient_retries(), 0);
    let f = Fixture::start();
    let bad_ttl = f
        .builder()
        .default_session(SessionOptions::default_for_client().ttl(Duration::from_millis(100)))
        .build()
        .unwrap();
    let err = bad_ttl
        .lock(&unique("bad-ttl"))
        .unwrap()
        .acquire(Some(Duration::from_secs(30)), None)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert_eq!(bad_ttl.transient_retries(), 0);
}

/// `close` waits (within its timeout) for a release that failed in a window
/// that ends meanwhile, and reports a release it could not get confirmed.
#[test]
fn close_finishes_pending_releases_or_reports_them() {
    let f = Fixture::start();
    let Some(dev) = f.dev("no-leader window") else {
        return;
    };
    let other = f.client();
    // The window ends while close waits.
    let holder = client_with_ttl(&f, Duration::from_secs(10));
    let key = unique("close-pending");
    let lock = holder.lock(&key).unwrap();
    assert!(lock.acquire(Some(Duration::from_secs(5)), None).unwrap());
    dev.set_no_leader(agent_window());
    assert!(lock.release().is_err());
    let healer = {
        let heal_after = Duration::from_millis(800);
        let dev_url = dev.url();
        std::thread::spawn(move || {
            std::thread::sleep(heal_after);
            ureq::put(&format!("{dev_url}/_devserver/leader?present=true"))
                .send_empty()
                .unwrap();
        })
    };
    let report = holder.close_report(Duration::from_secs(10));
    healer.join().unwrap();
    assert!(report.is_complete(), "{report:?}");
    assert!(other.kv().get(&key).unwrap().unwrap().session.is_none());
    // The window outlasts close's timeout: the release is reported unconfirmed.
    let holder = client_with_ttl(&f, Duration::from_secs(10));
    let key = unique("close-unconfirmed");
    let lock = holder.lock(&key).unwrap();
    assert!(lock.acquire(Some(Duration::from_secs(5)), None).unwrap());
    dev.set_no_leader(agent_window());
    assert!(lock.release().is_err());
    let report = holder.close_report(Duration::from_millis(700));
    dev.end_no_leader();
    assert!(!report.is_complete());
    assert_eq!(report.unconfirmed_releases, vec![key.clone()]);
    assert_eq!(report.sessions_not_destroyed.len(), 1, "{report:?}");
    f.sessions_may_remain("close reported the session it could not destroy in the window");
    other.close(Duration::from_secs(5));
}
