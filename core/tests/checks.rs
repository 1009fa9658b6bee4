//! Sessions bound to health checks (the agent API, session checks) and adopted
//! sessions.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton::{
    CheckStatus, Client, ErrorKind, LockLost, LockOptions, ServiceRegistration, SessionOptions,
    TtlCheck,
};
use common::{unique, Fixture};

/// Generous bound for "eventually" waits; a failure, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(30);
/// The acceptance bound: a lock is lost within the check's TTL + this after its last pass.
const SLACK: Duration = Duration::from_secs(1);

/// A check ID unique to this process and test.
fn check_id(name: &str) -> String {
    unique(name).replace('/', "-")
}

/// Session TTL: 10 s is Consul's minimum; the session is renewed, only the check ends it.
const SESSION_TTL: Duration = Duration::from_secs(10);

/// The check's TTL: short on both servers (Consul has no minimum for check TTLs).
fn check_ttl(f: &Fixture) -> Duration {
    if f.short_ttls() {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(2)
    }
}

/// The recipe's health loop: while `healthy` holds, pass the check every `ttl / 4`
/// and record when each pass was sent. Returns the send time of the last pass.
fn keep_passing(
    client: Client,
    id: String,
    ttl: Duration,
    healthy: Arc<AtomicBool>,
    passes: crossbeam_channel::Sender<Instant>,
) -> std::thread::JoinHandle<Instant> {
    std::thread::spawn(move || {
        let mut last = None;
        while healthy.load(Ordering::SeqCst) {
            let sent = Instant::now();
            client
                .agent()
                .check_pass(&id, Some("healthy"))
                .expect("check passes");
            last = Some(sent);
            let _ = passes.send(sent);
            // The recipe's reporting period, not a wait for a condition.
            std::thread::sleep(ttl / 4);
        }
        last.expect("passed at least once")
    })
}

#[test]
fn a_lock_bound_to_a_ttl_check_is_lost_within_ttl_plus_one_second_of_the_last_pass() {
    let f = Fixture::start();
    let ttl = check_ttl(&f);
    let a = f.client();
    let b = f.client();
    let id = check_id("lock-check");
    a.agent()
        .check_register(&TtlCheck::new(&id, ttl).notes("baton test"))
        .unwrap();
    a.agent().check_pass(&id, None).unwrap();
    let session = a
        .create_session(
            &SessionOptions::new()
                .name("bound")
                .ttl(SESSION_TTL)
                .lock_delay(Duration::ZERO)
                .node_checks(vec!["serfHealth".into(), id.clone()]),
        )
        .unwrap();
    let info = a.sessions().info(session.id()).unwrap().expect("exists");
    assert!(info.bound_checks().contains(&id), "{info:?}");

    let key = unique("bound-lock");
    let lock = a
        .lock_with(&key, LockOptions::new().session(session.clone()))
        .unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    let (lost_tx, lost_rx) = crossbeam_channel::unbounded();
    lock.on_lost(move |why| {
        let _ = lost_tx.send((why, Instant::now()));
    });

    let healthy = Arc::new(AtomicBool::new(true));
    let (pass_tx, pass_rx) = crossbeam_channel::unbounded();
    let keeper = keep_passing(a.clone(), id.clone(), ttl, healthy.clone(), pass_tx);

    // Passing keeps the lock: wait for passes spanning three TTLs.
    let first = pass_rx.recv_timeout(PATIENCE).expect("a pass");
    loop {
        let t = pass_rx.recv_timeout(PATIENCE).expect("a pass");
        if t.duration_since(first) > ttl * 3 {
            break;
        }
    }
    assert!(lock.is_held(), "lost while the check was passing");
    assert!(
        lost_rx.try_recv().is_err(),
        "lost while the check was passing"
    );

    // Another process waits for the lock.
    let key_b = key.clone();
    let waiter = std::thread::spawn(move || {
        let l = b.lock(&key_b).unwrap();
        let got = l.acquire(Some(PATIENCE), None).unwrap();
        let at = Instant::now();
        assert!(got, "the other client never got the lock");
        l.release().unwrap();
        b.close(Duration::from_secs(5));
        at
    });

    // The health function fails: no more passes.
    healthy.store(false, Ordering::SeqCst);
    let last_pass = keeper.join().unwrap();

    let (why, lost_at) = lost_rx.recv_timeout(PATIENCE).expect("the lock is lost");
    assert!(
        matches!(why, LockLost::SessionLost(_) | LockLost::KeyChanged),
        "{why:?}"
    );
    let acquired_at = waiter.join().unwrap();
    let lost_after = lost_at.duration_since(last_pass);
    let acquired_after = acquired_at.duration_since(last_pass);
    eprintln!(
        "check TTL {ttl:?}: lost {lost_after:?} and acquired by another {acquired_after:?} after the last pass"
    );
    assert!(
        lost_after <= ttl + SLACK,
        "lost {lost_after:?} after the last pass"
    );
    assert!(
        acquired_after <= ttl + SLACK,
        "acquired by another {acquired_after:?} after the last pass"
    );
    assert!(!lock.is_held());
    let _ = a.agent().check_deregister(&id);
    a.close(Duration::from_secs(5));
}

#[test]
fn a_failing_service_check_ends_the_session_of_its_service() {
    let f = Fixture::start();
    let c = f.client();
    let service = check_id("svc");
    let id = format!("{service}:ttl");
    c.agent()
        .service_register(&ServiceRegistration::new(&service).port(8080).tag("baton"))
        .unwrap();
    c.agent()
        .check_register(&TtlCheck::new(&id, Duration::from_secs(30)).service_id(&service))
        .unwrap();
    c.agent()
        .check_update(&id, CheckStatus::Passing, Some("ready"))
        .unwrap();
    let s = c
        .create_session(
            &SessionOptions::new()
                .ttl(SESSION_TTL)
                .lock_delay(Duration::ZERO)
                .service_check(&id),
        )
        .unwrap();
    let info = c.sessions().info(s.id()).unwrap().expect("exists");
    assert!(info.bound_checks().contains(&id), "{info:?}");
    // Warning keeps it.
    c.agent().check_warn(&id, Some("slow")).unwrap();
    c.agent().check_fail(&id, Some("broken")).unwrap();
    let why = s.wait_lost(Some(PATIENCE), None).unwrap();
    assert_eq!(why, baton::LostReason::Invalidated);
    assert_eq!(c.sessions().info(s.id()).unwrap(), None);
    c.agent().service_deregister(&service).unwrap();
    c.close(Duration::from_secs(5));
}

#[test]
fn a_session_cannot_be_bound_to_a_critical_check() {
    let f = Fixture::start();
    let c = f.client();
    let id = check_id("critical");
    // A TTL check starts critical.
    c.agent()
        .check_register(&TtlCheck::new(&id, Duration::from_secs(30)))
        .unwrap();
    let e = c
        .create_session(&SessionOptions::new().node_checks(vec![id.clone()]))
        .unwrap_err();
    assert!(e.to_string().contains(&id), "{e}");
    let _ = c.agent().check_deregister(&id);
}

#[test]
fn the_node_option_is_sent() {
    let f = Fixture::start();
    let c = f.client();
    let e = c
        .create_session(&SessionOptions::new().node("baton-no-such-node"))
        .unwrap_err();
    assert!(e.to_string().contains("Missing node registration"), "{e}");
}

#[test]
fn agent_calls_reject_bad_input_before_sending() {
    let f = Fixture::start();
    let c = f.client();
    let e = c
        .agent()
        .check_register(&TtlCheck::new("x", Duration::ZERO))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("TTL must be positive"), "{e}");
    let e = c.agent().check_pass("", None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = c
        .agent()
        .service_register(&ServiceRegistration::new(""))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn adopting_checks_the_id_and_its_existence() {
    let f = Fixture::start();
    let c = f.client();
    let e = c.adopt_session("not-a-uuid").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("not a UUID"), "{e}");
    let e = c
        .adopt_session("00000000-0000-4000-8000-000000000000")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("does not exist"), "{e}");
}

#[test]
fn an_adopted_session_holds_locks_and_survives_the_adopters_close() {
    let f = Fixture::start();
    let owner = f.client();
    let id = owner
        .sessions()
        .create(
            &SessionOptions::new()
                .ttl(SESSION_TTL)
                .lock_delay(Duration::ZERO),
        )
        .unwrap();
    let c = f.client();
    let s = c.adopt_session(&id.to_uppercase()).unwrap();
    assert_eq!(s.id(), id, "Consul's spelling of the ID");
    assert_eq!(s.ttl(), Some(SESSION_TTL));
    assert!(s.is_valid());
    // Adopting again gives the same managed session.
    let again = c.adopt_session(&id).unwrap();
    assert!(again.valid_until() == s.valid_until());
    // So do adoptions racing on another client: one managed session between them.
    let racer = f.client();
    let racing: Vec<_> = (0..4)
        .map(|_| {
            let (r, id) = (racer.clone(), id.clone());
            std::thread::spawn(move || r.adopt_session(&id).unwrap())
        })
        .collect();
    let adopted: Vec<baton::Session> = racing.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(adopted
        .iter()
        .all(|a| a.valid_until() == adopted[0].valid_until()));
    racer.close(Duration::from_secs(5));
    assert!(
        adopted.iter().all(|a| !a.is_valid()),
        "every handle is the one the close ended"
    );
    assert!(owner.sessions().info(&id).unwrap().is_some());

    let key = unique("adopted");
    let lock = c.lock_with(&key, LockOptions::new().session(s)).unwrap();
    assert!(lock.try_acquire().unwrap());
    let pair = owner.kv().get(&key).unwrap().expect("key");
    assert_eq!(pair.session.as_deref(), Some(id.as_str()));
    assert!(c.close(Duration::from_secs(5)));
    // Not destroyed: the lock was released, the session is still there.
    assert!(owner.sessions().info(&id).unwrap().is_some());
    let pair = owner.kv().get(&key).unwrap().expect("key");
    assert_eq!(pair.session, None);
    owner.sessions().destroy(&id).unwrap();
    owner.close(Duration::from_secs(5));
}

#[test]
fn an_adopted_session_reports_its_invalidation() {
    let f = Fixture::start();
    let owner = f.client();
    let id = owner
        .sessions()
        .create(&SessionOptions::new().lock_delay(Duration::ZERO))
        .unwrap();
    let c = f.client();
    let s = c.adopt_session(&id).unwrap();
    assert_eq!(s.ttl(), None);
    let lost = Arc::new(Mutex::new(None));
    let l2 = lost.clone();
    let (tx, rx) = crossbeam_channel::bounded(1);
    s.on_lost(move |r| {
        *l2.lock().unwrap() = Some(r);
        let _ = tx.send(());
    });
    owner.sessions().destroy(&id).unwrap();
    rx.recv_timeout(PATIENCE).expect("lost callback");
    assert_eq!(*lost.lock().unwrap(), Some(baton::LostReason::Invalidated));
    c.close(Duration::from_secs(5));
}
