//! Managed sessions: renewal, expiry, loss signals, faults.

mod common;

use std::time::{Duration, Instant};

use baton::{ErrorKind, LostReason, SessionEvent, SessionOptions, SessionState};
use common::{unique, Fixture};
use crossbeam_channel::{Receiver, RecvTimeoutError};

/// Generous bound for "eventually" waits; a failure, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(20);

fn events(s: &baton::Session) -> Receiver<(SessionEvent, String)> {
    let (tx, rx) = crossbeam_channel::unbounded();
    s.on_event(move |e| {
        let name = std::thread::current().name().unwrap_or("").to_string();
        let _ = tx.send((*e, name));
    });
    rx
}

fn next_event(rx: &Receiver<(SessionEvent, String)>) -> (SessionEvent, String) {
    rx.recv_timeout(PATIENCE).expect("an event arrives")
}

#[test]
fn renewal_keeps_a_session_alive_past_twice_its_ttl() {
    let f = Fixture::start();
    let ttl = if f.short_ttls() {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(10)
    };
    let c = f.client();
    let s = c.create_session(&SessionOptions::new().ttl(ttl)).unwrap();
    assert_eq!(s.state(), SessionState::Held);
    // Nothing may happen for 3 TTLs (Consul would expire it after 2 without renewals).
    let err = s.wait_lost(Some(ttl * 3), None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(s.is_valid());
    assert!(c.sessions().info(s.id()).unwrap().is_some());
    assert!(c.close(Duration::from_secs(5)));
    // close destroyed it.
    let c2 = f.client();
    assert_eq!(c2.sessions().info(s.id()).unwrap(), None);
    assert_eq!(s.state(), SessionState::Lost(LostReason::ClientClosed));
}

#[test]
fn stopping_renewal_lets_the_session_expire() {
    let f = Fixture::start();
    if !f.short_ttls() {
        eprintln!("skipped against real Consul: needs a TTL below 10 s");
        return;
    }
    let ttl = Duration::from_millis(600);
    let c = f.client();
    let s = c.create_session(&SessionOptions::new().ttl(ttl)).unwrap();
    let rx = events(&s);
    s.stop_renewal();
    // Locally: lost at the deadline.
    assert_eq!(
        s.wait_lost(Some(PATIENCE), None).unwrap(),
        LostReason::DeadlineExceeded
    );
    assert!(!s.is_valid());
    assert!(Instant::now() >= s.valid_until().unwrap());
    let (e, thread) = next_event(&rx);
    assert_eq!(e, SessionEvent::Lost(LostReason::DeadlineExceeded));
    assert_eq!(thread, "baton-dispatch");
    // At the server: gone after about 2×TTL.
    let other = f.client();
    let mut w = baton::QueryOptions::default();
    loop {
        let (info, meta) = other.sessions().info_with(s.id(), &w).unwrap();
        if info.is_none() {
            break;
        }
        w = baton::QueryOptions::blocking(meta.index, PATIENCE);
    }
}

#[test]
fn destroy_by_another_client_is_signalled_promptly_once_on_the_dispatcher() {
    let f = Fixture::start();
    let c = f.client();
    // A long TTL: the renewer would not notice for 20 s; the monitor must.
    let s = c
        .create_session(&SessionOptions::new().ttl(Duration::from_secs(60)))
        .unwrap();
    let rx = events(&s);
    let token = s.cancel_token();
    let other = f.client();
    other.sessions().destroy(s.id()).unwrap();
    let t0 = Instant::now();
    assert_eq!(
        s.wait_lost(Some(PATIENCE), None).unwrap(),
        LostReason::Invalidated
    );
    eprintln!("loss noticed after {:?}", t0.elapsed());
    assert!(token.is_cancelled());
    assert!(!s.is_valid());
    let (e, thread) = next_event(&rx);
    assert_eq!(e, SessionEvent::Lost(LostReason::Invalidated));
    assert_eq!(thread, "baton-dispatch");
    // Exactly once: no further event before close; close drains nothing more.
    assert!(c.close(Duration::from_secs(5)));
    assert_eq!(
        rx.try_recv().err(),
        Some(crossbeam_channel::TryRecvError::Empty)
    );
}

#[test]
fn invalidation_by_the_server_is_signalled() {
    let f = Fixture::start();
    let Some(dev) = f.dev("invalidate_session") else {
        return;
    };
    let c = f.client();
    let s = c
        .create_session(&SessionOptions::new().ttl(Duration::from_secs(60)))
        .unwrap();
    assert!(dev.invalidate_session(s.id()));
    assert_eq!(
        s.wait_lost(Some(PATIENCE), None).unwrap(),
        LostReason::Invalidated
    );
}

#[test]
fn paused_server_makes_the_session_suspect_then_lost_at_the_deadline_then_replaced() {
    let f = Fixture::start();
    let Some(dev) = f.dev("pause/resume") else {
        return;
    };
    let c = f
        .builder()
        .default_session(SessionOptions::new().ttl(Duration::from_millis(900)))
        .build()
        .unwrap();
    let s = c.default_session().unwrap();
    assert_eq!(c.default_session().unwrap().id(), s.id(), "shared");
    let rx = events(&s);
    dev.pause();
    let (e, thread) = next_event(&rx);
    assert_eq!(e, SessionEvent::Suspect);
    assert_eq!(thread, "baton-dispatch");
    let deadline = s.valid_until().unwrap();
    let (e, _) = next_event(&rx);
    assert_eq!(e, SessionEvent::Lost(LostReason::DeadlineExceeded));
    assert!(Instant::now() >= deadline);
    assert!(!s.is_valid());
    assert_eq!(
        s.wait_lost(None, None).unwrap(),
        LostReason::DeadlineExceeded
    );
    dev.resume();
    let s2 = c.default_session().unwrap();
    assert_ne!(s2.id(), s.id(), "a new session replaces the lost one");
    assert!(s2.is_valid());
    assert!(c.close(Duration::from_secs(5)));
}

#[test]
fn no_leader_errors_shorter_than_the_deadline_are_ridden_out() {
    let f = Fixture::start();
    let Some(dev) = f.dev("set_leader") else {
        return;
    };
    let c = f.client();
    let s = c
        .create_session(&SessionOptions::new().ttl(Duration::from_secs(3)))
        .unwrap();
    let rx = events(&s);
    dev.set_leader(false);
    let (e, _) = next_event(&rx);
    assert_eq!(e, SessionEvent::Suspect);
    dev.set_leader(true);
    let (e, _) = next_event(&rx);
    assert_eq!(e, SessionEvent::Recovered);
    assert_eq!(s.state(), SessionState::Held);
    assert!(s.is_valid());
    assert!(c.sessions().info(s.id()).unwrap().is_some());
}

#[test]
fn callbacks_after_loss_panics_and_cancel() {
    let f = Fixture::start();
    let c = f.client();
    let s = c
        .create_session(&SessionOptions::new().ttl(Duration::from_secs(60)))
        .unwrap();
    // A panicking callback is caught; later callbacks still run.
    s.on_lost(|_| panic!("callback panic (expected in this test)"));
    let rx = events(&s);
    // wait_lost honours cancel and timeout.
    let cancel = baton::CancelToken::new();
    let c2 = cancel.clone();
    let t = std::thread::spawn(move || c2.cancel());
    assert_eq!(
        s.wait_lost(None, Some(&cancel)).unwrap_err().kind(),
        ErrorKind::Cancelled
    );
    t.join().unwrap();
    assert_eq!(
        s.wait_lost(Some(Duration::from_millis(10)), None)
            .unwrap_err()
            .kind(),
        ErrorKind::Timeout
    );
    f.client().sessions().destroy(s.id()).unwrap();
    let (e, _) = next_event(&rx);
    assert_eq!(e, SessionEvent::Lost(LostReason::Invalidated));
    // Registered after the loss: told once.
    let late = events(&s);
    assert_eq!(
        next_event(&late).0,
        SessionEvent::Lost(LostReason::Invalidated)
    );
    assert!(c.close(Duration::from_secs(5)));
    assert_eq!(
        late.recv_timeout(Duration::from_millis(1)),
        Err(RecvTimeoutError::Timeout)
    );
}

#[test]
fn explicit_destroy_ends_the_session_without_callbacks() {
    let f = Fixture::start();
    let c = f.client();
    let s = c
        .create_session(&SessionOptions::new().ttl(Duration::from_secs(60)))
        .unwrap();
    let rx = events(&s);
    s.destroy().unwrap();
    assert_eq!(s.state(), SessionState::Lost(LostReason::Destroyed));
    assert_eq!(c.sessions().info(s.id()).unwrap(), None);
    assert!(c.close(Duration::from_secs(5)));
    assert!(rx.try_recv().is_err());
}

#[test]
fn calls_after_close_fail_clearly() {
    let f = Fixture::start();
    let c = f.client();
    let clone = c.clone();
    assert!(c.close(Duration::from_secs(5)));
    assert!(c.close(Duration::from_secs(5)), "idempotent");
    let err = clone.kv().get("x").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert_eq!(err.code(), "BATON_CLOSED");
    assert_eq!(
        clone.default_session().unwrap_err().kind(),
        ErrorKind::Closed
    );
}

#[test]
fn node_failure_is_signalled_as_invalidation() {
    let f = Fixture::start();
    let Some(dev) = f.dev("fail_node") else {
        return;
    };
    let c = f.client();
    let s = c
        .create_session(&SessionOptions::new().ttl(Duration::from_secs(60)))
        .unwrap();
    let rx = events(&s);
    dev.fail_node();
    assert_eq!(
        s.wait_lost(Some(PATIENCE), None).unwrap(),
        LostReason::Invalidated
    );
    assert_eq!(
        next_event(&rx).0,
        SessionEvent::Lost(LostReason::Invalidated)
    );
    // New sessions fail while the node is critical, and work again once it heals.
    assert!(c.default_session().is_err());
    dev.heal_node();
    assert!(c.default_session().unwrap().is_valid());
}

/// Issue 31 item 5: a zero TTL is refused (Consul would read `"0s"` as no TTL,
/// a session that outlives a crashed process with its locks); no TTL is asked
/// for explicitly.
#[test]
fn a_zero_ttl_is_refused_and_no_ttl_is_explicit() {
    let f = Fixture::start();
    let c = f.client();
    // A name of this test's own: the server may be shared with tests running in
    // parallel, so "nothing was created" counts only sessions with this name.
    let name = unique("zero-ttl");
    let zero = SessionOptions::new().name(name.clone()).ttl(Duration::ZERO);
    let e = c.create_session(&zero).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("TTL must be positive"), "{e}");
    let e = c.sessions().create(&zero).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = f
        .builder()
        .default_session(
            SessionOptions::default_for_client()
                .name(name.clone())
                .ttl(Duration::ZERO),
        )
        .build()
        .expect_err("a zero default-session TTL is refused when the client is built");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert_eq!(
        f.sessions_named(&name),
        Vec::<String>::new(),
        "nothing was created"
    );
    let none = c
        .create_session(&SessionOptions::default_for_client().without_ttl())
        .unwrap();
    assert_eq!(none.ttl(), None);
    let info = c.sessions().info(none.id()).unwrap().unwrap();
    assert_eq!(info.ttl(), None);
    assert!(c.close(Duration::from_secs(5)));
}
