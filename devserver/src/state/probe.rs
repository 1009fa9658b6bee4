//! What the agent's HTTP and TCP health checks do once (`agent/checks/check.go` `CheckHTTP`,
//! `CheckTCP`): [`Probe::run`] connects, asks and maps the answer to a status and Consul's
//! output text. The schedule that runs them is the server's check runner
//! (`server/checks.rs`). The HTTP exchange is hyper's client (one connection per probe, as
//! the agent's transport with `DisableKeepAlives`); TLS is rustls.
//!
//! An HTTP check is `passing` on a 2xx answer, `warning` on 429, `critical` on any other
//! answer or none; its output is `HTTP <method> <url>: <status> Output: <body>`, or the error.
//! The body is read to its end and its last 4 KiB kept, as the agent reads it into a
//! `circbuf` of `OutputMaxSize` (4 KiB): a shorter body is there whole. It sends the check's
//! `Method` (default GET), `Header` and `Body`, and `User-Agent: Consul Health Check` and
//! `Accept: text/plain, text/*, */*` unless the check's headers set them; it follows up to 10
//! redirects as Go's `http.Client` does (none with `DisableRedirects`); `https://` URLs are
//! verified against the server's `--tls-ca` unless `TLSSkipVerify`. A TCP check is `passing`
//! when a connection opens (`TCP connect <addr>: Success`). Every probe is bounded by the
//! check's `Timeout` (10 s when it has none), redirects and reading the body included, as
//! Go's `http.Client.Timeout`: a body cut short by it leaves what came as the output;
//! intervals are at least 1 s (`checks.MinInterval`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, Uri};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::CheckStatus;

/// Consul's `checks.MinInterval`: shorter intervals are raised to it.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The timeout of a probe whose check sets none.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of an HTTP answer's body goes into the output (Consul's default
/// `OutputMaxSize`, 4 KiB): its end.
const OUTPUT_MAX: usize = 4 * 1024;
/// How many redirects an HTTP check follows (Go's `http.Client` default).
const MAX_REDIRECTS: usize = 10;

/// What to probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// `HTTP`: a URL, with the check's `Method` (default GET), `Header`, `Body`,
    /// `TLSSkipVerify` and `DisableRedirects`.
    Http {
        url: String,
        method: String,
        headers: Vec<(String, String)>,
        body: String,
        tls_skip_verify: bool,
        /// `DisableRedirects`: a 3xx answer is the result (else up to 10 are followed).
        disable_redirects: bool,
    },
    /// `TCP`: `host:port`.
    Tcp(String),
}

/// An HTTP or TCP check's definition, as the agent runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Probe {
    pub target: Target,
    /// Raised to [`MIN_INTERVAL`].
    pub interval: Duration,
    /// [`DEFAULT_TIMEOUT`] unless the check sets one.
    pub timeout: Duration,
}

impl Probe {
    /// A probe with Consul's bounds applied to `interval` and `timeout` (zero: the default).
    pub fn new(target: Target, interval: Duration, timeout: Duration) -> Probe {
        Probe {
            target,
            interval: interval.max(MIN_INTERVAL),
            timeout: if timeout.is_zero() {
                DEFAULT_TIMEOUT
            } else {
                timeout
            },
        }
    }

    /// Probes once, within the timeout: the status and the output to record.
    pub async fn run(&self, ca_file: Option<&std::path::Path>) -> (CheckStatus, String) {
        let deadline = Instant::now() + self.timeout;
        match &self.target {
            Target::Tcp(addr) => {
                match tokio::time::timeout_at(deadline, TcpStream::connect(addr.as_str())).await {
                    Ok(Ok(_)) => (CheckStatus::Passing, format!("TCP connect {addr}: Success")),
                    Ok(Err(e)) => (CheckStatus::Critical, format!("dial tcp {addr}: {e}")),
                    Err(_) => self.timed_out(format!("dial tcp {addr}")),
                }
            }
            Target::Http { .. } => self.http(ca_file, deadline).await,
        }
    }

    /// The output of a probe the timeout cut short (before an answer's head came).
    fn timed_out(&self, what: String) -> (CheckStatus, String) {
        let timeout = self.timeout.as_nanos().min(i64::MAX as u128) as i64;
        (
            CheckStatus::Critical,
            format!(
                "{what}: timed out after {} (Timeout)",
                crate::godur::format_go_duration(timeout)
            ),
        )
    }

    async fn http(
        &self,
        ca_file: Option<&std::path::Path>,
        deadline: Instant,
    ) -> (CheckStatus, String) {
        let Target::Http {
            url,
            method,
            headers,
            body,
            tls_skip_verify,
            disable_redirects,
        } = &self.target
        else {
            unreachable!("http() on a TCP probe");
        };
        let fail = |e: String| (CheckStatus::Critical, format!("{method} {url:?}: {e}"));
        let (mut at, mut how, mut payload) = (url.clone(), method.clone(), body.clone());
        let mut redirects = 0;
        let mut answer = loop {
            let sent = send(&at, &how, headers, &payload, *tls_skip_verify, ca_file);
            let a = match tokio::time::timeout_at(deadline, sent).await {
                Ok(Ok(a)) => a,
                Ok(Err(e)) => return fail(e),
                Err(_) => return self.timed_out(format!("{method} {url:?}")),
            };
            // Go's http.Client follows up to 10 redirects (Consul's DisableRedirects stops
            // it); one without a Location is the answer.
            let code = a.response.status().as_u16();
            let location = a
                .response
                .headers()
                .get(header::LOCATION)
                .and_then(|l| l.to_str().ok());
            let next = match (location, code, *disable_redirects) {
                (Some(loc), 301 | 302 | 303 | 307 | 308, false) => resolve(&at, loc),
                _ => break a,
            };
            let next = match next {
                Ok(n) => n,
                Err(e) => return fail(e),
            };
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return fail(format!("stopped after {MAX_REDIRECTS} redirects"));
            }
            // Go's redirectBehavior: 301-303 turn every method but GET and HEAD into a GET
            // without a body; 307 and 308 keep both.
            if matches!(code, 301..=303) {
                if how != "GET" && how != "HEAD" {
                    how = "GET".into();
                }
                payload.clear();
            }
            at = next;
        };
        let out = body_tail(answer.response.body_mut(), deadline).await;
        let code = answer.response.status();
        let reason = match answer
            .response
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
        {
            Some(r) => String::from_utf8_lossy(r.as_bytes()).into_owned(),
            None => code.canonical_reason().unwrap_or("").to_string(),
        };
        // Go's `Response.Status`: the code and the reason phrase as the server sent them.
        let status_text = if reason.is_empty() {
            code.as_str().to_string()
        } else {
            format!("{} {reason}", code.as_str())
        };
        let output = format!(
            "HTTP {method} {url}: {status_text} Output: {}",
            String::from_utf8_lossy(&out)
        );
        let status = match code.as_u16() {
            200..=299 => CheckStatus::Passing,
            429 => CheckStatus::Warning,
            _ => CheckStatus::Critical,
        };
        (status, output)
    }
}

/// An answer whose body is still to be read, with the task driving its connection.
struct Answer {
    response: Response<Incoming>,
    /// Ends the connection's task when the probe is done with the answer.
    _conn: AbortOnDrop,
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One request on a connection of its own (TLS for `https://`), up to the answer's head.
async fn send(
    url: &str,
    method: &str,
    headers: &[(String, String)],
    body: &str,
    tls_skip_verify: bool,
    ca_file: Option<&std::path::Path>,
) -> Result<Answer, String> {
    let uri: Uri = url.parse().map_err(|e| format!("parse {url:?}: {e}"))?;
    let https = match uri.scheme_str() {
        Some(s) if s.eq_ignore_ascii_case("http") => false,
        Some(s) if s.eq_ignore_ascii_case("https") => true,
        _ => return Err("unsupported protocol scheme (want http:// or https://)".into()),
    };
    let request = request(&uri, method, headers, body)?;
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or("no Host in request URL")?;
    // `[::1]` in a URL, `::1` to connect to and to name in TLS.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let dial = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let tcp = TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("dial tcp {dial}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let answer = if https {
        let config = tls_client_config(tls_skip_verify, ca_file)?;
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| format!("bad TLS server name {host:?}: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("tls: {e}"))?;
        exchange(tls, request).await
    } else {
        exchange(tcp, request).await
    };
    answer.map_err(|e| describe(&e))
}

/// The request as an agent sends it: `Host` from the URL (or the check's own), the check's
/// headers, then `User-Agent` and `Accept` unless it set them, and `Connection: close` (the
/// agent's transport keeps no connection alive). Header names go out in Go's canonical case
/// (hyper's title case), as Go writes the names it has.
fn request(
    uri: &Uri,
    method: &str,
    headers: &[(String, String)],
    body: &str,
) -> Result<Request<Full<Bytes>>, String> {
    let method = Method::from_bytes(method.as_bytes())
        .map_err(|_| format!("net/http: invalid method {method:?}"))?;
    let target = match uri.query() {
        Some(q) => format!("{}?{q}", uri.path()),
        None => uri.path().to_string(),
    };
    let target = if target.starts_with('/') {
        target
    } else {
        format!("/{target}")
    };
    let mut req = Request::new(Full::new(Bytes::from(body.to_owned())));
    *req.method_mut() = method.clone();
    *req.uri_mut() = target
        .parse()
        .map_err(|e| format!("parse {target:?}: {e}"))?;
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let h = req.headers_mut();
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or("");
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if !has("Host") {
        h.insert(
            header::HOST,
            HeaderValue::from_str(host).map_err(|e| format!("bad Host {host:?}: {e}"))?,
        );
    }
    for (k, v) in headers {
        // Those Go's request writer leaves out of the header map (`reqWriteExcludeHeader`)
        // and writes itself; `Connection` is always `close` here.
        if [
            "content-length",
            "transfer-encoding",
            "trailer",
            "connection",
        ]
        .iter()
        .any(|x| k.eq_ignore_ascii_case(x))
        {
            continue;
        }
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("net/http: invalid header field name {k:?}"))?;
        let value = HeaderValue::from_str(v)
            .map_err(|_| format!("net/http: invalid header field value for {k:?}"))?;
        h.append(name, value);
    }
    if !has("User-Agent") {
        h.insert(
            header::USER_AGENT,
            HeaderValue::from_static("Consul Health Check"),
        );
    }
    if !has("Accept") {
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/plain, text/*, */*"),
        );
    }
    // A URL's `user:password@` becomes Basic authorization, as Go's client does.
    if let Some(userinfo) = userinfo.filter(|_| !has("Authorization")) {
        use base64::Engine as _;
        let decoded = percent_encoding::percent_decode_str(userinfo).decode_utf8_lossy();
        let token = base64::engine::general_purpose::STANDARD.encode(decoded.as_bytes());
        if let Ok(v) = HeaderValue::from_str(&format!("Basic {token}")) {
            h.insert(header::AUTHORIZATION, v);
        }
    }
    // Go sends `Content-Length: 0` for an empty body but on GET and HEAD.
    if body.is_empty() && method != Method::GET && method != Method::HEAD {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    }
    h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    Ok(req)
}

/// Sends `request` over `io` with hyper's HTTP/1.1 client and waits for the answer's head;
/// the connection is driven by a task of its own until the [`Answer`] is dropped.
async fn exchange<S>(io: S, request: Request<Full<Bytes>>) -> Result<Answer, hyper::Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .handshake(TokioIo::new(io))
        .await?;
    let conn = AbortOnDrop(tokio::spawn(async move {
        if let Err(e) = conn.await {
            log::debug!("baton-devserver: HTTP check connection: {e}");
        }
    }));
    let response = sender.send_request(request).await?;
    Ok(Answer {
        response,
        _conn: conn,
    })
}

/// An exchange's error as the check's output names it: `EOF` when the server closed the
/// connection without an answer (Go's text for it), else hyper's description and its cause.
fn describe(e: &hyper::Error) -> String {
    if e.is_incomplete_message() {
        return "EOF".into();
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// The last [`OUTPUT_MAX`] bytes of the body, read until it ends, fails, or the deadline
/// passes (what came is kept either way, as the agent logs a failed read and reports what its
/// buffer holds).
async fn body_tail(body: &mut Incoming, deadline: Instant) -> Vec<u8> {
    let mut tail = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    keep_tail(&mut tail, data);
                }
            }
            Ok(Some(Err(e))) => {
                log::debug!("baton-devserver: HTTP check: error while reading the body: {e}");
                break;
            }
            Ok(None) => break,
            Err(_) => {
                log::debug!("baton-devserver: HTTP check: the timeout cut the body short");
                break;
            }
        }
    }
    tail
}

/// Appends `data` to `tail`, keeping its last [`OUTPUT_MAX`] bytes (armon/circbuf's `Write`).
fn keep_tail(tail: &mut Vec<u8>, data: &[u8]) {
    let data = &data[data.len().saturating_sub(OUTPUT_MAX)..];
    tail.extend_from_slice(data);
    if tail.len() > OUTPUT_MAX {
        tail.drain(..tail.len() - OUTPUT_MAX);
    }
}

/// Where a redirect's `Location` points, resolved against the URL it answered (RFC 3986
/// reference resolution for the forms servers send: absolute, scheme-relative, absolute
/// path, query, relative path).
fn resolve(base: &str, location: &str) -> Result<String, String> {
    let base_uri: Uri = base
        .parse()
        .map_err(|e| format!("bad redirect from {base:?}: {e}"))?;
    let lower = location.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Ok(location.to_string());
    }
    let scheme = base_uri.scheme_str().unwrap_or("http");
    if let Some(rest) = location.strip_prefix("//") {
        return Ok(format!("{scheme}://{rest}"));
    }
    let authority = base_uri.authority().map(|a| a.as_str()).unwrap_or("");
    let path = base_uri.path();
    if location.starts_with('/') {
        return Ok(format!("{scheme}://{authority}{location}"));
    }
    if location.starts_with('?') {
        return Ok(format!("{scheme}://{authority}{path}{location}"));
    }
    let dir = &path[..=path.rfind('/').unwrap_or(0)];
    let dir = if dir.is_empty() { "/" } else { dir };
    Ok(format!("{scheme}://{authority}{dir}{location}"))
}

/// The TLS client of an `https://` check: no verification with `TLSSkipVerify`, else the
/// server's CA file (`--tls-ca`), as an agent verifies with its `ca_file`.
fn tls_client_config(
    skip_verify: bool,
    ca_file: Option<&std::path::Path>,
) -> Result<Arc<tokio_rustls::rustls::ClientConfig>, String> {
    use tokio_rustls::rustls::{self, pki_types::pem::PemObject, pki_types::CertificateDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let config = if skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
            .with_no_client_auth()
    } else {
        let ca = ca_file.ok_or(
            "x509: certificate signed by unknown authority (the dev server verifies HTTPS checks \
             with its --tls-ca; set TLSSkipVerify or start it with --tls-ca)",
        )?;
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca).map_err(|e| format!("{}: {e}", ca.display()))? {
            let c = c.map_err(|e| format!("{}: {e}", ca.display()))?;
            roots.add(c).map_err(|e| format!("{}: {e}", ca.display()))?;
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    Ok(Arc::new(config))
}

/// `TLSSkipVerify`: any certificate is accepted (signatures on the handshake are still checked).
#[derive(Debug)]
struct NoVerify(Arc<tokio_rustls::rustls::crypto::CryptoProvider>);

impl tokio_rustls::rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[tokio_rustls::rustls::pki_types::CertificateDer<'_>],
        _server_name: &tokio_rustls::rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: tokio_rustls::rustls::pki_types::UnixTime,
    ) -> Result<tokio_rustls::rustls::client::danger::ServerCertVerified, tokio_rustls::rustls::Error>
    {
        Ok(tokio_rustls::rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
        dss: &tokio_rustls::rustls::DigitallySignedStruct,
    ) -> Result<
        tokio_rustls::rustls::client::danger::HandshakeSignatureValid,
        tokio_rustls::rustls::Error,
    > {
        tokio_rustls::rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
        dss: &tokio_rustls::rustls::DigitallySignedStruct,
    ) -> Result<
        tokio_rustls::rustls::client::danger::HandshakeSignatureValid,
        tokio_rustls::rustls::Error,
    > {
        tokio_rustls::rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<tokio_rustls::rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_the_agents_headers_and_an_origin_form_target() {
        let uri: Uri = "http://u%40x:p@127.0.0.1:8080/health?x=1".parse().unwrap();
        let r = request(&uri, "PUT", &[("X-Test".into(), "one".into())], "").unwrap();
        assert_eq!(r.uri().to_string(), "/health?x=1");
        assert_eq!(r.method(), Method::PUT);
        let h = r.headers();
        assert_eq!(h["host"], "127.0.0.1:8080");
        assert_eq!(h["x-test"], "one");
        assert_eq!(h["user-agent"], "Consul Health Check");
        assert_eq!(h["accept"], "text/plain, text/*, */*");
        assert_eq!(h["content-length"], "0");
        assert_eq!(h["connection"], "close");
        // base64("u@x:p")
        assert_eq!(h["authorization"], "Basic dUB4OnA=");
        let uri: Uri = "http://example.com?q".parse().unwrap();
        let r = request(
            &uri,
            "GET",
            &[
                ("user-agent".into(), "probe/1".into()),
                ("Host".into(), "h".into()),
            ],
            "",
        )
        .unwrap();
        assert_eq!(r.uri().to_string(), "/?q");
        assert_eq!(r.headers()["user-agent"], "probe/1");
        assert_eq!(r.headers().get_all("host").iter().count(), 1);
        assert_eq!(r.headers()["host"], "h");
        assert!(r.headers().get("content-length").is_none());
        assert!(request(&uri, "GET", &[("bad name".into(), "v".into())], "").is_err());
        assert!(request(&uri, "B@D", &[], "").is_err());
    }

    #[test]
    fn redirects_resolve_against_the_url_they_answered() {
        let base = "http://h:1/a/b?q";
        assert_eq!(resolve(base, "/ui/").unwrap(), "http://h:1/ui/");
        assert_eq!(resolve(base, "c").unwrap(), "http://h:1/a/c");
        assert_eq!(resolve(base, "?r").unwrap(), "http://h:1/a/b?r");
        assert_eq!(resolve(base, "https://o/x").unwrap(), "https://o/x");
        assert_eq!(resolve("https://h/", "//o/x").unwrap(), "https://o/x");
    }

    #[test]
    fn the_output_keeps_the_end_of_a_long_body() {
        let mut tail = Vec::new();
        keep_tail(&mut tail, b"hello");
        assert_eq!(tail, b"hello");
        let long: Vec<u8> = (0..OUTPUT_MAX + 10).map(|i| (i % 251) as u8).collect();
        keep_tail(&mut tail, &long);
        assert_eq!(tail, &long[10..]);
        keep_tail(&mut tail, b"end");
        assert_eq!(tail.len(), OUTPUT_MAX);
        assert!(tail.ends_with(b"end"));
        assert_eq!(tail[0], long[13]);
    }

    #[test]
    fn bounds_apply_to_interval_and_timeout() {
        let p = Probe::new(
            Target::Tcp("x:1".into()),
            Duration::from_millis(10),
            Duration::ZERO,
        );
        assert_eq!((p.interval, p.timeout), (MIN_INTERVAL, DEFAULT_TIMEOUT));
    }
}
