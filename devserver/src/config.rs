//! Dev server configuration: the Consul agent settings that change behaviour a client can see.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::tls::TlsConfig;
pub use crate::version::ConfigError;
use crate::version::ConsulVersion;

/// Settings for one dev server. `Config::default()` matches a fresh `consul agent -dev` on
/// the points that matter to clients, except that it listens on an OS-chosen port.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to listen on. Port 0 lets the OS pick a free port (see [`crate::DevServer::addr`]).
    /// The TCP listener is always there, also with [`Config::unix_socket`].
    pub addr: SocketAddr,
    /// A unix socket to serve HTTP on as well, beside [`Config::addr`] (Consul's
    /// `addresses.http = "unix:///path"`; clients reach it as `CONSUL_HTTP_ADDR=unix:///path`):
    /// the same endpoints, state, fault controls and request counts as over TCP. A socket
    /// left at the path by an earlier server is replaced, as Consul does; any other file there
    /// is an error naming the path (Consul would delete it). The socket file is removed when
    /// the server stops. A relative path is taken from the current directory at start (see
    /// [`crate::DevServer::unix_socket`]). Every client of the socket counts as one client
    /// for [`Config::max_conns_per_client`], as Consul's limiter counts them.
    pub unix_socket: Option<PathBuf>,
    /// The permissions of the socket file (Consul's `unix_sockets.mode`, e.g. `0o700`); the
    /// process's umask decides when unset.
    pub unix_socket_mode: Option<u32>,
    /// Name of the agent's own node; sessions default to it. Consul's `node_name`.
    pub node_name: String,
    /// The datacenter this agent is in. Requests naming another one get `No path to datacenter`.
    pub datacenter: String,
    /// Consul's `session_ttl_min` (default 10 s): the smallest non-zero session TTL accepted.
    /// Lower it in tests to use short TTLs while keeping Consul's semantics.
    pub session_ttl_min: Duration,
    /// Consul's `kv_max_value_size` (default 512 KiB).
    pub kv_max_value_size: u64,
    /// Consul's `txn_max_req_len` (default 512 KiB).
    pub txn_max_req_len: u64,
    /// Consul's `limits.http_max_conns_per_client`; 0 means no limit. Connections beyond it
    /// from one IP are answered `429 Too Many Requests` and closed; the clients of the unix
    /// socket ([`Config::unix_socket`]) count as one client, as in Consul.
    ///
    /// `Config::default()` has 200, the default of current Consul, and setting
    /// [`Config::consul_version`] does not change it. Consul's default depends on the release
    /// ([`ConsulVersion::http_max_conns_per_client`]: no limit before 1.6.3, 100 until 1.7.1):
    /// an embedder emulating another version sets
    /// `max_conns_per_client: v.http_max_conns_per_client()` beside `consul_version: v`. The
    /// command line does that itself unless `--max-conns-per-client` is given.
    pub max_conns_per_client: usize,
    /// When set, ACLs are enabled (default policy `deny` unless [`Config::acl_default_allow`])
    /// and this is the initial management token, allowed anything. Requests without a token
    /// act as the anonymous token; unknown tokens get `ACL not found`.
    pub acl_token: Option<String>,
    /// Further tokens, each allowed what its rules grant (Consul's policy language, HCL or JSON,
    /// e.g. `key_prefix "jobs/" { policy = "write" }`), as if an operator had created a policy
    /// with those rules and a token linked to it: `(SecretID, rules)`. Only with
    /// [`Config::acl_token`]. Tokens made through `/v1/acl/token` work as well; these need no
    /// HTTP calls, so a test in any language can start a server with them
    /// (`--acl-token-rules SECRET=RULES`).
    pub acl_tokens: Vec<(String, String)>,
    /// ACLs on without a management token (Consul's `acl.enabled` with no
    /// `acl.tokens.initial_management`): the ACL system starts not bootstrapped, and
    /// `PUT /v1/acl/bootstrap` creates the management token, once. Until then a request with a
    /// token is refused with `ACL system must be bootstrapped before making any requests that
    /// require authorization: ACL not found`. Implied by [`Config::acl_token`].
    pub acl_enabled: bool,
    /// A server agent (Consul's `server`, the default) or a client agent (`false`): what its
    /// member tags (`role`) and `/v1/agent/self` say.
    pub server: bool,
    /// Listen on the serf ports ([`Config::serf_ports`], 0 for any free port) for other dev
    /// servers' joins, as `consul agent` does (the `consul agent` command line turns it on).
    /// Then `PUT /v1/agent/join/<addr>` with another dev server's serf address joins the two:
    /// each lists the other in `/v1/agent/members` (`?wan` for the WAN pool), and
    /// `PUT /v1/agent/leave` shows this one as left (status 3) to those it joined.
    pub serf_listen: bool,
    /// Consul's `acl.default_policy` with ACLs on: `false` (the default here, `deny`) denies
    /// the anonymous token everything; `true` (`allow`) allows it everything but the ACL
    /// system itself.
    pub acl_default_allow: bool,
    /// Indent JSON bodies as `consul agent -dev` does (4 spaces plus a trailing newline).
    /// `?pretty` on a request has the same effect for that request. When
    /// [`Config::consul_version`] is older than 1.17.0 every body is indented whatever this
    /// says, as a `-dev` agent of those versions did (see [`Config::pretty_json`]).
    pub pretty: bool,
    /// Consul's `tombstone_ttl` (default 15 min): how long deleted keys keep contributing their
    /// delete index to list queries.
    pub tombstone_ttl: Duration,
    /// Consul's `default_query_time` (300 s): the wait of a blocking query that names none.
    pub default_query_time: Duration,
    /// Consul's `max_query_time` (600 s): the longest wait a blocking query may ask for.
    pub max_query_time: Duration,
    /// The Consul release whose client-visible behaviour to reproduce (default
    /// [`ConsulVersion::CURRENT`]); `baton-devserver --consul-version X.Y.Z`. The crate docs
    /// list what changes, under "Emulating Consul versions".
    ///
    /// Settings that are only Consul *defaults* stay as set: [`Config::max_conns_per_client`]
    /// keeps `Config::default()`'s 200 (current Consul's) for any version. To emulate an older
    /// release's default too, set both:
    ///
    /// ```
    /// use baton_devserver::{Config, ConsulVersion};
    /// let v = ConsulVersion::new(1, 6, 3);
    /// let cfg = Config {
    ///     consul_version: v,
    ///     max_conns_per_client: v.http_max_conns_per_client(), // 100 in 1.6.3
    ///     ..Config::default()
    /// };
    /// assert_eq!(cfg.max_conns_per_client, 100);
    /// ```
    ///
    /// The command line does this itself: without `--max-conns-per-client`, the limit is the
    /// emulated release's default.
    pub consul_version: ConsulVersion,
    /// Where the HTTPS listener listens, beside the HTTP one (Consul's `ports.https`, off by
    /// default as in Consul; port 0 picks a free port, see [`crate::DevServer::https_addr`]).
    /// Needs [`Config::tls`].
    pub https_addr: Option<SocketAddr>,
    /// The HTTPS listener's certificate, key, CA and `verify_incoming`.
    pub tls: Option<TlsConfig>,
    /// The agent's node ID (Consul's `node_id`); a random UUID when unset.
    pub node_id: Option<String>,
    /// The agent node's metadata (Consul's `node_meta`), beside `consul-network-segment`.
    pub node_meta: Vec<(String, String)>,
    /// The ports of the serf LAN and WAN pools (Consul's `ports.serf_lan`/`serf_wan`, default
    /// 8301/8302). Nothing listens there; `/v1/agent/self` reports them and joining them is
    /// joining this agent itself.
    pub serf_ports: (u16, u16),
    /// Config files read again on `PUT /v1/agent/reload`, whose `service`/`services`
    /// definitions are then registered (the `consul agent -config-file` files).
    pub config_files: Vec<std::path::PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            unix_socket: None,
            unix_socket_mode: None,
            node_name: "baton-dev".to_string(),
            datacenter: "dc1".to_string(),
            session_ttl_min: Duration::from_secs(10),
            kv_max_value_size: 512 * 1024,
            txn_max_req_len: 512 * 1024,
            max_conns_per_client: 200,
            acl_token: None,
            acl_tokens: Vec::new(),
            acl_enabled: false,
            server: true,
            serf_listen: false,
            acl_default_allow: false,
            pretty: false,
            tombstone_ttl: Duration::from_secs(15 * 60),
            default_query_time: Duration::from_secs(300),
            max_query_time: Duration::from_secs(600),
            consul_version: ConsulVersion::CURRENT,
            https_addr: None,
            tls: None,
            node_id: None,
            node_meta: Vec::new(),
            serf_ports: (8301, 8302),
            config_files: Vec::new(),
        }
    }
}

impl Config {
    /// Whether every JSON body is indented: [`Config::pretty`], or an emulated Consul older than
    /// 1.17.0, whose `-dev` agent always pretty-printed
    /// ([`ConsulVersion::dev_agent_always_pretty`]).
    pub fn pretty_json(&self) -> bool {
        self.pretty || self.consul_version.dev_agent_always_pretty()
    }

    /// Whether ACLs are on: [`Config::acl_token`] or [`Config::acl_enabled`].
    pub fn acls_enabled(&self) -> bool {
        self.acl_enabled || self.acl_token.is_some()
    }

    /// Checks the settings for values Consul itself would refuse to start with.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.node_name.is_empty() {
            return Err(ConfigError("node_name must not be empty".into()));
        }
        if self.datacenter.is_empty() {
            return Err(ConfigError("datacenter must not be empty".into()));
        }
        if self.session_ttl_min.is_zero() {
            return Err(ConfigError("session_ttl_min must be greater than 0".into()));
        }
        if self.session_ttl_min > Duration::from_secs(24 * 3600) {
            return Err(ConfigError("session_ttl_min must be at most 24h".into()));
        }
        if matches!(&self.acl_token, Some(t) if t.is_empty()) {
            return Err(ConfigError("acl_token must not be empty when set".into()));
        }
        if !self.acl_tokens.is_empty() && self.acl_token.is_none() {
            return Err(ConfigError(
                "tokens with rules need ACLs on: set the management token too (--acl-token)".into(),
            ));
        }
        if self.acl_tokens.iter().any(|(secret, _)| secret.is_empty()) {
            return Err(ConfigError("a token's secret must not be empty".into()));
        }
        match (&self.https_addr, &self.tls) {
            (Some(_), None) => {
                return Err(ConfigError(
                    "an HTTPS port needs a TLS certificate and key (--tls-cert, --tls-key)".into(),
                ))
            }
            (_, Some(tls)) => tls.validate().map_err(ConfigError)?,
            (None, None) => {}
        }
        if matches!(&self.unix_socket, Some(p) if p.as_os_str().is_empty()) {
            return Err(ConfigError("unix_socket must not be an empty path".into()));
        }
        if matches!(self.unix_socket_mode, Some(m) if m > 0o7777) {
            return Err(ConfigError(format!(
                "unix_socket_mode {:o} is not a file mode (at most 7777 in octal)",
                self.unix_socket_mode.unwrap_or_default()
            )));
        }
        if self.default_query_time.is_zero() || self.max_query_time.is_zero() {
            return Err(ConfigError("query times must be greater than 0".into()));
        }
        Ok(())
    }
}

/// Reads one JSON agent config file (`consul agent -config-file`); an empty file, as a test
/// creates before writing it, reads as `{}`.
pub(crate) fn read_config_file(path: &std::path::Path) -> Result<serde_json::Value, String> {
    let p = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{p}: {e}"))?;
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    serde_json::from_str(&text).map_err(|e| format!("{p}: only JSON config files are read: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_and_acl_settings_are_checked_at_start() {
        let https = Config {
            https_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            ..Config::default()
        };
        let e = https.validate().unwrap_err().to_string();
        assert!(e.contains("--tls-cert"), "{e}");
        let no_ca = Config {
            tls: Some(TlsConfig {
                cert_file: "c.pem".into(),
                key_file: "k.pem".into(),
                ca_file: None,
                verify_incoming: true,
            }),
            ..https.clone()
        };
        let e = no_ca.validate().unwrap_err().to_string();
        assert!(e.contains("--tls-ca"), "{e}");
        let no_key = Config {
            tls: Some(TlsConfig {
                cert_file: "c.pem".into(),
                ..TlsConfig::default()
            }),
            ..https.clone()
        };
        assert!(no_key.validate().is_err());
        let tokens_without_acls = Config {
            acl_tokens: vec![("t".into(), "key_prefix \"\" { policy = \"read\" }".into())],
            ..Config::default()
        };
        let e = tokens_without_acls.validate().unwrap_err().to_string();
        assert!(e.contains("--acl-token"), "{e}");
        let ok = Config {
            acl_token: Some("root".into()),
            ..tokens_without_acls
        };
        ok.validate().unwrap();
    }
}
