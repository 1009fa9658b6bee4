//! Client configuration: the Consul environment variables and the builder.
//!
//! Parsing follows the Go `api` package (`DefaultConfig` / `NewClient`), see
//! consul-semantics.md §11. Environment parsing goes through a lookup function,
//! so it can be tested without touching the process environment.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::foundations::error::{Error, ErrorKind, Result};

/// `CONSUL_HTTP_ADDR`
pub const ENV_HTTP_ADDR: &str = "CONSUL_HTTP_ADDR";
/// `CONSUL_HTTP_TOKEN`
pub const ENV_HTTP_TOKEN: &str = "CONSUL_HTTP_TOKEN";
/// `CONSUL_HTTP_TOKEN_FILE`
pub const ENV_HTTP_TOKEN_FILE: &str = "CONSUL_HTTP_TOKEN_FILE";
/// `CONSUL_HTTP_AUTH`
pub const ENV_HTTP_AUTH: &str = "CONSUL_HTTP_AUTH";
/// `CONSUL_HTTP_SSL`
pub const ENV_HTTP_SSL: &str = "CONSUL_HTTP_SSL";
/// `CONSUL_HTTP_SSL_VERIFY`
pub const ENV_HTTP_SSL_VERIFY: &str = "CONSUL_HTTP_SSL_VERIFY";
/// `CONSUL_CACERT`
pub const ENV_CACERT: &str = "CONSUL_CACERT";
/// `CONSUL_CAPATH`
pub const ENV_CAPATH: &str = "CONSUL_CAPATH";
/// `CONSUL_CLIENT_CERT`
pub const ENV_CLIENT_CERT: &str = "CONSUL_CLIENT_CERT";
/// `CONSUL_CLIENT_KEY`
pub const ENV_CLIENT_KEY: &str = "CONSUL_CLIENT_KEY";
/// `CONSUL_TLS_SERVER_NAME`
pub const ENV_TLS_SERVER_NAME: &str = "CONSUL_TLS_SERVER_NAME";
/// `CONSUL_NAMESPACE`
pub const ENV_NAMESPACE: &str = "CONSUL_NAMESPACE";
/// `CONSUL_PARTITION`
pub const ENV_PARTITION: &str = "CONSUL_PARTITION";

/// The default agent address, as in the Go client.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:8500";

/// A string that never shows up in `Debug` output (tokens, passwords).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(pub(crate) String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// HTTP or HTTPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP (the default).
    Http,
    /// HTTP over TLS.
    Https,
}

/// Where the agent listens, after parsing an address string the Go way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// TCP: `host:port`, with an optional reverse-proxy path prefix (`/consul`).
    Tcp {
        /// `host:port`
        host_port: String,
        /// Scheme forced by the address (`https://`), if any.
        scheme: Option<Scheme>,
        /// Path prefix, empty or starting with `/`.
        path_prefix: String,
    },
    /// A unix domain socket (`unix:///path`): an agent serving HTTP on one (Consul's
    /// `addresses.http = "unix:///path"`). Requests name `localhost` as their host.
    Unix(PathBuf),
}

/// Parses an agent address exactly as the Go client does:
/// `host:port`, `http://host:port[/prefix]`, `https://host:port[/prefix]`,
/// `unix:///path`; any other scheme is an error.
pub fn parse_address(address: &str) -> Result<Endpoint> {
    if let Some((scheme, rest)) = address.split_once("://") {
        let forced = match scheme {
            "http" => None,
            "https" => Some(Scheme::Https),
            "unix" => return Ok(Endpoint::Unix(PathBuf::from(rest))),
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("Unknown protocol scheme: {other} (in {ENV_HTTP_ADDR} or address)"),
                ))
            }
        };
        let (host_port, prefix) = match rest.split_once('/') {
            Some((hp, p)) => (hp.to_string(), format!("/{p}")),
            None => (rest.to_string(), String::new()),
        };
        refuse_api_path(address, &prefix)?;
        Ok(Endpoint::Tcp {
            host_port,
            scheme: forced,
            path_prefix: prefix,
        })
    } else {
        Ok(Endpoint::Tcp {
            host_port: address.to_string(),
            scheme: None,
            path_prefix: String::new(),
        })
    }
}

/// The first segments of Consul's HTTP API under `/v1/`, for telling an API path given as an
/// address prefix (`http://host:8500/v1/kv`) from a reverse proxy's own path.
const API_FAMILIES: &[&str] = &[
    "acl",
    "agent",
    "catalog",
    "config",
    "connect",
    "coordinate",
    "event",
    "health",
    "internal",
    "kv",
    "namespace",
    "operator",
    "partition",
    "query",
    "session",
    "snapshot",
    "status",
    "txn",
];

/// Refuses an address whose path is (or ends in) Consul's API root: `http://host:8500/v1`
/// or `.../v1/kv` would make every request go to `/v1/v1/...`, which an agent answers
/// with 404 — a key that exists reads as missing. A reverse proxy's own prefix
/// (`https://gw/consul`) stays allowed.
fn refuse_api_path(address: &str, prefix: &str) -> Result<()> {
    let segments: Vec<&str> = prefix.split('/').filter(|s| !s.is_empty()).collect();
    let api_root = segments.iter().enumerate().any(|(i, s)| {
        s.eq_ignore_ascii_case("v1")
            && segments
                .get(i + 1)
                .is_none_or(|next| API_FAMILIES.contains(&next.to_ascii_lowercase().as_str()))
    });
    if !api_root {
        return Ok(());
    }
    let at = prefix
        .to_ascii_lowercase()
        .find("/v1")
        .map_or(prefix, |i| &prefix[i..]);
    let agent = &address[..address.len() - prefix.len()];
    Err(Error::new(
        ErrorKind::InvalidArgument,
        format!(
            "the Consul address {address:?} (in {ENV_HTTP_ADDR} or address) carries the API \
             path {at:?}: baton adds /v1/... to every request itself, so requests would go to \
             {agent}{prefix}/v1/... and be answered 404. Give the agent's address alone \
             ({agent:?}); a path is only for a reverse proxy's own prefix (https://gw/consul)"
        ),
    ))
}

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// TLS settings (all optional).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM file with CA certificates (`CONSUL_CACERT`).
    pub ca_file: Option<PathBuf>,
    /// Directory of PEM CA certificates (`CONSUL_CAPATH`).
    pub ca_path: Option<PathBuf>,
    /// Client certificate PEM (`CONSUL_CLIENT_CERT`).
    pub cert_file: Option<PathBuf>,
    /// Client key PEM (`CONSUL_CLIENT_KEY`).
    pub key_file: Option<PathBuf>,
    /// Name to verify the server certificate against (`CONSUL_TLS_SERVER_NAME`,
    /// `:port` stripped).
    pub server_name: Option<String>,
    /// Skip certificate verification (`CONSUL_HTTP_SSL_VERIFY=false`).
    pub insecure_skip_verify: bool,
}

/// Builds a [`Client`](crate::Client). Start from [`ClientBuilder::new`] (Go's
/// defaults, no environment), [`ClientBuilder::from_env`] or
/// [`ClientBuilder::from_lookup`], then override.
#[derive(Clone)]
pub struct ClientBuilder {
    pub(crate) address: String,
    pub(crate) ssl: bool,
    pub(crate) token: Option<Secret>,
    pub(crate) token_file: Option<PathBuf>,
    pub(crate) env_token: Option<Secret>,
    pub(crate) env_token_file: Option<PathBuf>,
    pub(crate) basic_auth: Option<(String, Secret)>,
    pub(crate) tls: TlsSettings,
    pub(crate) namespace: Option<String>,
    pub(crate) partition: Option<String>,
    pub(crate) datacenter: Option<String>,
    pub(crate) request_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) default_session: crate::foundations::session_options::SessionOptions,
    pub(crate) warnings: Vec<String>,
    /// Where the address came from, for error messages.
    pub(crate) address_origin: AddressOrigin,
}

/// Where a client's address came from (named by connection errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddressOrigin {
    /// Nothing set it: Consul's default `127.0.0.1:8500`.
    Default,
    /// `CONSUL_HTTP_ADDR`.
    Env,
    /// [`ClientBuilder::address`].
    Configured,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("address", &self.address)
            .field("ssl", &self.ssl)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_file", &self.token_file)
            .field("env_token", &self.env_token.as_ref().map(|_| "<redacted>"))
            .field("env_token_file", &self.env_token_file)
            .field(
                "basic_auth",
                &self.basic_auth.as_ref().map(|(u, _)| (u, "<redacted>")),
            )
            .field("tls", &self.tls)
            .field("namespace", &self.namespace)
            .field("partition", &self.partition)
            .field("datacenter", &self.datacenter)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder::new()
    }
}

impl ClientBuilder {
    /// Go's defaults: `127.0.0.1:8500`, http, no token; the environment is not read.
    pub fn new() -> ClientBuilder {
        ClientBuilder {
            address: DEFAULT_ADDRESS.to_string(),
            ssl: false,
            token: None,
            token_file: None,
            env_token: None,
            env_token_file: None,
            basic_auth: None,
            tls: TlsSettings::default(),
            namespace: None,
            partition: None,
            datacenter: None,
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            default_session:
                crate::foundations::session_options::SessionOptions::default_for_client(),
            warnings: Vec::new(),
            address_origin: AddressOrigin::Default,
        }
    }

    /// Defaults, then the `CONSUL_*` variables of the process environment.
    pub fn from_env() -> ClientBuilder {
        ClientBuilder::from_lookup(|name| std::env::var(name).ok())
    }

    /// Defaults, then the `CONSUL_*` variables as answered by `lookup`
    /// (`None` = unset). Empty values count as unset, as in Go.
    ///
    /// Unparsable booleans (`CONSUL_HTTP_SSL`, `CONSUL_HTTP_SSL_VERIFY`) are
    /// ignored with a warning, as Go does; see [`ClientBuilder::warnings`].
    /// Other problems (unknown address scheme, unreadable token file, a client
    /// cert without key) are reported by [`ClientBuilder::build`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> ClientBuilder {
        let get = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let mut b = ClientBuilder::new();
        if let Some(addr) = get(ENV_HTTP_ADDR) {
            b.address = addr;
            b.address_origin = AddressOrigin::Env;
        }
        b.env_token_file = get(ENV_HTTP_TOKEN_FILE).map(PathBuf::from);
        b.env_token = get(ENV_HTTP_TOKEN).map(Secret);
        if let Some(auth) = get(ENV_HTTP_AUTH) {
            let (user, pass) = match auth.split_once(':') {
                Some((u, p)) => (u.to_string(), p.to_string()),
                None => (auth.clone(), String::new()),
            };
            b.basic_auth = Some((user, Secret(pass)));
        }
        if let Some(v) = get(ENV_HTTP_SSL) {
            match parse_go_bool(&v) {
                Some(ssl) => b.ssl = ssl,
                None => b.warn(format!(
                    "could not parse {ENV_HTTP_SSL}={v:?} as a boolean; ignoring it"
                )),
            }
        }
        if let Some(v) = get(ENV_HTTP_SSL_VERIFY) {
            match parse_go_bool(&v) {
                Some(verify) => b.tls.insecure_skip_verify = !verify,
                None => b.warn(format!(
                    "could not parse {ENV_HTTP_SSL_VERIFY}={v:?} as a boolean; ignoring it"
                )),
            }
        }
        b.tls.ca_file = get(ENV_CACERT).map(PathBuf::from);
        b.tls.ca_path = get(ENV_CAPATH).map(PathBuf::from);
        b.tls.cert_file = get(ENV_CLIENT_CERT).map(PathBuf::from);
        b.tls.key_file = get(ENV_CLIENT_KEY).map(PathBuf::from);
        b.tls.server_name = get(ENV_TLS_SERVER_NAME).map(|s| strip_port(&s));
        b.namespace = get(ENV_NAMESPACE);
        b.partition = get(ENV_PARTITION);
        b
    }

    fn warn(&mut self, msg: String) {
        log::warn!("{msg}");
        self.warnings.push(msg);
    }

    /// Warnings collected while reading the environment (values Go ignores).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The agent address: `host:port`, `http(s)://host:port[/prefix]` or
    /// `unix:///path` (an agent serving HTTP on a unix socket).
    pub fn address(mut self, address: impl Into<String>) -> Self {
        self.address = address.into();
        self.address_origin = AddressOrigin::Configured;
        self
    }

    /// Use HTTPS (like `CONSUL_HTTP_SSL=true`).
    pub fn https(mut self, on: bool) -> Self {
        self.ssl = on;
        self
    }

    /// The ACL token, sent as `X-Consul-Token`. Beats the environment, loses to
    /// an explicit [`ClientBuilder::token_file`].
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(Secret(token.into()));
        self
    }

    /// A file holding the ACL token (whitespace-trimmed). Highest precedence.
    pub fn token_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.token_file = Some(path.into());
        self
    }

    /// HTTP basic auth (like `CONSUL_HTTP_AUTH=user:pass`).
    pub fn basic_auth(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.basic_auth = Some((user.into(), Secret(password.into())));
        self
    }

    /// TLS settings (replaces those read from the environment).
    pub fn tls(mut self, tls: TlsSettings) -> Self {
        self.tls = tls;
        self
    }

    /// The namespace sent as `ns=` on every request (Consul Enterprise only).
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.namespace = Some(ns.into());
        self
    }

    /// The admin partition sent as `partition=` on every request (Enterprise only).
    pub fn partition(mut self, partition: impl Into<String>) -> Self {
        self.partition = Some(partition.into());
        self
    }

    /// The datacenter sent as `dc=` on every request.
    pub fn datacenter(mut self, dc: impl Into<String>) -> Self {
        self.datacenter = Some(dc.into());
        self
    }

    /// The timeout of one ordinary (non-blocking) request; default 30 s.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The TCP connect timeout; default 5 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Options of the client's shared default session (default: TTL 15 s,
    /// lock-delay 15 s, behaviour release, name "baton").
    pub fn default_session(
        mut self,
        options: crate::foundations::session_options::SessionOptions,
    ) -> Self {
        self.default_session = options;
        self
    }

    /// The token as Go resolves it: explicit file, explicit token, env file, env token.
    pub(crate) fn resolve_token(&self) -> Result<Option<Secret>> {
        if let Some(path) = &self.token_file {
            if let Some(t) = read_token_file(path)? {
                return Ok(Some(t));
            }
        }
        if let Some(t) = &self.token {
            return Ok(Some(t.clone()));
        }
        if let Some(path) = &self.env_token_file {
            if let Some(t) = read_token_file(path)? {
                return Ok(Some(t));
            }
        }
        Ok(self.env_token.clone())
    }
}

fn read_token_file(path: &std::path::Path) -> Result<Option<Secret>> {
    let data = std::fs::read_to_string(path).map_err(|e| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("Error loading token file {} : {e}", path.display()),
        )
        .with_source(e)
    })?;
    let t = data.trim();
    Ok(if t.is_empty() {
        None
    } else {
        Some(Secret(t.to_string()))
    })
}

/// Strips a `:port` suffix (Go `net.SplitHostPort`, keeping the input on failure).
fn strip_port(s: &str) -> String {
    if let Some(rest) = s.strip_prefix('[') {
        if let Some((host, tail)) = rest.split_once(']') {
            if tail.starts_with(':') {
                return host.to_string();
            }
        }
        return s.to_string();
    }
    match s.rsplit_once(':') {
        Some((host, _)) if !host.contains(':') => host.to_string(),
        _ => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn addresses_parse_like_go() {
        assert_eq!(
            parse_address("127.0.0.1:8500").unwrap(),
            Endpoint::Tcp {
                host_port: "127.0.0.1:8500".into(),
                scheme: None,
                path_prefix: "".into()
            }
        );
        assert_eq!(
            parse_address("https://consul.local:8501/proxy/consul").unwrap(),
            Endpoint::Tcp {
                host_port: "consul.local:8501".into(),
                scheme: Some(Scheme::Https),
                path_prefix: "/proxy/consul".into()
            }
        );
        assert_eq!(
            parse_address("http://h:1").unwrap(),
            Endpoint::Tcp {
                host_port: "h:1".into(),
                scheme: None,
                path_prefix: "".into()
            }
        );
        assert_eq!(
            parse_address("unix:///var/run/consul.sock").unwrap(),
            Endpoint::Unix("/var/run/consul.sock".into())
        );
        for bad in [
            "http://127.0.0.1:8500/v1",
            "http://127.0.0.1:8500/v1/",
            "https://h:8501/consul/v1",
            "http://h:1/v1/kv",
            "http://h:1/V1/Session/",
        ] {
            let e = parse_address(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad}");
            assert!(e.message().contains("API path"), "{bad}: {e}");
            assert!(e.message().contains("/v1/..."), "{bad}: {e}");
        }
        // A proxy's own prefix, even one with a v1 inside that is not Consul's API root.
        for ok in [
            "http://h:1/consul",
            "https://gw/api/v1/consul",
            "http://h:1/v1proxy",
        ] {
            assert!(parse_address(ok).is_ok(), "{ok}");
        }
        let e = parse_address("ftp://h:1").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("Unknown protocol scheme: ftp"));
    }

    #[test]
    fn go_bools() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(t), Some(true));
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(f), Some(false));
        }
        for bad in ["yes", "tRuE", "", " true"] {
            assert_eq!(parse_go_bool(bad), None);
        }
    }

    #[test]
    fn env_is_read_through_lookup() {
        let b = ClientBuilder::from_lookup(env(&[
            (ENV_HTTP_ADDR, "consul:8501"),
            (ENV_HTTP_TOKEN, "tok"),
            (ENV_HTTP_AUTH, "user:pa:ss"),
            (ENV_HTTP_SSL, "true"),
            (ENV_HTTP_SSL_VERIFY, "0"),
            (ENV_CACERT, "/ca.pem"),
            (ENV_CAPATH, "/cas"),
            (ENV_CLIENT_CERT, "/c.pem"),
            (ENV_CLIENT_KEY, "/k.pem"),
            (ENV_TLS_SERVER_NAME, "consul.example:8501"),
            (ENV_NAMESPACE, "ns1"),
            (ENV_PARTITION, "p1"),
        ]));
        assert_eq!(b.address, "consul:8501");
        assert!(b.ssl);
        assert_eq!(b.env_token, Some(Secret("tok".into())));
        let (u, p) = b.basic_auth.clone().unwrap();
        assert_eq!((u.as_str(), p.0.as_str()), ("user", "pa:ss"));
        assert!(b.tls.insecure_skip_verify);
        assert_eq!(b.tls.ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(b.tls.ca_path, Some(PathBuf::from("/cas")));
        assert_eq!(b.tls.cert_file, Some(PathBuf::from("/c.pem")));
        assert_eq!(b.tls.key_file, Some(PathBuf::from("/k.pem")));
        assert_eq!(b.tls.server_name.as_deref(), Some("consul.example"));
        assert_eq!(b.namespace.as_deref(), Some("ns1"));
        assert_eq!(b.partition.as_deref(), Some("p1"));
        assert!(b.warnings().is_empty());
        let dbg = format!("{b:?}");
        assert!(!dbg.contains("tok\""), "{dbg}");
        assert!(!dbg.contains("pa:ss"), "{dbg}");
    }

    #[test]
    fn auth_without_colon_is_user_only() {
        let b = ClientBuilder::from_lookup(env(&[(ENV_HTTP_AUTH, "alice")]));
        let (u, p) = b.basic_auth.unwrap();
        assert_eq!((u.as_str(), p.0.as_str()), ("alice", ""));
    }

    #[test]
    fn unset_and_empty_mean_defaults() {
        let b = ClientBuilder::from_lookup(env(&[(ENV_HTTP_ADDR, ""), (ENV_HTTP_TOKEN, "")]));
        assert_eq!(b.address, DEFAULT_ADDRESS);
        assert!(b.env_token.is_none());
        assert!(!b.ssl);
        assert!(!b.tls.insecure_skip_verify);
    }

    #[test]
    fn bad_bools_warn_and_are_ignored_like_go() {
        let b = ClientBuilder::from_lookup(env(&[
            (ENV_HTTP_SSL, "yes"),
            (ENV_HTTP_SSL_VERIFY, "nope"),
        ]));
        assert!(!b.ssl);
        assert!(!b.tls.insecure_skip_verify);
        assert_eq!(b.warnings().len(), 2);
        assert!(b.warnings()[0].contains("CONSUL_HTTP_SSL"));
    }

    #[test]
    fn token_precedence_follows_go() {
        let dir = std::env::temp_dir().join(format!("baton-tok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let envf = dir.join("env");
        let expf = dir.join("explicit");
        std::fs::write(&envf, "  from-env-file\n").unwrap();
        std::fs::write(&expf, "from-explicit-file\n").unwrap();
        let e = env(&[
            (ENV_HTTP_TOKEN, "from-env"),
            (ENV_HTTP_TOKEN_FILE, envf.to_str().unwrap()),
        ]);
        let tok = |b: &ClientBuilder| b.resolve_token().unwrap().map(|s| s.0);
        let b = ClientBuilder::from_lookup(&e);
        assert_eq!(tok(&b).as_deref(), Some("from-env-file"));
        let b = ClientBuilder::from_lookup(&e).token("explicit");
        assert_eq!(tok(&b).as_deref(), Some("explicit"));
        let b = ClientBuilder::from_lookup(&e)
            .token("explicit")
            .token_file(&expf);
        assert_eq!(tok(&b).as_deref(), Some("from-explicit-file"));
        let b = ClientBuilder::from_lookup(env(&[(ENV_HTTP_TOKEN, "from-env")]));
        assert_eq!(tok(&b).as_deref(), Some("from-env"));
        let b = ClientBuilder::from_lookup(env(&[(ENV_HTTP_TOKEN_FILE, "/nonexistent/tok")]));
        let err = b.resolve_token().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err
            .to_string()
            .starts_with("Error loading token file /nonexistent/tok : "));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn server_name_port_is_stripped() {
        assert_eq!(strip_port("a.b:8501"), "a.b");
        assert_eq!(strip_port("a.b"), "a.b");
        assert_eq!(strip_port("[::1]:8501"), "::1");
        assert_eq!(strip_port("::1"), "::1");
    }
}
