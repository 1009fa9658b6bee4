//! A deliberately raw HTTP/1.1 client for the conformance tests: it writes requests by hand and
//! keeps response header names exactly as they came off the wire, so header casing, status
//! codes and bodies are checked as a Consul client would see them. Every read has a timeout so a
//! misbehaving server fails a test instead of hanging it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use baton_devserver::{Config, DevServer};

/// Default read timeout: far above anything a passing test waits for.
pub const READ_TIMEOUT: Duration = Duration::from_secs(20);

/// A dev server with a low `session_ttl_min`, for short TTLs; it pretty-prints like
/// `consul agent -dev` when `BATON_TEST_DEVSERVER_PRETTY` is set (not empty, not `0`).
pub fn start() -> DevServer {
    start_with(Config {
        session_ttl_min: Duration::from_millis(100),
        pretty: std::env::var("BATON_TEST_DEVSERVER_PRETTY")
            .is_ok_and(|v| !v.is_empty() && v != "0"),
        ..Config::default()
    })
}

pub fn start_with(cfg: Config) -> DevServer {
    DevServer::start(cfg).expect("dev server starts")
}

/// One response as received.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    /// Header names exactly as sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    /// A header value, name matched case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether a header with exactly this name (case-sensitive) was sent.
    pub fn has_exact_header(&self, name: &str) -> bool {
        self.headers.iter().any(|(k, _)| k == name)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {} {:?}", self.status, self.text()))
    }

    /// `X-Consul-Index` as a number (panics when absent).
    pub fn index(&self) -> u64 {
        self.header("X-Consul-Index")
            .expect("X-Consul-Index present")
            .parse()
            .expect("numeric index")
    }
}

/// Sends one request on a new connection with the default timeout.
pub fn req(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    req_timeout(addr, method, path, headers, body, READ_TIMEOUT).expect("request answered")
}

/// Sends one request; `Err` when no complete answer arrives within `timeout`.
pub fn req_timeout(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> std::io::Result<Resp> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(READ_TIMEOUT))?;
    let mut msg = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        msg.push_str(&format!("{k}: {v}\r\n"));
    }
    if !headers.iter().any(|(k, _)| {
        k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("transfer-encoding")
    }) {
        msg.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    msg.push_str("\r\n");
    s.write_all(msg.as_bytes())?;
    if body.len() <= 64 * 1024 {
        s.write_all(body)?;
    } else {
        // A server may answer (413) and close before reading a big body, as Go's does: write it
        // from another thread while this one reads the answer (the write may then fail).
        let mut w = s.try_clone()?;
        let body = body.to_vec();
        std::thread::spawn(move || {
            let _ = w.write_all(&body);
        });
    }
    read_response(&mut BufReader::new(s))
}

fn read_response(r: &mut BufReader<TcpStream>) -> std::io::Result<Resp> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("bad status line {line:?}"),
            )
        })?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.to_string(), v.trim().to_string()));
        }
    }
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _): &&(String, String)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if let Some(len) = get("content-length") {
        let len: usize = len.parse().unwrap_or(0);
        body.resize(len, 0);
        r.read_exact(&mut body)?;
    } else if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            r.read_line(&mut line)?;
            let n = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        r.read_to_end(&mut body)?;
    }
    Ok(Resp {
        status,
        headers,
        body,
    })
}

pub fn get(addr: SocketAddr, path: &str) -> Resp {
    req(addr, "GET", path, &[], b"")
}

pub fn put(addr: SocketAddr, path: &str, body: &[u8]) -> Resp {
    req(addr, "PUT", path, &[], body)
}

pub fn delete(addr: SocketAddr, path: &str) -> Resp {
    req(addr, "DELETE", path, &[], b"")
}

/// Creates a session from a JSON body; returns its ID.
pub fn session(addr: SocketAddr, body: &str) -> String {
    let r = put(addr, "/v1/session/create", body.as_bytes());
    assert_eq!(r.status, 200, "session create: {}", r.text());
    r.json()["ID"].as_str().expect("ID").to_string()
}

/// Whether the session still exists.
pub fn session_exists(addr: SocketAddr, id: &str) -> bool {
    let r = get(addr, &format!("/v1/session/info/{id}"));
    assert_eq!(r.status, 200);
    !r.json().as_array().expect("array").is_empty()
}

/// The global index as of now: a throwaway write's effect shows it (PUT does not report it,
/// so read the key back).
pub fn probe_index(addr: SocketAddr) -> u64 {
    put(
        addr,
        "/v1/kv/_probe",
        format!("{:?}", Instant::now()).as_bytes(),
    );
    get(addr, "/v1/kv/_probe").index()
}

/// A KV entry (the first of a GET's array), or None on 404.
pub fn entry(addr: SocketAddr, key: &str) -> Option<serde_json::Value> {
    let r = get(addr, &format!("/v1/kv/{key}"));
    match r.status {
        404 => None,
        200 => Some(r.json()[0].clone()),
        s => panic!("GET {key}: {s} {}", r.text()),
    }
}

/// Polls `cond` every 10 ms until it holds or `within` passes; returns whether it held.
pub fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts a request on another thread; the handle yields its response (or error).
pub fn spawn_req(
    addr: SocketAddr,
    method: &'static str,
    path: String,
    timeout: Duration,
) -> std::thread::JoinHandle<std::io::Result<Resp>> {
    std::thread::spawn(move || req_timeout(addr, method, &path, &[], b"", timeout))
}
