//! Shared test fixture: a dev server (or a real Consul named by
//! `BATON_TEST_CONSUL`) and clients pointing at it.
#![allow(dead_code)]

pub mod raw;

use std::time::Duration;

use baton::{Client, ClientBuilder};
use baton_devserver::{Config, ConsulVersion, DevServer, FaultProxy};

/// The smallest session TTL the dev server accepts in these tests.
pub const TTL_MIN: Duration = Duration::from_millis(500);

/// The version `BATON_TEST_CONSUL_VERSION` names (`current` or unset: none): what a dev
/// server the suite starts emulates. Never a statement about the server under test (a
/// real Consul in `BATON_TEST_CONSUL` is whatever it is): ask [`Fixture::consul_version`].
pub fn test_consul_version() -> Option<ConsulVersion> {
    let v = std::env::var("BATON_TEST_CONSUL_VERSION").ok()?;
    if v.is_empty() || v == "current" {
        return None;
    }
    Some(
        v.parse()
            .unwrap_or_else(|e| panic!("BATON_TEST_CONSUL_VERSION={v:?}: {e}")),
    )
}

/// How the suite's clients reach a dev server it starts (`BATON_TEST_TRANSPORT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// TCP (unset, empty or `tcp`).
    Tcp,
    /// The dev server's unix socket (`unix`): `unix:///path` addresses.
    Unix,
    /// The dev server's HTTPS listener (`https`), its certificate from a CA made for the
    /// fixture, which the clients trust (`CONSUL_CACERT` as a builder setting).
    Https,
}

/// The transport `BATON_TEST_TRANSPORT` names.
pub fn test_transport() -> Transport {
    match std::env::var("BATON_TEST_TRANSPORT").as_deref() {
        Err(_) | Ok("") | Ok("tcp") => Transport::Tcp,
        Ok("unix") => Transport::Unix,
        Ok("https") => Transport::Https,
        Ok(other) => panic!("BATON_TEST_TRANSPORT={other:?}: want tcp, unix or https"),
    }
}

/// A CA and a server certificate for `127.0.0.1` in a fresh directory, as `consul tls ca
/// create` / `cert create -server` make them: `(directory, CA file, server certificate)`.
pub fn test_pki() -> (
    std::path::PathBuf,
    std::path::PathBuf,
    baton_devserver::certs::CertFiles,
) {
    use baton_devserver::certs::{self, CertAuthority, CertKind, LeafOptions};
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "baton-fixture-pki-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("pki dir");
    let ca = CertAuthority::create(certs::DEFAULT_DOMAIN, certs::CA_DAYS).expect("a CA");
    let ca_files = ca.write(&dir).expect("CA files");
    let server = ca
        .issue_into(&LeafOptions::new(CertKind::Server), &dir)
        .expect("a server certificate");
    (dir, ca_files.cert, server)
}

/// A fresh socket path for a dev server of this process (short: a unix socket path has
/// room for about 100 bytes).
pub fn socket_path() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "baton-t{}-{}.sock",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ))
}

/// A server to test against.
///
/// When it is dropped (after the test's clients, declared after it, were
/// closed by their own drop or `close`), it checks that the dev server holds no
/// session: every session a client made is destroyed by its close. A test that
/// leaves one on purpose says why with [`Fixture::sessions_may_remain`].
/// Against a real Consul (shared by tests running in parallel) sessions cannot
/// be told apart per test, so the check runs on the dev server only.
pub struct Fixture {
    pub dev: Option<DevServer>,
    /// The server's TCP address (the fixture's own requests go there).
    pub addr: String,
    /// The address the test's clients are given ([`Fixture::builder`]): `addr`, or the dev
    /// server's unix socket with `BATON_TEST_TRANSPORT=unix`.
    pub client_addr: String,
    /// With `BATON_TEST_TRANSPORT=https`: the CA the clients trust, and the directory of the
    /// fixture's certificates (removed on drop).
    pub tls_ca: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// The version the server reported in `/v1/agent/self`, asked once.
    version: std::sync::OnceLock<Option<ConsulVersion>>,
    /// Why sessions may remain at the end (`None`: none may).
    sessions_may_remain: std::cell::Cell<Option<&'static str>>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.check_sessions_left();
        if let Some((dir, _)) = &self.tls_ca {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Fixture {
    /// The drop check: no session left at the dev server.
    fn check_sessions_left(&self) {
        if std::thread::panicking()
            || self.dev.is_none()
            || self.sessions_may_remain.get().is_some()
        {
            return;
        }
        // A client whose last clone a background thread held (a callback
        // running, a clean-up) closes on that thread, just after the test's own
        // drop: wait for the list to empty, on blocking queries, for a while.
        let end = std::time::Instant::now() + Duration::from_secs(10);
        let mut index = 0;
        loop {
            let (left, next) = self.session_list(index);
            if left.is_empty() {
                return;
            }
            assert!(
                std::time::Instant::now() < end,
                "sessions left at the server after the test's clients were closed: {left:?}"
            );
            index = next;
        }
    }
}

impl Fixture {
    /// A dev server with a low `session_ttl_min`, or the real Consul of
    /// `BATON_TEST_CONSUL` when set.
    pub fn start() -> Fixture {
        Fixture::start_with(Config {
            session_ttl_min: TTL_MIN,
            ..Config::default()
        })
    }

    /// `config` as given, except that `BATON_TEST_DEVSERVER_PRETTY` (set, not empty, not `0`)
    /// makes the dev server pretty-print every JSON answer as `consul agent -dev` does, and
    /// `BATON_TEST_CONSUL_VERSION` (e.g. `1.0.8`) makes it emulate that Consul version unless
    /// `config` names another one.
    pub fn start_with(mut config: Config) -> Fixture {
        if let Ok(addr) = std::env::var("BATON_TEST_CONSUL") {
            if config.acl_token.is_none() {
                let addr = addr.trim_end_matches('/').to_string();
                return Fixture {
                    dev: None,
                    tls_ca: None,
                    client_addr: addr.clone(),
                    addr,
                    version: Default::default(),
                    sessions_may_remain: Default::default(),
                };
            }
        }
        if std::env::var("BATON_TEST_DEVSERVER_PRETTY").is_ok_and(|v| !v.is_empty() && v != "0") {
            config.pretty = true;
        }
        // A test that names a version itself keeps it.
        if config.consul_version == ConsulVersion::CURRENT {
            if let Some(v) = test_consul_version() {
                config.consul_version = v;
                // And that release's connection limit (none before 1.6.3), unless the test
                // set one.
                if config.max_conns_per_client == Config::default().max_conns_per_client {
                    config.max_conns_per_client = v.http_max_conns_per_client();
                }
            }
        }
        let transport = test_transport();
        if transport == Transport::Unix && config.unix_socket.is_none() {
            config.unix_socket = Some(socket_path());
        }
        let mut tls_ca = None;
        if transport == Transport::Https && config.tls.is_none() {
            let (dir, ca, server) = test_pki();
            config.https_addr = Some(([127, 0, 0, 1], 0).into());
            config.tls = Some(baton_devserver::TlsConfig {
                cert_file: server.cert,
                key_file: server.key,
                ca_file: Some(ca.clone()),
                verify_incoming: false,
            });
            tls_ca = Some((dir, ca));
        }
        let dev = DevServer::start(config).expect("dev server starts");
        let addr = dev.http_addr();
        let client_addr = match (transport, dev.unix_url(), dev.https_url()) {
            (Transport::Unix, Some(url), _) => url,
            (Transport::Https, _, Some(url)) if tls_ca.is_some() => url,
            _ => addr.clone(),
        };
        Fixture {
            dev: Some(dev),
            tls_ca,
            client_addr,
            addr,
            version: Default::default(),
            sessions_may_remain: Default::default(),
        }
    }

    /// Lets the test end with sessions at the server, for the reason given
    /// (e.g. it creates them with the low-level API, or kills a holder).
    pub fn sessions_may_remain(&self, why: &'static str) {
        self.sessions_may_remain.set(Some(why));
    }

    /// `ID (Name)` of every session the server holds (`GET /v1/session/list`).
    ///
    /// Against a server that tests running in parallel share, this lists theirs too: a
    /// test counts only its own sessions ([`Fixture::sessions_among`],
    /// [`Fixture::sessions_named`]).
    pub fn session_names(&self) -> Vec<String> {
        self.session_list(0).0
    }

    /// Those of `ids` the server still holds.
    pub fn sessions_among<S: AsRef<str>>(&self, ids: &[S]) -> Vec<String> {
        self.sessions()
            .into_iter()
            .filter(|(id, _)| ids.iter().any(|i| i.as_ref() == id))
            .map(|(id, name)| format!("{id} ({name})"))
            .collect()
    }

    /// The IDs of the sessions named `name` (give a test's sessions a [`unique`] name).
    pub fn sessions_named(&self, name: &str) -> Vec<String> {
        self.sessions()
            .into_iter()
            .filter(|(_, n)| n == name)
            .map(|(id, _)| id)
            .collect()
    }

    /// `(ID, Name)` of every session the server holds.
    fn sessions(&self) -> Vec<(String, String)> {
        self.session_list_json(0)
            .0
            .iter()
            .map(|s| {
                (
                    s["ID"].as_str().unwrap_or("?").to_string(),
                    s["Name"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    /// The session list (`ID (Name)` each) and its index; with `index` > 0, a
    /// blocking query that waits up to a second for a change past it.
    fn session_list(&self, index: u64) -> (Vec<String>, u64) {
        let (list, next) = self.session_list_json(index);
        let names = list
            .iter()
            .map(|s| {
                format!(
                    "{} ({})",
                    s["ID"].as_str().unwrap_or("?"),
                    s["Name"].as_str().unwrap_or("")
                )
            })
            .collect();
        (names, next)
    }

    /// The session list as JSON and its index (see [`Fixture::session_list`]).
    fn session_list_json(&self, index: u64) -> (Vec<serde_json::Value>, u64) {
        let url = format!("{}/v1/session/list?index={index}&wait=1s", self.url());
        let mut req = http_agent().get(&url);
        if let Ok(t) = std::env::var("CONSUL_HTTP_TOKEN") {
            req = req.header("X-Consul-Token", &t);
        }
        let mut resp = req.call().unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let next = resp
            .headers()
            .get("X-Consul-Index")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let body = resp.body_mut().read_to_string().expect("session list body");
        let v: serde_json::Value = serde_json::from_str(&body).expect("session list is JSON");
        let list = v.as_array().expect("session list is an array").clone();
        (list, next)
    }

    /// The dev server's controls, or `None` (with a message) against real Consul.
    pub fn dev(&self, why: &str) -> Option<&DevServer> {
        if self.dev.is_none() {
            eprintln!("skipped against real Consul: needs dev-server control ({why})");
        }
        self.dev.as_ref()
    }

    /// The server's base URL: `addr` with `http://` in front unless it names a scheme
    /// (`BATON_TEST_CONSUL` may be `http://host:port` or `host:port`).
    pub fn url(&self) -> String {
        if self.addr.contains("://") {
            self.addr.clone()
        } else {
            format!("http://{}", self.addr)
        }
    }

    /// The server's Consul version as it reports it in `/v1/agent/self` (a dev server
    /// reports the version it emulates), asked once per fixture; `None` if it will not say
    /// (e.g. a token without `agent:read`) or cannot be asked.
    pub fn consul_version(&self) -> Option<ConsulVersion> {
        *self.version.get_or_init(|| {
            let v = self.agent_self_version();
            if v.is_none() {
                eprintln!(
                    "the server at {} did not say its Consul version",
                    self.url()
                );
            }
            v
        })
    }

    /// `Config.Version` of `/v1/agent/self`, its release part.
    fn agent_self_version(&self) -> Option<ConsulVersion> {
        let url = format!("{}/v1/agent/self", self.url());
        let mut req = http_agent().get(&url);
        if let Ok(t) = std::env::var("CONSUL_HTTP_TOKEN") {
            req = req.header("X-Consul-Token", &t);
        }
        let body = req.call().ok()?.body_mut().read_to_string().ok()?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let text = v["Config"]["Version"].as_str()?;
        // "1.17.0+ent", "1.9.0-dev": the release part.
        let release = text.split(['+', '-']).next()?;
        release.parse().ok()
    }

    /// Whether the server is a Consul older than `version` (`false` when unknown).
    pub fn before(&self, version: &str) -> bool {
        let v: ConsulVersion = version.parse().expect("a version");
        self.consul_version().is_some_and(|have| have < v)
    }

    /// Whether short TTLs (below Consul's 10 s minimum) may be used.
    pub fn short_ttls(&self) -> bool {
        self.dev.is_some()
    }

    pub fn builder(&self) -> ClientBuilder {
        let b = Client::builder().address(self.client_addr.clone());
        match &self.tls_ca {
            Some((_, ca)) => b.tls(baton::TlsSettings {
                ca_file: Some(ca.clone()),
                ..Default::default()
            }),
            None => b,
        }
    }

    /// A fault proxy in front of the dev server and a builder for a client that
    /// talks through it (`None`, with a message, against real Consul: no proxy
    /// to put in front of it).
    pub fn proxied(&self) -> Option<(ClientBuilder, FaultProxy)> {
        let dev = self.dev("fault proxy")?;
        let proxy = FaultProxy::start(dev.addr(), "127.0.0.1:0".parse().unwrap()).expect("proxy");
        let builder = self.builder().address(proxy.addr().to_string());
        Some((builder, proxy))
    }

    pub fn client(&self) -> Client {
        self.builder().build().expect("client builds")
    }
}

/// The HTTP agent of the fixture's own requests: every one bounded by a timeout (a
/// blocking session-list query waits 1 s at the server).
fn http_agent() -> &'static ureq::Agent {
    static AGENT: std::sync::OnceLock<ureq::Agent> = std::sync::OnceLock::new();
    AGENT.get_or_init(|| {
        ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into()
    })
}

/// A unique key prefix per test.
pub fn unique(name: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "baton-test/{}/{}-{}",
        std::process::id(),
        name,
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// The session holding `key`, if any.
pub fn holder(c: &Client, key: &str) -> Option<String> {
    c.kv().get(key).unwrap().and_then(|p| p.session)
}

/// Blocks (on blocking queries of the key) until nobody holds `key`, failing after 20 s;
/// returns when it was first seen free.
pub fn wait_free(c: &Client, key: &str) -> std::time::Instant {
    let end = std::time::Instant::now() + Duration::from_secs(20);
    let mut index = 0;
    loop {
        let (entry, meta) = c
            .kv()
            .get_with(
                key,
                &baton::QueryOptions::blocking(index, Duration::from_secs(1)),
            )
            .unwrap();
        if entry.as_ref().is_none_or(|p| p.session.is_none()) {
            return std::time::Instant::now();
        }
        assert!(
            std::time::Instant::now() < end,
            "{key} still held: {entry:?}"
        );
        index = meta.index;
    }
}

/// Blocks (on blocking queries of the session list) until the server no longer
/// has session `id`, failing after 20 s.
pub fn wait_session_gone(c: &Client, id: &str) {
    let end = std::time::Instant::now() + Duration::from_secs(20);
    let mut index = 0;
    loop {
        let (list, meta) = c
            .sessions()
            .list_with(&baton::QueryOptions::blocking(
                index,
                Duration::from_secs(1),
            ))
            .unwrap();
        if !list.iter().any(|s| s.id == id) {
            return;
        }
        assert!(std::time::Instant::now() < end, "session {id} still exists");
        index = meta.index;
    }
}

/// Blocks (on blocking queries of `prefix`) until `done` holds for its entries, failing
/// after `within` with `what` and the entries last read.
pub fn wait_for_entries(
    c: &baton::Client,
    prefix: &str,
    within: std::time::Duration,
    what: &str,
    done: impl Fn(&[baton::KvPair]) -> bool,
) {
    let end = std::time::Instant::now() + within;
    let mut index = 0;
    loop {
        let (entries, meta) = c
            .kv()
            .list_with(
                prefix,
                &baton::QueryOptions::blocking(index, std::time::Duration::from_secs(1)),
            )
            .unwrap();
        if done(&entries) {
            return;
        }
        assert!(std::time::Instant::now() < end, "{what}: {entries:?}");
        index = meta.index;
    }
}
