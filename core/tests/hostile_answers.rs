//! Property tests of every parser of Consul's answers, driven through the real
//! client against a small hostile HTTP server in the test (raw bytes on a
//! socket: a hostile server, not a mocked client; TCP, a unix socket or TLS, as
//! `BATON_TEST_TRANSPORT` says).
//!
//! Each property generates answers (valid ones, and valid ones broken in one
//! place: a field of the wrong JSON type, a number out of range, bad base64,
//! non-UTF-8 bytes, a body cut short, random bytes) and checks that the call
//! never panics, decodes valid answers exactly, and refuses the rest with an
//! error of kind `BadResponse` that names the endpoint and, where there is
//! one, the field (`[0].Flags`), on one printable line.
//!
//! Deterministic and bounded: a fixed seed (ChaCha), a fixed number of cases
//! per property (`PROPTEST_CASES` raises it for a longer run), and no failure
//! files written. These tests need no Consul, so they run the same under
//! `BATON_TEST_CONSUL`.

mod common;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine as _;
use baton::{
    next_index, parse_go_duration, Client, Error, ErrorKind, KvOp, QueryOptions, SessionOptions,
    WatchTarget,
};
use common::raw::{RawConn, RawListener};
use crossbeam_channel::{Receiver, Sender};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, RngSeed, TestRunner};
use serde_json::{json, Value};

// ---- the hostile server --------------------------------------------------------------------

/// What the server does with one request.
#[derive(Clone)]
enum Answer {
    /// Writes these bytes (a whole HTTP response, or part of one) and closes.
    Raw(Vec<u8>),
    /// Answers nothing and keeps the connection open until the client closes it.
    Hold,
}

/// A server on 127.0.0.1 that answers each request (one per connection) with
/// the next queued answer, repeating the last one, and reports every request
/// target (path and query) on a channel.
struct Hostile {
    listener: Arc<RawListener>,
    answers: Arc<Mutex<VecDeque<Answer>>>,
    requests: Receiver<String>,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Hostile {
    fn start() -> Hostile {
        let listener = Arc::new(RawListener::bind());
        let listening = listener.clone();
        let answers = Arc::new(Mutex::new(VecDeque::new()));
        let (req_tx, requests) = crossbeam_channel::unbounded();
        let (stop, stop_rx) = crossbeam_channel::bounded::<()>(1);
        let a = answers.clone();
        let thread = std::thread::Builder::new()
            .name("hostile-server".into())
            .spawn(move || serve(&listening, a, req_tx, stop_rx))
            .unwrap();
        Hostile {
            listener,
            answers,
            requests,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Every later request gets `answer`.
    fn answer(&self, answer: Vec<u8>) {
        self.answer_seq(vec![Answer::Raw(answer)]);
    }

    /// The next requests get these answers in turn; the last one repeats.
    fn answer_seq(&self, seq: Vec<Answer>) {
        let mut q = self.answers.lock().unwrap();
        q.clear();
        q.extend(seq);
    }

    fn client(&self) -> Client {
        self.listener
            .client_builder()
            .request_timeout(Duration::from_secs(20))
            .build()
            .unwrap()
    }

    /// The target of the next request (waits up to 20 s).
    fn next_request(&self) -> String {
        self.requests
            .recv_timeout(Duration::from_secs(20))
            .expect("no request reached the hostile server")
    }

    fn drain_requests(&self) {
        while self.requests.try_recv().is_ok() {}
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        drop(self.stop.take());
        // Wakes the accept loop.
        self.listener.wake();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn serve(
    listener: &RawListener,
    answers: Arc<Mutex<VecDeque<Answer>>>,
    requests: Sender<String>,
    stop: Receiver<()>,
) {
    let stopped = |stop: &Receiver<()>| {
        matches!(
            stop.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        )
    };
    loop {
        let conn = listener.accept();
        if stopped(&stop) {
            return;
        }
        let Ok(mut conn) = conn else { continue };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(20)));
        let Some(target) = read_request(&mut conn) else {
            continue;
        };
        let answer = {
            let mut q = answers.lock().unwrap();
            if q.len() > 1 {
                q.pop_front()
            } else {
                q.front().cloned()
            }
        };
        let _ = requests.send(target);
        match answer {
            Some(Answer::Raw(bytes)) => {
                let _ = conn.write_all(&bytes);
                let _ = conn.flush();
                let _ = conn.shutdown_write();
                // Let the client read everything before the socket closes (a close
                // with unread request bytes would reset the connection).
                let mut sink = [0u8; 1024];
                let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
            }
            Some(Answer::Hold) => {
                // Until the client hangs up (its read timeout bounds it otherwise).
                let mut sink = [0u8; 1024];
                while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
            }
            None => {
                let _ = conn.write_all(&http(599, &[], b"no answer queued"));
            }
        }
    }
}

/// Reads one request (line, headers, a `Content-Length` body); its target.
fn read_request(conn: &mut RawConn) -> Option<String> {
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let target = line.split_whitespace().nth(1)?.to_string();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(target)
}

/// A whole answer: status, extra header lines (raw bytes), body with its length.
fn http(status: u16, headers: &[&[u8]], body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        body.len()
    )
    .into_bytes();
    for h in headers {
        out.extend_from_slice(h);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// A 200 with Consul's query-meta headers.
fn ok_json(body: &[u8]) -> Vec<u8> {
    http(
        200,
        &[
            b"X-Consul-Index: 42",
            b"X-Consul-Knownleader: true",
            b"X-Consul-Lastcontact: 0",
        ],
        body,
    )
}

// ---- running properties ----------------------------------------------------------------------

/// A deterministic runner of `cases` cases (`PROPTEST_CASES` overrides).
fn runner(cases: u32) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(0x0ba7_0019),
        // Shrinking re-runs HTTP round trips: keep it short.
        max_shrink_iters: 256,
        ..Config::default()
    })
}

/// Runs a property; a failure panics with proptest's minimal case.
fn check<S: Strategy>(
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let mut r = runner(cases);
    if let Err(e) = r.run(&strategy, test) {
        panic!("{e}");
    }
}

/// No character that could move the cursor, recolour, or break the line.
fn one_printable_line(s: &str) -> bool {
    !s.chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}'))
}

/// What every refusal of an answer must look like.
fn bad_response(e: &Error, endpoint: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(e.kind(), ErrorKind::BadResponse, "{}", e);
    prop_assert_eq!(e.endpoint(), Some(endpoint), "{}", e);
    let text = e.to_string();
    prop_assert!(one_printable_line(&text), "{:?}", text);
    prop_assert!(text.len() < 3000, "{} bytes", text.len());
    let debug = format!("{e:?}");
    prop_assert!(one_printable_line(&debug), "{:?}", debug);
    Ok(())
}

// ---- generated JSON values -------------------------------------------------------------------

/// A JSON value put where a field's value goes, as raw text.
#[derive(Debug, Clone)]
enum Repl {
    Str(String),
    Uint(u64),
    Neg(i64),
    Float(f64),
    /// 2^64: one past u64.
    TooBig,
    /// `1e400`: out of f64's range.
    HugeExp,
    Bool(bool),
    Null,
    EmptyObj,
    EmptyArr,
    /// `[1]`.
    NumArr,
}

impl Repl {
    fn text(&self) -> String {
        match self {
            Repl::Str(s) => serde_json::to_string(s).unwrap(),
            Repl::Uint(u) => u.to_string(),
            Repl::Neg(i) => i.to_string(),
            Repl::Float(f) => format!("{f:?}"),
            Repl::TooBig => "18446744073709551616".into(),
            Repl::HugeExp => "1e400".into(),
            Repl::Bool(b) => b.to_string(),
            Repl::Null => "null".into(),
            Repl::EmptyObj => "{}".into(),
            Repl::EmptyArr => "[]".into(),
            Repl::NumArr => "[1]".into(),
        }
    }
}

fn repl() -> impl Strategy<Value = Repl> {
    prop_oneof![
        3 => any::<String>().prop_map(Repl::Str),
        2 => base64_like().prop_map(Repl::Str),
        3 => any::<u64>().prop_map(Repl::Uint),
        1 => (i64::MIN..0i64).prop_map(Repl::Neg),
        1 => (-1e6f64..1e6).prop_map(Repl::Float),
        1 => Just(Repl::TooBig),
        1 => Just(Repl::HugeExp),
        1 => any::<bool>().prop_map(Repl::Bool),
        2 => Just(Repl::Null),
        1 => Just(Repl::EmptyObj),
        1 => Just(Repl::EmptyArr),
        1 => Just(Repl::NumArr),
    ]
}

/// Strings that look like base64 but often are not: URL-safe letters, missing or
/// extra padding, stray characters, whitespace.
fn base64_like() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40)
            .prop_map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
        proptest::collection::vec(any::<u8>(), 1..40)
            .prop_map(|b| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)),
        proptest::collection::vec(
            prop_oneof![
                Just('A'),
                Just('z'),
                Just('0'),
                Just('+'),
                Just('/'),
                Just('='),
                Just('-'),
                Just('_'),
                Just(' '),
                Just('\n'),
                Just('!'),
                Just('\u{e9}'),
            ],
            0..24
        )
        .prop_map(|c| c.into_iter().collect()),
    ]
}

fn is_b64(s: &str) -> bool {
    base64::engine::general_purpose::STANDARD.decode(s).is_ok()
}

/// Replaces the value of the first `"field":` in `json` (compact JSON whose
/// first occurrence of that field is in the first entry) by `with`.
fn replace_field(json: &str, field: &str, with: &str) -> String {
    let v: Value = serde_json::from_str(json).unwrap();
    let mut v = v;
    let target = match &mut v {
        Value::Array(a) => &mut a[0],
        other => other,
    };
    target[field] = Value::String("\u{0}REPLACED\u{0}".into());
    let marker = serde_json::to_string(&Value::String("\u{0}REPLACED\u{0}".into())).unwrap();
    serde_json::to_string(&v)
        .unwrap()
        .replacen(&marker, with, 1)
}

// ---- KV entries ------------------------------------------------------------------------------

/// A KV entry as Consul encodes it, and the fields it must decode to.
#[derive(Debug, Clone)]
struct Entry {
    key: String,
    value: Option<Vec<u8>>,
    flags: u64,
    session: Option<String>,
    lock_index: u64,
    create_index: u64,
    modify_index: u64,
}

fn entry() -> impl Strategy<Value = Entry> {
    (
        any::<String>(),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
        prop_oneof![Just(0u64), Just(3304740253564472344), any::<u64>()],
        proptest::option::of(any::<String>()),
        (any::<u64>(), any::<u64>(), any::<u64>()),
    )
        .prop_map(|(key, value, flags, session, (l, c, m))| Entry {
            key,
            // Consul sends an empty value as null.
            value: value.filter(|v| !v.is_empty()),
            flags,
            session,
            lock_index: l,
            create_index: c,
            modify_index: m,
        })
}

impl Entry {
    fn to_json(&self) -> Value {
        let mut o = json!({
            "LockIndex": self.lock_index,
            "Key": self.key,
            "Flags": self.flags,
            "Value": self.value.as_ref().map(|v| base64::engine::general_purpose::STANDARD.encode(v)),
            "CreateIndex": self.create_index,
            "ModifyIndex": self.modify_index,
        });
        if let Some(s) = &self.session {
            o["Session"] = json!(s);
        }
        o
    }

    fn matches(&self, p: &baton::KvPair) -> bool {
        p.key == self.key
            && p.value == self.value
            && p.flags == self.flags
            && p.session == self.session.clone().filter(|s| !s.is_empty())
            && p.lock_index == self.lock_index
            && p.create_index == self.create_index
            && p.modify_index == self.modify_index
    }
}

/// Consul's encoding, compact or as `-dev` pretty-prints it (indented, newline).
fn encode(v: &Value, pretty: bool) -> Vec<u8> {
    if pretty {
        let mut b = serde_json::to_vec_pretty(v).unwrap();
        b.push(b'\n');
        b
    } else {
        serde_json::to_vec(v).unwrap()
    }
}

#[test]
fn kv_entries_decode_exactly_in_both_layouts() {
    let srv = Hostile::start();
    let client = srv.client();
    check(
        128,
        (proptest::collection::vec(entry(), 1..4), any::<bool>()),
        |(entries, pretty)| {
            let list = Value::Array(entries.iter().map(Entry::to_json).collect());
            srv.answer(ok_json(&encode(&list, pretty)));
            let (got, meta) = client
                .kv()
                .get_with("k", &QueryOptions::default())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(entries[0].matches(got.as_ref().unwrap()));
            prop_assert_eq!(meta.index, 42);
            prop_assert!(meta.known_leader);
            let all = client
                .kv()
                .list("k")
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(all.len(), entries.len());
            for (e, p) in entries.iter().zip(&all) {
                prop_assert!(e.matches(p), "{:?} vs {:?}", e, p);
            }
            Ok(())
        },
    );
}

/// The fields of a KV entry and which replacement values each accepts.
const KV_FIELDS: [&str; 7] = [
    "Key",
    "Value",
    "Flags",
    "Session",
    "LockIndex",
    "CreateIndex",
    "ModifyIndex",
];

fn kv_field_accepts(field: &str, r: &Repl) -> bool {
    match field {
        "Key" => matches!(r, Repl::Str(_)),
        "Value" => matches!(r, Repl::Null) || matches!(r, Repl::Str(s) if is_b64(s)),
        "Session" => matches!(r, Repl::Null | Repl::Str(_)),
        _ => matches!(r, Repl::Uint(_)),
    }
}

#[test]
fn kv_entries_with_a_wrong_value_are_refused_naming_the_field() {
    let srv = Hostile::start();
    let client = srv.client();
    let (accepted, refused) = (AtomicUsize::new(0), AtomicUsize::new(0));
    check(
        384,
        (entry(), 0..KV_FIELDS.len(), repl()),
        |(e, field, r)| {
            let field = KV_FIELDS[field];
            let list = serde_json::to_string(&json!([e.to_json()])).unwrap();
            let body = replace_field(&list, field, &r.text());
            srv.answer(ok_json(body.as_bytes()));
            let result = client.kv().get("k");
            if kv_field_accepts(field, &r) {
                let p = result
                    .map_err(|e| TestCaseError::fail(format!("{field} = {r:?}: {e}")))?
                    .unwrap();
                match (&r, field) {
                    (Repl::Uint(u), "Flags") => prop_assert_eq!(p.flags, *u),
                    (Repl::Uint(u), "ModifyIndex") => prop_assert_eq!(p.modify_index, *u),
                    (Repl::Str(s), "Key") => prop_assert_eq!(&p.key, s),
                    (Repl::Str(s), "Value") => prop_assert_eq!(
                        p.value,
                        Some(base64::engine::general_purpose::STANDARD.decode(s).unwrap())
                    ),
                    (Repl::Null, "Value") => prop_assert_eq!(p.value, None),
                    (Repl::Null, "Session") => prop_assert_eq!(p.session, None),
                    _ => {}
                }
                accepted.fetch_add(1, Ordering::Relaxed);
            } else {
                let err = result.expect_err(&format!("{field} = {r:?} was accepted"));
                bad_response(&err, "GET /v1/kv/k")?;
                let text = err.to_string();
                prop_assert!(text.contains(&format!("[0].{field}")), "{}", text);
                if field == "Value" && matches!(r, Repl::Str(_)) {
                    prop_assert!(text.contains("not valid base64"), "{}", text);
                }
                refused.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        },
    );
    let (accepted, refused) = (accepted.into_inner(), refused.into_inner());
    eprintln!("wrong field values: {accepted} accepted (valid), {refused} refused");
    assert!(
        refused > 100 && accepted > 20,
        "{refused} refused, {accepted} accepted"
    );
}

#[test]
fn kv_bodies_cut_short_are_refused_as_such() {
    let srv = Hostile::start();
    let client = srv.client();
    check(
        256,
        (
            proptest::collection::vec(entry(), 1..3),
            any::<bool>(),
            any::<prop::sample::Index>(),
        ),
        |(entries, pretty, at)| {
            let list = Value::Array(entries.iter().map(Entry::to_json).collect());
            let full = encode(&list, pretty);
            let end = full.trim_ascii_end().len();
            let cut = at.index(end);
            // The framing is whole (Content-Length of the cut body): the JSON is what ends early.
            srv.answer(ok_json(&full[..cut]));
            let err = client.kv().list("k").expect_err("a cut body was accepted");
            bad_response(&err, "GET /v1/kv/k")?;
            let text = err.to_string();
            if full[..cut].trim_ascii().is_empty() {
                prop_assert!(text.contains("the answer is empty"), "{}", text);
            } else {
                prop_assert!(
                    text.contains(&format!("the answer ends early, after {cut} bytes")),
                    "{}",
                    text
                );
            }
            Ok(())
        },
    );
}

#[test]
fn non_utf8_bytes_in_strings_are_refused() {
    let srv = Hostile::start();
    let client = srv.client();
    check(
        128,
        (
            entry(),
            0x80u8..=0xff,
            any::<prop::sample::Index>(),
            any::<bool>(),
        ),
        |(mut e, byte, at, in_key)| {
            // A marker-free string field to put the byte in.
            e.key = "key-text".into();
            e.session = Some("session-text".into());
            let list = serde_json::to_vec(&json!([e.to_json()])).unwrap();
            let word: &[u8] = if in_key { b"key-text" } else { b"session-text" };
            let start = list.windows(word.len()).position(|w| w == word).unwrap();
            let pos = start + at.index(word.len() + 1);
            let mut body = list.clone();
            body.insert(pos, byte);
            srv.answer(ok_json(&body));
            let err = client.kv().get("k").expect_err("non-UTF-8 was accepted");
            bad_response(&err, "GET /v1/kv/k")?;
            let field = if in_key { "[0].Key" } else { "[0].Session" };
            prop_assert!(err.to_string().contains(field), "{}", err);
            Ok(())
        },
    );
}

#[test]
fn random_bytes_never_panic_and_are_refused() {
    let srv = Hostile::start();
    let client = srv.client();
    check(
        256,
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..200),
            // Bytes that look more like JSON.
            proptest::collection::vec(
                prop_oneof![
                    Just(b'['),
                    Just(b']'),
                    Just(b'{'),
                    Just(b'}'),
                    Just(b'"'),
                    Just(b':'),
                    Just(b','),
                    Just(b'1'),
                    Just(b'-'),
                    Just(b'e'),
                    Just(b'n'),
                    Just(b'\\'),
                    Just(b' '),
                    Just(0xc3),
                ],
                0..60
            ),
        ],
        |body| {
            srv.answer(ok_json(&body));
            for result in [
                client.kv().get("k").map(|_| ()),
                client.kv().list("k").map(|_| ()),
                client.kv().keys("k", None).map(|_| ()),
                client.sessions().list().map(|_| ()),
                client.txn(&[KvOp::get("k")]).map(|_| ()),
            ] {
                // Random bytes are almost never a valid answer; when they are (`[]`), fine.
                if let Err(e) = result {
                    prop_assert_eq!(e.kind(), ErrorKind::BadResponse, "{}", e);
                    prop_assert!(e.to_string().contains("could not decode Consul's answer"));
                    prop_assert!(one_printable_line(&e.to_string()));
                }
            }
            Ok(())
        },
    );
}

#[test]
fn wrong_top_level_types_name_what_was_expected() {
    let srv = Hostile::start();
    let client = srv.client();
    for (body, want) in [
        (&b"null"[..], "expected a sequence"),
        (b"{}", "expected a sequence"),
        (b"\"x\"", "expected a sequence"),
        (b"[1]", "at [0]"),
        (b"[{}]", "missing field `Key`"),
        (b"[] trailing", "trailing characters"),
        (
            b"<html><body>502 Bad Gateway</body></html>",
            "the answer starts with <html>",
        ),
        (b"", "the answer is empty"),
        (b"  \n", "the answer is empty"),
    ] {
        srv.answer(ok_json(body));
        let err = client.kv().get("k").unwrap_err();
        bad_response(&err, "GET /v1/kv/k").unwrap();
        assert!(
            err.to_string().contains(want),
            "{:?}: {err}",
            String::from_utf8_lossy(body)
        );
    }
    // ?keys answers a list of strings.
    srv.answer(ok_json(br#"["a", 7]"#));
    let err = client.kv().keys("k", None).unwrap_err();
    bad_response(&err, "GET /v1/kv/k").unwrap();
    assert!(err.to_string().contains("at [1]"), "{err}");
    // /v1/status/leader answers a string.
    srv.answer(ok_json(b"[]"));
    let err = client.status_leader().unwrap_err();
    bad_response(&err, "GET /v1/status/leader").unwrap();
}

#[test]
fn deeply_nested_answers_are_refused_without_overflowing_the_stack() {
    let srv = Hostile::start();
    let client = srv.client();
    for depth in [200usize, 100_000] {
        let mut body = "[".repeat(depth);
        body.push_str(&"]".repeat(depth));
        srv.answer(ok_json(body.as_bytes()));
        let err = client.kv().list("k").unwrap_err();
        bad_response(&err, "GET /v1/kv/k").unwrap();
        // A .lock-like value nested inside a field.
        let nested = format!(
            r#"[{{"Key":"k","Flags":{}1{},"LockIndex":0,"CreateIndex":1,"ModifyIndex":1}}]"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        srv.answer(ok_json(nested.as_bytes()));
        let err = client.kv().get("k").unwrap_err();
        bad_response(&err, "GET /v1/kv/k").unwrap();
    }
}

// ---- KV write answers ------------------------------------------------------------------------

#[test]
fn write_answers_are_true_or_false_or_refused() {
    let srv = Hostile::start();
    let client = srv.client();
    check(
        256,
        prop_oneof![
            Just("true".to_string()),
            Just("false".to_string()),
            Just("true\n".to_string()),
            Just("  false  ".to_string()),
            Just("TRUE".to_string()),
            Just("\"true\"".to_string()),
            Just("1".to_string()),
            Just("".to_string()),
            any::<String>(),
        ],
        |body| {
            srv.answer(http(200, &[], body.as_bytes()));
            let result = client.kv().put("k", b"v");
            match body.trim() {
                "true" => prop_assert_eq!(result.unwrap(), true),
                "false" => prop_assert_eq!(result.unwrap(), false),
                _ => {
                    let e = result.unwrap_err();
                    bad_response(&e, "PUT /v1/kv/k")?;
                    prop_assert!(e.to_string().contains("expected true or false"));
                }
            }
            Ok(())
        },
    );
}

// ---- sessions --------------------------------------------------------------------------------

const SESSION_FIELDS: [&str; 11] = [
    "ID",
    "Name",
    "Node",
    "LockDelay",
    "Behavior",
    "TTL",
    "NodeChecks",
    "ServiceChecks",
    "Checks",
    "CreateIndex",
    "ModifyIndex",
];

fn session_field_accepts(field: &str, r: &Repl) -> bool {
    match field {
        "ID" | "Name" | "Node" | "Behavior" | "TTL" => matches!(r, Repl::Str(_)),
        "NodeChecks" | "ServiceChecks" | "Checks" => matches!(r, Repl::Null | Repl::EmptyArr),
        _ => matches!(r, Repl::Uint(_)),
    }
}

fn session_json(id: &str, ttl: &str, lock_delay: u64) -> Value {
    json!({
        "ID": id, "Name": "n", "Node": "node1", "LockDelay": lock_delay,
        "Behavior": "release", "TTL": ttl, "NodeChecks": ["serfHealth"],
        "ServiceChecks": null, "CreateIndex": 19, "ModifyIndex": 19
    })
}

const SID: &str = "adf4238a-882b-9ddc-4a9d-5b6758e4159e";

#[test]
fn session_entries_with_a_wrong_value_are_refused_naming_the_field() {
    let srv = Hostile::start();
    let client = srv.client();
    check(256, (0..SESSION_FIELDS.len(), repl()), |(field, r)| {
        let field = SESSION_FIELDS[field];
        let list =
            serde_json::to_string(&json!([session_json(SID, "15s", 15_000_000_000)])).unwrap();
        let body = replace_field(&list, field, &r.text());
        srv.answer(ok_json(body.as_bytes()));
        let result = client.sessions().list();
        if session_field_accepts(field, &r) {
            let got = result.map_err(|e| TestCaseError::fail(format!("{field}: {e}")))?;
            if let (Repl::Uint(u), "LockDelay") = (&r, field) {
                prop_assert_eq!(got[0].lock_delay(), Duration::from_nanos(*u));
            }
            if let (Repl::Str(s), "TTL") = (&r, field) {
                prop_assert_eq!(&got[0].ttl, s);
                // Whatever the text, reading it as a duration never panics.
                let _ = got[0].ttl();
            }
        } else {
            let err = result.expect_err(&format!("{field} = {r:?} was accepted"));
            bad_response(&err, "GET /v1/session/list")?;
            prop_assert!(err.to_string().contains(&format!("[0].{field}")), "{}", err);
        }
        Ok(())
    });
}

#[test]
fn session_answers_that_do_not_fit_the_request_are_refused() {
    let srv = Hostile::start();
    let client = srv.client();
    let info = format!("GET /v1/session/info/{SID}");
    let renew = format!("PUT /v1/session/renew/{SID}");

    // An answer about another session, or none, to a renew.
    let other = serde_json::to_vec(&json!([session_json(
        "00000000-0000-0000-0000-000000000000",
        "15s",
        0
    )]))
    .unwrap();
    srv.answer(ok_json(&other));
    let e = client.sessions().info(SID).unwrap_err();
    bad_response(&e, &info).unwrap();
    assert!(e.to_string().contains("another session"), "{e}");
    let e = client.sessions().renew(SID).unwrap_err();
    bad_response(&e, &renew).unwrap();
    srv.answer(ok_json(b"[]"));
    assert_eq!(client.sessions().info(SID).unwrap(), None);
    let e = client.sessions().renew(SID).unwrap_err();
    bad_response(&e, &renew).unwrap();
    assert!(e.to_string().contains("empty list"), "{e}");

    // Create: an ID that is not a string, or no ID.
    for body in [&br#"{"ID":7}"#[..], br#"{}"#, br#"{"ID":null}"#, b"[]"] {
        srv.answer(ok_json(body));
        let e = client
            .sessions()
            .create(&SessionOptions::new())
            .unwrap_err();
        bad_response(&e, "PUT /v1/session/create").unwrap();
    }
}

#[test]
fn created_session_ids_are_accepted_only_as_uuids() {
    let srv = Hostile::start();
    let client = srv.client();
    let uuid = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
    check(
        128,
        prop_oneof![
            proptest::string::string_regex(uuid).unwrap(),
            any::<String>(),
            // Almost UUIDs: one character changed.
            (
                proptest::string::string_regex(uuid).unwrap(),
                0usize..36,
                any::<char>()
            )
                .prop_map(|(u, i, c)| {
                    let mut chars: Vec<char> = u.chars().collect();
                    chars[i] = c;
                    chars.into_iter().collect()
                }),
        ],
        |id| {
            srv.answer(ok_json(json!({ "ID": id }).to_string().as_bytes()));
            let valid = id.len() == 36
                && id.bytes().enumerate().all(|(i, b)| match i {
                    8 | 13 | 18 | 23 => b == b'-',
                    _ => b.is_ascii_hexdigit(),
                });
            match client.sessions().create(&SessionOptions::new()) {
                Ok(got) => prop_assert!(valid && got == id, "{:?} accepted", id),
                Err(e) => {
                    prop_assert!(!valid, "{:?} refused: {}", id, e);
                    bad_response(&e, "PUT /v1/session/create")?;
                    prop_assert!(e.to_string().contains("not a UUID"));
                }
            }
            Ok(())
        },
    );
}

// ---- transactions ----------------------------------------------------------------------------

#[test]
fn txn_results_and_errors_decode_exactly() {
    let srv = Hostile::start();
    let client = srv.client();
    check(
        128,
        (
            proptest::collection::vec(entry(), 0..4),
            proptest::collection::vec((0usize..200, any::<String>()), 0..4),
            any::<bool>(),
        ),
        |(entries, errors, pretty)| {
            let ops = [KvOp::get("k")];
            if errors.is_empty() {
                let results: Vec<Value> = entries
                    .iter()
                    .map(|e| json!({ "KV": e.to_json() }))
                    .collect();
                let body = json!({ "Results": results, "Errors": null });
                srv.answer(http(200, &[], &encode(&body, pretty)));
                let got = client
                    .txn(&ops)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(got.len(), entries.len());
                for (e, p) in entries.iter().zip(&got) {
                    prop_assert!(e.matches(p));
                }
            } else {
                let list: Vec<Value> = errors
                    .iter()
                    .map(|(i, w)| json!({ "OpIndex": i, "What": w }))
                    .collect();
                let body = json!({ "Results": null, "Errors": list });
                srv.answer(http(409, &[], &encode(&body, pretty)));
                let e = client.txn(&ops).unwrap_err();
                let denied = errors.iter().any(|(_, w)| w.contains("Permission denied"));
                prop_assert_eq!(
                    e.kind(),
                    if denied {
                        ErrorKind::PermissionDenied
                    } else {
                        ErrorKind::Conflict
                    }
                );
                let got: Vec<(usize, String)> = e
                    .txn_errors()
                    .iter()
                    .map(|t| (t.op_index, t.what.clone()))
                    .collect();
                prop_assert_eq!(&got, &errors);
                prop_assert!(one_printable_line(&e.to_string()));
            }
            Ok(())
        },
    );
}

#[test]
fn txn_answers_with_a_wrong_value_are_refused_naming_the_field() {
    let srv = Hostile::start();
    let client = srv.client();
    check(256, (any::<bool>(), repl()), |(op_index, r)| {
        let field = if op_index { "OpIndex" } else { "What" };
        let mut err = json!({ "OpIndex": 0, "What": "failed to lock key \"k\"" });
        err[field] = json!("\u{0}R\u{0}");
        let marker = serde_json::to_string(&json!("\u{0}R\u{0}")).unwrap();
        let body = json!({ "Results": null, "Errors": [err] })
            .to_string()
            .replacen(&marker, &r.text(), 1);
        srv.answer(http(409, &[], body.as_bytes()));
        let e = client.txn(&[KvOp::get("k")]).unwrap_err();
        let accepts = if op_index {
            matches!(r, Repl::Uint(_))
        } else {
            matches!(r, Repl::Str(_))
        };
        if accepts {
            prop_assert_eq!(e.kind(), ErrorKind::Conflict, "{}", e);
        } else {
            bad_response(&e, "PUT /v1/txn")?;
            let text = e.to_string();
            prop_assert!(text.contains(&format!("Errors[0].{field}")), "{}", text);
        }
        Ok(())
    });
}

#[test]
fn txn_answers_of_odd_shapes_are_refused_or_read_as_consuls() {
    let srv = Hostile::start();
    let client = srv.client();
    let ops = [KvOp::get("k")];
    // A 409 that lists no failed operation cannot be told apart from anything.
    for body in [
        &br#"{"Results":null,"Errors":[]}"#[..],
        br#"{"Results":null,"Errors":null}"#,
        br#"{}"#,
    ] {
        srv.answer(http(409, &[], body));
        let e = client.txn(&ops).unwrap_err();
        bad_response(&e, "PUT /v1/txn").unwrap();
        assert!(
            e.to_string()
                .contains("without listing its failed operations"),
            "{e}"
        );
    }
    // Any 2xx reads as a 200 (a 204 used to panic on an `expect`).
    // (A 204 has no body in HTTP, whatever follows its head.)
    for status in [201u16, 202, 299] {
        srv.answer(http(status, &[], br#"{"Results":[],"Errors":null}"#));
        assert_eq!(client.txn(&ops).unwrap(), vec![]);
    }
    for status in [200u16, 201, 204] {
        srv.answer(http(status, &[], b""));
        let e = client.txn(&ops).unwrap_err();
        bad_response(&e, "PUT /v1/txn").unwrap();
        assert!(e.to_string().contains("the answer is empty"), "{e}");
    }
    // Results whose entries are not objects, or whose KV is of the wrong type.
    for (body, want) in [
        (&br#"{"Results":[1]}"#[..], "Results[0]"),
        (br#"{"Results":[{"KV":[]}]}"#, "Results[0].KV"),
        (
            br#"{"Results":[{"KV":{"Key":"k","Flags":-1}}]}"#,
            "Results[0].KV.Flags",
        ),
        (br#"{"Results":{}}"#, "Results"),
        (br#"{"Errors":"x"}"#, "Errors"),
    ] {
        srv.answer(http(200, &[], body));
        let e = client.txn(&ops).unwrap_err();
        bad_response(&e, "PUT /v1/txn").unwrap();
        assert!(e.to_string().contains(want), "{want}: {e}");
    }
}

#[test]
fn only_consuls_own_op_caps_are_learnt() {
    let srv = Hostile::start();
    let client = srv.client();
    let ops = [KvOp::get("a"), KvOp::get("b")];
    // A cap no Consul has: the refusal is shown as it is, and nothing is learnt.
    srv.answer(http(
        413,
        &[],
        b"Transaction contains too many operations (2 > 1)",
    ));
    let e = client.txn(&ops).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    srv.answer(http(200, &[], br#"{"Results":[],"Errors":null}"#));
    srv.drain_requests();
    assert_eq!(client.txn(&ops).unwrap(), vec![]);
    assert_eq!(srv.next_request(), "/v1/txn");
    // Consul's 64 before 1.14 is learnt: more ops are refused before sending.
    let many: Vec<KvOp> = (0..65).map(|i| KvOp::get(&format!("k{i}"))).collect();
    srv.answer(http(
        413,
        &[],
        b"Transaction contains too many operations (65 > 64)",
    ));
    let e = client.txn(&many).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    srv.drain_requests();
    let e = client.txn(&many).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        srv.requests.try_recv().is_err(),
        "sent although known too many"
    );
}

// ---- query-meta headers ----------------------------------------------------------------------

/// Header values: decimal numbers, their edges, and garbage (visible ASCII,
/// obs-text bytes) that a header line can carry.
fn header_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        any::<u64>().prop_map(|u| u.to_string().into_bytes()),
        Just(b"18446744073709551615".to_vec()),
        Just(b"18446744073709551616".to_vec()),
        Just(b"99999999999999999999999".to_vec()),
        Just(b"0".to_vec()),
        Just(b"007".to_vec()),
        Just(b"-1".to_vec()),
        Just(b"+5".to_vec()),
        Just(b"1.5".to_vec()),
        Just(b"1e3".to_vec()),
        Just(b"0x10".to_vec()),
        Just(b"12 34".to_vec()),
        Just(b"true".to_vec()),
        Just(b"True".to_vec()),
        Just(b"\xff\xfe".to_vec()),
        Just(b"5\xc3".to_vec()),
        proptest::collection::vec(0x21u8..0x7f, 1..24),
        proptest::collection::vec(prop_oneof![0x21u8..0x7f, 0x80u8..=0xff], 1..12),
    ]
}

fn decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[test]
fn query_meta_headers_are_numbers_or_refused() {
    let srv = Hostile::start();
    let client = srv.client();
    check(
        256,
        (
            header_value(),
            header_value(),
            header_value(),
            any::<bool>(),
        ),
        |(index, last_contact, leader, found)| {
            let mut h_index = b"X-Consul-Index: ".to_vec();
            h_index.extend_from_slice(&index);
            let mut h_contact = b"x-consul-lastcontact: ".to_vec();
            h_contact.extend_from_slice(&last_contact);
            let mut h_leader = b"X-CONSUL-KNOWNLEADER: ".to_vec();
            h_leader.extend_from_slice(&leader);
            let (status, body): (u16, &[u8]) = if found {
                (200, br#"[{"Key":"k","Value":null,"Flags":0,"LockIndex":0,"CreateIndex":1,"ModifyIndex":1}]"#)
            } else {
                (404, b"")
            };
            srv.answer(http(status, &[&h_index, &h_contact, &h_leader], body));
            let result = client.kv().get_with("k", &QueryOptions::default());
            match (decimal(&index), decimal(&last_contact)) {
                (Some(i), Some(l)) => {
                    let (entry, meta) = result.map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(entry.is_some(), found);
                    prop_assert_eq!(meta.index, i);
                    prop_assert_eq!(meta.last_contact_ms, l);
                    prop_assert_eq!(meta.known_leader, leader == b"true");
                }
                (i, _) => {
                    let e = result.expect_err("a malformed header was accepted");
                    bad_response(&e, "GET /v1/kv/k")?;
                    let name = if i.is_none() {
                        "X-Consul-Index"
                    } else {
                        "X-Consul-LastContact"
                    };
                    prop_assert!(
                        e.to_string()
                            .contains(&format!("the {name} header is not a decimal uint64")),
                        "{}",
                        e
                    );
                }
            }
            Ok(())
        },
    );
    // Absent headers are 0 / false, as in the Go client.
    srv.answer(http(404, &[], b""));
    let (entry, meta) = client.kv().get_with("k", &QueryOptions::default()).unwrap();
    assert_eq!((entry, meta), (None, baton::QueryMeta::default()));
    // An error status keeps its own meaning whatever its headers say.
    srv.answer(http(500, &[b"X-Consul-Index: nope"], b"No cluster leader"));
    let e = client.kv().get("k").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server, "{e}");
    assert!(e.is_transient());
}

// ---- blocking-query indexes ------------------------------------------------------------------

#[test]
fn next_index_follows_consuls_rules() {
    check(
        1024,
        (
            prop_oneof![Just(0u64), Just(1), Just(u64::MAX), any::<u64>()],
            prop_oneof![Just(0u64), Just(1), Just(u64::MAX), any::<u64>()],
        ),
        |(prev, got)| {
            let next = next_index(prev, got);
            if got < prev {
                // Went backwards: start over with a non-blocking read.
                prop_assert_eq!(next, 0);
            } else {
                // Never below 1, else what the server said.
                prop_assert_eq!(next, got.max(1));
            }
            Ok(())
        },
    );
}

/// The `index=` of a request target (`None` when absent).
fn index_param(target: &str) -> Option<u64> {
    let query = target.split_once('?')?.1;
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("index="))
        .map(|v| v.parse().unwrap())
}

#[test]
fn a_watch_resets_when_the_index_goes_backwards_or_to_zero() {
    let srv = Hostile::start();
    let client = srv.client();
    let entry = |v: &str| {
        serde_json::to_vec(&json!([{
            "Key": "w", "Value": base64::engine::general_purpose::STANDARD.encode(v),
            "Flags": 0, "LockIndex": 0, "CreateIndex": 1, "ModifyIndex": 1
        }]))
        .unwrap()
    };
    let with_index = |i: &str, v: &str| {
        let h = format!("X-Consul-Index: {i}");
        Answer::Raw(http(200, &[h.as_bytes()], &entry(v)))
    };
    check(
        24,
        proptest::collection::vec(
            prop_oneof![Just(0u64), Just(1), 1u64..20, Just(u64::MAX)],
            1..8,
        ),
        |indexes| {
            let mut seq: Vec<Answer> = indexes
                .iter()
                .enumerate()
                .map(|(n, i)| with_index(&i.to_string(), &format!("v{n}")))
                .collect();
            seq.push(Answer::Hold);
            srv.answer_seq(seq);
            srv.drain_requests();
            let mut watch = client.watch(WatchTarget::Key("w".into())).unwrap();
            let mut sent = 0u64;
            for (n, got) in indexes.iter().enumerate() {
                let target = srv.next_request();
                prop_assert_eq!(index_param(&target).unwrap_or(0), sent, "request {}", n);
                sent = next_index(sent, *got);
            }
            // The request after the last answer (held by the server).
            let target = srv.next_request();
            prop_assert_eq!(index_param(&target).unwrap_or(0), sent);
            // Every answer differed, so the watch reports the last one.
            let ev = watch
                .next(Some(Duration::from_secs(20)), None)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(ev.index, *indexes.last().unwrap());
            drop(watch);
            Ok(())
        },
    );
    // A malformed index is an error the watch reports, not an index of 0.
    srv.answer_seq(vec![with_index("12abc", "v"), Answer::Hold]);
    srv.drain_requests();
    let watch = client.watch_key("bad").unwrap();
    srv.next_request();
    srv.next_request();
    let last = watch.last_error().unwrap_or_default();
    assert!(
        last.contains("X-Consul-Index header is not a decimal uint64"),
        "{last}"
    );
    drop(watch);
    client.close(Duration::from_secs(5));
}

#[test]
fn a_server_that_answers_blocking_queries_at_once_is_not_polled_in_a_tight_loop() {
    let srv = Hostile::start();
    let client = srv.client();
    let body =
        br#"[{"Key":"w","Value":null,"Flags":0,"LockIndex":0,"CreateIndex":1,"ModifyIndex":1}]"#;
    for header in [
        &b"X-Consul-Index: 7"[..],
        b"X-Consul-Index: 0",
        b"X-Other: 1",
    ] {
        // Every poll, blocking or not, is answered at once with the same index (or none).
        srv.answer(http(200, &[header], body));
        srv.drain_requests();
        let mut watch = client.watch_key("w").unwrap();
        watch.next(Some(Duration::from_secs(20)), None).unwrap();
        // Nothing changes for 1.5 s (the server says so as fast as it is asked).
        let e = watch
            .next(Some(Duration::from_millis(1500)), None)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Timeout);
        drop(watch);
        let polls = srv.requests.try_iter().count();
        eprintln!(
            "{}: {polls} polls in 1.5 s",
            String::from_utf8_lossy(header)
        );
        // Paced (100 ms doubling): a handful. Unpaced, this loop makes thousands.
        assert!(polls < 40, "{polls} polls");
    }
}

// ---- Go durations ----------------------------------------------------------------------------

#[test]
fn go_durations_parse_like_go_and_never_panic() {
    // Arbitrary text: never a panic, and anything accepted is made of number+unit pairs.
    check(1024, any::<String>(), |s| {
        let _ = parse_go_duration(&s);
        Ok(())
    });
    check(
        1024,
        "[0-9.+-]{0,6}(ns|us|µs|ms|s|m|h|x|)[0-9.]{0,4}(ns|ms|s|m|h|)",
        |s| {
            let _ = parse_go_duration(&s);
            Ok(())
        },
    );
    // Sums of whole number+unit pairs parse to their sum.
    let unit = prop_oneof![
        Just(("ns", 1u128)),
        Just(("us", 1_000)),
        Just(("µs", 1_000)),
        Just(("ms", 1_000_000)),
        Just(("s", 1_000_000_000)),
        Just(("m", 60_000_000_000)),
        Just(("h", 3_600_000_000_000)),
    ];
    check(
        1024,
        proptest::collection::vec((0u64..100_000, unit), 1..4),
        |parts| {
            let text: String = parts.iter().map(|(n, (u, _))| format!("{n}{u}")).collect();
            let ns: u128 = parts.iter().map(|(n, (_, per))| u128::from(*n) * per).sum();
            prop_assert_eq!(
                parse_go_duration(&text),
                Some(Duration::from_nanos(ns as u64)),
                "{}",
                text
            );
            Ok(())
        },
    );
    // What baton writes reads back.
    check(1024, 0u64..86_400_000, |ms| {
        let d = Duration::from_millis(ms);
        prop_assert_eq!(parse_go_duration(&baton::format_go_duration(d)), Some(d));
        Ok(())
    });
    // Beyond Go's int64 nanoseconds (about 292 years) is no duration, as in Go.
    for s in [
        "2562048h",
        "9223372037s",
        "99999999999999999999h",
        "1e400s",
        "-1s",
        ".s",
        "1.2.3s",
    ] {
        assert_eq!(parse_go_duration(s), None, "{s}");
    }
    assert_eq!(
        parse_go_duration("2562047h"),
        Some(Duration::from_secs(2562047 * 3600))
    );
}

// ---- framing cut short ------------------------------------------------------------------------

#[test]
fn answers_whose_connection_ends_early_say_so() {
    let srv = Hostile::start();
    let client = srv.client();
    let full =
        br#"[{"Key":"k","Value":null,"Flags":0,"LockIndex":0,"CreateIndex":1,"ModifyIndex":1}]"#;
    // Content-Length promises more than arrives before the server closes.
    let mut short = http(200, &[b"X-Consul-Index: 3"], full);
    short.truncate(short.len() - 20);
    // A chunked body that stops in the middle of a chunk.
    let mut chunked = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    chunked.extend_from_slice(format!("{:x}\r\n", full.len()).as_bytes());
    chunked.extend_from_slice(&full[..30]);
    // A chunk size that is not hex.
    let mut bad_chunk =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n"
            .to_vec();
    bad_chunk.extend_from_slice(full);
    // A head cut off before its end, and no status line at all.
    let head_only = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nX-Consul-In".to_vec();
    let garbage = b"SSH-2.0-OpenSSH_9.6\r\n".to_vec();
    for (answer, kind, want) in [
        // A connection that breaks mid-answer is a connection failure (worth a retry).
        (
            short,
            ErrorKind::Connection,
            "the answer was cut off after 62 of 82 bytes",
        ),
        (
            chunked,
            ErrorKind::Connection,
            "the answer was cut off after 30 bytes",
        ),
        (head_only, ErrorKind::Connection, "I/O error"),
        // What no HTTP server says is a bad answer.
        (bad_chunk, ErrorKind::BadResponse, "HTTP protocol error"),
        (garbage, ErrorKind::BadResponse, "HTTP protocol error"),
    ] {
        srv.answer(answer);
        let e = client.kv().get("k").unwrap_err();
        assert_eq!(e.kind(), kind, "{e}");
        assert_eq!(e.endpoint(), Some("GET /v1/kv/k"));
        assert!(e.to_string().contains(want), "{want}: {e}");
        assert!(one_printable_line(&e.to_string()), "{e}");
    }
}

// ---- requests the HTTP stack cannot carry ------------------------------------------------------

#[test]
fn keys_too_long_for_a_url_are_refused_before_sending() {
    let srv = Hostile::start();
    let client = srv.client();
    srv.answer(ok_json(b"[]"));
    let key = "k".repeat(70_000);
    for e in [
        client.kv().get(&key).unwrap_err(),
        client.kv().put(&key, b"v").unwrap_err(),
        client.sessions().destroy(&key).unwrap_err(),
        client
            .watch_key(&key)
            .and_then(|mut w| w.next(Some(Duration::from_millis(1)), None))
            .unwrap_err(),
    ] {
        if e.kind() == ErrorKind::Timeout {
            continue; // the watch: its poll fails in the background
        }
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(
            e.to_string()
                .contains("over the 65534 an HTTP request can carry"),
            "{e}"
        );
        assert!(e.to_string().len() < 3000);
        assert!(!e.is_transient());
    }
    srv.drain_requests();
    assert!(client.kv().get(&key).is_err());
    assert!(srv.requests.try_recv().is_err(), "a request was sent");
    // Below the limit the request goes out.
    let fits = "k".repeat(60_000);
    assert_eq!(client.kv().get(&fits).unwrap(), None);
    assert_eq!(srv.next_request().len(), "/v1/kv/".len() + 60_000);
}

// ---- sequencers (they travel between processes) ------------------------------------------------

#[test]
fn sequencers_read_back_and_garbage_is_refused() {
    use baton::Sequencer;
    check(
        512,
        (
            any::<u64>(),
            any::<u64>(),
            "[0-9a-f-]{1,40}",
            any::<String>().prop_filter("a key is not empty", |k| !k.is_empty()),
        ),
        |(lock_index, token, session, key)| {
            let s = Sequencer {
                key,
                session,
                lock_index,
                token,
            };
            prop_assert_eq!(Sequencer::parse(&s.to_string()).unwrap(), s);
            Ok(())
        },
    );
    check(
        1024,
        prop_oneof![any::<String>(), "[0-9:a-f-]{0,12}(:.{0,6})?"],
        |text| {
            match Sequencer::parse(&text) {
                // ("007:+1:s:k" is read as 7 and 1: what it reads stays the same.)
                Ok(s) => prop_assert_eq!(Sequencer::parse(&s.to_string()).unwrap(), s),
                Err(e) => {
                    prop_assert_eq!(e.kind(), ErrorKind::InvalidArgument);
                    prop_assert!(e.to_string().starts_with("invalid sequencer "));
                    prop_assert!(one_printable_line(&e.to_string()), "{:?}", e.to_string());
                }
            }
            Ok(())
        },
    );
}
