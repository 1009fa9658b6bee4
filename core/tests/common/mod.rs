//! Shared test fixture: a dev server (or a real Consul named by
//! `BATON_TEST_CONSUL`) and clients pointing at it.
#![allow(dead_code)]

use std::time::Duration;

use baton::{Client, ClientBuilder};
use baton_devserver::{Config, ConsulVersion, DevServer};

/// The smallest session TTL the dev server accepts in these tests.
pub const TTL_MIN: Duration = Duration::from_millis(500);

/// The version `BATON_TEST_CONSUL_VERSION` names (`current` or unset: none).
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

/// A server to test against.
pub struct Fixture {
    pub dev: Option<DevServer>,
    pub addr: String,
    /// The Consul version the dev server emulates (unset against real Consul).
    emulated: Option<ConsulVersion>,
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
                    addr,
                    emulated: None,
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
            }
        }
        let emulated = Some(config.consul_version);
        let dev = DevServer::start(config).expect("dev server starts");
        let addr = dev.http_addr();
        Fixture {
            dev: Some(dev),
            addr,
            emulated,
        }
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

    /// The server's Consul version: the one the dev server emulates, or what a real
    /// Consul reports in `/v1/agent/self` (`None` if it will not say, e.g. a token
    /// without `agent:read`).
    pub fn consul_version(&self) -> Option<ConsulVersion> {
        if self.emulated.is_some() {
            return self.emulated;
        }
        let url = format!("{}/v1/agent/self", self.url());
        let mut req = ureq::get(&url);
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
        Client::builder().address(self.addr.clone())
    }

    pub fn client(&self) -> Client {
        self.builder().build().expect("client builds")
    }
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
