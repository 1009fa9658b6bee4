//! A small raw HTTP/1.1 client and the dev-server fixture shared by the conformance suites.
//!
//! Requests are written by hand onto a `TcpStream`; responses are parsed from the bytes on the
//! wire, keeping header names exactly as the server spelled them. Every read has a deadline, so
//! a server that stops answering fails the test instead of hanging it.
#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

pub use baton_devserver::{Config, DevServer};
pub use serde_json::{json, Value};

/// Deadline for an ordinary request (generous: the machine may be loaded).
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The `session_ttl_min` used by the default fixture.
pub const TTL_MIN: Duration = Duration::from_millis(200);
/// `Flags` used by Go's `api.Lock` (above 2^53).
pub const LOCK_FLAG: u64 = 3304740253564472344;
/// `Flags` used by Go's `api.Semaphore` (above 2^53).
pub const SEMAPHORE_FLAG: u64 = 16210313421097356768;

/// Starts a dev server with `session_ttl_min` = 200 ms and otherwise default settings.
pub fn start() -> DevServer {
    start_with(|_| {})
}

/// Whether `BATON_TEST_DEVSERVER_PRETTY` (set, not empty, not `0`) asks for dev servers that
/// pretty-print every JSON answer as `consul agent -dev` does.
pub fn pretty_from_env() -> bool {
    std::env::var("BATON_TEST_DEVSERVER_PRETTY").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Starts a dev server with the fixture defaults (pretty-printing when
/// `BATON_TEST_DEVSERVER_PRETTY` is set), then `f` applied to the config.
pub fn start_with(f: impl FnOnce(&mut Config)) -> DevServer {
    let mut config = Config {
        session_ttl_min: TTL_MIN,
        pretty: pretty_from_env(),
        ..Default::default()
    };
    f(&mut config);
    DevServer::start(config).expect("dev server starts")
}

/// One parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub reason: String,
    /// Header names exactly as sent on the wire, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Whether the body arrived with `Transfer-Encoding: chunked`.
    pub chunked: bool,
}

impl Response {
    /// First header whose name matches case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// First header whose name matches byte for byte (Go canonical case checks).
    pub fn exact_header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Asserts the header is present with exactly this name spelling and returns its value.
    pub fn canonical(&self, name: &str) -> &str {
        match self.exact_header(name) {
            Some(v) => v,
            None => panic!(
                "header {name:?} missing or not in that exact case; got {:?}",
                self.header_names()
            ),
        }
    }

    pub fn header_names(&self) -> Vec<&str> {
        self.headers.iter().map(|(k, _)| k.as_str()).collect()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): status {} body {:?}",
                self.status,
                self.text()
            )
        })
    }

    /// `X-Consul-Index`, which must be present in Go canonical case and a decimal u64.
    pub fn index(&self) -> u64 {
        let v = self.canonical("X-Consul-Index");
        v.parse()
            .unwrap_or_else(|_| panic!("X-Consul-Index {v:?} is not a u64"))
    }

    /// Whether the answer says it is JSON (`Content-Type: application/json`).
    pub fn is_json(&self) -> bool {
        self.header("Content-Type")
            .is_some_and(|t| t.starts_with("application/json"))
    }

    /// Asserts status and body. A JSON answer is compared as parsed JSON with `body` parsed
    /// too (Consul's layout varies: `-dev` indents and ends with a newline); any other answer
    /// (plain-text errors) byte for byte.
    #[track_caller]
    pub fn assert(&self, status: u16, body: &str) {
        if self.is_json() {
            let want: Value = serde_json::from_str(body).unwrap_or_else(|e| {
                panic!("expected body {body:?} is not JSON ({e}) but the answer is JSON: {self:?}")
            });
            assert_eq!(
                (self.status, self.json()),
                (status, want),
                "body {:?}, headers: {:?}",
                self.text(),
                self.headers
            );
        } else {
            assert_eq!(
                (self.status, self.text().as_str()),
                (status, body),
                "headers: {:?}",
                self.headers
            );
        }
    }

    /// Asserts status and that the body starts with `prefix`.
    #[track_caller]
    pub fn assert_prefix(&self, status: u16, prefix: &str) {
        let text = self.text();
        assert!(
            self.status == status && text.starts_with(prefix),
            "expected {status} starting with {prefix:?}, got {} {text:?}",
            self.status
        );
    }
}

/// A request to be written by hand.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub chunked: bool,
    pub timeout: Duration,
}

impl Req {
    pub fn new(method: &str, path: &str) -> Req {
        Req {
            method: method.to_string(),
            path: path.to_string(),
            headers: Vec::new(),
            body: None,
            chunked: false,
            timeout: TIMEOUT,
        }
    }

    pub fn get(path: &str) -> Req {
        Req::new("GET", path)
    }

    pub fn put(path: &str) -> Req {
        Req::new("PUT", path)
    }

    pub fn delete(path: &str) -> Req {
        Req::new("DELETE", path)
    }

    pub fn header(mut self, name: &str, value: &str) -> Req {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Req {
        self.body = Some(body.into());
        self
    }

    pub fn json(self, v: &Value) -> Req {
        self.header("Content-Type", "application/json")
            .body(serde_json::to_vec(v).unwrap())
    }

    /// Send the body with `Transfer-Encoding: chunked` and no `Content-Length`.
    pub fn chunked(mut self) -> Req {
        self.chunked = true;
        self
    }

    pub fn timeout(mut self, d: Duration) -> Req {
        self.timeout = d;
        self
    }

    fn head_bytes(&self, host: &str, close: bool) -> Vec<u8> {
        let mut h = format!("{} {} HTTP/1.1\r\nHost: {host}\r\n", self.method, self.path);
        for (k, v) in &self.headers {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
        if self.chunked {
            h.push_str("Transfer-Encoding: chunked\r\n");
        } else if let Some(b) = &self.body {
            if !self
                .headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            {
                h.push_str(&format!("Content-Length: {}\r\n", b.len()));
            }
        }
        if close {
            h.push_str("Connection: close\r\n");
        }
        h.push_str("\r\n");
        h.into_bytes()
    }

    fn body_bytes(&self) -> Vec<u8> {
        let body = self.body.clone().unwrap_or_default();
        if !self.chunked {
            return body;
        }
        let mut out = Vec::with_capacity(body.len() + 64);
        for chunk in body.chunks(16 * 1024) {
            out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            out.extend_from_slice(chunk);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    }

    /// Sends on a fresh connection (`Connection: close`); errors are returned.
    pub fn try_send_to(&self, addr: SocketAddr) -> io::Result<Response> {
        let mut conn = Conn::open(addr)?;
        let head = self.head_bytes(&addr.to_string(), true);
        let body = self.body_bytes();
        conn.stream.write_all(&head)?;
        if body.len() <= 64 * 1024 {
            conn.stream.write_all(&body)?;
        } else {
            // A server may answer (413) before reading a big body: write it from another
            // thread while this one reads the answer; write errors are expected then.
            let mut w = conn.stream.try_clone()?;
            thread::spawn(move || {
                let _ = w.write_all(&body);
            });
        }
        let head_only = self.method == "HEAD";
        let r = conn.read_response(self.timeout, head_only);
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
        r
    }

    /// Sends on a fresh connection and panics on a transport error or timeout.
    #[track_caller]
    pub fn send_to(&self, addr: SocketAddr) -> Response {
        match self.try_send_to(addr) {
            Ok(r) => r,
            Err(e) => panic!("{} {}: {e}", self.method, self.path),
        }
    }

    #[track_caller]
    pub fn send(&self, s: &DevServer) -> Response {
        self.send_to(s.addr())
    }

    /// Sends from a background thread; see [`Pending`].
    pub fn spawn(&self, s: &DevServer) -> Pending {
        let req = self.clone();
        let addr = s.addr();
        let (tx, rx) = mpsc::channel();
        let started = Instant::now();
        thread::spawn(move || {
            let r = req.try_send_to(addr);
            let _ = tx.send((r, Instant::now()));
        });
        Pending { rx, started }
    }
}

/// A request running on another thread.
pub struct Pending {
    rx: mpsc::Receiver<(io::Result<Response>, Instant)>,
    pub started: Instant,
}

impl Pending {
    /// True if no answer (or error) has arrived yet.
    pub fn still_waiting(&self) -> bool {
        matches!(self.rx.try_recv(), Err(mpsc::TryRecvError::Empty))
    }

    /// Waits up to `d` for the answer; `None` if it did not come.
    pub fn wait(&self, d: Duration) -> Option<(io::Result<Response>, Instant)> {
        self.rx.recv_timeout(d).ok()
    }

    /// Waits up to `d` for a successful answer and panics otherwise.
    #[track_caller]
    pub fn expect(&self, d: Duration) -> (Response, Instant) {
        match self.rx.recv_timeout(d) {
            Ok((Ok(r), at)) => (r, at),
            Ok((Err(e), _)) => panic!("request failed: {e}"),
            Err(_) => panic!("no answer within {d:?}"),
        }
    }
}

/// One client connection, usable for several requests (keep-alive) or raw bytes.
pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
        })
    }

    /// Writes a request without `Connection: close` (small bodies only).
    pub fn write_req(&mut self, req: &Req) -> io::Result<()> {
        let host = self.stream.peer_addr()?.to_string();
        let mut bytes = req.head_bytes(&host, false);
        bytes.extend(req.body_bytes());
        self.stream.write_all(&bytes)
    }

    pub fn send(&mut self, req: &Req) -> io::Result<Response> {
        self.write_req(req)?;
        self.read_response(req.timeout, req.method == "HEAD")
    }

    pub fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads more bytes; `Ok(0)` at EOF. Fails with `TimedOut`/`WouldBlock` at the deadline.
    fn fill(&mut self, deadline: Instant) -> io::Result<usize> {
        let now = Instant::now();
        if now >= deadline {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"));
        }
        self.stream
            .set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))?;
        let mut tmp = [0u8; 16 * 1024];
        // A socket with SO_RCVTIMEO answers EINTR after the process is stopped and continued,
        // with no handler installed (signal(7)); a CI machine pausing the runner is not an error.
        let n = loop {
            match self.stream.read(&mut tmp) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r?,
            }
        };
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n)
    }

    fn read_line(&mut self, deadline: Instant) -> io::Result<String> {
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..pos + 2).take(pos).collect();
                return String::from_utf8(line)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e));
            }
            if self.fill(deadline)? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed mid-line after {:?}",
                        String::from_utf8_lossy(&self.buf)
                    ),
                ));
            }
        }
    }

    fn read_exact_n(&mut self, n: usize, deadline: Instant) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if self.fill(deadline)? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed inside the body",
                ));
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// True if the peer has closed the connection (EOF or reset) within `d`.
    pub fn closed_within(&mut self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        loop {
            match self.fill(deadline) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if is_timeout(&e) => return false,
                Err(_) => return true,
            }
        }
    }

    /// Reads one response, with `timeout` as the deadline for all of it.
    pub fn read_response(&mut self, timeout: Duration, head_only: bool) -> io::Result<Response> {
        let deadline = Instant::now() + timeout;
        loop {
            let status_line = self.read_line(deadline)?;
            let mut parts = status_line.splitn(3, ' ');
            let version = parts.next().unwrap_or_default();
            if !version.starts_with("HTTP/1.") {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad status line {status_line:?}"),
                ));
            }
            let status: u16 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad status {status_line:?}"),
                )
            })?;
            let reason = parts.next().unwrap_or_default().to_string();
            let mut headers = Vec::new();
            loop {
                let line = self.read_line(deadline)?;
                if line.is_empty() {
                    break;
                }
                let (k, v) = line.split_once(':').ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidData, format!("bad header {line:?}"))
                })?;
                headers.push((k.to_string(), v.trim().to_string()));
            }
            if (100..200).contains(&status) {
                continue;
            }
            let mut resp = Response {
                status,
                reason,
                headers,
                body: Vec::new(),
                chunked: false,
            };
            if head_only || status == 204 || status == 304 {
                return Ok(resp);
            }
            let te = resp
                .header("Transfer-Encoding")
                .map(str::to_ascii_lowercase);
            if te.as_deref().is_some_and(|t| t.contains("chunked")) {
                resp.chunked = true;
                loop {
                    let size_line = self.read_line(deadline)?;
                    let size_hex = size_line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(size_hex, 16).map_err(|_| {
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("bad chunk size {size_line:?}"),
                        )
                    })?;
                    if size == 0 {
                        // trailers until an empty line
                        while !self.read_line(deadline)?.is_empty() {}
                        break;
                    }
                    let data = self.read_exact_n(size, deadline)?;
                    resp.body.extend(data);
                    let crlf = self.read_exact_n(2, deadline)?;
                    if crlf != b"\r\n" {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "chunk not followed by CRLF",
                        ));
                    }
                }
            } else if let Some(cl) = resp.header("Content-Length") {
                let n: usize = cl.parse().map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidData, format!("bad length {cl:?}"))
                })?;
                resp.body = self.read_exact_n(n, deadline)?;
            } else {
                while self.fill(deadline)? > 0 {}
                resp.body = std::mem::take(&mut self.buf);
            }
            return Ok(resp);
        }
    }
}

pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

// ---- convenience wrappers -------------------------------------------------------------

#[track_caller]
pub fn get(s: &DevServer, path: &str) -> Response {
    Req::get(path).send(s)
}

#[track_caller]
pub fn put(s: &DevServer, path: &str, body: &[u8]) -> Response {
    Req::put(path).body(body.to_vec()).send(s)
}

#[track_caller]
pub fn put_json(s: &DevServer, path: &str, v: &Value) -> Response {
    Req::put(path).json(v).send(s)
}

#[track_caller]
pub fn delete(s: &DevServer, path: &str) -> Response {
    Req::delete(path).send(s)
}

/// Plain KV PUT that must answer 200 `true`.
#[track_caller]
pub fn kv_set(s: &DevServer, key: &str, value: &[u8]) {
    put(s, &format!("/v1/kv/{key}"), value).assert(200, "true");
}

/// The stored entry (object) for a key, or `None` on 404.
#[track_caller]
pub fn kv_entry(s: &DevServer, key: &str) -> Option<Value> {
    let r = get(s, &format!("/v1/kv/{key}"));
    match r.status {
        404 => None,
        200 => {
            let v = r.json();
            let arr = v.as_array().expect("KV GET returns an array");
            assert_eq!(arr.len(), 1, "single-key GET returns one entry: {v}");
            Some(arr[0].clone())
        }
        other => panic!("GET /v1/kv/{key}: {other} {}", r.text()),
    }
}

/// The `ModifyIndex` of a key that must exist.
#[track_caller]
pub fn modify_index(s: &DevServer, key: &str) -> u64 {
    let e = kv_entry(s, key).unwrap_or_else(|| panic!("key {key} missing"));
    e["ModifyIndex"].as_u64().unwrap()
}

/// `PUT /v1/kv/<key>?acquire=<sid>` (plus `extra` query), returning the response.
#[track_caller]
pub fn acquire(s: &DevServer, key: &str, sid: &str, value: &[u8]) -> Response {
    put(s, &format!("/v1/kv/{key}?acquire={sid}"), value)
}

#[track_caller]
pub fn release(s: &DevServer, key: &str, sid: &str, value: &[u8]) -> Response {
    put(s, &format!("/v1/kv/{key}?release={sid}"), value)
}

/// Creates a session with this JSON body and returns its ID.
#[track_caller]
pub fn session_create(s: &DevServer, body: &Value) -> String {
    let r = put_json(s, "/v1/session/create", body);
    assert_eq!(r.status, 200, "session create: {}", r.text());
    r.json()["ID"].as_str().expect("ID string").to_string()
}

/// A session with no checks and the given LockDelay (Go duration string).
#[track_caller]
pub fn session_with_delay(s: &DevServer, lock_delay: &str) -> String {
    session_create(s, &json!({"LockDelay": lock_delay, "NodeChecks": []}))
}

/// The session object from `/v1/session/info/<id>`, or `None` when it returns `[]`.
#[track_caller]
pub fn session_info(s: &DevServer, id: &str) -> Option<Value> {
    let r = get(s, &format!("/v1/session/info/{id}"));
    assert_eq!(r.status, 200, "session info: {}", r.text());
    let v = r.json();
    let arr = v.as_array().expect("session info returns an array");
    assert!(arr.len() <= 1, "at most one session: {v}");
    arr.first().cloned()
}

#[track_caller]
pub fn txn(s: &DevServer, ops: &Value) -> Response {
    put_json(s, "/v1/txn", ops)
}

/// Object keys in document order (serde_json is built with `preserve_order`).
pub fn keys_of(v: &Value) -> Vec<String> {
    v.as_object()
        .expect("JSON object")
        .keys()
        .cloned()
        .collect()
}

/// Polls `cond` every 25 ms until it holds or `within` passes; returns the instant it held.
pub fn poll_until(within: Duration, mut cond: impl FnMut() -> bool) -> Option<Instant> {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return Some(Instant::now());
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(25));
    }
}

/// Sleeps until `t` (no-op if it has passed). Only used to establish "not yet" at an instant.
pub fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        thread::sleep(t - now);
    }
}

/// A fingerprint of all user-visible state: the whole KV store (`null` when empty) and the
/// session list, parsed, with their table indexes. Used to check that bad input changed nothing.
pub fn snapshot(s: &DevServer) -> (u16, Value, u64, Value, u64) {
    let kv = get(s, "/v1/kv/?recurse");
    let sessions = get(s, "/v1/session/list");
    assert_eq!(sessions.status, 200);
    let entries = if kv.status == 404 {
        Value::Null
    } else {
        kv.json()
    };
    (
        kv.status,
        entries,
        kv.index(),
        sessions.json(),
        sessions.index(),
    )
}

/// Base64 (standard, padded) of bytes, for building expectations.
pub fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes an entry's `Value` (null → empty).
pub fn entry_value(e: &Value) -> Vec<u8> {
    use base64::Engine;
    match &e["Value"] {
        Value::Null => Vec::new(),
        Value::String(s) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .expect("Value is standard base64"),
        other => panic!("Value is neither null nor a string: {other}"),
    }
}
