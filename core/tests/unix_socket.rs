//! A Consul agent serving HTTP on a unix socket (`addresses.http = "unix:///path"`), reached as
//! `unix:///path`: every path of a client goes there — every request of the engine, the
//! direct and warm lock calls, and the key hub's polls. The whole lock, semaphore, election
//! and aio suites also run over the socket with `BATON_TEST_TRANSPORT=unix` (`make test-unix`);
//! these tests check that it is the socket they use, whatever that variable says.
#![cfg(unix)]

mod common;

use std::time::Duration;

use baton::{Client, ErrorKind, LockLost};
use baton_devserver::{Config, DevServer};
use common::{socket_path, unique, TTL_MIN};

const PATIENCE: Duration = Duration::from_secs(20);

/// A dev server serving on a unix socket as well as TCP, and a client of the socket.
fn on_socket() -> (DevServer, Client) {
    let dev = DevServer::start(Config {
        session_ttl_min: TTL_MIN,
        unix_socket: Some(socket_path()),
        ..Config::default()
    })
    .expect("dev server starts");
    let url = dev.unix_url().expect("a unix socket");
    let client = Client::builder()
        .address(url.clone())
        .build()
        .expect("client builds");
    assert_eq!(client.address(), url, "the address says the socket");
    (dev, client)
}

/// The sessions the agent holds, asked over the socket by a client of its own.
fn sessions_left(dev: &DevServer) -> usize {
    let url = dev.unix_url().expect("a unix socket");
    let c = Client::builder()
        .address(url)
        .build()
        .expect("client builds");
    let n = c.sessions().list().expect("session list").len();
    c.close(PATIENCE);
    n
}

fn session_of(lock: &baton::Lock) -> Option<String> {
    lock.session().map(|s| s.id().to_string())
}

#[test]
fn locks_cycle_over_the_socket_on_every_path() {
    let (dev, client) = on_socket();
    let key = unique("unix-lock");
    let lock = client.lock(&key).unwrap();
    for _ in 0..4 {
        assert!(lock.acquire(Some(PATIENCE), None).unwrap());
        assert_eq!(
            client.kv().get(&key).unwrap().and_then(|p| p.session),
            session_of(&lock),
            "the holder the agent sees"
        );
        assert!(lock.release().unwrap());
    }
    // From the second release on, the lock calls go on the loop connection (`lock::direct`):
    // it is open, to the socket.
    assert!(
        !lock.wants_loop_conn(),
        "cycling over a unix socket opened no loop connection"
    );
    let before = client.direct_calls();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.release().unwrap());
    assert_eq!(
        client.direct_calls() - before,
        2,
        "calls that did not go direct"
    );
    assert!(dev.request_counts().total > 0);
    // No client was ever told a TCP address: everything above reached the agent through the
    // socket, and closing leaves no session behind.
    client.close(PATIENCE);
    assert_eq!(sessions_left(&dev), 0, "sessions left after close");
}

#[test]
fn a_semaphore_and_a_watched_loss_work_over_the_socket() {
    let (dev, client) = on_socket();
    let prefix = unique("unix-sem");
    let sem = client.semaphore(&prefix, 2).unwrap();
    for _ in 0..3 {
        assert!(sem.acquire(Some(PATIENCE), None).unwrap(), "a free slot");
        assert!(sem.release().unwrap());
    }

    // A held lock whose session the agent destroys is seen lost through the key hub's poll,
    // which runs on the socket too.
    let key = unique("unix-loss");
    let lock = client.lock(&key).unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert_eq!(client.key_watch_polls(), 1, "one poll watches the held key");
    let session = session_of(&lock).expect("a session");
    assert!(dev.invalidate_session(&session));
    let why = lock.wait_lost(Some(PATIENCE), None).unwrap();
    assert!(
        matches!(why, LockLost::KeyChanged | LockLost::SessionLost(_)),
        "{why:?}"
    );
    client.close(PATIENCE);
    assert_eq!(sessions_left(&dev), 0, "sessions left after close");
}

#[test]
fn a_missing_socket_is_a_connection_error_that_names_it() {
    let path = socket_path();
    let client = Client::builder()
        .address(format!("unix://{}", path.display()))
        .request_timeout(Duration::from_secs(2))
        .build()
        .expect("the client builds: the socket may appear later");
    let e = client.kv().get("k").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    let text = e.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(e.is_transient(), "an agent not there yet may come: {text}");
}
