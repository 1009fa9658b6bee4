//! The fault proxy (faults that hit one client alone): real HTTP through a `FaultProxy` to a
//! real dev server, with direct clients alongside, and the `baton-devserver proxy` process with
//! its `/_proxy/` control API.

mod common;

use std::io::{self, BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use baton_devserver::{FaultProxy, ProxyFaults};
use common::*;

/// How long a request must stay unanswered to count as "hanging".
const HANG: Duration = Duration::from_millis(300);

fn local0() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

fn proxy_for(s: &DevServer) -> FaultProxy {
    FaultProxy::start(s.addr(), local0()).expect("proxy starts")
}

/// Sends `req` to `addr` from another thread.
fn spawn_to(req: Req, addr: SocketAddr) -> mpsc::Receiver<io::Result<Response>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(req.try_send_to(addr));
    });
    rx
}

#[track_caller]
fn assert_timed_out(r: &io::Result<Response>) {
    assert!(
        matches!(r, Err(e) if is_timeout(e)),
        "expected silence (a read timeout), got {r:?}"
    );
}

#[track_caller]
fn assert_reset(r: &io::Result<Response>) {
    assert!(
        matches!(r, Err(e) if e.kind() == io::ErrorKind::ConnectionReset),
        "expected a connection reset, got {r:?}"
    );
}

#[test]
fn forwards_requests_both_ways_and_counts_them() {
    let s = start();
    let p = proxy_for(&s);
    assert_eq!(p.upstream(), s.addr());
    assert_eq!(p.faults(), ProxyFaults::default());
    Req::put("/v1/kv/k")
        .body("through")
        .send_to(p.addr())
        .assert(200, "true");
    assert_eq!(entry_value(&kv_entry(&s, "k").unwrap()), b"through");
    // Several requests on one kept-alive connection.
    let mut c = Conn::open(p.addr()).unwrap();
    for _ in 0..3 {
        let r = c.send(&Req::get("/v1/kv/k")).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(entry_value(&r.json()[0]), b"through");
    }
    let st = p.stats();
    assert_eq!(st.accepted, 2, "{st:?}");
    assert!(st.bytes_to_upstream > 0 && st.bytes_to_client > 0, "{st:?}");
    // The first (`Connection: close`) connection winds down on its own; `c` stays open.
    assert!(
        poll_until(TIMEOUT, || p.stats().open == 1).is_some(),
        "{:?}",
        p.stats()
    );
    drop(c);
    assert!(
        poll_until(TIMEOUT, || p.stats().open == 0).is_some(),
        "closed connections still counted open: {:?}",
        p.stats()
    );
    // The server saw the proxied requests.
    assert!(s.request_counts().total >= 4);
}

#[test]
fn blackhole_silences_the_proxied_client_while_direct_clients_get_answers() {
    let s = start();
    let p = proxy_for(&s);
    let mut c = Conn::open(p.addr()).unwrap();
    assert_eq!(c.send(&Req::get("/v1/status/leader")).unwrap().status, 200);
    p.blackhole();
    assert!(p.faults().blackhole);
    // An open connection: the request goes unanswered, and the connection is not reset.
    c.write_req(&Req::get("/v1/kv/k")).unwrap();
    assert_timed_out(&c.read_response(HANG, false));
    // A new connection is accepted but hears nothing either.
    let fresh = Req::get("/v1/status/leader")
        .timeout(HANG)
        .try_send_to(p.addr());
    assert_timed_out(&fresh);
    // Direct clients are unaffected.
    assert_eq!(get(&s, "/v1/status/leader").status, 200);
    kv_set(&s, "k", b"written-meanwhile");
    assert!(p.stats().accepted >= 2);
}

#[test]
fn heal_delivers_held_requests_and_restores_forwarding() {
    let s = start();
    let p = proxy_for(&s);
    let mut c = Conn::open(p.addr()).unwrap();
    assert_eq!(c.send(&Req::get("/v1/status/leader")).unwrap().status, 200);
    p.blackhole();
    c.write_req(&Req::get("/v1/kv/k")).unwrap();
    assert_timed_out(&c.read_response(HANG, false));
    // Written directly while the proxied request is held: the held request reaches the server
    // only at heal, so it sees this value.
    kv_set(&s, "k", b"late");
    p.heal();
    assert_eq!(p.faults(), ProxyFaults::default());
    let r = c.read_response(TIMEOUT, false).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(entry_value(&r.json()[0]), b"late");
    // The same connection and new ones work again.
    assert_eq!(c.send(&Req::get("/v1/status/leader")).unwrap().status, 200);
    assert_eq!(Req::get("/v1/status/leader").send_to(p.addr()).status, 200);
}

#[test]
fn reset_fails_an_in_flight_blocking_query_promptly_and_later_connections_work() {
    let s = start();
    let p = proxy_for(&s);
    kv_set(&s, "k", b"v");
    let idx = modify_index(&s, "k");
    s.reset_request_counts();
    // The client's own deadline is far beyond the wait for the reset below.
    let rx = spawn_to(
        Req::get(&format!("/v1/kv/k?index={idx}&wait=5m")).timeout(Duration::from_secs(120)),
        p.addr(),
    );
    assert!(
        poll_until(TIMEOUT, || s.request_counts().total >= 1).is_some(),
        "the blocking query never reached the server"
    );
    p.reset();
    let r = rx
        .recv_timeout(TIMEOUT)
        .expect("the blocking query still hangs after reset");
    assert_reset(&r);
    // Reset changes no setting; the proxy keeps serving.
    assert_eq!(p.faults(), ProxyFaults::default());
    let r = Req::get("/v1/kv/k").send_to(p.addr());
    assert_eq!(r.status, 200);
    assert_eq!(entry_value(&r.json()[0]), b"v");
}

#[test]
fn reset_also_ends_connections_a_blackhole_holds() {
    let s = start();
    let p = proxy_for(&s);
    let mut c = Conn::open(p.addr()).unwrap();
    assert_eq!(c.send(&Req::get("/v1/status/leader")).unwrap().status, 200);
    p.blackhole();
    c.write_req(&Req::get("/v1/status/leader")).unwrap();
    assert_timed_out(&c.read_response(HANG, false));
    p.reset();
    assert_reset(&c.read_response(TIMEOUT, false));
    // The blackhole itself is still on for new connections.
    assert!(p.faults().blackhole);
    assert_timed_out(
        &Req::get("/v1/status/leader")
            .timeout(HANG)
            .try_send_to(p.addr()),
    );
    p.heal();
    assert_eq!(Req::get("/v1/status/leader").send_to(p.addr()).status, 200);
}

#[test]
fn delay_and_jitter_still_deliver_answers() {
    let s = start();
    let p = proxy_for(&s);
    p.delay(Duration::from_millis(100));
    assert_eq!(p.faults().delay, Duration::from_millis(100));
    assert_eq!(p.faults().jitter, Duration::ZERO);
    Req::put("/v1/kv/d")
        .body("slow")
        .send_to(p.addr())
        .assert(200, "true");
    p.delay_jitter(Duration::from_millis(50), Duration::from_millis(30));
    assert_eq!(p.faults().jitter, Duration::from_millis(30));
    let mut c = Conn::open(p.addr()).unwrap();
    for _ in 0..3 {
        let r = c.send(&Req::get("/v1/kv/d")).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(entry_value(&r.json()[0]), b"slow");
    }
    p.delay(Duration::ZERO);
    assert_eq!(p.faults(), ProxyFaults::default());
    assert_eq!(c.send(&Req::get("/v1/status/leader")).unwrap().status, 200);
    // Heal removes a delay too.
    p.delay_jitter(Duration::from_millis(20), Duration::from_millis(10));
    p.heal();
    assert_eq!(p.faults(), ProxyFaults::default());
    assert_eq!(c.send(&Req::get("/v1/status/leader")).unwrap().status, 200);
}

#[test]
fn drop_after_closes_an_open_connection_once_its_budget_is_spent() {
    let s = start();
    let p = proxy_for(&s);
    let mut c = Conn::open(p.addr()).unwrap();
    assert_eq!(c.send(&Req::get("/v1/status/leader")).unwrap().status, 200);
    p.drop_after(5);
    assert_eq!(p.faults().drop_after, Some(5));
    // Five bytes of the request pass, then the connection is closed: no answer comes.
    c.write_req(&Req::get("/v1/status/leader")).unwrap();
    let r = c.read_response(TIMEOUT, false);
    assert!(
        matches!(&r, Err(e) if !is_timeout(e)),
        "expected the connection closed, got {r:?}"
    );
    // Direct clients are unaffected; after heal the proxy forwards in full.
    assert_eq!(get(&s, "/v1/status/leader").status, 200);
    p.heal();
    assert_eq!(Req::get("/v1/status/leader").send_to(p.addr()).status, 200);
}

#[test]
fn drop_after_zero_closes_idle_connections_at_once() {
    let s = start();
    let p = proxy_for(&s);
    let mut c = Conn::open(p.addr()).unwrap();
    assert_eq!(c.send(&Req::get("/v1/status/leader")).unwrap().status, 200);
    p.drop_after(0);
    assert!(c.closed_within(TIMEOUT), "idle connection left open");
    assert!(poll_until(TIMEOUT, || p.stats().open == 0).is_some());
}

#[test]
fn drop_after_forwards_exactly_the_budget_on_a_new_connection() {
    // A raw upstream, to count the bytes that arrive.
    let upstream = TcpListener::bind(local0()).unwrap();
    let up_addr = upstream.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let r = upstream.accept().and_then(|(mut s, _)| {
            s.set_read_timeout(Some(TIMEOUT))?;
            let mut got = Vec::new();
            s.read_to_end(&mut got).map(|_| got)
        });
        let _ = tx.send(r);
    });
    let p = FaultProxy::start(up_addr, local0()).unwrap();
    p.drop_after(10);
    let mut c = Conn::open(p.addr()).unwrap();
    let sent: Vec<u8> = (0..100u8).collect();
    c.write_raw(&sent).unwrap();
    let got = rx
        .recv_timeout(TIMEOUT)
        .expect("upstream saw no close")
        .expect("upstream read");
    assert_eq!(got, &sent[..10]);
    assert!(c.closed_within(TIMEOUT), "client connection left open");
    assert_eq!(p.stats().bytes_to_upstream, 10);
}

#[test]
fn a_refused_upstream_resets_the_client_instead_of_leaving_it_silent() {
    // Bound, never listening: connections to it are refused, and the port stays ours (a
    // listener bound and dropped gave its port back, and a parallel test could take it).
    let closed = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    closed.bind(&local0().into()).unwrap();
    let refusing = closed.local_addr().unwrap().as_socket().unwrap();
    let p = FaultProxy::start(refusing, local0()).unwrap();
    let r = Req::get("/v1/status/leader").try_send_to(p.addr());
    assert!(
        matches!(&r, Err(e) if !is_timeout(e)),
        "expected a connection error, got {r:?}"
    );
}

#[test]
fn stop_closes_the_listener_and_every_connection() {
    let s = start();
    let p = proxy_for(&s);
    let addr = p.addr();
    let mut c = Conn::open(addr).unwrap();
    assert_eq!(c.send(&Req::get("/v1/status/leader")).unwrap().status, 200);
    p.stop();
    assert!(c.closed_within(TIMEOUT), "connection left open after stop");
    assert!(TcpStream::connect_timeout(&addr, TIMEOUT).is_err());
    // The server itself goes on.
    assert_eq!(get(&s, "/v1/status/leader").status, 200);
}

// ----- the `baton-devserver proxy` process -----

/// The child process, killed if a test fails before stopping it.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `baton-devserver proxy --to <upstream>` and reads its ready line.
fn start_proxy_process(upstream: SocketAddr) -> (Child, SocketAddr, SocketAddr) {
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
            .args(["proxy", "--to", &upstream.to_string()])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("baton-devserver starts"),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut line = String::new();
        let mut reader = BufReader::new(stdout);
        let _ = tx.send(reader.read_line(&mut line).map(|_| line));
        // Keep the pipe open for the child's life.
        let _ = reader.read_to_end(&mut Vec::new());
    });
    let line = rx
        .recv_timeout(TIMEOUT)
        .expect("no ready line")
        .expect("reading stdout");
    let mut fields = line.trim_end().split(' ');
    let mut field = |name: &str| -> SocketAddr {
        let f = fields.next().unwrap_or_default();
        f.strip_prefix(name)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("bad ready line {line:?}"))
    };
    let proxy = field("BATON_PROXY_ADDR=");
    let control = field("BATON_PROXY_CONTROL=");
    assert!(fields.next().is_none(), "bad ready line {line:?}");
    (child, proxy, control)
}

#[track_caller]
fn control_ok(control: SocketAddr, method: &str, path: &str) {
    let r = Req::new(method, path).send_to(control);
    assert_eq!((r.status, r.text()), (200, "true\n".to_string()), "{path}");
    assert_eq!(r.json(), json!(true));
}

#[track_caller]
fn control_bad(control: SocketAddr, path: &str, names: &str) {
    let r = Req::put(path).send_to(control);
    assert_eq!(r.status, 400, "{path}: {}", r.text());
    assert!(
        r.text().contains(names),
        "{path}: message {:?} does not name {names:?}",
        r.text()
    );
}

fn status(control: SocketAddr) -> Value {
    let r = Req::get("/_proxy/status").send_to(control);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

#[test]
fn proxy_process_prints_its_addresses_and_obeys_its_control_api() {
    let s = start();
    let (mut child, proxy, control) = start_proxy_process(s.addr());
    let st = status(control);
    assert_eq!(st["mode"], "forward", "{st}");
    assert_eq!(st["upstream"], s.addr().to_string(), "{st}");
    assert_eq!(st["drop_after"], Value::Null, "{st}");
    Req::put("/v1/kv/p")
        .body("x")
        .send_to(proxy)
        .assert(200, "true");

    // Blackhole, then heal.
    control_ok(control, "PUT", "/_proxy/blackhole");
    assert_eq!(status(control)["mode"], "blackhole");
    assert_timed_out(
        &Req::get("/v1/status/leader")
            .timeout(HANG)
            .try_send_to(proxy),
    );
    assert_eq!(get(&s, "/v1/status/leader").status, 200);
    control_ok(control, "PUT", "/_proxy/heal");
    assert_eq!(status(control)["mode"], "forward");
    assert_eq!(Req::get("/v1/kv/p").send_to(proxy).status, 200);

    // Delay, with and without jitter.
    control_ok(control, "PUT", "/_proxy/delay?d=50ms&jitter=20ms");
    let st = status(control);
    assert_eq!(
        (&st["delay"], &st["jitter"]),
        (&json!("50ms"), &json!("20ms"))
    );
    assert_eq!(Req::get("/v1/kv/p").send_to(proxy).status, 200);
    control_ok(control, "PUT", "/_proxy/delay?d=0s");
    let st = status(control);
    assert_eq!((&st["delay"], &st["jitter"]), (&json!("0s"), &json!("0s")));

    // Bad parameters are refused by name and change nothing.
    control_bad(control, "/_proxy/delay?d=fast", "?d=");
    control_bad(control, "/_proxy/delay", "?d=");
    control_bad(control, "/_proxy/delay?d=-5ms", "?d=");
    control_bad(control, "/_proxy/delay?d=5ms&jitter=lots", "?jitter=");
    control_bad(control, "/_proxy/drop-after?bytes=many", "?bytes=");
    control_bad(control, "/_proxy/drop-after?bytes=-1", "?bytes=");
    control_bad(control, "/_proxy/drop-after", "?bytes=");
    assert_eq!(status(control)["delay"], "0s");
    let r = Req::put("/_proxy/nonsense").send_to(control);
    assert_eq!(r.status, 404, "{}", r.text());

    // Drop after N bytes: a kept-alive connection is cut mid-request.
    let mut c = Conn::open(proxy).unwrap();
    assert_eq!(c.send(&Req::get("/v1/status/leader")).unwrap().status, 200);
    control_ok(control, "PUT", "/_proxy/drop-after?bytes=3");
    assert_eq!(status(control)["drop_after"], 3);
    c.write_req(&Req::get("/v1/status/leader")).unwrap();
    let r = c.read_response(TIMEOUT, false);
    assert!(
        matches!(&r, Err(e) if !is_timeout(e)),
        "expected the connection closed, got {r:?}"
    );
    control_ok(control, "PUT", "/_proxy/heal");

    // Reset ends an in-flight blocking query.
    let idx = modify_index(&s, "p");
    s.reset_request_counts();
    let rx = spawn_to(
        Req::get(&format!("/v1/kv/p?index={idx}&wait=5m")).timeout(Duration::from_secs(120)),
        proxy,
    );
    assert!(poll_until(TIMEOUT, || s.request_counts().total >= 1).is_some());
    control_ok(control, "POST", "/_proxy/reset");
    assert_reset(
        &rx.recv_timeout(TIMEOUT)
            .expect("query still hangs after reset"),
    );

    // Counters.
    let st = status(control);
    assert!(st["connections"]["accepted"].as_u64().unwrap() >= 6, "{st}");
    assert!(st["bytes"]["to_upstream"].as_u64().unwrap() > 0, "{st}");
    assert!(st["bytes"]["to_client"].as_u64().unwrap() > 0, "{st}");

    // SIGTERM ends it cleanly.
    let pid = nix::unistd::Pid::from_raw(child.0.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut exit = None;
    poll_until(TIMEOUT, || {
        exit = child.0.try_wait().unwrap();
        exit.is_some()
    });
    let exit = exit.expect("still running after SIGTERM");
    assert!(exit.success(), "{exit:?}");
    assert!(TcpStream::connect_timeout(&proxy, TIMEOUT).is_err());
}

#[test]
fn proxy_process_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .args(["proxy", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "--to HOST:PORT",
        "BATON_PROXY_ADDR=",
        "PUT /_proxy/blackhole",
        "PUT /_proxy/delay?d=50ms",
        "PUT /_proxy/drop-after?bytes=N",
        "PUT /_proxy/reset",
        "PUT /_proxy/heal",
        "GET /_proxy/status",
    ] {
        assert!(text.contains(want), "--help lacks {want:?}:\n{text}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .arg("proxy")
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--to"));
    let out = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("baton-devserver proxy --to"));
}
