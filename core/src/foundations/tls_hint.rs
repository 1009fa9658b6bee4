//! What to do about a failed TLS connection: the rustls error behind it, read for what it
//! says (an unknown issuer, a name the certificate does not hold, a CA certificate used as a
//! server's, a server that wants a client certificate) and turned into the `CONSUL_*` variable
//! to set.

use std::path::PathBuf;

use crate::foundations::config::TlsSettings;

/// The TLS settings a connection used, kept for explaining its failures.
#[derive(Clone, Debug, Default)]
pub(crate) struct TlsContext {
    /// `CONSUL_CACERT` / `CONSUL_CAPATH`, as `NAME=value`.
    trusted: Vec<String>,
    /// `CONSUL_CLIENT_CERT`, when one is presented.
    client_cert: Option<PathBuf>,
    /// `CONSUL_TLS_SERVER_NAME`.
    server_name: Option<String>,
}

impl TlsContext {
    pub(crate) fn new(t: &TlsSettings) -> TlsContext {
        let mut trusted = Vec::new();
        if let Some(f) = &t.ca_file {
            trusted.push(format!(
                "{}={}",
                crate::foundations::config::ENV_CACERT,
                f.display()
            ));
        }
        if let Some(d) = &t.ca_path {
            trusted.push(format!(
                "{}={}",
                crate::foundations::config::ENV_CAPATH,
                d.display()
            ));
        }
        TlsContext {
            trusted,
            client_cert: t.cert_file.clone(),
            server_name: t.server_name.clone(),
        }
    }
}

/// The rustls error a failed read, write or handshake carries (as an I/O error of its own).
pub(crate) fn rustls_in_io(io: &std::io::Error) -> Option<&rustls::Error> {
    io.get_ref()?.downcast_ref::<rustls::Error>()
}

const MTLS_HINT: &str = "set CONSUL_CLIENT_CERT and CONSUL_CLIENT_KEY to a client certificate \
     signed by the agent's CA (`consul tls cert create -client` or `-cli`)";

/// The server hung up on a connection that carried our request: with TLS 1.3 a server that
/// requires a client certificate says so only after the handshake, and the request then meets
/// a closed connection (`Broken pipe`). What to do, when no client certificate was offered.
pub(crate) fn hint_closed(ctx: &TlsContext, io: &std::io::Error) -> Option<String> {
    use std::io::ErrorKind as K;
    let closed = matches!(
        io.kind(),
        K::BrokenPipe | K::ConnectionReset | K::UnexpectedEof
    );
    (closed && ctx.client_cert.is_none()).then(|| {
        format!(
            "the server closed the TLS connection; if it requires client certificates \
             (the agent's verify_incoming), {MTLS_HINT}"
        )
    })
}

/// What to do about a TLS failure rustls reports, if its cause is known.
pub(crate) fn hint_rustls(ctx: &TlsContext, err: &rustls::Error) -> Option<String> {
    use rustls::{AlertDescription as A, CertificateError as C, Error as R};
    match err {
        R::InvalidCertificate(C::UnknownIssuer) => Some(if ctx.trusted.is_empty() {
            "the server's certificate is signed by a CA this client does not trust: set \
             CONSUL_CACERT to the CA certificate's PEM file (the agent's ca_file), or \
             CONSUL_CAPATH to a directory of them"
                .to_string()
        } else {
            format!(
                "the server's certificate is signed by none of the CAs in {}: point \
                 CONSUL_CACERT (or CONSUL_CAPATH) at the CA that signed the agent's cert_file",
                ctx.trusted.join(" and ")
            )
        }),
        R::InvalidCertificate(C::NotValidForName) => Some(name_hint(ctx, None, &[])),
        R::InvalidCertificate(C::NotValidForNameContext {
            expected,
            presented,
        }) => Some(name_hint(ctx, Some(&expected.to_str()), presented)),
        R::InvalidCertificate(C::Other(other))
            if matches!(
                other.0.downcast_ref::<webpki::Error>(),
                Some(webpki::Error::CaUsedAsEndEntity)
            ) =>
        {
            Some(
                "the server presents a CA certificate (CA:TRUE, as a quick `openssl req -x509` \
                 makes) as its own, which TLS refuses even when it is trusted: give the agent a \
                 certificate signed by a CA (`consul tls ca create`, then `consul tls cert \
                 create -server`) and set CONSUL_CACERT to that CA"
                    .to_string(),
            )
        }
        R::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
            Some("the server's certificate has expired: renew the agent's cert_file".to_string())
        }
        R::AlertReceived(A::CertificateRequired) => Some(match &ctx.client_cert {
            None => format!("the server requires a client certificate (mutual TLS): {MTLS_HINT}"),
            Some(c) => format!(
                "the server did not get the client certificate in {} (CONSUL_CLIENT_CERT)",
                c.display()
            ),
        }),
        R::AlertReceived(
            A::BadCertificate | A::UnknownCA | A::UnsupportedCertificate | A::HandshakeFailure,
        ) => Some(match &ctx.client_cert {
            None => format!(
                "the server refused the TLS handshake; if it requires client certificates \
                 (the agent's verify_incoming), {MTLS_HINT}"
            ),
            Some(c) => format!(
                "the server refused the client certificate in {} (CONSUL_CLIENT_CERT): it must \
                 be signed by a CA in the agent's ca_file and allow client authentication",
                c.display()
            ),
        }),
        _ => None,
    }
}

fn name_hint(ctx: &TlsContext, expected: Option<&str>, presented: &[String]) -> String {
    // rustls shows them as `DnsName("a.b")` / `IpAddress(127.0.0.1)`: the names alone.
    let bare: Vec<&str> = presented
        .iter()
        .map(|n| {
            let inner = n
                .split_once('(')
                .and_then(|(_, rest)| rest.strip_suffix(')'))
                .unwrap_or(n);
            inner.trim_matches('"')
        })
        .collect();
    let names = if bare.is_empty() {
        String::new()
    } else {
        format!(" (it holds {})", bare.join(", "))
    };
    let expected = expected.map(|n| format!(" {n:?}")).unwrap_or_default();
    match &ctx.server_name {
        Some(sn) => format!(
            "the server's certificate is not valid for the name{expected}{names}, which \
             CONSUL_TLS_SERVER_NAME={sn} asks for: set CONSUL_TLS_SERVER_NAME to a name the \
             certificate holds"
        ),
        None => format!(
            "the server's certificate is not valid for the name{expected}{names} in the \
             address: set CONSUL_TLS_SERVER_NAME to a name the certificate holds (for a Consul \
             agent, server.<datacenter>.<domain>, e.g. server.dc1.consul), or connect by that \
             name"
        ),
    }
}
