//! HTTPS and mutual TLS against the dev server's HTTPS listener, configured through the
//! `CONSUL_*` variables as a user would: a verified server, a wrong name and an unknown CA
//! refused, `CONSUL_HTTP_SSL_VERIFY=false`, `CONSUL_CAPATH`, `CONSUL_TLS_SERVER_NAME`, mTLS
//! with and without a client certificate, a CA certificate used as the server's, and a lock
//! and election round trip over mTLS. Each refusal's message says what to set.
//!
//! These tests always start their own dev servers (with `BATON_TEST_CONSUL` too): a real
//! agent's TLS settings and certificates cannot be chosen from a test.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use baton::{Client, ClientBuilder, ErrorKind};
use baton_devserver::certs::{self, CertAuthority, CertFiles, CertKind, LeafOptions};
use baton_devserver::{Config, DevServer, TlsConfig};

const PATIENCE: Duration = Duration::from_secs(20);

/// A directory of certificates made as `consul tls ca create` / `cert create` make them,
/// removed on drop.
struct Pki {
    dir: PathBuf,
    ca: CertFiles,
    /// A second CA that signed nothing the server uses.
    other_ca: CertFiles,
    server: CertFiles,
    client: CertFiles,
    /// A self-signed `CA:TRUE` certificate (`openssl req -x509`).
    self_signed: CertFiles,
    /// A directory holding the other CA and the right one (`CONSUL_CAPATH`).
    capath: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pki() -> Pki {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "baton-tls-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ca = CertAuthority::create(certs::DEFAULT_DOMAIN, certs::CA_DAYS).unwrap();
    let ca_files = ca.write(&dir).unwrap();
    assert_eq!(ca_files.cert, dir.join("consul-agent-ca.pem"));
    let server = ca
        .issue_into(&LeafOptions::new(CertKind::Server), &dir)
        .unwrap();
    assert_eq!(server.cert, dir.join("dc1-server-consul-0.pem"));
    let client = ca
        .issue_into(&LeafOptions::new(CertKind::Client), &dir)
        .unwrap();
    let other_dir = dir.join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    let other = CertAuthority::create("other", certs::CA_DAYS).unwrap();
    let other_ca = other.write(&other_dir).unwrap();
    let self_signed = certs::self_signed_ca(&[], 30)
        .unwrap()
        .write(&dir, "self-signed")
        .unwrap();
    let capath = dir.join("capath");
    std::fs::create_dir_all(&capath).unwrap();
    std::fs::copy(&other_ca.cert, capath.join("a-other.pem")).unwrap();
    std::fs::copy(&ca_files.cert, capath.join("b-consul.pem")).unwrap();
    Pki {
        dir,
        ca: ca_files,
        other_ca,
        server,
        client,
        self_signed,
        capath,
    }
}

/// A dev server with an HTTPS listener presenting `cert`; `mtls` turns on verify_incoming.
fn https_server(pki: &Pki, cert: &CertFiles, mtls: bool) -> DevServer {
    DevServer::start(Config {
        https_addr: Some(([127, 0, 0, 1], 0).into()),
        tls: Some(TlsConfig {
            cert_file: cert.cert.clone(),
            key_file: cert.key.clone(),
            ca_file: Some(pki.ca.cert.clone()),
            verify_incoming: mtls,
        }),
        ..Config::default()
    })
    .expect("dev server with HTTPS starts")
}

fn p(path: &Path) -> String {
    path.to_str().unwrap().to_string()
}

/// A client built from these `CONSUL_*` variables only.
fn client_from(vars: &[(&str, String)]) -> Client {
    let env: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    ClientBuilder::from_lookup(|name| env.get(name).cloned())
        .request_timeout(Duration::from_secs(10))
        .build()
        .expect("client builds")
}

fn https_addr(dev: &DevServer) -> String {
    dev.https_url().expect("an HTTPS listener")
}

/// A write and a read back: what "it works" means here.
fn round_trip(c: &Client) {
    let key = format!("tls/{}", std::process::id());
    assert!(c.kv().put(&key, b"over tls").unwrap());
    let got = c.kv().get(&key).unwrap().expect("the key");
    assert_eq!(got.value.as_deref(), Some(&b"over tls"[..]));
}

/// The error of a read, with its full text.
fn refused(c: &Client) -> (baton::Error, String) {
    let e = c.kv().get("tls/any").unwrap_err();
    let text = e.to_string();
    eprintln!("refused as: {text}");
    (e, text)
}

#[test]
fn a_server_signed_by_the_trusted_ca_is_verified() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, false);
    round_trip(&client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CACERT", p(&pki.ca.cert)),
    ]));
    // host:port with CONSUL_HTTP_SSL=true is the same thing.
    round_trip(&client_from(&[
        ("CONSUL_HTTP_ADDR", dev.https_addr().unwrap().to_string()),
        ("CONSUL_HTTP_SSL", "true".into()),
        ("CONSUL_CACERT", p(&pki.ca.cert)),
    ]));
    // The plain HTTP listener still answers beside it, as Consul's does.
    round_trip(&client_from(&[("CONSUL_HTTP_ADDR", dev.http_addr())]));
}

#[test]
fn an_unknown_issuer_is_refused_and_names_consul_cacert() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, false);
    // No CA configured: the server's CA is not among the default roots.
    let (e, text) = refused(&client_from(&[("CONSUL_HTTP_ADDR", https_addr(&dev))]));
    assert_eq!(e.kind(), ErrorKind::Connection, "{text}");
    assert!(
        !e.is_transient(),
        "a certificate problem does not mend: {text}"
    );
    assert!(text.contains("UnknownIssuer"), "{text}");
    assert!(
        text.contains("signed by a CA this client does not trust: set CONSUL_CACERT"),
        "{text}"
    );
    assert!(text.contains("CONSUL_CAPATH"), "{text}");
    // The wrong CA configured: the message names it.
    let (_, text) = refused(&client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CACERT", p(&pki.other_ca.cert)),
    ]));
    assert!(
        text.contains(&format!(
            "signed by none of the CAs in CONSUL_CACERT={}",
            pki.other_ca.cert.display()
        )),
        "{text}"
    );
}

#[test]
fn a_wrong_server_name_is_refused_and_names_consul_tls_server_name() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, false);
    let (e, text) = refused(&client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CACERT", p(&pki.ca.cert)),
        ("CONSUL_TLS_SERVER_NAME", "consul.example.com".into()),
    ]));
    assert_eq!(e.kind(), ErrorKind::Connection, "{text}");
    assert!(!e.is_transient(), "{text}");
    assert!(
        text.contains("not valid for the name \"consul.example.com\""),
        "{text}"
    );
    assert!(
        text.contains("(it holds server.dc1.consul, localhost, 127.0.0.1)"),
        "{text}"
    );
    assert!(
        text.contains("set CONSUL_TLS_SERVER_NAME to a name the certificate holds"),
        "{text}"
    );
}

#[test]
fn consul_tls_server_name_verifies_against_that_name() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, false);
    // The agent's certificate names server.dc1.consul; the address is an IP.
    round_trip(&client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CACERT", p(&pki.ca.cert)),
        ("CONSUL_TLS_SERVER_NAME", "server.dc1.consul:8501".into()),
    ]));
}

#[test]
fn ssl_verify_false_accepts_an_unknown_server() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, false);
    round_trip(&client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_HTTP_SSL_VERIFY", "false".into()),
    ]));
}

#[test]
fn consul_capath_trusts_every_ca_in_the_directory() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, false);
    round_trip(&client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CAPATH", p(&pki.capath)),
    ]));
    // A directory without the server's CA: refused, naming the directory.
    let only_other = pki.dir.join("capath-other");
    std::fs::create_dir_all(&only_other).unwrap();
    std::fs::copy(&pki.other_ca.cert, only_other.join("other.pem")).unwrap();
    let (_, text) = refused(&client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CAPATH", p(&only_other)),
    ]));
    assert!(
        text.contains(&format!("CONSUL_CAPATH={}", only_other.display())),
        "{text}"
    );
}

#[test]
fn a_ca_certificate_used_as_the_servers_is_explained() {
    let pki = pki();
    let dev = https_server(&pki, &pki.self_signed, false);
    // Trusted, and still refused: CA:TRUE is not a server certificate.
    let (e, text) = refused(&client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CACERT", p(&pki.self_signed.cert)),
    ]));
    assert_eq!(e.kind(), ErrorKind::Connection, "{text}");
    assert!(text.contains("CaUsedAsEndEntity"), "{text}");
    assert!(
        text.contains("the server presents a CA certificate (CA:TRUE"),
        "{text}"
    );
    assert!(text.contains("consul tls cert create -server"), "{text}");
    // What a user may do meanwhile, for a test setup.
    round_trip(&client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_HTTP_SSL_VERIFY", "false".into()),
    ]));
}

#[test]
fn mtls_without_a_client_certificate_says_to_set_one() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, true);
    let (e, text) = refused(&client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CACERT", p(&pki.ca.cert)),
    ]));
    assert_eq!(e.kind(), ErrorKind::Connection, "{text}");
    assert!(
        text.contains("set CONSUL_CLIENT_CERT and CONSUL_CLIENT_KEY"),
        "{text}"
    );
    assert!(!e.is_transient(), "{text}");
    // The server's alert, or (when the request was already on its way) the closed connection.
    assert!(
        text.contains("the server requires a client certificate (mutual TLS)")
            || text.contains("if it requires client certificates (the agent's verify_incoming)"),
        "{text}"
    );
}

#[test]
fn a_lock_over_mtls_without_a_client_certificate_fails_at_once() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, true);
    let c = client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CACERT", p(&pki.ca.cert)),
    ]);
    // With a body on its way (a session create, a txn), the refusal often arrives as a
    // closed connection rather than the alert: neither is waited out until the timeout.
    let e = c
        .lock("tls/no-cert")
        .unwrap()
        .acquire(Some(Duration::from_secs(3600)), None)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(!e.is_transient(), "{e}");
    assert!(
        e.to_string()
            .contains("set CONSUL_CLIENT_CERT and CONSUL_CLIENT_KEY"),
        "{e}"
    );
}

#[test]
fn mtls_with_a_client_certificate_works() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, true);
    round_trip(&client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CACERT", p(&pki.ca.cert)),
        ("CONSUL_CLIENT_CERT", p(&pki.client.cert)),
        ("CONSUL_CLIENT_KEY", p(&pki.client.key)),
    ]));
}

#[test]
fn mtls_with_a_certificate_from_another_ca_is_refused() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, true);
    let other =
        CertAuthority::load(&pki.other_ca.cert, &pki.other_ca.key, certs::DEFAULT_DOMAIN).unwrap();
    let stranger = other
        .issue(&LeafOptions::new(CertKind::Cli))
        .unwrap()
        .write(&pki.dir, "stranger")
        .unwrap();
    let (e, text) = refused(&client_from(&[
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CACERT", p(&pki.ca.cert)),
        ("CONSUL_CLIENT_CERT", p(&stranger.cert)),
        ("CONSUL_CLIENT_KEY", p(&stranger.key)),
    ]));
    assert_eq!(e.kind(), ErrorKind::Connection, "{text}");
    assert!(text.contains("stranger.pem"), "{text}");
}

#[test]
fn a_lock_and_an_election_round_trip_over_mtls() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, true);
    let vars = [
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CACERT", p(&pki.ca.cert)),
        ("CONSUL_CLIENT_CERT", p(&pki.client.cert)),
        ("CONSUL_CLIENT_KEY", p(&pki.client.key)),
        ("CONSUL_TLS_SERVER_NAME", "server.dc1.consul".into()),
    ];
    let (a, b) = (client_from(&vars), client_from(&vars));
    let la = a.lock("tls/lock").unwrap();
    let lb = b.lock("tls/lock").unwrap();
    assert!(la.acquire(Some(PATIENCE), None).unwrap());
    assert!(la.is_held());
    assert!(!lb.try_acquire().unwrap(), "held by a");
    assert!(la.release().unwrap());
    assert!(lb.acquire(Some(PATIENCE), None).unwrap());
    assert!(lb.release().unwrap());

    let ea = a.election("tls/leader").unwrap();
    assert!(ea.campaign(b"a", Some(PATIENCE), None).unwrap());
    let leader = b.leader("tls/leader").unwrap().expect("a leader");
    assert_eq!(leader.value, b"a");
    assert_eq!(leader.session, a.default_session().unwrap().id());
    assert!(ea.resign().unwrap());
    assert!(b.leader("tls/leader").unwrap().is_none());
    assert!(a.close(PATIENCE));
    assert!(b.close(PATIENCE));
}

/// A lock that cycles over `vars`' HTTPS goes direct (its calls on the loop connection, TLS
/// included) and its key is watched by the key hub's one poller thread, as over plain HTTP.
fn cycles_direct_over(vars: &[(&str, String)], dev: &DevServer) {
    let c = client_from(vars);
    let lock = c.lock("tls/direct").unwrap();
    for _ in 0..3 {
        assert!(lock.acquire(Some(PATIENCE), None).unwrap());
        assert!(lock.release().unwrap());
    }
    assert!(
        !lock.wants_loop_conn(),
        "cycling over HTTPS opened no loop connection"
    );
    // Every acquire and release now goes direct: one request each, on that connection.
    let before = c.direct_calls();
    for _ in 0..5 {
        assert!(lock.acquire(Some(PATIENCE), None).unwrap());
        assert!(lock.release().unwrap());
    }
    assert_eq!(
        c.direct_calls() - before,
        10,
        "calls that did not go direct"
    );
    // A held key is watched over HTTPS by the poller: one poll, and a loss is noticed.
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert_eq!(c.key_watch_polls(), 1);
    let sid = lock.session().expect("a session").id().to_string();
    assert!(dev.invalidate_session(&sid));
    let why = lock.wait_lost(Some(PATIENCE), None).unwrap();
    assert!(
        matches!(
            why,
            baton::LockLost::KeyChanged | baton::LockLost::SessionLost(_)
        ),
        "{why:?}"
    );
    assert!(c.close(PATIENCE));
}

#[test]
fn locks_go_direct_over_https() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, false);
    let vars = [
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CACERT", p(&pki.ca.cert)),
    ];
    cycles_direct_over(&vars, &dev);
}

#[test]
fn locks_go_direct_over_mtls_with_a_server_name() {
    let pki = pki();
    let dev = https_server(&pki, &pki.server, true);
    let vars = [
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_CACERT", p(&pki.ca.cert)),
        ("CONSUL_CLIENT_CERT", p(&pki.client.cert)),
        ("CONSUL_CLIENT_KEY", p(&pki.client.key)),
        ("CONSUL_TLS_SERVER_NAME", "server.dc1.consul".into()),
    ];
    cycles_direct_over(&vars, &dev);
}

#[test]
fn locks_go_direct_without_verification_too() {
    let pki = pki();
    let dev = https_server(&pki, &pki.self_signed, false);
    let vars = [
        ("CONSUL_HTTP_ADDR", https_addr(&dev)),
        ("CONSUL_HTTP_SSL_VERIFY", "false".into()),
    ];
    cycles_direct_over(&vars, &dev);
}
