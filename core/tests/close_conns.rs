//! `close()` leaves no connection to the agent open (its own dev server, so no other
//! client's connections are counted).

use std::time::Duration;

/// A closed client keeps no connection to the agent open: the engine's idle connections
/// close with it.
#[test]
fn close_leaves_no_connection_open() {
    use baton_devserver::{Config, DevServer};
    let dev = DevServer::start(Config::default()).expect("dev server starts");
    let c = baton::Client::builder()
        .address(dev.http_addr())
        .build()
        .unwrap();
    let lock = c.lock("close/conns").unwrap();
    for _ in 0..3 {
        assert!(lock.acquire(Some(Duration::from_secs(20)), None).unwrap());
        assert!(lock.release().unwrap());
    }
    c.kv().put("close/conns-v", b"v").unwrap();
    assert!(
        dev.open_connections() > 0,
        "the calls left no connection idle"
    );
    assert!(c.close(Duration::from_secs(20)));
    let end = std::time::Instant::now() + Duration::from_secs(20);
    while dev.open_connections() > 0 {
        assert!(
            std::time::Instant::now() < end,
            "{} connections still open after close",
            dev.open_connections()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
