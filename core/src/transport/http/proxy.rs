//! An HTTP CONNECT proxy between the client and its agent: the tunnel a connection of the
//! engine is opened through, when `HTTPS_PROXY`, `HTTP_PROXY` or `ALL_PROXY` names one and
//! `NO_PROXY` does not cover the agent.
//!
//! The variables are read by ureq's `Proxy` (the first one set, for every scheme, as ureq
//! itself reads them, so a client behaves as before the engine). The tunnel is one exchange of
//! the engine's own: a `CONNECT host:port` rendered and its answer framed by `ureq-proto`,
//! after which the connection carries the client's bytes (TLS to the agent on top, for HTTPS)
//! like any other. So behind a proxy a client keeps every path it has without one: the
//! one-request lock calls, the event loops' warm calls, and one poller thread for its keys.

use std::io;
use std::time::Instant;

use base64::Engine as _;
use ureq_proto::http;

use super::exchange::{drive_here, Exchange, LoopConn, Outgoing, Progress};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::transport::net::Stream;

/// The proxy a client's connections tunnel through.
#[derive(Debug, Clone)]
pub(crate) struct Proxy {
    host: String,
    port: u16,
    /// `Proxy-Authorization`, from the proxy URL's user and password.
    auth: Option<http::HeaderValue>,
    /// The proxy as messages name it (no credentials).
    pub(crate) shown: String,
}

impl Proxy {
    /// The proxy the environment names for requests to `base`, if any: `None` when no
    /// variable names one or `NO_PROXY` covers the agent. Only `http://` proxies are spoken
    /// to (a SOCKS or TLS proxy is refused, naming it).
    pub(crate) fn from_env(base: &str) -> Result<Option<Proxy>> {
        let Some(p) = ureq::Proxy::try_from_env() else {
            return Ok(None);
        };
        let uri: http::Uri = base
            .parse()
            .map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("{base}: {e}")))?;
        if p.is_no_proxy(&uri) {
            return Ok(None);
        }
        let shown = format!("http://{}:{}", p.host(), p.port());
        if p.protocol() != ureq::ProxyProtocol::Http {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the proxy in HTTPS_PROXY / HTTP_PROXY / ALL_PROXY is a {:?} proxy, and \
                     baton tunnels only through HTTP CONNECT proxies (http://host:port): name \
                     one, or list the agent in NO_PROXY",
                    p.protocol()
                ),
            ));
        }
        let auth = match (p.username(), p.password()) {
            (Some(user), password) => {
                let raw = format!("{user}:{}", password.unwrap_or_default());
                let value = format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(raw)
                );
                let mut v = http::HeaderValue::from_str(&value).map_err(|_| {
                    Error::new(
                        ErrorKind::InvalidArgument,
                        "the proxy's user or password holds a character a header cannot carry",
                    )
                })?;
                v.set_sensitive(true);
                Some(v)
            }
            (None, _) => None,
        };
        Ok(Some(Proxy {
            host: p.host().to_string(),
            port: p.port(),
            auth,
            shown,
        }))
    }

    /// A connection to `target` (`host:port`) through the proxy: connected to the proxy,
    /// `CONNECT` asked and granted (blocking, until `stop_at` at most), handed back blocking.
    pub(crate) fn tunnel(
        &self,
        target: &str,
        stop_at: Instant,
        connect: impl FnOnce(&str, u16, Instant) -> io::Result<Stream>,
    ) -> io::Result<Stream> {
        let started = Instant::now();
        let stream = connect(&self.host, self.port, stop_at).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("connecting to the proxy {}: {e}", self.shown),
            )
        })?;
        let out = self.connect_request(target)?;
        let mut ex = Exchange::new(LoopConn::new(stream)?, out);
        match drive_here(&mut ex, stop_at, &[]) {
            Some(Progress::Answered(resp, Some(conn))) if resp.status == 200 => conn.into_stream(),
            Some(Progress::Answered(resp, _)) => Err(io::Error::other(format!(
                "the proxy {} answered {} to CONNECT {target}",
                self.shown, resp.status
            ))),
            Some(Progress::Failed(e, _)) => Err(io::Error::new(
                e.kind(),
                format!("the proxy {}: {e}", self.shown),
            )),
            Some(Progress::Pending(_)) | None => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the proxy {} did not open a tunnel within {:?}",
                    self.shown,
                    started.elapsed()
                ),
            )),
        }
    }

    /// `CONNECT target`, with the proxy's credentials.
    fn connect_request(&self, target: &str) -> io::Result<Outgoing> {
        let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
        let mut request = http::Request::new(());
        *request.method_mut() = http::Method::CONNECT;
        *request.uri_mut() = http::Uri::try_from(target).map_err(|e| invalid(e.to_string()))?;
        let headers = request.headers_mut();
        headers.insert(
            http::header::HOST,
            http::HeaderValue::from_str(target).map_err(|e| invalid(e.to_string()))?,
        );
        headers.insert(
            http::header::USER_AGENT,
            http::HeaderValue::from_static(concat!("baton/", env!("CARGO_PKG_VERSION"))),
        );
        if let Some(auth) = &self.auth {
            headers.insert(http::header::PROXY_AUTHORIZATION, auth.clone());
        }
        Outgoing::new(request, &[]).map_err(invalid)
    }
}
