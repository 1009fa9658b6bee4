//! Shared setup for the examples: talk to the Consul named by `CONSUL_HTTP_ADDR`,
//! or start an embedded dev server when it is unset.

use std::time::Duration;

use baton::{Client, ClientBuilder, SessionOptions};
use baton_devserver::{Config, DevServer};

/// Where the examples run: a Consul address, and the dev server if we started one
/// (it stops when this is dropped).
pub struct Target {
    /// The dev server started for the example, if any.
    pub dev: Option<DevServer>,
    builder: ClientBuilder,
}

impl Target {
    /// Reads `CONSUL_HTTP_ADDR` (and the other `CONSUL_*` variables); starts a dev
    /// server when the address is unset.
    pub fn from_env() -> Target {
        if std::env::var_os("CONSUL_HTTP_ADDR").is_some() {
            let builder = ClientBuilder::from_env();
            println!(
                "using Consul at {}",
                std::env::var("CONSUL_HTTP_ADDR").unwrap_or_default()
            );
            return Target { dev: None, builder };
        }
        let dev = DevServer::start(Config {
            session_ttl_min: Duration::from_secs(1),
            ..Config::default()
        })
        .expect("the embedded dev server starts");
        println!(
            "CONSUL_HTTP_ADDR is unset: started a dev server at {}",
            dev.http_addr()
        );
        let builder = Client::builder().address(dev.http_addr());
        Target {
            dev: Some(dev),
            builder,
        }
    }

    /// A new client (a separate "process" in the examples) whose default session
    /// has the given TTL and lock-delay.
    pub fn client(&self, ttl: Duration, lock_delay: Duration) -> Client {
        self.builder
            .clone()
            .default_session(
                SessionOptions::default_for_client()
                    .ttl(ttl)
                    .lock_delay(lock_delay),
            )
            .build()
            .expect("client builds")
    }
}

/// A key prefix unique to this run, so repeated runs against one Consul do not mix.
pub fn run_prefix(example: &str) -> String {
    format!("baton-examples/{example}/{}", std::process::id())
}
