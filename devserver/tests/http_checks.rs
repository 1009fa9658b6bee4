//! HTTP and TCP checks are probed as an agent does (`agent/checks/check.go`): 2xx passing,
//! 429 warning, anything else or no answer critical, Consul's output texts, the check's
//! method, headers and body sent; a session bound to a check that turns critical is
//! invalidated and its lock released (issue 43).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::*;

/// A bound for "eventually": the check interval is 1 s (Consul's minimum), the first probe
/// comes within one interval.
const PATIENCE: Duration = Duration::from_secs(15);

/// A request the test service received.
#[derive(Clone, Debug)]
struct Seen {
    head: String,
    body: Vec<u8>,
}

/// A tiny HTTP service: answers every request with `status` (and body `hello`) until told
/// otherwise; `status` 0 closes each connection without answering. `GET /moved` is a
/// redirect to `/health`. Stopped and joined on drop.
struct Service {
    addr: SocketAddr,
    status: Arc<AtomicU16>,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Service {
    fn start(status: u16) -> Service {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let status = Arc::new(AtomicU16::new(status));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sn, sp) = (status.clone(), seen.clone(), stop.clone());
        let thread = thread::Builder::new()
            .name("test-http-service".into())
            .spawn(move || {
                while !sp.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((mut c, _)) => {
                            c.set_nonblocking(false).unwrap();
                            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                            let mut raw = Vec::new();
                            let mut buf = [0u8; 4096];
                            let (head, body) = loop {
                                let n = match c.read(&mut buf) {
                                    Ok(n) => n,
                                    // EINTR after a stop/continue of the test process.
                                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                                        continue
                                    }
                                    Err(_) => break (String::new(), vec![]),
                                };
                                if n == 0 {
                                    break (String::new(), vec![]);
                                }
                                raw.extend_from_slice(&buf[..n]);
                                let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n")
                                else {
                                    continue;
                                };
                                let head = String::from_utf8_lossy(&raw[..end]).to_string();
                                let len = head
                                    .lines()
                                    .filter_map(|l| l.split_once(':'))
                                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                                    .map(|(_, v)| v.trim().parse::<usize>().unwrap())
                                    .unwrap_or(0);
                                if raw.len() >= end + 4 + len {
                                    break (head, raw[end + 4..end + 4 + len].to_vec());
                                }
                            };
                            let moved = head.starts_with("GET /moved ");
                            sn.lock().unwrap().push(Seen { head, body });
                            let code = st.load(Ordering::SeqCst);
                            if moved {
                                let _ = c.write_all(
                                    b"HTTP/1.1 301 Moved Permanently\r\nLocation: /health\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                                );
                            } else if code != 0 {
                                let answer = format!(
                                    "HTTP/1.1 {code} Whatever\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
                                );
                                let _ = c.write_all(answer.as_bytes());
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            thread::sleep(Duration::from_millis(5)); // accept poll interval
                        }
                        Err(e) => panic!("test service accept: {e}"),
                    }
                }
            })
            .unwrap();
        Service {
            addr,
            status,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/health", self.addr)
    }

    fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
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

/// The agent's view of a check, or `None` when it is gone.
fn agent_check(s: &DevServer, id: &str) -> Option<Value> {
    let r = get(s, "/v1/agent/checks");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json().get(id).cloned()
}

/// Polls until `f` gives `Some`, failing with `what` after [`PATIENCE`].
#[track_caller]
fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "not within {PATIENCE:?}: {what}");
        thread::sleep(Duration::from_millis(20)); // polling interval of the condition
    }
}

/// Waits for the check to reach `status` and returns it.
#[track_caller]
fn check_reaches(s: &DevServer, id: &str, status: &str) -> Value {
    eventually(&format!("check {id} {status}"), || {
        agent_check(s, id).filter(|c| c["Status"] == status)
    })
}

fn register_web(s: &DevServer, check: Value) {
    put_json(
        s,
        "/v1/agent/service/register",
        &json!({"Name": "web", "ID": "web", "Port": 1, "Check": check}),
    )
    .assert(200, "");
}

#[test]
fn http_check_follows_the_answer_and_takes_a_bound_lock_when_it_fails() {
    let s = start();
    let svc = Service::start(200);
    register_web(
        &s,
        json!({"CheckID": "web-http", "HTTP": svc.url(), "Interval": "1s", "Timeout": "2s"}),
    );
    // Registered critical, passing after the first probe.
    let c = check_reaches(&s, "web-http", "passing");
    assert_eq!(
        c["Output"],
        format!("HTTP GET {}: 200 Whatever Output: hello", svc.url())
    );
    assert_eq!(c["Type"], "http");
    let sid = session_create(
        &s,
        &json!({"NodeChecks": ["serfHealth"], "ServiceChecks": [{"ID": "web-http"}], "LockDelay": "0s"}),
    );
    acquire(&s, "lock", &sid, b"held").assert(200, "true");
    // The service starts failing: critical, the session invalidated, the lock released.
    let failed_at = Instant::now();
    svc.answer(500);
    let c = check_reaches(&s, "web-http", "critical");
    assert_eq!(
        c["Output"],
        format!("HTTP GET {}: 500 Whatever Output: hello", svc.url())
    );
    eventually("the bound session invalidated", || {
        session_info(&s, &sid).is_none().then_some(())
    });
    let lost_after = failed_at.elapsed();
    let e = kv_entry(&s, "lock").expect("lock key stays (behavior release)");
    assert!(e.get("Session").is_none(), "lock still held: {e}");
    // Within two intervals of the service failing (one probe interval, plus slack).
    assert!(
        lost_after < Duration::from_millis(2500),
        "session lost {lost_after:?} after the service failed (interval 1s)"
    );
    eprintln!(
        "http check: session lost {lost_after:?} after the service answered 500 (interval 1s)"
    );
    // Each probe is a GET of the path, with the agent's headers.
    let seen = svc.seen();
    let first = &seen[0];
    assert!(
        first.head.starts_with("GET /health HTTP/1.1\r\n"),
        "{}",
        first.head
    );
    assert!(
        first.head.contains("User-Agent: Consul Health Check"),
        "{}",
        first.head
    );
    assert!(
        first.head.contains("Accept: text/plain, text/*, */*"),
        "{}",
        first.head
    );
}

#[test]
fn http_check_sends_method_headers_and_body_and_maps_429_to_warning() {
    let s = start();
    let svc = Service::start(429);
    put_json(
        &s,
        "/v1/agent/check/register",
        &json!({
            "Name": "custom", "HTTP": svc.url(), "Interval": "1s",
            "Method": "PUT", "Header": {"X-Test": ["one", "two"], "User-Agent": ["probe/1"]},
            "Body": "{\"ping\":1}"
        }),
    )
    .assert(200, "");
    let c = check_reaches(&s, "custom", "warning");
    assert_eq!(
        c["Output"],
        format!("HTTP PUT {}: 429 Whatever Output: hello", svc.url())
    );
    let seen = svc.seen();
    let req = &seen[0];
    assert!(
        req.head.starts_with("PUT /health HTTP/1.1\r\n"),
        "{}",
        req.head
    );
    assert!(
        req.head.contains("X-Test: one\r\n") && req.head.contains("X-Test: two"),
        "{}",
        req.head
    );
    assert!(req.head.contains("User-Agent: probe/1"), "{}", req.head);
    assert!(!req.head.contains("Consul Health Check"), "{}", req.head);
    assert_eq!(req.body, b"{\"ping\":1}");
    // A session may be bound to a warning check, and warning does not invalidate it.
    let sid = session_create(&s, &json!({"NodeChecks": ["serfHealth", "custom"]}));
    svc.answer(200);
    check_reaches(&s, "custom", "passing");
    assert!(session_info(&s, &sid).is_some());
}

#[test]
fn http_check_without_an_answer_is_critical_with_the_error() {
    let s = start();
    let svc = Service::start(0); // closes without answering
    put_json(
        &s,
        "/v1/agent/check/register",
        &json!({"Name": "silent", "HTTP": svc.url(), "Interval": "1s", "Status": "passing"}),
    )
    .assert(200, "");
    let c = check_reaches(&s, "silent", "critical");
    let out = c["Output"].as_str().unwrap();
    assert!(out.starts_with(&format!("GET {:?}: ", svc.url())), "{out}");
    assert!(out.contains("EOF"), "{out}");
}

#[test]
fn tcp_check_passes_while_the_port_listens_and_takes_a_bound_session_when_it_stops() {
    let s = start();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    put_json(
        &s,
        "/v1/agent/check/register",
        &json!({"Name": "port", "TCP": addr.to_string(), "Interval": "1s", "Timeout": "1s"}),
    )
    .assert(200, "");
    let c = check_reaches(&s, "port", "passing");
    assert_eq!(c["Output"], format!("TCP connect {addr}: Success"));
    assert_eq!(c["Type"], "tcp");
    let sid = session_create(&s, &json!({"NodeChecks": ["serfHealth", "port"]}));
    acquire(&s, "tcp-lock", &sid, b"x").assert(200, "true");
    let closed_at = Instant::now();
    drop(listener);
    let c = check_reaches(&s, "port", "critical");
    let out = c["Output"].as_str().unwrap();
    assert!(out.starts_with(&format!("dial tcp {addr}: ")), "{out}");
    eventually("the bound session invalidated", || {
        session_info(&s, &sid).is_none().then_some(())
    });
    eprintln!(
        "tcp check: session lost {:?} after the port closed (interval 1s)",
        closed_at.elapsed()
    );
}

#[test]
fn a_deregistered_check_is_no_longer_probed_and_a_restart_forgets_them_all() {
    let s = start();
    let svc = Service::start(200);
    put_json(
        &s,
        "/v1/agent/check/register",
        &json!({"Name": "gone", "HTTP": svc.url(), "Interval": "1s"}),
    )
    .assert(200, "");
    check_reaches(&s, "gone", "passing");
    put(&s, "/v1/agent/check/deregister/gone", b"").assert(200, "");
    // The one probe already under way (a check is never probed twice at once) may still
    // land; a schedule still running would probe twice more within 2.5 s of a 1 s interval.
    let settled = svc.seen().len();
    let wait_until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < wait_until {
        assert!(
            svc.seen().len() <= settled + 1,
            "probed after deregistration"
        );
        thread::sleep(Duration::from_millis(50)); // observing that nothing happens
    }
    // Same for a restart, which loses every check.
    put_json(
        &s,
        "/v1/agent/check/register",
        &json!({"Name": "again", "HTTP": svc.url(), "Interval": "1s"}),
    )
    .assert(200, "");
    check_reaches(&s, "again", "passing");
    s.restart();
    let settled = svc.seen().len();
    let wait_until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < wait_until {
        assert!(svc.seen().len() <= settled + 1, "probed after the restart");
        thread::sleep(Duration::from_millis(50)); // observing that nothing happens
    }
    assert!(agent_check(&s, "again").is_none());
}

#[test]
fn http_check_follows_redirects_unless_disable_redirects() {
    let s = start();
    let svc = Service::start(200);
    let moved = format!("http://{}/moved", svc.addr);
    put_json(
        &s,
        "/v1/agent/check/register",
        &json!({"Name": "follows", "HTTP": moved, "Interval": "1s"}),
    )
    .assert(200, "");
    put_json(
        &s,
        "/v1/agent/check/register",
        &json!({"Name": "stays", "HTTP": moved, "Interval": "1s", "DisableRedirects": true}),
    )
    .assert(200, "");
    // Go's client follows the 301: the output names the check's URL and the final answer.
    let c = check_reaches(&s, "follows", "passing");
    assert_eq!(
        c["Output"],
        format!("HTTP GET {moved}: 200 Whatever Output: hello")
    );
    let c = eventually("the non-following check probed", || {
        agent_check(&s, "stays").filter(|c| c["Output"] != "")
    });
    assert_eq!(c["Status"], "critical");
    assert_eq!(
        c["Output"],
        format!("HTTP GET {moved}: 301 Moved Permanently Output: ")
    );
}

/// `https://` checks: verified against the server's own `--tls-ca` (the agent's `ca_file`),
/// refused without a CA that signed the service's certificate, accepted with `TLSSkipVerify`.
/// The service is another dev server's HTTPS listener.
#[test]
fn https_check_verifies_with_the_servers_ca_unless_tls_skip_verify() {
    use baton_devserver::certs::{CertAuthority, CertKind, LeafOptions};
    use baton_devserver::TlsConfig;
    let dir = std::env::temp_dir().join(format!("baton-https-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ca = CertAuthority::create("consul", 30).unwrap();
    let ca_files = ca.write(&dir).unwrap();
    let mut leaf = LeafOptions::new(CertKind::Server);
    leaf.ip_addresses.push([127, 0, 0, 1].into());
    let leaf_files = ca.issue_into(&leaf, &dir).unwrap();
    let tls = TlsConfig {
        cert_file: leaf_files.cert,
        key_file: leaf_files.key,
        ca_file: Some(ca_files.cert),
        verify_incoming: false,
    };
    // The server whose checks run with the CA.
    let with_ca = start_with(|c| {
        c.https_addr = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        c.tls = Some(tls.clone());
    });
    let url = format!("https://{}/v1/status/leader", with_ca.https_addr().unwrap());
    put_json(
        &with_ca,
        "/v1/agent/check/register",
        &json!({"Name": "verified", "HTTP": url, "Interval": "1s"}),
    )
    .assert(200, "");
    let c = check_reaches(&with_ca, "verified", "passing");
    let out = c["Output"].as_str().unwrap();
    assert!(
        out.starts_with(&format!("HTTP GET {url}: 200 OK Output: ")),
        "{out}"
    );
    assert!(out.contains("127.0.0.1:8300"), "{out}");
    // A server without a CA: the same URL is refused unless TLSSkipVerify.
    let without = start();
    put_json(
        &without,
        "/v1/agent/check/register",
        &json!({"Name": "unverified", "HTTP": url, "Interval": "1s", "Status": "passing"}),
    )
    .assert(200, "");
    put_json(
        &without,
        "/v1/agent/check/register",
        &json!({"Name": "skip", "HTTP": url, "Interval": "1s", "TLSSkipVerify": true}),
    )
    .assert(200, "");
    let c = check_reaches(&without, "unverified", "critical");
    let out = c["Output"].as_str().unwrap();
    assert!(out.starts_with(&format!("GET {url:?}: ")), "{out}");
    assert!(out.contains("unknown authority"), "{out}");
    let c = check_reaches(&without, "skip", "passing");
    assert!(
        c["Output"]
            .as_str()
            .unwrap()
            .starts_with(&format!("HTTP GET {url}: 200 OK Output: ")),
        "{c}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
