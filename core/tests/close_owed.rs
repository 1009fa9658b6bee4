//! Drops and close are one mechanism (issue 32): whatever a loss or a drop
//! leaves owed to Consul — here, a semaphore slot to give back — is made by
//! the clean-up thread, and `close` makes what is still owed or names it in
//! its report. Before, a slot owed back was neither given back by `close`
//! nor reported: the report said everything was done.

mod common;

use std::time::{Duration, Instant};

use baton::{Client, SemaphoreLost, SemaphoreOptions, SessionOptions};
use common::{unique, Fixture};

const PATIENCE: Duration = Duration::from_secs(20);

/// A client that reaches the dev server through a fault proxy, with a short
/// request timeout (`None` against a real Consul).
fn proxied(f: &Fixture) -> Option<(Client, baton_devserver::FaultProxy)> {
    let (builder, proxy) = f.proxied()?;
    let c = builder
        .request_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    Some((c, proxy))
}

#[test]
fn close_reports_a_slot_it_could_not_give_back() {
    let f = Fixture::start();
    let Some((c, proxy)) = proxied(&f) else {
        return;
    };
    let prefix = unique("owed-slot");
    let session = c
        .create_session(&SessionOptions::new().ttl(Duration::from_secs(1)))
        .unwrap();
    let sid = session.id().to_string();
    let sem = c
        .semaphore_with(&prefix, 1, SemaphoreOptions::new().session(session.clone()))
        .unwrap();
    assert!(sem.acquire(Some(PATIENCE), None).unwrap());
    // Cut off: the session passes its local deadline and the slot is lost,
    // while its give-back cannot reach Consul.
    proxy.blackhole();
    let lost = sem.wait_lost(Some(PATIENCE), None).unwrap();
    assert!(
        matches!(lost, SemaphoreLost::SessionLost(_)),
        "lost for {lost}"
    );
    let contender = format!("{prefix}/{sid}");
    let started = Instant::now();
    let report = c.close_report(Duration::from_millis(1500));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "close took {:?}",
        started.elapsed()
    );
    assert!(
        report.unconfirmed_releases.contains(&contender),
        "close did not report the slot still owed back ({contender}): {report:?}"
    );
    assert!(!report.is_complete());
    // Consul still has the session and the slot: free them directly.
    proxy.heal();
    let direct = f.client();
    direct.sessions().destroy(&sid).unwrap();
    drop(sem);
    drop(session);
}

#[test]
fn close_gives_back_a_slot_still_owed() {
    let f = Fixture::start();
    let Some((c, proxy)) = proxied(&f) else {
        return;
    };
    let direct = f.client();
    let prefix = unique("owed-slot-back");
    // A session the client adopts is not destroyed by its close: only giving
    // the slot back frees it.
    let sid = direct
        .sessions()
        .create(&SessionOptions::new().ttl(Duration::from_secs(30)))
        .unwrap();
    let session = c.adopt_session(&sid).unwrap();
    let sem = c
        .semaphore_with(&prefix, 1, SemaphoreOptions::new().session(session.clone()))
        .unwrap();
    assert!(sem.acquire(Some(PATIENCE), None).unwrap());
    // The slot is taken from us (our `.lock` entry removed by hand) while
    // Consul is out of reach of the client: the give-back of the rest (our
    // contender key) is owed.
    proxy.blackhole();
    let lock_key = format!("{prefix}/.lock");
    let p = direct.kv().get(&lock_key).unwrap().unwrap();
    direct
        .kv()
        .put_with(
            &lock_key,
            br#"{"Limit":1,"Holders":{}}"#,
            &baton::WriteOptions {
                flags: baton::SEMAPHORE_FLAG_VALUE,
                cas: Some(p.modify_index),
                ..Default::default()
            },
        )
        .unwrap();
    proxy.heal();
    assert_eq!(
        sem.wait_lost(Some(PATIENCE), None).unwrap(),
        SemaphoreLost::Removed
    );
    let report = c.close_report(PATIENCE);
    assert!(report.unconfirmed_releases.is_empty(), "{report:?}");
    // Given back: the contender key is gone.
    assert_eq!(direct.kv().get(&format!("{prefix}/{sid}")).unwrap(), None);
    direct.sessions().destroy(&sid).unwrap();
    drop(sem);
}
