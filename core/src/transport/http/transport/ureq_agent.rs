//! ureq's side of the transport: the agent (baton's connector chain) and the name resolver.

use ureq::Agent;

use super::super::stream::Dial;

pub(in crate::transport::http) fn new_agent(
    config: ureq::config::Config,
    resolver: Resolver,
) -> Agent {
    use ureq::unversioned::transport::{ConnectProxyConnector, Connector as _, RustlsConnector};
    // ureq's default chain (a CONNECT proxy when one is configured, TCP, rustls) with baton's
    // TCP connector, which makes fewer system calls per request (see `tcp`).
    let connector = ()
        .chain(ConnectProxyConnector::default())
        .chain(super::super::tcp::Tcp {
            dial: resolver.dial.clone(),
        })
        .chain(RustlsConnector::default());
    Agent::with_parts(config, connector, resolver)
}

/// Splits `host:port` (IPv6 in brackets); the port is `None` when absent.
pub(in crate::transport::http) fn split_host_port(s: &str) -> (&str, Option<&str>) {
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
pub(in crate::transport::http) struct Resolver {
    /// `(tls server name, real host)`: connect to the real host when the URL names the alias.
    pub(in crate::transport::http) alias: Option<(String, String)>,
    /// Where connections go: with a unix socket, nothing is resolved.
    pub(in crate::transport::http) dial: Dial,
}

impl Resolver {
    /// The host to connect to for a URL host.
    pub(in crate::transport::http) fn target_host<'a>(&'a self, host: &'a str) -> &'a str {
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
        if let Dial::Unix(_) = self.dial {
            // ureq wants an address to hand the connector, which dials the socket instead.
            let mut out = self.empty();
            out.push(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
            return Ok(out);
        }
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
