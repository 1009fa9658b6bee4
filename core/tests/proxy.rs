//! baton behind an HTTP CONNECT proxy named by the environment (`HTTP_PROXY`, `HTTPS_PROXY`),
//! as ureq reads it: locks, an election and a lock's loss work through the proxy, over HTTP
//! and HTTPS (a TLS server name too), with every path a client has without one (the
//! one-request lock calls, one poller thread for the key hub), and nothing bypasses it (the
//! proxy counted the tunnels; with the proxy gone, a new client reaches nothing).
//!
//! How ureq 3.5 picks the proxy (`ureq::Proxy::try_from_env`, read when a client is built,
//! as its agent's config is made): the first of `ALL_PROXY`, `all_proxy`, `HTTPS_PROXY`,
//! `https_proxy`, `HTTP_PROXY`, `http_proxy` that holds a valid proxy URL, whatever the
//! target's scheme; `http://` targets are tunnelled with CONNECT too. `NO_PROXY` (or, when
//! that is unset, `no_proxy`) lists hosts that bypass it.
//!
//! ONE test function only, alone in this binary: it sets those process-wide variables, which
//! a test running beside it in the same process would see (and `std::env::set_var` races
//! with other threads reading the environment). Keep it that way.
//!
//! It always starts its own dev server (with `BATON_TEST_CONSUL` or `BATON_TEST_TRANSPORT=unix`
//! too): it invalidates a session through the dev server's controls, serves HTTPS with
//! certificates made here, and a unix socket would take no proxy.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use baton::{Client, ClientBuilder, LockLost};
use baton_devserver::certs::{self, CertAuthority, CertKind, LeafOptions};
use baton_devserver::{Config, ConnectProxy, DevServer, TlsConfig};
use common::{holder, TTL_MIN};

const PATIENCE: Duration = Duration::from_secs(20);

/// Every variable ureq's proxy settings come from (`Proxy::try_from_env`, `NoProxy`).
const PROXY_VARS: &[&str] = &[
    "ALL_PROXY",
    "all_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// Makes `name` (one of [`PROXY_VARS`]) the only proxy setting: every other one is removed,
/// `NO_PROXY`/`no_proxy` included, so a machine's own settings (a `NO_PROXY` naming
/// `127.0.0.1` or `localhost` is common) neither pick another proxy nor let the dev server's
/// address bypass this one.
fn only_proxy_var(name: &str, url: &str) {
    for v in PROXY_VARS {
        std::env::remove_var(v);
    }
    std::env::set_var(name, url);
}

/// A directory with a CA and a server certificate it signed (for 127.0.0.1 and localhost,
/// as `consul tls cert create -server` makes), removed on drop.
struct Pki {
    dir: PathBuf,
    ca_cert: PathBuf,
    server: certs::CertFiles,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pki() -> Pki {
    let dir = std::env::temp_dir().join(format!("baton-proxy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ca = CertAuthority::create(certs::DEFAULT_DOMAIN, certs::CA_DAYS).unwrap();
    let ca_cert = ca.write(&dir).unwrap().cert;
    let server = ca
        .issue_into(&LeafOptions::new(CertKind::Server), &dir)
        .unwrap();
    Pki {
        dir,
        ca_cert,
        server,
    }
}

/// Lock cycles with another client watching, two keys held at once (two key groups), a
/// held lock's loss noticed, an election: over whatever `a` and `b` are configured with.
fn exercise(a: &Client, b: &Client, dev: &DevServer, prefix: &str) {
    let key = format!("{prefix}-locks/one");
    let la = a.lock(&key).unwrap();
    let lb = b.lock(&key).unwrap();
    for round in 0..3 {
        assert!(la.acquire(Some(PATIENCE), None).unwrap(), "round {round}");
        let sid = la.session().expect("a session").id().to_string();
        assert_eq!(holder(b, &key), Some(sid), "b sees a as the holder");
        assert!(!lb.try_acquire().unwrap(), "held by a");
        assert!(la.release().unwrap());
    }
    assert!(lb.acquire(Some(PATIENCE), None).unwrap());
    assert!(lb.release().unwrap());

    // Two held keys of different first segments: two key groups, each its own long poll,
    // both driven by the one poller thread, as without a proxy.
    let other = a.lock(&format!("{prefix}-other/two")).unwrap();
    assert!(la.acquire(Some(PATIENCE), None).unwrap());
    assert!(other.acquire(Some(PATIENCE), None).unwrap());
    assert_eq!(a.key_watch_polls(), 2);
    assert_eq!(a.key_watch_threads(), 1, "one poller thread behind a proxy");
    // The loss of a held lock is noticed through the proxy.
    let sid = la.session().expect("a session").id().to_string();
    assert!(dev.invalidate_session(&sid));
    let why = la.wait_lost(Some(PATIENCE), None).unwrap();
    assert!(
        matches!(why, LockLost::KeyChanged | LockLost::SessionLost(_)),
        "{why:?}"
    );
    assert!(!la.is_held());

    let leader_key = format!("{prefix}-election/leader");
    let ea = a.election(&leader_key).unwrap();
    assert!(ea.campaign(b"a", Some(PATIENCE), None).unwrap());
    let leader = b.leader(&leader_key).unwrap().expect("a leader");
    assert_eq!(leader.value, b"a");
    assert_eq!(leader.session, a.default_session().unwrap().id());
    assert!(ea.resign().unwrap());
    assert!(b.leader(&leader_key).unwrap().is_none());

    // The one-request lock calls went through the proxy's tunnel like every other.
    assert!(a.direct_calls() > 0, "no direct lock call behind a proxy");
}

#[test]
fn locks_elections_and_losses_work_through_a_connect_proxy_from_the_environment() {
    let pki = pki();
    let dev = DevServer::start(Config {
        session_ttl_min: TTL_MIN,
        https_addr: Some(([127, 0, 0, 1], 0).into()),
        tls: Some(TlsConfig {
            cert_file: pki.server.cert.clone(),
            key_file: pki.server.key.clone(),
            ca_file: Some(pki.ca_cert.clone()),
            verify_incoming: false,
        }),
        ..Config::default()
    })
    .expect("dev server with HTTPS starts");

    // Plain HTTP, the proxy in HTTP_PROXY (ureq takes it for every scheme).
    let http_proxy = ConnectProxy::start().expect("proxy starts");
    only_proxy_var("HTTP_PROXY", &http_proxy.url());
    let plain = || {
        Client::builder()
            .address(dev.http_addr())
            .request_timeout(Duration::from_secs(10))
            .build()
            .expect("client builds")
    };
    let (a, b) = (plain(), plain());
    exercise(&a, &b, &dev, "proxy-http");
    assert!(
        http_proxy.tunnels() > 0,
        "the HTTP_PROXY proxy saw no tunnel: baton bypassed it"
    );
    assert!(a.close(PATIENCE));
    assert!(b.close(PATIENCE));
    // Nothing bypasses the proxy: with it gone, a new client reaches nothing, and says why.
    let gone = http_proxy.url();
    let http_tunnels = http_proxy.tunnels();
    http_proxy.stop();
    let e = plain()
        .kv()
        .get("k")
        .expect_err("the agent reached without the proxy");
    assert_eq!(e.kind(), baton::ErrorKind::Connection, "{e}");
    assert!(e.to_string().contains(&format!("the proxy {gone}")), "{e}");

    // HTTPS inside the tunnel, the proxy in HTTPS_PROXY: another proxy, so its count says
    // this variable was the one used. (A client reads the variables when it is built.)
    let https_proxy = ConnectProxy::start().expect("proxy starts");
    only_proxy_var("HTTPS_PROXY", &https_proxy.url());
    let vars = [
        (
            "CONSUL_HTTP_ADDR",
            dev.https_url().expect("an HTTPS listener"),
        ),
        ("CONSUL_CACERT", pki.ca_cert.to_str().unwrap().to_string()),
    ];
    let secure = || {
        ClientBuilder::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.clone())
        })
        .request_timeout(Duration::from_secs(10))
        .build()
        .expect("client builds")
    };
    let (a, b) = (secure(), secure());
    exercise(&a, &b, &dev, "proxy-https");
    assert!(
        https_proxy.tunnels() > 0,
        "the HTTPS_PROXY proxy saw no tunnel: baton bypassed it"
    );
    assert!(a.close(PATIENCE));
    assert!(b.close(PATIENCE));
    assert!(http_tunnels > 0);

    // A TLS server name is checked in the certificate while the proxy is asked for the
    // agent's address.
    let before = https_proxy.tunnels();
    let named = ClientBuilder::from_lookup(|name| match name {
        "CONSUL_HTTP_ADDR" => dev.https_url(),
        "CONSUL_CACERT" => pki.ca_cert.to_str().map(str::to_string),
        "CONSUL_TLS_SERVER_NAME" => Some("server.dc1.consul".to_string()),
        _ => None,
    })
    .build()
    .expect("a server name through a proxy");
    named
        .kv()
        .put("proxy-named/k", b"v")
        .expect("a write through the proxy");
    assert!(
        https_proxy.tunnels() > before,
        "the named client bypassed the proxy"
    );
    assert!(named.close(PATIENCE));

    // NO_PROXY naming the agent: ureq connects straight, and so do baton's own connections
    // (the direct lock calls), none of it through the proxy.
    std::env::set_var("NO_PROXY", "127.0.0.1");
    let before = https_proxy.tunnels();
    let straight = plain();
    let lock = straight.lock("proxy-none/lock").unwrap();
    for _ in 0..3 {
        assert!(lock.acquire(Some(PATIENCE), None).unwrap());
        assert!(lock.release().unwrap());
    }
    assert!(
        straight.direct_calls() > 0,
        "NO_PROXY kept baton's own connections off"
    );
    assert_eq!(
        https_proxy.tunnels(),
        before,
        "a NO_PROXY agent was reached through the proxy"
    );
    assert!(straight.close(PATIENCE));

    // Every session the clients made was destroyed by their close, through the proxy (the
    // invalidated ones are gone anyway). Asked without a proxy.
    for v in PROXY_VARS {
        std::env::remove_var(v);
    }
    let check = Client::builder()
        .address(dev.http_addr())
        .build()
        .expect("client builds");
    let left = check.sessions().list().unwrap();
    assert!(left.is_empty(), "sessions left after close: {left:?}");
    assert!(check.close(PATIENCE));
}
