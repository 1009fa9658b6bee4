//! An HTTP shim between a client and a dev server that passes requests through
//! and can replace chosen answers, for behaviour a healthy Consul never shows
//! (a transaction answer without our session, an error text nobody knows,
//! undecodable values). The server is real; only the answers the rule picks
//! are changed. It also counts requests per `METHOD path` (query cut off).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// One exchange as the rule sees it.
pub struct Exchange {
    pub method: String,
    /// Path with query, e.g. `/v1/kv/a?recurse=`.
    pub target: String,
    pub request_body: Vec<u8>,
    pub status: u16,
    pub body: Vec<u8>,
}

/// What to send instead: a status and a body (the server's headers are kept).
pub type Rule = Arc<dyn Fn(&Exchange) -> Option<(u16, Vec<u8>)> + Send + Sync>;

/// The running shim; stops accepting when dropped (open connections end with
/// their client).
pub struct Rewriter {
    pub addr: String,
    counts: Arc<Mutex<HashMap<String, usize>>>,
    listener: TcpListener,
}

impl Rewriter {
    /// A shim in front of `upstream` (`host:port`, or `http://host:port`).
    pub fn start(upstream: &str, rule: Rule) -> Rewriter {
        let upstream = upstream.trim_start_matches("http://").trim_end_matches('/');
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let counts: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let (l2, c2, up) = (
            listener.try_clone().unwrap(),
            counts.clone(),
            upstream.to_string(),
        );
        thread::spawn(move || {
            for conn in l2.incoming() {
                let Ok(conn) = conn else { return };
                let (rule, counts, up) = (rule.clone(), c2.clone(), up.clone());
                thread::spawn(move || serve(conn, &up, &rule, &counts));
            }
        });
        Rewriter {
            addr,
            counts,
            listener,
        }
    }

    /// Requests seen for `METHOD path` (e.g. `PUT /v1/txn`).
    pub fn count(&self, route: &str) -> usize {
        self.counts.lock().unwrap().get(route).copied().unwrap_or(0)
    }

    /// Every `METHOD path` seen with its count, sorted (for failure messages: a rule
    /// that never matched shows what went by instead).
    pub fn routes(&self) -> String {
        let counts = self.counts.lock().unwrap();
        let mut routes: Vec<String> = counts.iter().map(|(r, n)| format!("{r} ×{n}")).collect();
        routes.sort();
        routes.join(", ")
    }
}

impl Drop for Rewriter {
    fn drop(&mut self) {
        // Wake the accept loop so it sees the listener gone.
        let _ = self.listener.set_nonblocking(true);
        let _ = TcpStream::connect(&self.addr);
    }
}

struct Message {
    head: Vec<String>,
    body: Vec<u8>,
}

fn read_message(r: &mut impl BufRead, is_response: bool) -> Option<Message> {
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end_matches(['\r', '\n']).to_string();
        if line.is_empty() {
            if head.is_empty() {
                continue;
            }
            break;
        }
        head.push(line);
    }
    let header = |name: &str| {
        head.iter().skip(1).find_map(|h| {
            let (k, v) = h.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let mut body = Vec::new();
    if let Some(n) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(n, 0);
        r.read_exact(&mut body).ok()?;
    } else if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if is_response {
        r.read_to_end(&mut body).ok()?;
    }
    Some(Message { head, body })
}

fn serve(conn: TcpStream, upstream: &str, rule: &Rule, counts: &Mutex<HashMap<String, usize>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    while let Some(req) = read_message(&mut reader, false) {
        let mut parts = req.head[0].split(' ');
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        let route = format!("{method} {}", target.split('?').next().unwrap_or(""));
        *counts.lock().unwrap().entry(route).or_default() += 1;
        // Forward on a fresh connection that the server closes after answering.
        let Ok(mut up) = TcpStream::connect(upstream) else {
            return;
        };
        let mut fwd = format!("{}\r\n", req.head[0]);
        for h in req.head.iter().skip(1) {
            let name = h
                .split(':')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if name != "connection" && name != "content-length" {
                fwd.push_str(h);
                fwd.push_str("\r\n");
            }
        }
        fwd.push_str(&format!(
            "Connection: close\r\nContent-Length: {}\r\n\r\n",
            req.body.len()
        ));
        if up.write_all(fwd.as_bytes()).is_err() || up.write_all(&req.body).is_err() {
            return;
        }
        let _ = up.set_read_timeout(Some(Duration::from_secs(700)));
        let Some(resp) = read_message(&mut BufReader::new(up), true) else {
            let _ = out.shutdown(Shutdown::Both);
            return;
        };
        let status: u16 = resp.head[0]
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(502);
        let exchange = Exchange {
            method,
            target,
            request_body: req.body,
            status,
            body: resp.body,
        };
        let (status, body) = rule(&exchange).unwrap_or((exchange.status, exchange.body));
        let mut head = format!("HTTP/1.1 {status} X\r\n");
        for h in resp.head.iter().skip(1) {
            let name = h
                .split(':')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if !matches!(
                name.as_str(),
                "connection" | "content-length" | "transfer-encoding"
            ) {
                head.push_str(h);
                head.push_str("\r\n");
            }
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        if out.write_all(head.as_bytes()).is_err() || out.write_all(&body).is_err() {
            return;
        }
    }
}
