//! A lock whose session is bound to an HTTP check is lost when the service stops answering
//! (issue 43): the server probes the check (the dev server as a Consul agent does), the check
//! turns critical, the session is invalidated and the client's loss signal fires.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use baton::{LockLost, LockOptions, SessionOptions};
use common::{unique, Fixture};

/// Generous bound for "eventually" waits; a failure, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(30);
/// The check's interval (Consul's minimum).
const INTERVAL: Duration = Duration::from_secs(1);

/// A tiny HTTP service answering every request with the current `status` (and closing the
/// connection). Stopped and joined on drop.
struct Service {
    addr: String,
    status: Arc<AtomicU16>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Service {
    fn start() -> Service {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let status = Arc::new(AtomicU16::new(200));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (status.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("test-http-service".into())
            .spawn(move || {
                while !sp.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((mut c, _)) => {
                            c.set_nonblocking(false).unwrap();
                            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                            let mut raw = Vec::new();
                            let mut buf = [0u8; 2048];
                            while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
                                match c.read(&mut buf) {
                                    // EINTR after a stop/continue of the test process.
                                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                                    Ok(0) | Err(_) => break,
                                    Ok(n) => raw.extend_from_slice(&buf[..n]),
                                }
                            }
                            let code = st.load(Ordering::SeqCst);
                            let _ = c.write_all(
                                format!(
                                    "HTTP/1.1 {code} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                                )
                                .as_bytes(),
                            );
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5)); // accept poll interval
                        }
                        Err(e) => panic!("test service accept: {e}"),
                    }
                }
            })
            .unwrap();
        Service {
            addr,
            status,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One request to the server's HTTP API (the client library registers TTL checks only):
/// the status and the body.
fn raw(server: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(server).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {server}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out[9..12].parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// The check's status as the agent reports it.
fn check_status(server: &str, id: &str) -> Option<String> {
    let (code, body) = raw(server, "GET", "/v1/agent/checks", "");
    assert_eq!(code, 200, "{body}");
    // Chunked or not, the JSON object is the part between the outer braces.
    let json = &body[body.find('{').unwrap()..=body.rfind('}').unwrap()];
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v.get(id).map(|c| c["Status"].as_str().unwrap().to_string())
}

#[test]
fn a_lock_bound_to_an_http_check_is_lost_when_the_service_stops_answering() {
    let f = Fixture::start();
    let server = f.url().trim_start_matches("http://").to_string();
    let svc = Service::start();
    let id = unique("http-check").replace('/', "-");
    let def = serde_json::json!({
        "ID": id, "Name": id, "HTTP": format!("http://{}/health", svc.addr),
        "Interval": "1s", "Timeout": "1s",
    });
    let (code, body) = raw(&server, "PUT", "/v1/agent/check/register", &def.to_string());
    assert_eq!(code, 200, "register: {body}");
    // Registered critical; passing once probed.
    let deadline = Instant::now() + PATIENCE;
    while check_status(&server, &id).as_deref() != Some("passing") {
        assert!(Instant::now() < deadline, "the HTTP check never passed");
        std::thread::sleep(Duration::from_millis(20)); // polling interval of the condition
    }
    let c = f.client();
    let session = c
        .create_session(
            &SessionOptions::new()
                .ttl(Duration::from_secs(10))
                .lock_delay(Duration::ZERO)
                .node_checks(vec!["serfHealth".into(), id.clone()]),
        )
        .unwrap();
    let key = unique("http-bound-lock");
    let lock = c
        .lock_with(&key, LockOptions::new().session(session.clone()))
        .unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    let (lost_tx, lost_rx) = crossbeam_channel::unbounded();
    lock.on_lost(move |why| {
        let _ = lost_tx.send((why, Instant::now()));
    });
    // The service starts answering 500.
    let failed_at = Instant::now();
    svc.status.store(500, Ordering::SeqCst);
    let (why, lost_at) = lost_rx.recv_timeout(PATIENCE).expect("the lock is lost");
    assert!(
        matches!(why, LockLost::SessionLost(_) | LockLost::KeyChanged),
        "{why:?}"
    );
    let after = lost_at.duration_since(failed_at);
    eprintln!("HTTP check every {INTERVAL:?}: lock lost {after:?} after the service answered 500");
    // One interval until the next probe, plus the write and the client's watch.
    assert!(
        after <= INTERVAL * 2 + Duration::from_secs(1),
        "lost {after:?} after the service failed"
    );
    assert!(!lock.is_held());
    assert_eq!(check_status(&server, &id).as_deref(), Some("critical"));
    let _ = c.agent().check_deregister(&id);
    c.close(Duration::from_secs(5));
}
