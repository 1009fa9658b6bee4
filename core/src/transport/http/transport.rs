//! The transport: base URL, credentials and where connections go (a proxy included); the
//! send every request goes through (the engine's, `engine`).

use std::time::Duration;

use crate::foundations::error::{Error, ErrorKind, Result};
use base64::Engine as _;

use crate::foundations::cancel::CancelToken;
use crate::foundations::config::{parse_address, ClientBuilder, Endpoint, Scheme, Secret};

use super::availability::*;
use super::body::*;
use super::encode::*;
use super::errors::*;
use super::exchange::{LoopConn, Outgoing};
use super::message::*;
use super::proxy::Proxy;
use crate::transport::net::{rustls_config, Dial};

mod engine;

/// Splits `host:port` (IPv6 in brackets); the port is `None` when absent.
pub(super) fn split_host_port(s: &str) -> (&str, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[') {
        if let Some((h, tail)) = rest.split_once(']') {
            return (h, tail.strip_prefix(':'));
        }
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, Some(p)),
        _ => (s, None),
    }
}

/// Extra time granted to a blocking query beyond `wait + wait/16`.
pub(crate) const BLOCKING_MARGIN: Duration = Duration::from_secs(5);

/// The HTTP side of a client: base URL, credentials, connections.
pub(crate) struct Transport {
    base: std::sync::Arc<str>,
    /// The agent's address as messages show it: the base URL, or `unix:///path`.
    shown: std::sync::Arc<str>,
    /// Where connections go (TCP to the agent's host, or a unix socket).
    dial: Dial,
    connect_timeout: Duration,
    /// The HTTP proxy connections tunnel through, if the environment names one.
    proxy: Option<Proxy>,
    token: Option<Secret>,
    /// The headers every request of a loop connection carries, made once (`render`): the
    /// host, user agent and accept, the token and the basic authentication (marked sensitive).
    /// (An error, said when such a request is made, if the token cannot be a header.)
    loop_headers: std::result::Result<ureq_proto::http::HeaderMap, String>,
    common_query: Vec<(String, String)>,
    request_timeout: Duration,
    /// Whether Consul is answering, as the requests of all threads see it.
    pub(crate) availability: Availability,
    /// The client's metrics, which every layer records into.
    pub(crate) metrics: std::sync::Arc<crate::foundations::metrics::Metrics>,
    /// Where the address came from, for connection errors.
    address_origin: crate::foundations::config::AddressOrigin,
    /// The TLS settings, for explaining TLS failures.
    tls: crate::foundations::tls_hint::TlsContext,
    /// The TLS of the connections baton drives itself (the loop connection, the key hub's
    /// polls) and the name the agent's certificate must carry; `None` for plain HTTP.
    loop_tls: Option<(
        std::sync::Arc<rustls::ClientConfig>,
        rustls::pki_types::ServerName<'static>,
    )>,
    /// The engine's idle connections, most recently used last (see `engine`); `None` once
    /// the client has closed, when none is kept.
    idle: std::sync::Mutex<Option<Vec<LoopConn>>>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("base", &self.base)
            .field("token", &self.token)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

impl Transport {
    pub(crate) fn new(b: &ClientBuilder) -> Result<Transport> {
        // A unix socket's URLs name `localhost` (what a request's Host says); every
        // connection goes to the socket, whatever the URL (`stream::Dial`).
        let (host_port, forced, prefix, unix) = match parse_address(&b.address)? {
            Endpoint::Tcp {
                host_port,
                scheme,
                path_prefix,
            } => (host_port, scheme, path_prefix, None),
            Endpoint::Unix(path) => {
                if path.as_os_str().is_empty() {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!(
                            "the Consul address {:?} names no socket file (want unix:///path)",
                            b.address
                        ),
                    ));
                }
                ("localhost".to_string(), None, String::new(), Some(path))
            }
        };
        let scheme = if b.ssl || forced == Some(Scheme::Https) {
            Scheme::Https
        } else {
            Scheme::Http
        };
        let token = b.resolve_token()?;
        // Read and checked whatever the scheme, as Consul's Go client does.
        let tls_config = rustls_config(b, scheme == Scheme::Https)?;
        // The TLS server name goes into the URL (so rustls sends and verifies
        // it); connections go to the configured host (`dial`).
        let dial = match unix {
            Some(path) => Dial::Unix(path),
            None => {
                let (host, port) = split_host_port(&host_port);
                Dial::Tcp {
                    host: host.to_string(),
                    port: match port {
                        Some(p) => p.parse().unwrap_or(0),
                        None if scheme == Scheme::Https => 443,
                        None => 80,
                    },
                }
            }
        };
        let mut url_host_port = host_port.clone();
        if let (Scheme::Https, Some(name)) = (scheme, &b.tls.server_name) {
            let port = split_host_port(&host_port).1;
            url_host_port = match port {
                Some(p) => format!("{name}:{p}"),
                None => name.clone(),
            };
        }
        let auth = b.basic_auth.as_ref().map(|(u, p)| {
            let raw = format!("{u}:{}", p.0);
            Secret(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(raw)
            ))
        });
        let mut common_query = Vec::new();
        if let Some(dc) = &b.datacenter {
            common_query.push(("dc".to_string(), dc.clone()));
        }
        if let Some(ns) = &b.namespace {
            common_query.push(("ns".to_string(), ns.clone()));
        }
        if let Some(p) = &b.partition {
            common_query.push(("partition".to_string(), p.clone()));
        }
        let base = format!(
            "{}://{}{}",
            match scheme {
                Scheme::Http => "http",
                Scheme::Https => "https",
            },
            url_host_port,
            prefix.trim_end_matches('/')
        );
        // Refused here, naming it, rather than by the first call ("invalid uri
        // character"). The probe path has a character of every request's kind.
        let valid = format!("{base}/v1/x")
            .parse::<ureq_proto::http::Uri>()
            .map_err(|e| e.to_string())
            .and_then(|u| match u.authority() {
                // A port that is not a number parses, and fails at the first call.
                Some(a) if a.as_str() != a.host() && a.port_u16().is_none() => {
                    Err("invalid port".to_string())
                }
                Some(a) if !a.host().is_empty() => Ok(()),
                _ => Err("no host".to_string()),
            });
        if let Err(e) = valid {
            let whence = match b.address_origin {
                crate::foundations::config::AddressOrigin::Env => " (from CONSUL_HTTP_ADDR)",
                _ => "",
            };
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("the Consul address {host_port:?}{whence} does not make a valid URL ({base}: {e})"),
            ));
        }
        // The socket is local: no proxy stands between (HTTP_PROXY names a TCP one).
        let proxy = match &dial {
            Dial::Tcp { .. } => Proxy::from_env(&base)?,
            Dial::Unix(_) => None,
        };
        // Every HTTPS connection is the engine's: its TLS is set up here, once.
        let loop_tls = match tls_config {
            Some(config) => {
                let host = split_host_port(&url_host_port).0;
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let name =
                    rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| {
                        Error::new(
                            ErrorKind::InvalidArgument,
                            format!("{host:?} cannot be a TLS server name: {e}"),
                        )
                    })?;
                Some((config, name))
            }
            None => None,
        };
        let shown = match &dial {
            Dial::Unix(path) => format!("unix://{}", path.display()),
            Dial::Tcp { .. } => base.clone(),
        };
        Ok(Transport {
            shown: shown.into(),
            base: base.into(),
            dial,
            connect_timeout: b.connect_timeout,
            proxy,
            loop_headers: loop_headers(&url_host_port, token.as_ref(), auth.as_ref()),
            token,
            common_query,
            request_timeout: b.request_timeout,
            availability: Availability::default(),
            metrics: Default::default(),
            address_origin: b.address_origin,
            tls: crate::foundations::tls_hint::TlsContext::new(&b.tls),
            loop_tls,
            idle: std::sync::Mutex::new(Some(Vec::new())),
        })
    }

    /// Whether the client's connections are unix stream sockets (else TCP): what kind of
    /// socket a future hands tokio (`aio::socket_wait`).
    #[cfg(all(feature = "tokio", unix))]
    pub(crate) fn over_unix(&self) -> bool {
        matches!(self.dial, Dial::Unix(_))
    }

    /// The base URL (scheme, host, port, prefix).
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The agent's address as messages show it: the base URL, or `unix:///path`.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// Sends `req`. Returns answers of every status.
    pub(crate) fn send(&self, req: &Request) -> Result<Response> {
        self.send_on(req, None)
    }

    /// Sends `req` through the engine; `req.cancel` and `closing` interrupt it. Returns
    /// answers of every status.
    pub(crate) fn send_on(&self, req: &Request, closing: Option<&CancelToken>) -> Result<Response> {
        if let Some(e) = self.interrupted(req, closing) {
            return Err(e);
        }
        self.send_own(req, closing)
    }

    /// A failed exchange of `endpoint` driven outside the engine's send (a loop's, the key
    /// hub's), noted as any failed request is (reach and availability records).
    pub(crate) fn conclude_io_failure(&self, endpoint: String, io: std::io::Error) {
        let _ = self.conclude(endpoint.clone(), Err(io_error(io, endpoint)), false);
    }

    /// What every answer and transport error goes through, whichever thread or loop drove
    /// its [`Exchange`](super::exchange::Exchange): a malformed query-meta header is an
    /// error, and whether Consul answered is noted for the call's scope and the client's
    /// availability. `users`: the request's timeout was its caller's deadline.
    pub(crate) fn conclude(
        &self,
        endpoint: String,
        result: Result<Response>,
        users: bool,
    ) -> Result<Response> {
        self.conclude_at(endpoint, result, users, None)
    }

    /// [`Transport::conclude`] of a request sent at `started` (`None`: not known, or a
    /// blocking query, whose latency is its wait): its outcome and latency are recorded in
    /// the client's metrics, once per request.
    pub(crate) fn conclude_at(
        &self,
        endpoint: String,
        result: Result<Response>,
        users: bool,
        started: Option<std::time::Instant>,
    ) -> Result<Response> {
        self.metrics.request(
            &endpoint,
            result.as_ref().ok().map(|r| r.status),
            started.map(|s| s.elapsed()),
        );
        // A malformed index or contact header on an answer that carries query meta.
        let full_url = || {
            let path = endpoint.split_once(' ').map_or("", |(_, p)| p);
            format!("{}{path}", self.shown)
        };
        let result = match result {
            Ok(r) if (r.status < 300 || r.status == 404) && r.bad_meta.is_some() => {
                let msg = r.bad_meta.unwrap_or_default();
                self.availability.saw(false);
                return Err(Error::new(ErrorKind::BadResponse, msg)
                    .with_endpoint(endpoint.clone())
                    .with_url(full_url));
            }
            Ok(mut r) => {
                r.base = Some(self.shown.clone());
                Ok(r)
            }
            Err(e) => Err(e.with_url(full_url)),
        };
        let timeout_is_users = users;
        // An answer of any status reached us; a transport error (refused, reset,
        // name not resolved, TLS, no answer within the request timeout) did not.
        // A request cut short by its caller's deadline says neither: Consul holds
        // requests for seconds while it elects a leader.
        let cut_short = timeout_is_users
            && result
                .as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::Timeout);
        if !cut_short {
            crate::foundations::scope::note_reach(
                result.as_ref().err().map(|e| e as &dyn std::fmt::Display),
            );
        }
        match &result {
            // Only an error status can be a "not now"; the text is read only then.
            Ok(r) if r.status >= 429 => {
                self.availability
                    .saw(crate::foundations::error::transient_status(
                        r.status,
                        &String::from_utf8_lossy(r.body.get(..512).unwrap_or(&r.body)),
                    ))
            }
            Ok(_) => self.availability.saw(false),
            Err(e) if e.is_transient() => self.availability.saw(true),
            Err(_) => {}
        }
        result
    }

    /// [`Transport::url`], refused when too long to send. The `http` crate refuses a URI over
    /// 65534 bytes ("uri too long", which would look like a connection failure worth
    /// retrying): a key, prefix or ID that long is the caller's argument, refused before
    /// anything is sent.
    fn checked_url(&self, req: &Request) -> Result<String> {
        let url = self.url(req);
        if url.len() > MAX_URL_BYTES {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the request URL would be {} bytes, over the {MAX_URL_BYTES} an HTTP request \
                     can carry: the key, prefix or ID in it is too long",
                    url.len()
                ),
            )
            .with_endpoint(req.endpoint()));
        }
        Ok(url)
    }

    /// How long `req` may take before it counts as unanswered, as [`Transport::send_on`]
    /// bounds it: a blocking query its wait, Consul's jitter (wait/16) and a margin; any
    /// other request the client's request timeout (or its own, when shorter).
    pub(crate) fn time_limit(&self, req: &Request) -> Duration {
        let limit = match req.wait {
            Some(w) => w + w / 16 + BLOCKING_MARGIN,
            None => self.request_timeout,
        };
        req.timeout.map_or(limit, |t| t.min(limit))
    }

    /// The client's request timeout.
    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// `req` rendered for an exchange of the engine: its URL, the client's headers, its body.
    pub(crate) fn render(&self, req: &Request) -> Result<Outgoing> {
        use ureq_proto::http::{self, header, HeaderValue, Method};
        let invalid =
            |e: String| Error::new(ErrorKind::InvalidArgument, e).with_endpoint(req.endpoint());
        let url = self.checked_url(req)?;
        // Built in place from what the client made once: nothing parsed or checked per
        // request but the URL.
        let mut request = http::Request::new(());
        *request.method_mut() = match req.method {
            "GET" => Method::GET,
            "PUT" => Method::PUT,
            "DELETE" => Method::DELETE,
            m => Method::from_bytes(m.as_bytes()).map_err(|e| invalid(e.to_string()))?,
        };
        *request.uri_mut() = http::Uri::try_from(url).map_err(|e| invalid(e.to_string()))?;
        *request.headers_mut() = self.loop_headers.clone().map_err(invalid)?;
        let body: &[u8] = match &req.body {
            Some((body, ct)) => {
                request
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
                body
            }
            None => &[],
        };
        Outgoing::new(request, body).map_err(invalid)
    }

    /// The full URL of `req`: base, path, and the query sorted by name.
    fn url(&self, req: &Request) -> String {
        let mut url = format!("{}{}", self.base, req.path);
        let mut first = true;
        let mut query: Vec<&(String, String)> =
            req.query.iter().chain(self.common_query.iter()).collect();
        query.sort_by(|a, b| a.0.cmp(&b.0));
        for (k, v) in query {
            url.push(if first { '?' } else { '&' });
            first = false;
            url.push_str(&encode_component(k));
            url.push('=');
            url.push_str(&encode_component(v));
        }
        url
    }

    /// The address requests go to and where it came from, for messages:
    /// `http://127.0.0.1:8500 (from CONSUL_HTTP_ADDR)`.
    pub(crate) fn address(&self) -> String {
        use crate::foundations::config::AddressOrigin;
        let whence = match self.address_origin {
            AddressOrigin::Default => {
                "Consul's default address; set CONSUL_HTTP_ADDR if the agent listens elsewhere"
            }
            AddressOrigin::Env => "from CONSUL_HTTP_ADDR",
            AddressOrigin::Configured => "the client's configured address",
        };
        format!("{} ({whence})", self.shown)
    }

    /// Sends `req` and turns a non-2xx answer into an error.
    pub(crate) fn call(&self, req: &Request) -> Result<Response> {
        let resp = self.send(req)?;
        check(req, resp)
    }
}

/// The headers of every request a loop connection sends (see `Transport::render`).
fn loop_headers(
    host: &str,
    token: Option<&Secret>,
    auth: Option<&Secret>,
) -> std::result::Result<ureq_proto::http::HeaderMap, String> {
    use ureq_proto::http::header::{self, HeaderMap, HeaderName, HeaderValue};
    let mut h = HeaderMap::with_capacity(6);
    // The URL's authority, checked by `Transport::new`; given here so that `ureq-proto` does
    // not derive it from each request's URL again.
    let host =
        HeaderValue::from_str(host).map_err(|_| format!("{host:?} cannot be a Host header"))?;
    h.insert(header::HOST, host);
    h.insert(
        header::USER_AGENT,
        HeaderValue::from_static(concat!("baton/", env!("CARGO_PKG_VERSION"))),
    );
    h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
    let secret = |name: &str, s: &Secret| {
        let mut v = HeaderValue::from_str(&s.0)
            .map_err(|_| format!("the {name} holds a character a request header cannot carry"))?;
        v.set_sensitive(true);
        Ok::<_, String>(v)
    };
    if let Some(t) = token {
        h.insert(
            HeaderName::from_static("x-consul-token"),
            secret("ACL token", t)?,
        );
    }
    if let Some(a) = auth {
        h.insert(header::AUTHORIZATION, secret("basic authentication", a)?);
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::super::encode::*;
    use super::super::query::*;
    use super::*;

    #[test]
    fn keys_are_percent_encoded() {
        assert_eq!(encode_key("a/b c?d#e%f"), "a/b%20c%3Fd%23e%25f");
        assert_eq!(encode_key("a%2Fb"), "a%252Fb");
        assert_eq!(encode_key("ünï"), "%C3%BCn%C3%AF");
        assert_eq!(encode_component("a/b"), "a%2Fb");
    }

    #[test]
    fn waits_render_like_go() {
        assert_eq!(format_wait(Duration::from_secs(15)), "15000ms");
        assert_eq!(format_wait(Duration::from_micros(10)), "1ms");
        assert_eq!(format_wait(Duration::ZERO), "0ms");
    }

    #[test]
    fn blocking_options_set_index_and_wait() {
        let mut r = Request::new("GET", "/v1/kv/a");
        QueryOptions::blocking(7, Duration::from_secs(2))
            .with_consistency(Consistency::Consistent)
            .apply(&mut r);
        assert_eq!(r.wait, Some(Duration::from_secs(2)));
        assert!(r.query.contains(&("index".into(), "7".into())));
        assert!(r.query.contains(&("wait".into(), "2000ms".into())));
        assert!(r.query.contains(&("consistent".into(), "".into())));
        let mut r = Request::new("GET", "/v1/kv/a");
        QueryOptions::default().apply(&mut r);
        assert!(r.query.is_empty() && r.wait.is_none());
    }

    #[test]
    fn a_unix_address_names_localhost_and_dials_the_socket() {
        let t = Transport::new(&ClientBuilder::new().address("unix:///tmp/c.sock")).unwrap();
        assert_eq!(t.base(), "http://localhost");
        assert_eq!(t.dial, Dial::Unix("/tmp/c.sock".into()));
        assert!(
            t.address().starts_with("unix:///tmp/c.sock ("),
            "{}",
            t.address()
        );
        let e = Transport::new(&ClientBuilder::new().address("unix://")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("names no socket file"), "{e}");
    }

    #[test]
    fn half_tls_and_unknown_schemes_are_rejected() {
        let mut b = ClientBuilder::new();
        b.tls.cert_file = Some("/c.pem".into());
        let e = Transport::new(&b).unwrap_err();
        assert_eq!(
            e.to_string(),
            "both client cert and client key must be provided"
        );
        let e = Transport::new(&ClientBuilder::new().address("tcp://x:1")).unwrap_err();
        assert!(e.to_string().contains("Unknown protocol scheme: tcp"));
    }

    #[test]
    fn https_and_prefix_shape_the_base_url() {
        let t = Transport::new(&ClientBuilder::new().address("https://h:8501/consul/")).unwrap();
        assert_eq!(t.base(), "https://h:8501/consul");
        let t = Transport::new(&ClientBuilder::new().address("h:1").https(true)).unwrap();
        assert_eq!(t.base(), "https://h:1");
        // http:// never downgrades a requested TLS.
        let t = Transport::new(&ClientBuilder::new().address("http://h:1").https(true)).unwrap();
        assert_eq!(t.base(), "https://h:1");
        let e = Transport::new(&ClientBuilder::new().tls(
            crate::foundations::config::TlsSettings {
                ca_file: Some("/nonexistent/ca.pem".into()),
                ..Default::default()
            },
        ))
        .unwrap_err();
        assert!(e
            .to_string()
            .contains("Error loading CA file /nonexistent/ca.pem"));
    }

    #[test]
    fn tls_server_name_goes_into_the_url_and_resolves_to_the_address() {
        let b = ClientBuilder::new().address("https://127.0.0.1:8501").tls(
            crate::foundations::config::TlsSettings {
                server_name: Some("consul.example".into()),
                ..Default::default()
            },
        );
        let t = Transport::new(&b).unwrap();
        assert_eq!(t.base(), "https://consul.example:8501");
        assert_eq!(
            t.dial,
            Dial::Tcp {
                host: "127.0.0.1".into(),
                port: 8501
            }
        );
        // Plain http ignores the server name.
        let t = Transport::new(&b.clone().address("127.0.0.1:8500")).unwrap();
        assert_eq!(t.base(), "http://127.0.0.1:8500");
        assert_eq!(split_host_port("[::1]:1"), ("::1", Some("1")));
        assert_eq!(split_host_port("h"), ("h", None));
    }
}
