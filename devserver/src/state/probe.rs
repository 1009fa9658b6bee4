//! What the agent's HTTP and TCP health checks do once (`agent/checks/check.go` `CheckHTTP`,
//! `CheckTCP`): [`Probe::run`] connects, asks and maps the answer to a status and Consul's
//! output text. The schedule that runs them is the server's check runner
//! (`server/checks.rs`).
//!
//! An HTTP check is `passing` on a 2xx answer, `warning` on 429, `critical` on any other
//! answer or none; its output is `HTTP <method> <url>: <status> Output: <body>` (the body's
//! first 4 KiB), or the error. It sends the check's `Method` (default GET), `Header` and
//! `Body`, and `User-Agent: Consul Health Check` and `Accept: text/plain, text/*, */*` unless
//! the check's headers set them; `https://` URLs are verified against the server's
//! `--tls-ca` unless `TLSSkipVerify`. A TCP check is `passing` when a connection opens
//! (`TCP connect <addr>: Success`). Every probe is bounded by the check's `Timeout` (10 s
//! when it has none); intervals are at least 1 s (`checks.MinInterval`).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::CheckStatus;

/// Consul's `checks.MinInterval`: shorter intervals are raised to it.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The timeout of a probe whose check sets none.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of an HTTP answer's body goes into the output (Consul's default
/// `OutputMaxSize`, 4 KiB).
const OUTPUT_MAX: usize = 4 * 1024;
/// How much of an answer is read at most (headers and the part of the body kept).
const READ_MAX: usize = 64 * 1024;

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
        let attempt = async {
            match &self.target {
                Target::Tcp(addr) => match TcpStream::connect(addr.as_str()).await {
                    Ok(_) => (CheckStatus::Passing, format!("TCP connect {addr}: Success")),
                    Err(e) => (CheckStatus::Critical, format!("dial tcp {addr}: {e}")),
                },
                Target::Http { .. } => self.http(ca_file).await,
            }
        };
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(r) => r,
            Err(_) => {
                let what = match &self.target {
                    Target::Tcp(addr) => format!("dial tcp {addr}"),
                    Target::Http { url, method, .. } => format!("{method} {url:?}"),
                };
                (
                    CheckStatus::Critical,
                    format!(
                        "{what}: timed out after {} (Timeout)",
                        crate::godur::format_go_duration(
                            self.timeout.as_nanos().min(i64::MAX as u128) as i64
                        )
                    ),
                )
            }
        }
    }

    async fn http(&self, ca_file: Option<&std::path::Path>) -> (CheckStatus, String) {
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
        let answer = loop {
            let a = match fetch(&at, &how, headers, &payload, *tls_skip_verify, ca_file).await {
                Ok(a) => a,
                Err(e) => return fail(e),
            };
            // Go's http.Client follows up to 10 redirects (Consul's DisableRedirects stops it).
            let next = match (&a.location, a.code, *disable_redirects) {
                (Some(loc), 301 | 302 | 303 | 307 | 308, false) => Url::parse(&at)
                    .map(|u| u.resolve(loc))
                    .map_err(|e| format!("bad redirect from {at:?}: {e}")),
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
            if matches!(a.code, 301..=303) && how != "HEAD" {
                how = "GET".into();
                payload.clear();
            }
            at = next;
        };
        let mut out = answer.body;
        out.truncate(OUTPUT_MAX);
        let output = format!(
            "HTTP {method} {url}: {} {} Output: {}",
            answer.code,
            answer.reason,
            String::from_utf8_lossy(&out)
        );
        let status = match answer.code {
            200..=299 => CheckStatus::Passing,
            429 => CheckStatus::Warning,
            _ => CheckStatus::Critical,
        };
        (status, output)
    }
}

/// How many redirects an HTTP check follows (Go's `http.Client` default).
const MAX_REDIRECTS: usize = 10;

/// One HTTP answer.
struct Answer {
    code: u16,
    reason: String,
    /// `Location`, when the answer has one.
    location: Option<String>,
    body: Vec<u8>,
}

/// One request on a connection of its own (TLS for `https://`).
async fn fetch(
    url: &str,
    method: &str,
    headers: &[(String, String)],
    body: &str,
    tls_skip_verify: bool,
    ca_file: Option<&std::path::Path>,
) -> Result<Answer, String> {
    let parsed = Url::parse(url)?;
    let request = request_bytes(method, &parsed, headers, body);
    let tcp = TcpStream::connect((parsed.host.as_str(), parsed.port))
        .await
        .map_err(|e| format!("dial tcp {}:{}: {e}", parsed.host, parsed.port))?;
    let raw = if parsed.https {
        let config = tls_client_config(tls_skip_verify, ca_file)?;
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from(parsed.host.clone())
            .map_err(|e| format!("bad TLS server name {:?}: {e}", parsed.host))?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("tls: {e}"))?;
        exchange(tls, &request).await
    } else {
        exchange(tcp, &request).await
    };
    parse_response(&raw.map_err(|e| e.to_string())?)
}

/// The parts of an `http://` or `https://` URL a probe needs.
struct Url {
    https: bool,
    host: String,
    port: u16,
    /// The path and query (`/` when empty).
    target: String,
    /// `host[:port]` as the URL has it, for the `Host` header.
    authority: String,
}

impl Url {
    fn parse(url: &str) -> Result<Url, String> {
        let (https, rest) = if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else {
            return Err("unsupported protocol scheme (want http:// or https://)".into());
        };
        let (authority, target) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        let default_port = if https { 443 } else { 80 };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or("bad IPv6 host in URL")?;
            let port = match after.strip_prefix(':') {
                Some(p) => p.parse().map_err(|_| format!("bad port {p:?} in URL"))?,
                None => default_port,
            };
            (h.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    p.parse().map_err(|_| format!("bad port {p:?} in URL"))?,
                ),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err("no host in URL".into());
        }
        Ok(Url {
            https,
            host,
            port,
            target: target.split('#').next().unwrap_or("/").to_string(),
            authority: authority.to_string(),
        })
    }
}

impl Url {
    /// Where a `Location` from this URL points: absolute, or a path on the same server
    /// (relative ones against this URL's directory).
    fn resolve(&self, location: &str) -> String {
        if location.starts_with("http://") || location.starts_with("https://") {
            return location.to_string();
        }
        let scheme = if self.https { "https" } else { "http" };
        if let Some(rest) = location.strip_prefix("//") {
            return format!("{scheme}://{rest}");
        }
        if location.starts_with('/') {
            return format!("{scheme}://{}{location}", self.authority);
        }
        let path = self.target.split('?').next().unwrap_or("/");
        let dir = &path[..=path.rfind('/').unwrap_or(0)];
        format!("{scheme}://{}{dir}{location}", self.authority)
    }
}

/// The request as an agent sends it: the check's headers, then `User-Agent` and `Accept`
/// unless it set them; one request per connection.
fn request_bytes(method: &str, url: &Url, headers: &[(String, String)], body: &str) -> Vec<u8> {
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut head = format!("{method} {} HTTP/1.1\r\n", url.target);
    if !has("Host") {
        head.push_str(&format!("Host: {}\r\n", url.authority));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !has("User-Agent") {
        head.push_str("User-Agent: Consul Health Check\r\n");
    }
    if !has("Accept") {
        head.push_str("Accept: text/plain, text/*, */*\r\n");
    }
    if !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// Sends the request and reads the answer until the server closes the connection or
/// [`READ_MAX`] bytes have come (enough for the headers and the part of the body kept).
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    request: &[u8],
) -> std::io::Result<Vec<u8>> {
    s.write_all(request).await?;
    s.flush().await?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if raw.len() >= READ_MAX || complete(&raw) {
                    break;
                }
            }
            // A TLS peer that closes without close_notify: what came is the answer.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => break,
            Err(e) => return Err(e),
        }
    }
    Ok(raw)
}

/// Whether `raw` holds a whole answer with a `Content-Length` (a server that keeps the
/// connection open despite `Connection: close` need not be waited out).
fn complete(raw: &[u8]) -> bool {
    let Some(end) = find(raw, b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&raw[..end]);
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .is_some_and(|n| raw.len() >= end + 4 + n)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The status code, its reason phrase, `Location` and the body (de-chunked) of an HTTP/1.x
/// answer.
fn parse_response(raw: &[u8]) -> Result<Answer, String> {
    if raw.is_empty() {
        return Err("EOF (the server closed the connection without answering)".into());
    }
    let end = find(raw, b"\r\n\r\n").ok_or("malformed HTTP response (no end of headers)")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/") {
        return Err(format!("malformed HTTP response {status_line:?}"));
    }
    let code: u16 = parts
        .next()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("malformed HTTP status code in {status_line:?}"))?;
    let reason = parts.next().unwrap_or("").to_string();
    let (mut chunked, mut location) = (false, None);
    for (k, v) in lines.filter_map(|l| l.split_once(':')) {
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("transfer-encoding") {
            chunked |= v.to_ascii_lowercase().contains("chunked");
        } else if k.eq_ignore_ascii_case("location") {
            location = Some(v.to_string());
        }
    }
    let body = &raw[end + 4..];
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    Ok(Answer {
        code,
        reason,
        location,
        body,
    })
}

/// The data of a chunked body (as much of it as arrived).
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = find(b, b"\r\n") {
        let size_text = String::from_utf8_lossy(&b[..eol]);
        let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
        else {
            break;
        };
        if size == 0 {
            break;
        }
        let data = &b[eol + 2..];
        let take = size.min(data.len());
        out.extend_from_slice(&data[..take]);
        if take < size || data.len() < size + 2 {
            break;
        }
        b = &data[size + 2..];
    }
    out
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
    fn urls_split_into_host_port_and_target() {
        let u = Url::parse("http://127.0.0.1:8080/health?x=1").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.target.as_str()),
            ("127.0.0.1", 8080, "/health?x=1")
        );
        let u = Url::parse("https://[::1]/").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.https), ("::1", 443, true));
        let u = Url::parse("http://example.com?q").unwrap();
        assert_eq!((u.port, u.target.as_str()), (80, "/?q"));
        assert!(Url::parse("ftp://x/").is_err());
        let u = Url::parse("http://h:1/a/b?q").unwrap();
        assert_eq!(u.resolve("/ui/"), "http://h:1/ui/");
        assert_eq!(u.resolve("c"), "http://h:1/a/c");
        assert_eq!(u.resolve("https://o/x"), "https://o/x");
    }

    #[test]
    fn answers_parse_with_length_or_chunks() {
        let a = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").unwrap();
        assert_eq!(
            (a.code, a.reason.as_str(), a.body.as_slice()),
            (200, "OK", &b"ok"[..])
        );
        let raw = b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let a = parse_response(raw).unwrap();
        assert_eq!((a.code, a.body.as_slice()), (503, &b"abcde"[..]));
        let a = parse_response(b"HTTP/1.1 301 Moved\r\nlocation: /ui/\r\n\r\n").unwrap();
        assert_eq!(a.location.as_deref(), Some("/ui/"));
        assert!(parse_response(b"").is_err());
        assert!(complete(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
        assert!(!complete(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok"));
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
