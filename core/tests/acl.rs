//! ACLs: a lock refused for lack of `key:write`, a session refused for lack of
//! `session:write`, a `deny` rule beating a `write` prefix, no token and an unknown token —
//! each refusal naming the permission, the key or node, and what to set; and no token secret
//! in any log record, error text or `Debug` output of a run that uses tokens.
//!
//! Its own test binary: it installs a process-wide logger that records everything, every
//! crate's records at every level. The dev server plays the agent (tokens with rules need
//! `Config::acl_tokens`), also when `BATON_TEST_CONSUL` names a real one.

use std::sync::{Mutex, Once};
use std::time::Duration;

use baton::{Client, ClientBuilder, ErrorKind, KvOp};
use baton_devserver::{Config, DevServer};

const PATIENCE: Duration = Duration::from_secs(20);

const MANAGEMENT: &str = "mgmt-s3cret-9d1f0c";
/// `key:read` on jobs/, `session:write`: can make sessions, cannot lock.
const READER: &str = "reader-s3cret-77ab21";
/// `key:write` on jobs/, no session rule: cannot make the session a lock needs.
const NO_SESSION: &str = "nosession-s3cret-3c4e5f";
/// `key:write` on jobs/ but `deny` on jobs/secret/, `session:write`.
const LOCKER: &str = "locker-s3cret-a0b1c2";
const SECRETS: [&str; 4] = [MANAGEMENT, READER, NO_SESSION, LOCKER];

static RECORDS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Recorder;

impl log::Log for Recorder {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        RECORDS
            .lock()
            .unwrap()
            .push(format!("{} {} {}", r.level(), r.target(), r.args()));
    }
    fn flush(&self) {}
}

static LOGGER: Recorder = Recorder;

/// Records every log record of the process from now on.
fn record_logs() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        log::set_logger(&LOGGER).unwrap();
        log::set_max_level(log::LevelFilter::Trace);
    });
}

fn server() -> DevServer {
    record_logs();
    let rules = |r: &str| r.to_string();
    DevServer::start(Config {
        session_ttl_min: Duration::from_secs(1),
        acl_token: Some(MANAGEMENT.into()),
        acl_tokens: vec![
            (
                READER.into(),
                rules(
                    r#"key_prefix "jobs/" { policy = "read" }
                       session_prefix "" { policy = "write" }"#,
                ),
            ),
            (
                NO_SESSION.into(),
                rules(r#"key_prefix "jobs/" { policy = "write" }"#),
            ),
            (
                LOCKER.into(),
                rules(
                    r#"key_prefix "jobs/" { policy = "write" }
                       key_prefix "jobs/secret/" { policy = "deny" }
                       session_prefix "" { policy = "write" }"#,
                ),
            ),
        ],
        ..Config::default()
    })
    .expect("dev server starts")
}

/// A client of `dev` with `token` in `CONSUL_HTTP_TOKEN` (none when `None`).
fn client(dev: &DevServer, token: Option<&str>) -> Client {
    let addr = dev.http_addr();
    let token = token.map(str::to_string);
    ClientBuilder::from_lookup(|name| match name {
        "CONSUL_HTTP_ADDR" => Some(addr.clone()),
        "CONSUL_HTTP_TOKEN" => token.clone(),
        _ => None,
    })
    .build()
    .unwrap()
}

/// The refusal of acquiring `key` as `token`.
fn lock_refusal(dev: &DevServer, token: Option<&str>, key: &str) -> baton::Error {
    let c = client(dev, token);
    let lock = c.lock(key).unwrap();
    let e = lock.acquire(Some(PATIENCE), None).unwrap_err();
    eprintln!("refused as: {e}");
    assert!(!lock.is_held());
    e
}

#[test]
fn a_lock_is_refused_for_lack_of_key_write() {
    let dev = server();
    let e = lock_refusal(&dev, Some(READER), "jobs/a");
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    assert!(!e.is_transient(), "{e}");
    let text = e.to_string();
    assert!(text.contains("key:write on \"jobs/a\""), "{text}");
    assert!(
        text.contains("`key_prefix \"jobs/a\" { policy = \"write\" }`"),
        "{text}"
    );
    assert!(!text.contains("session:write"), "{text}");
}

#[test]
fn a_session_is_refused_for_lack_of_session_write() {
    let dev = server();
    let e = lock_refusal(&dev, Some(NO_SESSION), "jobs/b");
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    let text = e.to_string();
    // Consul's own 403 text, then what to do.
    assert!(
        text.contains(
            "Consul answered 403: Permission denied: token with AccessorID \
             '00000000-0000-4000-8000-000000000002' lacks permission 'session:write' on \
             \"baton-dev\""
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "the ACL token lacks session:write on the node \"baton-dev\": add \
             `session_prefix \"baton-dev\" { policy = \"write\" }` to one of its policies, or \
             set CONSUL_HTTP_TOKEN to a token that has it"
        ),
        "{text}"
    );
}

#[test]
fn a_deny_rule_beats_a_write_prefix() {
    let dev = server();
    let c = client(&dev, Some(LOCKER));
    let lock = c.lock("jobs/open").unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.release().unwrap());
    let e = lock_refusal(&dev, Some(LOCKER), "jobs/secret/x");
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    // Refused at its first read already: deny takes read away too.
    assert!(
        e.to_string()
            .contains("lacks permission 'key:read' on \"jobs/secret/x\""),
        "{e}"
    );
    assert!(c.close(PATIENCE));
}

#[test]
fn no_token_says_to_set_consul_http_token() {
    let dev = server();
    let e = lock_refusal(&dev, None, "jobs/c");
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("Permission denied: anonymous token lacks permission 'session:write'"),
        "{text}"
    );
    assert!(
        text.contains(
            "no ACL token was sent, and the anonymous token lacks session:write on the node \
             \"baton-dev\": set CONSUL_HTTP_TOKEN (or CONSUL_HTTP_TOKEN_FILE)"
        ),
        "{text}"
    );
}

#[test]
fn an_unknown_token_says_so() {
    let dev = server();
    let e = lock_refusal(&dev, Some("not-a-known-s3cret"), "jobs/d");
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("Consul answered 403: ACL not found"),
        "{text}"
    );
    assert!(
        text.contains("Consul does not know this ACL token")
            && text.contains("check CONSUL_HTTP_TOKEN / CONSUL_HTTP_TOKEN_FILE"),
        "{text}"
    );
    assert!(!text.contains("not-a-known-s3cret"), "{text}");
}

#[test]
fn a_transaction_refusal_names_the_op_and_its_key() {
    let dev = server();
    let c = client(&dev, Some(READER));
    let e = c
        .txn(&[KvOp::get("jobs/r"), KvOp::set("jobs/w", b"v", 0)])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    assert!(
        e.to_string()
            .contains("op 1 (set \"jobs/w\"): the ACL token lacks key:write on \"jobs/w\""),
        "{e}"
    );
}

#[test]
fn tokens_never_appear_in_logs_errors_or_debug_output() {
    let dev = server();
    let mut texts: Vec<String> = Vec::new();
    // Work that succeeds, with the token in the environment and set explicitly.
    let good = client(&dev, Some(LOCKER));
    let explicit = ClientBuilder::new()
        .address(dev.http_addr())
        .token(LOCKER)
        .build()
        .unwrap();
    texts.push(format!("{good:?} {explicit:?}"));
    texts.push(format!(
        "{:?}",
        ClientBuilder::new()
            .token(MANAGEMENT)
            .basic_auth("u", READER)
    ));
    let lock = explicit.lock("jobs/leak").unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    texts.push(format!(
        "{lock:?} {:?}",
        explicit.default_session().unwrap()
    ));
    let election = good.election("jobs/leader").unwrap();
    assert!(election.campaign(b"me", Some(PATIENCE), None).unwrap());
    assert!(election.resign().unwrap());
    assert!(lock.release().unwrap());
    // Every kind of refusal, Display and Debug.
    let mut errors = vec![
        lock_refusal(&dev, Some(READER), "jobs/leak2"),
        lock_refusal(&dev, Some(NO_SESSION), "jobs/leak3"),
        lock_refusal(&dev, Some("unknown-s3cret-token"), "jobs/leak4"),
        lock_refusal(&dev, Some(LOCKER), "jobs/secret/leak"),
    ];
    errors.push(
        client(&dev, Some(READER))
            .txn(&[KvOp::set("jobs/w", b"v", 0)])
            .unwrap_err(),
    );
    // A connection failure with a token set.
    errors.push(
        ClientBuilder::new()
            .address("127.0.0.1:1")
            .token(MANAGEMENT)
            .build()
            .unwrap()
            .kv()
            .get("k")
            .unwrap_err(),
    );
    for e in &errors {
        texts.push(format!("{e} {e:?} {:?}", e.server_text()));
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            texts.push(format!("{s} {s:?}"));
            source = s.source();
        }
    }
    assert!(good.close(PATIENCE) && explicit.close(PATIENCE));
    let records = RECORDS.lock().unwrap().clone();
    // Both baton's records and the HTTP client's (which logs each request with its
    // headers, X-Consul-Token redacted) were seen.
    assert!(
        records.iter().any(|r| r.contains(" baton")) && records.iter().any(|r| r.contains(" ureq")),
        "the logger saw baton's and ureq's records: {records:?}"
    );
    for secret in SECRETS.iter().chain(&["unknown-s3cret-token"]) {
        for t in texts.iter().chain(&records) {
            assert!(!t.contains(secret), "{secret} shown in: {t}");
        }
    }
    eprintln!(
        "{} log records and {} texts checked",
        records.len(),
        texts.len()
    );
}
