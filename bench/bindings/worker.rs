//! The Rust worker of `make bench-bindings` (bench/bindings/run.py drives it; the C, Python and
//! Node workers next to it do the same in their language).
//!
//! ```text
//! bench-bindings-rust ADDR cycles N KEY    N uncontended acquire+release cycles on KEY
//! bench-bindings-rust ADDR handoff N KEY   N hand-offs of KEY between two holders
//! bench-bindings-rust ADDR floor N KEY     N cycles of the floor client (below)
//! bench-bindings-rust ADDR floor-txn N KEY N cycles of the txn floor client (below)
//! ```
//!
//! ADDR is what a user gives: `HOST:PORT` or `http://HOST:PORT` (plain HTTP), `https://HOST:PORT`
//! (TLS, trusting the CA file named by `CONSUL_CACERT`), or `unix:///PATH` (a unix socket). The
//! baton client is built as `ClientBuilder::from_env().address(ADDR)`, so it reads
//! `CONSUL_CACERT` (and every other `CONSUL_*` variable run.py leaves set: none but that one) as
//! an application does; the floor clients take the same address and the same CA file.
//!
//! Prints one line, `RESULT {json}`: for `cycles` and `floor`, `{"cycles", "secs", "p50_us",
//! "p99_us", "cpu_secs"}` (the latency of each whole cycle; the process's user+sys CPU time
//! over the measured cycles); for `handoff`, `{"rounds", "p50_us", "p99_us"}` (from the
//! holder's `release()` call to the waiter's `acquire()` returning).
//!
//! The floor client is what the wire allows: on one keep-alive connection, `PUT
//! /v1/kv/KEY?acquire=SESSION` then `PUT /v1/kv/KEY?release=SESSION`, no JSON, no checks (the
//! answer is read to its `Content-Length` and not looked at), no client library. Every other
//! figure is also a ratio to it. Over `https://` it is the TLS floor: the same bytes through a
//! rustls client connection (the rustls of the workspace, its `ring` provider and protocol
//! versions, as ureq configures them for baton), written with one `write` per request and read
//! through a buffer, so what it adds over plain TCP is TLS itself; over `unix://` the same bytes
//! on a `UnixStream`.
//!
//! The txn floor client sends, the same raw way, the requests baton itself sends for a cycle
//! on Consul 1.6.2 and later: `PUT /v1/txn` with a `check-index` and a `lock` op, then `PUT
//! /v1/txn` with an `unlock` op (the flags and ops of `baton::lock`). The one thing it reads
//! from an answer is the key's `ModifyIndex`, found by a string search, for the next check.
//! `rust/floor-txn` is then what baton's client side costs, and `floor-txn/floor` what its
//! requests cost the server over `?acquire=`/`?release=` (on loopback, where the server's own
//! time is most of a cycle, the second is most of `rust/floor`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use baton::{Client, ClientBuilder};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// The `p` quantile (0..=1) of sorted microsecond figures.
fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// User+sys CPU time of this process so far (every thread, ended ones included), in seconds.
#[allow(unsafe_code)] // one libc call; the workspace denies unsafe for the library crates
fn cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The floor clients' connection: plain TCP, TLS over TCP, or a unix socket.
enum Conn {
    Tcp(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
    Unix(UnixStream),
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Tcp(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
            Conn::Unix(s) => s.flush(),
        }
    }
}

/// The TLS settings of the floor over `https://`: the CA file of `CONSUL_CACERT` (as the
/// baton clients read it), rustls's `ring` provider and every protocol version it has (what
/// ureq gives baton's connections).
fn tls_config() -> Arc<rustls::ClientConfig> {
    let ca = std::env::var("CONSUL_CACERT")
        .expect("an https:// address needs CONSUL_CACERT (the CA file to trust)");
    let mut roots = rustls::RootCertStore::empty();
    for cert in
        CertificateDer::pem_file_iter(&ca).unwrap_or_else(|e| panic!("CONSUL_CACERT {ca}: {e}"))
    {
        roots
            .add(cert.expect("a PEM certificate"))
            .expect("a CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// The floor client's one keep-alive connection.
struct Wire {
    io: BufReader<Conn>,
    host: String,
}

impl Wire {
    /// Connects to `addr` (`HOST:PORT`, `http://`, `https://` or `unix://`; see the module
    /// docs); over TLS, completes the handshake before returning.
    fn connect(addr: &str) -> Wire {
        let addr = addr.trim_end_matches('/');
        let tcp = |host: &str| {
            let s = TcpStream::connect(host).expect("connect");
            s.set_nodelay(true).expect("nodelay");
            s
        };
        let (conn, host) = if let Some(path) = addr.strip_prefix("unix://") {
            let s = UnixStream::connect(path)
                .unwrap_or_else(|e| panic!("connect to the unix socket {path}: {e}"));
            (Conn::Unix(s), "localhost".to_string())
        } else if let Some(host) = addr.strip_prefix("https://") {
            let name = host.rsplit_once(':').map_or(host, |(h, _)| h);
            let name = ServerName::try_from(name.to_string()).expect("a TLS server name");
            let tls = rustls::ClientConnection::new(tls_config(), name).expect("TLS client");
            let mut s = rustls::StreamOwned::new(tls, tcp(host));
            while s.conn.is_handshaking() {
                s.conn.complete_io(&mut s.sock).expect("TLS handshake");
            }
            (Conn::Tls(Box::new(s)), host.to_string())
        } else {
            let host = addr.trim_start_matches("http://");
            (Conn::Tcp(tcp(host)), host.to_string())
        };
        Wire {
            io: BufReader::new(conn),
            host,
        }
    }

    /// Sends `PUT path` with `body` and reads the whole answer; returns its body.
    fn put(&mut self, path: &str, body: &str) -> Vec<u8> {
        self.call("PUT", path, body)
    }

    /// Sends `method path` with `body` and reads the whole answer; returns its body.
    fn call(&mut self, method: &str, path: &str, body: &str) -> Vec<u8> {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        let out = self.io.get_mut();
        out.write_all(req.as_bytes()).expect("write");
        out.flush().expect("flush");
        let mut len = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            self.io.read_line(&mut line).expect("read");
            assert!(!line.is_empty(), "connection closed");
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    len = value.trim().parse().expect("Content-Length");
                }
            }
        }
        let mut body = vec![0; len];
        self.io.read_exact(&mut body).expect("read body");
        body
    }
}

/// The floor client (see the module docs): `n` cycles after the same warm-up as `cycles`.
fn floor(addr: &str, n: usize, key: &str) -> String {
    let mut w = Wire::connect(addr);
    let id = session_of(&w.put("/v1/session/create", r#"{"TTL":"60s","LockDelay":"0s"}"#));
    let acquire = format!("/v1/kv/{key}?acquire={id}");
    let release = format!("/v1/kv/{key}?release={id}");
    let result = measure(n, || {
        w.put(&acquire, "");
        w.put(&release, "");
    });
    w.put(&format!("/v1/session/destroy/{id}"), "");
    result
}

/// The lock flags baton writes (`baton::lock`'s `LOCK_FLAG_VALUE`, Go's `api.LockFlagValue`).
const LOCK_FLAGS: u64 = 0x2ddccbc058a50c18;

/// The txn floor client (see the module docs): `n` cycles after the same warm-up.
fn floor_txn(addr: &str, n: usize, key: &str) -> String {
    let mut w = Wire::connect(addr);
    let id = session_of(&w.put("/v1/session/create", r#"{"TTL":"60s","LockDelay":"0s"}"#));
    let unlock = format!(
        r#"[{{"KV":{{"Verb":"unlock","Key":"{key}","Value":"","Flags":{LOCK_FLAGS},"Session":"{id}"}}}}]"#
    );
    let lock_op = format!(
        r#"{{"KV":{{"Verb":"lock","Key":"{key}","Value":"","Flags":{LOCK_FLAGS},"Session":"{id}"}}}}"#
    );
    // The key as it is (an earlier round may have left it): its index, or that it is absent.
    let entry = w.call("GET", &format!("/v1/kv/{key}"), "");
    let mut check = if entry.is_empty() {
        format!(r#"{{"KV":{{"Verb":"check-not-exists","Key":"{key}"}}}}"#)
    } else {
        let index = modify_index(&entry);
        format!(r#"{{"KV":{{"Verb":"check-index","Key":"{key}","Index":{index}}}}}"#)
    };
    let result = measure(n, || {
        w.put("/v1/txn", &format!("[{check},{lock_op}]"));
        let released = w.put("/v1/txn", &unlock);
        let index = modify_index(&released);
        check = format!(r#"{{"KV":{{"Verb":"check-index","Key":"{key}","Index":{index}}}}}"#);
    });
    w.put(&format!("/v1/session/destroy/{id}"), "");
    result
}

/// The `"ID"` of a session create's answer (a string search: the floors parse no JSON).
fn session_of(created: &[u8]) -> String {
    let created = std::str::from_utf8(created).expect("utf-8");
    created
        .split('"')
        .skip_while(|s| *s != "ID")
        .nth(2)
        .expect("a session ID")
        .to_string()
}

/// The first `"ModifyIndex"` of a txn or KV answer (a string search); panics without one.
fn modify_index(answer: &[u8]) -> u64 {
    let text = std::str::from_utf8(answer).expect("utf-8");
    let at = text
        .find("\"ModifyIndex\"")
        .unwrap_or_else(|| panic!("no ModifyIndex in the txn answer {text}"));
    let digits: String = text[at + "\"ModifyIndex\"".len()..]
        .trim_start_matches([':', ' '])
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().expect("a ModifyIndex")
}

/// Runs `cycle` `WARM` times, then `n` measured times; the `RESULT` of a cycles run.
fn measure(n: usize, mut cycle: impl FnMut()) -> String {
    for _ in 0..WARM {
        cycle();
    }
    let mut lat = Vec::with_capacity(n);
    let cpu = cpu_secs();
    let start = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        cycle();
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_secs() - cpu;
    lat.sort_by(f64::total_cmp);
    format!(
        r#"{{"cycles": {n}, "secs": {secs}, "p50_us": {}, "p99_us": {}, "cpu_secs": {cpu}}}"#,
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    )
}

/// Warm-up cycles before measuring (see run.py).
const WARM: usize = 300;

/// A client as an application makes one: the `CONSUL_*` environment (`CONSUL_CACERT` over
/// `https://`), then the address.
fn client(addr: &str) -> Client {
    ClientBuilder::from_env()
        .address(addr)
        .build()
        .expect("client")
}

const LONG: Option<Duration> = Some(Duration::from_secs(30));

fn cycles(addr: &str, n: usize, key: &str) -> String {
    let c = client(addr);
    let lock = c.lock(key).expect("lock");
    // Warm-up: the session exists, the connection is open, the key is known (WARM: see run.py).
    let result = measure(n, || {
        assert!(lock.acquire(LONG, None).expect("acquire"));
        lock.release().expect("release");
    });
    c.close(Duration::from_secs(5));
    result
}

fn handoff(addr: &str, rounds: usize, key: &str) -> String {
    let (a, b) = (client(addr), client(addr));
    let la = a.lock(key).expect("lock");
    let lb = b.lock(key).expect("lock");
    assert!(la.acquire(LONG, None).expect("acquire"));
    let mut lat = Vec::with_capacity(rounds);
    let (mut holder, mut waiter) = (&la, &lb);
    for _ in 0..rounds {
        std::thread::scope(|s| {
            let (tx, rx) = mpsc::channel();
            let w = waiter;
            let t = std::thread::Builder::new()
                .name("bench-waiter".into())
                .spawn_scoped(s, move || {
                    tx.send(()).expect("started");
                    assert!(w.acquire(LONG, None).expect("acquire"));
                    Instant::now()
                })
                .expect("thread");
            rx.recv().expect("started");
            // Let the waiter find the key held and park on it.
            std::thread::sleep(Duration::from_millis(20));
            let released = Instant::now();
            assert!(holder.release().expect("release"));
            let acquired = t.join().expect("waiter");
            lat.push(acquired.saturating_duration_since(released).as_secs_f64() * 1e6);
        });
        std::mem::swap(&mut holder, &mut waiter);
    }
    holder.release().expect("release");
    lat.sort_by(f64::total_cmp);
    a.close(Duration::from_secs(5));
    b.close(Duration::from_secs(5));
    format!(
        r#"{{"rounds": {rounds}, "p50_us": {}, "p99_us": {}}}"#,
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: bench-bindings-rust ADDR cycles|handoff|floor|floor-txn N KEY");
        std::process::exit(2);
    }
    let n: usize = args[3].parse().expect("N must be a number");
    let json = match args[2].as_str() {
        "cycles" => cycles(&args[1], n, &args[4]),
        "handoff" => handoff(&args[1], n, &args[4]),
        "floor" => floor(&args[1], n, &args[4]),
        "floor-txn" => floor_txn(&args[1], n, &args[4]),
        other => {
            eprintln!("unknown mode {other:?} (cycles, handoff, floor or floor-txn)");
            std::process::exit(2);
        }
    };
    println!("RESULT {json}");
}
