//! HTTP plumbing: URL and query encoding, the ureq agents, timeouts,
//! cancellation, and mapping answers into [`Error`].

use std::time::Duration;

use base64::Engine as _;
use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};
use ureq::Agent;

use crate::cancel::CancelToken;
use crate::config::{parse_address, ClientBuilder, Endpoint, Scheme, Secret};
use crate::error::{Error, ErrorKind, Result};

/// Extra time granted to a blocking query beyond `wait + wait/16`.
pub(crate) const BLOCKING_MARGIN: Duration = Duration::from_secs(5);

/// Consul's default blocking wait when none is given.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(300);

/// Consul's maximum blocking wait.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(600);

/// The largest response body baton accepts from Consul: 64 MiB (after
/// decompression).
///
/// The biggest answers baton asks for legitimately are a transaction of
/// Consul's maximum 64 operations that each read a value of Consul's default
/// maximum size (`kv_max_value_size`, 512 KiB), about 43 MiB as base64 in JSON,
/// and recursive listings of a prefix, which for the prefixes baton's recipes
/// use are far smaller. Anything bigger is not a sane answer for a lock
/// library to hold in memory: the call fails with [`ErrorKind::BadResponse`]
/// instead. One answer costs at most about this much memory while it is read
/// (plus what decoding it builds).
pub(crate) const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// The longest request URL that can be sent (the `http` crate's limit for a URI).
const MAX_URL_BYTES: usize = u16::MAX as usize - 1;

/// Bytes of compressed (gzip) body read at most, so that a stream that inflates
/// to nothing cannot keep a call busy forever either.
const MAX_COMPRESSED_BYTES: u64 = 2 * MAX_RESPONSE_BYTES as u64;

/// Capacity reserved up front for a body of unknown length.
const INITIAL_BODY_CAPACITY: usize = 8 * 1024;

/// The message of an answer over [`MAX_RESPONSE_BYTES`].
fn too_large_message() -> String {
    format!(
        "response body exceeds the {} MiB limit for Consul answers",
        MAX_RESPONSE_BYTES / (1024 * 1024)
    )
}

/// Reads a whole response body of at most [`MAX_RESPONSE_BYTES`] decoded bytes.
///
/// ureq's own limit counts the bytes on the wire, before gzip decoding (which
/// ureq asks for), so it cannot bound the memory of a small body that inflates
/// to gigabytes; and its buffer doubles, so it can hold twice the limit. This
/// counts decoded bytes, refuses an announced `Content-Length` over the cap
/// before reading, reserves exactly an announced length, and otherwise grows
/// its buffer by doubling up to the cap and never beyond.
fn read_body(body: &mut ureq::Body) -> std::result::Result<Vec<u8>, ureq::Error> {
    use std::io::Read as _;
    let cap = MAX_RESPONSE_BYTES;
    let announced = body.content_length();
    if announced.is_some_and(|n| n > cap as u64) {
        return Err(ureq::Error::BodyExceedsLimit(cap as u64));
    }
    let mut reader = body.with_config().limit(MAX_COMPRESSED_BYTES).reader();
    let mut buf: Vec<u8> = Vec::with_capacity(match announced {
        Some(n) => n as usize,
        None => INITIAL_BODY_CAPACITY,
    });
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return Ok(buf),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // The connection broke in the middle of the body: say how much came (it
            // stays a connection failure, worth another try, not a bad answer).
            Err(e) => {
                return Err(match ureq::Error::from(e) {
                    ureq::Error::Io(io) => ureq::Error::Io(std::io::Error::new(
                        io.kind(),
                        format!(
                            "the answer was cut off after {}{} bytes: {io}",
                            buf.len(),
                            announced.map_or(String::new(), |n| format!(" of {n}"))
                        ),
                    )),
                    other => other,
                })
            }
        };
        if n > cap - buf.len() {
            return Err(ureq::Error::BodyExceedsLimit(cap as u64));
        }
        if n > buf.capacity() - buf.len() {
            let target = (buf.capacity() * 2).max(buf.len() + n).min(cap);
            buf.reserve_exact(target - buf.len());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Meta data Consul sends with read answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryMeta {
    /// `X-Consul-Index` (0 if absent).
    pub index: u64,
    /// `X-Consul-KnownLeader`.
    pub known_leader: bool,
    /// `X-Consul-LastContact` in milliseconds.
    pub last_contact_ms: u64,
}

/// Read consistency mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Consistency {
    /// Answered by the leader without a quorum check (Consul's default).
    #[default]
    Default,
    /// `?consistent`: the leader verifies leadership first.
    Consistent,
    /// `?stale`: any server may answer.
    Stale,
}

/// Options of a read: blocking index and wait, consistency, cancellation and deadline.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// Block until the result's index is greater than this (0 = answer at once).
    /// Values are used as given; see [`next_index`](crate::watch::next_index) for
    /// the rules when feeding back indexes.
    pub index: u64,
    /// Longest time the server may hold a blocking query (server default 5 min,
    /// max 10 min).
    pub wait: Option<Duration>,
    /// Consistency mode.
    pub consistency: Consistency,
    /// Cancels the call from another thread.
    pub cancel: Option<CancelToken>,
    /// Deadline of the whole call. A blocking query's own timeout is
    /// `wait + wait/16 + 5 s`; this can only shorten it.
    pub timeout: Option<Duration>,
}

impl QueryOptions {
    /// Blocking query options: wait for an index above `index`, at most `wait`.
    pub fn blocking(index: u64, wait: Duration) -> QueryOptions {
        QueryOptions {
            index,
            wait: Some(wait),
            ..Default::default()
        }
    }

    /// Sets the cancel token.
    pub fn with_cancel(mut self, cancel: CancelToken) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Sets the deadline.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the consistency mode.
    pub fn with_consistency(mut self, consistency: Consistency) -> Self {
        self.consistency = consistency;
        self
    }

    pub(crate) fn apply(&self, req: &mut Request) {
        match self.consistency {
            Consistency::Default => {}
            Consistency::Consistent => req.flag("consistent"),
            Consistency::Stale => req.flag("stale"),
        }
        if self.index > 0 {
            req.param("index", self.index.to_string());
            let wait = self.wait.unwrap_or(DEFAULT_WAIT).min(MAX_WAIT);
            req.param("wait", format_wait(wait));
            req.wait = Some(wait);
        }
        req.timeout = self.timeout;
        req.cancel = self.cancel.clone();
    }
}

/// Formats a wait the way the Go client does: integer milliseconds + `ms`,
/// a positive sub-millisecond value becomes `1ms`.
pub(crate) fn format_wait(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 && !d.is_zero() {
        "1ms".to_string()
    } else {
        format!("{ms}ms")
    }
}

/// Percent-encodes a KV key for the URL path: everything but unreserved
/// characters and `/` (so `?`, `#`, `%`, space and `%2F` survive, hashicorp/consul#1409).
pub fn encode_key(key: &str) -> String {
    encode(key, true)
}

/// Percent-encodes one query or path component.
pub(crate) fn encode_component(s: &str) -> String {
    encode(s, false)
}

fn encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        let keep = b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_' | b'~')
            || (keep_slash && b == b'/');
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One request to Consul.
#[derive(Clone)]
pub(crate) struct Request {
    pub(crate) method: &'static str,
    /// Already encoded path under the API root, e.g. `/v1/kv/a%20b`.
    pub(crate) path: String,
    /// For messages: the path with the key part, but never a token.
    pub(crate) query: Vec<(String, String)>,
    pub(crate) body: Option<(Vec<u8>, &'static str)>,
    pub(crate) wait: Option<Duration>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) cancel: Option<CancelToken>,
}

impl Request {
    pub(crate) fn new(method: &'static str, path: impl Into<String>) -> Request {
        Request {
            method,
            path: path.into(),
            query: Vec::new(),
            body: None,
            wait: None,
            timeout: None,
            cancel: None,
        }
    }

    pub(crate) fn param(&mut self, k: &str, v: impl Into<String>) {
        self.query.push((k.to_string(), v.into()));
    }

    /// A boolean parameter, sent as `key=` like the Go client.
    pub(crate) fn flag(&mut self, k: &str) {
        self.param(k, "");
    }

    pub(crate) fn json_body(&mut self, value: &serde_json::Value) {
        let mut body = serde_json::to_vec(value).expect("serialising JSON cannot fail");
        body.push(b'\n');
        self.body = Some((body, "application/json"));
    }

    pub(crate) fn raw_body(&mut self, body: Vec<u8>) {
        self.body = Some((body, "application/octet-stream"));
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// An answer of any status.
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
    pub(crate) meta: QueryMeta,
    /// What was wrong with a query-meta header, if anything (see [`parse_meta`]).
    pub(crate) bad_meta: Option<String>,
}

/// Reads the query-meta headers (names compared without regard to case).
///
/// Like the Go client (`parseQueryMeta`), an absent header counts as 0 /
/// false (writes and `/v1/status/leader` send none), but a present
/// `X-Consul-Index` or `X-Consul-LastContact` that is not a decimal uint64 is
/// an error: the index drives blocking queries and fencing tokens, and taking
/// garbage for 0 would silently turn a blocking query into a busy loop. The
/// error text is returned beside the (zeroed) value; [`Transport::send_on`]
/// turns it into a `BadResponse` for the answers that carry meta (2xx and
/// 404). `X-Consul-KnownLeader` is `true` only when it says exactly that, as in Go.
fn parse_meta(h: &ureq::http::HeaderMap) -> (QueryMeta, Option<String>) {
    let mut bad = None;
    let mut number = |name: &str| -> u64 {
        let Some(v) = h.get(name) else { return 0 };
        let parsed = v
            .to_str()
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok());
        parsed.unwrap_or_else(|| {
            bad.get_or_insert_with(|| {
                format!(
                    "the {name} header is not a decimal uint64: {}",
                    crate::error::printable(v.as_bytes(), 80)
                )
            });
            0
        })
    };
    let index = number("X-Consul-Index");
    let last_contact_ms = number("X-Consul-LastContact");
    let known_leader = h
        .get("X-Consul-KnownLeader")
        .is_some_and(|v| v.as_bytes() == b"true");
    (
        QueryMeta {
            index,
            known_leader,
            last_contact_ms,
        },
        bad,
    )
}

impl Response {
    pub(crate) fn json<T: serde::de::DeserializeOwned>(&self, endpoint: &str) -> Result<T> {
        decode_json(&self.body).map_err(|e| e.with_endpoint(endpoint.to_string()))
    }
}

/// Decodes a JSON answer, or says what was wrong with it (kind
/// [`ErrorKind::BadResponse`]): the field that failed (`[0].Flags`), serde's
/// reason and position, and for a body that ends early or is empty, that fact
/// and its length, so that a cut-off or non-JSON answer (a proxy's HTML page)
/// is told apart from a wrong value.
pub(crate) fn decode_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let decoded = match serde_path_to_error::deserialize(&mut de) {
        // Trailing characters after the value (whitespace is fine) are an error too.
        Ok(v) => de.end().map(|()| v).map_err(|e| (String::new(), e)),
        Err(e) => Err((e.path().to_string(), e.into_inner())),
    };
    decoded.map_err(|(path, inner)| {
        let whole = if body.trim_ascii().is_empty() {
            " (the answer is empty)".to_string()
        } else if inner.is_eof() {
            format!(" (the answer ends early, after {} bytes)", body.len())
        } else if inner.is_syntax()
            && !body.trim_ascii_start().starts_with(b"[")
            && !body.trim_ascii_start().starts_with(b"{")
        {
            // Not JSON at all: show how it starts.
            format!(
                " (the answer starts with {})",
                crate::error::printable(&body[..body.len().min(64)], 80)
            )
        } else {
            String::new()
        };
        // serde_path_to_error shows the root as "." (and an unknown step as "?").
        let at = if path.is_empty() || path == "." || path == "?" {
            String::new()
        } else {
            format!(" at {path}")
        };
        Error::new(
            ErrorKind::BadResponse,
            format!("could not decode Consul's answer{at}: {inner}{whole}"),
        )
        .with_source(inner)
    })
}

/// The HTTP side of a client: base URL, credentials and agents.
pub(crate) struct Transport {
    base: String,
    agent: Agent,
    agent_config: ureq::config::Config,
    resolver: Resolver,
    token: Option<Secret>,
    auth: Option<Secret>,
    common_query: Vec<(String, String)>,
    request_timeout: Duration,
    /// Whether Consul is answering, as the requests of all threads see it.
    pub(crate) availability: Availability,
    /// Where the address came from, for connection errors.
    address_origin: crate::config::AddressOrigin,
    /// The TLS settings, for explaining TLS failures.
    tls: crate::tls_hint::TlsContext,
}

/// Whether Consul answers: set troubled by a transient failure, and back by the
/// next real answer (any thread's), which also wakes every call waiting out the
/// outage (`ride_out`), so they retry at once instead of at their next pause.
#[derive(Default)]
pub(crate) struct Availability {
    troubled: std::sync::atomic::AtomicBool,
    back: std::sync::Mutex<CancelToken>,
    probing: std::sync::atomic::AtomicBool,
}

/// The right to send the client's one probe of an unavailable Consul, given
/// back when dropped.
pub(crate) struct ProbeSlot<'a>(&'a Availability);

impl Drop for ProbeSlot<'_> {
    fn drop(&mut self) {
        self.0
            .probing
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Availability {
    /// The probe slot, if no other call holds it.
    pub(crate) fn try_probe(&self) -> Option<ProbeSlot<'_>> {
        use std::sync::atomic::Ordering;
        self.probing
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .ok()
            .map(|_| ProbeSlot(self))
    }

    fn saw(&self, transient_failure: bool) {
        use std::sync::atomic::Ordering;
        if transient_failure {
            self.troubled.store(true, Ordering::SeqCst);
        } else if self.troubled.load(Ordering::Relaxed)
            && self.troubled.swap(false, Ordering::SeqCst)
        {
            let fired = std::mem::take(&mut *crate::sync::lock(&self.back));
            fired.cancel();
        }
    }

    /// A token cancelled at the next answer after a transient failure.
    pub(crate) fn next_answer(&self) -> CancelToken {
        crate::sync::lock(&self.back).clone()
    }
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
        let (host_port, forced, prefix) = match parse_address(&b.address)? {
            Endpoint::Tcp {
                host_port,
                scheme,
                path_prefix,
            } => (host_port, scheme, path_prefix),
            Endpoint::Unix(path) => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "unix socket addresses are not supported by baton yet (unix://{})",
                        path.display()
                    ),
                ))
            }
        };
        let scheme = if b.ssl || forced == Some(Scheme::Https) {
            Scheme::Https
        } else {
            Scheme::Http
        };
        let token = b.resolve_token()?;
        let tls = tls_config(b)?;
        // The TLS server name goes into the URL (so rustls sends and verifies
        // it); the resolver maps it back to the configured host.
        let mut resolver = Resolver::default();
        let mut url_host_port = host_port.clone();
        if let (Scheme::Https, Some(name)) = (scheme, &b.tls.server_name) {
            let (real_host, port) = split_host_port(&host_port);
            resolver.alias = Some((name.clone(), real_host.to_string()));
            url_host_port = match port {
                Some(p) => format!("{name}:{p}"),
                None => name.clone(),
            };
        }
        let agent_config = Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_connect(Some(b.connect_timeout))
            .timeout_global(Some(b.request_timeout))
            .tls_config(tls)
            .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
            .build();
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
            .parse::<ureq::http::Uri>()
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
                crate::config::AddressOrigin::Env => " (from CONSUL_HTTP_ADDR)",
                _ => "",
            };
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("the Consul address {host_port:?}{whence} does not make a valid URL ({base}: {e})"),
            ));
        }
        Ok(Transport {
            base,
            agent: new_agent(agent_config.clone(), resolver.clone()),
            resolver,
            agent_config,
            token,
            auth,
            common_query,
            request_timeout: b.request_timeout,
            availability: Availability::default(),
            address_origin: b.address_origin,
            tls: crate::tls_hint::TlsContext::new(&b.tls),
        })
    }

    /// The base URL (scheme, host, port, prefix).
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The shared agent of ordinary calls.
    pub(crate) fn shared_agent(&self) -> Agent {
        self.agent.clone()
    }

    /// A fresh agent with its own connections, so that it can be shut down
    /// (interrupting its I/O) without touching others.
    pub(crate) fn fresh_agent(&self) -> Agent {
        new_agent(self.agent_config.clone(), self.resolver.clone())
    }

    /// Sends `req` on the shared agent, or on a private agent wired to its
    /// cancel token. Returns answers of every status.
    pub(crate) fn send(&self, req: &Request) -> Result<Response> {
        self.send_on(&self.agent, req, None)
    }

    /// Like [`Transport::send`] on a given agent; `closing` also interrupts it.
    pub(crate) fn send_on(
        &self,
        agent: &Agent,
        req: &Request,
        closing: Option<&CancelToken>,
    ) -> Result<Response> {
        let endpoint = req.endpoint();
        if let Some(c) = &req.cancel {
            if c.is_cancelled() {
                return Err(cancelled(endpoint));
            }
        }
        // The `http` crate refuses a URI over 65534 bytes ("uri too long", which
        // would look like a connection failure worth retrying): a key, prefix or ID
        // that long is the caller's argument, refused before anything is sent.
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
            .with_endpoint(endpoint));
        }
        let mut timeout = self.request_timeout;
        let mut timeout_is_users = false;
        if let Some(w) = req.wait {
            timeout = w + w / 16 + BLOCKING_MARGIN;
        }
        if let Some(t) = req.timeout {
            if t <= timeout {
                timeout = t;
                timeout_is_users = true;
            }
        }
        // A cancellable call runs on a private agent that the token shuts down.
        let private;
        let mut guards = Vec::new();
        let agent = if let Some(cancel) = &req.cancel {
            private = self.fresh_agent();
            let a = private.clone();
            guards.push(cancel.on_cancel(move || a.shutdown()));
            if let Some(c) = closing {
                let a = private.clone();
                guards.push(c.on_cancel(move || a.shutdown()));
            }
            &private
        } else {
            agent
        };
        let started = std::time::Instant::now();
        let mut result = self.run(agent, req, &url, timeout);
        let mut retried = false;
        // Not a blocking query: its connection closing is news (the agent restarted, maybe
        // with its state lost), and repeating it with the same index could wait on a server
        // whose index is now below it. Its caller reads afresh instead.
        if result.as_ref().is_err_and(stale_connection)
            && req.wait.is_none()
            && !req.cancel.as_ref().is_some_and(|c| c.is_cancelled())
            && !closing.is_some_and(|c| c.is_cancelled())
        {
            // A pooled keep-alive connection the server had closed (idle timeout, restart,
            // leader change): the request never reached a live server. Retry once on a new
            // connection. Every request baton sends is safe to repeat (reads, renews,
            // releases, CAS and check-guarded transactions), except that a repeated session
            // create may leave a spare session to expire by its TTL.
            let left = timeout.saturating_sub(started.elapsed());
            if !left.is_zero() {
                log::debug!(
                    "baton: {} on a stale connection, retrying once",
                    req.endpoint()
                );
                result = self.run(agent, req, &url, left);
                retried = true;
            }
        }
        drop(guards);
        if let Some(c) = &req.cancel {
            if c.is_cancelled() {
                return Err(cancelled(endpoint));
            }
        }
        if let Some(c) = closing {
            if c.is_cancelled() {
                return Err(Error::new(ErrorKind::Closed, "client closed").with_endpoint(endpoint));
            }
        }
        // A malformed index or contact header on an answer that carries query meta.
        let result = match result {
            Ok(r) if (r.status < 300 || r.status == 404) && r.bad_meta.is_some() => {
                let msg = r.bad_meta.unwrap_or_default();
                self.availability.saw(false);
                return Err(Error::new(ErrorKind::BadResponse, msg).with_endpoint(endpoint));
            }
            other => other,
        };
        let result = result.map_err(|e| {
            let hint = self.hint(&e);
            // A fresh HTTPS connection closed under the request too, with no client
            // certificate to offer: how a server that requires one (verify_incoming) refuses
            // with TLS 1.3. Waiting will not mend that.
            let refused_again = retried
                && stale_connection(&e)
                && self.base.starts_with("https://")
                && !self.tls.has_client_cert();
            let err = map_ureq_error(e, endpoint, timeout, timeout_is_users);
            let err = if refused_again { err.permanent() } else { err };
            match hint {
                // Advice on TLS reads first, the library's words after it.
                Some((h, true)) => err.led_by(&h),
                Some((h, false)) => err.suffixed(&h),
                None => err,
            }
        });
        // An answer of any status reached us; a transport error (refused, reset,
        // name not resolved, TLS, no answer within the request timeout) did not.
        // A request cut short by its caller's deadline says neither: Consul holds
        // requests for seconds while it elects a leader.
        let cut_short = timeout_is_users
            && result
                .as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::Timeout);
        if !cut_short {
            crate::scope::note_reach(result.as_ref().err().map(|e| e as &dyn std::fmt::Display));
        }
        match &result {
            // Only an error status can be a "not now"; the text is read only then.
            Ok(r) if r.status >= 429 => self.availability.saw(crate::error::transient_status(
                r.status,
                &String::from_utf8_lossy(r.body.get(..512).unwrap_or(&r.body)),
            )),
            Ok(_) => self.availability.saw(false),
            Err(e) if e.is_transient() => self.availability.saw(true),
            Err(_) => {}
        }
        result
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

    fn run(
        &self,
        agent: &Agent,
        req: &Request,
        url: &str,
        timeout: Duration,
    ) -> std::result::Result<Response, ureq::Error> {
        let token = self.token.as_ref().map(|t| t.0.as_str());
        let auth = self.auth.as_ref().map(|t| t.0.as_str());
        macro_rules! prepare {
            ($b:expr) => {{
                let mut b = $b.config().timeout_global(Some(timeout)).build();
                if let Some(t) = token {
                    b = b.header("X-Consul-Token", t);
                }
                if let Some(a) = auth {
                    b = b.header("Authorization", a);
                }
                b
            }};
        }
        let mut resp = match (req.method, &req.body) {
            ("GET", _) => prepare!(agent.get(url)).call()?,
            ("DELETE", _) => prepare!(agent.delete(url)).call()?,
            ("PUT", Some((body, ct))) => prepare!(agent.put(url))
                .header("Content-Type", *ct)
                .send(&body[..])?,
            ("PUT", None) => prepare!(agent.put(url)).send_empty()?,
            (m, _) => unreachable!("method {m} is not used"),
        };
        let status = resp.status().as_u16();
        let (meta, bad_meta) = parse_meta(resp.headers());
        let body = read_body(resp.body_mut())?;
        Ok(Response {
            status,
            body,
            meta,
            bad_meta,
        })
    }

    /// The address requests go to and where it came from, for messages:
    /// `http://127.0.0.1:8500 (from CONSUL_HTTP_ADDR)`.
    pub(crate) fn address(&self) -> String {
        use crate::config::AddressOrigin;
        let whence = match self.address_origin {
            AddressOrigin::Default => {
                "Consul's default address; set CONSUL_HTTP_ADDR if the agent listens elsewhere"
            }
            AddressOrigin::Env => "from CONSUL_HTTP_ADDR",
            AddressOrigin::Configured => "the client's configured address",
        };
        format!("{} ({whence})", self.base)
    }

    /// What to add to a failure to reach Consul: the address tried, where it
    /// came from, and what to check.
    fn hint(&self, e: &ureq::Error) -> Option<(String, bool)> {
        use std::io::ErrorKind as K;
        let unreachable = match e {
            ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => true,
            ureq::Error::Io(io) => matches!(io.kind(), K::ConnectionRefused | K::HostUnreachable),
            _ => false,
        };
        if unreachable {
            return Some((
                format!("no Consul agent answered at {}", self.address()),
                false,
            ));
        }
        if self.base.starts_with("https://") {
            if let Some(h) = crate::tls_hint::hint(&self.tls, e) {
                return Some((h, true));
            }
        }
        // rustls meeting a plain-HTTP answer where a TLS record was due (it comes
        // wrapped in an I/O error of kind InvalidData).
        let tls = match e {
            ureq::Error::Tls(_) | ureq::Error::Rustls(_) => true,
            ureq::Error::Io(io) => io.kind() == K::InvalidData,
            _ => false,
        };
        if tls && self.base.starts_with("https://") && e.to_string().contains("InvalidContentType")
        {
            return Some((
                format!(
                "{} does not answer TLS: if the agent serves plain HTTP, use an http:// address \
                 (and unset CONSUL_HTTP_SSL)",
                self.base
            ),
                true,
            ));
        }
        None
    }

    /// Sends `req` and turns a non-2xx answer into an error.
    pub(crate) fn call(&self, req: &Request) -> Result<Response> {
        let resp = self.send(req)?;
        check(req, resp)
    }
}

fn new_agent(config: ureq::config::Config, resolver: Resolver) -> Agent {
    Agent::with_parts(
        config,
        ureq::unversioned::transport::DefaultConnector::new(),
        resolver,
    )
}

/// Splits `host:port` (IPv6 in brackets); the port is `None` when absent.
fn split_host_port(s: &str) -> (&str, Option<&str>) {
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

/// Resolves without helper threads: IP literals directly, names through the
/// system resolver (ureq's default resolver spawns a thread per lookup when a
/// timeout is set).
#[derive(Debug, Clone, Default)]
struct Resolver {
    /// `(tls server name, real host)`: connect to the real host when the URL names the alias.
    alias: Option<(String, String)>,
}

impl Resolver {
    /// The host to connect to for a URL host.
    fn target_host<'a>(&'a self, host: &'a str) -> &'a str {
        match &self.alias {
            Some((alias, real)) if host.eq_ignore_ascii_case(alias) => real,
            _ => host,
        }
    }
}

impl ureq::unversioned::resolver::Resolver for Resolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        _config: &ureq::config::Config,
        _timeout: ureq::unversioned::transport::NextTimeout,
    ) -> std::result::Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        use std::net::ToSocketAddrs;
        let authority = uri.authority().ok_or(ureq::Error::HostNotFound)?;
        let host = self.target_host(
            authority
                .host()
                .trim_start_matches('[')
                .trim_end_matches(']'),
        );
        let port = authority.port_u16().unwrap_or(match uri.scheme_str() {
            Some("https") => 443,
            _ => 80,
        });
        let mut out = self.empty();
        let addrs: Vec<std::net::SocketAddr> = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![std::net::SocketAddr::new(ip, port)],
            Err(_) => (host, port)
                .to_socket_addrs()
                .map_err(ureq::Error::Io)?
                .collect(),
        };
        for a in addrs.into_iter().take(16) {
            out.push(a);
        }
        if out.is_empty() {
            return Err(ureq::Error::HostNotFound);
        }
        Ok(out)
    }
}

pub(crate) fn check(req: &Request, resp: Response) -> Result<Response> {
    if (200..300).contains(&resp.status) {
        Ok(resp)
    } else {
        Err(Error::from_status(req.endpoint(), resp.status, &resp.body))
    }
}

fn cancelled(endpoint: String) -> Error {
    Error::new(ErrorKind::Cancelled, "cancelled").with_endpoint(endpoint)
}

/// Whether an error means the connection died under the request (reset, closed,
/// broken pipe) rather than that the server refused or timed out.
fn stale_connection(e: &ureq::Error) -> bool {
    use std::io::ErrorKind as K;
    match e {
        ureq::Error::Io(io) => matches!(
            io.kind(),
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof
        ),
        _ => false,
    }
}

fn map_ureq_error(e: ureq::Error, endpoint: String, timeout: Duration, users: bool) -> Error {
    // A TLS failure ureq hands over as an I/O error: a certificate or handshake problem, which
    // trying again will not mend.
    let tls_failure = crate::tls_hint::rustls_error(&e);
    let (kind, msg) = match &e {
        ureq::Error::Timeout(t) => (
            ErrorKind::Timeout,
            format!(
                "no answer within {timeout:?} ({t}){}",
                if users { "" } else { " (request timeout)" }
            ),
        ),
        ureq::Error::HostNotFound => (ErrorKind::Connection, "host not found".to_string()),
        ureq::Error::ConnectionFailed => (ErrorKind::Connection, "connection failed".to_string()),
        ureq::Error::Io(_) if tls_failure.is_some() => (
            ErrorKind::Connection,
            format!("TLS error: {}", tls_failure.expect("checked")),
        ),
        ureq::Error::Io(io) => (ErrorKind::Connection, format!("I/O error: {io}")),
        ureq::Error::Tls(_) | ureq::Error::Pem(_) | ureq::Error::Rustls(_) => {
            (ErrorKind::Connection, format!("TLS error: {e}"))
        }
        ureq::Error::TooManyRedirects | ureq::Error::RedirectFailed => {
            (ErrorKind::InvalidArgument, format!("redirected: {e}"))
        }
        ureq::Error::BodyExceedsLimit(_) => (ErrorKind::BadResponse, too_large_message()),
        ureq::Error::Protocol(_) => (ErrorKind::BadResponse, format!("HTTP protocol error: {e}")),
        _ => (ErrorKind::Connection, e.to_string()),
    };
    // No answer, or the connection broke: worth another try while time is left. A
    // name that does not resolve, TLS and protocol failures are configuration or
    // server problems that trying again will not mend.
    let transient = tls_failure.is_none()
        && matches!(
            e,
            ureq::Error::Timeout(_) | ureq::Error::ConnectionFailed | ureq::Error::Io(_)
        );
    let err = Error::new(kind, msg).with_endpoint(endpoint);
    let err = if transient { err.transient() } else { err };
    err.with_source(e)
}

fn read_file(path: &std::path::Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("Error loading {what} {}: {e}", path.display()),
        )
        .with_source(e)
    })
}

fn pem_items(data: &[u8], path: &std::path::Path) -> Result<Vec<PemItem<'static>>> {
    ureq::tls::parse_pem(data)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("could not parse PEM in {}: {e}", path.display()),
            )
        })
}

fn certs_in(data: &[u8], path: &std::path::Path) -> Result<Vec<Certificate<'static>>> {
    let certs: Vec<_> = pem_items(data, path)?
        .into_iter()
        .filter_map(|i| match i {
            PemItem::Certificate(c) => Some(c),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("no PEM certificate found in {}", path.display()),
        ));
    }
    Ok(certs)
}

fn tls_config(b: &ClientBuilder) -> Result<TlsConfig> {
    let t = &b.tls;
    let mut builder = TlsConfig::builder().disable_verification(t.insecure_skip_verify);
    let mut roots = Vec::new();
    if let Some(f) = &t.ca_file {
        roots.extend(certs_in(&read_file(f, "CA file")?, f)?);
    }
    if let Some(dir) = &t.ca_path {
        let entries = std::fs::read_dir(dir).map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("Error loading CA path {}: {e}", dir.display()),
            )
        })?;
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths.into_iter().filter(|p| p.is_file()) {
            roots.extend(certs_in(&read_file(&p, "CA file")?, &p)?);
        }
    }
    if !roots.is_empty() {
        builder = builder.root_certs(RootCerts::new_with_certs(&roots));
    }
    match (&t.cert_file, &t.key_file) {
        (None, None) => {}
        (Some(c), Some(k)) => {
            let certs = certs_in(&read_file(c, "client cert")?, c)?;
            let key: Option<PrivateKey<'static>> = pem_items(&read_file(k, "client key")?, k)?
                .into_iter()
                .find_map(|i| match i {
                    PemItem::PrivateKey(k) => Some(k),
                    _ => None,
                });
            let key = key.ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!("no PEM private key found in {}", k.display()),
                )
            })?;
            builder = builder.client_cert(Some(ClientCert::new_with_certs(&certs, key)));
        }
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "both client cert and client key must be provided",
            ))
        }
    }
    Ok(builder.build())
}

#[cfg(test)]
mod tests {
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
    fn unix_and_half_tls_are_rejected() {
        let e = Transport::new(&ClientBuilder::new().address("unix:///tmp/c.sock")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("unix socket"));
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
        let e = Transport::new(&ClientBuilder::new().tls(crate::config::TlsSettings {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..Default::default()
        }))
        .unwrap_err();
        assert!(e
            .to_string()
            .contains("Error loading CA file /nonexistent/ca.pem"));
    }

    #[test]
    fn tls_server_name_goes_into_the_url_and_resolves_to_the_address() {
        let b = ClientBuilder::new().address("https://127.0.0.1:8501").tls(
            crate::config::TlsSettings {
                server_name: Some("consul.example".into()),
                ..Default::default()
            },
        );
        let t = Transport::new(&b).unwrap();
        assert_eq!(t.base(), "https://consul.example:8501");
        assert_eq!(t.resolver.target_host("consul.example"), "127.0.0.1");
        assert_eq!(t.resolver.target_host("other"), "other");
        // Plain http ignores the server name.
        let t = Transport::new(&b.clone().address("127.0.0.1:8500")).unwrap();
        assert_eq!(t.base(), "http://127.0.0.1:8500");
        assert_eq!(split_host_port("[::1]:1"), ("::1", Some("1")));
        assert_eq!(split_host_port("h"), ("h", None));
    }
}
