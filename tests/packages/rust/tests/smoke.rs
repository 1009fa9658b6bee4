//! Smoke test of the packaged crates, in a scratch cargo project outside the repository that
//! depends on consul-baton and (dev) consul-baton-devserver unpacked from their .crate files:
//! an in-process dev server, a lock, an election, and a loss caused by the server's restart.

use std::time::Duration;

use baton::{ClientBuilder, ElectionOptions, LockOptions, SessionOptions};
use baton_devserver::{Config, DevServer};

#[test]
fn lock_election_and_loss() {
    let server = DevServer::start(Config {
        session_ttl_min: Duration::from_millis(100),
        ..Config::default()
    })
    .expect("dev server");
    let addr = server.http_addr().to_string();
    let a = ClientBuilder::new().address(&addr).build().expect("client a");
    let b = ClientBuilder::new().address(&addr).build().expect("client b");
    let secs = |s| Some(Duration::from_secs(s));

    let session = a
        .create_session(
            &SessionOptions::new()
                .ttl(Duration::from_secs(1))
                .lock_delay(Duration::ZERO),
        )
        .expect("session");
    let lock = a
        .lock_with("smoke/lock", LockOptions::new().value(b"a".to_vec()).session(session.clone()))
        .expect("lock");
    assert!(lock.acquire(secs(10), None).expect("acquire"));
    let other = b.lock("smoke/lock").expect("lock b");
    assert!(!other.try_acquire().expect("second try"), "a second holder got the lock");

    let election = a
        .election_with("smoke/leader", ElectionOptions::new().session(session))
        .expect("election");
    assert!(election.campaign(b"leader-a", secs(10), None).expect("campaign"));
    let leader = b.leader("smoke/leader").expect("leader read").expect("a leader");
    assert_eq!(leader.value, b"leader-a");

    server.restart(); // every session is gone
    lock.wait_lost(secs(30), None).expect("lock lost");
    assert!(!lock.is_held());
    election.wait_lost(secs(30), None).expect("leadership lost");
    assert!(!election.is_leader());
    assert!(other.acquire(secs(10), None).expect("reacquire"));

    a.close(Duration::from_secs(5));
    b.close(Duration::from_secs(5));
    server.stop();
}
