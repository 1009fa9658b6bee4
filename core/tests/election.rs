//! Leader election and fencing against the dev server.

mod common;

use std::time::Duration;

use baton::{ElectionOptions, ErrorKind, KvOp, LeaderEvent, LockLost, Sequencer, SessionOptions};
use common::{unique, Fixture};

const PATIENCE: Duration = Duration::from_secs(20);

fn leader_session(ev: &LeaderEvent) -> Option<&str> {
    match ev {
        LeaderEvent::Leader(l) => Some(&l.session),
        LeaderEvent::NoLeader => None,
    }
}

#[test]
fn observe_sees_a_then_no_leader_then_b_and_proclaim_keeps_the_lock_index() {
    let f = Fixture::start();
    let key = unique("election");
    let (ca, cb, co) = (f.client(), f.client(), f.client());
    let a = ca.election(&key).unwrap();
    let b = cb.election(&key).unwrap();
    let mut obs = co.observe_leader(&key).unwrap();

    assert_eq!(
        obs.next(Some(PATIENCE), None).unwrap(),
        LeaderEvent::NoLeader
    );
    assert!(a.campaign(b"node-a", Some(PATIENCE), None).unwrap());
    assert!(a.is_leader());
    let sid_a = ca.default_session().unwrap().id().to_string();
    let ev = obs.next(Some(PATIENCE), None).unwrap();
    let LeaderEvent::Leader(la) = ev else {
        panic!("expected leader A, got {ev:?}")
    };
    assert_eq!(la.session, sid_a);
    assert_eq!(la.value, b"node-a");
    // B cannot win while A leads.
    assert!(!b
        .campaign(b"node-b", Some(Duration::from_millis(200)), None)
        .unwrap());

    // Proclaim: new value, same LockIndex, same sequencer still valid.
    let seq_a = a.sequencer().unwrap();
    a.proclaim(b"node-a v2").unwrap();
    let LeaderEvent::Leader(la2) = obs.next(Some(PATIENCE), None).unwrap() else {
        panic!("expected leader A with a new value")
    };
    assert_eq!(la2.value, b"node-a v2");
    assert_eq!(la2.lock_index, la.lock_index);
    assert_eq!(la2.session, sid_a);
    assert!(ca.check_sequencer(&seq_a).unwrap());
    assert_eq!(ca.leader(&key).unwrap().unwrap().value, b"node-a v2");

    assert!(a.resign().unwrap());
    assert_eq!(
        obs.next(Some(PATIENCE), None).unwrap(),
        LeaderEvent::NoLeader
    );
    // The value proclaimed last is what the release wrote back.
    assert_eq!(
        co.kv().get(&key).unwrap().unwrap().value.as_deref(),
        Some(&b"node-a v2"[..])
    );

    assert!(b.campaign(b"node-b", Some(PATIENCE), None).unwrap());
    let ev = obs.next(Some(PATIENCE), None).unwrap();
    let sid_b = cb.default_session().unwrap().id().to_string();
    assert_eq!(leader_session(&ev), Some(sid_b.as_str()), "{ev:?}");
    let LeaderEvent::Leader(lb) = ev else {
        unreachable!()
    };
    assert_eq!(lb.lock_index, la.lock_index + 1);

    // Nothing else changed: no event.
    let e = obs
        .next(Some(Duration::from_millis(300)), None)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);

    // Proclaim by a non-leader is refused.
    let e = a.proclaim(b"usurper").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
}

#[test]
fn a_stale_sequencer_is_rejected_and_a_stale_guarded_write_fails() {
    let f = Fixture::start();
    let key = unique("fence");
    let data = format!("{key}-data");
    let (ca, cb) = (f.client(), f.client());
    let sa = ca
        .create_session(&SessionOptions::new().lock_delay(Duration::ZERO))
        .unwrap();
    let a = ca
        .election_with(&key, baton::ElectionOptions::new().session(sa.clone()))
        .unwrap();
    let b = cb.election(&key).unwrap();
    assert!(a.campaign(b"a", Some(PATIENCE), None).unwrap());
    let seq_a = a.sequencer().unwrap();
    assert_eq!(Sequencer::parse(&seq_a.to_string()).unwrap(), seq_a);
    assert!(ca.check_sequencer(&seq_a).unwrap());
    ca.guarded_txn(&seq_a, &[KvOp::set(&data, b"from a", 0)])
        .unwrap();

    // A is paused past its session's death; B takes over.
    let lost = {
        let a_ref = &a;
        std::thread::scope(|s| {
            let h = s.spawn(move || a_ref.wait_lost(Some(PATIENCE), None));
            cb.sessions().destroy(sa.id()).unwrap();
            h.join().unwrap().unwrap()
        })
    };
    assert!(matches!(lost, LockLost::SessionLost(_)), "{lost:?}");
    assert!(b.campaign(b"b", Some(PATIENCE), None).unwrap());
    let seq_b = b.sequencer().unwrap();
    assert!(seq_b.token > seq_a.token);

    assert!(
        !cb.check_sequencer(&seq_a).unwrap(),
        "A's sequencer is stale"
    );
    assert!(cb.check_sequencer(&seq_b).unwrap());
    let e = ca
        .guarded_txn(&seq_a, &[KvOp::set(&data, b"late write from a", 0)])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert!(e.to_string().contains("stale sequencer"), "{e}");
    assert_eq!(
        cb.kv().get(&data).unwrap().unwrap().value.as_deref(),
        Some(&b"from a"[..]),
        "the stale write was not applied"
    );
    cb.guarded_txn(&seq_b, &[KvOp::set(&data, b"from b", 0)])
        .unwrap();
    assert_eq!(
        cb.kv().get(&data).unwrap().unwrap().value.as_deref(),
        Some(&b"from b"[..])
    );
}

#[test]
fn the_token_keeps_growing_when_the_key_is_deleted_and_lock_index_restarts() {
    let f = Fixture::start();
    let key = unique("token");
    let c = f.client();
    let e = c.election(&key).unwrap();
    assert!(e.campaign(b"1", Some(PATIENCE), None).unwrap());
    assert!(e.resign().unwrap());
    assert!(e.campaign(b"1", Some(PATIENCE), None).unwrap());
    let before = e.sequencer().unwrap();
    assert_eq!(before.lock_index, 2);
    assert!(e.resign().unwrap());
    assert!(c.kv().delete(&key).unwrap());
    assert!(e.campaign(b"1", Some(PATIENCE), None).unwrap());
    let after = e.sequencer().unwrap();
    assert_eq!(after.lock_index, 1, "LockIndex restarts with the key");
    assert!(after.token > before.token, "{after:?} vs {before:?}");
}

#[test]
fn observers_report_failover_when_the_leader_dies() {
    let f = Fixture::start();
    let key = unique("failover");
    let ca = f
        .builder()
        .default_session(
            SessionOptions::default_for_client().lock_delay(Duration::from_millis(500)),
        )
        .build()
        .unwrap();
    let cb = f.client();
    let a = ca.election(&key).unwrap();
    let b = cb.election(&key).unwrap();
    let mut obs = f.client().observe_leader(&key).unwrap();
    assert!(a.campaign(b"a", Some(PATIENCE), None).unwrap());
    let sid_a = ca.default_session().unwrap().id().to_string();
    // Skip to A's leadership.
    loop {
        let ev = obs.next(Some(PATIENCE), None).unwrap();
        if leader_session(&ev) == Some(sid_a.as_str()) {
            break;
        }
    }
    let b_thread = std::thread::spawn(move || {
        let won = b.campaign(b"b", Some(PATIENCE), None).unwrap();
        (won, b)
    });
    // A crashes: its session is destroyed without a release.
    f.client().sessions().destroy(&sid_a).unwrap();
    let mut seen = Vec::new();
    loop {
        let ev = obs.next(Some(PATIENCE), None).unwrap();
        let done = matches!(&ev, LeaderEvent::Leader(l) if l.value == b"b");
        seen.push(ev);
        if done {
            break;
        }
    }
    assert_eq!(seen.first(), Some(&LeaderEvent::NoLeader), "{seen:?}");
    let (won, b) = b_thread.join().unwrap();
    assert!(won && b.is_leader());
}

/// Consul's leader-election guide writes the leader key with a plain
/// `?acquire=` (flags 0), as curl, py-consul and most scripts do. Observers and
/// `leader()` read such a key; a campaign with Go's flag refuses it with a text
/// that says what to do; a campaign with flags 0 takes part in that election.
#[test]
fn an_election_interoperates_with_the_guide_s_flags_0_leader_key() {
    let f = Fixture::start();
    let key = unique("guide-election");
    let c = f.client();
    let guide = f.client();
    let guide_sid = guide.default_session().unwrap().id().to_string();
    assert!(guide
        .kv()
        .acquire(&key, b"guide-leader", &guide_sid, 0)
        .unwrap());
    // Observing reads any leader key.
    let leader = c.leader(&key).unwrap().expect("the guide's leader");
    assert_eq!(
        (leader.value.as_slice(), leader.session.as_str()),
        (&b"guide-leader"[..], guide_sid.as_str())
    );
    let mut obs = c.observe_leader(&key).unwrap();
    match obs.next(Some(PATIENCE), None).unwrap() {
        LeaderEvent::Leader(l) => assert_eq!(l.session, guide_sid),
        other => panic!("{other:?}"),
    }
    // Go's flag on a flags-0 key: a conflict that says what to do.
    let go_flag = c.election(&key).unwrap();
    let e = go_flag
        .campaign(b"baton", Some(Duration::from_millis(500)), None)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    let text = e.to_string();
    assert!(
        text.contains("Existing key does not match lock use"),
        "{text}"
    );
    assert!(
        text.contains("flags 0") && text.contains("flags = 0"),
        "{text}"
    );
    // Flags 0: waits for the guide's leader, then leads; the guide's clients then wait.
    let guide_format = c
        .election_with(&key, ElectionOptions::new().flags(0))
        .unwrap();
    assert!(!guide_format
        .campaign(b"baton", Some(Duration::from_millis(300)), None)
        .unwrap());
    assert!(guide
        .kv()
        .release(&key, b"guide-leader", &guide_sid, 0)
        .unwrap());
    assert!(guide_format
        .campaign(b"baton", Some(PATIENCE), None)
        .unwrap());
    let entry = c.kv().get(&key).unwrap().unwrap();
    assert_eq!(entry.flags, 0, "written the guide's way");
    assert_eq!(entry.value.as_deref(), Some(&b"baton"[..]));
    assert!(!guide.kv().acquire(&key, b"guide-2", &guide_sid, 0).unwrap());
    loop {
        match obs.next(Some(PATIENCE), None).unwrap() {
            LeaderEvent::Leader(l) if l.value == b"baton" => break,
            _ => continue,
        }
    }
    assert!(guide_format.resign().unwrap());
    assert_eq!(c.kv().get(&key).unwrap().unwrap().flags, 0);
    assert!(guide.kv().acquire(&key, b"guide-2", &guide_sid, 0).unwrap());
}

#[test]
fn an_observer_never_steps_back_to_an_old_leader_after_a_reconnect() {
    let f = Fixture::start();
    let Some(dev) = f.dev("restart") else { return };
    let key = unique("reconnect");
    let (ca, cb) = (f.client(), f.client());
    let a = ca.election(&key).unwrap();
    let b = cb.election(&key).unwrap();
    let mut obs = f.client().observe_leader(&key).unwrap();
    assert!(a.campaign(b"a", Some(PATIENCE), None).unwrap());
    let mut last = obs.next(Some(PATIENCE), None).unwrap();
    while !matches!(&last, LeaderEvent::Leader(l) if l.value == b"a") {
        last = obs.next(Some(PATIENCE), None).unwrap();
    }
    // The server restarts without its data (all sessions and keys gone, indexes start
    // over): the observer's long poll is cut and its old index is now in the future.
    dev.restart();
    let _ = a.resign(); // false: the key is gone with the restart
                        // Either the resign ended the holding, or the holder's own watch saw the key and
                        // its session gone first (a race the restart starts; both are true).
    let ended = a.wait_lost(Some(Duration::ZERO), None).unwrap();
    assert!(
        matches!(
            ended,
            baton::LockLost::Released
                | baton::LockLost::SessionLost(baton::LostReason::Invalidated)
        ),
        "{ended:?}"
    );
    assert!(b.campaign(b"b", Some(PATIENCE), None).unwrap());
    let mut seen = Vec::new();
    loop {
        let ev = obs.next(Some(PATIENCE), None).unwrap();
        let done = matches!(&ev, LeaderEvent::Leader(l) if l.value == b"b");
        seen.push(ev);
        if done {
            break;
        }
    }
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, LeaderEvent::Leader(l) if l.value == b"a")),
        "stale leader reported after the reconnect: {seen:?}"
    );
    // And nothing more: B still leads.
    assert_eq!(
        obs.next(Some(Duration::from_millis(300)), None)
            .unwrap_err()
            .kind(),
        ErrorKind::Timeout
    );
}

/// Consul answers a txn write without the Value; the holder seeds its client's key
/// hub from that answer, so an observer on the same client must still see the
/// value written (found by the Node binding's tests).
#[test]
fn an_observer_on_the_campaigning_client_sees_the_campaign_and_proclaimed_values() {
    let f = Fixture::start();
    let key = unique("same-client-observer");
    let c = f.client();
    let e = c.election(&key).unwrap();
    assert!(e.campaign(b"me", Some(PATIENCE), None).unwrap());
    let mut obs = e.observe().unwrap();
    let ev = obs.next(Some(PATIENCE), None).unwrap();
    let LeaderEvent::Leader(l) = ev else {
        panic!("expected a leader, got {ev:?}")
    };
    assert_eq!(l.value, b"me");
    e.proclaim(b"me-again").unwrap();
    let ev = obs.next(Some(PATIENCE), None).unwrap();
    let LeaderEvent::Leader(l) = ev else {
        panic!("expected a leader, got {ev:?}")
    };
    assert_eq!(l.value, b"me-again");
    assert!(e.resign().unwrap());
}

/// The holder seeds its client's key hub with its own write; an observer already
/// waiting on the same client must be woken by that seed (the server's later answer
/// at the same index is no change and wakes nobody). Repeated: the seed and the
/// poll race.
#[test]
fn a_waiting_observer_on_the_campaigning_client_wakes_for_the_new_leader() {
    let f = Fixture::start();
    let c = f.client();
    for round in 0..15 {
        let key = unique(&format!("seed-wakes-{round}"));
        let mut obs = c.observe_leader(&key).unwrap();
        assert_eq!(
            obs.next(Some(PATIENCE), None).unwrap(),
            LeaderEvent::NoLeader
        );
        let e = c.election(&key).unwrap();
        assert!(e.campaign(b"me", Some(PATIENCE), None).unwrap());
        let ev = obs.next(Some(Duration::from_secs(5)), None).unwrap();
        let LeaderEvent::Leader(l) = ev else {
            panic!("round {round}: expected a leader, got {ev:?}")
        };
        assert_eq!(l.value, b"me", "round {round}");
        assert!(e.resign().unwrap());
    }
}
