//! Answers a real Consul never gives, from a tiny hostile HTTP server in the
//! test (the client under test is the real one): session IDs that are not
//! UUIDs, error bodies full of terminal escapes or megabytes long, and bodies
//! over the response cap (announced, streamed, or a gzip bomb).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton::{Client, ErrorKind, KvOp, SessionOptions};
use common::raw::{RawConn, RawListener};

/// The cap of `core/src/transport/http.rs` (`MAX_RESPONSE_BYTES`).
const CAP: usize = 64 * 1024 * 1024;

const TOO_LARGE: &str = "response body exceeds the 64 MiB limit for Consul answers";

type Handler = dyn Fn(&str, &str, &mut RawConn) + Send + Sync;

/// A server that logs every request line and lets `handler` answer it, one
/// request per connection (over TCP, a unix socket or TLS: `BATON_TEST_TRANSPORT`).
struct Hostile {
    listener: Arc<RawListener>,
    log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Hostile {
    fn start(handler: impl Fn(&str, &str, &mut RawConn) + Send + Sync + 'static) -> Hostile {
        let listener = Arc::new(RawListener::bind());
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let (l, s, listening) = (log.clone(), stop.clone(), listener.clone());
        std::thread::spawn(move || loop {
            let conn = listening.accept();
            if s.load(Ordering::SeqCst) {
                return;
            }
            let Ok(conn) = conn else { continue };
            let (l, h) = (l.clone(), handler.clone());
            std::thread::spawn(move || serve_one(conn, &l, &*h));
        });
        Hostile {
            listener,
            log,
            stop,
        }
    }

    fn client(&self) -> Client {
        self.listener
            .client_builder()
            .request_timeout(Duration::from_secs(60))
            .build()
            .unwrap()
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.listener.wake();
    }
}

fn serve_one(mut conn: RawConn, log: &Mutex<Vec<String>>, handler: &Handler) {
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // The client sends nothing after its one request until it is answered: what the
    // reader takes in is the request's.
    let mut reader = BufReader::new(&mut conn);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    drop(reader);
    log.lock().unwrap().push(format!("{method} {target}"));
    handler(&method, &target, &mut conn);
    let _ = conn.flush();
    let _ = conn.shutdown_write();
}

/// A whole answer with a `Content-Length`.
fn respond(conn: &mut RawConn, status: u16, content_type: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         X-Consul-Index: 7\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body);
}

fn unexpected(conn: &mut RawConn) {
    respond(
        conn,
        599,
        "text/plain",
        b"the hostile server did not expect this request",
    );
}

/// No character that could move the cursor, recolour, or break the line.
fn one_printable_line(s: &str) -> bool {
    !s.chars()
        .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{202e}')
}

#[test]
fn a_sane_answer_passes_through_the_hostile_server() {
    let id = "adf4238a-882b-9ddc-4a9d-5b6758e4159e";
    let srv = Hostile::start(move |m, p, c| match (m, p) {
        ("PUT", "/v1/session/create") => respond(
            c,
            200,
            "application/json",
            format!("{{\"ID\":\"{id}\"}}").as_bytes(),
        ),
        _ => unexpected(c),
    });
    let client = srv.client();
    assert_eq!(
        client.sessions().create(&SessionOptions::new()).unwrap(),
        id
    );
    assert_eq!(srv.requests(), ["PUT /v1/session/create"]);
}

#[test]
fn session_ids_that_are_not_uuids_are_refused() {
    let bad_ids = [
        "",
        "../../v1/kv/x?y=#z",
        "not-a-uuid",
        "adf4238a-882b-9ddc-4a9d-5b6758e4159e/../../x",
        "\u{1b}]0;owned\u{7}\u{1b}[2J",
        "adf4238a_882b_9ddc_4a9d_5b6758e4159e",
    ];
    for bad in bad_ids {
        let answer = serde_json::json!({ "ID": bad }).to_string();
        let srv = Hostile::start(move |m, p, c| match (m, p) {
            ("PUT", "/v1/session/create") => respond(c, 200, "application/json", answer.as_bytes()),
            _ => unexpected(c),
        });
        let client = srv.client();
        let e = client
            .sessions()
            .create(&SessionOptions::new())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadResponse, "{bad:?}: {e}");
        assert_eq!(e.endpoint(), Some("PUT /v1/session/create"));
        let text = e.to_string();
        assert!(text.contains("session ID that is not a UUID"), "{text}");
        assert!(text.contains(&format!("{bad:?}")), "{text}");
        assert!(one_printable_line(&text), "{text:?}");
        assert!(one_printable_line(&format!("{e:?}")));

        // The managed paths stop at the same place.
        let e = client
            .create_session(&SessionOptions::new().ttl(Duration::from_secs(15)))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadResponse, "{bad:?}: {e}");
        let e = client.default_session().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadResponse, "{bad:?}: {e}");
        client.close(Duration::from_secs(5));
        drop(client);

        // Nothing was ever sent to a path or transaction built from the bad ID.
        let requests = srv.requests();
        assert_eq!(requests.len(), 3, "{bad:?}: {requests:?}");
        assert!(
            requests.iter().all(|r| r == "PUT /v1/session/create"),
            "{bad:?}: {requests:?}"
        );
    }
}

#[test]
fn error_bodies_are_shown_escaped_and_bounded() {
    let ansi =
        b"\x1b[2J\x1b[31mNo cluster leader\0\x1b]0;owned\x07\r\nsecond line\x1f{\"x\":1}\xff\n";
    let srv = Hostile::start(move |m, p, c| match (m, p) {
        ("GET", "/v1/kv/ansi") => respond(c, 500, "text/plain", ansi),
        ("GET", "/v1/kv/huge") => {
            let mut body = vec![b'A'; 10 * 1024 * 1024];
            body.extend_from_slice(b" rpc error: invalid session \"x\"");
            respond(c, 500, "text/plain", &body);
        }
        ("PUT", "/v1/txn") => {
            let what = format!(
                "\u{1b}[31mfailed to lock key \"k\"{}, lock delay\u{0}",
                "\u{1b}".repeat(100_000)
            );
            let answer = serde_json::json!({
                "Results": null,
                "Errors": [{"OpIndex": 0, "What": what}],
            });
            respond(c, 409, "application/json", answer.to_string().as_bytes());
        }
        _ => unexpected(c),
    });
    let client = srv.client();

    let e = client.kv().get("ansi").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server);
    assert_eq!(e.status(), Some(500));
    let text = e.to_string();
    assert!(one_printable_line(&text), "{text:?}");
    // Every request error names the full URL it asked (Error::url).
    assert!(
        text.starts_with(&format!(
            "GET {}/v1/kv/ansi: Consul answered 500: \\u{{1b}}[2J\\u{{1b}}[31mNo cluster leader\\u{{0}}\\u{{1b}}]0;owned\\u{{7}}\\r\\nsecond line\\u{{1f}}",
            srv.listener.shown()
        )),
        "{text}"
    );
    assert!(text.ends_with("\u{fffd}"), "{text}");
    assert!(one_printable_line(e.server_text().unwrap()));
    assert!(one_printable_line(&format!("{e:?}")));

    let e = client.kv().get("huge").unwrap_err();
    // The kind still comes from the whole raw body.
    assert_eq!(e.kind(), ErrorKind::SessionInvalidated, "{e}");
    let text = e.to_string();
    assert!(text.len() < 1024, "{}", text.len());
    assert!(text.ends_with("\u{2026} (10485791 bytes)"), "{text}");
    assert!(e.server_text().unwrap().len() < 5000);
    assert!(format!("{e:?}").len() < 5000);

    let e = client
        .txn(&[KvOp::lock(
            "k",
            b"v",
            0,
            "adf4238a-882b-9ddc-4a9d-5b6758e4159e",
        )])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    // Callers still match on the raw text...
    assert!(e.txn_errors()[0].what.contains("lock delay"));
    // ...while what is shown is escaped and bounded.
    let text = e.to_string();
    assert!(one_printable_line(&text), "{text:?}");
    assert!(
        text.starts_with(&format!(
            "PUT {}/v1/txn: transaction failed: op 0: \\u{{1b}}[31mfailed to lock key",
            srv.listener.shown()
        )),
        "{text}"
    );
    assert!(text.len() < 3000, "{}", text.len());
    let dbg = format!("{e:?}");
    assert!(
        one_printable_line(&dbg) && dbg.len() < 5000,
        "{}",
        dbg.len()
    );
}

/// Writes `total` bytes of `byte` in pieces, stopping when the client hangs up.
fn write_lazily(conn: &mut RawConn, total: usize, chunked: bool) {
    let piece = vec![b'x'; 64 * 1024];
    let mut sent = 0;
    while sent < total {
        let n = piece.len().min(total - sent);
        let ok = if chunked {
            conn.write_all(format!("{n:x}\r\n").as_bytes()).is_ok()
                && conn.write_all(&piece[..n]).is_ok()
                && conn.write_all(b"\r\n").is_ok()
        } else {
            conn.write_all(&piece[..n]).is_ok()
        };
        if !ok {
            return;
        }
        sent += n;
    }
    if chunked {
        let _ = conn.write_all(b"0\r\n\r\n");
    }
}

/// A deflate stream (one fixed-Huffman block, never finished) that inflates to
/// `a` followed by 258 × `matches` more `a`s: about 160 output bytes per input
/// byte.
fn deflate_bomb(matches: usize) -> Vec<u8> {
    struct Bits {
        out: Vec<u8>,
        acc: u32,
        n: u32,
    }
    impl Bits {
        /// Appends `len` bits of `v`, least significant first.
        fn put(&mut self, v: u32, len: u32) {
            self.acc |= v << self.n;
            self.n += len;
            while self.n >= 8 {
                self.out.push(self.acc as u8);
                self.acc >>= 8;
                self.n -= 8;
            }
        }
        /// Appends a Huffman code (most significant bit first).
        fn code(&mut self, code: u32, len: u32) {
            let rev = code.reverse_bits() >> (32 - len);
            self.put(rev, len);
        }
    }
    let mut b = Bits {
        out: Vec::new(),
        acc: 0,
        n: 0,
    };
    b.put(0, 1); // BFINAL = 0
    b.put(1, 2); // BTYPE = fixed Huffman
    b.code(0x30 + u32::from(b'a'), 8); // literal 'a'
    for _ in 0..matches {
        b.code(0xc0 + (285 - 280), 8); // length 258
        b.code(0, 5); // distance 1
    }
    b.out
}

#[test]
fn answers_over_the_cap_are_refused_without_holding_them() {
    let srv = Hostile::start(move |m, p, c| match (m, p) {
        ("GET", "/v1/kv/announced") => {
            // Announces 1 GiB; the client must give up without reading it.
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                        Content-Length: 1073741824\r\nConnection: close\r\n\r\n";
            let _ = c.write_all(head.as_bytes());
            write_lazily(c, 1024 * 1024, false);
        }
        ("GET", "/v1/kv/streamed") => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                        Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
            let _ = c.write_all(head.as_bytes());
            write_lazily(c, CAP + 4 * 1024 * 1024, true);
        }
        ("GET", "/v1/kv/error-stream") => {
            let head = "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n\
                        Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
            let _ = c.write_all(head.as_bytes());
            write_lazily(c, CAP + 4 * 1024 * 1024, true);
        }
        ("GET", "/v1/kv/bomb") => {
            // About 1 MiB on the wire, about 165 MiB once inflated.
            let mut body = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
            body.extend(deflate_bomb(650_000));
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = c.write_all(head.as_bytes());
            let _ = c.write_all(&body);
        }
        _ => unexpected(c),
    });
    let client = srv.client();
    for key in ["announced", "streamed", "error-stream", "bomb"] {
        let started = std::time::Instant::now();
        let e = client.kv().get(key).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadResponse, "{key}: {e}");
        if key == "bomb" {
            // Baton never asks for compression, so a compressed answer is refused from its
            // head: nothing is inflated.
            assert!(
                e.message().contains("compressed (Content-Encoding: gzip)"),
                "{key}: {e}"
            );
        } else {
            assert_eq!(e.message(), TOO_LARGE, "{key}");
        }
        assert_eq!(e.endpoint(), Some(format!("GET /v1/kv/{key}").as_str()));
        assert!(!e.to_string().contains("request"), "{e}");
        eprintln!("{key}: refused in {:?}", started.elapsed());
    }
    // One request each: an oversized answer is not retried.
    assert_eq!(srv.requests().len(), 4, "{:?}", srv.requests());
}
